//! CreatePartitions (`kafka-topics --alter --partitions N`): the controller grows each topic
//! to the requested count, placing the new partitions on the least loaded shards, and
//! answers once every shard serves them; producers and consumers see them at their next
//! metadata refresh. Kafka's checks: the count must exceed the current one
//! (INVALID_PARTITIONS), client-chosen replicas must name this broker once per new
//! partition (INVALID_REPLICA_ASSIGNMENT), a topic may appear once per request
//! (INVALID_REQUEST).
//!
//! Authorization, Kafka's: ALTER on each topic, else TOPIC_AUTHORIZATION_FAILED (decided
//! before its existence).

use proto_kafka::messages::create_partitions_response::CreatePartitionsTopicResult;
use proto_kafka::messages::{ApiKey, CreatePartitionsRequest, CreatePartitionsResponse};

use super::{authz, str_bytes, ApiSpec, Broker, Outcome, Request};
use crate::auth::acl::Operation;
use crate::controller::NewPartitions;
use crate::protocol::ErrorCode;

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::CreatePartitions, 0, 3);

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: CreatePartitionsRequest = req.decode()?;
    let asks: Vec<Result<NewPartitions, (ErrorCode, String)>> = r
        .topics
        .iter()
        .map(|t| {
            let name = t.name.to_string();
            if r.topics.iter().filter(|o| o.name == t.name).count() > 1 {
                return Err((ErrorCode::InvalidRequest, format!("topic {name:?} appears more than once")));
            }
            if !authz::topic(broker, &req, Operation::Alter, &name) {
                return Err((ErrorCode::TopicAuthorizationFailed, ErrorCode::TopicAuthorizationFailed.to_string()));
            }
            let assignments =
                t.assignments.as_ref().map(|a| a.iter().map(|p| p.broker_ids.iter().map(|b| b.0).collect()).collect());
            Ok(NewPartitions { topic: name, count: t.count, assignments })
        })
        .collect();
    let valid: Vec<NewPartitions> = asks.iter().filter_map(|a| a.as_ref().ok().cloned()).collect();
    let mut done = broker.create_partitions(valid, r.validate_only).await.into_iter();
    let mut resp = CreatePartitionsResponse::default();
    let mut answered = std::collections::HashSet::new();
    for (t, ask) in r.topics.iter().zip(asks) {
        // A name given twice is answered once, as Kafka does.
        if r.topics.iter().filter(|o| o.name == t.name).count() > 1 && !answered.insert(t.name.as_str()) {
            continue;
        }
        let outcome = match ask {
            Ok(_) => done.next().unwrap_or_else(|| Err((ErrorCode::UnknownServerError, "no answer".into()))),
            Err(e) => Err(e),
        };
        let mut tr = CreatePartitionsTopicResult::default();
        tr.name = t.name.clone();
        tr.error_message = None;
        if let Err((code, msg)) = outcome {
            tr.error_code = code.code();
            tr.error_message = Some(str_bytes(msg));
        }
        resp.results.push(tr);
    }
    req.respond(resp)
}

#[cfg(test)]
mod tests {
    use proto_kafka::messages::create_partitions_request::{CreatePartitionsAssignment, CreatePartitionsTopic};
    use proto_kafka::messages::{BrokerId, TopicName};

    use super::*;
    use crate::api::fake::Fake;
    use crate::auth::acl::ResourceType;

    fn grow(name: &str, count: i32) -> CreatePartitionsTopic {
        let mut t = CreatePartitionsTopic::default();
        t.name = TopicName(str_bytes(name));
        t.count = count;
        t.assignments = None; // the broker places them (an empty list would be 0 assignments)
        t
    }

    fn request(topics: Vec<CreatePartitionsTopic>, validate_only: bool) -> CreatePartitionsRequest {
        let mut r = CreatePartitionsRequest::default();
        r.topics = topics;
        r.timeout_ms = 30_000;
        r.validate_only = validate_only;
        r
    }

    fn codes(resp: &CreatePartitionsResponse) -> Vec<(String, i16)> {
        resp.results.iter().map(|t| (t.name.to_string(), t.error_code)).collect()
    }

    fn partitions(b: &Fake, name: &str) -> i32 {
        b.catalog().topic(name).expect("topic exists").partitions()
    }

