//! DescribeConfigs for topics (the broker defaults with the topic's own settings over them)
//! and for the broker itself, named and typed as Kafka names them. Each resource needs
//! DESCRIBE_CONFIGS on what it is about (see `authz::config_resource`).

use std::collections::BTreeMap;
use std::rc::Rc;

use proto_kafka::messages::describe_configs_request::DescribeConfigsResource;
use proto_kafka::messages::describe_configs_response::{DescribeConfigsResourceResult, DescribeConfigsResult};
use proto_kafka::messages::{ApiKey, DescribeConfigsRequest, DescribeConfigsResponse};

use super::{authz, str_bytes, ApiSpec, Outcome, Request};
use crate::auth::acl::Operation;
use crate::config::FlushPolicy;
use crate::log::LogConfig;
use crate::metadata::Catalog;
use crate::protocol::ErrorCode;
use crate::shard::Shard;

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::DescribeConfigs, 1, 4);

const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
// Kafka's ConfigSource values.
const SOURCE_TOPIC: i8 = 1;
const SOURCE_STATIC_BROKER: i8 = 4;
const SOURCE_DEFAULT: i8 = 5;
// Kafka's ConfigType values.
const TYPE_BOOLEAN: i8 = 1;
const TYPE_STRING: i8 = 2;
const TYPE_INT: i8 = 3;
const TYPE_LONG: i8 = 5;

pub fn entry(name: &str, value: String, source: i8, config_type: i8) -> DescribeConfigsResourceResult {
    let mut e = DescribeConfigsResourceResult::default();
    e.name = str_bytes(name);
    e.value = Some(str_bytes(value));
    e.config_source = source;
    e.config_type = config_type;
    e
}

/// A topic's effective configs; a value the topic set itself is marked as such.
pub fn topic_configs(log: &LogConfig, own: &BTreeMap<String, String>) -> Vec<DescribeConfigsResourceResult> {
    let flush_messages = if log.flush == FlushPolicy::Always { "1".to_string() } else { i64::MAX.to_string() };
    let defaults: [(&str, String, i8); 10] = [
        ("cleanup.policy", "delete".into(), TYPE_STRING),
        ("compression.type", "producer".into(), TYPE_STRING),
        ("flush.messages", flush_messages, TYPE_LONG),
        ("max.message.bytes", log.message_max_bytes.to_string(), TYPE_INT),
        ("message.timestamp.type", "CreateTime".into(), TYPE_STRING),
        ("min.insync.replicas", "1".into(), TYPE_INT),
        ("retention.bytes", log.retention_bytes.to_string(), TYPE_LONG),
        ("retention.ms", log.retention_ms.to_string(), TYPE_LONG),
        ("segment.bytes", log.segment_bytes.to_string(), TYPE_INT),
        ("segment.ms", log.segment_ms.to_string(), TYPE_LONG),
    ];
    defaults
        .into_iter()
        .map(|(name, value, ty)| match own.get(name) {
            Some(v) => entry(name, v.clone(), SOURCE_TOPIC, ty),
            None => entry(name, value, SOURCE_DEFAULT, ty),
        })
        .collect()
}

