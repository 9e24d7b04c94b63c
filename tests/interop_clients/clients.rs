//! Interop with four more Kafka client ecosystems, each driven as its own program against a
//! fresh broker: kcat (Debian's, on librdkafka 2.0), kafka-python (pure Python), kafkajs
//! (pure JavaScript) and two pure Go clients, franz-go (the newest version of every API) and
//! sarama (set to Kafka 2.1's protocol, so older versions of most APIs). `tests/clients/setup.sh`
//! installs them at their pinned versions (kcat with apt, kafka-python and the codec
//! libraries it uses in `tests/clients/.venv`, kafkajs with `npm ci` in `tests/clients`, the Go
//! clients built from `tests/clients/go` with the versions its go.sum pins); `.ci/run` runs
//! it, and so does this binary before its first suite, so `cargo test` needs no step before
//! it. A client that still cannot be found fails its test with what to install; nothing is
//! skipped.
//!
//! Every suite runs the same scenario; only the driver differs:
//!
//! 1. create a topic with 3 partitions (kcat cannot: the raw test client's CreateTopics does it
//!    for kcat; the others use their admin clients);
//! 2. produce 120 keyed records per compression codec the client has, a run each (kcat and
//!    kafka-python: gzip, snappy, lz4, zstd; kafkajs: none, gzip, snappy; the Go clients all
//!    five), recording each
//!    record's partition and offset from the client's delivery reports; the acknowledged
//!    offsets of each partition must be exactly `0..n`, and the broker's stored batches must
//!    carry each codec;
//! 3. read every partition from the beginning by assignment (no group) and compare every key,
//!    value, partition and offset with what was acknowledged; then partition 1 again from an
//!    offset in the middle of a compressed batch;
//! 4. in a consumer group: read 200 records, commit the offsets after them, leave (the client
//!    closes); OffsetFetch must return those commits; a new consumer in the same group must
//!    start each partition exactly at its commit and read the rest, so that the two runs
//!    together are exactly what was produced, no record missing or read twice; at the end the
//!    group's commits are the partitions' end offsets.
//!
//! The clients' programs print JSON lines (keys and values in hex); kcat's output is read with
//! a length-prefixed format string. Set `CLIENTS_DEBUG=1` for the clients' debug logs.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ringbroker::protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use ringbroker::protocol::messages::{ApiKey, GroupId, OffsetFetchRequest, OffsetFetchResponse};
use support::client;
use support::Broker;

mod cleaned;

const PARTITIONS: i32 = 3;
const RECORDS_PER_CODEC: usize = 120;
/// Records the first group member reads and commits before it leaves.
const FIRST_GROUP_RUN: usize = 200;
/// Upper bound for one run of a client program.
const RUN_TIMEOUT: Duration = Duration::from_secs(60);

/// One suite at a time: three brokers plus three client runtimes at once would oversubscribe
/// a small machine and turn the clients' timeouts into flakes.
static SERIAL: Mutex<()> = Mutex::new(());

#[test]
fn kcat_interop() {
    installed();
    suite(&Kcat::find());
}

#[test]
fn kafka_python_interop() {
    installed();
    suite(&Script::kafka_python());
}

#[test]
fn kafkajs_interop() {
    installed();
    suite(&Script::kafkajs());
}

#[test]
fn franz_go_interop() {
    installed();
    suite(&Script::go("franz"));
}

#[test]
fn sarama_interop() {
    installed();
    suite(&Script::go("sarama"));
}

/// Runs `tests/clients/setup.sh` once for this binary (a no-op when everything is there).
fn installed() {
    static DONE: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    let r = DONE.get_or_init(|| {
        let out = Command::new(clients_dir().join("setup.sh"))
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run tests/clients/setup.sh: {e}"))?;
        match out.status.success() {
            true => Ok(()),
            false => Err(format!("tests/clients/setup.sh failed:\n{}", String::from_utf8_lossy(&out.stderr))),
        }
    });
    if let Err(e) = r {
        panic!("{e}");
    }
}

// ---------------------------------------------------------------------------------------------
// The scenario
// ---------------------------------------------------------------------------------------------

/// A record to produce.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Rec {
    key: Vec<u8>,
    value: Option<Vec<u8>>,
}

/// A record a client read, with where it read it.
#[derive(Clone, Debug)]
struct Got {
    partition: i32,
    offset: i64,
    rec: Rec,
}

