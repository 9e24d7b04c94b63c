//! DeleteTopics, by name (all versions) or by topic id (v6+): the controller removes the
//! topics from the catalog and every home shard closes and deletes the partitions' files.

use std::rc::Rc;

use proto_kafka::messages::delete_topics_response::DeletableTopicResult;
use proto_kafka::messages::{ApiKey, DeleteTopicsRequest, DeleteTopicsResponse, TopicName};

use super::{str_bytes, ApiSpec, Outcome, Request};
use crate::protocol::ErrorCode;
use crate::shard::Shard;

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::DeleteTopics, 1, 6);

pub async fn handle(shard: &Rc<Shard>, req: Request) -> Outcome {
    let r: DeleteTopicsRequest = req.decode()?;
    let catalog = shard.catalog();
    // (name if known, id, early error)
    let mut asks: Vec<(Option<String>, uuid::Uuid, Option<ErrorCode>)> = Vec::new();
    if req.version >= 6 {
        for t in &r.topics {
            match (&t.name, catalog.topic_by_id(&t.topic_id)) {
                (Some(n), _) => asks.push((
                    Some(n.to_string()),
                    catalog.topic(n.as_str()).map_or(uuid::Uuid::nil(), |m| m.id),
                    None,
                )),
                (None, Some(m)) => asks.push((Some(m.name.clone()), m.id, None)),
                (None, None) => asks.push((None, t.topic_id, Some(ErrorCode::UnknownTopicId))),
            }
        }
    } else {
        for n in &r.topic_names {
            asks.push((Some(n.to_string()), uuid::Uuid::nil(), None));
        }
    }
    let names: Vec<String> = asks.iter().filter(|a| a.2.is_none()).filter_map(|a| a.0.clone()).collect();
    let mut results = shard.delete_topics(names).await.into_iter();
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
    req.respond(&resp)
}
