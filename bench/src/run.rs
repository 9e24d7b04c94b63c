//! One benchmark run: create the topic, start consumers (from the log end, or from the
//! beginning for a consume-throughput run), start producers (paced by a fixed-rate
//! schedule, or as fast as the pipeline allows), run for the duration or record count,
//! drain, and gather the histograms.
//!
//! Producers send one record batch per Produce request, to partitions in turn, with up to
//! `max_in_flight` requests outstanding per connection (a reader thread collects the
//! responses; with `connections` set, each producer thread spreads its requests over its
//! share of the connections instead, see `spread`). Each record value starts with its send
//! time (ns since the Unix epoch), which consumers turn into end-to-end latency. Samples from
//! the warm-up are not recorded.

use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use hdrhistogram::Histogram;
use ringbroker::protocol::messages::create_topics_request::CreatableTopic;
use ringbroker::protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use ringbroker::protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use ringbroker::protocol::messages::metadata_request::MetadataRequestTopic;
use ringbroker::protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use ringbroker::protocol::messages::{
    ApiKey, BrokerId, CreateTopicsRequest, CreateTopicsResponse, FetchRequest, FetchResponse, ListOffsetsRequest,
    ListOffsetsResponse, MetadataRequest, MetadataResponse, ProduceRequest, ProduceResponse, TopicName,
};
use ringbroker::protocol::records::Compression;
use ringbroker::protocol::StrBytes;

use crate::records::{self, BatchBuilder, Shape};
use crate::schedule::Schedule;
use crate::spread::{self, share};
use crate::stats::{histogram, record_us};
use ringbroker::cli::member::{Member, Tick};
use ringbroker::client::{Cluster, Conn};

pub(crate) const PRODUCE_V: i16 = 9;
const FETCH_V: i16 = 12;
const METADATA_V: i16 = 12;
const LIST_OFFSETS_V: i16 = 7;
const CREATE_TOPICS_V: i16 = 7;
/// Error code Kafka returns when a topic exists already.
const TOPIC_ALREADY_EXISTS: i16 = 36;

#[derive(Debug, Clone)]
pub struct Config {
    pub broker: SocketAddr,
    pub topic: String,
    pub partitions: i32,
    /// Producer threads.
    pub producers: usize,
    /// Producer connections, spread over the producer threads (`spread`); None: one per
    /// producer, with its own reader thread.
    pub connections: Option<usize>,
    pub consumers: usize,
    /// Records per second over all producers; 0 = as fast as possible.
    pub rate: f64,
    pub record_size: usize,
    /// Bytes per record key; 0 sends null keys.
    pub key_size: usize,
    /// Distinct keys over all producers; 0: every key distinct.
    pub key_space: u64,
    pub compression: Compression,
    pub batch_records: usize,
    pub acks: i16,
    pub max_in_flight: usize,
    /// How long producers run (ignored when `records` is set).
    pub duration: Duration,
    /// Stop producing after this many records.
    pub records: Option<u64>,
    pub warmup: Duration,
    /// Consumers start at the beginning of the log (consume-throughput runs) instead of the end.
    pub from_beginning: bool,
    /// Consumers join this consumer group (range assignment, committed offsets) instead of
    /// splitting the partitions among themselves.
    pub group: Option<String>,
    /// Consumers by assignment go back to their start offsets whenever they have read up to
    /// the high watermark, until `duration`: consume throughput over more than one pass of
    /// a pre-filled topic.
    pub rewind: bool,
    /// With no producers: how many records consumers read before stopping.
    pub consume_records: Option<u64>,
    pub progress: bool,
    /// The broker's process on this machine: its CPU time over the measured window is
    /// reported (`Outcome::broker_cpu`).
    pub broker_pid: Option<u32>,
}

/// What a run against a cluster of brokers needs beyond `Config` (kept apart so that code
/// building a `Config` literal stays as it is).
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// Replicas of each partition if the topic has to be created; above 1 the run also waits
    /// until every replica is in sync before it starts.
    pub replication_factor: i16,
    /// More broker processes on this machine (the other brokers of a cluster): their CPU time
    /// is added to `Config::broker_pid`'s in `Outcome::broker_cpu`.
    pub more_broker_pids: Vec<u32>,
}

impl Default for ClusterConfig {
    fn default() -> ClusterConfig {
        ClusterConfig { replication_factor: 1, more_broker_pids: Vec::new() }
    }
}

