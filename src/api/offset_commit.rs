//! OffsetCommit: checked here (the topic must exist, metadata at most
//! `offset.metadata.max.bytes`), then validated against the group's generation and appended
//! to `__consumer_offsets` on the group's home shard; acknowledged once durable.
//!
//! Authorization, Kafka's: READ on the group (else every partition answers
//! GROUP_AUTHORIZATION_FAILED), and READ on each topic (TOPIC_AUTHORIZATION_FAILED for its
//! partitions, decided before the topic's existence).

use proto_kafka::messages::offset_commit_response::{OffsetCommitResponsePartition, OffsetCommitResponseTopic};
use proto_kafka::messages::{ApiKey, OffsetCommitRequest, OffsetCommitResponse};

use super::group_call::{admit, call, opt_str};
use super::{authz, ApiSpec, Broker, Outcome, Request};
use crate::auth::acl::Operation;
use crate::group::{CommitEntry, GroupOp};
use crate::protocol::ErrorCode;

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::OffsetCommit, 2, 9);

/// Kafka's `offset.metadata.max.bytes`.
const MAX_METADATA: usize = 4096;

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: OffsetCommitRequest = req.decode()?;
    let group = r.group_id.to_string();
    let catalog = broker.catalog();
    let group_refusal = admit(broker, &req, &group, Operation::Read).err();
    // (topic, partition, early error)
    let mut slots: Vec<(String, i32, Option<ErrorCode>)> = Vec::new();
    let mut entries = Vec::new();
    for t in &r.topics {
        let topic = t.name.to_string();
        let meta = catalog.topic(&topic);
        let refusal = group_refusal.or_else(|| authz::topic_or_fail(broker, &req, Operation::Read, &topic).err());
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
        call(broker, &group, move |reply| GroupOp::Commit { member_id, instance_id, generation, entries, reply })
            .await
            .and_then(|r| r)
            // Kafka's answer to a member of a group it does not have: GROUP_ID_NOT_FOUND
            // from v9, ILLEGAL_GENERATION before (which older clients know to rejoin on).
            .map_err(|e| match e {
                ErrorCode::GroupIdNotFound if req.version < 9 => ErrorCode::IllegalGeneration,
                e => e,
            })
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

#[cfg(test)]
mod tests {
    use proto_kafka::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
    use proto_kafka::messages::{GroupId, TopicName};

    use super::*;
    use crate::api::fake::Fake;
    use crate::api::str_bytes;

    /// A commit outside any generation (a standalone consumer's, or an admin tool's).
    fn request(group: &str, topic: &str, parts: &[(i32, i64)]) -> OffsetCommitRequest {
        let mut t = OffsetCommitRequestTopic::default();
        t.name = TopicName(str_bytes(topic));
        for &(partition_index, committed_offset) in parts {
            let mut p = OffsetCommitRequestPartition::default();
            p.partition_index = partition_index;
            p.committed_offset = committed_offset;
            t.partitions.push(p);
        }
        let mut r = OffsetCommitRequest::default();
        r.group_id = GroupId(str_bytes(group));
        r.generation_id_or_member_epoch = -1;
        r.topics.push(t);
        r
    }

    fn codes(resp: &OffsetCommitResponse) -> Vec<(i32, i16)> {
        resp.topics.iter().flat_map(|t| &t.partitions).map(|p| (p.partition_index, p.error_code)).collect()
    }

    #[test]
    fn a_commit_is_appended_to_the_offsets_log_before_it_is_acknowledged() {
        let b = Fake::new();
        b.topic("t", 2);
        let resp: OffsetCommitResponse = b.call(ApiKey::OffsetCommit, 8, &request("g", "t", &[(0, 5), (1, 7)]));
        assert_eq!(codes(&resp), vec![(0, 0), (1, 0)]);
        assert_eq!(b.offsets_appends(), 1, "one batch for the request's offsets");
    }

    #[test]
    fn a_commit_the_offsets_log_cannot_take_is_coordinator_not_available() {
        let b = Fake::new();
        b.topic("t", 1);
        b.fail_offsets_log(true);
        let resp: OffsetCommitResponse = b.call(ApiKey::OffsetCommit, 8, &request("g", "t", &[(0, 5)]));
        assert_eq!(codes(&resp), vec![(0, ErrorCode::CoordinatorNotAvailable.code())]);
        b.fail_offsets_log(false);
        let resp: OffsetCommitResponse = b.call(ApiKey::OffsetCommit, 8, &request("g", "t", &[(0, 5)]));
        assert_eq!(codes(&resp), vec![(0, 0)], "commits work again once the log does");
    }

    #[test]
    fn unknown_partitions_and_oversized_metadata_fail_alone() {
        let b = Fake::new();
        b.topic("t", 1);
        let mut req = request("g", "t", &[(0, 1), (4, 1)]);
        let mut big = OffsetCommitRequestPartition::default();
        big.committed_metadata = Some(str_bytes("m".repeat(MAX_METADATA + 1)));
        req.topics[0].partitions.push(big);
        let resp: OffsetCommitResponse = b.call(ApiKey::OffsetCommit, 8, &req);
        let unknown = ErrorCode::UnknownTopicOrPartition.code();
        assert_eq!(codes(&resp), vec![(0, 0), (4, unknown), (0, ErrorCode::OffsetMetadataTooLarge.code())]);
    }

    #[test]
    fn a_members_commit_to_a_group_the_coordinator_lacks_is_refused_as_its_version_says() {
        let b = Fake::new();
        b.topic("t", 1);
        let mut req = request("gone", "t", &[(0, 1)]);
        req.generation_id_or_member_epoch = 3;
        req.member_id = str_bytes("m-1");
        for (version, code) in [(8, ErrorCode::IllegalGeneration), (9, ErrorCode::GroupIdNotFound)] {
            let resp: OffsetCommitResponse = b.call(ApiKey::OffsetCommit, version, &req);
            assert_eq!(codes(&resp), vec![(0, code.code())], "v{version}");
        }
        assert_eq!(b.offsets_appends(), 0, "nothing committed, no group created");
    }

    #[test]
    fn without_read_on_the_group_every_partition_is_refused() {
        let b = Fake::with(|c| c.authorizer_enabled = true);
        b.topic("t", 1);
        let resp: OffsetCommitResponse =
            b.call_as(Some("User:eve"), ApiKey::OffsetCommit, 8, &request("g", "t", &[(0, 1)]));
        assert_eq!(codes(&resp), vec![(0, ErrorCode::GroupAuthorizationFailed.code())]);
        assert_eq!(b.offsets_appends(), 0);
    }
}
