//! Whatever arrives, the broker keeps serving everyone else, keeps its memory bounded and
//! loses no acknowledged record. While a well-behaved client produces and reads back its
//! records, the broker also holds 2,000 idle connections and serves connections that send
//! random bytes, frames announcing more than `socket.request.max.bytes`, frames announcing a
//! large size and then trickling it, and requests whose arrays claim 0x7fffffff entries.
//! Afterwards: the broker still answers, every record of the real client is there, and its
//! resident memory stayed under `RSS_BOUND`.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ringbroker::protocol::messages::{ApiKey, ProduceResponse};
use ringbroker::protocol::Decodable;
use support::client::{batch, now_ms, produce_request, value, Client, PRODUCE_V};
use support::Broker;

const IDLE: usize = 2_000;
/// Resident memory the broker may reach under all of this: 2,000 idle connections hold one
/// small read buffer each (8 KiB), trickled frames hold what they sent, and hostile arrays
/// are refused before anything is allocated for them. Without those bounds the 16 trickled
/// 64 MiB frames alone would take 1 GiB.
const RSS_BOUND_KIB: u64 = 256 * 1024;
const TOPIC: &str = "real";
const BATCHES: usize = 300;

/// Lets this test process hold thousands of sockets (the soft limit is often 1024).
fn raise_nofile() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).expect("getrlimit");
    let want = (IDLE as u64 + 512).min(hard);
    if soft < want {
        setrlimit(Resource::RLIMIT_NOFILE, want, hard).expect("raise RLIMIT_NOFILE");
    }
    assert!(want >= IDLE as u64 + 256, "RLIMIT_NOFILE hard limit {hard} is too low for this test");
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("broker status");
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS");
    line.split_whitespace().nth(1).expect("a number").parse().expect("kB")
}

/// Random bytes from xorshift, for garbage connections.
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// A request header v1 (api key, version, correlation id, null client id) and `body`, framed.
fn framed(api: i16, version: i16, body: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&((10 + body.len()) as i32).to_be_bytes());
    f.extend_from_slice(&api.to_be_bytes());
    f.extend_from_slice(&version.to_be_bytes());
    f.extend_from_slice(&7i32.to_be_bytes());
    f.extend_from_slice(&(-1i16).to_be_bytes());
    f.extend_from_slice(body);
    f
}

