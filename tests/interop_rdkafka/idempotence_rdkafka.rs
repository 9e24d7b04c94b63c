//! Idempotent producing, two ways:
//!
//! - librdkafka (`enable.idempotence=true`, through rust-rdkafka's `BaseProducer`) sends
//!   100,000 keyed records through a proxy (`support::proxy`) that now and then swallows a
//!   Produce response the broker already acted on and cuts the connection, so the client
//!   retries batches the broker holds. A `BaseConsumer` reading by assignment must then find
//!   every record exactly once, each partition in send order.
//! - at the wire level (`support::client`, batches built with
//!   `ringbroker::protocol::batch::{build_keyed, set_producer}`): InitProducerId, and the
//!   sequence rules — a retried batch gets its original offsets, a gap is
//!   OUT_OF_ORDER_SEQUENCE, an older epoch INVALID_PRODUCER_EPOCH, a transactional id
//!   INVALID_REQUEST — before and after kill -9 and clean restarts.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};
use ringbroker::protocol::batch::{build_keyed, set_producer, KeyValue};
use ringbroker::protocol::messages::produce_response::PartitionProduceResponse;
use ringbroker::protocol::messages::{
    ApiKey, InitProducerIdRequest, InitProducerIdResponse, ProduceResponse, ProducerId, TransactionalId,
};
use ringbroker::protocol::ErrorCode;
use support::client::{self, produce_request, single_produce, Client, PRODUCE_V};
use support::proxy::{DropPolicy, Proxy};
use support::{restart, Broker};

use crate::librdkafka::{self, Ctx};

// =============================================================================================
// librdkafka through the lossy proxy
// =============================================================================================

pub(crate) const PARTITIONS: i32 = 4;
const RECORDS: usize = 100_000;
const PHASE_TIMEOUT: Duration = Duration::from_secs(60);

/// The partition record `i` is sent to (explicitly: the value carries its place in that
/// partition's send order, so the partition must be known before sending).
fn partition_of(i: usize) -> i32 {
    // FNV-1a of the key
    let mut h: u32 = 0x811c_9dc5;
    for b in format!("k-{i}").bytes() {
        h ^= b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    (h % PARTITIONS as u32) as i32
}

/// `i=<i> p=<partition> s=<sequence in the partition> ` and 0..~300 bytes of padding.
fn value_of(i: usize, p: i32, s: u64) -> Vec<u8> {
    let mut v = format!("i={i} p={p} s={s} ").into_bytes();
    let mut x = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for _ in 0..(i * 7919) % 300 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.push(b'a' + (x % 26) as u8);
    }
    v
}

fn parse_id(v: &[u8]) -> Option<(usize, i32, u64)> {
    let s = std::str::from_utf8(v).ok()?;
    let mut it = s.split(' ');
    let i = it.next()?.strip_prefix("i=")?.parse().ok()?;
    let p = it.next()?.strip_prefix("p=")?.parse().ok()?;
    let q = it.next()?.strip_prefix("s=")?.parse().ok()?;
    Some((i, p, q))
}

/// The log line librdkafka's idempotence state machine (debug context `eos`) writes when it
/// drains a partition to retry: `<topic> [<p>] beginning partition drain: drain before retrying`.
const RETRY_DRAIN: &str = "drain before retrying";

/// The config every client here starts from.
fn base_config(bootstrap: &str) -> ClientConfig {
    let mut cfg = librdkafka::config(bootstrap);
    cfg.set("client.id", "ringbroker-idempotence-rdkafka");
    cfg
}

