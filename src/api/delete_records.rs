//! DeleteRecords (`kafka-delete-records`, `Admin.deleteRecords`): each partition's log start
//! moves to the given offset (-1: the high watermark) on its home shard, durably, and the
//! segments wholly below it are deleted; fetches below the new start get
//! OFFSET_OUT_OF_RANGE and ListOffsets EARLIEST answers it. An offset past the high
//! watermark is OFFSET_OUT_OF_RANGE; the internal offsets topic is refused
//! (INVALID_TOPIC_EXCEPTION), and so is a topic whose `cleanup.policy` lacks `delete`
//! (POLICY_VIOLATION), as in Kafka. On a replicated partition the leader proposes the
//! start through raft and answers once it is committed (every replica moves its own start as
//! it applies the entry); REQUEST_TIMED_OUT after the request's `timeout_ms`.
//!
//! Authorization, Kafka's: DELETE on each topic, else TOPIC_AUTHORIZATION_FAILED (decided
//! before its existence).

use proto_kafka::messages::delete_records_response::{DeleteRecordsPartitionResult, DeleteRecordsTopicResult};
use proto_kafka::messages::{ApiKey, DeleteRecordsRequest, DeleteRecordsResponse};

use super::{authz, checked, ApiSpec, Broker, Outcome, Request};
use crate::auth::acl::Operation;
use crate::protocol::ErrorCode;
use crate::shard::Tp;

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::DeleteRecords, 0, 2);

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: DeleteRecordsRequest = req.decode()?;
    let catalog = broker.catalog();
    // Every partition's deletion runs at once on its home shard.
    let mut checked = Vec::new();
    for t in &r.topics {
        let meta = catalog.topic(t.name.as_str());
        let allowed = authz::topic(broker, &req, Operation::Delete, &t.name);
        for p in &t.partitions {
            checked.push(match meta {
                _ if !allowed => Err(ErrorCode::TopicAuthorizationFailed),
                None => Err(ErrorCode::UnknownTopicOrPartition),
                Some(m) if m.name == crate::group::offsets::TOPIC => Err(ErrorCode::InvalidTopicException),
                Some(m) if p.partition_index < 0 || p.partition_index >= m.partitions() => {
                    Err(ErrorCode::UnknownTopicOrPartition)
                }
                Some(m) => Ok((Tp { topic: m.id, partition: p.partition_index }, p.offset)),
            });
        }
    }
    // Kafka's admin client sends its own timeout; a non-positive one still gets a commit's chance.
    let timeout = std::time::Duration::from_millis(r.timeout_ms.max(1000) as u64);
    let mut results = checked::run(checked, |asks| broker.delete_records(asks, timeout)).await.into_iter();
    let mut resp = DeleteRecordsResponse::default();
    for t in r.topics {
        let mut tr = DeleteRecordsTopicResult::default();
        tr.name = t.name;
        for p in t.partitions {
            let mut pr = DeleteRecordsPartitionResult::default();
            pr.partition_index = p.partition_index;
            match results.next().expect("one result per partition") {
                Ok(low_watermark) => pr.low_watermark = low_watermark,
                Err(e) => {
                    pr.low_watermark = -1;
                    pr.error_code = e.code();
                }
            }
            tr.partitions.push(pr);
        }
        resp.topics.push(tr);
    }
    req.respond(resp)
}

#[cfg(test)]
mod tests {
    use proto_kafka::messages::delete_records_request::{DeleteRecordsPartition, DeleteRecordsTopic};
    use proto_kafka::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    use proto_kafka::messages::{ListOffsetsRequest, ListOffsetsResponse, TopicName};

    use super::*;
    use crate::api::fake::Fake;
    use crate::api::str_bytes;
    use crate::auth::acl::ResourceType;

    fn request(topics: &[(&str, &[(i32, i64)])]) -> DeleteRecordsRequest {
        let mut r = DeleteRecordsRequest::default();
        r.timeout_ms = 1000;
        for (name, parts) in topics {
            let mut t = DeleteRecordsTopic::default();
            t.name = TopicName(str_bytes(*name));
            for &(partition_index, offset) in *parts {
                let mut p = DeleteRecordsPartition::default();
                p.partition_index = partition_index;
                p.offset = offset;
                t.partitions.push(p);
            }
            r.topics.push(t);
        }
        r
    }

    /// (partition, error code, low watermark) of each answer, in order.
    fn answers(resp: &DeleteRecordsResponse) -> Vec<(i32, i16, i64)> {
        let parts = resp.topics.iter().flat_map(|t| &t.partitions);
        parts.map(|p| (p.partition_index, p.error_code, p.low_watermark)).collect()
    }

