//! Interop with librdkafka (the C client, through rust-rdkafka, built from source).
//!
//! For every compression codec librdkafka is built with here (none, gzip, snappy, lz4,
//! zstd) — one test each, each with its own broker — this:
//!
//! 1. creates a topic with 3 partitions through the Admin API (CreateTopics) and waits until
//!    Metadata shows the 3 partitions with a leader;
//! 2. produces keyed records (key `k-<i>`, deterministic values of varied sizes including an
//!    empty and a null value, explicit non-monotonic timestamps, 1-2 headers each, some with
//!    empty or null header values) with `acks=all`, and records every delivery report's
//!    (partition, offset);
//! 3. reads the three partitions back with a `BaseConsumer` assigned at `Offset::Beginning`
//!    (no group membership, no commits), with `check.crcs=true`;
//! 4. compares every key, value, header, timestamp, partition and offset with what was
//!    acknowledged, checks that each partition's offsets are exactly `0..n`, and that the
//!    watermarks (ListOffsets) are `(0, n)`;
//! 5. checks librdkafka really used what is under test: it silently sends uncompressed
//!    batches when ApiVersions suggests the broker cannot take a codec, so the protocol
//!    features it enabled (MsgVer2, and LZ4 / ZSTD) are checked from its debug log.
//!
//! A sixth test sends 2,000 records uncompressed with `linger.ms=0` and
//! `batch.num.messages=1` (one record per batch), and consumes with a small
//! `max.partition.fetch.bytes`, so fetch responses end at many different batch boundaries.
//!
//! Set `RDKAFKA_DEBUG=protocol,msg,fetch` (any librdkafka `debug` contexts) to get the
//! client's debug log live on stderr.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, Timestamp, TopicPartitionList};

use crate::librdkafka::{self, block_on, Ctx};

const PARTITIONS: i32 = 3;
/// Upper bound for each phase (topic creation, producing, consuming).
const PHASE_TIMEOUT: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------------------------
// The tests
// ---------------------------------------------------------------------------------------------

#[test]
fn rdkafka_roundtrip_compression_none() {
    let _machine = crate::machine::shared();
    run(Scenario::codec("none"));
}

#[test]
fn rdkafka_roundtrip_compression_gzip() {
    let _machine = crate::machine::shared();
    run(Scenario::codec("gzip"));
}

#[test]
fn rdkafka_roundtrip_compression_snappy() {
    let _machine = crate::machine::shared();
    run(Scenario::codec("snappy"));
}

#[test]
fn rdkafka_roundtrip_compression_lz4() {
    let _machine = crate::machine::shared();
    run(Scenario::codec("lz4"));
}

#[test]
fn rdkafka_roundtrip_compression_zstd() {
    let _machine = crate::machine::shared();
    run(Scenario::codec("zstd"));
}

/// One record per batch, and small per-partition fetch limits, so that fetches return (and
/// the client resumes from) many different batch boundaries.
#[test]
fn rdkafka_roundtrip_one_record_per_batch() {
    let _machine = crate::machine::shared();
    run(Scenario {
        name: "tiny-batches",
        codec: "none",
        records: 2_000,
        producer_extra: &[("linger.ms", "0"), ("batch.num.messages", "1")],
        // Smaller than the largest records (up to ~60 KB): for a batch larger than the limit
        // the broker must return it whole (KIP-74, Fetch v3+) or at least a truncated prefix
        // of it (librdkafka then doubles its limit for the partition and fetches again); an
        // empty answer stalls the consumer on that offset.
        consumer_extra: &[("max.partition.fetch.bytes", "16384")],
    });
}

// ---------------------------------------------------------------------------------------------
// Scenario runner
// ---------------------------------------------------------------------------------------------

struct Scenario {
    name: &'static str,
    codec: &'static str,
    records: usize,
    producer_extra: &'static [(&'static str, &'static str)],
    consumer_extra: &'static [(&'static str, &'static str)],
}

impl Scenario {
    fn codec(codec: &'static str) -> Scenario {
        Scenario {
            name: codec,
            codec,
            records: 10_000,
            // A few ms of linger so batches hold many records (librdkafka's default is 5 ms).
            producer_extra: &[("linger.ms", "5")],
            consumer_extra: &[],
        }
    }
}

