//! Fetch: reads every requested partition on its home shard, which answers with offsets and a
//! file region (never the bytes); the response is written here and its regions are sent
//! with sendfile by the connection. When fewer than `min_bytes` are available the fetch
//! waits — up to `max_wait_ms` — for an append on any of its partitions to move a high
//! watermark, then reads again (a delayed fetch).
//!
//! Fetch sessions (KIP-227, v7+; the cache and its rules are `fetch_session`'s, one per
//! shard): session id 0 with epoch -1 is a sessionless full fetch (response session id 0);
//! epoch 0 is a full fetch that asks for a session, answered with its new id, or 0 when the
//! cache admits none; any full fetch naming a session id closes that session first. Another
//! epoch is an incremental fetch of the session it names: the request's partitions are added
//! or updated and the forgotten ones removed, then every partition of the session is read (the
//! delayed fetch waits on all of them, not only on those the request names), and the response
//! carries only the partitions with records, an error, or a new high watermark or log start.
//! An unknown id (0 included) is a top-level FETCH_SESSION_ID_NOT_FOUND, a wrong epoch
//! INVALID_FETCH_SESSION_EPOCH, a request naming topics by name in a session by id (or the
//! reverse) FETCH_SESSION_TOPIC_ID_ERROR, each with no topics and session id 0. The catalog
//! and the ACLs are checked again for every session partition on every fetch, so a topic
//! deleted since the session began is answered UNKNOWN_TOPIC_OR_PARTITION, and an id never
//! known UNKNOWN_TOPIC_ID. A follower's session is privileged (see `fetch_session`), once its
//! CLUSTER_ACTION is allowed.
//!
//! Metrics: a fetch that parks counts once as a delayed fetch and its wait as remote time
//! (one watch per home shard touched); a read on another shard is remote time too; a
//! response with any partition error, or a session error, counts once in
//! `request_errors_total{error="error_code"}`; a served incremental fetch counts in
//! `incremental_fetches_total`; the sessions, their partitions and evictions are gauges and a
//! counter of the shard's cache.
//!
//! Size limits follow KIP-74: each partition gets at most `partition_max_bytes` and the
//! response at most `max_bytes`, except that the first batch of the first partition with
//! data is always returned whole so a consumer can make progress past a large batch.
//!
//! Quota: the record bytes of the response count against its client-id's
//! `consumer_byte_rate`; over it, the response carries the throttle time and the connection
//! is muted for that long (see `quota`). The response that crosses the quota is still sent
//! in full. Kafka (KIP-219) answers that fetch with no records instead, uncounted, and caps
//! every fetch's max_bytes at what one quota window allows so that such an answer cannot
//! repeat forever; the client's rate is held to the quota either way, and here a consumer
//! is never handed an empty answer it has to fetch again.
//!
//! Authorization, Kafka's: a consumer needs READ on each topic (topic ids are resolved to
//! names first; an unknown id stays UNKNOWN_TOPIC_ID), checked before the partition exists;
//! a follower (replica id >= 0) needs CLUSTER_ACTION instead, for every partition.

use std::time::{Duration, Instant};

use proto_kafka::messages::{ApiKey, FetchRequest};

use super::{authz, checked, ApiSpec, Broker, Outcome, Request};
use crate::auth::acl::Operation;
use crate::fetch_session::{Answer, Asked, Changes, Incremental, Opened, TopicRef, FINAL_EPOCH, INITIAL_EPOCH};
use crate::metrics::{self, ErrorKind};
use crate::protocol::fetch_writer::{self, FetchOut, NodeEndpoint, PartitionOut, TopicOut};
use crate::protocol::ErrorCode;
use crate::quota::Kind;
use crate::shard::{FetchAsk, Tp};

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::Fetch, fetch_writer::MIN_VERSION, fetch_writer::MAX_VERSION);

/// Longest wait honoured, whatever the client asks (Kafka clients use 500 ms by default).
const MAX_WAIT_CAP: Duration = Duration::from_secs(30);

struct Wanted {
    tp: Option<Tp>,
    index: i32,
    offset: i64,
    max_bytes: u32,
    current_leader_epoch: i32,
    error: Option<ErrorCode>,
}

