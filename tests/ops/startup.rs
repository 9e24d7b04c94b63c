//! Starting and stopping the real broker binary: the command line, refused configurations,
//! the config file, persistence across clean and unclean restarts, recovery of a torn log
//! tail, segment roll with size-based retention, and the data-directory lock.

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ringbroker::protocol::messages::{ApiKey, ProduceResponse};
use ringbroker::protocol::Decodable;
use ringbroker::protocol::ErrorCode;
use support::client;
use support::client::{batch, decode_records, now_ms, produce_request, single_produce, value, Client, PRODUCE_V};
use support::Broker;

const BIN: &str = env!("CARGO_BIN_EXE_ringbroker");

/// What a broker run that was expected to end printed, and how it ended.
struct Finished {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

/// Runs the broker binary with `args` and waits (at most `limit`) for it to exit.
fn run_to_exit(args: &[&str], limit: Duration) -> Finished {
    let mut child = Command::new(BIN)
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ringbroker");
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let end = Instant::now() + limit;
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        if Instant::now() >= end {
            let _ = child.kill();
            let _ = child.wait();
            let stderr = err_reader.join().unwrap_or_default();
            panic!("ringbroker {args:?} was still running after {limit:?}; stderr:\n{stderr}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Finished { status, stdout: out_reader.join().unwrap_or_default(), stderr: err_reader.join().unwrap_or_default() }
}

/// The broker refuses to start: exit code 2 and a message on stderr containing `needle`.
fn assert_refused(args: &[&str], needle: &str) {
    let data = tempfile::tempdir().expect("temp dir");
    let data_dir = data.path().join("data");
    let mut full: Vec<&str> = args.to_vec();
    if !args.contains(&"--listen") {
        full.extend(["--listen", "127.0.0.1:0"]);
    }
    full.extend(["--data-dir", data_dir.to_str().expect("utf-8 path")]);
    let f = run_to_exit(&full, Duration::from_secs(30));
    assert_eq!(
        f.status.code(),
        Some(2),
        "ringbroker {args:?} should exit with status 2 (bad configuration), got {:?}; stderr:\n{}",
        f.status,
        f.stderr
    );
    assert!(f.stderr.contains(needle), "ringbroker {args:?}: stderr does not mention {needle:?}:\n{}", f.stderr);
    assert!(!f.stdout.contains("listening on"), "ringbroker {args:?} started: {}", f.stdout);
    assert!(!data_dir.join("catalog.json").exists(), "ringbroker {args:?} touched the data directory");
}

// ---- command line and configuration -------------------------------------------------

#[test]
fn help_lists_the_main_flags() {
    let f = run_to_exit(&["--help"], Duration::from_secs(30));
    assert!(f.status.success(), "--help: {:?} {}", f.status, f.stderr);
    for flag in ["--listen", "--advertise", "--data-dir", "--cpus", "--numa-node", "--flush", "--config"] {
        assert!(f.stdout.contains(flag), "--help does not list {flag}:\n{}", f.stdout);
    }
}

#[test]
fn a_too_small_segment_size_is_refused() {
    assert_refused(&["--segment-bytes", "10"], "segment_bytes");
}

#[test]
fn an_impossible_cpu_list_is_refused() {
    assert_refused(&["--cpus", "0-4096"], "cpus");
}

#[test]
fn a_cpu_the_process_may_not_use_is_refused() {
    let allowed = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).expect("affinity");
    let cpu = (0..nix::sched::CpuSet::count())
        .find(|&c| !allowed.is_set(c).unwrap_or(true))
        .expect("some CPU outside the allowed set");
    let cpu = cpu.to_string();
    assert_refused(&["--cpus", &cpu], "cpus");
}

#[test]
fn an_unknown_flush_policy_is_refused() {
    assert_refused(&["--flush", "sometimes"], "sometimes");
    assert_refused(&["--flush", "sometimes"], "--flush");
}

#[test]
fn an_unknown_key_in_the_config_file_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("ringbroker.toml");
    std::fs::write(&path, "default_partitions = 2\nsegmnt_bytes = 4096\n").expect("write config");
    assert_refused(&["--config", path.to_str().expect("utf-8")], "segmnt_bytes");
}

#[test]
fn a_listen_address_that_is_not_one_is_refused() {
    assert_refused(&["--listen", "nonsense"], "listen");
}

/// Auto-creates `topic` through Metadata and returns its partition count.
fn auto_created_partitions(b: &Broker, topic: &str) -> usize {
    let mut c = Client::connect(b.addr);
    let m = c.metadata(Some(&[topic]), true);
    assert_eq!(m.topics[0].error_code, 0, "auto-creating {topic}");
    m.topics[0].partitions.len()
}

#[test]
fn the_config_file_is_honoured_and_flags_override_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("ringbroker.toml");
    std::fs::write(&path, "# test settings\ndefault_partitions = 2\nmessage_max_bytes = 5000\n").expect("write");
    let path = path.to_str().expect("utf-8");

