//! Metadata: this broker as the only node, leader of every partition (epoch 0), with real
//! topic ids. Unknown topics are created on the fly when the client allows it and
//! `auto_create_topics` is on (Kafka's `auto.create.topics.enable`, default true).

use std::rc::Rc;

use proto_kafka::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use proto_kafka::messages::{ApiKey, BrokerId, MetadataRequest, MetadataResponse, TopicName};

use super::{str_bytes, ApiSpec, Outcome, Request};
use crate::metadata::{check_topic_name, TopicMeta};
use crate::protocol::ErrorCode;
use crate::shard::{NewTopic, Shard};

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::Metadata, 0, 13);

/// "Authorized operations were not requested" in Kafka's encoding.
pub const AUTH_OPS_OMITTED: i32 = i32::MIN;

pub fn broker(shard: &Shard) -> MetadataResponseBroker {
    let mut b = MetadataResponseBroker::default();
    b.node_id = BrokerId(shard.config.node_id);
    b.host = str_bytes(shard.advertised.host.clone());
    b.port = shard.advertised.port as i32;
    b
}

fn topic_entry(shard: &Shard, t: &TopicMeta) -> MetadataResponseTopic {
    let node = BrokerId(shard.config.node_id);
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

pub async fn handle(shard: &Rc<Shard>, req: Request) -> Outcome {
    let r: MetadataRequest = req.decode()?;
    // v0 has no null: an empty list means all topics there.
    let requested = match r.topics {
        Some(t) if !(req.version == 0 && t.is_empty()) => Some(t),
        _ => None,
    };
    let auto_create = shard.config.auto_create_topics && (req.version < 4 || r.allow_auto_topic_creation);
    let mut resp = MetadataResponse::default();
    resp.brokers = vec![broker(shard)];
    resp.controller_id = BrokerId(shard.config.node_id);
    resp.cluster_authorized_operations = AUTH_OPS_OMITTED;
    let catalog = shard.catalog();
    resp.cluster_id = Some(str_bytes(catalog.cluster_id.clone()));
    let Some(requested) = requested else {
        resp.topics = catalog.topics.values().map(|t| topic_entry(shard, t)).collect();
        return req.respond(&resp);
    };

    // Create what is missing first (one controller round trip), then answer in order.
    let missing: Vec<NewTopic> = requested
        .iter()
        .filter_map(|t| t.name.as_ref())
        .filter(|n| auto_create && catalog.topic(n.as_str()).is_none() && check_topic_name(n.as_str()).is_ok())
        .map(|n| NewTopic { name: n.to_string(), partitions: -1, replication_factor: -1, configs: Default::default() })
        .collect();
    let catalog = if missing.is_empty() {
        catalog
    } else {
        for r in shard.create_topics(missing, false).await {
            if let Err((e, msg)) = r {
                if e != ErrorCode::TopicAlreadyExists {
                    tracing::warn!("auto-creating a topic failed: {msg}");
                }
            }
        }
        shard.catalog()
    };
    for t in &requested {
        let entry = match &t.name {
            Some(name) => match catalog.topic(name.as_str()) {
                Some(meta) => topic_entry(shard, meta),
                None if check_topic_name(name.as_str()).is_err() => {
                    error_entry(Some(name.to_string()), uuid::Uuid::nil(), ErrorCode::InvalidTopicException)
                }
                None => error_entry(Some(name.to_string()), uuid::Uuid::nil(), ErrorCode::UnknownTopicOrPartition),
            },
            None => match catalog.topic_by_id(&t.topic_id) {
                Some(meta) => topic_entry(shard, meta),
                None => error_entry(None, t.topic_id, ErrorCode::UnknownTopicId),
            },
        };
        resp.topics.push(entry);
    }
    req.respond(&resp)
}