/// What a client program can do; each one reports what the client itself saw.
trait Driver {
    /// The client and its version, for messages.
    fn name(&self) -> &str;
    fn codecs(&self) -> &'static [&'static str];
    /// Whether the client can produce a null value.
    fn null_values(&self) -> bool;
    fn create_topic(&self, broker: &Broker, topic: &str, partitions: i32);
    /// Produces `records` in order with `codec`; returns each one's (partition, offset).
    fn produce(&self, broker: &Broker, topic: &str, codec: &str, records: &[Rec]) -> Vec<(i32, i64)>;
    /// Reads `count` records without a group: every partition from the beginning, or only
    /// partition `from.0` from offset `from.1`.
    fn read_assigned(&self, bootstrap: &str, topic: &str, count: usize, from: Option<(i32, i64)>) -> Vec<Got>;
    /// Reads exactly `count` records as a member of `group`, commits the offsets after them,
    /// and closes. Returns what it read and, if the client reports them, its commits.
    fn read_group(
        &self,
        broker: &Broker,
        topic: &str,
        group: &str,
        count: usize,
    ) -> (Vec<Got>, Option<BTreeMap<i32, i64>>);
}

fn suite(d: &dyn Driver) {
    let _one_at_a_time = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let started = Instant::now();
    let broker = Broker::start_args(&["--flush", "os", "--group-initial-rebalance-delay-ms", "0"]);
    let topic = "interop";
    let name = d.name().to_string();
    let say = |what: String| println!("[{name}] {:5.1} s: {what}", started.elapsed().as_secs_f64());

    // 1. The topic.
    d.create_topic(&broker, topic, PARTITIONS);

    // 2. Produce, a run per codec, and check the acknowledgements.
    let mut produced: BTreeMap<(i32, i64), Rec> = BTreeMap::new();
    for (run, codec) in d.codecs().iter().enumerate() {
        let records: Vec<Rec> =
            (0..RECORDS_PER_CODEC).map(|i| record(run * RECORDS_PER_CODEC + i, d.null_values())).collect();
        let acks = d.produce(&broker, topic, codec, &records);
        assert_eq!(acks.len(), records.len(), "[{name}] {codec}: delivery reports for {} records", records.len());
        for (at, rec) in acks.into_iter().zip(records) {
            if let Some(before) = produced.insert(at, rec.clone()) {
                panic!(
                    "[{name}] {codec}: two records acknowledged at partition {} offset {}: {} and {}",
                    at.0,
                    at.1,
                    show(&before),
                    show(&rec)
                );
            }
        }
    }
    let ends = end_offsets(&produced);
    for p in 0..PARTITIONS {
        let offsets: Vec<i64> = produced.keys().filter(|(q, _)| *q == p).map(|(_, o)| *o).collect();
        assert!(!offsets.is_empty(), "[{name}] no record was acknowledged on partition {p}: {ends:?}");
        assert_eq!(
            offsets,
            (0..offsets.len() as i64).collect::<Vec<_>>(),
            "[{name}] acknowledged offsets on partition {p} are not exactly 0..{}",
            offsets.len()
        );
    }
    let batches = stored_batches(&broker, topic);
    let mut stored: BTreeMap<&str, usize> = BTreeMap::new();
    for b in &batches {
        *stored.entry(b.codec).or_insert(0) += 1;
    }
    for codec in d.codecs() {
        assert!(
            stored.contains_key(*codec),
            "[{name}] no batch on the broker is compressed with {codec} (stored batches by codec: \
             {stored:?}): did the client fall back to another codec?"
        );
    }
    say(format!("produced {} records: end offsets {ends:?}, stored batches {stored:?}", produced.len()));

    // 3. By assignment: everything, then partition 1 from the middle of a compressed batch
    //    (the broker returns the whole batch; the client must skip the records before).
    let got = d.read_assigned(&broker.bootstrap(), topic, produced.len(), None);
    check_exactly(&name, "read by assignment from the beginning", &got, &produced, |_, _| true);
    say(format!("read {} records by assignment, all as produced", got.len()));
    let inside: Vec<&StoredBatch> =
        batches.iter().filter(|b| b.partition == 1 && b.codec != "none" && b.records >= 2).collect();
    assert!(!inside.is_empty(), "[{name}] no compressed batch of two records or more on partition 1: {batches:?}");
    let b = inside[inside.len() / 2];
    let mid = b.base_offset + i64::from(b.records) / 2;
    let got = d.read_assigned(&broker.bootstrap(), topic, (ends[&1] - mid) as usize, Some((1, mid)));
    check_exactly(&name, &format!("read partition 1 from offset {mid}"), &got, &produced, |p, o| p == 1 && o >= mid);
    say(format!("read {} records of partition 1 from offset {mid}, all as produced", got.len()));

    // 4. A group: part, commit, leave; a new member resumes at the commits.
    let group = "interop-group";
    let (first, reported) = d.read_group(&broker, topic, group, FIRST_GROUP_RUN);
    assert_eq!(first.len(), FIRST_GROUP_RUN, "[{name}] the first group member read {} records", first.len());
    check_in_order(&name, "the first group member", &first);
    let mut read_first: BTreeMap<i32, i64> = BTreeMap::new();
    for g in &first {
        let next = read_first.entry(g.partition).or_insert(0);
        *next = (*next).max(g.offset + 1);
    }
    if let Some(reported) = &reported {
        assert_eq!(
            reported, &read_first,
            "[{name}] the first group member committed other offsets than the ones after what it read"
        );
    }
    let committed = committed_offsets(&broker, group, topic);
    say(format!("the first group member read {} records and committed {committed:?}", first.len()));
    assert_eq!(
        committed,
        (0..PARTITIONS).map(|p| (p, read_first.get(&p).copied().unwrap_or(-1))).collect::<BTreeMap<_, _>>(),
        "[{name}] OffsetFetch after the first member left (-1: none) against what it read"
    );
    let (second, _) = d.read_group(&broker, topic, group, produced.len() - FIRST_GROUP_RUN);
    check_in_order(&name, "the second group member", &second);
    for p in 0..PARTITIONS {
        let start = read_first.get(&p).copied().unwrap_or(0);
        if let Some(first_read) = second.iter().find(|g| g.partition == p) {
            assert_eq!(
                first_read.offset, start,
                "[{name}] the second group member started partition {p} at offset {}, but the \
                 first committed {start}",
                first_read.offset
            );
        }
    }
    let both: Vec<Got> = first.iter().chain(&second).cloned().collect();
    check_exactly(&name, "read by the two group members together", &both, &produced, |_, _| true);
    say(format!("the second group member resumed there and read the other {}", second.len()));
    assert_eq!(
        committed_offsets(&broker, group, topic),
        ends,
        "[{name}] OffsetFetch after the second member left, against the end offsets"
    );
    say("passed".to_string());
}

