//! ListOffsets: earliest (-2), latest (-1), max timestamp (-3), earliest local (-4, the
//! same as earliest: there is no tiered storage) and by timestamp. Each topic needs DESCRIBE
//! (TOPIC_AUTHORIZATION_FAILED, checked before the topic's existence).

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

fn query(timestamp: i64) -> Result<OffsetQuery, ErrorCode> {
    match timestamp {
        LATEST => Ok(OffsetQuery::Latest),
        EARLIEST | EARLIEST_LOCAL => Ok(OffsetQuery::Earliest),
        LATEST_TIERED => Ok(OffsetQuery::LatestTiered),
        MAX_TIMESTAMP => Ok(OffsetQuery::MaxTimestamp),
        ts if ts >= 0 => Ok(OffsetQuery::AtTime(ts)),
        _ => Err(ErrorCode::InvalidRequest),
    }
}

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: ListOffsetsRequest = req.decode()?;
    let catalog = broker.catalog();
    let mut checked = Vec::new();
    for t in &r.topics {
        let meta = catalog.topic(t.name.as_str());
        let allowed = authz::topic(broker, &req, Operation::Describe, &t.name);
        for p in &t.partitions {
            checked.push(match meta {
                _ if !allowed => Err(ErrorCode::TopicAuthorizationFailed),
                None => Err(ErrorCode::UnknownTopicOrPartition),
                Some(m) if p.partition_index < 0 || p.partition_index >= m.partitions() => {
                    Err(ErrorCode::UnknownTopicOrPartition)
                }
                Some(_) if p.current_leader_epoch > 0 => Err(ErrorCode::UnknownLeaderEpoch),
                Some(m) => query(p.timestamp).map(|q| (Tp { topic: m.id, partition: p.partition_index }, q)),
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
                Ok((offset, ts)) => {
                    pr.offset = offset;
                    pr.timestamp = ts;
                    pr.leader_epoch = if offset >= 0 { 0 } else { -1 };
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
