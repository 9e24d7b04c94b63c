//! Produce: each partition's batch is appended on its home shard (record bytes move there as
//! `Bytes`, one message per other shard touched); all partitions of a request are in flight
//! at once and the response lists them in request order. acks=0 gets no response at all;
//! if a partition refused its batch, the connection is closed (as Kafka does).
//!
//! Waits on home shards and durable acks count as the request's remote time; a response
//! with any partition error counts once in `request_errors_total{error="error_code"}`.
//!
//! Quota: the request's record bytes count against its client-id's `producer_byte_rate` once
//! the appends are done; over it, the response carries the throttle time and the connection
//! is muted for that long (see `quota`). acks=0 is charged too: only the mute tells it.
//!
//! Authorization, Kafka's: a request carrying transactional batches needs WRITE on its
//! transactional id, or every partition fails; each topic needs WRITE, checked before its
//! existence so that a refusal does not tell whether the topic exists.

use proto_kafka::messages::produce_response::{
    BatchIndexAndErrorMessage, NodeEndpoint, PartitionProduceResponse, TopicProduceResponse,
};
use proto_kafka::messages::{ApiKey, BrokerId, ProduceRequest, ProduceResponse};

use super::{authz, checked, ApiSpec, Broker, Fault, Outcome, Request};
use crate::auth::acl::Operation;
use crate::log::Refusal;
use crate::protocol::{batch, ErrorCode, StrBytes};
use crate::quota::Kind;
use crate::shard::{ProduceAcks, Produced, Tp};