/// Record `i` of a suite: keys never hold ':' (kcat's key delimiter), values never hold a line
/// end (kcat's record delimiter). Values run from empty to ~2 KB, made of words drawn from a
/// small set (so that they compress: a client may send a batch uncompressed when compression
/// does not shrink it) that holds text, UTF-8, tabs, colons, NULs and bytes that are not UTF-8.
fn record(i: usize, null_values: bool) -> Rec {
    const WORDS: &[&[u8]] = &[
        b"ringbroker ",
        b"kafka",
        b" ",
        b": ",
        b"\t",
        b"\0\x01\x02",
        b"\xff\xfe\x80",
        "\u{3b3}\u{3ac}\u{3bc}\u{3bc}\u{3b1} ".as_bytes(),
        "\u{2713}".as_bytes(),
        b"offset ",
        b"partition ",
        b"{\"json\": [1, 2]} ",
        b"0123456789",
    ];
    let key = format!("key-{i:04}").into_bytes();
    if null_values && i % 50 == 7 {
        return Rec { key, value: None };
    }
    let len = match i % 10 {
        0 => 0,
        1..=6 => 10 + (i * 37) % 200,
        _ => 500 + (i * 131) % 1500,
    };
    let mut v = format!("value {i}: ").into_bytes();
    let mut x = (i as u32).wrapping_mul(0x9e37_79b9) | 1;
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        v.extend_from_slice(WORDS[x as usize % WORDS.len()]);
    }
    v.truncate(len);
    Rec { key, value: Some(v) }
}

fn show(r: &Rec) -> String {
    let value = match &r.value {
        None => "null".to_string(),
        Some(v) if v.len() > 40 => format!("{:?}... ({} bytes)", String::from_utf8_lossy(&v[..40]), v.len()),
        Some(v) => format!("{:?}", String::from_utf8_lossy(v)),
    };
    format!("key {:?} value {value}", String::from_utf8_lossy(&r.key))
}

