//! Connection limits on the real broker: `max_connections` (broker-wide, across shards),
//! `max_connections_per_ip`, and `connections_max_idle_ms` (silent and slow-loris clients
//! are closed, a client sending requests is not), with the metrics that count them.
//!
//! Timing: only generous upper bounds ("closed within 10 s") and loose lower ones ("not
//! closed before half the idle time"); nothing asserts that something was fast.

use std::io::{self, Read};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ringbroker::protocol::messages::ApiKey;
use support::client::{
    api_versions_request, batch, fetch_request, now_ms, wait_until, Client, API_VERSIONS_V, FETCH_V,
};
use support::Broker;

/// How long a refused or idle connection may take to be closed.
const CLOSE_LIMIT: Duration = Duration::from_secs(10);

/// Sends ApiVersions and reads a response: `false` when the broker closed the connection.
fn answers(c: &mut Client) -> bool {
    c.stream().set_read_timeout(Some(CLOSE_LIMIT)).expect("read timeout");
    let frame = Client::frame(ApiKey::ApiVersions, API_VERSIONS_V, 1, &api_versions_request());
    if c.write_raw(&frame).is_err() {
        return false;
    }
    match c.read_frame() {
        Ok(Some(_)) => true,
        Ok(None) => false,
        Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
            panic!("the broker neither answered nor closed the connection within {CLOSE_LIMIT:?}")
        }
        Err(_) => false, // reset
    }
}

/// A new connection the broker serves, or `None` if it closed it.
fn connect_served(addr: SocketAddr) -> Option<Client> {
    let mut c = Client::connect(addr);
    answers(&mut c).then_some(c)
}

/// Retries until a new connection is served (the broker frees a closed connection's place
/// once it has read the close).
fn connect_eventually(addr: SocketAddr) -> Client {
    let mut got = None;
    assert!(
        wait_until(CLOSE_LIMIT, || {
            got = connect_served(addr);
            got.is_some()
        }),
        "no new connection was served within {CLOSE_LIMIT:?} after others closed"
    );
    got.expect("served")
}

/// Sum over shards of `name{...reason="<reason>"}` on the broker's metrics page.
fn metric_by_reason(b: &Broker, name: &str, reason: &str) -> f64 {
    let page = support::scrape(b.admin_addr.expect("test brokers run the admin listener"));
    support::metric_sum(&page, name, &[&format!("reason=\"{reason}\"")])
}

#[test]
fn max_connections_per_ip_refuses_past_the_cap_and_frees_places_on_close() {
    let b = Broker::start_args(&["--max-connections-per-ip", "5"]);
    let mut held: Vec<Client> =
        (0..5).map(|i| connect_served(b.addr).unwrap_or_else(|| panic!("connection {i} of 5 refused"))).collect();
    let mut sixth = Client::connect(b.addr);
    assert!(sixth.wait_closed(CLOSE_LIMIT), "the 6th connection from 127.0.0.1 was not closed");
    for (i, c) in held.iter_mut().enumerate() {
        assert!(answers(c), "connection {i} stopped answering after the 6th was refused");
    }

    held.truncate(3);
    let _new = [connect_eventually(b.addr), connect_eventually(b.addr)];
    assert!(connect_served(b.addr).is_none(), "a connection past the cap was served after 2 closed and 2 opened");
    for c in &mut held {
        assert!(answers(c));
    }

    let refused = metric_by_reason(&b, "ringbroker_connections_refused_total", "max_connections_per_ip");
    assert!(refused >= 2.0, "refused per IP: {refused}");
    assert_eq!(metric_by_reason(&b, "ringbroker_connections_refused_total", "max_connections"), 0.0);
}

#[test]
fn max_connections_holds_across_shards() {
    // The kernel spreads connections over every shard's listener; the cap is the broker's.
    let b = Broker::start_args(&["--max-connections", "3"]);
    let mut held: Vec<Client> =
        (0..3).map(|i| connect_served(b.addr).unwrap_or_else(|| panic!("connection {i} of 3 refused"))).collect();
    // Several tries, so that with more than one shard some land on each.
    for attempt in 0..4 {
        let mut extra = Client::connect(b.addr);
        assert!(extra.wait_closed(CLOSE_LIMIT), "connection {} past max_connections=3 was not closed", 4 + attempt);
    }
    for (i, c) in held.iter_mut().enumerate() {
        assert!(answers(c), "connection {i} stopped answering after others were refused");
    }

    held.remove(0);
    held.push(connect_eventually(b.addr));
    assert!(connect_served(b.addr).is_none(), "a 4th connection was served after one closed and one opened");
    for c in &mut held {
        assert!(answers(c));
    }

    let refused = metric_by_reason(&b, "ringbroker_connections_refused_total", "max_connections");
    assert!(refused >= 5.0, "refused by max_connections: {refused}");
}

