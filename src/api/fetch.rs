//! Fetch: reads every requested partition on its home shard, which answers with offsets and a
//! file region (never the bytes); the response is written here and its regions are sent
//! with sendfile by the connection. When fewer than `min_bytes` are available the fetch
//! waits — up to `max_wait_ms` — for an append on any of its partitions to move a high
//! watermark, then reads again (a delayed fetch). Sessions are not kept: every response
//! carries session id 0, which tells clients to send full fetch requests.
//!
//! Metrics: a fetch that parks counts once as a delayed fetch and its wait as remote time
//! (one watch per home shard touched); a read on another shard is remote time too; a response with any partition error counts once in
//! `request_errors_total{error="error_code"}`.
//!
//! Size limits follow KIP-74: each partition gets at most `partition_max_bytes` and the
//! response at most `max_bytes`, except that the first batch of the first partition with
//! data is always returned whole so a consumer can make progress past a large batch.
//!
//! Quota: the record bytes of the response count against its client-id's
//! `consumer_byte_rate`; over it, the response carries the throttle time and the connection
//! is muted for that long (see `quota`). Like Kafka, the response that crosses the quota is
//! still sent in full.
//!
//! Authorization, Kafka's: a consumer needs READ on each topic (topic ids are resolved to
//! names first; an unknown id stays UNKNOWN_TOPIC_ID), checked before the partition exists;
//! a follower (replica id >= 0) needs CLUSTER_ACTION instead, for every partition.

use std::time::{Duration, Instant};

use proto_kafka::messages::{ApiKey, FetchRequest};

use super::{authz, checked, ApiSpec, Broker, Outcome, Request};
use crate::auth::acl::Operation;
use crate::metrics::{self, ErrorKind};
use crate::protocol::fetch_writer::{self, FetchOut, PartitionOut, TopicOut};
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
    error: Option<ErrorCode>,
}

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: FetchRequest = req.decode()?;
    let catalog = broker.catalog();
    let by_id = req.version >= 13;
    let replica_id = if req.version >= 15 { r.replica_state.replica_id } else { r.replica_id };
    // A follower's fetch needs CLUSTER_ACTION (Some(allowed)); a consumer's READ on each topic.
    let follower = (replica_id.0 >= 0).then(|| authz::cluster(broker, &req, Operation::ClusterAction));
    let mut topics: Vec<(String, uuid::Uuid, Vec<Wanted>)> = Vec::with_capacity(r.topics.len());
    for t in &r.topics {
        let meta = if by_id { catalog.topic_by_id(&t.topic_id) } else { catalog.topic(t.topic.as_str()) };
        let unknown = if by_id { ErrorCode::UnknownTopicId } else { ErrorCode::UnknownTopicOrPartition };
        let acl_name = if by_id { meta.map(|m| m.name.as_str()) } else { Some(t.topic.as_str()) };
        let refusal = match follower {
            Some(allowed) => (!allowed).then_some(ErrorCode::TopicAuthorizationFailed),
            None => acl_name.and_then(|n| authz::topic_or_fail(broker, &req, Operation::Read, n).err()),
        };
        let wanted = t
            .partitions
            .iter()
            .map(|p| {
                let mut w = Wanted {
                    tp: None,
                    index: p.partition,
                    offset: p.fetch_offset,
                    max_bytes: p.partition_max_bytes.max(0) as u32,
                    error: None,
                };
                match meta {
                    _ if refusal.is_some() => w.error = refusal,
                    None => w.error = Some(unknown),
                    Some(m) if p.partition < 0 || p.partition >= m.partitions() => {
                        w.error = Some(ErrorCode::UnknownTopicOrPartition)
                    }
                    // Our leader epoch is always 0: a client that believes in a later one
                    // has metadata from elsewhere.
                    Some(_) if p.current_leader_epoch > 0 => w.error = Some(ErrorCode::UnknownLeaderEpoch),
                    Some(m) => w.tp = Some(Tp { topic: m.id, partition: p.partition }),
                }
                w
            })
            .collect();
        let name = meta.map_or_else(|| t.topic.to_string(), |m| m.name.clone());
        topics.push((name, t.topic_id, wanted));
    }

    let wait = Duration::from_millis(r.max_wait_ms.max(0) as u64).min(MAX_WAIT_CAP);
    let deadline = Instant::now() + wait;
    let min_bytes = r.min_bytes.max(0) as u64;
    let max_bytes = if r.max_bytes <= 0 { u32::MAX } else { r.max_bytes as u32 };
    let mut delayed = false;
    loop {
        let out = read_all(broker, &topics, max_bytes).await;
        let bytes: u64 =
            out.iter().flat_map(|t| &t.partitions).map(|p| p.records.as_ref().map_or(0, |r| r.len as u64)).sum();
        let errors = out.iter().flat_map(|t| &t.partitions).any(|p| p.error != 0);
        let now = Instant::now();
        if bytes >= min_bytes || errors || now >= deadline {
            if errors {
                broker.probe().request_error(broker.probe().api_slot(Some(SPEC.key as i16)), ErrorKind::ErrorCode);
            }
            let throttle = broker.quotas().record_as(req.session.user(), req.client_id.as_deref(), Kind::Fetch, bytes);
            if !throttle.is_zero() {
                broker.probe().throttled(broker.probe().api_slot(Some(SPEC.key as i16)), throttle);
                metrics::throttle(throttle);
            }
            let throttle_time_ms = throttle.as_millis() as i32;
            let out = FetchOut { throttle_time_ms, error: 0, session_id: 0, topics: out };
            return Ok(Some(fetch_writer::encode(req.version, req.correlation_id, &out)));
        }
        // Delayed fetch: wait for any partition's high watermark to pass its fetch offset.
        if !delayed {
            delayed = true;
            broker.probe().delayed_fetch();
        }
        let watched = topics.iter().flat_map(|t| &t.2).filter_map(|w| w.tp.map(|tp| (tp, w.offset))).collect();
        broker.watch(watched, deadline - now).await;
    }
}

