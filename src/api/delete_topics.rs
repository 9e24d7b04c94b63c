//! DeleteTopics, by name (all versions) or by topic id (v6+): the controller removes the
//! topics from the catalog and every home shard closes and deletes the partitions' files.
//!
//! Authorization, Kafka's (its controller's): DELETE on the cluster allows every topic;
//! otherwise a topic needs DELETE, and a topic named in the request also DESCRIBE, else
//! TOPIC_AUTHORIZATION_FAILED, decided before its existence. A topic given by id whose name
//! the principal may not DESCRIBE is answered without its name (its id is not a secret).

use proto_kafka::messages::delete_topics_response::DeletableTopicResult;
use proto_kafka::messages::{ApiKey, DeleteTopicsRequest, DeleteTopicsResponse, TopicName};

use super::{authz, str_bytes, ApiSpec, Broker, Outcome, Request};
use crate::auth::acl::Operation;
use crate::protocol::ErrorCode;

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::DeleteTopics, 1, 6);

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: DeleteTopicsRequest = req.decode()?;
    let catalog = broker.catalog();
    let cluster_delete = authz::cluster(broker, &req, Operation::Delete);
    let may = |op: Operation, name: &str| cluster_delete || authz::topic(broker, &req, op, name);
    let by_name = |n: &str| {
        if may(Operation::Describe, n) && may(Operation::Delete, n) {
            (Some(n.to_string()), catalog.topic(n).map_or(uuid::Uuid::nil(), |m| m.id), None)
        } else {
            (Some(n.to_string()), uuid::Uuid::nil(), Some(ErrorCode::TopicAuthorizationFailed))
        }
    };
    // (name if known and shown, id, early error)
    let mut asks: Vec<(Option<String>, uuid::Uuid, Option<ErrorCode>)> = Vec::new();
    if req.version >= 6 {
        for t in &r.topics {
            asks.push(match (&t.name, catalog.topic_by_id(&t.topic_id)) {
                (Some(n), _) => by_name(n),
                (None, None) => (None, t.topic_id, Some(ErrorCode::UnknownTopicId)),
                (None, Some(m)) if !may(Operation::Delete, &m.name) => {
                    let shown = may(Operation::Describe, &m.name).then(|| m.name.clone());
                    (shown, m.id, Some(ErrorCode::TopicAuthorizationFailed))
                }
                (None, Some(m)) => (Some(m.name.clone()), m.id, None),
            });
        }
    } else {
        asks.extend(r.topic_names.iter().map(|n| by_name(n)));
    }
    let names: Vec<String> = asks.iter().filter(|a| a.2.is_none()).filter_map(|a| a.0.clone()).collect();
    let mut results = broker.delete_topics(names).await.into_iter();
    let mut resp = DeleteTopicsResponse::default();
    for (name, id, early) in asks {
        let mut tr = DeletableTopicResult::default();
        tr.name = name.clone().map(|n| TopicName(str_bytes(n)));
        tr.topic_id = id;
        let result = match early {
            Some(e) => Err(e),
            None => results.next().unwrap_or(Err(ErrorCode::UnknownServerError)),
        };
        match result {
            Ok(id) => tr.topic_id = id,
            Err(e) => {
                tr.error_code = e.code();
                tr.error_message = Some(str_bytes(e.to_string()));
            }
        }
        resp.responses.push(tr);
    }
    req.respond(resp)
}
