//! The idempotent producer of the Apache Kafka Java client (default settings: idempotence on,
//! acks=all, five requests in flight, unbounded retries) against the broker, where retries
//! really happen (tests/java/.../IdemProduce.java):
//!
//! 1. through a proxy (`support::proxy`) that now and then swallows a Produce response and
//!    cuts the connection, after the broker appended the batch: the client retries batches the
//!    broker already holds;
//! 2. across a SIGKILL and restart of the broker (`--flush always`, same data dir and port),
//!    with the producer running on: batches in flight at the kill are retried against the
//!    restarted broker, whose producer state came back from snapshots and the log.
//!
//! Either way, read back directly from the broker afterwards, every record must be in the log
//! exactly once, each partition must hold its records in send order (the values carry their
//! per-partition send sequence), and every acknowledged offset must hold the record
//! acknowledged there.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use support::client::{decode_batches, decode_records, Client};
use support::java;
use support::proxy::{DropPolicy, Proxy};
use support::{restart, Broker};

use crate::machine;

const PARTITIONS: i32 = 4;

// ---------------------------------------------------------------------------------------------
// The tests
// ---------------------------------------------------------------------------------------------

/// 100,000 keyed records through a proxy that swallows about one Produce response in 50.
#[test]
fn java_idempotent_producer_through_a_lossy_proxy_writes_every_record_once_in_order() {
    let _machine = machine::shared();
    const TOPIC: &str = "idem-java-proxy";
    const RECORDS: u64 = 100_000;
    java::classpath(); // build the harness first, outside the timed part
    let work = tempfile::tempdir().expect("temp dir");
    let acked = work.path().join("acked.txt");

    let mut proxy = Proxy::bind(DropPolicy::produce_one_in(50));
    let broker = Broker::start_args(&["--advertise", &proxy.addr.to_string()]);
    proxy.set_target(broker.addr);
    Client::connect(broker.addr).create_topic(TOPIC, PARTITIONS, &[]);

    let started = Instant::now();
    let (status, out) = run_java(
        &[
            "idem-produce",
            "--bootstrap",
            &proxy.addr.to_string(),
            "--topic",
            TOPIC,
            "--partitions",
            &PARTITIONS.to_string(),
            "--records",
            &RECORDS.to_string(),
            "--acked-file",
            acked.to_str().unwrap(),
            "--delivery-timeout-ms",
            "60000",
            "--request-timeout-ms",
            "15000",
            "--max-seconds",
            "70",
        ],
        &work.path().join("idem-produce.log"),
        Duration::from_secs(85),
    );
    let stats = proxy.stats();
    println!("producer ran {:?}; proxy: {stats:?}", started.elapsed());
    proxy.stop();
    assert!(
        status.is_some_and(|s| s.success()),
        "idem-produce through the proxy failed ({status:?}); proxy {stats:?}:\n{}",
        java::tail(&out, 40)
    );
    assert!(stats.swallowed > 0, "the proxy swallowed no Produce response ({stats:?}), so no retry was tested");

    let acks = read_acked(&acked);
    verify(broker.addr, TOPIC, RECORDS, &acks);
}