/// What the fetch does with sessions, from its session id and epoch.
enum Mode {
    /// Epoch -1 (or a version before 7): no session.
    Sessionless,
    /// Epoch 0: a full fetch that asks for a new session.
    Create,
    /// A session's fetch: its partitions are read, then `answer`ed.
    Incremental(Opened),
}

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: FetchRequest = req.decode()?;
    let catalog = broker.catalog();
    let by_id = req.version >= 13;
    let replica_id = if req.version >= 15 { r.replica_state.replica_id } else { r.replica_id };
    // A follower's fetch needs CLUSTER_ACTION (Some(allowed)); a consumer's READ on each topic.
    let follower = (replica_id.0 >= 0).then(|| authz::cluster(broker, &req, Operation::ClusterAction));
    let name_of = |id: &uuid::Uuid| catalog.topic_by_id(id).map(|m| m.name.clone());
    let topic_ref = |name: &str, id: uuid::Uuid| match by_id {
        true => (TopicRef::Id(id), name_of(&id)),
        false => (TopicRef::Name(name.to_string()), Some(name.to_string())),
    };
    let mut asked = Vec::with_capacity(r.topics.iter().map(|t| t.partitions.len()).sum());
    for t in &r.topics {
        let (topic, name) = topic_ref(t.topic.as_str(), t.topic_id);
        asked.extend(t.partitions.iter().map(|p| Asked {
            topic: topic.clone(),
            name: name.clone(),
            partition: p.partition,
            fetch_offset: p.fetch_offset,
            max_bytes: p.partition_max_bytes.max(0) as u32,
            current_leader_epoch: p.current_leader_epoch,
        }));
    }

    let sessions = broker.fetch_sessions();
    let (session_id, epoch) = if req.version >= 7 { (r.session_id, r.session_epoch) } else { (0, FINAL_EPOCH) };
    let mut mode = Mode::Sessionless;
    let mut list = asked;
    if epoch == INITIAL_EPOCH || epoch == FINAL_EPOCH {
        // A full fetch closes the session it names, and may ask for a new one.
        if session_id != 0 && sessions.close(session_id) {
            broker.probe().fetch_sessions(sessions.len(), sessions.partitions());
        }
        if epoch == INITIAL_EPOCH {
            mode = Mode::Create;
        }
    } else {
        let forgotten: Vec<(TopicRef, i32)> = r
            .forgotten_topics_data
            .iter()
            .flat_map(|f| {
                let topic = if by_id { TopicRef::Id(f.topic_id) } else { TopicRef::Name(f.topic.to_string()) };
                f.partitions.iter().map(move |p| (topic.clone(), *p))
            })
            .collect();
        match sessions.update(
            session_id,
            epoch,
            by_id,
            Instant::now(),
            Changes { asked: &list, forgotten: &forgotten },
            name_of,
        ) {
            Err(e) => {
                tracing::debug!(session = session_id, epoch, error = ?e, "incremental fetch refused");
                return Ok(Some(session_error(broker, &req, e)));
            }
            Ok(Incremental::Closed) => {}
            Ok(Incremental::Open(mut opened)) => {
                broker.probe().incremental_fetch();
                list = std::mem::take(&mut opened.partitions);
                mode = Mode::Incremental(opened);
            }
        }
        broker.probe().fetch_sessions(sessions.len(), sessions.partitions());
    }

    let topics = resolve(broker, &req, &list, follower);
    let wait = Duration::from_millis(r.max_wait_ms.max(0) as u64).min(MAX_WAIT_CAP);
    let deadline = Instant::now() + wait;
    // 0 is no room, as in Kafka: the response holds the first batch whole and nothing more.
    let max_bytes = r.max_bytes.max(0) as u32;
    // As Kafka: a fetch never waits for more than it may be answered.
    let min_bytes = (r.min_bytes.max(0) as u64).min(max_bytes as u64);
    let readable = topics.iter().flat_map(|t| &t.2).any(|w| w.tp.is_some() && w.error.is_none());
    let mut delayed = false;
    loop {
        let Read { mut out, available, read_error } = read_all(broker, &topics, max_bytes).await;
        let now = Instant::now();
        // Answered at once on an error reading a partition, as Kafka's delayed fetch is; a
        // partition refused before the read (not authorized, unknown) only rides along.
        if available >= min_bytes || read_error || !readable || now >= deadline {
            let bytes: u64 =
                out.iter().flat_map(|t| &t.partitions).map(|p| p.records.as_ref().map_or(0, |r| r.len as u64)).sum();
            let errors = out.iter().flat_map(|t| &t.partitions).any(|p| p.error != 0);
            let answers: Vec<Answer> = out
                .iter()
                .flat_map(|t| &t.partitions)
                .map(|p| Answer {
                    high_watermark: p.high_watermark,
                    log_start: p.log_start_offset,
                    error: p.error != 0,
                    records: p.records.as_ref().is_some_and(|r| r.len > 0),
                })
                .collect();
            let session_id = match mode {
                Mode::Sessionless => 0,
                Mode::Create => {
                    let privileged = follower == Some(true);
                    let created = sessions.create(now, privileged, by_id, list.into_iter().zip(answers).collect());
                    if created.evicted {
                        broker.probe().fetch_session_evicted();
                    }
                    broker.probe().fetch_sessions(sessions.len(), sessions.partitions());
                    created.id
                }
                Mode::Incremental(opened) => match sessions.answer(&opened, &answers) {
                    Err(e) => {
                        tracing::debug!(session = session_id, epoch, error = ?e, "fetch session used again while it read");
                        return Ok(Some(session_error(broker, &req, e)));
                    }
                    Ok(keep) => {
                        let mut keep = keep.into_iter();
                        for t in &mut out {
                            t.partitions.retain(|_| keep.next().unwrap_or(true));
                        }
                        out.retain(|t| !t.partitions.is_empty());
                        session_id
                    }
                },
            };
            if errors {
                broker.probe().request_error(broker.probe().api_slot(Some(SPEC.key as i16)), ErrorKind::ErrorCode);
            }
            let throttle = broker.quotas().record_as(req.session.user(), req.client_id.as_deref(), Kind::Fetch, bytes);
            if !throttle.is_zero() {
                broker.probe().throttled(broker.probe().api_slot(Some(SPEC.key as i16)), throttle);
                metrics::throttle(throttle);
            }
            // The request quota's too: this response is written here, not by `respond`.
            let throttle = throttle.max(metrics::charge_request_quota());
            let throttle_time_ms = crate::protocol::throttle::millis(throttle);
            let node_endpoints = leader_endpoints(broker, &req, &out);
            let out = FetchOut { throttle_time_ms, error: 0, session_id, topics: out, node_endpoints };
            return Ok(Some(fetch_writer::encode(req.version, req.correlation_id, &out)));
        }
        // Delayed fetch: wait for any partition's high watermark to pass its fetch offset
        // (in a session's fetch, any of the session's partitions).
        if !delayed {
            delayed = true;
            broker.probe().delayed_fetch();
        }
        // Each partition is watched past what this pass already read up to (its high
        // watermark), not past the fetch offset: below the watermark the watch is ready at
        // once, and the loop would spin until the deadline without yielding the shard.
        let read_to = out.iter().flat_map(|t| &t.partitions).map(|p| p.high_watermark);
        let watched = topics
            .iter()
            .flat_map(|t| &t.2)
            .zip(read_to)
            .filter_map(|(w, hwm)| w.tp.map(|tp| (tp, w.offset.max(hwm))))
            .collect();
        broker.watch(watched, deadline - now).await;
    }
}