fn end_offsets(produced: &BTreeMap<(i32, i64), Rec>) -> BTreeMap<i32, i64> {
    let mut ends: BTreeMap<i32, i64> = (0..PARTITIONS).map(|p| (p, 0)).collect();
    for &(p, o) in produced.keys() {
        let e = ends.entry(p).or_insert(0);
        *e = (*e).max(o + 1);
    }
    ends
}

/// Within each partition a consumer must see offsets in increasing order.
fn check_in_order(name: &str, what: &str, got: &[Got]) {
    let mut last: BTreeMap<i32, i64> = BTreeMap::new();
    for g in got {
        if let Some(prev) = last.insert(g.partition, g.offset) {
            assert!(
                g.offset > prev,
                "[{name}] {what} read partition {} offset {} after offset {prev}",
                g.partition,
                g.offset
            );
        }
    }
}

/// `got` must be exactly the produced records at the (partition, offset)s that `want` selects,
/// each read once.
fn check_exactly(
    name: &str,
    what: &str,
    got: &[Got],
    produced: &BTreeMap<(i32, i64), Rec>,
    want: impl Fn(i32, i64) -> bool,
) {
    check_in_order(name, what, got);
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for g in got {
        let at = (g.partition, g.offset);
        if !seen.insert(at) {
            problems.push(format!("partition {} offset {} read twice", at.0, at.1));
            continue;
        }
        match produced.get(&at) {
            _ if !want(at.0, at.1) => problems.push(format!(
                "partition {} offset {} read ({}), but it is not in the range asked for",
                at.0,
                at.1,
                show(&g.rec)
            )),
            None => problems.push(format!(
                "partition {} offset {} read ({}), but nothing was acknowledged there",
                at.0,
                at.1,
                show(&g.rec)
            )),
            Some(rec) if *rec != g.rec => problems.push(format!(
                "partition {} offset {}: read {}, produced {}",
                at.0,
                at.1,
                show(&g.rec),
                show(rec)
            )),
            Some(_) => {}
        }
    }
    let missing: Vec<&(i32, i64)> =
        produced.keys().filter(|(p, o)| want(*p, *o) && !seen.contains(&(*p, *o))).collect();
    if !missing.is_empty() {
        problems.push(format!(
            "{} produced records not read, e.g. (partition, offset) {:?}",
            missing.len(),
            &missing[..missing.len().min(10)]
        ));
    }
    if !problems.is_empty() {
        let n = problems.len();
        problems.truncate(15);
        panic!("[{name}] {what}: {n} problems ({} records read):\n  {}", got.len(), problems.join("\n  "));
    }
}

// ---------------------------------------------------------------------------------------------
// The broker's view, through the raw test client
// ---------------------------------------------------------------------------------------------

/// A record batch as the broker stored it.
#[derive(Debug)]
struct StoredBatch {
    partition: i32,
    base_offset: i64,
    records: i32,
    codec: &'static str,
}

/// Every stored batch of `topic`, partition by partition.
fn stored_batches(broker: &Broker, topic: &str) -> Vec<StoredBatch> {
    let mut c = client::Client::connect(broker.addr);
    let mut out = Vec::new();
    for p in 0..PARTITIONS {
        let mut offset = 0;
        loop {
            let data = c.fetch(topic, p, offset, 1 << 20);
            assert_eq!(data.error_code, 0, "raw fetch of {topic}-{p} at {offset}");
            let batches = client::decode_batches(data.records.as_deref().unwrap_or(&[]));
            let Some((_, last)) = batches.last() else { break };
            for (info, b) in &batches {
                let codec = match i16::from_be_bytes([b[21], b[22]]) & 0x7 {
                    0 => "none",
                    1 => "gzip",
                    2 => "snappy",
                    3 => "lz4",
                    4 => "zstd",
                    _ => "unknown",
                };
                out.push(StoredBatch {
                    partition: p,
                    base_offset: info.base_offset,
                    records: info.record_count,
                    codec,
                });
            }
            let last_delta = i32::from_be_bytes(last[23..27].try_into().expect("4 bytes"));
            offset = batches.last().expect("a batch").0.base_offset + i64::from(last_delta) + 1;
        }
    }
    out
}