/// What we sent for record `i`, and what we expect to read back.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Rec {
    key: Vec<u8>,
    value: Option<Vec<u8>>,
    headers: Vec<(String, Option<Vec<u8>>)>,
    timestamp: i64,
}

/// What the consumer read, with where it was read from.
#[derive(Clone, Debug)]
struct Got {
    partition: i32,
    offset: i64,
    rec: Rec,
}

fn run(s: Scenario) {
    let broker = support::Broker::start_args(&["--flush", "os"]);
    let bootstrap = broker.bootstrap();
    let topic = format!("rdkafka-interop-{}", s.name);
    let n = s.records;
    let ts_base = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64 - 60_000;
    let expected: Vec<Rec> = (0..n).map(|i| expected_record(i, ts_base)).collect();

    // 1. Topic with 3 partitions.
    create_topic(&bootstrap, &topic, s.name);

    // 2. Produce and collect the acknowledgements.
    let acks = produce(&s, &bootstrap, &topic, &expected);
    let mut per_partition: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
    for (i, &(p, o)) in acks.iter().enumerate() {
        assert!(
            (0..PARTITIONS).contains(&p),
            "[{}] record {i} acknowledged on partition {p}, but the topic has {PARTITIONS}",
            s.name
        );
        per_partition.entry(p).or_default().push(o);
    }
    for p in 0..PARTITIONS {
        let offsets = per_partition.entry(p).or_default();
        offsets.sort_unstable();
        assert!(
            !offsets.is_empty(),
            "[{}] no record was acknowledged on partition {p} of {n} keyed records: does the \
             broker report {PARTITIONS} partitions in Metadata?",
            s.name
        );
        let want: Vec<i64> = (0..offsets.len() as i64).collect();
        if *offsets != want {
            panic!(
                "[{}] acknowledged offsets on partition {p} are not exactly 0..{} (contiguous, \
                 no duplicates): {}",
                s.name,
                offsets.len(),
                describe_offset_gaps(offsets)
            );
        }
    }
    let counts: BTreeMap<i32, usize> = per_partition.iter().map(|(p, o)| (*p, o.len())).collect();

    // 3. Consume everything back.
    let (got, consumer_errors, consumer) = consume(&s, &bootstrap, &topic, n);

    // 4. Compare.
    let mut by_key: HashMap<Vec<u8>, usize> = HashMap::with_capacity(n);
    for (i, r) in expected.iter().enumerate() {
        by_key.insert(r.key.clone(), i);
    }
    let mut seen = vec![0usize; n];
    let mut problems: Vec<String> = Vec::new();
    let mut by_partition: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
    for g in &got {
        by_partition.entry(g.partition).or_default().push(g.offset);
        let Some(&i) = by_key.get(&g.rec.key) else {
            problems.push(format!(
                "unknown key {:?} read at partition {} offset {}",
                String::from_utf8_lossy(&g.rec.key),
                g.partition,
                g.offset
            ));
            continue;
        };
        seen[i] += 1;
        let (ap, ao) = acks[i];
        if (g.partition, g.offset) != (ap, ao) {
            problems.push(format!(
                "record {i} (key k-{i}) read at partition {} offset {}, but was acknowledged \
                 at partition {ap} offset {ao}",
                g.partition, g.offset
            ));
        }
        let want = &expected[i];
        if g.rec.value != want.value {
            problems.push(format!(
                "record {i} (p{ap} o{ao}) value differs: got {}, sent {}",
                describe_bytes(g.rec.value.as_deref()),
                describe_bytes(want.value.as_deref())
            ));
        }
        if g.rec.headers != want.headers {
            problems.push(format!(
                "record {i} (p{ap} o{ao}) headers differ: got {:?}, sent {:?}",
                describe_headers(&g.rec.headers),
                describe_headers(&want.headers)
            ));
        }
        if g.rec.timestamp != want.timestamp {
            problems.push(format!(
                "record {i} (p{ap} o{ao}) timestamp differs: got {} (CreateTime expected), \
                 sent {}",
                g.rec.timestamp, want.timestamp
            ));
        }
    }
    for (i, &c) in seen.iter().enumerate() {
        if c == 0 {
            problems.push(format!(
                "record {i} (key k-{i}, acknowledged at p{} o{}) was never read back",
                acks[i].0, acks[i].1
            ));
        } else if c > 1 {
            problems.push(format!("record {i} (key k-{i}) was read {c} times"));
        }
    }
    for (p, offsets) in &by_partition {
        let want: Vec<i64> = (0..counts.get(p).copied().unwrap_or(0) as i64).collect();
        if *offsets != want {
            problems.push(format!(
                "partition {p}: offsets read, in delivery order, are not exactly 0..{}: {}",
                want.len(),
                describe_offset_gaps(offsets)
            ));
        }
    }
    if !problems.is_empty() {
        let total = problems.len();
        problems.truncate(25);
        panic!(
            "[{}] {total} problem(s) comparing {} records read with {n} acknowledged \
             (first {}):\n  {}\nconsumer errors (first 10): {:?}\nconsumer log tail:\n{}",
            s.name,
            got.len(),
            problems.len(),
            problems.join("\n  "),
            consumer_errors.iter().take(10).collect::<Vec<_>>(),
            consumer.context().log_tail(30)
        );
    }

    // Watermarks through ListOffsets: (log start, high watermark) == (0, count).
    for p in 0..PARTITIONS {
        let want = counts.get(&p).copied().unwrap_or(0) as i64;
        let wm = consumer.fetch_watermarks(&topic, p, Duration::from_secs(10));
        match wm {
            Ok((low, high)) => assert_eq!(
                (low, high),
                (0, want),
                "[{}] watermarks (ListOffsets earliest, latest) of partition {p}: got \
                 ({low}, {high}), expected (0, {want})",
                s.name
            ),
            Err(e) => panic!(
                "[{}] ListOffsets (fetch_watermarks) of partition {p} failed: {e}\nlog tail:\n{}",
                s.name,
                consumer.context().log_tail(30)
            ),
        }
    }
    drop(consumer);
    drop(broker);
}

