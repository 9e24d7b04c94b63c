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

use std::rc::Rc;
use std::time::{Duration, Instant};

use proto_kafka::messages::{ApiKey, FetchRequest};

use super::{authz, checked, ApiSpec, Outcome, Request};
use crate::auth::acl::Operation;
use crate::metrics::{self, ErrorKind};
use crate::protocol::fetch_writer::{self, FetchOut, PartitionOut, TopicOut};
use crate::protocol::ErrorCode;
use crate::quota::Kind;
use crate::shard::{FetchAsk, Shard, Tp};

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

pub async fn handle(shard: &Rc<Shard>, req: Request) -> Outcome {
    let r: FetchRequest = req.decode()?;
    let catalog = shard.catalog();
    let by_id = req.version >= 13;
    let replica_id = if req.version >= 15 { r.replica_state.replica_id } else { r.replica_id };
    // A follower's fetch needs CLUSTER_ACTION (Some(allowed)); a consumer's READ on each topic.
    let follower = (replica_id.0 >= 0).then(|| authz::cluster(shard, &req, Operation::ClusterAction));
    let mut topics: Vec<(String, uuid::Uuid, Vec<Wanted>)> = Vec::with_capacity(r.topics.len());
    for t in &r.topics {
        let meta = if by_id { catalog.topic_by_id(&t.topic_id) } else { catalog.topic(t.topic.as_str()) };
        let unknown = if by_id { ErrorCode::UnknownTopicId } else { ErrorCode::UnknownTopicOrPartition };
        let acl_name = if by_id { meta.map(|m| m.name.as_str()) } else { Some(t.topic.as_str()) };
        let refusal = match follower {
            Some(allowed) => (!allowed).then_some(ErrorCode::TopicAuthorizationFailed),
            None => acl_name.and_then(|n| authz::topic_or_fail(shard, &req, Operation::Read, n).err()),
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
        let out = read_all(shard, &topics, max_bytes).await;
        let bytes: u64 =
            out.iter().flat_map(|t| &t.partitions).map(|p| p.records.as_ref().map_or(0, |r| r.len as u64)).sum();
        let errors = out.iter().flat_map(|t| &t.partitions).any(|p| p.error != 0);
        let now = Instant::now();
        if bytes >= min_bytes || errors || now >= deadline {
            if errors {
                shard.probe.request_error(shard.probe.api_slot(Some(SPEC.key as i16)), ErrorKind::ErrorCode);
            }
            let throttle = shard.quotas.record_as(req.session.user(), req.client_id.as_deref(), Kind::Fetch, bytes);
            if !throttle.is_zero() {
                shard.probe.throttled(shard.probe.api_slot(Some(SPEC.key as i16)), throttle);
                metrics::throttle(throttle);
            }
            let throttle_time_ms = throttle.as_millis() as i32;
            let out = FetchOut { throttle_time_ms, error: 0, session_id: 0, topics: out };
            return Ok(Some(fetch_writer::encode(req.version, req.correlation_id, &out)));
        }
        // Delayed fetch: wait for any partition's high watermark to pass its fetch offset.
        if !delayed {
            delayed = true;
            shard.probe.delayed_fetch();
        }
        let watched = topics.iter().flat_map(|t| &t.2).filter_map(|w| w.tp.map(|tp| (tp, w.offset))).collect();
        shard.watch(watched, deadline - now).await;
    }
}

/// One read pass over every partition, at once on their home shards, then trimmed to
/// the response-wide `max_bytes` in request order.
async fn read_all(shard: &Rc<Shard>, topics: &[(String, uuid::Uuid, Vec<Wanted>)], max_bytes: u32) -> Vec<TopicOut> {
    let checked = topics.iter().flat_map(|t| &t.2).map(|w| match (w.error, w.tp) {
        (Some(e), _) => Err(e),
        (None, Some(tp)) => Ok((tp, FetchAsk { offset: w.offset, max_bytes: w.max_bytes })),
        (None, None) => Err(ErrorCode::UnknownTopicOrPartition),
    });
    let mut reads = checked::run(checked.collect(), |asks| shard.fetch(asks)).await.into_iter();
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