/// Sends the records through `bootstrap`; returns each record's acknowledged (partition,
/// offset) and how many times a partition was drained for a retry.
pub(crate) fn produce(bootstrap: &str, topic: &str) -> (Vec<(i32, i64)>, u64) {
    let mut cfg = base_config(bootstrap);
    // The idempotence state machine's debug lines show the retries (counted by the context).
    librdkafka::debug(&mut cfg, "eos");
    let producer: BaseProducer<Ctx> = cfg
        .set("enable.idempotence", "true")
        .set("message.timeout.ms", "60000")
        .create_with_context(Ctx::new("producer").counting(RETRY_DRAIN))
        .expect("create the producer");
    let mut next_seq = [0u64; PARTITIONS as usize];
    let deadline = Instant::now() + PHASE_TIMEOUT;
    for i in 0..RECORDS {
        let key = format!("k-{i}");
        let p = partition_of(i);
        let value = value_of(i, p, next_seq[p as usize]);
        next_seq[p as usize] += 1;
        let record = BaseRecord::with_opaque_to(topic, i).key(key.as_bytes()).payload(value.as_slice()).partition(p);
        librdkafka::send(&producer, record, deadline, &format!("record {i}"));
        producer.poll(Duration::ZERO);
    }
    let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_secs(10));
    if let Err(e) = producer.flush(left) {
        panic!("flush did not complete: {e}\nlog tail:\n{}", producer.context().log_tail(30));
    }
    producer.poll(Duration::from_millis(100));
    let ctx = producer.context();
    let dups = ctx.duplicate_reports(RECORDS);
    assert!(dups.is_empty(), "duplicate delivery reports for records {:?}", &dups[..dups.len().min(20)]);
    let acks = ctx.acks(RECORDS);
    let mut out = Vec::with_capacity(RECORDS);
    let mut failures = Vec::new();
    for (i, a) in acks.iter().enumerate() {
        match a {
            Some(Ok((p, o))) if *p == partition_of(i) => out.push((*p, *o)),
            Some(Ok((p, o))) => {
                failures.push(format!("record {i}: acknowledged at {p}/{o}, sent to {}", partition_of(i)))
            }
            Some(Err(e)) => failures.push(format!("record {i}: {e}")),
            None => failures.push(format!("record {i}: no delivery report")),
        }
    }
    if !failures.is_empty() {
        let total = failures.len();
        failures.truncate(20);
        panic!(
            "{total} of {RECORDS} records were not acknowledged as sent (first {}):\n  {}\nlog tail:\n{}",
            failures.len(),
            failures.join("\n  "),
            ctx.log_tail(30)
        );
    }
    let retries = ctx.watched();
    (out, retries)
}

/// A record as the consumer read it.
pub(crate) struct Got {
    partition: i32,
    offset: i64,
    key: Option<Vec<u8>>,
    id: Option<(usize, i32, u64)>,
}

/// Reads the topic from the beginning with a `BaseConsumer` assigned every partition.
pub(crate) fn consume(bootstrap: &str, topic: &str) -> Vec<Got> {
    let consumer: BaseConsumer<Ctx> = base_config(bootstrap)
        // librdkafka needs a group.id for a consumer handle; nothing joins or commits.
        .set("group.id", "idempotence-rdkafka")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("enable.partition.eof", "false")
        .set("check.crcs", "true")
        .create_with_context(Ctx::new("consumer"))
        .expect("create the consumer");
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition_offset(topic, p, Offset::Beginning).unwrap();
    }
    consumer.assign(&tpl).expect("assign");
    let mut got = Vec::with_capacity(RECORDS);
    let mut errors = Vec::new();
    let deadline = Instant::now() + PHASE_TIMEOUT;
    let mut extra_until = None;
    loop {
        let now = Instant::now();
        if extra_until.is_some_and(|t| now >= t) || now >= deadline {
            break;
        }
        if extra_until.is_none() && got.len() >= RECORDS {
            // Anything beyond what was produced (duplicates) shows up in this second.
            extra_until = Some(now + Duration::from_secs(1));
        }
        match consumer.poll(Duration::from_millis(100)) {
            None => {}
            Some(Ok(m)) => got.push(Got {
                partition: m.partition(),
                offset: m.offset(),
                key: m.key().map(<[u8]>::to_vec),
                id: m.payload().and_then(parse_id),
            }),
            Some(Err(e)) if errors.len() < 20 => errors.push(e.to_string()),
            Some(Err(_)) => {}
        }
    }
    assert!(
        got.len() >= RECORDS,
        "read only {} of {RECORDS} records within {PHASE_TIMEOUT:?}; errors {errors:?}\nlog tail:\n{}",
        got.len(),
        consumer.context().log_tail(30)
    );
    got
}