/// Served from v3 (record batch v2); advertised from v0 as Kafka 4 does (see `ApiSpec`).
/// Requests below v3 are refused: they would carry the pre-v2 message format.
pub const SPEC: ApiSpec = ApiSpec { key: ApiKey::Produce, min: 3, max: 13, advertised_min: 0 };

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: ProduceRequest = req.decode()?;
    let catalog = broker.catalog();
    let by_id = req.version >= 13;
    let acks_ok = matches!(r.acks, -1..=1);
    let record_bytes: u64 = r
        .topic_data
        .iter()
        .flat_map(|t| &t.partition_data)
        .map(|p| p.records.as_ref().map_or(0, |b| b.len() as u64))
        .sum();
    // Batch headers are only scanned when ACLs are enforced.
    let transactional_refusal = (broker.authorizer_enabled()
        && has_transactional_batches(&r)
        && !r.transactional_id.as_ref().is_some_and(|id| authz::transactional_id(broker, &req, Operation::Write, id)))
    .then_some(ErrorCode::TransactionalIdAuthorizationFailed);
    // Every partition's batch, checked here, then appended on its home shard: all at once.
    let mut checked = Vec::new();
    let mut layout = Vec::with_capacity(r.topic_data.len());
    for t in r.topic_data {
        let meta = if by_id { catalog.topic_by_id(&t.topic_id) } else { catalog.topic(t.name.as_str()) };
        let unknown = if by_id { ErrorCode::UnknownTopicId } else { ErrorCode::UnknownTopicOrPartition };
        // An unknown topic id has no name to check: it stays UNKNOWN_TOPIC_ID.
        let acl_name = if by_id { meta.map(|m| m.name.as_str()) } else { Some(t.name.as_str()) };
        let refusal = transactional_refusal
            .or_else(|| acl_name.and_then(|n| authz::topic_or_fail(broker, &req, Operation::Write, n).err()));
        let mut indexes = Vec::with_capacity(t.partition_data.len());
        for p in t.partition_data {
            indexes.push(p.index);
            checked.push(match (refusal, meta, p.records) {
                _ if !acks_ok => Err(ErrorCode::InvalidRequiredAcks),
                (Some(e), _, _) => Err(e),
                (None, None, _) => Err(unknown),
                // Only the broker writes its internal topics (Kafka answers the same).
                (None, Some(m), _) if m.name == crate::group::offsets::TOPIC => Err(ErrorCode::InvalidTopicException),
                (None, Some(m), _) if p.index < 0 || p.index >= m.partitions() => {
                    Err(ErrorCode::UnknownTopicOrPartition)
                }
                (None, Some(_), None) => Err(ErrorCode::InvalidRecord),
                // zstd came with Produce v7 (KIP-110): an older request may not carry it.
                (None, Some(_), Some(records)) if req.version < 7 && is_zstd(&records) => {
                    Err(ErrorCode::UnsupportedCompressionType)
                }
                (None, Some(m), Some(records)) => Ok((Tp { topic: m.id, partition: p.index }, records)),
            });
        }
        layout.push((t.name, t.topic_id, meta.map(|m| m.id), indexes));
    }
    let acks = ProduceAcks {
        all_replicas: r.acks == -1,
        timeout: std::time::Duration::from_millis(r.timeout_ms.max(0) as u64),
    };
    let results =
        checked::run(
            checked,
            |batches| async move { broker.produce(batches, acks).await.into_iter().map(Ok).collect() },
        )
        .await;
    let results: Vec<Produced> = results.into_iter().map(|r| r.unwrap_or_else(|code| Err(code.into()))).collect();
    if r.acks == 0 {
        // Waited for like any other produce (a client sending faster than the log writes is
        // held back by its connection's in-flight requests), answered by nothing, or by
        // closing the connection when a partition refused its batch.
        charge_quota(broker, &req, record_bytes);
        let partitions = layout.iter().flat_map(|(name, _, _, indexes)| indexes.iter().map(move |i| (name, i)));
        let refused: Vec<String> = partitions
            .zip(&results)
            .filter_map(|((name, index), r)| {
                r.as_ref().err().map(|e| format!("{}-{index}: {}", name.as_str(), describe(e)))
            })
            .collect();
        return match refused.is_empty() {
            true => Ok(None),
            false => Err(Fault::UnacknowledgedProduce(refused.join(", "))),
        };
    }
    let mut results = results.into_iter();
    let mut resp = ProduceResponse::default();
    let mut any_error = false;
    let mut hinted = std::collections::BTreeSet::new();
    for (name, id, known, indexes) in layout {
        let mut tr = TopicProduceResponse::default();
        tr.name = name;
        tr.topic_id = id;
        for index in indexes {
            let mut pr = PartitionProduceResponse::default();
            pr.index = index;
            pr.log_append_time_ms = -1;
            match results.next().expect("one result per partition") {
                Ok(a) => {
                    pr.base_offset = a.base_offset;
                    pr.log_start_offset = a.log_start_offset;
                    pr.log_append_time_ms = a.log_append_time;
                }
                Err(refusal) => {
                    any_error = true;
                    let e = refusal.code;
                    pr.error_code = e.code();
                    pr.base_offset = -1;
                    pr.log_start_offset = -1;
                    // KIP-467 (v8+): why, and which records of the batch were at fault.
                    pr.error_message = refusal.message.map(StrBytes::from_string);
                    pr.record_errors = refusal
                        .records
                        .into_iter()
                        .map(|batch_index| {
                            let mut r = BatchIndexAndErrorMessage::default();
                            r.batch_index = batch_index;
                            r
                        })
                        .collect();
                    // KIP-951: where the partition's leader is now, so the client need not
                    // wait for a metadata refresh.
                    let leadership = known.and_then(|topic| broker.leadership(&Tp { topic, partition: index }));
                    if let Some(v) = leadership.filter(|v| e == ErrorCode::NotLeaderOrFollower && v.leader >= 0) {
                        pr.current_leader.leader_id = BrokerId(v.leader);
                        pr.current_leader.leader_epoch = v.epoch;
                        hinted.insert(v.leader);
                    }
                }
            }
            tr.partition_responses.push(pr);
        }
        resp.responses.push(tr);
    }
    if any_error {
        let probe = &broker.probe();
        probe.request_error(probe.api_slot(Some(ApiKey::Produce as i16)), crate::metrics::ErrorKind::ErrorCode);
    }
    if !hinted.is_empty() {
        resp.node_endpoints = super::metadata::broker_entries(broker, &req)
            .into_iter()
            .filter(|b| hinted.contains(&b.node_id.0))
            .map(|b| {
                let mut n = NodeEndpoint::default();
                n.node_id = b.node_id;
                n.host = b.host;
                n.port = b.port;
                n.rack = b.rack;
                n
            })
            .collect();
    }
    resp.throttle_time_ms = charge_quota(broker, &req, record_bytes);
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
fn charge_quota(broker: &impl Broker, req: &Request, record_bytes: u64) -> i32 {
    let throttle = broker.quotas().record_as(req.session.user(), req.client_id.as_deref(), Kind::Produce, record_bytes);
    if throttle.is_zero() {
        return 0;
    }
    broker.probe().throttled(broker.probe().api_slot(Some(SPEC.key as i16)), throttle);
    crate::metrics::throttle(throttle);
    throttle.as_millis() as i32
}