#[test]
fn idle_and_slow_loris_connections_are_closed_and_busy_ones_are_not() {
    let b = Broker::start_args(&["--connections-max-idle-ms", "1000"]);
    let addr = b.addr;

    let idle = std::thread::spawn(move || {
        let mut c = connect_served(addr).expect("served");
        let start = Instant::now();
        assert!(c.wait_closed(CLOSE_LIMIT), "an idle connection was still open after {CLOSE_LIMIT:?}");
        start.elapsed()
    });

    // One byte every 300 ms of a frame claiming 100 bytes: bytes arrive, a request never does.
    let slow_loris = std::thread::spawn(move || {
        let mut c = Client::connect(addr);
        let mut frame = 100i32.to_be_bytes().to_vec();
        frame.extend_from_slice(&[0u8; 100]);
        c.stream().set_read_timeout(Some(Duration::from_millis(300))).expect("read timeout");
        let start = Instant::now();
        let mut buf = [0u8; 64];
        for byte in frame.chunks(1) {
            if c.write_raw(byte).is_err() {
                return Some(start.elapsed());
            }
            match c.stream().read(&mut buf) {
                Ok(0) => return Some(start.elapsed()),
                Ok(n) => panic!("the broker answered {n} bytes to an unfinished frame"),
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
                Err(_) => return Some(start.elapsed()),
            }
        }
        None
    });

    let busy = std::thread::spawn(move || {
        let mut c = connect_served(addr).expect("served");
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(3) {
            std::thread::sleep(Duration::from_millis(300));
            assert!(answers(&mut c), "a connection sending a request every 300 ms was closed");
        }
    });

    let idle_took = idle.join().expect("idle client");
    assert!(idle_took >= Duration::from_millis(500), "an idle connection was closed after only {idle_took:?}");
    let loris_took = slow_loris.join().expect("slow-loris client");
    let loris_took = loris_took.expect("a connection trickling one byte per 300 ms (30 s of frame) was never closed");
    assert!(loris_took >= Duration::from_millis(500), "the slow-loris connection was closed after only {loris_took:?}");
    busy.join().expect("busy client");

    assert!(
        wait_until(CLOSE_LIMIT, || metric_by_reason(&b, "ringbroker_connections_closed_total", "idle") >= 2.0),
        "connections closed as idle: {}",
        metric_by_reason(&b, "ringbroker_connections_closed_total", "idle")
    );
}

/// max_connection_creation_rate at 20/s: 60 connections opened at once are all served, but
/// not all at once. About one second's worth passes at once; the rest wait their turn, so
/// serving all 60 takes about two seconds more. Only bounds that a slow machine cannot break
/// are checked: at most 20 + 20 × elapsed + slack served by any moment, and all in the end.
#[test]
fn connections_faster_than_the_creation_rate_wait_their_turn() {
    let b = Broker::start_args(&["--max-connection-creation-rate", "20"]);
    let started = Instant::now();
    let opened: Vec<std::thread::JoinHandle<Duration>> = (0..60)
        .map(|_| {
            let addr = b.addr;
            std::thread::spawn(move || {
                let mut c = Client::connect(addr);
                assert!(answers(&mut c), "a connection over the creation rate must wait, not be closed");
                started.elapsed()
            })
        })
        .collect();
    let mut served: Vec<Duration> = opened.into_iter().map(|t| t.join().expect("client thread")).collect();
    served.sort();
    for (k, at) in served.iter().enumerate() {
        let allowed = 21.0 + 20.0 * at.as_secs_f64() + 5.0;
        assert!((k + 1) as f64 <= allowed, "{} connections served within {at:?} at 20/s", k + 1);
    }
    let page = support::scrape(b.admin_addr.expect("admin listener"));
    let throttled = support::metric_sum(&page, "ringbroker_connections_creation_throttled_total", &[]);
    assert!(throttled >= 30.0, "60 connections at once, 21 let through: {throttled} waited");
}

/// A client that keeps asking for data and never reads the answers stalls the broker's writes
/// to it; with requests in flight the connection is not idle by the request clock, but a
/// response that cannot be written for connections_max_idle_ms closes it all the same.
#[test]
fn a_client_that_never_reads_its_responses_is_closed_after_the_idle_time() {
    let b = Broker::start_args(&["--flush", "os", "--connections-max-idle-ms", "1000"]);
    let mut c = Client::connect(b.addr);
    c.create_topic("unread", 1, &[]);
    for _ in 0..8 {
        c.produce_ok("unread", 0, batch(now_ms(), &[vec![b'x'; 1_000_000]]));
    }
    let mut greedy = Client::connect(b.addr);
    for i in 0..40 {
        let frame = Client::frame(ApiKey::Fetch, FETCH_V, i, &fetch_request("unread", 0, 0, 8 << 20));
        greedy.write_raw(&frame).expect("send a fetch");
    }
    assert!(
        wait_until(Duration::from_secs(20), || metric_by_reason(&b, "ringbroker_connections_closed_total", "idle")
            >= 1.0),
        "a connection whose responses could not be written for 1 s was not closed"
    );
    assert!(connect_served(b.addr).is_some(), "the broker keeps serving clients that read");
}

#[test]
fn a_bad_override_stops_the_start_naming_the_setting() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ringbroker"))
        .args(["--listen", "127.0.0.1:0", "--admin-listen", "off", "--data-dir"])
        .arg(dir.path())
        .env("RINGBROKER_MAX_CONNECTIONS_PER_IP_OVERRIDES", "broker-1:5")
        .output()
        .expect("run ringbroker");
    assert!(!out.status.success(), "the broker started with a host name in the per-IP overrides");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("max_connections_per_ip_overrides") && err.contains("broker-1"), "{err}");
}