/// Exactly once, in send order per partition, at contiguous offsets (`contiguous`: a
/// replicated partition also holds raft's own control batches, which consumers skip);
/// acknowledged offsets hold the records acknowledged there.
pub(crate) fn verify(got: &[Got], acks: &[(i32, i64)], contiguous: bool) {
    let mut problems = Vec::new();
    let mut seen = vec![0u32; RECORDS];
    let mut next_offset: BTreeMap<i32, i64> = BTreeMap::new();
    let mut next_seq: BTreeMap<i32, u64> = BTreeMap::new();
    let mut at: BTreeMap<(i32, i64), usize> = BTreeMap::new();
    for g in got {
        let p = g.partition;
        let want = next_offset.entry(p).or_insert(0);
        if contiguous && g.offset != *want || g.offset < *want {
            problems.push(format!("partition {p}: offset {} read where {want} was due", g.offset));
        }
        *want = g.offset + 1;
        let Some((i, vp, s)) = g.id.filter(|(i, _, _)| *i < RECORDS) else {
            problems.push(format!("partition {p} offset {}: value does not name a sent record", g.offset));
            continue;
        };
        seen[i] += 1;
        at.insert((p, g.offset), i);
        if g.key.as_deref() != Some(format!("k-{i}").as_bytes()) || vp != p {
            problems.push(format!(
                "partition {p} offset {}: record i={i} (meant for {vp}) has the wrong key or place",
                g.offset
            ));
        }
        let due = next_seq.entry(p).or_insert(0);
        if s != *due {
            let what = if s < *due { "a duplicate or reordered record" } else { "records missing" };
            problems.push(format!(
                "partition {p} offset {}: send sequence {s} (i={i}) where {due} was due: {what}",
                g.offset
            ));
        }
        *due = s + 1;
    }
    let missing: Vec<usize> = (0..RECORDS).filter(|&i| seen[i] == 0).collect();
    let twice: Vec<usize> = (0..RECORDS).filter(|&i| seen[i] > 1).collect();
    if !missing.is_empty() {
        problems.push(format!("{} record(s) never read, e.g. {:?}", missing.len(), &missing[..missing.len().min(10)]));
    }
    if !twice.is_empty() {
        problems.push(format!(
            "{} record(s) read more than once, e.g. {:?}",
            twice.len(),
            &twice[..twice.len().min(10)]
        ));
    }
    for (i, &(p, o)) in acks.iter().enumerate() {
        match at.get(&(p, o)) {
            Some(&j) if j == i => {}
            Some(&j) => problems.push(format!("record {i} was acknowledged at {p}/{o}, which holds record {j}")),
            None => problems.push(format!("record {i} was acknowledged at {p}/{o}, which was not read")),
        }
    }
    if !problems.is_empty() {
        let total = problems.len();
        problems.truncate(30);
        panic!("{total} problem(s) reading back (first {}):\n  {}", problems.len(), problems.join("\n  "));
    }
    println!("verified: {RECORDS} records read exactly once, in send order per partition: {next_offset:?}");
}

