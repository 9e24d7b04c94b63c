//! ListOffsets: earliest (-2), latest (-1), max timestamp (-3, from v7), earliest local (-4,
//! from v8, the same as earliest: there is no tiered storage), latest tiered (-5, from v9:
//! none) and by timestamp. Each topic needs DESCRIBE (TOPIC_AUTHORIZATION_FAILED, checked
//! before the topic's existence). As in Kafka, a partition asked for twice is INVALID_REQUEST
//! (both times), and a special timestamp the request's version does not have, or a negative
//! one that is none of them, is UNSUPPORTED_VERSION.

use std::collections::HashMap;

use proto_kafka::messages::list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsTopicResponse};
use proto_kafka::messages::{ApiKey, ListOffsetsRequest, ListOffsetsResponse};

use super::{authz, checked, ApiSpec, Broker, Outcome, Request};
use crate::auth::acl::Operation;
use crate::protocol::ErrorCode;
use crate::shard::{OffsetQuery, Tp};

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::ListOffsets, 1, 10);

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
const LATEST_TIERED: i64 = -5;

/// The query a timestamp asks for at `version`: each special timestamp exists from a version
/// on (Kafka's `timestampMinSupportedVersion`).
fn query(timestamp: i64, version: i16) -> Result<OffsetQuery, ErrorCode> {
    let (query, since) = match timestamp {
        ts if ts >= 0 => return Ok(OffsetQuery::AtTime(ts)),
        LATEST => (OffsetQuery::Latest, 0),
        EARLIEST => (OffsetQuery::Earliest, 0),
        MAX_TIMESTAMP => (OffsetQuery::MaxTimestamp, 7),
        EARLIEST_LOCAL => (OffsetQuery::Earliest, 8),
        LATEST_TIERED => (OffsetQuery::LatestTiered, 9),
        _ => return Err(ErrorCode::UnsupportedVersion),
    };
    if version < since {
        return Err(ErrorCode::UnsupportedVersion);
    }
    Ok(query)
}

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: ListOffsetsRequest = req.decode()?;
    let catalog = broker.catalog();
    // How often each (topic, partition) is asked for: more than once is refused.
    let mut asked: HashMap<(&str, i32), usize> = HashMap::new();
    for t in &r.topics {
        for p in &t.partitions {
            *asked.entry((t.name.as_str(), p.partition_index)).or_default() += 1;
        }
    }
    let mut checked = Vec::new();
    for t in &r.topics {
        let meta = catalog.topic(t.name.as_str());
        let allowed = authz::topic(broker, &req, Operation::Describe, &t.name);
        for p in &t.partitions {
            checked.push(match (meta, query(p.timestamp, req.version)) {
                _ if !allowed => Err(ErrorCode::TopicAuthorizationFailed),
                _ if asked[&(t.name.as_str(), p.partition_index)] > 1 => Err(ErrorCode::InvalidRequest),
                (_, Err(e)) => Err(e),
                (None, _) => Err(ErrorCode::UnknownTopicOrPartition),
                (Some(m), _) if p.partition_index < 0 || p.partition_index >= m.partitions() => {
                    Err(ErrorCode::UnknownTopicOrPartition)
                }
                (Some(m), Ok(q)) => Ok((Tp { topic: m.id, partition: p.partition_index }, (q, p.current_leader_epoch))),
            });
        }
    }
    let mut results = checked::run(checked, |asks| broker.list_offsets(asks)).await.into_iter();
    let mut resp = ListOffsetsResponse::default();
    for t in r.topics {
        let mut tr = ListOffsetsTopicResponse::default();
        for p in &t.partitions {
            let mut pr = ListOffsetsPartitionResponse::default();
            pr.partition_index = p.partition_index;
            match results.next().expect("one result per partition") {
                Ok((offset, ts, epoch)) => {
                    pr.offset = offset;
                    pr.timestamp = ts;
                    pr.leader_epoch = epoch;
                }
                Err(e) => {
                    pr.error_code = e.code();
                    pr.offset = -1;
                    pr.timestamp = -1;
                    pr.leader_epoch = -1;
                }
            }
            tr.partitions.push(pr);
        }
        tr.name = t.name;
        resp.topics.push(tr);
    }
    req.respond(resp)
}

