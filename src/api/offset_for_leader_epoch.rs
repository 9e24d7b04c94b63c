//! OffsetForLeaderEpoch: consumers validate their position after a metadata change. This
//! broker has had one leader epoch (0) for every partition, so epoch 0 ends at the log end
//! and any later epoch is unknown; so is the undefined epoch (-1), as Kafka answers it
//! (`LeaderEpochFileCache.endOffsetFor`): -1 and -1, no error.
//!
//! Authorization, Kafka's (KIP-320): CLUSTER_ACTION on the cluster (brokers) or DESCRIBE on
//! the topic (consumers), else TOPIC_AUTHORIZATION_FAILED.

use proto_kafka::messages::offset_for_leader_epoch_response::{EpochEndOffset, OffsetForLeaderTopicResult};
use proto_kafka::messages::{ApiKey, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};

use super::{authz, checked, ApiSpec, Broker, Outcome, Request};
use crate::auth::acl::Operation;
use crate::protocol::ErrorCode;
use crate::shard::{EpochAsk, Tp};

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
                Some(m) => Ok((
                    Tp { topic: m.id, partition: p.partition },
                    EpochAsk { current: p.current_leader_epoch, epoch: p.leader_epoch },
                )),
            });
        }
    }
    let routed = checked::run(checked, |asks| broker.epoch_end_offsets(asks));
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
                Ok((epoch, end)) => {
                    e.leader_epoch = epoch;
                    e.end_offset = end;
                }
                Err(err) => e.error_code = err.code(),
            }
            tr.partitions.push(e);
        }
        tr.topic = t.topic;
        resp.topics.push(tr);
    }
    req.respond(resp)
}

#[cfg(test)]
mod tests {
    use proto_kafka::messages::offset_for_leader_epoch_request::{OffsetForLeaderPartition, OffsetForLeaderTopic};
    use proto_kafka::messages::TopicName;

    use super::*;
    use crate::api::fake::Fake;
    use crate::api::str_bytes;
    use crate::auth::acl::{ResourceType, CLUSTER_NAME};

    /// A partition's ask for the end of `leader_epoch`, no current epoch check.
    fn epoch(partition: i32, leader_epoch: i32) -> OffsetForLeaderPartition {
        let mut p = OffsetForLeaderPartition::default();
        p.partition = partition;
        p.leader_epoch = leader_epoch;
        p
    }

    fn request(topics: Vec<(&str, Vec<OffsetForLeaderPartition>)>) -> OffsetForLeaderEpochRequest {
        let mut r = OffsetForLeaderEpochRequest::default();
        r.replica_id = proto_kafka::messages::BrokerId(-1);
        for (name, partitions) in topics {
            let mut t = OffsetForLeaderTopic::default();
            t.topic = TopicName(str_bytes(name));
            t.partitions = partitions;
            r.topics.push(t);
        }
        r
    }

    /// (partition, error code, leader epoch, end offset) of each answer, in order.
    fn answers(resp: &OffsetForLeaderEpochResponse) -> Vec<(i32, i16, i32, i64)> {
        let parts = resp.topics.iter().flat_map(|t| &t.partitions);
        parts.map(|p| (p.partition, p.error_code, p.leader_epoch, p.end_offset)).collect()
    }

    #[test]
    fn epoch_zero_ends_at_the_log_end_and_other_epochs_are_undefined() {
        let b = Fake::new();
        b.topic("t", 2);
        b.append(b.tp("t", 0), &[b"a", b"b", b"c"]);
        let req = request(vec![("t", vec![epoch(0, 0), epoch(1, 0), epoch(0, 1), epoch(0, -1)])]);
        let resp: OffsetForLeaderEpochResponse = b.call(ApiKey::OffsetForLeaderEpoch, 4, &req);
        assert_eq!(answers(&resp), vec![(0, 0, 0, 3), (1, 0, 0, 0), (0, 0, -1, -1), (0, 0, -1, -1)]);
        assert_eq!(resp.topics[0].topic.as_str(), "t");
    }

    #[test]
    fn unknown_topics_partitions_and_later_current_epochs_are_refused() {
        let b = Fake::new();
        b.topic("t", 1);
        b.append(b.tp("t", 0), &[b"a"]);
        let mut current = epoch(0, 0);
        current.current_leader_epoch = 0;
        let mut later = epoch(0, 0);
        later.current_leader_epoch = 1;
        let req = request(vec![("t", vec![epoch(3, 0), current, later]), ("nope", vec![epoch(0, 0)])]);
        let resp: OffsetForLeaderEpochResponse = b.call(ApiKey::OffsetForLeaderEpoch, 3, &req);
        let unknown = ErrorCode::UnknownTopicOrPartition.code();
        assert_eq!(
            answers(&resp),
            vec![
                (3, unknown, -1, -1),
                (0, 0, 0, 1),
                (0, ErrorCode::UnknownLeaderEpoch.code(), -1, -1),
                (0, unknown, -1, -1)
            ]
        );
    }

    #[test]
    fn without_describe_the_topic_is_refused_before_its_existence_is_told() {
        let b = Fake::with(|c| c.authorizer_enabled = true);
        b.topic("t", 1);
        b.topic("u", 1);
        b.allow("User:eve", ResourceType::Topic, "u", Operation::Describe);
        let req = request(vec![("t", vec![epoch(0, 0)]), ("missing", vec![epoch(0, 0)]), ("u", vec![epoch(0, 0)])]);
        let resp: OffsetForLeaderEpochResponse = b.call_as(Some("User:eve"), ApiKey::OffsetForLeaderEpoch, 4, &req);
        let denied = ErrorCode::TopicAuthorizationFailed.code();
        assert_eq!(answers(&resp), vec![(0, denied, -1, -1), (0, denied, -1, -1), (0, 0, 0, 0)]);
    }

    #[test]
    fn cluster_action_on_the_cluster_serves_every_topic() {
        let b = Fake::with(|c| c.authorizer_enabled = true);
        b.topic("t", 1);
        b.allow("User:broker", ResourceType::Cluster, CLUSTER_NAME, Operation::ClusterAction);
        let req = request(vec![("t", vec![epoch(0, 0)]), ("missing", vec![epoch(0, 0)])]);
        let resp: OffsetForLeaderEpochResponse = b.call_as(Some("User:broker"), ApiKey::OffsetForLeaderEpoch, 4, &req);
        assert_eq!(answers(&resp), vec![(0, 0, 0, 0), (0, ErrorCode::UnknownTopicOrPartition.code(), -1, -1)]);
    }
}