#[test]
fn rdkafka_idempotent_producer_through_a_lossy_proxy_writes_every_record_once_in_order() {
    let _machine = crate::machine::shared();
    const TOPIC: &str = "idem-rdkafka-proxy";
    let data = tempfile::tempdir().expect("temp dir");
    // librdkafka sends few, large Produce requests (about a hundred here): swallow more often.
    let mut proxy = Proxy::bind(DropPolicy::produce_one_in(20));
    let proxy_addr = proxy.addr.to_string();
    let mut broker = Broker::start_in(data.path(), "127.0.0.1:0", &["--advertise", &proxy_addr]);
    let listen = broker.addr.to_string();
    proxy.set_target(broker.addr);
    Client::connect(broker.addr).create_topic(TOPIC, PARTITIONS, &[]);

    let started = Instant::now();
    let (acks, retries) = produce(&proxy_addr, TOPIC);
    let stats = proxy.stats();
    println!(
        "produced {RECORDS} records in {:?}; partitions drained for a retry {retries} times; proxy {stats:?}",
        started.elapsed()
    );
    proxy.stop();
    assert!(stats.swallowed > 0, "the proxy swallowed no Produce response ({stats:?}), so no retry was tested");

    // Read back from the broker itself: it advertises the proxy, so restart it (cleanly, same
    // data and port) advertising its own address.
    let status = broker.stop();
    assert!(status.is_some_and(|s| s.success()), "the broker did not stop cleanly: {status:?}");
    let broker = restart(data.path(), &listen, &[]);
    let got = consume(&broker.bootstrap(), TOPIC);
    verify(&got, &acks, true);
}

// =============================================================================================
// Wire level
// =============================================================================================

const INIT_PRODUCER_ID_V: i16 = 4;

fn init_producer_id(c: &mut Client, transactional_id: Option<&str>) -> InitProducerIdResponse {
    let mut r = InitProducerIdRequest::default();
    r.transactional_id = transactional_id.map(|t| TransactionalId(client::sb(t)));
    r.transaction_timeout_ms = i32::MAX;
    r.producer_id = ProducerId(-1);
    r.producer_epoch = -1;
    c.call(ApiKey::InitProducerId, INIT_PRODUCER_ID_V, &r)
}

/// A fresh producer id, checked.
fn new_producer(c: &mut Client) -> i64 {
    let r = init_producer_id(c, None);
    assert_eq!(r.error_code, 0, "InitProducerId without a transactional id");
    assert_eq!(r.producer_epoch, 0, "a new producer id starts at epoch 0");
    assert!(r.producer_id.0 >= 0, "InitProducerId returned producer id {}", r.producer_id.0);
    r.producer_id.0
}

/// An idempotent batch of `count` keyed records `<tag>-<n>`.
fn idem_batch(tag: &str, count: usize, pid: i64, epoch: i16, seq: i32) -> Vec<u8> {
    let keys: Vec<String> = (0..count).map(|n| format!("{tag}-{n}")).collect();
    let values: Vec<String> = (0..count).map(|n| format!("value of {tag}-{n} {}", "x".repeat(40))).collect();
    let kvs: Vec<KeyValue> = keys.iter().zip(&values).map(|(k, v)| (Some(k.as_bytes()), Some(v.as_bytes()))).collect();
    let mut b = build_keyed(1_700_000_000_000, &kvs);
    set_producer(&mut b, pid, epoch, seq);
    b
}

/// Produces one batch and returns (error code, base offset).
fn send(c: &mut Client, topic: &str, batch: &[u8]) -> (i16, i64) {
    let p: PartitionProduceResponse = c.produce(topic, 0, batch.to_vec());
    (p.error_code, p.base_offset)
}

/// The keys of the whole partition, in offset order.
fn keys(c: &mut Client, topic: &str) -> Vec<String> {
    c.fetch_all(topic, 0, 0)
        .into_iter()
        .enumerate()
        .map(|(n, r)| {
            assert_eq!(r.offset, n as i64, "offsets are contiguous");
            String::from_utf8(r.key.expect("keyed")).unwrap()
        })
        .collect()
}

fn names(tag: &str, count: usize) -> Vec<String> {
    (0..count).map(|n| format!("{tag}-{n}")).collect()
}