/// The group's committed offset for each partition of `topic` (-1: none), by OffsetFetch from
/// a connection that is not a member.
fn committed_offsets(broker: &Broker, group: &str, topic: &str) -> BTreeMap<i32, i64> {
    let mut c = client::Client::connect(broker.addr);
    let mut t = OffsetFetchRequestTopic::default();
    t.name = client::topic_name(topic);
    t.partition_indexes = (0..PARTITIONS).collect();
    let mut r = OffsetFetchRequest::default();
    r.group_id = GroupId(client::sb(group));
    r.topics = Some(vec![t]);
    let resp: OffsetFetchResponse = c.call(ApiKey::OffsetFetch, 7, &r);
    assert_eq!(resp.error_code, 0, "OffsetFetch for {group}");
    let mut out = BTreeMap::new();
    for t in resp.topics {
        for p in t.partitions {
            assert_eq!(p.error_code, 0, "OffsetFetch for {group}, partition {}", p.partition_index);
            out.insert(p.partition_index, p.committed_offset);
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Running client programs
// ---------------------------------------------------------------------------------------------

struct Ran {
    ok: bool,
    status: String,
    stdout: Vec<u8>,
    stderr: String,
}

impl Ran {
    fn stderr_tail(&self, lines: usize) -> String {
        let all: Vec<&str> = self.stderr.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

/// Runs `cmd` with `input` on its stdin, killing it after `RUN_TIMEOUT`.
fn run(mut cmd: Command, input: &[u8]) -> Ran {
    let what = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    let mut stdin = child.stdin.take().expect("stdin");
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let mut out = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let mut err = child.stderr.take().expect("stderr");
    let debug = std::env::var_os("CLIENTS_DEBUG").is_some();
    let err_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        let s = String::from_utf8_lossy(&v).into_owned();
        if debug {
            eprint!("{s}");
        }
        s
    });
    let deadline = Instant::now() + RUN_TIMEOUT;
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait for the client") {
            break format!("{st}");
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break format!("killed after {} s", RUN_TIMEOUT.as_secs());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = writer.join();
    let stdout = reader.join().expect("stdout reader");
    let stderr = err_reader.join().expect("stderr reader");
    Ran { ok: status == "exit status: 0", status, stdout, stderr }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    assert!(s.len().is_multiple_of(2), "odd-length hex {s:?}");
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex")).collect()
}

fn clients_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients")
}

/// Runs a tool's version command, so that its absence fails with what to install.
fn version_of(mut cmd: Command, install: &str) -> String {
    let what = format!("{cmd:?}");
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {what}: {e}\n{install}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{install}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

// ---------------------------------------------------------------------------------------------
// kcat
// ---------------------------------------------------------------------------------------------

/// Debian's kcat, a command-line client on librdkafka: `-P` to produce (delivery reports on
/// stderr at `-v -v`), `-C` for the simple (assigning) consumer, `-G` for the balanced
/// consumer group, whose auto-commit commits what it printed when it closes.
struct Kcat {
    name: String,
}

/// The kcat on the PATH, with the system's librdkafka: `cargo test` puts the build
/// directories of native libraries on LD_LIBRARY_PATH, and one of them holds the librdkafka
/// that the rdkafka crate built, which kcat would load instead.
fn kcat() -> Command {
    let mut c = Command::new("kcat");
    c.env_remove("LD_LIBRARY_PATH");
    c
}

/// Partition, offset, key and value lengths, then key and value as they are.
const KCAT_FORMAT: &str = "%p %o %K %S %k %s\n";

impl Kcat {
    fn find() -> Kcat {
        let mut c = kcat();
        c.arg("-V");
        let v = version_of(
            c,
            "kcat is missing: install Debian's kcat (apt-get install -y kcat), as tests/clients/setup.sh does",
        );
        // "Version 1.7.1 (JSON, ..., librdkafka 2.0.2 builtin.features=...)"
        let kcat = v.split("Version ").nth(1).and_then(|r| r.split_whitespace().next()).unwrap_or("?");
        let rdkafka = v.split("librdkafka ").nth(1).and_then(|r| r.split_whitespace().next()).unwrap_or("?");
        Kcat { name: format!("kcat {kcat} (librdkafka {rdkafka})") }
    }

    fn command(&self, bootstrap: &str) -> Command {
        let mut c = kcat();
        c.arg("-b").arg(bootstrap);
        if std::env::var_os("CLIENTS_DEBUG").is_some() {
            c.args(["-d", "protocol,consumer,cgrp,topic,fetch"]);
        }
        c
    }

    fn run_ok(&self, cmd: Command, input: &[u8], what: &str) -> Ran {
        let r = run(cmd, input);
        assert!(r.ok, "[{}] {what}: kcat {}; stderr:\n{}", self.name, r.status, r.stderr_tail(40));
        r
    }

    /// Parses `KCAT_FORMAT` output.
    fn parse(&self, out: &[u8]) -> Vec<Got> {
        let mut got = Vec::new();
        let mut rest = out;
        while !rest.is_empty() {
            let mut fields = Vec::new();
            for _ in 0..4 {
                let sp = rest.iter().position(|&b| b == b' ').unwrap_or_else(|| {
                    panic!("[{}] kcat output cut short: {:?}", self.name, String::from_utf8_lossy(rest))
                });
                let f = std::str::from_utf8(&rest[..sp]).expect("ascii number");
                fields.push(f.parse::<i64>().unwrap_or_else(|_| panic!("[{}] kcat printed {f:?}", self.name)));
                rest = &rest[sp + 1..];
            }
            let (klen, vlen) = (fields[2].max(0) as usize, fields[3]);
            let key = rest[..klen].to_vec();
            assert_eq!(rest[klen], b' ', "[{}] kcat output after a {klen}-byte key", self.name);
            rest = &rest[klen + 1..];
            let value = (vlen >= 0).then(|| rest[..vlen as usize].to_vec());
            rest = &rest[vlen.max(0) as usize..];
            assert_eq!(rest.first(), Some(&b'\n'), "[{}] kcat output after a {vlen}-byte value", self.name);
            rest = &rest[1..];
            got.push(Got { partition: fields[0] as i32, offset: fields[1], rec: Rec { key, value } });
        }
        got
    }
}

impl Driver for Kcat {
    fn name(&self) -> &str {
        &self.name
    }

    fn codecs(&self) -> &'static [&'static str] {
        &["gzip", "snappy", "lz4", "zstd"]
    }

    fn null_values(&self) -> bool {
        false
    }

    fn create_topic(&self, broker: &Broker, topic: &str, partitions: i32) {
        client::Client::connect(broker.addr).create_topic(topic, partitions, &[]);
    }

    /// kcat's delivery reports name no record, so it produces to one partition per run (`-p`),
    /// where they come in the order of its input: record `i` goes to partition `i % 3`.
    fn produce(&self, broker: &Broker, topic: &str, codec: &str, records: &[Rec]) -> Vec<(i32, i64)> {
        let mut acks = vec![(-1, -1); records.len()];
        for p in 0..PARTITIONS {
            let mine: Vec<usize> = (0..records.len()).filter(|i| *i as i32 % PARTITIONS == p).collect();
            let mut input = Vec::new();
            for &i in &mine {
                input.extend_from_slice(&records[i].key);
                input.push(b':');
                input.extend_from_slice(records[i].value.as_deref().expect("kcat records have values"));
                input.push(b'\n');
            }
            let mut c = self.command(&broker.bootstrap());
            c.args(["-P", "-t", topic, "-p", &p.to_string(), "-K:", "-z", codec, "-v", "-v"]);
            c.args(["-X", "acks=all", "-X", "linger.ms=5"]);
            let r = self.run_ok(c, &input, &format!("producing with {codec} to partition {p}"));
            let reports: Vec<(i32, i64)> = r
                .stderr
                .lines()
                .filter_map(|l| l.split("Message delivered to partition ").nth(1))
                .map(|l| {
                    // "0 (offset 5) on broker 0"
                    let parsed = l
                        .split_once(" (offset ")
                        .and_then(|(part, rest)| Some((part.parse().ok()?, rest.split(')').next()?.parse().ok()?)));
                    parsed.unwrap_or_else(|| panic!("[{}] delivery report {l:?}", self.name))
                })
                .collect();
            assert_eq!(
                reports.len(),
                mine.len(),
                "[{}] {} delivery reports for {} records to partition {p}; stderr:\n{}",
                self.name,
                reports.len(),
                mine.len(),
                r.stderr_tail(20)
            );
            for (&i, at) in mine.iter().zip(reports) {
                acks[i] = at;
            }
        }
        acks
    }

    fn read_assigned(&self, bootstrap: &str, topic: &str, count: usize, from: Option<(i32, i64)>) -> Vec<Got> {
        let mut c = self.command(bootstrap);
        c.args(["-C", "-t", topic, "-e", "-f", KCAT_FORMAT, "-X", "check.crcs=true"]);
        match from {
            None => c.args(["-o", "beginning"]),
            Some((p, o)) => c.args(["-p", &p.to_string(), "-o", &o.to_string()]),
        };
        let r = self.run_ok(c, b"", "reading by assignment");
        let got = self.parse(&r.stdout);
        assert_eq!(
            got.len(),
            count,
            "[{}] read {} of {count} records; stderr:\n{}",
            self.name,
            got.len(),
            r.stderr_tail(20)
        );
        got
    }

    /// `-c COUNT` makes kcat stop after printing that many records; it then closes the
    /// consumer, which commits (auto-commit) the offsets after the records it printed. `-e`
    /// stops it at the end of its partitions should it find fewer.
    fn read_group(
        &self,
        broker: &Broker,
        topic: &str,
        group: &str,
        count: usize,
    ) -> (Vec<Got>, Option<BTreeMap<i32, i64>>) {
        let mut c = self.command(&broker.bootstrap());
        c.args(["-G", group, "-c", &count.to_string(), "-e", "-f", KCAT_FORMAT]);
        c.args(["-X", "auto.offset.reset=earliest", "-X", "enable.auto.commit=true"]);
        c.args(["-X", "auto.commit.interval.ms=500", "-X", "check.crcs=true"]);
        c.arg(topic);
        let r = self.run_ok(c, b"", &format!("reading in group {group}"));
        let got = self.parse(&r.stdout);
        assert_eq!(
            got.len(),
            count,
            "[{}] read {} of {count} records in group {group}; stderr:\n{}",
            self.name,
            got.len(),
            r.stderr_tail(20)
        );
        (got, None)
    }
}

// ---------------------------------------------------------------------------------------------
// kafka-python and kafkajs: programs in tests/clients speaking JSON lines
// ---------------------------------------------------------------------------------------------

/// A suite program (`tests/clients/*_suite.*`) run by an interpreter; see the programs for
/// their commands.
struct Script {
    name: String,
    /// The program and its first argument: an interpreter and its script, or the Go
    /// clients' binary and the library it is to use.
    interpreter: PathBuf,
    script: PathBuf,
    codecs: &'static [&'static str],
    /// Turns the client's debug log on (`CLIENTS_DEBUG`).
    debug: fn(&mut Command),
}

impl Script {
    fn kafka_python() -> Script {
        let dir = clients_dir();
        let python = dir.join(".venv/bin/python");
        let install = "kafka-python is not installed: run tests/clients/setup.sh, which makes tests/clients/.venv \
                       (python3 -m venv tests/clients/.venv && tests/clients/.venv/bin/pip install \
                       -r tests/clients/requirements.txt)";
        assert!(python.exists(), "{} is missing. {install}", python.display());
        let mut c = Command::new(&python);
        c.args(["-c", "import kafka, snappy, lz4.frame, zstandard; print(kafka.__version__)"]);
        let v = version_of(c, install);
        Script {
            name: format!("kafka-python {v}"),
            interpreter: python,
            script: dir.join("kafka_python_suite.py"),
            codecs: &["gzip", "snappy", "lz4", "zstd"],
            debug: |c| {
                c.arg("--debug");
            },
        }
    }

    fn kafkajs() -> Script {
        let dir = clients_dir();
        let install = "kafkajs is not installed: run tests/clients/setup.sh, which runs npm ci in tests/clients \
                       (Node.js and npm must be on the PATH)";
        let node = PathBuf::from("node");
        let mut c = Command::new(&node);
        c.arg("--version");
        version_of(c, install);
        let pkg = dir.join("node_modules/kafkajs/package.json");
        let pkg = std::fs::read_to_string(&pkg).unwrap_or_else(|e| panic!("{}: {e}. {install}", pkg.display()));
        let pkg: serde_json::Value = serde_json::from_str(&pkg).expect("kafkajs's package.json");
        assert!(dir.join("node_modules/kafkajs-snappy").exists(), "kafkajs-snappy is missing. {install}");
        Script {
            name: format!("kafkajs {}", pkg["version"].as_str().unwrap_or("?")),
            interpreter: node,
            script: dir.join("kafkajs_suite.js"),
            codecs: &["none", "gzip", "snappy"],
            debug: |c| {
                c.env("KAFKAJS_DEBUG", "1");
            },
        }
    }

    /// A Go client of `tests/clients/go` (built by setup.sh): `franz` (franz-go) or `sarama`.
    fn go(lib: &str) -> Script {
        let dir = clients_dir().join("go");
        let binary = dir.join("bin/goclients");
        let install = "the Go clients are not built: run tests/clients/setup.sh, which builds tests/clients/go \
                       (go build -o bin/goclients . there; Go must be on the PATH)";
        assert!(binary.exists(), "{} is missing. {install}", binary.display());
        let module = match lib {
            "franz" => "github.com/twmb/franz-go ",
            "sarama" => "github.com/IBM/sarama ",
            other => panic!("no Go client {other}"),
        };
        let go_mod = std::fs::read_to_string(dir.join("go.mod")).expect("tests/clients/go/go.mod");
        let version = go_mod.lines().find_map(|l| l.trim().strip_prefix(module)).unwrap_or("?").trim().to_string();
        Script {
            name: format!("{} {version}", module.trim().rsplit('/').next().unwrap_or(lib)),
            interpreter: binary,
            script: PathBuf::from(lib),
            codecs: &["none", "gzip", "snappy", "lz4", "zstd"],
            debug: |c| {
                c.env("GOCLIENTS_DEBUG", "1");
            },
        }
    }

    /// Runs one command; returns its JSON lines.
    fn call(&self, args: &[&str], input: &[u8], what: &str) -> Vec<serde_json::Value> {
        let mut c = Command::new(&self.interpreter);
        c.arg(&self.script);
        if std::env::var_os("CLIENTS_DEBUG").is_some() {
            (self.debug)(&mut c);
        }
        c.args(args);
        let r = run(c, input);
        let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&r.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("[{}] {what}: not JSON ({e}): {l}", self.name)))
            .collect();
        assert!(
            r.ok,
            "[{}] {what}: {} after {} lines of output; stderr:\n{}",
            self.name,
            r.status,
            lines.len(),
            r.stderr_tail(40)
        );
        lines
    }

    fn records(&self, lines: &[serde_json::Value]) -> Vec<Got> {
        lines
            .iter()
            .filter(|l| l.get("committed").is_none())
            .map(|l| Got {
                partition: l["partition"].as_i64().expect("partition") as i32,
                offset: l["offset"].as_i64().expect("offset"),
                rec: Rec {
                    key: unhex(l["key"].as_str().unwrap_or_else(|| panic!("[{}] a null key in {l}", self.name))),
                    value: l["value"].as_str().map(unhex),
                },
            })
            .collect()
    }
}