    let b = Broker::start_args(&["--config", path]);
    assert_eq!(auto_created_partitions(&b, "from-file"), 2);
    let mut c = Client::connect(b.addr);
    let p = c.produce("from-file", 0, batch(now_ms(), &[vec![0u8; 6000]]));
    assert_eq!(p.error_code, ErrorCode::MessageTooLarge.code(), "message_max_bytes from the file");
    assert_eq!(c.produce_ok("from-file", 1, batch(now_ms(), &[vec![0u8; 4000]])), 0);
    drop(b);

    let b = Broker::start_args(&["--config", path, "--default-partitions", "3"]);
    assert_eq!(auto_created_partitions(&b, "from-flag"), 3, "the flag wins over the file");
    let mut c = Client::connect(b.addr);
    let p = c.produce("from-flag", 0, batch(now_ms(), &[vec![0u8; 6000]]));
    assert_eq!(p.error_code, ErrorCode::MessageTooLarge.code(), "the file's other settings still apply");
}

// ---- persistence ----------------------------------------------------------------------

/// Records as (offset, value).
type Contents = Vec<(i64, Vec<u8>)>;

/// Everything in a partition, as (offset, value).
fn contents(c: &mut Client, topic: &str, partition: i32) -> Contents {
    c.fetch_all(topic, partition, 0).into_iter().map(|r| (r.offset, r.value.expect("value"))).collect()
}

/// topic name -> (topic id, partition count), from Metadata.
fn topic_ids(c: &mut Client, topics: &[&str]) -> Vec<(String, uuid::Uuid, usize)> {
    let m = c.metadata(Some(topics), false);
    m.topics
        .iter()
        .map(|t| {
            assert_eq!(t.error_code, 0, "{:?}", t.name);
            (t.name.as_ref().expect("name").to_string(), t.topic_id, t.partitions.len())
        })
        .collect()
}