#[test]
fn wire_init_producer_id_and_the_sequence_rules_hold_across_restarts() {
    let _machine = crate::machine::shared();
    const T: &str = "idem-wire";
    let data = tempfile::tempdir().expect("temp dir");
    let args = ["--flush", "always"];
    let mut broker = Broker::start_in(data.path(), "127.0.0.1:0", &args);
    let listen = broker.addr.to_string();
    let mut c = Client::connect(broker.addr);
    c.create_topic(T, 1, &[]);
    let mut ids = BTreeSet::new();

    // InitProducerId: a new id each time; a transactional id is refused.
    let a = new_producer(&mut c);
    let b = new_producer(&mut c);
    assert_ne!(a, b, "two InitProducerId calls returned the same producer id");
    ids.extend([a, b]);
    let txn = init_producer_id(&mut c, Some("txn-1"));
    assert_eq!(txn.error_code, ErrorCode::InvalidRequest.code(), "InitProducerId with a transactional id: {txn:?}");
    assert_eq!(txn.producer_id.0, -1, "no producer id with INVALID_REQUEST");

    // In-sequence batches are appended.
    let a0 = idem_batch("a0", 3, a, 0, 0);
    let a1 = idem_batch("a1", 2, a, 0, 3);
    assert_eq!(send(&mut c, T, &a0), (0, 0));
    assert_eq!(send(&mut c, T, &a1), (0, 3));
    // Retries get their original offsets and append nothing.
    assert_eq!(send(&mut c, T, &a0), (0, 0), "a retry of the first batch");
    assert_eq!(send(&mut c, T, &a1), (0, 3), "a retry of the last batch");
    assert_eq!(c.latest(T, 0), 5, "retries were appended again");
    // A gap: OUT_OF_ORDER_SEQUENCE, nothing appended.
    assert_eq!(
        send(&mut c, T, &idem_batch("gap", 1, a, 0, 6)).0,
        ErrorCode::OutOfOrderSequenceNumber.code(),
        "sequence 6 after 4"
    );
    assert_eq!(c.latest(T, 0), 5, "a refused batch was appended");
    // An epoch bump restarts the sequence at 0; the older epoch is then fenced, retries too.
    let a2 = idem_batch("a2", 1, a, 1, 0);
    assert_eq!(send(&mut c, T, &a2), (0, 5));
    assert_eq!(
        send(&mut c, T, &idem_batch("old", 1, a, 0, 5)).0,
        ErrorCode::InvalidProducerEpoch.code(),
        "epoch 0 after 1"
    );
    assert_eq!(send(&mut c, T, &a1).0, ErrorCode::InvalidProducerEpoch.code(), "a retry from the fenced epoch");
    // A batch and its retry pipelined: the retry waits for the first append's offsets.
    let a3 = idem_batch("a3", 4, a, 1, 1);
    let first = c.send(ApiKey::Produce, PRODUCE_V, &produce_request(T, &[(0, a3.clone())], -1));
    let second = c.send(ApiKey::Produce, PRODUCE_V, &produce_request(T, &[(0, a3.clone())], -1));
    for id in [first, second] {
        let r = c.recv_any();
        assert_eq!(r.correlation_id, id, "responses in request order");
        let p = single_produce(r.decode::<ProduceResponse>());
        assert_eq!((p.error_code, p.base_offset), (0, 6), "a batch and its pipelined retry");
    }
    assert_eq!(c.latest(T, 0), 10);
    let mut expect: Vec<String> = [names("a0", 3), names("a1", 2), names("a2", 1), names("a3", 4)].concat();
    assert_eq!(keys(&mut c, T), expect);

    // kill -9: ids stay unique, and the producer state comes back from the log.
    drop(c);
    broker.kill9();
    broker = restart(data.path(), &listen, &args);
    let mut c = Client::connect(broker.addr);
    let after_kill = new_producer(&mut c);
    assert!(ids.insert(after_kill), "InitProducerId after kill -9 returned {after_kill}, given out before: {ids:?}");
    assert_eq!(send(&mut c, T, &a3), (0, 6), "a retry after kill -9 gets its original offset");
    assert_eq!(send(&mut c, T, &a2), (0, 5), "an older retry after kill -9 too");
    assert_eq!(
        send(&mut c, T, &idem_batch("gap", 1, a, 1, 9)).0,
        ErrorCode::OutOfOrderSequenceNumber.code(),
        "gap after kill -9"
    );
    assert_eq!(send(&mut c, T, &a1).0, ErrorCode::InvalidProducerEpoch.code(), "old epoch after kill -9");
    let a4 = idem_batch("a4", 2, a, 1, 5);
    assert_eq!(send(&mut c, T, &a4), (0, 10), "the next batch after kill -9");
    assert_eq!(send(&mut c, T, &idem_batch("n0", 1, after_kill, 0, 0)), (0, 12));
    expect.extend(names("a4", 2));
    expect.extend(names("n0", 1));
    assert_eq!(keys(&mut c, T), expect);

    // A clean restart: the same, from the snapshot written at close.
    drop(c);
    let status = broker.stop();
    assert!(status.is_some_and(|s| s.success()), "clean stop: {status:?}");
    broker = restart(data.path(), &listen, &args);
    let mut c = Client::connect(broker.addr);
    let after_stop = new_producer(&mut c);
    assert!(ids.insert(after_stop), "InitProducerId after a restart returned {after_stop}, given out before: {ids:?}");
    assert_eq!(send(&mut c, T, &a4), (0, 10), "a retry after a clean restart");
    assert_eq!(
        send(&mut c, T, &idem_batch("gap", 1, a, 1, 8)).0,
        ErrorCode::OutOfOrderSequenceNumber.code(),
        "gap after restart"
    );
    assert_eq!(
        send(&mut c, T, &idem_batch("old", 1, a, 0, 5)).0,
        ErrorCode::InvalidProducerEpoch.code(),
        "old epoch after restart"
    );
    assert_eq!(send(&mut c, T, &idem_batch("a5", 1, a, 1, 7)), (0, 13));
    expect.extend(names("a5", 1));
    // A producer the log holds no state of may begin at any sequence, as in Kafka (its
    // state may have expired); then it follows on.
    assert_eq!(send(&mut c, T, &idem_batch("b5", 1, b, 0, 5)), (0, 14), "a producer without state at 5");
    assert_eq!(send(&mut c, T, &idem_batch("b7", 1, b, 0, 7)).0, ErrorCode::OutOfOrderSequenceNumber.code());
    expect.extend(names("b5", 1));
    assert_eq!(keys(&mut c, T), expect);
    println!("producer ids given out: {ids:?}");
}

