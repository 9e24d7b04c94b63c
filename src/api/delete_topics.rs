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
            (Some(n.to_string()), catalog.topic(n).map_or(uuid::Uuid::nil(), |m| m.id), None, uuid::Uuid::nil())
        } else {
            (Some(n.to_string()), uuid::Uuid::nil(), Some(ErrorCode::TopicAuthorizationFailed), uuid::Uuid::nil())
        }
    };
    // (name if known and shown, id, early error, the id it was asked by or nil)
    let mut asks: Vec<(Option<String>, uuid::Uuid, Option<ErrorCode>, uuid::Uuid)> = Vec::new();
    // Kafka's INVALID_REQUEST answers, before any authorization: a topic named twice (by
    // name or by id) is deleted by none of its entries.
    let mut invalid: Vec<Option<&'static str>> = Vec::new();
    let twice = |n: usize| if n > 1 { Some("the topic is named more than once in the request") } else { None };
    if req.version >= 6 {
        for t in &r.topics {
            let same = |o: &&proto_kafka::messages::delete_topics_request::DeleteTopicState| match &t.name {
                Some(n) => o.name.as_ref() == Some(n),
                None => o.name.is_none() && o.topic_id == t.topic_id,
            };
            invalid.push(match (&t.name, t.topic_id.is_nil()) {
                (None, true) => Some("neither a topic name nor a topic id was given"),
                (Some(_), false) => Some("give a topic's name or its id, not both"),
                _ => twice(r.topics.iter().filter(same).count()),
            });
            asks.push(match (&t.name, catalog.topic_by_id(&t.topic_id)) {
                _ if invalid.last().expect("pushed").is_some() => {
                    (t.name.as_ref().map(|n| n.to_string()), t.topic_id, Some(ErrorCode::InvalidRequest), t.topic_id)
                }
                (Some(n), _) => by_name(n),
                (None, None) => (None, t.topic_id, Some(ErrorCode::UnknownTopicId), t.topic_id),
                (None, Some(m)) if !may(Operation::Delete, &m.name) => {
                    let shown = may(Operation::Describe, &m.name).then(|| m.name.clone());
                    (shown, m.id, Some(ErrorCode::TopicAuthorizationFailed), m.id)
                }
                (None, Some(m)) => (Some(m.name.clone()), m.id, None, m.id),
            });
        }
    } else {
        for n in &r.topic_names {
            invalid.push(twice(r.topic_names.iter().filter(|o| *o == n).count()));
            asks.push(match invalid.last().expect("pushed") {
                Some(_) => (Some(n.to_string()), uuid::Uuid::nil(), Some(ErrorCode::InvalidRequest), uuid::Uuid::nil()),
                None => by_name(n),
            });
        }
    }
    // Each with the id it was asked by (nil: by name): the controller deletes a topic only if
    // it still has that id, so a topic created again under the name since this broker's
    // catalog was made is not deleted in the old one's place.
    let names: Vec<(String, uuid::Uuid)> =
        asks.iter().filter(|a| a.2.is_none()).filter_map(|a| Some((a.0.clone()?, a.3))).collect();
    let mut results = broker.delete_topics(names).await.into_iter();
    let mut resp = DeleteTopicsResponse::default();
    for ((name, id, early, _), why) in asks.into_iter().zip(invalid) {
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
                tr.error_message = Some(str_bytes(why.map_or_else(|| e.to_string(), str::to_string)));
            }
        }
        resp.responses.push(tr);
    }
    req.respond(resp)
}

#[cfg(test)]
mod tests {
    use proto_kafka::messages::delete_topics_request::DeleteTopicState;

    use super::*;
    use crate::api::fake::Fake;
    use crate::auth::acl::ResourceType;

    fn by_names(names: &[&str]) -> DeleteTopicsRequest {
        let mut r = DeleteTopicsRequest::default();
        r.topic_names = names.iter().map(|n| TopicName(str_bytes(*n))).collect();
        r.timeout_ms = 30_000;
        r
    }

    /// A v6 request: each topic by name or by id.
    fn by_states(topics: &[(Option<&str>, uuid::Uuid)]) -> DeleteTopicsRequest {
        let mut r = DeleteTopicsRequest::default();
        for (name, id) in topics {
            let mut t = DeleteTopicState::default();
            t.name = name.map(|n| TopicName(str_bytes(n)));
            t.topic_id = *id;
            r.topics.push(t);
        }
        r.timeout_ms = 30_000;
        r
    }

    fn codes(resp: &DeleteTopicsResponse) -> Vec<(Option<String>, i16)> {
        resp.responses.iter().map(|t| (t.name.as_ref().map(|n| n.to_string()), t.error_code)).collect()
    }

    #[test]
    fn a_topic_deleted_by_name_leaves_the_catalog_and_unknown_names_fail_alone() {
        let b = Fake::new();
        b.topic("gone", 2);
        b.topic("kept", 1);
        let resp: DeleteTopicsResponse = b.call(ApiKey::DeleteTopics, 5, &by_names(&["gone", "never"]));
        assert_eq!(
            codes(&resp),
            vec![(Some("gone".into()), 0), (Some("never".into()), ErrorCode::UnknownTopicOrPartition.code())]
        );
        assert!(b.catalog().topic("gone").is_none());
        assert!(b.catalog().topic("kept").is_some(), "other topics stay");
    }

