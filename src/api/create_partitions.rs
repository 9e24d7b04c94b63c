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
    for (t, ask) in r.topics.iter().zip(asks) {
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