/// A session error answers the whole fetch, with no topics and no session, as Kafka does.
fn session_error(broker: &impl Broker, req: &Request, e: ErrorCode) -> crate::protocol::response::Response {
    broker.probe().request_error(broker.probe().api_slot(Some(SPEC.key as i16)), ErrorKind::ErrorCode);
    let out =
        FetchOut { throttle_time_ms: 0, error: e.code(), session_id: 0, topics: Vec::new(), node_endpoints: vec![] };
    fetch_writer::encode(req.version, req.correlation_id, &out)
}

/// The partitions to read, checked against the catalog and the ACLs, grouped into topics as
/// the response lists them: a run of partitions of one topic is one topic entry (a session's
/// order may name a topic again after another, as Kafka's responses then do).
fn resolve(
    broker: &impl Broker,
    req: &Request,
    list: &[Asked],
    follower: Option<bool>,
) -> Vec<(String, uuid::Uuid, Vec<Wanted>)> {
    let catalog = broker.catalog();
    let mut topics: Vec<(String, uuid::Uuid, Vec<Wanted>)> = Vec::new();
    for run in list.chunk_by(|a, b| a.topic == b.topic) {
        let first = &run[0];
        let (meta, unknown, ref_id) = match &first.topic {
            TopicRef::Id(id) => {
                // An id never resolved is UNKNOWN_TOPIC_ID; a session's topic deleted since,
                // whose name it kept, is UNKNOWN_TOPIC_OR_PARTITION (Kafka's answers).
                let unknown =
                    if first.name.is_some() { ErrorCode::UnknownTopicOrPartition } else { ErrorCode::UnknownTopicId };
                (catalog.topic_by_id(id), unknown, *id)
            }
            TopicRef::Name(n) => (catalog.topic(n), ErrorCode::UnknownTopicOrPartition, uuid::Uuid::nil()),
        };
        let acl_name = meta.map(|m| m.name.as_str()).or(first.name.as_deref());
        let refusal = match follower {
            Some(allowed) => (!allowed).then_some(ErrorCode::TopicAuthorizationFailed),
            None => acl_name.and_then(|n| authz::topic_or_fail(broker, req, Operation::Read, n).err()),
        };
        let wanted = run
            .iter()
            .map(|p| {
                let mut w = Wanted {
                    tp: None,
                    index: p.partition,
                    offset: p.fetch_offset,
                    max_bytes: p.max_bytes,
                    current_leader_epoch: p.current_leader_epoch,
                    error: None,
                };
                match meta {
                    _ if refusal.is_some() => w.error = refusal,
                    None => w.error = Some(unknown),
                    Some(m) if p.partition < 0 || p.partition >= m.partitions() => {
                        w.error = Some(ErrorCode::UnknownTopicOrPartition)
                    }
                    Some(m) => w.tp = Some(Tp { topic: m.id, partition: p.partition }),
                }
                w
            })
            .collect();
        let name = meta.map(|m| m.name.clone()).or_else(|| first.name.clone()).unwrap_or_default();
        topics.push((name, meta.map_or(ref_id, |m| m.id), wanted));
    }
    topics
}

/// The endpoints of the brokers the partitions' current-leader hints name.
fn leader_endpoints(broker: &impl Broker, req: &Request, out: &[TopicOut]) -> Vec<NodeEndpoint> {
    let named: std::collections::BTreeSet<i32> =
        out.iter().flat_map(|t| &t.partitions).filter_map(|p| p.current_leader.map(|(id, _)| id)).collect();
    if named.is_empty() {
        return Vec::new();
    }
    super::metadata::broker_entries(broker, req)
        .into_iter()
        .filter(|b| named.contains(&b.node_id.0))
        .map(|b| NodeEndpoint {
            node_id: b.node_id.0,
            host: b.host.to_string(),
            port: b.port,
            rack: b.rack.map(|r| r.to_string()),
        })
        .collect()
}

/// What a read pass found.
struct Read {
    out: Vec<TopicOut>,
    /// Bytes readable in the partitions read, each within its own limit but before the
    /// response-wide one: what min_bytes is measured against, as Kafka's delayed fetch does.
    available: u64,
    /// Some partition's read failed (not one refused before reading).
    read_error: bool,
}