#[cfg(test)]
mod tests {
    use proto_kafka::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    use proto_kafka::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use proto_kafka::messages::{ProduceRequest, ProduceResponse, TopicName};

    use super::*;
    use crate::api::fake::Fake;
    use crate::api::str_bytes;
    use crate::auth::acl::ResourceType;
    use crate::protocol::batch;

    /// A partition's ask: `timestamp` (or a special value), no leader epoch check.
    fn at(partition_index: i32, timestamp: i64) -> ListOffsetsPartition {
        let mut p = ListOffsetsPartition::default();
        p.partition_index = partition_index;
        p.timestamp = timestamp;
        p
    }

    fn request(topics: Vec<(&str, Vec<ListOffsetsPartition>)>) -> ListOffsetsRequest {
        let mut r = ListOffsetsRequest::default();
        r.replica_id = proto_kafka::messages::BrokerId(-1);
        for (name, partitions) in topics {
            let mut t = ListOffsetsTopic::default();
            t.name = TopicName(str_bytes(name));
            t.partitions = partitions;
            r.topics.push(t);
        }
        r
    }

    /// (partition, error code, offset, timestamp, leader epoch) of each answer, in order.
    fn answers(resp: &ListOffsetsResponse) -> Vec<(i32, i16, i64, i64, i32)> {
        let parts = resp.topics.iter().flat_map(|t| &t.partitions);
        parts.map(|p| (p.partition_index, p.error_code, p.offset, p.timestamp, p.leader_epoch)).collect()
    }

    /// Asks one partition of `topic` at `version`.
    fn ask(b: &Fake, version: i16, topic: &str, part: ListOffsetsPartition) -> (i32, i16, i64, i64, i32) {
        let resp: ListOffsetsResponse = b.call(ApiKey::ListOffsets, version, &request(vec![(topic, vec![part])]));
        answers(&resp)[0]
    }

    /// Produces one batch of `values`, all stamped `timestamp`, to partition 0 of `topic`.
    fn produce_at(b: &Fake, topic: &str, timestamp: i64, values: &[&[u8]]) {
        let mut p = PartitionProduceData::default();
        p.records = Some(bytes::Bytes::from(batch::build(timestamp, values)));
        let mut t = TopicProduceData::default();
        t.name = TopicName(str_bytes(topic));
        t.partition_data.push(p);
        let mut r = ProduceRequest::default();
        r.acks = -1;
        r.timeout_ms = 1000;
        r.topic_data.push(t);
        let resp: ProduceResponse = b.call(ApiKey::Produce, 9, &r);
        assert_eq!(resp.responses[0].partition_responses[0].error_code, 0, "produced");
    }

    #[test]
    fn earliest_latest_max_timestamp_and_by_timestamp_find_their_offsets() {
        let b = Fake::new();
        b.topic("t", 1);
        produce_at(&b, "t", 1_000, &[b"a", b"b"]); // offsets 0-1
        produce_at(&b, "t", 3_000, &[b"c"]); // offset 2
        produce_at(&b, "t", 2_000, &[b"d"]); // offset 3
        assert_eq!(ask(&b, 7, "t", at(0, EARLIEST)), (0, 0, 0, -1, 0));
        assert_eq!(ask(&b, 7, "t", at(0, LATEST)), (0, 0, 4, -1, 0));
        assert_eq!(ask(&b, 7, "t", at(0, MAX_TIMESTAMP)), (0, 0, 2, 3_000, 0));
        assert_eq!(ask(&b, 7, "t", at(0, 1_500)), (0, 0, 2, 3_000, 0), "the first batch stamped at or after");
        assert_eq!(ask(&b, 7, "t", at(0, 0)), (0, 0, 0, 1_000, 0));
        assert_eq!(ask(&b, 7, "t", at(0, 9_000)), (0, 0, -1, -1, -1), "none that late: no offset, no epoch");
    }

