//! CreateTopics: forwarded to the controller shard, which answers once every shard serves
//! the new topics. Replication factor must be 1 or -1 (one broker).
//!
//! Authorization, Kafka's: CREATE on the cluster, or on the topic, else
//! TOPIC_AUTHORIZATION_FAILED. A created topic's configs (and partition count and replication
//! factor) are shown only with DESCRIBE_CONFIGS on it; otherwise its config error is
//! TOPIC_AUTHORIZATION_FAILED.

use proto_kafka::messages::create_topics_response::{CreatableTopicConfigs, CreatableTopicResult};
use proto_kafka::messages::{ApiKey, CreateTopicsRequest, CreateTopicsResponse};

use super::{authz, str_bytes, ApiSpec, Broker, Outcome, Request};
use crate::api::describe_configs;
use crate::auth::acl::Operation;
use crate::controller::{NewTopic, TopicResult};
use crate::protocol::ErrorCode;

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::CreateTopics, 2, 7);

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: CreateTopicsRequest = req.decode()?;
    let mut asks = Vec::with_capacity(r.topics.len());
    let mut early: Vec<Option<(ErrorCode, String)>> = Vec::with_capacity(r.topics.len());
    let cluster_create = authz::cluster(broker, &req, Operation::Create);
    for t in &r.topics {
        let node = broker.config().node_id;
        let mut partitions = t.num_partitions;
        let mut rf = t.replication_factor;
        let mut err = None;
        if !cluster_create && !authz::topic(broker, &req, Operation::Create, &t.name) {
            err = Some((
                ErrorCode::TopicAuthorizationFailed,
                "creating a topic needs CREATE on the cluster or on the topic".into(),
            ));
        } else if !t.assignments.is_empty() {
            // Manual assignment: accepted when every replica list names exactly this broker.
            if t.assignments.iter().any(|a| a.broker_ids.len() != 1 || a.broker_ids[0].0 != node) {
                err = Some((ErrorCode::InvalidReplicaAssignment, format!("this cluster has one broker, id {node}")));
            }
            partitions = t.assignments.len() as i32;
            rf = 1;
        }
        let configs =
            t.configs.iter().filter_map(|c| Some((c.name.to_string(), c.value.as_ref()?.to_string()))).collect();
        asks.push(NewTopic { name: t.name.to_string(), partitions, replication_factor: rf, configs });
        early.push(err);
    }
    let (to_create, idx): (Vec<NewTopic>, Vec<usize>) =
        asks.iter().cloned().enumerate().filter(|(i, _)| early[*i].is_none()).map(|(i, t)| (t, i)).unzip();
    let mut results: Vec<Option<TopicResult>> = early.into_iter().map(|e| e.map(Err)).collect();
    for (r, i) in broker.create_topics(to_create, r.validate_only).await.into_iter().zip(idx) {
        results[i] = Some(r);
    }
    let mut resp = CreateTopicsResponse::default();
    for (ask, result) in asks.iter().zip(results) {
        let mut tr = CreatableTopicResult::default();
        tr.error_message = None; // Kafka's answer on success (librdkafka prints it otherwise)
        tr.name = proto_kafka::messages::TopicName(str_bytes(ask.name.clone()));
        match result.expect("every topic answered") {
            Ok(meta) if !authz::topic(broker, &req, Operation::DescribeConfigs, &ask.name) => {
                tr.topic_id = meta.id;
                tr.num_partitions = -1;
                tr.replication_factor = -1;
                tr.configs = Some(Vec::new());
                tr.topic_config_error_code = ErrorCode::TopicAuthorizationFailed.code();
            }
            Ok(meta) => {
                tr.topic_id = meta.id;
                tr.num_partitions = meta.partitions();
                tr.replication_factor = 1;
                let layers = describe_configs::Layers::of(broker, &broker.catalog());
                tr.configs = Some(
                    describe_configs::topic_configs(&layers, &meta.configs, false)
                        .into_iter()
                        .map(|c| {
                            let mut o = CreatableTopicConfigs::default();
                            o.name = c.name;
                            o.value = c.value;
                            o.read_only = c.read_only;
                            o.config_source = c.config_source;
                            o.is_sensitive = false;
                            o
                        })
                        .collect(),
                );
            }
            Err((e, msg)) => {
                tr.error_code = e.code();
                tr.error_message = Some(str_bytes(msg));
                tr.num_partitions = -1;
                tr.replication_factor = -1;
            }
        }
        resp.topics.push(tr);
    }
    req.respond(resp)
}