/// One read pass over every partition, at once on their home shards, then trimmed to
/// the response-wide `max_bytes` in request order.
async fn read_all(broker: &impl Broker, topics: &[(String, uuid::Uuid, Vec<Wanted>)], max_bytes: u32) -> Read {
    let checked = topics.iter().flat_map(|t| &t.2).map(|w| match (w.error, w.tp) {
        (Some(e), _) => Err(e),
        (None, Some(tp)) => Ok((
            tp,
            FetchAsk { offset: w.offset, max_bytes: w.max_bytes, current_leader_epoch: w.current_leader_epoch },
        )),
        (None, None) => Err(ErrorCode::UnknownTopicOrPartition),
    });
    let mut reads = checked::run(checked.collect(), |asks| broker.fetch(asks)).await.into_iter();
    let mut remaining = max_bytes as u64;
    let mut first_data = true;
    let (mut available, mut read_error) = (0u64, false);
    let mut out = Vec::with_capacity(topics.len());
    for (name, id, parts) in topics {
        let mut t = TopicOut { name: name.clone(), id: *id, partitions: Vec::with_capacity(parts.len()) };
        for w in parts {
            let result = reads.next().expect("one read per partition");
            let mut p = PartitionOut {
                index: w.index,
                error: 0,
                high_watermark: -1,
                last_stable_offset: -1,
                log_start_offset: -1,
                records: None,
                current_leader: None,
            };
            match result {
                Ok(read) => {
                    p.high_watermark = read.offsets.high_watermark;
                    p.last_stable_offset = read.offsets.high_watermark;
                    p.log_start_offset = read.offsets.log_start;
                    if let Some(mut region) = read.records {
                        let len = region.len as u64;
                        let first = read.first_batch_len as u64;
                        available += len.min(w.max_bytes as u64);
                        let keep = if first_data {
                            len.min(remaining.max(first))
                        } else if remaining >= first && first <= w.max_bytes as u64 {
                            len.min(remaining)
                        } else {
                            // Not even its first batch fits, in the response or in the
                            // partition's own limit (only the first partition with data
                            // gets a batch whole past it, KIP-74): no records this time, as
                            // from Kafka. A part of a batch alone is no record, and the Java
                            // consumer fails on it ("no complete records").
                            0
                        };
                        if keep > 0 {
                            region.len = keep as u32;
                            remaining -= keep.min(remaining);
                            first_data = false;
                            p.records = Some(region);
                        }
                    }
                }
                Err(e) => {
                    read_error |= w.error.is_none() && w.tp.is_some();
                    p.error = e.code();
                    // KIP-951: where the partition's leader is now (written from v16).
                    let moved = matches!(e, ErrorCode::NotLeaderOrFollower | ErrorCode::FencedLeaderEpoch);
                    let view = w.tp.filter(|_| moved).and_then(|tp| broker.leadership(&tp));
                    p.current_leader = view.filter(|v| v.leader >= 0).map(|v| (v.leader, v.epoch));
                }
            }
            t.partitions.push(p);
        }
        out.push(t);
    }
    Read { out, available, read_error }
}

#[cfg(test)]
mod tests {
    use proto_kafka::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
    use proto_kafka::messages::fetch_response::FetchableTopicResponse;
    use proto_kafka::messages::{FetchResponse, TopicName};

    use super::*;
    use crate::api::fake::Fake;
    use crate::api::str_bytes;
    use crate::protocol::batch;

    fn request(topic: &str, parts: &[(i32, i64)], min_bytes: i32, max_wait_ms: i32) -> FetchRequest {
        let mut t = FetchTopic::default();
        t.topic = TopicName(str_bytes(topic));
        for &(partition, fetch_offset) in parts {
            let mut p = FetchPartition::default();
            p.partition = partition;
            p.fetch_offset = fetch_offset;
            p.partition_max_bytes = 1 << 20;
            t.partitions.push(p);
        }
        let mut r = FetchRequest::default();
        r.replica_id = proto_kafka::messages::BrokerId(-1);
        r.max_wait_ms = max_wait_ms;
        r.min_bytes = min_bytes;
        r.max_bytes = 1 << 24;
        r.topics.push(t);
        r
    }

    /// (partition, error, high watermark, offsets of the records returned)
    fn parts(resp: &FetchResponse) -> Vec<(i32, i16, i64, Vec<i64>)> {
        parts_of(&resp.responses[0])
    }

    fn parts_of(topic: &FetchableTopicResponse) -> Vec<(i32, i16, i64, Vec<i64>)> {
        let offsets = |records: &Option<bytes::Bytes>| {
            let mut out = Vec::new();
            let mut rest = records.as_deref().unwrap_or_default();
            while let Ok(h) = batch::read_header(rest) {
                out.extend(h.base_offset..=h.last_offset());
                rest = &rest[h.size..];
            }
            out
        };
        topic
            .partitions
            .iter()
            .map(|p| (p.partition_index, p.error_code, p.high_watermark, offsets(&p.records)))
            .collect()
    }

    #[test]
    fn returns_the_batches_from_the_fetch_offset_with_each_partitions_offsets() {
        let b = Fake::new();
        b.topic("t", 2);
        b.append(b.tp("t", 0), &[b"a", b"b"]);
        b.append(b.tp("t", 0), &[b"c"]);
        let resp: FetchResponse = b.call(ApiKey::Fetch, 12, &request("t", &[(0, 2), (1, 0)], 0, 0));
        assert_eq!(parts(&resp), vec![(0, 0, 3, vec![2]), (1, 0, 0, vec![])]);
        assert_eq!(resp.session_id, 0, "epoch -1 (the default): a sessionless fetch");
    }

    #[test]
    fn a_fetch_short_of_min_bytes_waits_for_an_append() {
        let b = Fake::new();
        b.topic("t", 1);
        b.arrive(b.tp("t", 0), &[b"late"]);
        let resp: FetchResponse = b.call(ApiKey::Fetch, 12, &request("t", &[(0, 0)], 1, 10_000));
        assert_eq!(parts(&resp), vec![(0, 0, 1, vec![0])]);
    }

    #[test]
    fn a_fetch_short_of_min_bytes_on_data_already_there_waits_instead_of_reading_again_and_again() {
        let b = Fake::new();
        b.topic("t", 1);
        b.append(b.tp("t", 0), &[b"a"]);
        let started = Instant::now();
        let resp: FetchResponse = b.call(ApiKey::Fetch, 12, &request("t", &[(0, 0)], 1 << 20, 50));
        assert!(started.elapsed() >= Duration::from_millis(50));
        assert_eq!(parts(&resp), vec![(0, 0, 1, vec![0])]);
        // One read, a wait until the deadline (nothing arrived), and the last read.
        assert_eq!(b.fetch_passes(), 2, "the fetch read the log again without waiting");
    }