#[test]
fn records_and_topic_ids_survive_a_clean_stop_and_a_kill_9() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path().to_path_buf();
    let topics = ["persist", "persist-one"];
    let parts = |t: &str| if t == "persist" { 3 } else { 1 };

    let mut b = Broker::start_in(&dir, "127.0.0.1:0", &[]);
    let mut c = Client::connect(b.addr);
    c.create_topic("persist", 3, &[("retention.ms", "-1")]);
    c.create_topic("persist-one", 1, &[]);
    let mut expected: Vec<(String, i32, Contents)> = Vec::new();
    for t in topics {
        for p in 0..parts(t) {
            let mut want = Vec::new();
            for k in 0..5 {
                let vals: Vec<Vec<u8>> = (0..2).map(|j| value(&format!("{t}/{p}"), 2 * k + j, 64)).collect();
                assert_eq!(c.produce_ok(t, p, batch(now_ms(), &vals)), 2 * k as i64);
                want.extend(vals.into_iter().enumerate().map(|(j, v)| ((2 * k + j) as i64, v)));
            }
            expected.push((t.to_string(), p, want));
        }
    }
    let ids = topic_ids(&mut c, &topics);
    drop(c);

    // SIGTERM: a clean exit, with every partition marked clean.
    let st = b.stop().expect("the broker was running");
    assert!(st.success(), "SIGTERM should end the broker with success, got {st:?}");
    for (t, p, _) in &expected {
        assert!(dir.join(format!("{t}-{p}")).join(".clean-shutdown").exists(), "{t}-{p} not marked clean");
    }

    let mut b = Broker::start_in(&dir, "127.0.0.1:0", &[]);
    let mut c = Client::connect(b.addr);
    assert_eq!(topic_ids(&mut c, &topics), ids, "topic ids and partition counts after a clean restart");
    for (t, p, want) in &mut expected {
        assert_eq!(&contents(&mut c, t, *p), want, "{t}-{p} after a clean restart");
        assert_eq!(c.latest(t, *p), want.len() as i64);
        // One more batch each: offsets continue.
        let v = value(&format!("{t}/{p}"), want.len(), 64);
        assert_eq!(c.produce_ok(t, *p, batch(now_ms(), std::slice::from_ref(&v))), want.len() as i64);
        want.push((want.len() as i64, v));
    }

    // kill -9 while a producer is busy: everything acknowledged must survive.
    let acked: Arc<Mutex<Contents>> = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicUsize::new(0));
    let start_at = expected[0].2.len();
    let producer = {
        let (acked, stop, count, addr) = (acked.clone(), stop.clone(), count.clone(), b.addr);
        std::thread::spawn(move || {
            let mut c = Client::connect(addr);
            let mut i = start_at;
            while !stop.load(Ordering::SeqCst) {
                let v = value("persist/0", i, 64);
                let req = produce_request("persist", &[(0, batch(now_ms(), std::slice::from_ref(&v)))], -1);
                if c.write_raw(&Client::frame(ApiKey::Produce, PRODUCE_V, i as i32, &req)).is_err() {
                    return;
                }
                let frame = match c.read_frame() {
                    Ok(Some(f)) => f,
                    _ => return, // the broker is gone
                };
                let (id, mut body) =
                    ringbroker::client::response_body(ApiKey::Produce, PRODUCE_V, frame).expect("a response header");
                assert_eq!(id, i as i32);
                let p = single_produce(ProduceResponse::decode(&mut body, PRODUCE_V).expect("produce response"));
                assert_eq!(p.error_code, 0);
                acked.lock().expect("lock").push((p.base_offset, v));
                count.fetch_add(1, Ordering::SeqCst);
                i += 1;
            }
        })
    };
    assert!(
        client::wait_until(Duration::from_secs(60), || count.load(Ordering::SeqCst) >= 30),
        "the producer made no progress"
    );
    b.kill9();
    stop.store(true, Ordering::SeqCst);
    producer.join().expect("producer thread");
    let acked = acked.lock().expect("lock").clone();
    assert!(acked.len() >= 30);
    for (k, (offset, _)) in acked.iter().enumerate() {
        assert_eq!(*offset, (start_at + k) as i64, "acknowledged offsets are consecutive");
    }

    let mut b = Broker::start_in(&dir, "127.0.0.1:0", &[]);
    let mut c = Client::connect(b.addr);
    assert_eq!(topic_ids(&mut c, &topics), ids, "topic ids after kill -9");
    expected[0].2.extend(acked.iter().cloned());
    for (t, p, want) in &expected {
        let got = contents(&mut c, t, *p);
        // Unacknowledged records may or may not have made it; acknowledged ones must have.
        assert!(
            got.len() >= want.len(),
            "{t}-{p}: {} records after kill -9, {} were acknowledged",
            got.len(),
            want.len()
        );
        assert_eq!(&got[..want.len()], &want[..], "{t}-{p} after kill -9");
        for (k, (offset, _)) in got.iter().enumerate() {
            assert_eq!(*offset, k as i64, "{t}-{p}: offsets without gaps");
        }
        let latest = c.latest(t, *p);
        assert_eq!(latest, got.len() as i64);
        assert_eq!(c.produce_ok(t, *p, batch(now_ms(), &[b"after".to_vec()])), latest, "{t}-{p}: next offset");
    }
    assert!(b.stop().expect("running").success());
}