fn broker_configs(shard: &Shard) -> Vec<DescribeConfigsResourceResult> {
    let c = &shard.config;
    let mut v = vec![
        entry("broker.id", c.node_id.to_string(), SOURCE_STATIC_BROKER, TYPE_INT),
        entry("node.id", c.node_id.to_string(), SOURCE_STATIC_BROKER, TYPE_INT),
        entry("auto.create.topics.enable", c.auto_create_topics.to_string(), SOURCE_STATIC_BROKER, TYPE_BOOLEAN),
        entry("num.partitions", c.default_partitions.to_string(), SOURCE_STATIC_BROKER, TYPE_INT),
        entry("log.dirs", c.data_dir.display().to_string(), SOURCE_STATIC_BROKER, TYPE_STRING),
        entry("log.segment.bytes", c.segment_bytes.to_string(), SOURCE_STATIC_BROKER, TYPE_INT),
        entry("log.roll.ms", c.segment_ms.to_string(), SOURCE_STATIC_BROKER, TYPE_LONG),
        entry("log.retention.bytes", c.retention_bytes.to_string(), SOURCE_STATIC_BROKER, TYPE_LONG),
        entry("log.retention.ms", c.retention_ms.to_string(), SOURCE_STATIC_BROKER, TYPE_LONG),
        entry("message.max.bytes", c.message_max_bytes.to_string(), SOURCE_STATIC_BROKER, TYPE_INT),
        entry("socket.request.max.bytes", c.max_request_bytes.to_string(), SOURCE_STATIC_BROKER, TYPE_INT),
        entry("max.connections", c.max_connections.to_string(), SOURCE_STATIC_BROKER, TYPE_INT),
        entry("max.connections.per.ip", c.max_connections_per_ip.to_string(), SOURCE_STATIC_BROKER, TYPE_INT),
        entry(
            "max.connections.per.ip.overrides",
            c.max_connections_per_ip_overrides.clone(),
            SOURCE_STATIC_BROKER,
            TYPE_STRING,
        ),
        entry("connections.max.idle.ms", c.connections_max_idle_ms.to_string(), SOURCE_STATIC_BROKER, TYPE_LONG),
        entry("default.replication.factor", "1".into(), SOURCE_DEFAULT, TYPE_INT),
        entry("offsets.topic.replication.factor", "1".into(), SOURCE_DEFAULT, TYPE_INT),
    ];
    v.sort_by(|a, b| a.name.cmp(&b.name));
    v
}

/// The configs of one resource, or why there are none to show.
fn resource_configs(
    shard: &Shard,
    catalog: &Catalog,
    res: &DescribeConfigsResource,
) -> Result<Vec<DescribeConfigsResourceResult>, (ErrorCode, String)> {
    match res.resource_type {
        RESOURCE_TOPIC => match catalog.topic(res.resource_name.as_str()) {
            Some(t) => {
                let log = crate::log::partition::topic_log_config(&shard.log_config, &t.configs);
                Ok(topic_configs(&log, &t.configs))
            }
            None => Err((
                ErrorCode::UnknownTopicOrPartition,
                format!("topic {} does not exist", res.resource_name.as_str()),
            )),
        },
        RESOURCE_BROKER
            if res.resource_name.is_empty() || res.resource_name.as_str() == shard.config.node_id.to_string() =>
        {
            Ok(broker_configs(shard))
        }
        RESOURCE_BROKER => Err((ErrorCode::InvalidRequest, format!("unknown broker {}", res.resource_name.as_str()))),
        other => Err((ErrorCode::InvalidRequest, format!("resource type {other} is not supported"))),
    }
}

pub fn handle(shard: &Rc<Shard>, req: Request) -> Outcome {
    let r: DescribeConfigsRequest = req.decode()?;
    let catalog = shard.catalog();
    let mut resp = DescribeConfigsResponse::default();
    for res in &r.resources {
        let mut out = DescribeConfigsResult::default();
        out.resource_type = res.resource_type;
        out.resource_name = res.resource_name.clone();
        let configs =
            authz::config_resource(shard, &req, Operation::DescribeConfigs, res.resource_type, &res.resource_name)
                .and_then(|()| resource_configs(shard, &catalog, res));
        match configs {
            Ok(mut c) => {
                if let Some(keys) = &res.configuration_keys {
                    c.retain(|e| keys.iter().any(|k| k.as_str() == e.name.as_str()));
                }
                out.configs = c;
            }
            Err((e, msg)) => {
                out.error_code = e.code();
                out.error_message = Some(str_bytes(msg));
            }
        }
        resp.results.push(out);
    }
    req.respond(resp)
}