/// Many batches of one producer pipelined into partitions with tiny segments, so that
/// segments roll (and producer snapshots are written) while later batches are queued; then
/// kill -9 (or a clean stop) and restart. Each of the producer's last five batches, retried,
/// must get its original offset, and the next batch must be appended. Partition `p` gets
/// 41 + `p` batches, so the last roll falls at different places among the last five.
fn retries_after_restart_with_rolling_segments(clean: bool) {
    const T: &str = "idem-wire-roll";
    const PARTS: i32 = 4;
    let batches_in = |p: i32| 41 + p as usize;
    let data = tempfile::tempdir().expect("temp dir");
    let args = ["--flush", "always", "--segment-bytes", "1024"];
    let mut broker = Broker::start_in(data.path(), "127.0.0.1:0", &args);
    let listen = broker.addr.to_string();
    let mut c = Client::connect(broker.addr);
    c.create_topic(T, PARTS, &[]);
    let pid = new_producer(&mut c);
    let mut batches: Vec<Vec<Vec<u8>>> = Vec::new();
    for p in 0..PARTS {
        let bs: Vec<Vec<u8>> =
            (0..batches_in(p)).map(|n| idem_batch(&format!("p{p}-r{n}"), 2, pid, 0, 2 * n as i32)).collect();
        let sent: Vec<i32> =
            bs.iter().map(|b| c.send(ApiKey::Produce, PRODUCE_V, &produce_request(T, &[(p, b.clone())], -1))).collect();
        for (n, id) in sent.into_iter().enumerate() {
            let r = c.recv_any();
            assert_eq!(r.correlation_id, id);
            let resp = single_produce(r.decode::<ProduceResponse>());
            assert_eq!((resp.error_code, resp.base_offset), (0, 2 * n as i64), "partition {p}: pipelined batch {n}");
        }
        batches.push(bs);
    }
    drop(c);
    for p in 0..PARTS {
        let snapshots = std::fs::read_dir(data.path().join(format!("{T}-{p}")))
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| e.path().extension().is_some_and(|x| x == "snapshot"))
            .count();
        assert!(snapshots > 0, "partition {p}: no producer snapshot, the segments did not roll");
    }
    if clean {
        let status = broker.stop();
        assert!(status.is_some_and(|s| s.success()), "clean stop: {status:?}");
    } else {
        broker.kill9();
    }
    let broker = restart(data.path(), &listen, &args);
    let how = if clean { "a clean restart" } else { "kill -9" };
    let mut c = Client::connect(broker.addr);
    let mut wrong = Vec::new();
    for p in 0..PARTS {
        let n_batches = batches_in(p);
        let end = 2 * n_batches as i64;
        assert_eq!(c.latest(T, p), end, "partition {p}: log end after {how}");
        for (n, batch) in batches[p as usize].iter().enumerate().skip(n_batches - 5) {
            let got = c.produce(T, p, batch.clone());
            if (got.error_code, got.base_offset) != (0, 2 * n as i64) {
                wrong.push(format!(
                    "partition {p}, batch {n} of {n_batches} (sequences {}..={}): got error {} base offset {}, \
                     expected error 0 base offset {}",
                    2 * n,
                    2 * n + 1,
                    got.error_code,
                    got.base_offset,
                    2 * n
                ));
            }
        }
        let now = c.latest(T, p);
        if now != end {
            wrong.push(format!("partition {p}: log end {now} after the retries, expected {end} (appended twice)"));
        }
    }
    assert!(
        wrong.is_empty(),
        "after {how}, retries of the producer's last five batches per partition (all acknowledged before):\n  {}",
        wrong.join("\n  ")
    );
    for p in 0..PARTS {
        let n = batches_in(p);
        let next = idem_batch("next", 1, pid, 0, 2 * n as i32);
        let got = c.produce(T, p, next);
        assert_eq!((got.error_code, got.base_offset), (0, 2 * n as i64), "partition {p}: the next batch after {how}");
    }
}

