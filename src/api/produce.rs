//! Produce: each partition's batch is appended on its home shard (record bytes move there as
//! `Bytes`); all partitions of a request are in flight at once and the response lists them
//! in request order. acks=0 gets no response at all.
//!
//! The per-partition tasks join the request's metrics scope, so their waits on home shards
//! and durable acks count as its remote time; a response with any partition error counts
//! once in `request_errors_total{error="error_code"}`.
//!
//! Quota: the request's record bytes count against its client-id's `producer_byte_rate` once
//! the appends are done; over it, the response carries the throttle time and the connection
//! is muted for that long (see `quota`). acks=0 is charged too: only the mute tells it.
//!
//! Authorization, Kafka's: a request carrying transactional batches needs WRITE on its
//! transactional id, or every partition fails; each topic needs WRITE, checked before its
//! existence so that a refusal does not tell whether the topic exists.

use std::rc::Rc;

use proto_kafka::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use proto_kafka::messages::{ApiKey, ProduceRequest, ProduceResponse};

use super::{authz, ApiSpec, Outcome, Request};
use crate::auth::acl::Operation;
use crate::protocol::{batch, ErrorCode};
use crate::quota::Kind;
use crate::shard::{Shard, Tp};

/// Served from v3 (record batch v2); advertised from v0 as Kafka 4 does (see `ApiSpec`).
/// Requests below v3 are refused: they would carry the pre-v2 message format.
pub const SPEC: ApiSpec = ApiSpec { key: ApiKey::Produce, min: 3, max: 13, advertised_min: 0 };

pub async fn handle(shard: &Rc<Shard>, req: Request) -> Outcome {
    let r: ProduceRequest = req.decode()?;
    let catalog = shard.catalog();
    let by_id = req.version >= 13;
    let acks_ok = matches!(r.acks, -1..=1);
    let record_bytes: u64 = r
        .topic_data
        .iter()
        .flat_map(|t| &t.partition_data)
        .map(|p| p.records.as_ref().map_or(0, |b| b.len() as u64))
        .sum();
    // Batch headers are only scanned when ACLs are enforced.
    let transactional_refusal = (shard.authorizer_enabled()
        && has_transactional_batches(&r)
        && !r.transactional_id.as_ref().is_some_and(|id| authz::transactional_id(shard, &req, Operation::Write, id)))
    .then_some(ErrorCode::TransactionalIdAuthorizationFailed);
    let mut topics = Vec::with_capacity(r.topic_data.len());
    for t in r.topic_data {
        let meta = if by_id { catalog.topic_by_id(&t.topic_id) } else { catalog.topic(t.name.as_str()) };
        let unknown = if by_id { ErrorCode::UnknownTopicId } else { ErrorCode::UnknownTopicOrPartition };
        // An unknown topic id has no name to check: it stays UNKNOWN_TOPIC_ID.
        let acl_name = if by_id { meta.map(|m| m.name.as_str()) } else { Some(t.name.as_str()) };
        let refusal = transactional_refusal
            .or_else(|| acl_name.and_then(|n| authz::topic_or_fail(shard, &req, Operation::Write, n).err()));
        let mut parts = Vec::with_capacity(t.partition_data.len());
        for p in t.partition_data {
            let pending = match (refusal, meta, p.records) {
                _ if !acks_ok => Err(ErrorCode::InvalidRequiredAcks),
                (Some(e), _, _) => Err(e),
                (None, None, _) => Err(unknown),
                // Only the broker writes its internal topics (Kafka answers the same).
                (None, Some(m), _) if m.name == crate::group::offsets::TOPIC => Err(ErrorCode::InvalidTopicException),
                (None, Some(m), _) if p.index < 0 || p.index >= m.partitions() => {
                    Err(ErrorCode::UnknownTopicOrPartition)
                }
                (None, Some(_), None) => Err(ErrorCode::InvalidRecord),
                (None, Some(m), Some(records)) => {
                    let tp = Tp { topic: m.id, partition: p.index };
                    let shard = shard.clone();
                    Ok(glommio::spawn_local(crate::metrics::inherit(async move { shard.produce(tp, records).await })))
                }
            };
            parts.push((p.index, pending));
        }
        topics.push((t.name, t.topic_id, parts));
    }
    if r.acks == 0 {
        for (_, _, parts) in topics {
            for (_, pending) in parts {
                if let Ok(task) = pending {
                    task.detach();
                }
            }
        }
        charge_quota(shard, &req, record_bytes);
        return Ok(None);
    }
    let mut resp = ProduceResponse::default();
    let mut any_error = false;
    for (name, id, parts) in topics {
        let mut tr = TopicProduceResponse::default();
        tr.name = name;
        tr.topic_id = id;
        for (index, pending) in parts {
            let result = match pending {
                Ok(task) => task.await,
                Err(e) => Err(e),
            };
            let mut pr = PartitionProduceResponse::default();
            pr.index = index;
            pr.log_append_time_ms = -1;
            match result {
                Ok(a) => {
                    pr.base_offset = a.base_offset;
                    pr.log_start_offset = a.log_start_offset;
                    pr.log_append_time_ms = a.log_append_time;
                }
                Err(e) => {
                    any_error = true;
                    pr.error_code = e.code();
                    pr.base_offset = -1;
                    pr.log_start_offset = -1;
                }
            }
            tr.partition_responses.push(pr);
        }
        resp.responses.push(tr);
    }
    if any_error {
        let probe = &shard.probe;
        probe.request_error(probe.api_slot(Some(ApiKey::Produce as i16)), crate::metrics::ErrorKind::ErrorCode);
    }
    resp.throttle_time_ms = charge_quota(shard, &req, record_bytes);
    req.respond(resp)
}

/// Whether any partition carries a transactional batch (Kafka's `hasTransactionalRecords`).
/// Only batch headers are read; a malformed partition ends its scan and is refused later.
fn has_transactional_batches(r: &ProduceRequest) -> bool {
    r.topic_data.iter().flat_map(|t| &t.partition_data).filter_map(|p| p.records.as_deref()).any(|mut records| {
        while let Ok(h) = batch::read_header(records) {
            if h.is_transactional() {
                return true;
            }
            match records.get(h.size..) {
                Some(rest) if !rest.is_empty() => records = rest,
                _ => break,
            }
        }
        false
    })
}

/// Counts the request's record bytes against its client's producer quota; returns the
/// throttle time for the response, ms, having told the connection and the metrics.
fn charge_quota(shard: &Shard, req: &Request, record_bytes: u64) -> i32 {
    let throttle = shard.quotas.record_as(req.session.user(), req.client_id.as_deref(), Kind::Produce, record_bytes);
    if throttle.is_zero() {
        return 0;
    }
    shard.probe.throttled(shard.probe.api_slot(Some(SPEC.key as i16)), throttle);
    crate::metrics::throttle(throttle);
    throttle.as_millis() as i32
}