    /// What ListOffsets EARLIEST answers for `topic`'s partition `index`.
    fn earliest(b: &Fake, topic: &str, index: i32) -> i64 {
        let mut p = ListOffsetsPartition::default();
        p.partition_index = index;
        p.timestamp = -2;
        let mut t = ListOffsetsTopic::default();
        t.name = TopicName(str_bytes(topic));
        t.partitions.push(p);
        let mut r = ListOffsetsRequest::default();
        r.replica_id = proto_kafka::messages::BrokerId(-1);
        r.topics.push(t);
        let resp: ListOffsetsResponse = b.call(ApiKey::ListOffsets, 7, &r);
        assert_eq!(resp.topics[0].partitions[0].error_code, 0);
        resp.topics[0].partitions[0].offset
    }

    #[test]
    fn moves_each_log_start_and_listoffsets_earliest_answers_it() {
        let b = Fake::new();
        b.topic("t", 2);
        b.append(b.tp("t", 0), &[b"a", b"b", b"c", b"d", b"e"]);
        b.append(b.tp("t", 1), &[b"f", b"g"]);
        let resp: DeleteRecordsResponse = b.call(ApiKey::DeleteRecords, 2, &request(&[("t", &[(0, 3), (1, -1)])]));
        assert_eq!(answers(&resp), vec![(0, 0, 3), (1, 0, 2)], "-1 is the high watermark");
        assert_eq!(resp.topics[0].name.as_str(), "t");
        assert_eq!((b.offsets_of(b.tp("t", 0)).log_start, b.offsets_of(b.tp("t", 1)).log_start), (3, 2));
        assert_eq!((earliest(&b, "t", 0), earliest(&b, "t", 1)), (3, 2));
    }

    #[test]
    fn an_offset_past_the_high_watermark_is_out_of_range_and_the_start_never_moves_back() {
        let b = Fake::new();
        let tp = b.topic("t", 1);
        b.append(tp, &[b"a", b"b", b"c", b"d", b"e"]);
        let resp: DeleteRecordsResponse = b.call(ApiKey::DeleteRecords, 1, &request(&[("t", &[(0, 6)])]));
        assert_eq!(answers(&resp), vec![(0, ErrorCode::OffsetOutOfRange.code(), -1)]);
        assert_eq!(b.offsets_of(tp).log_start, 0, "nothing deleted");
        let _: DeleteRecordsResponse = b.call(ApiKey::DeleteRecords, 1, &request(&[("t", &[(0, 4)])]));
        let resp: DeleteRecordsResponse = b.call(ApiKey::DeleteRecords, 1, &request(&[("t", &[(0, 1)])]));
        assert_eq!(answers(&resp), vec![(0, 0, 4)], "an offset below the start answers the start");
        assert_eq!(b.offsets_of(tp).log_start, 4);
    }

    #[test]
    fn unknown_topics_partitions_and_the_offsets_topic_are_refused() {
        let b = Fake::new();
        b.topic("t", 1);
        let offsets_topic = crate::group::offsets::TOPIC;
        let req = request(&[("t", &[(7, 0), (-1, 0)]), ("nope", &[(0, 0)]), (offsets_topic, &[(0, -1)])]);
        let resp: DeleteRecordsResponse = b.call(ApiKey::DeleteRecords, 0, &req);
        let unknown = ErrorCode::UnknownTopicOrPartition.code();
        assert_eq!(
            answers(&resp),
            vec![
                (7, unknown, -1),
                (-1, unknown, -1),
                (0, unknown, -1),
                (0, ErrorCode::InvalidTopicException.code(), -1)
            ]
        );
    }

    #[test]
    fn without_delete_the_topic_is_refused_before_its_existence_is_told() {
        let b = Fake::with(|c| c.authorizer_enabled = true);
        b.topic("t", 1);
        b.topic("u", 1);
        b.append(b.tp("t", 0), &[b"a", b"b"]);
        b.append(b.tp("u", 0), &[b"a", b"b"]);
        b.allow("User:eve", ResourceType::Topic, "u", Operation::Delete);
        b.allow("User:eve", ResourceType::Topic, "t", Operation::Describe);
        let req = request(&[("t", &[(0, -1)]), ("missing", &[(0, -1)]), ("u", &[(0, -1)])]);
        let resp: DeleteRecordsResponse = b.call_as(Some("User:eve"), ApiKey::DeleteRecords, 2, &req);
        let denied = ErrorCode::TopicAuthorizationFailed.code();
        assert_eq!(answers(&resp), vec![(0, denied, -1), (0, denied, -1), (0, 0, 2)]);
        assert_eq!(b.offsets_of(b.tp("t", 0)).log_start, 0, "the refused topic keeps its records");
    }
}