    #[test]
    fn a_partition_after_the_first_whose_first_batch_does_not_fit_the_response_gets_no_records() {
        let b = Fake::new();
        b.topic("t", 2);
        let value = [7u8; 300];
        b.append(b.tp("t", 0), &[&value]);
        b.append(b.tp("t", 1), &[&value, &value]);
        let mut r = request("t", &[(0, 0), (1, 0)], 0, 0);
        // The first partition's batch and a third of the second's.
        let first = parts(&b.call(ApiKey::Fetch, 12, &request("t", &[(0, 0)], 0, 0)));
        assert_eq!(first[0].3, vec![0]);
        r.max_bytes = 600;
        let resp: FetchResponse = b.call(ApiKey::Fetch, 12, &r);
        let second = &resp.responses[0].partitions[1];
        assert!(second.records.as_ref().is_none_or(|r| r.is_empty()), "no part of a batch is sent");
        assert_eq!(parts(&resp), vec![(0, 0, 1, vec![0]), (1, 0, 2, vec![])]);
    }

    #[test]
    fn max_bytes_zero_answers_one_batch_of_the_first_partition_with_data() {
        let b = Fake::new();
        b.topic("t", 2);
        b.append(b.tp("t", 0), &[b"a"]);
        b.append(b.tp("t", 0), &[b"b"]);
        b.append(b.tp("t", 1), &[b"c"]);
        let mut r = request("t", &[(0, 0), (1, 0)], 1, 10_000);
        r.max_bytes = 0;
        let started = Instant::now();
        let resp: FetchResponse = b.call(ApiKey::Fetch, 12, &r);
        assert_eq!(parts(&resp), vec![(0, 0, 2, vec![0]), (1, 0, 1, vec![])]);
        assert!(started.elapsed() < Duration::from_secs(5), "min_bytes is capped at max_bytes: no wait");
    }

    #[test]
    fn a_partition_refused_before_the_read_does_not_cut_the_wait_short() {
        let b = Fake::new();
        b.topic("t", 1);
        b.arrive(b.tp("t", 0), &[b"late"]);
        // Partition 5 does not exist: Kafka answers it beside what the wait brings.
        let resp: FetchResponse = b.call(ApiKey::Fetch, 12, &request("t", &[(0, 0), (5, 0)], 1, 10_000));
        assert_eq!(parts(&resp), vec![(0, 0, 1, vec![0]), (5, ErrorCode::UnknownTopicOrPartition.code(), -1, vec![])]);
    }

    #[test]
    fn min_bytes_counts_what_the_partitions_hold_and_never_more_than_max_bytes() {
        let b = Fake::new();
        b.topic("t", 2);
        let value = [7u8; 300];
        for p in 0..2 {
            b.append(b.tp("t", p), &[&value]);
            b.append(b.tp("t", p), &[&value]);
        }
        // 800 bytes a response: partition 0's two batches (370 bytes each), none of partition
        // 1's. Asked for 1000, which no answer can hold: what the partitions hold is enough.
        let mut r = request("t", &[(0, 0), (1, 0)], 1000, 5_000);
        r.max_bytes = 800;
        let started = Instant::now();
        let resp: FetchResponse = b.call(ApiKey::Fetch, 12, &r);
        assert!(started.elapsed() < Duration::from_secs(2), "answered at once, not at the end of the wait");
        assert_eq!(parts(&resp), vec![(0, 0, 2, vec![0, 1]), (1, 0, 2, vec![])]);
        assert_eq!(b.fetch_passes(), 1);
    }

    #[test]
    fn a_partition_after_the_first_with_data_gets_no_batch_larger_than_its_own_limit() {
        let b = Fake::new();
        b.topic("t", 2);
        let value = [7u8; 300];
        b.append(b.tp("t", 0), &[&value]);
        b.append(b.tp("t", 1), &[&value]);
        let mut r = request("t", &[(0, 0), (1, 0)], 0, 0);
        for p in &mut r.topics[0].partitions {
            p.partition_max_bytes = 100;
        }
        // The first partition with data gets its first batch whole (KIP-74); the next does not.
        let resp: FetchResponse = b.call(ApiKey::Fetch, 12, &r);
        assert_eq!(parts(&resp), vec![(0, 0, 1, vec![0]), (1, 0, 1, vec![])]);
    }

    #[test]
    fn a_fetch_that_finds_nothing_answers_empty_when_its_wait_ends() {
        let b = Fake::new();
        b.topic("t", 1);
        let started = Instant::now();
        let resp: FetchResponse = b.call(ApiKey::Fetch, 12, &request("t", &[(0, 0)], 1, 20));
        assert!(started.elapsed() >= Duration::from_millis(20));
        assert_eq!(parts(&resp), vec![(0, 0, 0, vec![])]);
    }

    #[test]
    fn out_of_range_and_unknown_partitions_are_errors_of_their_own() {
        let b = Fake::new();
        b.topic("t", 1);
        let resp: FetchResponse = b.call(ApiKey::Fetch, 12, &request("t", &[(0, 5), (3, 0)], 0, 0));
        let codes: Vec<i16> = parts(&resp).iter().map(|p| p.1).collect();
        assert_eq!(codes, vec![ErrorCode::OffsetOutOfRange.code(), ErrorCode::UnknownTopicOrPartition.code()]);
    }

