//! OffsetForLeaderEpoch: consumers validate their position after a metadata change. This
//! broker has had one leader epoch (0) for every partition, so epoch 0 ends at the log end
//! and any later epoch is unknown.
//!
//! Authorization, Kafka's (KIP-320): CLUSTER_ACTION on the cluster (brokers) or DESCRIBE on
//! the topic (consumers), else TOPIC_AUTHORIZATION_FAILED.

use proto_kafka::messages::offset_for_leader_epoch_response::{EpochEndOffset, OffsetForLeaderTopicResult};
use proto_kafka::messages::{ApiKey, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};

use super::{authz, checked, ApiSpec, Broker, Outcome, Request};
use crate::auth::acl::Operation;
use crate::protocol::ErrorCode;
use crate::shard::Tp;

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::OffsetForLeaderEpoch, 2, 4);

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: OffsetForLeaderEpochRequest = req.decode()?;
    let catalog = broker.catalog();
    let cluster_action = authz::cluster(broker, &req, Operation::ClusterAction);
    let mut checked = Vec::new();
    for t in &r.topics {
        let meta = catalog.topic(t.topic.as_str());
        let allowed = cluster_action || authz::topic(broker, &req, Operation::Describe, &t.topic);
        for p in &t.partitions {
            checked.push(match meta {
                _ if !allowed => Err(ErrorCode::TopicAuthorizationFailed),
                None => Err(ErrorCode::UnknownTopicOrPartition),
                Some(m) if p.partition < 0 || p.partition >= m.partitions() => Err(ErrorCode::UnknownTopicOrPartition),
                Some(_) if p.current_leader_epoch > 0 => Err(ErrorCode::UnknownLeaderEpoch),
                Some(m) => Ok((Tp { topic: m.id, partition: p.partition }, ())),
            });
        }
    }
    let routed = checked::run(checked, |asks| broker.offsets(asks.into_iter().map(|(tp, ())| tp).collect()));
    let mut results = routed.await.into_iter();
    let mut resp = OffsetForLeaderEpochResponse::default();
    for t in r.topics {
        let mut tr = OffsetForLeaderTopicResult::default();
        for p in &t.partitions {
            let mut e = EpochEndOffset::default();
            e.partition = p.partition;
            e.leader_epoch = -1;
            e.end_offset = -1;
            match results.next().expect("one result per partition") {
                Ok(o) if p.leader_epoch <= 0 => {
                    e.leader_epoch = 0;
                    e.end_offset = o.log_end;
                }
                Ok(_) => {} // a later epoch than ours: undefined (-1, -1)
                Err(err) => e.error_code = err.code(),
            }
            tr.partitions.push(e);
        }
        tr.topic = t.topic;
        resp.topics.push(tr);
    }
    req.respond(resp)
}