/// What a run measured.
pub struct Outcome {
    /// Partitions of the topic, as the broker's metadata tells them.
    pub partitions: i32,
    pub elapsed: Duration,
    /// The window rates are computed over: after the warm-up to the end, or the whole run
    /// when it ended within a second of the warm-up (short consume runs).
    pub measured: Duration,
    /// Records acknowledged within `measured`.
    pub measured_acked: u64,
    /// Records consumed within `measured`.
    pub measured_consumed: u64,
    pub records_sent: u64,
    pub records_acked: u64,
    pub records_consumed: u64,
    pub produce_errors: u64,
    /// `produce_errors` by Kafka error code.
    pub produce_error_codes: BTreeMap<i16, u64>,
    pub bytes_sent: u64,
    pub publish_latency: Histogram<u64>,
    pub publish_delay: Histogram<u64>,
    pub e2e_latency: Histogram<u64>,
    /// CPU time the broker process (`Config::broker_pid`, plus
    /// `ClusterConfig::more_broker_pids`) spent within `measured`.
    pub broker_cpu: Option<Duration>,
    /// Replicas of the topic's partition 0, as the metadata tells them.
    pub replicas: usize,
    /// Brokers leading the topic's partitions (1 for a single broker).
    pub leader_brokers: usize,
}

#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) sent: AtomicU64,
    pub(crate) acked: AtomicU64,
    pub(crate) consumed: AtomicU64,
    pub(crate) errors: AtomicU64,
    /// Records refused, by the error code of their partition's answer.
    pub(crate) error_codes: Mutex<BTreeMap<i16, u64>>,
}

pub(crate) fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

pub(crate) fn connect(cfg: &Config) -> Result<Conn> {
    connect_at(cfg.broker)
}

/// A connection to one broker of a cluster (`Layout::leaders`).
pub(crate) fn connect_at(addr: SocketAddr) -> Result<Conn> {
    let mut c = Conn::connect(addr)?;
    c.set_client_id("ringbench");
    Ok(c)
}

fn topic_name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

/// How long creating a topic may take: Kafka on two cores needs tens of seconds for
/// thousands of partitions.
const CREATE_TIMEOUT: Duration = Duration::from_secs(120);

/// A topic as the broker's metadata describes it, once every partition has a leader.
#[derive(Debug, PartialEq)]
struct Layout {
    partitions: i32,
    /// Replicas of partition 0.
    replicas: usize,
    /// Each partition's leader, by partition index, when the metadata names more than one
    /// broker and some partition is led by another one than `Config::broker`: then requests
    /// for a partition go to its leader (a follower answers NOT_LEADER_OR_FOLLOWER). None:
    /// everything goes to `Config::broker`, as with a single broker.
    leaders: Option<Vec<SocketAddr>>,
}

/// The topic's layout from a Metadata response, or None while it is not ready: the topic
/// missing or in error, a partition without a leader (or a leader the response does not
/// list), or with `full_isr` a partition with a replica out of sync.
fn layout(m: &MetadataResponse, bootstrap: SocketAddr, full_isr: bool) -> Option<Layout> {
    let t = m.topics.first()?;
    if t.error_code != 0 || t.partitions.is_empty() {
        return None;
    }
    let n = t.partitions.len();
    let mut leaders: Vec<Option<SocketAddr>> = vec![None; n];
    for p in &t.partitions {
        if p.error_code != 0 || p.leader_id.0 < 0 || (full_isr && p.isr_nodes.len() < p.replica_nodes.len()) {
            return None;
        }
        let slot = leaders.get_mut(usize::try_from(p.partition_index).ok()?)?;
        if m.brokers.len() > 1 {
            let b = m.brokers.iter().find(|b| b.node_id == p.leader_id)?;
            *slot = Some((b.host.as_str(), u16::try_from(b.port).ok()?).to_socket_addrs().ok()?.next()?);
        } else {
            *slot = Some(bootstrap);
        }
    }
    let leaders: Vec<SocketAddr> = leaders.into_iter().collect::<Option<_>>()?;
    let replicas = t.partitions.iter().find(|p| p.partition_index == 0).map_or(0, |p| p.replica_nodes.len());
    let routed = leaders.iter().any(|a| *a != bootstrap);
    Some(Layout { partitions: n as i32, replicas, leaders: routed.then_some(leaders) })
}

/// The distinct leaders of `leaders` (in address order) and, for each partition, the index
/// of its leader among them: which of a producer's per-leader connections a partition's
/// batches go to.
fn routes(leaders: &[SocketAddr]) -> (Vec<SocketAddr>, Vec<usize>) {
    let mut distinct = leaders.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    let route = leaders.iter().map(|a| distinct.binary_search(a).expect("listed above")).collect();
    (distinct, route)
}