    #[test]
    fn a_consumer_without_read_and_a_follower_without_cluster_action_are_refused() {
        let b = Fake::with(|c| c.authorizer_enabled = true);
        b.topic("t", 1);
        let resp: FetchResponse = b.call_as(Some("User:eve"), ApiKey::Fetch, 12, &request("t", &[(0, 0)], 0, 0));
        assert_eq!(parts(&resp)[0].1, ErrorCode::TopicAuthorizationFailed.code());
        let mut follower = request("t", &[(0, 0)], 0, 0);
        follower.replica_id = proto_kafka::messages::BrokerId(2);
        // Kafka refuses each partition of a follower without CLUSTER_ACTION as a topic refusal.
        let resp: FetchResponse = b.call_as(Some("User:eve"), ApiKey::Fetch, 12, &follower);
        assert_eq!(parts(&resp)[0].1, ErrorCode::TopicAuthorizationFailed.code());
    }

    // ---- fetch sessions (KIP-227) ----

    fn session(mut r: FetchRequest, id: i32, epoch: i32) -> FetchRequest {
        r.session_id = id;
        r.session_epoch = epoch;
        r
    }

    /// A fetch of `parts` of topic `id` by topic id (v13+).
    fn request_by_id(id: uuid::Uuid, parts: &[(i32, i64)], min_bytes: i32, max_wait_ms: i32) -> FetchRequest {
        let mut r = request("", parts, min_bytes, max_wait_ms);
        r.topics[0].topic_id = id;
        r
    }

    fn forget(mut r: FetchRequest, topic: &str, partitions: &[i32]) -> FetchRequest {
        let mut f = ForgottenTopic::default();
        f.topic = TopicName(str_bytes(topic));
        f.partitions = partitions.to_vec();
        r.forgotten_topics_data.push(f);
        r
    }

    /// Every partition answered, over all topic entries: (topic name, or id from v13,
    /// partition, error, offsets of the records returned).
    fn answered(resp: &FetchResponse) -> Vec<(String, i32, i16, Vec<i64>)> {
        let mut out = Vec::new();
        for t in &resp.responses {
            let topic = if t.topic.is_empty() { t.topic_id.to_string() } else { t.topic.to_string() };
            for (p, e, _, offsets) in parts_of(t) {
                out.push((topic.clone(), p, e, offsets));
            }
        }
        out
    }

    fn fetch(b: &Fake, version: i16, r: &FetchRequest) -> FetchResponse {
        b.call(ApiKey::Fetch, version, r)
    }

    fn a(topic: &str, partition: i32, offsets: &[i64]) -> (String, i32, i16, Vec<i64>) {
        (topic.to_string(), partition, 0, offsets.to_vec())
    }

    #[test]
    fn an_initial_fetch_creates_a_session_and_answers_every_partition() {
        let b = Fake::new();
        b.topic("t", 3);
        b.append(b.tp("t", 1), &[b"x"]);
        let resp = fetch(&b, 12, &session(request("t", &[(0, 0), (1, 0), (2, 0)], 0, 0), 0, 0));
        assert_eq!(resp.error_code, 0);
        assert_ne!(resp.session_id, 0, "a session was created");
        assert_eq!(answered(&resp), vec![a("t", 0, &[]), a("t", 1, &[0]), a("t", 2, &[])]);
        assert_eq!(b.fetch_sessions().len(), 1);
        assert_eq!(b.probe().metrics().fetch_sessions.get(), 1);
        assert_eq!(b.probe().metrics().fetch_session_partitions.get(), 3);
    }

    #[test]
    fn an_incremental_fetch_answers_only_the_partitions_with_news() {
        let b = Fake::new();
        b.topic("t", 3);
        let id = fetch(&b, 12, &session(request("t", &[(0, 0), (1, 0), (2, 0)], 0, 0), 0, 0)).session_id;
        b.append(b.tp("t", 1), &[b"x", b"y"]);
        // The client names no partition: nothing of it changed.
        let resp = fetch(&b, 12, &session(request("t", &[], 0, 0), id, 1));
        assert_eq!((resp.error_code, resp.session_id), (0, id));
        assert_eq!(answered(&resp), vec![a("t", 1, &[0, 1])]);
        // Its offset moves on; t/1's high watermark is what the session last sent.
        let resp = fetch(&b, 12, &session(request("t", &[(1, 2)], 0, 0), id, 2));
        assert_eq!(answered(&resp), vec![], "nothing new anywhere");
        assert!(resp.responses.is_empty());
        b.append(b.tp("t", 0), &[b"z"]);
        let resp = fetch(&b, 12, &session(request("t", &[], 0, 0), id, 3));
        assert_eq!(answered(&resp), vec![a("t", 0, &[0])], "a new high watermark, with its record");
        // An error is always answered.
        let resp = fetch(&b, 12, &session(request("t", &[(2, 99)], 0, 0), id, 4));
        let codes: Vec<_> = answered(&resp).iter().map(|p| (p.1, p.2)).collect();
        // In the session's order: t/0 and then t/1 returned records, so they went last.
        assert_eq!(codes, vec![(2, ErrorCode::OffsetOutOfRange.code()), (0, 0)], "t/0 is read from 0 again");
        assert_eq!(b.probe().metrics().incremental_fetches.get(), 4);
    }

