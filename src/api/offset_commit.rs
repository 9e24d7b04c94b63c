//! OffsetCommit: checked here (the topic must exist, metadata at most
//! `offset.metadata.max.bytes`), then validated against the group's generation and appended
//! to `__consumer_offsets` on the group's home shard; acknowledged once durable.
//!
//! Authorization, Kafka's: READ on the group (else every partition answers
//! GROUP_AUTHORIZATION_FAILED), and READ on each topic (TOPIC_AUTHORIZATION_FAILED for its
//! partitions, decided before the topic's existence).

use std::rc::Rc;

use proto_kafka::messages::offset_commit_response::{OffsetCommitResponsePartition, OffsetCommitResponseTopic};
use proto_kafka::messages::{ApiKey, OffsetCommitRequest, OffsetCommitResponse};

use super::group_call::{admit, call, opt_str};
use super::{authz, ApiSpec, Outcome, Request};
use crate::auth::acl::Operation;
use crate::group::{CommitEntry, GroupOp};
use crate::protocol::ErrorCode;
use crate::shard::Shard;

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::OffsetCommit, 2, 9);

/// Kafka's `offset.metadata.max.bytes`.
const MAX_METADATA: usize = 4096;

pub async fn handle(shard: &Rc<Shard>, req: Request) -> Outcome {
    let r: OffsetCommitRequest = req.decode()?;
    let group = r.group_id.to_string();
    let catalog = shard.catalog();
    let group_refusal = admit(shard, &req, &group, Operation::Read).err();
    // (topic, partition, early error)
    let mut slots: Vec<(String, i32, Option<ErrorCode>)> = Vec::new();
    let mut entries = Vec::new();
    for t in &r.topics {
        let topic = t.name.to_string();
        let meta = catalog.topic(&topic);
        let refusal = group_refusal.or_else(|| authz::topic_or_fail(shard, &req, Operation::Read, &topic).err());
        for p in &t.partitions {
            let early = if refusal.is_some() {
                refusal
            } else if meta.is_none_or(|m| p.partition_index < 0 || p.partition_index >= m.partitions()) {
                Some(ErrorCode::UnknownTopicOrPartition)
            } else if p.committed_metadata.as_ref().is_some_and(|m| m.len() > MAX_METADATA) {
                Some(ErrorCode::OffsetMetadataTooLarge)
            } else {
                entries.push(CommitEntry {
                    topic: topic.clone(),
                    partition: p.partition_index,
                    offset: p.committed_offset,
                    leader_epoch: if req.version >= 6 { p.committed_leader_epoch } else { -1 },
                    metadata: opt_str(&p.committed_metadata),
                });
                None
            };
            slots.push((topic.clone(), p.partition_index, early));
        }
    }
    let result = if entries.is_empty() {
        Ok(())
    } else {
        let (member_id, instance_id, generation) =
            (r.member_id.to_string(), opt_str(&r.group_instance_id), r.generation_id_or_member_epoch);
        call(shard, &group, move |reply| GroupOp::Commit { member_id, instance_id, generation, entries, reply })
            .await
            .and_then(|r| r)
    };
    let mut resp = OffsetCommitResponse::default();
    for (topic, partition, early) in slots {
        let code = early.or(result.err()).map_or(0, |e| e.code());
        if resp.topics.last().is_none_or(|t| t.name.as_str() != topic) {
            let mut t = OffsetCommitResponseTopic::default();
            t.name = proto_kafka::messages::TopicName(super::str_bytes(topic));
            resp.topics.push(t);
        }
        let mut p = OffsetCommitResponsePartition::default();
        p.partition_index = partition;
        p.error_code = code;
        resp.topics.last_mut().expect("pushed").partitions.push(p);
    }
    req.respond(resp)
}
