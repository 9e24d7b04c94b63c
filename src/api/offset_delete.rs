//! OffsetDelete: drops committed offsets of a group for partitions of topics the group no
//! longer subscribes to (GROUP_SUBSCRIBED_TO_TOPIC otherwise).
//!
//! Authorization, Kafka's: DELETE on the group (else the request answers
//! GROUP_AUTHORIZATION_FAILED), READ on each topic (else TOPIC_AUTHORIZATION_FAILED for its
//! partitions, decided before the topic's existence).

use proto_kafka::messages::offset_delete_response::{OffsetDeleteResponsePartition, OffsetDeleteResponseTopic};
use proto_kafka::messages::{ApiKey, OffsetDeleteRequest, OffsetDeleteResponse};

use super::group_call::{admit, call};
use super::{authz, ApiSpec, Broker, Outcome, Request};
use crate::auth::acl::Operation;
use crate::group::GroupOp;
use crate::protocol::ErrorCode;

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::OffsetDelete, 0, 0);

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: OffsetDeleteRequest = req.decode()?;
    let group = r.group_id.to_string();
    let catalog = broker.catalog();
    // (topic, partition, early error)
    let mut slots = Vec::new();
    let mut asked = Vec::new();
    for t in &r.topics {
        let meta = catalog.topic(t.name.as_str());
        let refusal = authz::topic_or_fail(broker, &req, Operation::Read, &t.name).err();
        for p in &t.partitions {
            let known = meta.is_some_and(|m| p.partition_index >= 0 && p.partition_index < m.partitions());
            let early = refusal.or((!known).then_some(ErrorCode::UnknownTopicOrPartition));
            if early.is_none() {
                asked.push((t.name.to_string(), p.partition_index));
            }
            slots.push((t.name.clone(), p.partition_index, early));
        }
    }
    let mut resp = OffsetDeleteResponse::default();
    let result = match admit(broker, &req, &group, Operation::Delete) {
        Err(e) => Err(e),
        Ok(()) => {
            call(broker, &group, |reply| GroupOp::DeleteOffsets { partitions: asked, reply }).await.and_then(|r| r)
        }
    };
    match result {
        Err(e) => resp.error_code = e.code(),
        Ok(per) => {
            let mut per = per.into_iter();
            for (name, partition, early) in slots {
                let code = match early {
                    Some(e) => e.code(),
                    None => per.next().and_then(|r| r.err()).map_or(0, |e| e.code()),
                };
                if resp.topics.last().is_none_or(|t| t.name != name) {
                    let mut t = OffsetDeleteResponseTopic::default();
                    t.name = name.clone();
                    resp.topics.push(t);
                }
                let mut p = OffsetDeleteResponsePartition::default();
                p.partition_index = partition;
                p.error_code = code;
                resp.topics.last_mut().expect("pushed").partitions.push(p);
            }
        }
    }
    req.respond(resp)
}