    #[test]
    fn v6_deletes_by_id_and_answers_with_the_name_and_id() {
        let b = Fake::new();
        let id = b.topic("t", 1).topic;
        b.topic("u", 1);
        let unknown = uuid::Uuid::from_u128(42);
        let req = by_states(&[(None, id), (None, unknown), (Some("u"), uuid::Uuid::nil())]);
        let resp: DeleteTopicsResponse = b.call(ApiKey::DeleteTopics, 6, &req);
        assert_eq!(
            codes(&resp),
            vec![(Some("t".into()), 0), (None, ErrorCode::UnknownTopicId.code()), (Some("u".into()), 0)]
        );
        assert_eq!(resp.responses[0].topic_id, id);
        assert_eq!(resp.responses[1].topic_id, unknown);
        assert!(b.catalog().topic("t").is_none() && b.catalog().topic("u").is_none());
    }

    #[test]
    fn a_topic_named_twice_or_by_both_name_and_id_or_by_neither_is_invalid_request() {
        let b = Fake::new();
        let id = b.topic("t", 1).topic;
        b.topic("u", 1);
        let invalid = ErrorCode::InvalidRequest.code();
        let req = by_states(&[(None, id), (None, id), (Some("u"), id), (None, uuid::Uuid::nil())]);
        let resp: DeleteTopicsResponse = b.call(ApiKey::DeleteTopics, 6, &req);
        assert_eq!(codes(&resp), vec![(None, invalid), (None, invalid), (Some("u".into()), invalid), (None, invalid)]);
        let resp: DeleteTopicsResponse = b.call(ApiKey::DeleteTopics, 5, &by_names(&["u", "u"]));
        assert_eq!(codes(&resp), vec![(Some("u".into()), invalid), (Some("u".into()), invalid)]);
        assert!(b.catalog().topic("t").is_some() && b.catalog().topic("u").is_some(), "nothing deleted");
    }

    #[test]
    fn the_offsets_topic_cannot_be_deleted() {
        let b = Fake::new();
        let resp: DeleteTopicsResponse = b.call(ApiKey::DeleteTopics, 5, &by_names(&[crate::group::offsets::TOPIC]));
        assert_eq!(resp.responses[0].error_code, ErrorCode::InvalidTopicException.code());
        assert!(b.catalog().topic(crate::group::offsets::TOPIC).is_some());
    }

    #[test]
    fn without_delete_a_topic_is_refused_whether_or_not_it_exists() {
        let b = Fake::with(|c| c.authorizer_enabled = true);
        b.topic("t", 1);
        let resp: DeleteTopicsResponse =
            b.call_as(Some("User:eve"), ApiKey::DeleteTopics, 5, &by_names(&["t", "never"]));
        let refused = ErrorCode::TopicAuthorizationFailed.code();
        assert_eq!(codes(&resp), vec![(Some("t".into()), refused), (Some("never".into()), refused)]);
        assert!(b.catalog().topic("t").is_some());
    }

    #[test]
    fn by_id_the_name_is_shown_only_to_who_may_describe_it() {
        let b = Fake::with(|c| c.authorizer_enabled = true);
        let hidden = b.topic("hidden", 1).topic;
        let described = b.topic("described", 1).topic;
        b.allow("User:eve", ResourceType::Topic, "described", Operation::Describe);
        let resp: DeleteTopicsResponse =
            b.call_as(Some("User:eve"), ApiKey::DeleteTopics, 6, &by_states(&[(None, hidden), (None, described)]));
        let refused = ErrorCode::TopicAuthorizationFailed.code();
        assert_eq!(codes(&resp), vec![(None, refused), (Some("described".into()), refused)]);
        assert_eq!((resp.responses[0].topic_id, resp.responses[1].topic_id), (hidden, described));
        assert!(b.catalog().topic("hidden").is_some() && b.catalog().topic("described").is_some());
    }

    #[test]
    fn delete_on_the_topic_or_the_cluster_allows_the_deletion() {
        let b = Fake::with(|c| c.authorizer_enabled = true);
        b.topic("a", 1);
        b.topic("b", 1);
        b.allow("User:eve", ResourceType::Topic, "a", Operation::Delete);
        b.allow("User:ops", ResourceType::Cluster, crate::auth::acl::CLUSTER_NAME, Operation::Delete);
        let resp: DeleteTopicsResponse = b.call_as(Some("User:eve"), ApiKey::DeleteTopics, 5, &by_names(&["a"]));
        assert_eq!(codes(&resp), vec![(Some("a".into()), 0)]);
        let resp: DeleteTopicsResponse = b.call_as(Some("User:ops"), ApiKey::DeleteTopics, 5, &by_names(&["b"]));
        assert_eq!(codes(&resp), vec![(Some("b".into()), 0)]);
        assert!(b.catalog().topic("a").is_none() && b.catalog().topic("b").is_none());
    }
}