// ---- torn tail recovery -------------------------------------------------------------------

/// The newest `.log` segment of a partition directory.
fn newest_log(partition_dir: &Path) -> PathBuf {
    let mut logs: Vec<PathBuf> = std::fs::read_dir(partition_dir)
        .expect("partition dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    logs.pop().unwrap_or_else(|| panic!("no .log in {}", partition_dir.display()))
}

fn log_files(partition_dir: &Path) -> Vec<PathBuf> {
    let mut logs: Vec<PathBuf> = std::fs::read_dir(partition_dir)
        .expect("partition dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    logs
}

fn torn_tail_case(name: &str, tail: &[u8]) {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path().to_path_buf();
    let mut b = Broker::start_in(&dir, "127.0.0.1:0", &[]);
    let mut c = Client::connect(b.addr);
    c.create_topic("torn", 2, &[]);
    let mut want = Vec::new();
    for p in 0..2 {
        for k in 0..4usize {
            let vals: Vec<Vec<u8>> = (0..3).map(|j| value(&format!("torn{p}"), 3 * k + j, 50)).collect();
            assert_eq!(c.produce_ok("torn", p, batch(now_ms(), &vals)), 3 * k as i64);
        }
    }
    for p in 0..2 {
        want.push(contents(&mut c, "torn", p));
        assert_eq!(want[p as usize].len(), 12);
    }
    drop(c);
    assert!(b.stop().expect("running").success());

    // Damage partition 1's newest segment as a crash mid-write would, and drop its marker.
    let pdir = dir.join("torn-1");
    let log = newest_log(&pdir);
    let good_len = std::fs::metadata(&log).expect("log").len();
    OpenOptions::new().append(true).open(&log).expect("open log").write_all(tail).expect("append");
    std::fs::remove_file(pdir.join(".clean-shutdown")).expect("the clean stop left a marker");

    let mut b = Broker::start_in(&dir, "127.0.0.1:0", &[]);
    assert_eq!(
        std::fs::metadata(&log).expect("log").len(),
        good_len,
        "{name}: the torn tail was not cut off at restart"
    );
    let mut c = Client::connect(b.addr);
    for p in 0..2 {
        assert_eq!(c.latest("torn", p), 12, "{name}: partition {p} high watermark");
        assert_eq!(contents(&mut c, "torn", p), want[p as usize], "{name}: partition {p} records");
        assert_eq!(c.produce_ok("torn", p, batch(now_ms(), &[b"next".to_vec()])), 12, "{name}: next offset");
    }
    let got = contents(&mut c, "torn", 1);
    assert_eq!(got.len(), 13);
    assert_eq!(got[12], (12, b"next".to_vec()));
    drop(c);
    assert!(b.stop().expect("running").success());

    // And it stays that way over another restart.
    let b = Broker::start_in(&dir, "127.0.0.1:0", &[]);
    let mut c = Client::connect(b.addr);
    assert_eq!(contents(&mut c, "torn", 1), got, "{name}: after a second restart");
}

#[test]
fn a_torn_tail_of_garbage_is_cut_at_restart() {
    torn_tail_case("garbage", &[0xab; 100]);
}

#[test]
fn a_torn_tail_of_zeros_is_cut_at_restart() {
    torn_tail_case("zeros", &[0u8; 4096]);
}

#[test]
fn a_half_written_batch_is_cut_at_restart() {
    let mut full = batch(now_ms(), &[value("half", 0, 300), value("half", 1, 300)]);
    // As the broker would have written it: base offset 12.
    full[0..8].copy_from_slice(&12i64.to_be_bytes());
    torn_tail_case("half batch", &full[..full.len() / 2]);
}

#[test]
fn a_whole_batch_with_a_bad_crc_is_cut_at_restart() {
    let mut full = batch(now_ms(), &[value("crc", 0, 300)]);
    full[0..8].copy_from_slice(&12i64.to_be_bytes());
    let last = full.len() - 1;
    full[last] ^= 0x55;
    torn_tail_case("bad crc", &full);
}

// ---- segment roll and retention -----------------------------------------------------------

#[test]
fn segments_roll_and_size_retention_deletes_the_oldest() {
    let b = Broker::start_args(&[
        "--segment-bytes",
        "4096",
        "--retention-bytes",
        "8192",
        "--retention-check-interval-ms",
        "200",
    ]);
    let mut c = Client::connect(b.addr);
    c.create_topic("rolling", 1, &[]);
    let n = 50usize;
    for i in 0..n {
        assert_eq!(c.produce_ok("rolling", 0, batch(now_ms(), &[value("roll", i, 1000)])), i as i64);
    }
    let pdir = b.data_dir.join("rolling-0");
    // Batches of 1070 bytes, three to a 4096-byte segment: once a retention pass has seen
    // all 50, deleting the oldest segment while the others still hold 8192 bytes leaves
    // three (48 and 49 in the active one). A pass that ran before the last batches left
    // four, and the active segment's file may be preallocated to 4096 bytes.
    assert!(
        client::wait_until(Duration::from_secs(30), || { c.earliest("rolling", 0) > 0 && log_files(&pdir).len() <= 3 }),
        "retention did not delete old segments: earliest {}, segments {:?}",
        c.earliest("rolling", 0),
        log_files(&pdir)
    );
    let earliest = c.earliest("rolling", 0);
    let logs = log_files(&pdir);
    let sizes: Vec<u64> = logs.iter().map(|l| std::fs::metadata(l).expect("log").len()).collect();
    let bytes: u64 = sizes.iter().sum();
    assert!(bytes <= 8192 + 4096, "{bytes} bytes kept in {logs:?}, sizes {sizes:?}");
    let first_base: i64 = logs[0].file_stem().and_then(|s| s.to_str()).and_then(|s| s.parse().ok()).expect("base");
    assert_eq!(earliest, first_base, "log start is the oldest remaining segment's base offset");
    assert_eq!(c.latest("rolling", 0), n as i64);

    // From the new start everything is there; below it is out of range.
    let got = c.fetch_all("rolling", 0, earliest);
    let want: Contents = (earliest as usize..n).map(|i| (i as i64, value("roll", i, 1000))).collect();
    assert_eq!(got.into_iter().map(|r| (r.offset, r.value.expect("value"))).collect::<Vec<_>>(), want);
    let p = c.fetch("rolling", 0, earliest, 1 << 20);
    assert_eq!(p.error_code, 0);
    assert_eq!(p.log_start_offset, earliest);
    assert_eq!(decode_records(p.records.as_deref().expect("records"))[0].offset, earliest);
    assert_eq!(c.fetch("rolling", 0, earliest - 1, 1 << 20).error_code, ErrorCode::OffsetOutOfRange.code());
    assert_eq!(c.fetch("rolling", 0, 0, 1 << 20).error_code, ErrorCode::OffsetOutOfRange.code());
    // Appends go on at the end.
    assert_eq!(c.produce_ok("rolling", 0, batch(now_ms(), &[b"tail".to_vec()])), n as i64);
}

// ---- the data-directory lock ----------------------------------------------------------------

#[test]
fn two_brokers_cannot_share_a_data_directory() {
    let b = Broker::start();
    let data = b.data_dir.to_str().expect("utf-8").to_string();
    let f = run_to_exit(&["--listen", "127.0.0.1:0", "--data-dir", &data], Duration::from_secs(30));
    assert!(!f.status.success(), "a second broker started on the same data directory");
    assert!(!f.stdout.contains("listening on"), "{}", f.stdout);
    assert!(f.stderr.contains("data directory"), "the refusal does not mention the data directory:\n{}", f.stderr);
    // The first one is unaffected.
    let mut c = Client::connect(b.addr);
    assert_eq!(c.api_versions().error_code, 0);
}

/// A port another broker serves is refused for either of a broker's listeners: the kernel
/// would otherwise split that port's connections between the two processes (client listeners
/// bind with SO_REUSEPORT), and Kafka requests would reach a cluster listener or the reverse.
#[test]
fn a_port_another_broker_serves_is_refused_for_the_cluster_and_the_client_listener() {
    let b = Broker::start();
    let taken = b.addr.to_string();
    let data = tempfile::tempdir().expect("temp dir");
    let dir = data.path().join("data");
    let dir = dir.to_str().expect("utf-8");
    let voters = format!("1@{taken}");
    let cluster_args =
        ["--node-id", "1", "--cluster-listen", &taken, "--controller-quorum-voters", &voters, "--data-dir", dir];
    let mut args = vec!["--listen", "127.0.0.1:0"];
    args.extend(cluster_args);
    let f = run_to_exit(&args, Duration::from_secs(30));
    assert!(!f.status.success(), "a broker started with its cluster listener on another broker's client port");
    assert!(f.stderr.contains("cluster_listen"), "the refusal does not name cluster_listen:\n{}", f.stderr);
    let mut c = Client::connect(b.addr);
    assert_eq!(c.api_versions().error_code, 0, "the first broker still answers on its port");

    // The reverse: a client listener on a port a cluster listener holds.
    let cluster = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().expect("addr");
    let (cluster_port, voters) = (cluster.to_string(), format!("1@{cluster}"));
    let member_data = tempfile::tempdir().expect("temp dir");
    let member = Broker::start_in(
        member_data.path(),
        "127.0.0.1:0",
        &["--node-id", "1", "--cluster-listen", &cluster_port, "--controller-quorum-voters", &voters],
    );
    let other = tempfile::tempdir().expect("temp dir");
    let other_dir = other.path().join("data");
    let other_dir = other_dir.to_str().expect("utf-8");
    let f = run_to_exit(&["--listen", &cluster_port, "--data-dir", other_dir], Duration::from_secs(30));
    assert!(!f.status.success(), "a broker started with its client listener on another broker's cluster port");
    assert!(f.stderr.contains(&cluster_port), "the refusal does not name the port:\n{}", f.stderr);
    let mut c = Client::connect(member.addr);
    assert_eq!(c.api_versions().error_code, 0, "the cluster member still answers");
}

/// The CPUs the threads of each shard of process `pid` may run on, by shard name (glommio
/// names a shard's threads, its executor's and its blocking thread's, `shard-N-ID`).
fn shard_affinities(pid: u32) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).expect("the broker's threads") {
        let task = task.expect("a thread").path();
        let name = std::fs::read_to_string(task.join("comm")).unwrap_or_default().trim().to_string();
        if !name.starts_with("shard-") {
            continue;
        }
        let status = std::fs::read_to_string(task.join("status")).expect("thread status");
        let cpus = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).expect("Cpus_allowed_list");
        out.push((name, cpus.trim().to_string()));
    }
    out.sort();
    out.dedup();
    let names: std::collections::BTreeSet<&String> = out.iter().map(|(n, _)| n).collect();
    assert_eq!(names.len(), out.len(), "the threads of a shard share one CPU set: {out:?}");
    out
}

#[test]
fn shards_are_pinned_one_cpu_each_unless_pin_is_off() {
    let own = std::fs::read_to_string("/proc/self/status").expect("own status");
    let allowed = own.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).expect("own CPUs").trim().to_string();
    let cpus = ringbroker::sys::allowed_cpus().expect("allowed CPUs");

    let mut pinned = Broker::start();
    let threads = shard_affinities(pinned.pid().expect("pid"));
    assert_eq!(threads.len(), cpus.len(), "one shard per allowed CPU: {threads:?}");
    for (i, (name, on)) in threads.iter().enumerate() {
        assert!(name.starts_with(&format!("shard-{i}-")), "{name}");
        assert_eq!(on, &cpus[i].to_string(), "{name} runs on its own CPU only");
    }
    pinned.stop();

    let mut floating = Broker::start_args(&["--pin", "false"]);
    let threads = shard_affinities(floating.pid().expect("pid"));
    assert_eq!(threads.len(), cpus.len(), "as many shards as pinned: {threads:?}");
    for (name, on) in &threads {
        assert_eq!(on, &allowed, "{name} may run on every CPU the shards have");
    }
    floating.stop();
}