    #[test]
    fn unknown_topics_partitions_and_later_leader_epochs_are_refused() {
        let b = Fake::new();
        b.topic("t", 2);
        b.append(b.tp("t", 1), &[b"x"]);
        let mut current = at(1, LATEST);
        current.current_leader_epoch = 0;
        let mut later = at(0, LATEST);
        later.current_leader_epoch = 1;
        let req =
            request(vec![("t", vec![at(5, LATEST), at(-1, LATEST), current, later]), ("nope", vec![at(0, LATEST)])]);
        let resp: ListOffsetsResponse = b.call(ApiKey::ListOffsets, 7, &req);
        let unknown = ErrorCode::UnknownTopicOrPartition.code();
        assert_eq!(
            answers(&resp),
            vec![
                (5, unknown, -1, -1, -1),
                (-1, unknown, -1, -1, -1),
                (1, 0, 1, -1, 0),
                (0, ErrorCode::UnknownLeaderEpoch.code(), -1, -1, -1),
                (0, unknown, -1, -1, -1),
            ]
        );
        assert_eq!(resp.topics.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), vec!["t", "nope"]);
    }

    #[test]
    fn a_partition_asked_twice_is_invalid_request_both_times() {
        let b = Fake::new();
        b.topic("t", 2);
        let req = request(vec![("t", vec![at(0, LATEST), at(1, LATEST)]), ("t", vec![at(0, EARLIEST)])]);
        let resp: ListOffsetsResponse = b.call(ApiKey::ListOffsets, 7, &req);
        let invalid = ErrorCode::InvalidRequest.code();
        assert_eq!(answers(&resp), vec![(0, invalid, -1, -1, -1), (1, 0, 0, -1, 0), (0, invalid, -1, -1, -1)]);
    }

    #[test]
    fn special_timestamps_are_served_from_the_version_that_has_them() {
        let b = Fake::new();
        b.topic("t", 1);
        b.append(b.tp("t", 0), &[b"x", b"y"]);
        let unsupported = (0, ErrorCode::UnsupportedVersion.code(), -1, -1, -1);
        assert_eq!(ask(&b, 6, "t", at(0, MAX_TIMESTAMP)), unsupported);
        assert_eq!(ask(&b, 7, "t", at(0, MAX_TIMESTAMP)).1, 0);
        assert_eq!(ask(&b, 7, "t", at(0, EARLIEST_LOCAL)), unsupported);
        assert_eq!(ask(&b, 8, "t", at(0, EARLIEST_LOCAL)), (0, 0, 0, -1, 0), "earliest local is the log start");
        assert_eq!(ask(&b, 8, "t", at(0, LATEST_TIERED)), unsupported);
        assert_eq!(ask(&b, 9, "t", at(0, LATEST_TIERED)), (0, 0, -1, -1, -1), "nothing is tiered");
        assert_eq!(ask(&b, 10, "t", at(0, -7)), unsupported, "no such special timestamp");
        assert_eq!(ask(&b, 1, "t", at(0, LATEST)), (0, 0, 2, -1, -1), "v1 has no leader epoch");
    }

    #[test]
    fn without_describe_the_topic_is_refused_before_its_existence_is_told() {
        let b = Fake::with(|c| c.authorizer_enabled = true);
        b.topic("t", 1);
        b.topic("u", 1);
        b.allow("User:eve", ResourceType::Topic, "u", Operation::Describe);
        let req =
            request(vec![("t", vec![at(0, LATEST)]), ("missing", vec![at(0, LATEST)]), ("u", vec![at(0, LATEST)])]);
        let resp: ListOffsetsResponse = b.call_as(Some("User:eve"), ApiKey::ListOffsets, 7, &req);
        let denied = ErrorCode::TopicAuthorizationFailed.code();
        assert_eq!(answers(&resp), vec![(0, denied, -1, -1, -1), (0, denied, -1, -1, -1), (0, 0, 0, -1, 0)]);
    }
}
