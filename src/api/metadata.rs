//! Metadata: this broker as the only node, leader of every partition (epoch 0), with real
//! topic ids. Unknown topics are created on the fly when the client allows it and
//! `auto_create_topics` is on (Kafka's `auto.create.topics.enable`, default true).
//!
//! Authorization, Kafka's: a principal sees only the topics it may DESCRIBE (the others are
//! left out of an all-topics answer, and named ones answer TOPIC_AUTHORIZATION_FAILED whether
//! or not they exist); auto-creation needs CREATE on the cluster or on the topic. Authorized
//! operations are filled in when asked for (see `authz::operations`).

use proto_kafka::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use proto_kafka::messages::{ApiKey, BrokerId, MetadataRequest, MetadataResponse, TopicName};

use super::{authz, str_bytes, ApiSpec, Broker, Outcome, Request};
use crate::auth::acl::{Operation, ResourceType};
use crate::controller::NewTopic;
use crate::metadata::{check_topic_name, TopicMeta};
use crate::protocol::ErrorCode;

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::Metadata, 0, 13);

/// "Authorized operations were not requested" in Kafka's encoding.
pub const AUTH_OPS_OMITTED: i32 = i32::MIN;

/// This broker as the listener the request came in on advertises it.
pub fn broker_entry(broker: &impl Broker, req: &Request) -> MetadataResponseBroker {
    let mut b = MetadataResponseBroker::default();
    b.node_id = BrokerId(broker.config().node_id);
    b.host = str_bytes(req.conn.listener.advertised.host.clone());
    b.port = req.conn.listener.advertised.port as i32;
    b
}

fn topic_entry(broker: &impl Broker, t: &TopicMeta) -> MetadataResponseTopic {
    let node = BrokerId(broker.config().node_id);
    let mut rt = MetadataResponseTopic::default();
    rt.name = Some(TopicName(str_bytes(t.name.clone())));
    rt.topic_id = t.id;
    rt.is_internal = t.name == crate::group::offsets::TOPIC;
    rt.topic_authorized_operations = AUTH_OPS_OMITTED;
    rt.partitions = (0..t.partitions())
        .map(|i| {
            let mut p = MetadataResponsePartition::default();
            p.partition_index = i;
            p.leader_id = node;
            p.leader_epoch = 0;
            p.replica_nodes = vec![node];
            p.isr_nodes = vec![node];
            p
        })
        .collect();
    rt
}

fn error_entry(name: Option<String>, id: uuid::Uuid, e: ErrorCode) -> MetadataResponseTopic {
    let mut rt = MetadataResponseTopic::default();
    rt.name = name.map(|n| TopicName(str_bytes(n)));
    rt.topic_id = id;
    rt.error_code = e.code();
    rt.topic_authorized_operations = AUTH_OPS_OMITTED;
    rt
}

/// What a requested topic gets, decided before anything is created.
enum Answer {
    /// Looked up by name once the missing topics allowed to be created exist.
    ByName(String),
    Ready(MetadataResponseTopic),
}

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: MetadataRequest = req.decode()?;
    // v0 has no null: an empty list means all topics there.
    let requested = match r.topics {
        Some(t) if !(req.version == 0 && t.is_empty()) => Some(t),
        _ => None,
    };
    let auto_create = broker.config().auto_create_topics && (req.version < 4 || r.allow_auto_topic_creation);
    let mut resp = MetadataResponse::default();
    resp.brokers = vec![broker_entry(broker, &req)];
    resp.controller_id = BrokerId(broker.config().node_id);
    // Both flags decode as false outside the versions that carry them (8-10 and 8+).
    resp.cluster_authorized_operations = if r.include_cluster_authorized_operations {
        authz::cluster_operations(broker, &req)
    } else {
        AUTH_OPS_OMITTED
    };
    let described = |meta: &TopicMeta| {
        let mut rt = topic_entry(broker, meta);
        if r.include_topic_authorized_operations {
            rt.topic_authorized_operations = authz::operations(broker, &req, ResourceType::Topic, &meta.name);
        }
        rt
    };
    let may_describe = |name: &str| authz::topic(broker, &req, Operation::Describe, name);
    let catalog = broker.catalog();
    resp.cluster_id = Some(str_bytes(catalog.cluster_id.clone()));
    let Some(requested) = requested else {
        // All topics: those the principal may not DESCRIBE are left out, unmentioned.
        resp.topics = catalog.topics.values().filter(|t| may_describe(&t.name)).map(described).collect();
        return req.respond(resp);
    };

    // Kafka's checks, all before anything is created: DESCRIBE on each topic (refused without
    // looking at whether it exists), and for a topic to be auto-created, CREATE on the cluster
    // or on the topic.
    let may_create_any = auto_create && authz::cluster(broker, &req, Operation::Create);
    let mut missing = Vec::new();
    let answers: Vec<Answer> = requested
        .iter()
        .map(|t| match (&t.name, catalog.topic_by_id(&t.topic_id)) {
            (Some(name), _) if !may_describe(name) => Answer::Ready(error_entry(
                Some(name.to_string()),
                uuid::Uuid::nil(),
                ErrorCode::TopicAuthorizationFailed,
            )),
            (Some(name), _) if catalog.topic(name.as_str()).is_some() || !auto_create => {
                Answer::ByName(name.to_string())
            }
            (Some(name), _) if !may_create_any && !authz::topic(broker, &req, Operation::Create, name) => {
                Answer::Ready(error_entry(
                    Some(name.to_string()),
                    uuid::Uuid::nil(),
                    ErrorCode::TopicAuthorizationFailed,
                ))
            }
            (Some(name), _) => {
                if check_topic_name(name.as_str()).is_ok() {
                    missing.push(NewTopic {
                        name: name.to_string(),
                        partitions: -1,
                        replication_factor: -1,
                        configs: Default::default(),
                    });
                }
                Answer::ByName(name.to_string())
            }
            (None, None) => Answer::Ready(error_entry(None, t.topic_id, ErrorCode::UnknownTopicId)),
            // As Kafka: the id is not a secret, the name is.
            (None, Some(meta)) if !may_describe(&meta.name) => {
                Answer::Ready(error_entry(None, t.topic_id, ErrorCode::TopicAuthorizationFailed))
            }
            (None, Some(meta)) => Answer::Ready(described(meta)),
        })
        .collect();

    // Create what is missing (one controller round trip), then answer in order.
    let catalog = if missing.is_empty() {
        catalog
    } else {
        for r in broker.create_topics(missing, false).await {
            if let Err((e, msg)) = r {
                if e != ErrorCode::TopicAlreadyExists {
                    tracing::warn!("auto-creating a topic failed: {msg}");
                }
            }
        }
        broker.catalog()
    };
    resp.topics = answers
        .into_iter()
        .map(|a| match a {
            Answer::Ready(rt) => rt,
            Answer::ByName(name) => match catalog.topic(&name) {
                Some(meta) => described(meta),
                None if check_topic_name(&name).is_err() => {
                    error_entry(Some(name), uuid::Uuid::nil(), ErrorCode::InvalidTopicException)
                }
                None => error_entry(Some(name), uuid::Uuid::nil(), ErrorCode::UnknownTopicOrPartition),
            },
        })
        .collect();
    req.respond(resp)
}
