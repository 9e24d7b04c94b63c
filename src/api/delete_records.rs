//! DeleteRecords (`kafka-delete-records`, `Admin.deleteRecords`): each partition's log start
//! moves to the given offset (-1: the high watermark) on its home shard, durably, and the
//! segments wholly below it are deleted; fetches below the new start get
//! OFFSET_OUT_OF_RANGE and ListOffsets EARLIEST answers it. An offset past the high
//! watermark is OFFSET_OUT_OF_RANGE; the internal offsets topic is refused
//! (INVALID_TOPIC_EXCEPTION), as in Kafka.
//!
//! Authorization, Kafka's: DELETE on each topic, else TOPIC_AUTHORIZATION_FAILED (decided
//! before its existence).

use std::rc::Rc;

use proto_kafka::messages::delete_records_response::{DeleteRecordsPartitionResult, DeleteRecordsTopicResult};
use proto_kafka::messages::{ApiKey, DeleteRecordsRequest, DeleteRecordsResponse};

use super::{authz, ApiSpec, Outcome, Request};
use crate::auth::acl::Operation;
use crate::protocol::ErrorCode;
use crate::shard::{Shard, Tp};

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::DeleteRecords, 0, 2);

pub async fn handle(shard: &Rc<Shard>, req: Request) -> Outcome {
    let r: DeleteRecordsRequest = req.decode()?;
    let catalog = shard.catalog();
    let mut resp = DeleteRecordsResponse::default();
    for t in r.topics {
        let meta = catalog.topic(t.name.as_str());
        let allowed = authz::topic(shard, &req, Operation::Delete, &t.name);
        // Every partition's deletion runs at once on its home shard.
        let pending: Vec<_> = t
            .partitions
            .iter()
            .map(|p| {
                let check = match meta {
                    _ if !allowed => Err(ErrorCode::TopicAuthorizationFailed),
                    None => Err(ErrorCode::UnknownTopicOrPartition),
                    Some(m) if m.name == crate::group::offsets::TOPIC => Err(ErrorCode::InvalidTopicException),
                    Some(m) if p.partition_index < 0 || p.partition_index >= m.partitions() => {
                        Err(ErrorCode::UnknownTopicOrPartition)
                    }
                    Some(m) => Ok(Tp { topic: m.id, partition: p.partition_index }),
                };
                let (shard, offset) = (shard.clone(), p.offset);
                (
                    p.partition_index,
                    check.map(|tp| {
                        glommio::spawn_local(crate::metrics::inherit(
                            async move { shard.delete_records(tp, offset).await },
                        ))
                    }),
                )
            })
            .collect();
        let mut tr = DeleteRecordsTopicResult::default();
        tr.name = t.name;
        for (index, task) in pending {
            let result = match task {
                Ok(task) => task.await,
                Err(e) => Err(e),
            };
            let mut pr = DeleteRecordsPartitionResult::default();
            pr.partition_index = index;
            match result {
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