/// A refusal as the log line of a closed acks=0 connection names it.
fn describe(r: &Refusal) -> String {
    match &r.message {
        Some(m) => format!("{:?} ({m})", r.code),
        None => format!("{:?}", r.code),
    }
}

fn is_zstd(records: &[u8]) -> bool {
    batch::read_header(records).is_ok_and(|h| h.codec() == crate::protocol::compression::ZSTD)
}

#[cfg(test)]
mod tests {
    use proto_kafka::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use proto_kafka::messages::TopicName;

    use super::*;
    use crate::api::fake::Fake;
    use crate::api::str_bytes;

    fn request(acks: i16, topic: &str, parts: &[(i32, Option<Vec<u8>>)]) -> ProduceRequest {
        let mut t = TopicProduceData::default();
        t.name = TopicName(str_bytes(topic));
        for (index, records) in parts {
            let mut p = PartitionProduceData::default();
            p.index = *index;
            p.records = records.clone().map(bytes::Bytes::from);
            t.partition_data.push(p);
        }
        let mut r = ProduceRequest::default();
        r.acks = acks;
        r.timeout_ms = 1000;
        r.topic_data.push(t);
        r
    }

    fn batch_of(values: &[&[u8]]) -> Option<Vec<u8>> {
        Some(batch::build(0, values))
    }

    fn results(resp: &ProduceResponse) -> Vec<(i32, i16, i64)> {
        resp.responses[0].partition_responses.iter().map(|p| (p.index, p.error_code, p.base_offset)).collect()
    }

    #[test]
    fn appends_each_partition_and_answers_in_request_order() {
        let b = Fake::new();
        b.topic("t", 2);
        let req = request(-1, "t", &[(1, batch_of(&[b"a", b"b"])), (0, batch_of(&[b"c"])), (1, batch_of(&[b"d"]))]);
        let resp: ProduceResponse = b.call(ApiKey::Produce, 9, &req);
        assert_eq!(results(&resp), vec![(1, 0, 0), (0, 0, 0), (1, 0, 2)]);
        assert_eq!(b.offsets_of(b.tp("t", 1)).high_watermark, 3);
        assert_eq!(b.offsets_of(b.tp("t", 0)).high_watermark, 1);
    }