#[test]
fn wire_retries_after_kill9_get_their_offsets_with_rolling_segments() {
    let _machine = crate::machine::shared();
    retries_after_restart_with_rolling_segments(false);
}

#[test]
fn wire_retries_after_a_clean_restart_get_their_offsets_with_rolling_segments() {
    let _machine = crate::machine::shared();
    retries_after_restart_with_rolling_segments(true);
}

/// The state a kill -9 leaves when it lands during a segment roll, after the producer
/// snapshot was written and before the new segment was created (simulated: the broker is
/// killed, then the segments from the newest snapshot's offset on are removed, as if their
/// batches had never been written — which is possible, since batches are queued before they
/// are written and only acknowledged after). The log then ends at the snapshot's offset, and
/// the producer's next batch, retried, must be appended there — the snapshot must not claim
/// batches the log does not hold.
#[test]
fn wire_a_kill_during_a_roll_leaves_no_phantom_batches_in_the_producer_state() {
    let _machine = crate::machine::shared();
    const T: &str = "idem-wire-phantom";
    const BATCHES: usize = 41;
    let data = tempfile::tempdir().expect("temp dir");
    let args = ["--flush", "always", "--segment-bytes", "1024"];
    let mut broker = Broker::start_in(data.path(), "127.0.0.1:0", &args);
    let listen = broker.addr.to_string();
    let mut c = Client::connect(broker.addr);
    c.create_topic(T, 1, &[]);
    let pid = new_producer(&mut c);
    // One batch more than is sent before the kill: the "next" batch sent after the restart.
    let batches: Vec<Vec<u8>> = (0..=BATCHES).map(|n| idem_batch(&format!("r{n}"), 2, pid, 0, 2 * n as i32)).collect();
    let sent: Vec<i32> = batches[..BATCHES]
        .iter()
        .map(|b| c.send(ApiKey::Produce, PRODUCE_V, &produce_request(T, &[(0, b.clone())], -1)))
        .collect();
    for (n, id) in sent.into_iter().enumerate() {
        let r = c.recv_any();
        assert_eq!(r.correlation_id, id);
        let p = single_produce(r.decode::<ProduceResponse>());
        assert_eq!((p.error_code, p.base_offset), (0, 2 * n as i64), "pipelined batch {n}");
    }
    drop(c);
    broker.kill9();

    let dir = data.path().join(format!("{T}-0"));
    let offset_of = |ext: &str| -> Vec<i64> {
        let mut v: Vec<i64> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == ext))
            .filter_map(|p| p.file_stem()?.to_str()?.parse().ok())
            .collect();
        v.sort_unstable();
        v
    };
    let snapshot = *offset_of("snapshot").last().expect("segments rolled, so a producer snapshot exists");
    assert!(snapshot > 0 && snapshot % 2 == 0 && snapshot < 2 * BATCHES as i64, "snapshot at {snapshot}");
    let removed: Vec<i64> = offset_of("log").into_iter().filter(|&base| base >= snapshot).collect();
    assert!(!removed.is_empty(), "a segment starts at the snapshot's offset {snapshot}");
    for base in &removed {
        for ext in ["log", "index", "timeindex"] {
            let _ = std::fs::remove_file(dir.join(format!("{base:020}.{ext}")));
        }
    }
    let snapshot_text = std::fs::read_to_string(dir.join(format!("{snapshot:020}.snapshot"))).unwrap_or_default();
    println!("removed the segments at {removed:?}; the snapshot at {snapshot} reads: {snapshot_text}");

    let broker = restart(data.path(), &listen, &args);
    let mut c = Client::connect(broker.addr);
    assert_eq!(c.latest(T, 0), snapshot, "the log ends where the removed segments began");
    let n = (snapshot / 2) as usize; // the producer's first batch the log no longer holds
    c.stream().set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.send(ApiKey::Produce, PRODUCE_V, &produce_request(T, &[(0, batches[n].clone())], -1));
    let answer = match c.read_frame() {
        Ok(Some(frame)) => {
            let (_, mut body) = ringbroker::client::response_body(ApiKey::Produce, PRODUCE_V, frame).unwrap();
            let resp = <ProduceResponse as ringbroker::protocol::Decodable>::decode(&mut body, PRODUCE_V).unwrap();
            let p = single_produce(resp);
            Ok((p.error_code, p.base_offset))
        }
        Ok(None) => Err("the broker closed the connection".to_string()),
        Err(e) => Err(format!("no response within 5 s ({e})")),
    };
    assert!(
        answer.is_ok(),
        "after the restart the log ends at {snapshot}, and the producer (re)sends its batch {n} (sequences \
         {}..={}), next in sequence for what the log holds: {}. The producer snapshot at {snapshot} claims \
         batches at or past its own offset, which the log does not hold: {snapshot_text}",
        2 * n,
        2 * n + 1,
        answer.unwrap_err()
    );
    assert_eq!(answer.unwrap(), (0, snapshot), "batch {n}, resent after the restart: appended at the log end");
    // The answer above was read by hand (to bound the wait), so continue on a new connection.
    let mut c = Client::connect(broker.addr);
    assert_eq!(c.latest(T, 0), snapshot + 2);
    let next = c.produce(T, 0, batches[n + 1].clone());
    assert_eq!((next.error_code, next.base_offset), (0, snapshot + 2), "batch {}, next", n + 1);
}