/// One read pass over every partition, at once on their home shards, then trimmed to
/// the response-wide `max_bytes` in request order.
async fn read_all(broker: &impl Broker, topics: &[(String, uuid::Uuid, Vec<Wanted>)], max_bytes: u32) -> Vec<TopicOut> {
    let checked = topics.iter().flat_map(|t| &t.2).map(|w| match (w.error, w.tp) {
        (Some(e), _) => Err(e),
        (None, Some(tp)) => Ok((tp, FetchAsk { offset: w.offset, max_bytes: w.max_bytes })),
        (None, None) => Err(ErrorCode::UnknownTopicOrPartition),
    });
    let mut reads = checked::run(checked.collect(), |asks| broker.fetch(asks)).await.into_iter();
    let mut remaining = max_bytes as u64;
    let mut first_data = true;
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
            };
            match result {
                Ok(read) => {
                    p.high_watermark = read.offsets.high_watermark;
                    p.last_stable_offset = read.offsets.high_watermark;
                    p.log_start_offset = read.offsets.log_start;
                    if let Some(mut region) = read.records {
                        let len = region.len as u64;
                        let keep = if first_data {
                            len.min(remaining.max(read.first_batch_len as u64))
                        } else {
                            len.min(remaining)
                        };
                        if keep > 0 {
                            region.len = keep as u32;
                            remaining -= keep.min(remaining);
                            first_data = false;
                            p.records = Some(region);
                        }
                    }
                }
                Err(e) => p.error = e.code(),
            }
            t.partitions.push(p);
        }
        out.push(t);
    }
    out
}

#[cfg(test)]
mod tests {
    use proto_kafka::messages::fetch_request::{FetchPartition, FetchTopic};
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
        let offsets = |records: &Option<bytes::Bytes>| {
            let mut out = Vec::new();
            let mut rest = records.as_deref().unwrap_or_default();
            while let Ok(h) = batch::read_header(rest) {
                out.extend(h.base_offset..=h.last_offset());
                rest = &rest[h.size..];
            }
            out
        };
        resp.responses[0]
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
        assert_eq!(resp.session_id, 0, "no fetch sessions are kept");
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
}