    #[test]
    fn refuses_unknown_partitions_bad_acks_missing_records_and_internal_topics() {
        let b = Fake::new();
        b.topic("t", 1);
        let resp: ProduceResponse = b.call(ApiKey::Produce, 9, &request(1, "t", &[(5, batch_of(&[b"x"])), (0, None)]));
        let unknown = ErrorCode::UnknownTopicOrPartition.code();
        assert_eq!(results(&resp), vec![(5, unknown, -1), (0, ErrorCode::InvalidRecord.code(), -1)]);
        let resp: ProduceResponse = b.call(ApiKey::Produce, 9, &request(1, "nope", &[(0, batch_of(&[b"x"]))]));
        assert_eq!(results(&resp), vec![(0, unknown, -1)]);
        let resp: ProduceResponse = b.call(ApiKey::Produce, 9, &request(2, "t", &[(0, batch_of(&[b"x"]))]));
        assert_eq!(results(&resp), vec![(0, ErrorCode::InvalidRequiredAcks.code(), -1)]);
        let internal = crate::group::offsets::TOPIC;
        let resp: ProduceResponse = b.call(ApiKey::Produce, 9, &request(1, internal, &[(0, batch_of(&[b"x"]))]));
        assert_eq!(results(&resp), vec![(0, ErrorCode::InvalidTopicException.code(), -1)]);
        assert_eq!(b.offsets_of(b.tp("t", 0)).high_watermark, 0, "nothing refused was appended");
    }

    #[test]
    fn acks_zero_gets_no_response_and_a_refused_batch_closes_the_connection() {
        let b = Fake::new();
        b.topic("t", 1);
        let outcome = b.send(ApiKey::Produce, 9, &request(0, "t", &[(0, batch_of(&[b"x"]))]), None);
        assert!(outcome.expect("served").is_none(), "acks=0 is never answered");
        assert_eq!(b.offsets_of(b.tp("t", 0)).high_watermark, 1, "appended before the request is done");
        for (topic, partition) in [("t", 3), ("nope", 0)] {
            let outcome = b.send(ApiKey::Produce, 9, &request(0, topic, &[(partition, batch_of(&[b"x"]))]), None);
            let err = outcome.expect_err("a refusal closes the connection").to_string();
            assert!(err.contains(&format!("{topic}-{partition}")), "{err}");
        }
    }

    #[test]
    fn zstd_batches_need_produce_v7() {
        let b = Fake::new();
        b.topic("t", 1);
        let zstd = batch::recompress(&batch::build(0, &[b"x"]), crate::protocol::compression::ZSTD, 1 << 20).unwrap();
        let resp: ProduceResponse = b.call(ApiKey::Produce, 6, &request(1, "t", &[(0, Some(zstd.clone()))]));
        assert_eq!(results(&resp), vec![(0, ErrorCode::UnsupportedCompressionType.code(), -1)]);
        let resp: ProduceResponse = b.call(ApiKey::Produce, 7, &request(1, "t", &[(0, Some(zstd))]));
        assert_eq!(results(&resp), vec![(0, 0, 0)]);
    }

    #[test]
    fn without_write_acl_the_topic_is_refused_before_its_existence_is_told() {
        let b = Fake::with(|c| c.authorizer_enabled = true);
        b.topic("t", 1);
        let denied = ErrorCode::TopicAuthorizationFailed.code();
        for topic in ["t", "missing"] {
            let resp: ProduceResponse =
                b.call_as(Some("User:alice"), ApiKey::Produce, 9, &request(1, topic, &[(0, batch_of(&[b"x"]))]));
            assert_eq!(results(&resp), vec![(0, denied, -1)], "{topic}");
        }
    }

    #[test]
    fn v13_names_topics_by_id() {
        let b = Fake::new();
        let tp = b.topic("t", 1);
        let mut req = request(1, "", &[(0, batch_of(&[b"x"]))]);
        req.topic_data[0].topic_id = tp.topic;
        let resp: ProduceResponse = b.call(ApiKey::Produce, 13, &req);
        assert_eq!(results(&resp), vec![(0, 0, 0)]);
        req.topic_data[0].topic_id = uuid::Uuid::from_u128(1);
        let resp: ProduceResponse = b.call(ApiKey::Produce, 13, &req);
        assert_eq!(results(&resp), vec![(0, ErrorCode::UnknownTopicId.code(), -1)]);
    }
}