impl Driver for Script {
    fn name(&self) -> &str {
        &self.name
    }

    fn codecs(&self) -> &'static [&'static str] {
        self.codecs
    }

    fn null_values(&self) -> bool {
        true
    }

    fn create_topic(&self, broker: &Broker, topic: &str, partitions: i32) {
        self.call(&["create", &broker.bootstrap(), topic, &partitions.to_string()], b"", "creating the topic");
    }

    fn produce(&self, broker: &Broker, topic: &str, codec: &str, records: &[Rec]) -> Vec<(i32, i64)> {
        let mut input = String::new();
        for r in records {
            let value = r.value.as_deref().map(hex);
            input.push_str(&serde_json::json!({ "key": hex(&r.key), "value": value }).to_string());
            input.push('\n');
        }
        let lines = self.call(
            &["produce", &broker.bootstrap(), topic, codec],
            input.as_bytes(),
            &format!("producing with {codec}"),
        );
        lines
            .iter()
            .map(|l| (l["partition"].as_i64().expect("partition") as i32, l["offset"].as_i64().expect("offset")))
            .collect()
    }

    fn read_assigned(&self, bootstrap: &str, topic: &str, count: usize, from: Option<(i32, i64)>) -> Vec<Got> {
        let count_arg = count.to_string();
        let from_arg = from.map(|(p, o)| format!("{p}:{o}"));
        let mut args = vec!["assigned", bootstrap, topic, &count_arg];
        if let Some(f) = &from_arg {
            args.push(f);
        }
        self.records(&self.call(&args, b"", "reading by assignment"))
    }

    fn read_group(
        &self,
        broker: &Broker,
        topic: &str,
        group: &str,
        count: usize,
    ) -> (Vec<Got>, Option<BTreeMap<i32, i64>>) {
        let lines = self.call(
            &["group", &broker.bootstrap(), topic, group, &count.to_string()],
            b"",
            &format!("reading in group {group}"),
        );
        let committed = lines.iter().find_map(|l| l.get("committed")).unwrap_or_else(|| {
            panic!("[{}] no committed line from the group run", self.name);
        });
        let committed = committed
            .as_object()
            .expect("committed: an object")
            .iter()
            .map(|(p, o)| (p.parse::<i32>().expect("partition"), o.as_i64().expect("offset")))
            .collect();
        (self.records(&lines), Some(committed))
    }
}