/// Creates the topic if it does not exist and returns its layout, once every partition has a
/// leader (and, with a replication factor above 1, all its replicas in sync).
fn prepare_topic(cfg: &Config, cluster: &ClusterConfig) -> Result<Layout> {
    let mut c = connect(cfg)?;
    let mut t = CreatableTopic::default();
    t.name = topic_name(&cfg.topic);
    t.num_partitions = cfg.partitions;
    t.replication_factor = cluster.replication_factor;
    let mut req = CreateTopicsRequest::default();
    req.topics = vec![t];
    req.timeout_ms = CREATE_TIMEOUT.as_millis() as i32;
    let resp: CreateTopicsResponse = c.call(ApiKey::CreateTopics, CREATE_TOPICS_V, &req)?;
    if let Some(r) = resp.topics.first() {
        if r.error_code != 0 && r.error_code != TOPIC_ALREADY_EXISTS {
            bail!("creating topic {}: error {} {:?}", cfg.topic, r.error_code, r.error_message);
        }
    }
    let mut mt = MetadataRequestTopic::default();
    mt.name = Some(topic_name(&cfg.topic));
    let mut mreq = MetadataRequest::default();
    mreq.topics = Some(vec![mt]);
    let deadline = Instant::now() + CREATE_TIMEOUT;
    loop {
        let m: MetadataResponse = c.call(ApiKey::Metadata, METADATA_V, &mreq)?;
        if let Some(l) = layout(&m, cfg.broker, cluster.replication_factor > 1) {
            if l.partitions != cfg.partitions {
                eprintln!(
                    "topic {} exists with {} partitions, not --partitions {}",
                    cfg.topic, l.partitions, cfg.partitions
                );
            }
            return Ok(l);
        }
        if Instant::now() > deadline {
            bail!("topic {} has no leaders (or replicas out of sync) after {} s", cfg.topic, CREATE_TIMEOUT.as_secs());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// ListOffsets for every partition, retried while a just-created topic's leaders settle
/// (Kafka answers NOT_LEADER_OR_FOLLOWER for a moment after creating a topic). With
/// `leaders`, each leader is asked for its own partitions.
fn offsets(cfg: &Config, leaders: Option<&[SocketAddr]>, partitions: &[i32], timestamp: i64) -> Result<Vec<i64>> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match offsets_at_leaders(cfg, leaders, partitions, timestamp) {
            Ok(o) => return Ok(o),
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(200)),
            Err(e) => return Err(e),
        }
    }
}

fn offsets_at_leaders(
    cfg: &Config,
    leaders: Option<&[SocketAddr]>,
    partitions: &[i32],
    timestamp: i64,
) -> Result<Vec<i64>> {
    let Some(leaders) = leaders else { return offsets_once(cfg, cfg.broker, partitions, timestamp) };
    let mut found = BTreeMap::new();
    for addr in routes(leaders).0 {
        let mine: Vec<i32> = partitions.iter().copied().filter(|&p| leaders[p as usize] == addr).collect();
        if !mine.is_empty() {
            found.extend(mine.iter().copied().zip(offsets_once(cfg, addr, &mine, timestamp)?));
        }
    }
    partitions.iter().map(|p| found.get(p).copied().context("ListOffsets lost a partition")).collect()
}

fn offsets_once(cfg: &Config, addr: SocketAddr, partitions: &[i32], timestamp: i64) -> Result<Vec<i64>> {
    let mut c = connect_at(addr)?;
    let mut t = ListOffsetsTopic::default();
    t.name = topic_name(&cfg.topic);
    t.partitions = partitions
        .iter()
        .map(|&p| {
            let mut lp = ListOffsetsPartition::default();
            lp.partition_index = p;
            lp.timestamp = timestamp;
            lp.current_leader_epoch = -1;
            lp
        })
        .collect();
    let mut req = ListOffsetsRequest::default();
    req.replica_id = BrokerId(-1);
    req.topics = vec![t];
    let resp: ListOffsetsResponse = c.call(ApiKey::ListOffsets, LIST_OFFSETS_V, &req)?;
    let parts = &resp.topics.first().context("ListOffsets answered no topic")?.partitions;
    partitions
        .iter()
        .map(|p| {
            let r = parts.iter().find(|r| r.partition_index == *p).context("ListOffsets lost a partition")?;
            if r.error_code != 0 {
                bail!("ListOffsets partition {p}: error {}", r.error_code);
            }
            Ok(r.offset)
        })
        .collect()
}