    #[test]
    fn forgotten_partitions_leave_the_session_and_the_last_one_closes_it() {
        let b = Fake::new();
        b.topic("t", 2);
        let id = fetch(&b, 12, &session(request("t", &[(0, 0), (1, 0)], 0, 0), 0, 0)).session_id;
        b.append(b.tp("t", 0), &[b"a"]);
        b.append(b.tp("t", 1), &[b"b"]);
        let resp = fetch(&b, 12, &session(forget(request("t", &[], 0, 0), "t", &[1]), id, 1));
        assert_eq!(answered(&resp), vec![a("t", 0, &[0])]);
        b.append(b.tp("t", 1), &[b"c"]);
        let resp = fetch(&b, 12, &session(request("t", &[(0, 1)], 0, 0), id, 2));
        assert_eq!(answered(&resp), vec![], "t/1 is no longer fetched");
        assert_eq!(b.fetch_sessions().partitions(), 1);
        // Forgetting the last partition closes the session: answered as sessionless.
        let resp = fetch(&b, 12, &session(forget(request("t", &[], 0, 0), "t", &[0]), id, 3));
        assert_eq!((resp.error_code, resp.session_id), (0, 0));
        assert!(b.fetch_sessions().is_empty());
        let resp = fetch(&b, 12, &session(request("t", &[], 0, 0), id, 4));
        assert_eq!(resp.error_code, ErrorCode::FetchSessionIdNotFound.code());
    }

    #[test]
    fn a_wrong_epoch_or_an_unknown_id_is_a_top_level_error_with_no_topics() {
        let b = Fake::new();
        b.topic("t", 1);
        let id = fetch(&b, 12, &session(request("t", &[(0, 0)], 0, 0), 0, 0)).session_id;
        for (sid, epoch, error) in [
            (id, 5, ErrorCode::InvalidFetchSessionEpoch),
            (id, -2, ErrorCode::InvalidFetchSessionEpoch),
            (id ^ 1, 1, ErrorCode::FetchSessionIdNotFound),
            (0, 1, ErrorCode::FetchSessionIdNotFound),
            (-7, 1, ErrorCode::FetchSessionIdNotFound),
        ] {
            let resp = fetch(&b, 12, &session(request("t", &[(0, 0)], 0, 0), sid, epoch));
            assert_eq!((resp.error_code, resp.session_id), (error.code(), 0), "id {sid} epoch {epoch}");
            assert!(resp.responses.is_empty());
        }
        // The session is untouched by the refused requests: epoch 1 is still next.
        let resp = fetch(&b, 12, &session(request("t", &[], 0, 0), id, 1));
        assert_eq!((resp.error_code, resp.session_id), (0, id));
        // A topic-by-name session is refused to a request by id.
        let tid = b.tp("t", 0).topic;
        let resp = fetch(&b, 13, &session(request_by_id(tid, &[], 0, 0), id, 2));
        assert_eq!(resp.error_code, ErrorCode::FetchSessionTopicIdError.code());
    }

    #[test]
    fn a_full_fetch_naming_a_session_closes_it() {
        let b = Fake::new();
        b.topic("t", 2);
        let full = request("t", &[(0, 0), (1, 0)], 0, 0);
        let id = fetch(&b, 12, &session(full.clone(), 0, 0)).session_id;
        // Epoch -1: closed, answered in full without a session.
        let resp = fetch(&b, 12, &session(full.clone(), id, -1));
        assert_eq!((resp.error_code, resp.session_id), (0, 0));
        assert_eq!(answered(&resp).len(), 2);
        assert!(b.fetch_sessions().is_empty());
        let resp = fetch(&b, 12, &session(full.clone(), id, 1));
        assert_eq!(resp.error_code, ErrorCode::FetchSessionIdNotFound.code());
        // Epoch 0 with an id: that one is closed and a new one made.
        let first = fetch(&b, 12, &session(full.clone(), 0, 0)).session_id;
        let second = fetch(&b, 12, &session(full.clone(), first, 0)).session_id;
        assert!(second != 0 && second != first);
        assert_eq!(b.fetch_sessions().len(), 1);
        assert_eq!(fetch(&b, 12, &session(full, first, 1)).error_code, ErrorCode::FetchSessionIdNotFound.code());
    }

    #[test]
    fn a_full_cache_answers_new_sessions_as_sessionless() {
        let b = Fake::with(|c| c.max_incremental_fetch_session_cache_slots = 1);
        b.topic("t", 2);
        let id = fetch(&b, 12, &session(request("t", &[(0, 0)], 0, 0), 0, 0)).session_id;
        let resp = fetch(&b, 12, &session(request("t", &[(0, 0), (1, 0)], 0, 0), 0, 0));
        assert_eq!((resp.error_code, resp.session_id), (0, 0), "no slot: the young session stays");
        assert_eq!(answered(&resp).len(), 2, "answered in full");
        assert_eq!(fetch(&b, 12, &session(request("t", &[], 0, 0), id, 1)).session_id, id);
        assert_eq!(b.probe().metrics().fetch_session_evictions.get(), 0);
        let off = Fake::with(|c| c.max_incremental_fetch_session_cache_slots = 0);
        off.topic("t", 1);
        assert_eq!(fetch(&off, 12, &session(request("t", &[(0, 0)], 0, 0), 0, 0)).session_id, 0, "sessions off");
    }

    #[test]
    fn a_stale_session_is_evicted_for_a_new_one() {
        let b = Fake::with(|c| {
            c.max_incremental_fetch_session_cache_slots = 1;
            c.min_incremental_fetch_session_eviction_ms = 30;
        });
        b.topic("t", 3);
        let old = fetch(&b, 12, &session(request("t", &[(0, 0), (1, 0), (2, 0)], 0, 0), 0, 0)).session_id;
        std::thread::sleep(Duration::from_millis(60));
        // Unused for longer than the eviction time: evicted, though it has more partitions.
        let new = fetch(&b, 12, &session(request("t", &[(0, 0)], 0, 0), 0, 0)).session_id;
        assert_ne!(new, 0);
        assert_eq!(b.probe().metrics().fetch_session_evictions.get(), 1);
        let resp = fetch(&b, 12, &session(request("t", &[], 0, 0), old, 1));
        assert_eq!(resp.error_code, ErrorCode::FetchSessionIdNotFound.code());
    }