    #[test]
    fn a_topic_grows_to_the_requested_count_and_the_new_partitions_are_served() {
        let b = Fake::new();
        b.topic("t", 1);
        let resp: CreatePartitionsResponse = b.call(ApiKey::CreatePartitions, 3, &request(vec![grow("t", 3)], false));
        assert_eq!(codes(&resp), vec![("t".into(), 0)]);
        assert_eq!(resp.results[0].error_message, None);
        assert_eq!(partitions(&b, "t"), 3);
        assert_eq!(b.offsets_of(b.tp("t", 2)).log_end, 0, "the new partition has an empty log");
    }

    #[test]
    fn counts_not_above_the_current_unknown_topics_and_repeats_are_refused() {
        let b = Fake::new();
        b.topic("t", 2);
        b.topic("twice", 1);
        let topics = vec![grow("t", 2), grow("never", 4), grow("twice", 2), grow("twice", 3)];
        let resp: CreatePartitionsResponse = b.call(ApiKey::CreatePartitions, 3, &request(topics, false));
        let invalid = ErrorCode::InvalidRequest.code();
        assert_eq!(
            codes(&resp),
            vec![
                ("t".into(), ErrorCode::InvalidPartitions.code()),
                ("never".into(), ErrorCode::UnknownTopicOrPartition.code()),
                ("twice".into(), invalid),
            ]
        );
        let resp: CreatePartitionsResponse = b.call(ApiKey::CreatePartitions, 3, &request(vec![grow("t", 1)], false));
        assert_eq!(codes(&resp), vec![("t".into(), ErrorCode::InvalidPartitions.code())]);
        assert_eq!((partitions(&b, "t"), partitions(&b, "twice")), (2, 1));
    }

    #[test]
    fn replicas_must_name_this_broker_once_per_new_partition() {
        let b = Fake::new();
        b.topic("t", 1);
        let node = b.config().node_id;
        let assign = |ids: &[&[i32]]| {
            ids.iter()
                .map(|ids| {
                    let mut a = CreatePartitionsAssignment::default();
                    a.broker_ids = ids.iter().map(|i| BrokerId(*i)).collect();
                    a
                })
                .collect::<Vec<_>>()
        };
        let mut elsewhere = grow("t", 2);
        elsewhere.assignments = Some(assign(&[&[node + 1]]));
        let mut too_few = grow("t", 3);
        too_few.assignments = Some(assign(&[&[node]]));
        for t in [elsewhere, too_few] {
            let resp: CreatePartitionsResponse = b.call(ApiKey::CreatePartitions, 3, &request(vec![t], false));
            assert_eq!(codes(&resp), vec![("t".into(), ErrorCode::InvalidReplicaAssignment.code())]);
        }
        let mut here = grow("t", 3);
        here.assignments = Some(assign(&[&[node], &[node]]));
        let resp: CreatePartitionsResponse = b.call(ApiKey::CreatePartitions, 3, &request(vec![here], false));
        assert_eq!(codes(&resp), vec![("t".into(), 0)]);
        assert_eq!(partitions(&b, "t"), 3);
    }

    #[test]
    fn validate_only_answers_but_adds_no_partition() {
        let b = Fake::new();
        b.topic("t", 1);
        let topics = vec![grow("t", 4), grow("never", 2)];
        let resp: CreatePartitionsResponse = b.call(ApiKey::CreatePartitions, 3, &request(topics, true));
        assert_eq!(codes(&resp), vec![("t".into(), 0), ("never".into(), ErrorCode::UnknownTopicOrPartition.code())]);
        assert_eq!(partitions(&b, "t"), 1);
    }

    #[test]
    fn without_alter_the_topic_is_refused_before_its_existence_is_told() {
        let b = Fake::with(|c| c.authorizer_enabled = true);
        b.topic("t", 1);
        b.topic("mine", 1);
        b.allow("User:eve", ResourceType::Topic, "mine", Operation::Alter);
        let topics = vec![grow("t", 2), grow("never", 2), grow("mine", 2)];
        let resp: CreatePartitionsResponse =
            b.call_as(Some("User:eve"), ApiKey::CreatePartitions, 3, &request(topics, false));
        let refused = ErrorCode::TopicAuthorizationFailed.code();
        assert_eq!(codes(&resp), vec![("t".into(), refused), ("never".into(), refused), ("mine".into(), 0)]);
        assert_eq!((partitions(&b, "t"), partitions(&b, "mine")), (1, 2));
    }
}