/// One hostile connection of kind `i % 4`; errors are expected (the broker closes them).
fn hostile(addr: SocketAddr, i: u64, stop: &AtomicBool) {
    let Ok(mut s) = TcpStream::connect(addr) else { return };
    let _ = s.set_write_timeout(Some(Duration::from_secs(5)));
    match i % 4 {
        // Random bytes, in pieces.
        0 => {
            for k in 0..20 {
                if s.write_all(&noise(i * 100 + k, 4096)).is_err() {
                    return;
                }
            }
        }
        // A size prefix past socket.request.max.bytes, then more.
        1 => {
            let _ = s.write_all(&0x7fff_fff0i32.to_be_bytes());
            let _ = s.write_all(&noise(i, 65536));
        }
        // Announces 64 MiB (under the limit) and trickles it while the test runs.
        2 => {
            let _ = s.write_all(&(64i32 << 20).to_be_bytes());
            let chunk = noise(i, 16 * 1024);
            while !stop.load(Ordering::Relaxed) {
                if s.write_all(&chunk).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        // Metadata v1 with a topic array of 0x7fffffff names, and Produce v3 with as many topics.
        _ => {
            let _ = s.write_all(&framed(3, 1, &0x7fff_ffffi32.to_be_bytes()));
            let mut produce = Vec::new();
            produce.extend_from_slice(&(-1i16).to_be_bytes()); // transactional id
            produce.extend_from_slice(&(-1i16).to_be_bytes()); // acks
            produce.extend_from_slice(&30_000i32.to_be_bytes());
            produce.extend_from_slice(&0x7fff_ffffi32.to_be_bytes());
            let _ = s.write_all(&framed(0, 3, &produce));
        }
    }
    // Hold the connection until the broker closes it or the test ends.
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn hostile_and_idle_connections_leave_a_real_client_whole_and_memory_bounded() {
    raise_nofile();
    let b = Broker::start_args(&["--flush", "os", "--default-partitions", "2"]);
    let pid = b.pid().expect("running broker");
    Client::connect(b.addr).create_topic(TOPIC, 2, &[]);

    let idle: Vec<TcpStream> =
        (0..IDLE).map(|i| TcpStream::connect(b.addr).unwrap_or_else(|e| panic!("idle connection {i}: {e}"))).collect();

    let stop = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(AtomicU64::new(0));
    let watcher = {
        let (stop, peak) = (stop.clone(), peak.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                peak.fetch_max(rss_kib(pid), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let attackers: Vec<_> = (0..64u64)
        .map(|i| {
            let (addr, stop) = (b.addr, stop.clone());
            std::thread::spawn(move || hostile(addr, i, &stop))
        })
        .collect();

    // The real client: batches of 10 records with acks=all, each acknowledged at an offset,
    // for at least 3 s so the attacks run alongside.
    let mut c = Client::connect(b.addr);
    let mut acked = Vec::new();
    let started = std::time::Instant::now();
    for i in (0..).take_while(|&i| i < BATCHES || started.elapsed() < Duration::from_secs(3)) {
        let partition = (i % 2) as i32;
        let values: Vec<Vec<u8>> = (0..10).map(|k| value("real", i * 10 + k, 300)).collect();
        let offset = c.produce_ok(TOPIC, partition, batch(now_ms(), &values));
        acked.push((partition, offset, values));
    }
    stop.store(true, Ordering::Relaxed);
    for a in attackers {
        a.join().expect("attacker thread");
    }
    watcher.join().expect("memory watcher");

    // Still serving: a fresh client reads every acknowledged record back at its offset.
    let mut r = Client::connect(b.addr);
    for partition in 0..2 {
        let log = r.fetch_all(TOPIC, partition, 0);
        let want: Vec<(i64, Vec<u8>)> = acked
            .iter()
            .filter(|(p, _, _)| *p == partition)
            .flat_map(|(_, base, values)| values.iter().enumerate().map(move |(k, v)| (base + k as i64, v.clone())))
            .collect();
        let got: Vec<(i64, Vec<u8>)> = log.into_iter().map(|rec| (rec.offset, rec.value.unwrap_or_default())).collect();
        assert_eq!(got, want, "partition {partition}: every acknowledged record, in order, nothing else");
    }
    assert_eq!(r.api_versions().error_code, 0, "the broker still answers");
    drop(idle);
    let peak = peak.load(Ordering::Relaxed).max(rss_kib(pid));
    println!("broker peak RSS {} MiB with {IDLE} idle and 64 hostile connections", peak / 1024);
    assert!(peak < RSS_BOUND_KIB, "broker RSS reached {} MiB (bound {} MiB)", peak / 1024, RSS_BOUND_KIB / 1024);
}

/// The request-memory budget holds: with room for about three 900 KiB requests broker-wide,
/// eight clients that each send most of such a request at once do not all get read; the
/// broker stops reading some (counted in ringbroker_request_memory_waits_total) until bytes
/// are given back, and every request is still answered once the clients finish sending.
#[test]
fn a_spent_memory_budget_stops_reading_and_every_request_is_answered_later() {
    let b = Broker::start_args(&[
        "--flush",
        "os",
        "--max-request-bytes",
        "1048576",
        "--message-max-bytes",
        "1000000",
        "--queued-max-request-bytes",
        "3145728",
        "--connection-max-request-bytes",
        "2200000",
    ]);
    Client::connect(b.addr).create_topic("big", 1, &[]);
    let frames: Vec<Vec<u8>> = (0..8)
        .map(|i| {
            let values: Vec<Vec<u8>> = (0..9).map(|k| value(&format!("big{i}"), k, 100 * 1024)).collect();
            Client::frame(ApiKey::Produce, PRODUCE_V, i, &produce_request("big", &[(0, batch(now_ms(), &values))], 1))
        })
        .collect();
    let mut conns: Vec<Client> = (0..8).map(|_| Client::connect(b.addr)).collect();
    for (c, f) in conns.iter_mut().zip(&frames) {
        c.write_raw(&f[..f.len() * 3 / 4]).expect("the first three quarters");
    }
    // Let the broker read what its budget allows.
    std::thread::sleep(Duration::from_millis(500));
    for (c, f) in conns.iter_mut().zip(&frames) {
        c.write_raw(&f[f.len() * 3 / 4..]).expect("the rest");
    }
    for (i, c) in conns.iter_mut().enumerate() {
        let frame = c.read_frame().expect("read").unwrap_or_else(|| panic!("connection {i} closed unanswered"));
        let (id, mut body) =
            ringbroker::client::response_body(ApiKey::Produce, PRODUCE_V, frame).expect("a response header");
        assert_eq!(id, i as i32, "correlation id");
        let resp = ProduceResponse::decode(&mut body, PRODUCE_V).expect("a Produce response");
        assert_eq!(resp.responses[0].partition_responses[0].error_code, 0, "request {i} appended");
    }
    let text = support::scrape(b.admin_addr.expect("admin listener"));
    let waits = support::metric_sum(&text, "ringbroker_request_memory_waits_total", &[]);
    assert!(waits >= 1.0, "8 x 900 KiB against a 3 MiB budget made no connection wait:\n{text}");
}