    #[test]
    fn an_old_session_with_fewer_partitions_is_evicted_for_a_bigger_one() {
        let b = Fake::with(|c| {
            c.max_incremental_fetch_session_cache_slots = 1;
            c.min_incremental_fetch_session_eviction_ms = 300;
        });
        b.topic("t", 3);
        let two = request("t", &[(0, 0), (1, 0)], 0, 0);
        let three = request("t", &[(0, 0), (1, 0), (2, 0)], 0, 0);
        let old = fetch(&b, 12, &session(two.clone(), 0, 0)).session_id;
        assert_eq!(fetch(&b, 12, &session(three.clone(), 0, 0)).session_id, 0, "too young to evict");
        std::thread::sleep(Duration::from_millis(350));
        // Used once it is older than the eviction time (and so not stale): evictable.
        assert_eq!(fetch(&b, 12, &session(request("t", &[], 0, 0), old, 1)).session_id, old);
        assert_eq!(fetch(&b, 12, &session(two, 0, 0)).session_id, 0, "as many partitions: kept");
        let new = fetch(&b, 12, &session(three, 0, 0)).session_id;
        assert!(new != 0 && new != old, "more partitions: the old one goes");
        assert_eq!(b.probe().metrics().fetch_session_evictions.get(), 1);
        let resp = fetch(&b, 12, &session(request("t", &[], 0, 0), old, 2));
        assert_eq!(resp.error_code, ErrorCode::FetchSessionIdNotFound.code());
    }

    #[test]
    fn a_session_by_topic_id_answers_unknown_and_deleted_topics_with_their_errors() {
        let b = Fake::new();
        b.topic("t", 2);
        b.topic("gone", 1);
        let t = b.tp("t", 0).topic;
        let gone = b.tp("gone", 0).topic;
        let mut full = request_by_id(t, &[(0, 0), (1, 0)], 0, 0);
        full.topics.push(request_by_id(gone, &[(0, 0)], 0, 0).topics.remove(0));
        let resp = fetch(&b, 13, &session(full, 0, 0));
        let id = resp.session_id;
        assert_ne!(id, 0);
        assert_eq!(answered(&resp).len(), 3);
        b.append(b.tp("t", 1), &[b"x"]);
        let unknown = uuid::Uuid::from_u128(0xdead);
        let resp = fetch(&b, 13, &session(request_by_id(unknown, &[(0, 0)], 0, 0), id, 1));
        let unknown_id = ErrorCode::UnknownTopicId.code();
        assert_eq!(
            answered(&resp),
            vec![a(&t.to_string(), 1, &[0]), (unknown.to_string(), 0, unknown_id, vec![])],
            "by id: only t/1 changed; the unknown id is answered with its error"
        );
        futures_lite::future::block_on(b.delete_topics(vec![("gone".into(), uuid::Uuid::nil())]))
            .remove(0)
            .expect("deleted");
        let resp = fetch(&b, 13, &session(request_by_id(t, &[(1, 1)], 0, 0), id, 2));
        assert_eq!(
            answered(&resp),
            vec![
                (gone.to_string(), 0, ErrorCode::UnknownTopicOrPartition.code(), vec![]),
                (unknown.to_string(), 0, unknown_id, vec![]),
            ],
            "the deleted topic's partition keeps its name, so it is unknown as a partition"
        );
        let resp = fetch(&b, 12, &session(request("t", &[], 0, 0), id, 3));
        assert_eq!(resp.error_code, ErrorCode::FetchSessionTopicIdError.code(), "a by-name request");
    }

    #[test]
    fn a_delayed_incremental_fetch_wakes_on_a_session_partition_the_request_does_not_name() {
        let b = Fake::new();
        b.topic("t", 2);
        let id = fetch(&b, 12, &session(request("t", &[(0, 0), (1, 0)], 0, 0), 0, 0)).session_id;
        b.arrive(b.tp("t", 1), &[b"late"]);
        let started = Instant::now();
        let resp = fetch(&b, 12, &session(request("t", &[(0, 0)], 1, 10_000), id, 1));
        assert!(started.elapsed() < Duration::from_secs(5), "woken by the append, not by the wait's end");
        assert_eq!(answered(&resp), vec![a("t", 1, &[0])]);
        assert_eq!(b.probe().metrics().delayed_fetch.get(), 1);
    }

    #[test]
    fn a_follower_session_is_privileged() {
        let b = Fake::with(|c| c.max_incremental_fetch_session_cache_slots = 1);
        b.topic("t", 2);
        let consumer = fetch(&b, 12, &session(request("t", &[(0, 0), (1, 0)], 0, 0), 0, 0)).session_id;
        let mut follower = session(request("t", &[(0, 0)], 0, 0), 0, 0);
        follower.replica_id = proto_kafka::messages::BrokerId(1);
        let resp = fetch(&b, 12, &follower);
        assert_ne!(resp.session_id, 0, "a follower evicts a consumer's session");
        assert_eq!(
            fetch(&b, 12, &session(request("t", &[], 0, 0), consumer, 1)).error_code,
            ErrorCode::FetchSessionIdNotFound.code()
        );
        let mut next = session(request("t", &[], 0, 0), resp.session_id, 1);
        next.replica_id = proto_kafka::messages::BrokerId(1);
        assert_eq!(fetch(&b, 12, &next).session_id, resp.session_id);
    }
}