/// SIGKILL and restart of the broker, twice, in the middle of an idempotent stream. Small
/// segments, so that the producer state after each restart comes from a snapshot (written at
/// a roll) plus the batches after it.
#[test]
fn java_idempotent_producer_retries_across_broker_kill9_without_duplicates() {
    let _machine = machine::shared();
    const TOPIC: &str = "idem-java-kill";
    const RECORDS: u64 = 60_000;
    /// Acknowledged records before each kill.
    const KILL_AT: [usize; 2] = [12_000, 32_000];
    java::classpath();
    let data = tempfile::tempdir().expect("temp dir");
    let work = tempfile::tempdir().expect("temp dir");
    let acked = work.path().join("acked.txt");
    let log = work.path().join("idem-produce.log");
    let args = ["--flush", "always", "--segment-bytes", "131072"];

    let mut broker = Broker::start_in(data.path(), "127.0.0.1:0", &args);
    let listen = broker.addr.to_string();
    Client::connect(broker.addr).create_topic(TOPIC, PARTITIONS, &[]);

    let mut producer = spawn_java(
        &[
            "idem-produce",
            "--bootstrap",
            &listen,
            "--topic",
            TOPIC,
            "--partitions",
            &PARTITIONS.to_string(),
            "--records",
            &RECORDS.to_string(),
            "--acked-file",
            acked.to_str().unwrap(),
            // Paced, so that the kills land mid-stream even on a fast machine.
            "--rate",
            "8000",
            // Long enough to outlast the restarts: nothing may fail for want of retries.
            "--delivery-timeout-ms",
            "40000",
            "--request-timeout-ms",
            "10000",
            "--max-seconds",
            "45",
        ],
        &log,
    );

    let start = Instant::now();
    let budget = Duration::from_secs(85);
    let mut acked_at_kill = Vec::new();
    for want in KILL_AT {
        let mut n = 0;
        while start.elapsed() < Duration::from_secs(40) {
            n = count_lines(&acked);
            if n >= want {
                break;
            }
            if let Ok(Some(st)) = producer.try_wait() {
                dump(&log);
                panic!("idem-produce exited ({st}) before the kill, with {n} acknowledged records");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if n < want {
            let _ = producer.kill();
            let status = producer.wait().ok();
            let out = file_output(&log, status);
            java::print_output("idem-produce", &out);
            panic!(
                "the producer stalled: only {n} of {want} records were acknowledged {:?} into the run (after \
                 kills at {acked_at_kill:?} acknowledgements); its log ends:\n{}",
                start.elapsed(),
                java::tail(&out, 12)
            );
        }
        broker.kill9();
        println!("SIGKILL to the broker after {:?} with {n}+ records acknowledged", start.elapsed());
        assert!(producer.try_wait().ok().flatten().is_none(), "the producer must still be running at the kill");
        acked_at_kill.push(n);
        // The producer keeps sending into a dead broker for a moment; then the broker comes back.
        std::thread::sleep(Duration::from_millis(1500));
        broker = restart(data.path(), &listen, &args);
        println!("broker restarted after {:?}", start.elapsed());
    }

    let status = wait_or_kill(&mut producer, budget.saturating_sub(start.elapsed()));
    let out = file_output(&log, status);
    java::print_output("idem-produce", &out);
    if !status.is_some_and(|s| s.success()) {
        // Read the log back anyway: what it holds tells what went wrong.
        let found = match check(broker.addr, TOPIC, RECORDS, &read_acked(&acked)) {
            Ok(()) => "the log holds every record once, in order".to_string(),
            Err(e) => e,
        };
        panic!(
            "idem-produce across kill -9 and restarts (after {acked_at_kill:?} acknowledgements) failed \
             ({status:?}):\n{}\nread back anyway (records the producer gave up on may be missing): {found}",
            java::tail(&out, 12)
        );
    }
    let snapshots = std::fs::read_dir(data.path().join(format!("{TOPIC}-0")))
        .map(|d| d.filter_map(Result::ok).filter(|e| e.path().extension().is_some_and(|x| x == "snapshot")).count())
        .unwrap_or(0);
    assert!(snapshots > 0, "no producer snapshot was written: the segments did not roll");
    let acks = read_acked(&acked);
    verify(broker.addr, TOPIC, RECORDS, &acks);
}

// ---------------------------------------------------------------------------------------------
// Running the Java harness, bounded
// ---------------------------------------------------------------------------------------------

fn spawn_java(args: &[&str], log: &Path) -> Child {
    let f = File::create(log).expect("java log file");
    java::command(args)
        .stdout(Stdio::from(f.try_clone().expect("dup log file")))
        .stderr(Stdio::from(f))
        .spawn()
        .expect("spawn the java harness")
}

/// Waits up to `limit` for the child; kills it past that. `None` when it had to be killed.
fn wait_or_kill(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Ok(Some(st)) = child.try_wait() {
            return Some(st);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
    println!("the java harness still ran after {limit:?}: killed it");
    None
}

/// The harness's combined log as an `Output` (stdout), for `java::print_output` / `java::tail`.
fn file_output(log: &Path, status: Option<ExitStatus>) -> Output {
    use std::os::unix::process::ExitStatusExt;
    Output {
        status: status.unwrap_or_else(|| ExitStatus::from_raw(9)),
        stdout: std::fs::read(log).unwrap_or_default(),
        stderr: Vec::new(),
    }
}

/// Runs a harness subcommand to completion within `limit`, printing its output.
fn run_java(args: &[&str], log: &Path, limit: Duration) -> (Option<ExitStatus>, Output) {
    let mut child = spawn_java(args, log);
    let status = wait_or_kill(&mut child, limit);
    let out = file_output(log, status);
    java::print_output(args[0], &out);
    (status, out)
}

fn count_lines(p: &Path) -> usize {
    match File::open(p) {
        Ok(f) => BufReader::new(f)
            .lines()
            .map_while(Result::ok)
            .filter(|l| l.ends_with(|c: char| c.is_ascii_digit()))
            .count(),
        Err(_) => 0,
    }
}

fn dump(p: &Path) {
    if let Ok(s) = std::fs::read_to_string(p) {
        for l in s.lines() {
            println!("[java idem-produce] {l}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Verification, directly against the broker
// ---------------------------------------------------------------------------------------------

/// One line of the acked file: `partition offset i s`.
#[derive(Debug, Clone, Copy)]
struct Acked {
    partition: i32,
    offset: i64,
    i: u64,
    seq: u64,
}

fn read_acked(p: &Path) -> Vec<Acked> {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("reading {}: {e}", p.display()));
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(n, l)| {
            let f: Vec<&str> = l.split(' ').collect();
            let parsed = (f.len() == 4).then(|| {
                Some(Acked {
                    partition: f[0].parse().ok()?,
                    offset: f[1].parse().ok()?,
                    i: f[2].parse().ok()?,
                    seq: f[3].parse().ok()?,
                })
            });
            parsed.flatten().unwrap_or_else(|| panic!("acked file line {} is malformed: {l:?}", n + 1))
        })
        .collect()
}

/// A record as read from the log, with the identity its value carries.
#[derive(Debug, Clone)]
struct Stored {
    offset: i64,
    key: Option<Vec<u8>>,
    /// (i, p, s) from `i=<i> p=<p> s=<s> ...`, `None` when the value does not parse.
    id: Option<(u64, i32, u64)>,
}

/// Producer fields of a stored batch.
#[derive(Debug, Clone, Copy)]
struct BatchMeta {
    base_offset: i64,
    producer_id: i64,
    epoch: i16,
    base_sequence: i32,
}

fn parse_id(v: &[u8]) -> Option<(u64, i32, u64)> {
    let s = std::str::from_utf8(v).ok()?;
    let mut it = s.split(' ');
    let i = it.next()?.strip_prefix("i=")?.parse().ok()?;
    let p = it.next()?.strip_prefix("p=")?.parse().ok()?;
    let q = it.next()?.strip_prefix("s=")?.parse().ok()?;
    Some((i, p, q))
}

fn be_i64(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().unwrap())
}

/// Every record and batch of a partition, from offset 0 to the high watermark.
fn read_partition(c: &mut Client, topic: &str, partition: i32) -> (Vec<Stored>, Vec<BatchMeta>, i64) {
    let mut records = Vec::new();
    let mut batches = Vec::new();
    let mut offset = 0i64;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(Instant::now() < deadline, "reading {topic}-{partition} back took over 60 s (at offset {offset})");
        let p = c.fetch(topic, partition, offset, 1 << 20);
        assert_eq!(p.error_code, 0, "fetch {topic}-{partition} at {offset}");
        let set = p.records.as_deref().unwrap_or(&[]);
        let mut progressed = false;
        for (info, b) in decode_batches(set) {
            let last = info.base_offset + info.record_count as i64 - 1;
            if last < offset {
                continue;
            }
            batches.push(BatchMeta {
                base_offset: info.base_offset,
                producer_id: be_i64(b, 43),
                epoch: i16::from_be_bytes([b[51], b[52]]),
                base_sequence: i32::from_be_bytes(b[53..57].try_into().unwrap()),
            });
            for r in decode_records(b) {
                if r.offset >= offset {
                    records.push(Stored { offset: r.offset, id: r.value.as_deref().and_then(parse_id), key: r.key });
                }
            }
            offset = last + 1;
            progressed = true;
        }
        if !progressed {
            assert!(
                offset >= p.high_watermark,
                "{topic}-{partition}: no whole batch at offset {offset}, below the high watermark {}",
                p.high_watermark
            );
            return (records, batches, p.high_watermark);
        }
    }
}

/// Reads every partition back from `addr` (the broker itself) and checks: each record
/// 0..`n` is there exactly once, on the partition its value names, at contiguous offsets, in
/// per-partition send order; every batch is idempotent (producer id set); every acknowledged
/// offset holds the record acknowledged there.
fn verify(addr: SocketAddr, topic: &str, n: u64, acks: &[Acked]) {
    if let Err(e) = check(addr, topic, n, acks) {
        panic!("{e}");
    }
}

/// [`verify`]'s checks; `Err` describes the problems found.
fn check(addr: SocketAddr, topic: &str, n: u64, acks: &[Acked]) -> Result<(), String> {
    let mut c = Client::connect(addr);
    let mut problems: Vec<String> = Vec::new();
    let mut seen = vec![0u32; n as usize];
    let mut logs: BTreeMap<i32, Vec<Stored>> = BTreeMap::new();
    let mut summary = Vec::new();
    for p in 0..PARTITIONS {
        let (records, batches, hwm) = read_partition(&mut c, topic, p);
        // Offsets: contiguous from 0 up to the high watermark.
        for (idx, r) in records.iter().enumerate() {
            if r.offset != idx as i64 {
                problems
                    .push(format!("partition {p}: record #{idx} is at offset {}, offsets not contiguous", r.offset));
                break;
            }
        }
        if records.len() as i64 != hwm {
            problems.push(format!("partition {p}: read {} records, high watermark {hwm}", records.len()));
        }
        // Send order: the sequence numbers in the values run 0, 1, 2, ...
        let mut next_seq = 0u64;
        for r in &records {
            let Some((i, vp, s)) = r.id else {
                problems.push(format!("partition {p} offset {}: value does not parse as i=.. p=.. s=..", r.offset));
                continue;
            };
            if i >= n {
                problems.push(format!("partition {p} offset {}: unknown record i={i}", r.offset));
                continue;
            }
            seen[i as usize] += 1;
            if r.key.as_deref() != Some(format!("k-{i}").as_bytes()) {
                problems.push(format!(
                    "partition {p} offset {}: record i={i} has key {:?}",
                    r.offset,
                    r.key.as_deref().map(String::from_utf8_lossy)
                ));
            }
            if vp != p {
                problems.push(format!("partition {p} offset {}: record i={i} was meant for partition {vp}", r.offset));
            }
            if s != next_seq {
                let what = if s < next_seq { "a duplicate or reordered record" } else { "records missing" };
                problems.push(format!(
                    "partition {p} offset {}: send sequence {s} (record i={i}) where {next_seq} was due: {what}",
                    r.offset
                ));
            }
            next_seq = s + 1;
        }
        // Idempotent batches; with one producer id and epoch, batch sequences follow the records.
        let ids: BTreeSet<(i64, i16)> = batches.iter().map(|b| (b.producer_id, b.epoch)).collect();
        if let Some(b) = batches.iter().find(|b| b.producer_id < 0) {
            problems
                .push(format!("partition {p}: batch at offset {} has no producer id: not idempotent", b.base_offset));
        }
        if ids.len() == 1 {
            for b in &batches {
                let first = records.get(b.base_offset as usize).and_then(|r| r.id).map(|(_, _, s)| s);
                if first != Some(b.base_sequence as u64) {
                    problems.push(format!(
                        "partition {p}: batch at offset {} has base sequence {}, its first record send sequence \
                         {first:?}",
                        b.base_offset, b.base_sequence
                    ));
                    break;
                }
            }
        }
        summary.push(format!(
            "p{p}: {} records in {} batches, producer (id, epoch) {ids:?}",
            records.len(),
            batches.len()
        ));
        logs.insert(p, records);
    }
    println!("read back: {}", summary.join("; "));
    let missing: Vec<usize> = (0..n as usize).filter(|&i| seen[i] == 0).collect();
    if !missing.is_empty() {
        problems.push(format!(
            "{} record(s) never read back, e.g. i={:?}",
            missing.len(),
            &missing[..missing.len().min(10)]
        ));
    }
    let dups: Vec<(usize, u32)> = (0..n as usize).filter(|&i| seen[i] > 1).map(|i| (i, seen[i])).collect();
    if !dups.is_empty() {
        problems.push(format!(
            "{} record(s) read more than once, e.g. (i, times) {:?}",
            dups.len(),
            &dups[..dups.len().min(10)]
        ));
    }
    // Acknowledgements: each record once, and its offset holds it.
    let mut acked_once = vec![0u32; n as usize];
    for a in acks {
        if a.i >= n {
            problems.push(format!("acked file lists unknown record {a:?}"));
            continue;
        }
        acked_once[a.i as usize] += 1;
        let at = logs.get(&a.partition).and_then(|l| l.get(a.offset as usize)).filter(|r| r.offset == a.offset);
        match at.and_then(|r| r.id) {
            Some((i, _, s)) if i == a.i && s == a.seq => {}
            Some((i, p, s)) => problems.push(format!(
                "record i={} s={} was acknowledged at partition {} offset {}, which holds i={i} p={p} s={s}",
                a.i, a.seq, a.partition, a.offset
            )),
            None => problems.push(format!(
                "record i={} was acknowledged at partition {} offset {}, which is not in the log",
                a.i, a.partition, a.offset
            )),
        }
    }
    let unacked = acked_once.iter().filter(|&&c| c == 0).count();
    let twice = acked_once.iter().filter(|&&c| c > 1).count();
    if unacked > 0 || twice > 0 {
        problems.push(format!("acked file: {unacked} record(s) never acknowledged, {twice} acknowledged twice"));
    }
    if !problems.is_empty() {
        let total = problems.len();
        problems.truncate(30);
        return Err(format!(
            "{total} problem(s) in {topic} read back from the broker (first {}):\n  {}",
            problems.len(),
            problems.join("\n  ")
        ));
    }
    println!("verified: {n} records exactly once, in send order per partition; {} acknowledgements hold", acks.len());
    Ok(())
}