/// What is remembered of each request in flight (the writer hands it to the reader).
pub(crate) struct InFlight {
    pub(crate) due: Instant,
    pub(crate) records: u64,
}

/// A Produce request carrying one batch for one partition.
pub(crate) fn produce_request(cfg: &Config, partition: i32, records: bytes::Bytes) -> ProduceRequest {
    let mut pd = PartitionProduceData::default();
    pd.index = partition;
    pd.records = Some(records);
    let mut td = TopicProduceData::default();
    td.name = topic_name(&cfg.topic);
    td.partition_data = vec![pd];
    let mut req = ProduceRequest::default();
    req.acks = cfg.acks;
    req.timeout_ms = 30_000;
    req.topic_data = vec![td];
    req
}

/// Whether every partition of a Produce response succeeded.
pub(crate) fn produce_ok(resp: &ProduceResponse) -> bool {
    resp.responses.iter().flat_map(|t| &t.partition_responses).all(|p| p.error_code == 0)
}

/// Counts the answer to request `f` as acknowledged or failed and, past the warm-up, records
/// its latency from when it was due, in `lat` and in the live histogram of progress lines.
pub(crate) fn note_answer(
    resp: &ProduceResponse,
    f: &InFlight,
    counters: &Counters,
    measure_from: Instant,
    lat: &mut Histogram<u64>,
    live: &Mutex<Histogram<u64>>,
) {
    if !produce_ok(resp) {
        counters.errors.fetch_add(f.records, Ordering::Relaxed);
        let code = resp.responses.iter().flat_map(|t| &t.partition_responses).map(|p| p.error_code).find(|&c| c != 0);
        *counters.error_codes.lock().expect("not poisoned").entry(code.unwrap_or(-1)).or_default() += f.records;
        return;
    }
    counters.acked.fetch_add(f.records, Ordering::Relaxed);
    if f.due >= measure_from {
        let us = f.due.elapsed().as_micros() as u64;
        lat.saturating_record_n(us.max(1), f.records);
        if let Ok(mut l) = live.lock() {
            l.saturating_record_n(us.max(1), f.records);
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn producer(
    cfg: Config,
    index: usize,
    partitions: i32,
    start: Instant,
    measure_from: Instant,
    stop: Arc<AtomicBool>,
    counters: Arc<Counters>,
    live: Arc<Mutex<Histogram<u64>>>,
) -> Result<(Histogram<u64>, Histogram<u64>)> {
    let mut conn = connect(&cfg)?;
    let per_producer = cfg.rate / cfg.producers.max(1) as f64 / cfg.batch_records.max(1) as f64;
    let mut schedule = Schedule::new(start, per_producer);
    let (tx, rx) = mpsc::sync_channel::<InFlight>(cfg.max_in_flight.max(1));
    let mut delay = histogram();
    let reader = if cfg.acks != 0 {
        let mut rconn = conn.try_clone()?;
        let counters = counters.clone();
        Some(std::thread::spawn(move || -> Result<Histogram<u64>> {
            let mut lat = histogram();
            while let Ok(f) = rx.recv() {
                let (_, resp): (i32, ProduceResponse) = rconn.recv(ApiKey::Produce, PRODUCE_V)?;
                note_answer(&resp, &f, &counters, measure_from, &mut lat, &live);
            }
            Ok(lat)
        }))
    } else {
        None
    };
    let end = start + cfg.duration;
    let records_budget = cfg.records.map(|r| share(r, cfg.producers, index));
    let mut produced = 0u64;
    let mut partition = (index as i32) % partitions;
    let shape = Shape {
        record_size: cfg.record_size,
        key_size: cfg.key_size,
        key_space: cfg.key_space,
        compression: cfg.compression,
    };
    let mut builder = BatchBuilder::new(shape, cfg.batch_records, index as u64 + 1);
    loop {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let n = match records_budget {
            Some(b) if produced >= b => break,
            Some(b) => (b - produced).min(cfg.batch_records as u64) as usize,
            None if Instant::now() >= end => break,
            None => cfg.batch_records,
        };
        if let Some(due) = schedule.next_due() {
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
        }
        let now = Instant::now();
        let due = schedule.take(now);
        if due >= measure_from {
            record_us(&mut delay, now.saturating_duration_since(due).as_micros() as u64);
        }
        let req = produce_request(&cfg, partition, builder.build(n, now_ns())?);
        if cfg.acks != 0 && tx.send(InFlight { due, records: n as u64 }).is_err() {
            bail!("producer {index}: the response reader stopped");
        }
        conn.send(ApiKey::Produce, PRODUCE_V, &req)?;
        produced += n as u64;
        counters.sent.fetch_add(n as u64, Ordering::Relaxed);
        if cfg.acks == 0 {
            counters.acked.fetch_add(n as u64, Ordering::Relaxed);
        }
        partition = (partition + 1) % partitions;
    }
    drop(tx);
    let latency = match reader {
        Some(r) => r.join().map_err(|_| anyhow::anyhow!("producer {index}: reader panicked"))??,
        None => histogram(),
    };
    Ok((latency, delay))
}

/// One Fetch for every partition in `positions` (partition -> next offset); advances the
/// positions past what it read and counts it. Returns whether every partition was read up to
/// its high watermark.
fn fetch_once(
    conn: &mut Conn,
    cfg: &Config,
    positions: &mut BTreeMap<i32, i64>,
    measure_from_ns: u64,
    e2e: &mut Histogram<u64>,
    counters: &Counters,
) -> Result<bool> {
    let mut t = FetchTopic::default();
    t.topic = topic_name(&cfg.topic);
    t.partitions = positions
        .iter()
        .map(|(&p, &o)| {
            let mut fp = FetchPartition::default();
            fp.partition = p;
            fp.fetch_offset = o;
            fp.partition_max_bytes = 1 << 20;
            fp.current_leader_epoch = -1;
            fp.last_fetched_epoch = -1;
            fp.log_start_offset = -1;
            fp
        })
        .collect();
    let mut req = FetchRequest::default();
    req.replica_id = BrokerId(-1);
    req.max_wait_ms = 100;
    req.min_bytes = 1;
    req.max_bytes = 50 << 20;
    req.topics = vec![t];
    req.session_epoch = -1;
    let resp: FetchResponse = conn.call(ApiKey::Fetch, FETCH_V, &req)?;
    let mut caught_up = true;
    for pr in resp.responses.iter().flat_map(|t| &t.partitions) {
        if pr.error_code != 0 {
            bail!("fetch partition {}: error {}", pr.partition_index, pr.error_code);
        }
        let (Some(next), Some(records)) = (positions.get_mut(&pr.partition_index), &pr.records) else { continue };
        let now = now_ns();
        let read = records::read(records, *next, |value| {
            let sent = value.get(..8).map_or(0, |t| u64::from_be_bytes(t.try_into().expect("8 bytes")));
            if sent >= measure_from_ns {
                record_us(e2e, now.saturating_sub(sent) / 1000);
            }
        })?;
        *next = read.next;
        caught_up &= *next >= pr.high_watermark;
        counters.consumed.fetch_add(read.count, Ordering::Relaxed);
    }
    Ok(caught_up)
}

/// A consumer by assignment: fetches its partitions from their start offsets until `done`.
fn consumer(
    cfg: Config,
    mut positions: BTreeMap<i32, i64>,
    measure_from_ns: u64,
    done: Arc<AtomicBool>,
    counters: Arc<Counters>,
) -> Result<Histogram<u64>> {
    let mut conn = connect(&cfg)?;
    let mut e2e = histogram();
    let starts = positions.clone();
    while !done.load(Ordering::Relaxed) {
        let caught_up = fetch_once(&mut conn, &cfg, &mut positions, measure_from_ns, &mut e2e, &counters)?;
        if caught_up && cfg.rewind {
            positions = starts.clone();
        }
    }
    Ok(e2e)
}

/// A member of consumer group `group`: joins (the leader runs the range assignor), reads its
/// partitions from the committed offsets (else from `start_offsets`, indexed by partition),
/// heartbeats between fetches, commits and rejoins on a rebalance, and commits and leaves
/// the group at the end.
fn group_consumer(
    cfg: Config,
    group: String,
    start_offsets: Arc<Vec<i64>>,
    measure_from_ns: u64,
    done: Arc<AtomicBool>,
    counters: Arc<Counters>,
) -> Result<Histogram<u64>> {
    let mut cluster = Cluster::connect(&cfg.broker.to_string(), "ringbench")?;
    let mut member = Member::join(&mut cluster, &group, std::slice::from_ref(&cfg.topic))?;
    let mut conn = connect(&cfg)?;
    let mut e2e = histogram();
    let positions_of = |member: &Member, cluster: &mut Cluster| -> Result<BTreeMap<i32, i64>> {
        let mine = member.assignment.get(&cfg.topic).cloned().unwrap_or_default();
        let committed = member.committed(cluster, &cfg.topic, &mine)?;
        Ok(mine.iter().map(|&p| (p, committed.get(&p).copied().unwrap_or(start_offsets[p as usize]))).collect())
    };
    let mut positions = positions_of(&member, &mut cluster)?;
    while !done.load(Ordering::Relaxed) {
        if positions.is_empty() {
            std::thread::sleep(Duration::from_millis(100)); // more members than partitions
        } else {
            fetch_once(&mut conn, &cfg, &mut positions, measure_from_ns, &mut e2e, &counters)?;
        }
        if member.tick(&mut cluster)? == Tick::Rebalance {
            member.commit(&mut cluster, &cfg.topic, &positions)?;
            member.rejoin(&mut cluster)?;
            positions = positions_of(&member, &mut cluster)?;
        }
    }
    member.commit(&mut cluster, &cfg.topic, &positions)?;
    member.leave(&mut cluster)?;
    Ok(e2e)
}

pub fn run(cfg: &Config) -> Result<Outcome> {
    run_with(cfg, &ClusterConfig::default())
}

/// `run`, with a cluster's settings: the topic's replication factor and the other brokers'
/// processes. Producers send each partition's batches to its leader, over a connection per
/// leader (see `Layout::leaders`); consumers read from `Config::broker` only.
pub fn run_with(cfg: &Config, cluster: &ClusterConfig) -> Result<Outcome> {
    if cfg.batch_records == 0 || cfg.record_size < 8 {
        bail!("--batch-records must be at least 1 and --record-size at least 8 (the send timestamp)");
    }
    if let Some(c) = cfg.connections {
        if c < cfg.producers {
            bail!("--connections {c} is fewer than --producers {}: each producer needs a connection", cfg.producers);
        }
    }
    let layout = prepare_topic(cfg, cluster)?;
    let partitions = layout.partitions;
    let leaders = layout.leaders.as_deref();
    let (targets, route) = leaders.map(routes).unwrap_or_default();
    if leaders.is_some() {
        if cfg.consumers > 0 {
            bail!(
                "topic {} is led by {} brokers: consumers read from --broker alone, so this runs producers only",
                cfg.topic,
                targets.len()
            );
        }
        if cfg.connections.is_some() {
            bail!("--connections with a topic led by {} brokers: not supported", targets.len());
        }
    }
    let all: Vec<i32> = (0..partitions).collect();
    let start_offsets = offsets(cfg, leaders, &all, if cfg.from_beginning { -2 } else { -1 })?;
    let end_offsets = if cfg.producers == 0 { offsets(cfg, leaders, &all, -1)? } else { start_offsets.clone() };
    // Spread producers' connections are all open before the clock starts; a producer with a
    // connection of its own opens it in its thread.
    let mut shares: Vec<Option<Vec<Conn>>> = (0..cfg.producers).map(|_| None).collect();
    if let Some(n) = cfg.connections {
        let t = Instant::now();
        shares = spread::connect_shares(cfg)?.into_iter().map(Some).collect();
        if cfg.progress {
            eprintln!("{n} producer connections open in {:.1} s", t.elapsed().as_secs_f64());
        }
    }
    // Producers of a topic led by several brokers: a connection to each leader, opened before
    // the clock starts too.
    if leaders.is_some() {
        for s in &mut shares {
            *s = Some(targets.iter().map(|&a| connect_at(a)).collect::<Result<Vec<Conn>>>()?);
        }
    }
    let mut shares = shares.into_iter();
    let counters = Arc::new(Counters::default());
    let pids: Vec<u32> = cfg.broker_pid.into_iter().chain(cluster.more_broker_pids.iter().copied()).collect();
    // Every process's CPU time, or none if one cannot be read.
    let broker_cpu = || {
        if pids.is_empty() {
            return None;
        }
        pids.iter().map(|&p| crate::cpu::process_cpu(p)).sum::<Option<Duration>>()
    };
    let cpu_at_start = broker_cpu();
    let start = Instant::now();
    let measure_from = start + cfg.warmup;
    let measure_from_ns = now_ns() + cfg.warmup.as_nanos() as u64;
    let stop_consumers = Arc::new(AtomicBool::new(false));
    let stop_producers = Arc::new(AtomicBool::new(false));
    let live = Arc::new(Mutex::new(histogram()));

    let mut consumer_threads = Vec::new();
    let shared_starts = Arc::new(start_offsets.clone());
    for c in 0..cfg.consumers {
        let (cfg, done, counters) = (cfg.clone(), stop_consumers.clone(), counters.clone());
        if let Some(group) = cfg.group.clone() {
            let starts = shared_starts.clone();
            consumer_threads
                .push(std::thread::spawn(move || group_consumer(cfg, group, starts, measure_from_ns, done, counters)));
            continue;
        }
        let mine: BTreeMap<i32, i64> = (0..partitions)
            .filter(|p| *p as usize % cfg.consumers == c)
            .map(|p| (p, start_offsets[p as usize]))
            .collect();
        if !mine.is_empty() {
            consumer_threads.push(std::thread::spawn(move || consumer(cfg, mine, measure_from_ns, done, counters)));
        }
    }
    let mut producer_threads = Vec::new();
    for p in 0..cfg.producers {
        let (cfg, stop, counters, live) = (cfg.clone(), stop_producers.clone(), counters.clone(), live.clone());
        let conns = shares.next().flatten();
        let route = leaders.map(|_| route.clone());
        producer_threads.push(std::thread::spawn(move || match conns {
            Some(conns) => {
                spread::producer(cfg, p, conns, route, partitions, start, measure_from, stop, counters, live)
            }
            None => producer(cfg, p, partitions, start, measure_from, stop, counters, live),
        }));
    }

    // Progress, once a second, while producers run (or consumers, in a consume-only run).
    let expected_consume = if cfg.producers == 0 {
        cfg.consume_records.unwrap_or_else(|| end_offsets.iter().zip(&start_offsets).map(|(e, s)| (e - s) as u64).sum())
    } else {
        0
    };
    let mut last = (Instant::now(), 0u64, 0u64);
    // (time, acked, consumed, broker CPU) when the warm-up ended; with none, the run's start.
    let mut warm: Option<(Instant, u64, u64, Option<Duration>)> =
        cfg.warmup.is_zero().then_some((start, 0, 0, cpu_at_start));
    loop {
        std::thread::sleep(Duration::from_millis(100));
        if warm.is_none() && Instant::now() >= measure_from {
            let (acked, consumed) = (counters.acked.load(Ordering::Relaxed), counters.consumed.load(Ordering::Relaxed));
            warm = Some((Instant::now(), acked, consumed, broker_cpu()));
        }
        let producing = producer_threads.iter().any(|t| !t.is_finished());
        let consumed = counters.consumed.load(Ordering::Relaxed);
        let consuming_only =
            cfg.producers == 0 && if cfg.rewind { start.elapsed() < cfg.duration } else { consumed < expected_consume };
        if cfg.progress && last.0.elapsed() >= Duration::from_secs(1) {
            let (acked, now) = (counters.acked.load(Ordering::Relaxed), Instant::now());
            let secs = now.duration_since(last.0).as_secs_f64();
            let p99 = live.lock().map(|mut h| {
                let v = h.value_at_quantile(0.99) as f64 / 1000.0;
                h.reset();
                v
            });
            eprintln!(
                "[{:6.1}s] publish {:>9.0} rec/s {:>8.1} MB/s p99 {:>8.2} ms | consume {:>9.0} rec/s",
                start.elapsed().as_secs_f64(),
                (acked - last.1) as f64 / secs,
                (acked - last.1) as f64 * cfg.record_size as f64 / secs / 1e6,
                p99.unwrap_or(0.0),
                (consumed - last.2) as f64 / secs,
            );
            last = (now, acked, consumed);
        }
        if !producing && !consuming_only {
            break;
        }
        if cfg.producers == 0 && start.elapsed() > cfg.duration + Duration::from_secs(60) {
            break;
        }
    }
    let produce_end = Instant::now();
    let cpu_at_end = broker_cpu();
    let mut publish_latency = histogram();
    let mut publish_delay = histogram();
    for t in producer_threads {
        let (lat, delay) = t.join().map_err(|_| anyhow::anyhow!("a producer panicked"))??;
        publish_latency.add(&lat).expect("same bounds");
        publish_delay.add(&delay).expect("same bounds");
    }
    // Let consumers catch up with everything acknowledged (bounded).
    let grace = Instant::now() + Duration::from_secs(30);
    while cfg.consumers > 0
        && cfg.producers > 0
        && counters.consumed.load(Ordering::Relaxed) < counters.acked.load(Ordering::Relaxed)
        && Instant::now() < grace
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    stop_consumers.store(true, Ordering::Relaxed);
    let mut e2e_latency = histogram();
    for t in consumer_threads {
        let h = t.join().map_err(|_| anyhow::anyhow!("a consumer panicked"))??;
        e2e_latency.add(&h).expect("same bounds");
    }
    let elapsed = produce_end.duration_since(start);
    let sent = counters.sent.load(Ordering::Relaxed);
    let (acked, consumed) = (counters.acked.load(Ordering::Relaxed), counters.consumed.load(Ordering::Relaxed));
    let (measured, measured_acked, measured_consumed, cpu_from) = match warm {
        Some((t, a, c, cpu)) if produce_end.duration_since(t) >= Duration::from_secs(1) => {
            (produce_end.duration_since(t), acked - a, consumed.saturating_sub(c), cpu)
        }
        _ => (elapsed, acked, consumed, cpu_at_start),
    };
    let broker_cpu = cpu_from.zip(cpu_at_end).map(|(from, to)| to.saturating_sub(from));
    let error_codes = counters.error_codes.lock().expect("not poisoned").clone();
    Ok(Outcome {
        partitions,
        elapsed,
        measured,
        measured_acked,
        measured_consumed,
        records_sent: sent,
        records_acked: counters.acked.load(Ordering::Relaxed),
        records_consumed: counters.consumed.load(Ordering::Relaxed),
        produce_errors: counters.errors.load(Ordering::Relaxed),
        produce_error_codes: error_codes,
        bytes_sent: sent * cfg.record_size as u64,
        publish_latency,
        publish_delay,
        e2e_latency,
        broker_cpu,
        replicas: layout.replicas,
        leader_brokers: targets.len().max(1),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringbroker::protocol::messages::metadata_response::{
        MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
    };

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    /// A Metadata response naming brokers 1.. on ports 9001.. and partitions led by `leaders`
    /// (one entry per partition, listed in reverse order), each with `replicas` replicas of
    /// which `in_sync` are in sync.
    fn metadata(brokers: i32, leaders: &[i32], replicas: i32, in_sync: i32) -> MetadataResponse {
        let mut m = MetadataResponse::default();
        m.brokers = (1..=brokers)
            .map(|id| {
                let mut b = MetadataResponseBroker::default();
                b.node_id = BrokerId(id);
                b.host = StrBytes::from_static_str("127.0.0.1");
                b.port = 9000 + id;
                b
            })
            .collect();
        let mut t = MetadataResponseTopic::default();
        t.partitions = leaders
            .iter()
            .enumerate()
            .rev()
            .map(|(i, &l)| {
                let mut p = MetadataResponsePartition::default();
                p.partition_index = i as i32;
                p.leader_id = BrokerId(l);
                p.replica_nodes = (1..=replicas).map(BrokerId).collect();
                p.isr_nodes = (1..=in_sync).map(BrokerId).collect();
                p
            })
            .collect();
        m.topics = vec![t];
        m
    }

    #[test]
    fn a_single_broker_gets_every_request_whatever_it_advertises() {
        let l = layout(&metadata(1, &[1, 1, 1], 1, 1), addr(19092), true).expect("ready");
        assert_eq!(l, Layout { partitions: 3, replicas: 1, leaders: None });
    }

    #[test]
    fn a_cluster_topic_is_routed_to_each_partitions_leader() {
        let l = layout(&metadata(3, &[1, 2, 3, 2], 3, 3), addr(9001), true).expect("ready");
        assert_eq!(l.replicas, 3);
        let leaders = l.leaders.expect("led by three brokers");
        assert_eq!(leaders, [addr(9001), addr(9002), addr(9003), addr(9002)], "by partition index");
        let (targets, route) = routes(&leaders);
        assert_eq!(targets, [addr(9001), addr(9002), addr(9003)]);
        assert_eq!(route, [0, 1, 2, 1]);
        // Every partition led by the bootstrap broker: nothing to route.
        let l = layout(&metadata(3, &[2, 2], 3, 3), addr(9002), true).expect("ready");
        assert_eq!(l.leaders, None);
    }

    #[test]
    fn a_topic_is_not_ready_without_leaders_or_with_replicas_out_of_sync() {
        assert_eq!(layout(&metadata(3, &[1, -1, 3], 3, 3), addr(9001), false), None, "a partition has no leader");
        assert_eq!(layout(&metadata(2, &[1, 3], 1, 1), addr(9001), false), None, "leader 3 is not listed");
        assert_eq!(layout(&metadata(3, &[1, 2, 3], 3, 2), addr(9001), true), None, "a follower is out of sync");
        assert!(layout(&metadata(3, &[1, 2, 3], 3, 2), addr(9001), false).is_some(), "in sync or not: no matter");
        assert_eq!(layout(&MetadataResponse::default(), addr(9001), false), None, "no topic");
    }
}
