//! DeleteRecords (`kafka-delete-records`, `Admin.deleteRecords`): each partition's log start
//! moves to the given offset (-1: the high watermark) on its home shard, durably, and the
//! segments wholly below it are deleted; fetches below the new start get
//! OFFSET_OUT_OF_RANGE and ListOffsets EARLIEST answers it. An offset past the high
//! watermark is OFFSET_OUT_OF_RANGE; the internal offsets topic is refused
//! (INVALID_TOPIC_EXCEPTION), as in Kafka.
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
    let mut results = checked::run(checked, |asks| broker.delete_records(asks)).await.into_iter();
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