// ---------------------------------------------------------------------------------------------
// Topic creation
// ---------------------------------------------------------------------------------------------

fn create_topic(bootstrap: &str, topic: &str, name: &str) {
    let ctx = Ctx::new(&format!("{name} admin"));
    let admin: AdminClient<Ctx> = base_config(bootstrap)
        .create_with_context(ctx)
        .unwrap_or_else(|e| panic!("[{name}] creating the AdminClient failed: {e}"));
    let opts = AdminOptions::new()
        .request_timeout(Some(Duration::from_secs(30)))
        .operation_timeout(Some(Duration::from_secs(30)));
    let new_topic = NewTopic::new(topic, PARTITIONS, TopicReplication::Fixed(1));
    // (rust-rdkafka routes an AdminClient's log lines to a queue nothing polls, so there is
    // no client log to show here; the broker's own log is on stderr.)
    let res = block_on(admin.create_topics([&new_topic], &opts), PHASE_TIMEOUT)
        .unwrap_or_else(|| panic!("[{name}] CreateTopics did not complete in {PHASE_TIMEOUT:?}"))
        .unwrap_or_else(|e| panic!("[{name}] CreateTopics request failed: {e}"));
    assert_eq!(res.len(), 1, "[{name}] CreateTopics returned {} results for 1 topic", res.len());
    match &res[0] {
        Ok(t) => assert_eq!(t, topic, "[{name}] CreateTopics answered for another topic"),
        Err((t, code)) => {
            panic!("[{name}] CreateTopics of {t:?} with {PARTITIONS} partitions failed: {code:?}")
        }
    }

    // Wait until Metadata shows the topic with all partitions led, so the producer
    // partitions over 3 (librdkafka would otherwise use whatever it sees first).
    let deadline = Instant::now() + PHASE_TIMEOUT;
    loop {
        let last = match admin.inner().fetch_metadata(Some(topic), Duration::from_secs(5)) {
            Ok(md) => {
                let t = md.topics().iter().find(|t| t.name() == topic);
                match t {
                    Some(t)
                        if t.error().is_none()
                            && t.partitions().len() == PARTITIONS as usize
                            && t.partitions().iter().all(|p| p.error().is_none() && p.leader() >= 0) =>
                    {
                        return;
                    }
                    Some(t) => format!(
                        "topic error {:?}, partitions {:?}",
                        t.error(),
                        t.partitions().iter().map(|p| (p.id(), p.leader(), p.error())).collect::<Vec<_>>()
                    ),
                    None => "topic absent from the Metadata response".into(),
                }
            }
            Err(e) => format!("Metadata request failed: {e}"),
        };
        if Instant::now() > deadline {
            panic!(
                "[{name}] topic {topic:?} did not show {PARTITIONS} led partitions in Metadata \
                 within {PHASE_TIMEOUT:?}; last: {last}"
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

// ---------------------------------------------------------------------------------------------
// Producing
// ---------------------------------------------------------------------------------------------

/// Produces `expected` and returns each record's acknowledged (partition, offset).
fn produce(s: &Scenario, bootstrap: &str, topic: &str, expected: &[Rec]) -> Vec<(i32, i64)> {
    let n = expected.len();
    // "broker" debug: to see which protocol features librdkafka enabled (checked below).
    let mut cfg = base_config(bootstrap);
    librdkafka::debug(&mut cfg, "broker");
    cfg.set("acks", "all")
        // Idempotent, as most deployments run it: InitProducerId and sequence-numbered batches.
        .set("enable.idempotence", "true")
        .set("compression.type", s.codec)
        .set("message.timeout.ms", "60000")
        .set("queue.buffering.max.messages", "100000");
    for (k, v) in s.producer_extra {
        cfg.set(*k, *v);
    }
    let producer: BaseProducer<Ctx> = cfg
        .create_with_context(Ctx::new(&format!("{} producer", s.name)))
        .unwrap_or_else(|e| panic!("[{}] creating the producer failed: {e}", s.name));

    let deadline = Instant::now() + PHASE_TIMEOUT;
    for (i, r) in expected.iter().enumerate() {
        let mut headers = OwnedHeaders::new_with_capacity(r.headers.len());
        for (k, v) in &r.headers {
            headers = headers.insert(Header { key: k.as_str(), value: v.as_deref() });
        }
        let mut record: BaseRecord<'_, [u8], [u8], usize> =
            BaseRecord::with_opaque_to(topic, i).key(r.key.as_slice()).headers(headers).timestamp(r.timestamp);
        if let Some(v) = &r.value {
            record = record.payload(v.as_slice());
        }
        librdkafka::send(&producer, record, deadline, &format!("[{}] record {i} of {n}", s.name));
        producer.poll(Duration::ZERO);
    }
    if let Err(e) = producer.flush(PHASE_TIMEOUT) {
        panic!(
            "[{}] flush did not complete within {PHASE_TIMEOUT:?}: {e}; {} of {n} delivery \
             reports received\nlog tail:\n{}",
            s.name,
            producer.context().acks(n).iter().filter(|a| a.is_some()).count(),
            producer.context().log_tail(30)
        );
    }
    // Serve any delivery reports still queued after the flush.
    producer.poll(Duration::from_millis(100));

    let ctx = producer.context();
    // librdkafka silently sends uncompressed batches when, going by ApiVersions, it thinks
    // the broker cannot take the codec (and it only says so at NOTICE once the host has been
    // up for a day). So check the protocol features it enabled for the broker (logged by the
    // "broker" debug context after every ApiVersions exchange): without this a "zstd" test
    // could pass without a single compressed batch.
    let features: Vec<String> = ctx
        .logs()
        .iter()
        .filter_map(|l| l.split_once("Updated enabled protocol features to ").map(|(_, f)| f.to_string()))
        .collect();
    assert!(
        !features.is_empty(),
        "[{}] librdkafka never logged the protocol features it enabled for the broker (is \
         ApiVersions answered?)\nlog tail:\n{}",
        s.name,
        ctx.log_tail(30)
    );
    let mut needed = vec!["MsgVer2"]; // record batches (v2), needed for headers
    match s.codec {
        "lz4" => needed.push("LZ4"),   // librdkafka wants FindCoordinator advertised
        "zstd" => needed.push("ZSTD"), // librdkafka wants Produce v7+ and Fetch v10+
        _ => {}
    }
    for f in &features {
        let enabled: Vec<&str> = f.trim().split(',').collect();
        for want in &needed {
            assert!(
                enabled.contains(want),
                "[{}] librdkafka did not enable the {want} protocol feature for the broker, so \
                 it did not produce what this test means to test (MsgVer2 needs Produce v3+ and \
                 Fetch v4+; LZ4 needs FindCoordinator in ApiVersions; ZSTD needs Produce v7+ \
                 and Fetch v10+); enabled: {f}",
                s.name
            );
        }
    }

    let acks = ctx.acks(n);
    let mut out = Vec::with_capacity(n);
    let mut failures: Vec<String> = Vec::new();
    for (i, a) in acks.iter().enumerate() {
        match a {
            Some(Ok(po)) => out.push(*po),
            Some(Err(e)) => failures.push(format!("record {i}: {e}")),
            None => failures.push(format!("record {i}: no delivery report")),
        }
    }
    let dup = ctx.duplicate_reports(n);
    assert!(dup.is_empty(), "[{}] duplicate delivery reports for records {:?}", s.name, &dup[..dup.len().min(20)]);
    if !failures.is_empty() {
        let total = failures.len();
        failures.truncate(20);
        panic!(
            "[{}] {total} of {n} records were not acknowledged (first {}):\n  {}\nlog tail:\n{}",
            s.name,
            failures.len(),
            failures.join("\n  "),
            ctx.log_tail(30)
        );
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Consuming
// ---------------------------------------------------------------------------------------------

fn consume(s: &Scenario, bootstrap: &str, topic: &str, n: usize) -> (Vec<Got>, Vec<String>, BaseConsumer<Ctx>) {
    let mut cfg = base_config(bootstrap);
    // librdkafka needs a group.id for a consumer handle; nothing joins or commits.
    cfg.set("group.id", format!("rdkafka-interop-{}", s.name))
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("enable.partition.eof", "false")
        // Verify the CRC-32C of every record batch the broker returns.
        .set("check.crcs", "true");
    for (k, v) in s.consumer_extra {
        cfg.set(*k, *v);
    }
    let consumer: BaseConsumer<Ctx> = cfg
        .create_with_context(Ctx::new(&format!("{} consumer", s.name)))
        .unwrap_or_else(|e| panic!("[{}] creating the consumer failed: {e}", s.name));
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition_offset(topic, p, Offset::Beginning).unwrap();
    }
    consumer.assign(&tpl).unwrap_or_else(|e| panic!("[{}] assign() failed: {e}", s.name));

    let mut got: Vec<Got> = Vec::with_capacity(n);
    let mut errors: Vec<String> = Vec::new();
    let deadline = Instant::now() + PHASE_TIMEOUT;
    while got.len() < n && Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(200)) {
            None => {}
            Some(Ok(m)) => got.push(Got {
                partition: m.partition(),
                offset: m.offset(),
                rec: Rec {
                    key: m.key().map(<[u8]>::to_vec).unwrap_or_default(),
                    value: m.payload().map(<[u8]>::to_vec),
                    headers: m
                        .headers()
                        .map(|hs| hs.iter().map(|h| (h.key.to_string(), h.value.map(<[u8]>::to_vec))).collect())
                        .unwrap_or_default(),
                    timestamp: match m.timestamp() {
                        Timestamp::CreateTime(t) => t,
                        // Marks a wrong timestamp type: the comparison then reports it.
                        Timestamp::LogAppendTime(t) => -1_000_000 - t,
                        Timestamp::NotAvailable => -1,
                    },
                },
            }),
            Some(Err(e)) if errors.len() < 1000 => errors.push(e.to_string()),
            Some(Err(_)) => {}
        }
    }
    if got.len() < n {
        let mut per_p: BTreeMap<i32, usize> = BTreeMap::new();
        for g in &got {
            *per_p.entry(g.partition).or_default() += 1;
        }
        panic!(
            "[{}] read only {} of {n} records within {PHASE_TIMEOUT:?} (per partition: \
             {per_p:?})\nconsumer errors (first 10): {:?}\nconsumer log tail:\n{}",
            s.name,
            got.len(),
            errors.iter().take(10).collect::<Vec<_>>(),
            consumer.context().log_tail(30)
        );
    }
    // Anything beyond what was produced (duplicates, phantom records) shows up here.
    let extra_until = Instant::now() + Duration::from_secs(1);
    while Instant::now() < extra_until {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
            got.push(Got {
                partition: m.partition(),
                offset: m.offset(),
                rec: Rec {
                    key: m.key().map(<[u8]>::to_vec).unwrap_or_default(),
                    value: m.payload().map(<[u8]>::to_vec),
                    headers: Vec::new(),
                    timestamp: 0,
                },
            });
        }
    }
    (got, errors, consumer)
}

// ---------------------------------------------------------------------------------------------
// Deterministic records
// ---------------------------------------------------------------------------------------------

fn expected_record(i: usize, ts_base: i64) -> Rec {
    Rec {
        key: format!("k-{i}").into_bytes(),
        value: value_for(i),
        headers: headers_for(i),
        // Not monotonic within a batch (steps back every 997 records, and jumps between
        // records of different partitions), so first/max timestamp and deltas all matter.
        timestamp: ts_base + (i % 997) as i64 * 3,
    }
}

fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Sizes from 0 to ~60 KB; a third incompressible, the rest compressible text.
fn value_for(i: usize) -> Option<Vec<u8>> {
    if i % 1000 == 999 {
        return None; // null value (tombstone): length -1 on the wire
    }
    if i % 1000 == 499 {
        return Some(Vec::new()); // empty, not null: length 0
    }
    let len = if i % 50 == 49 {
        20_000 + (i * 7919) % 40_000
    } else {
        match i % 10 {
            0 => 1,
            1..=5 => 8 + (i * 37) % 120,
            6..=8 => 200 + (i * 131) % 1800,
            _ => 2_000 + (i * 977) % 14_000,
        }
    };
    let mut seed = i as u64;
    let mut v = format!("v-{i}:").into_bytes();
    let incompressible = i.is_multiple_of(3);
    const ALPHABET: &[u8; 16] = b"etaoin shrdlucmf";
    while v.len() < len {
        let r = splitmix64(&mut seed);
        if incompressible {
            v.extend_from_slice(&r.to_le_bytes());
        } else {
            v.extend(r.to_le_bytes().iter().map(|b| ALPHABET[(b & 15) as usize]));
        }
    }
    v.truncate(len);
    Some(v)
}

/// One or two headers; the second sometimes null, sometimes empty, sometimes binary.
fn headers_for(i: usize) -> Vec<(String, Option<Vec<u8>>)> {
    let mut h = vec![("idx".to_string(), Some(i.to_string().into_bytes()))];
    if i % 2 == 1 {
        let v = match i % 10 {
            3 => None,
            5 => Some(Vec::new()),
            _ => Some((0..(i * 13) % 300).map(|j| (i * 31 + j * 7) as u8).collect()),
        };
        h.push((format!("trace-{}", i % 7), v));
    }
    h
}

// ---------------------------------------------------------------------------------------------
// Client plumbing
// ---------------------------------------------------------------------------------------------

/// The config every client here starts from.
fn base_config(bootstrap: &str) -> ClientConfig {
    let mut cfg = librdkafka::config(bootstrap);
    cfg.set("client.id", "ringbroker-rdkafka-interop");
    cfg
}

// ---------------------------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------------------------

fn describe_bytes(b: Option<&[u8]>) -> String {
    match b {
        None => "null".into(),
        Some(b) => {
            let head = &b[..b.len().min(24)];
            format!("{} bytes starting {:?}", b.len(), String::from_utf8_lossy(head))
        }
    }
}

fn describe_headers(h: &[(String, Option<Vec<u8>>)]) -> Vec<(String, String)> {
    h.iter().map(|(k, v)| (k.clone(), describe_bytes(v.as_deref()))).collect()
}

/// A short account of how a list of offsets differs from 0..len.
fn describe_offset_gaps(offsets: &[i64]) -> String {
    let mut notes = Vec::new();
    let mut expect = 0i64;
    for (idx, &o) in offsets.iter().enumerate() {
        if o != expect {
            notes.push(format!("at position {idx} got offset {o}, expected {expect}"));
            if notes.len() >= 5 {
                break;
            }
        }
        expect = o + 1;
    }
    format!(
        "{} offsets, first {:?}, last {:?}; {}",
        offsets.len(),
        offsets.first(),
        offsets.last(),
        if notes.is_empty() { "no gaps found".into() } else { notes.join("; ") }
    )
}
