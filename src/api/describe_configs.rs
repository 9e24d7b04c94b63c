//! DescribeConfigs for topics and for the broker, from the one table of topic configs
//! (`log::config::TOPIC_CONFIGS`), named, typed and sourced as Kafka reports them. A
//! topic's value comes from the topic itself, else the dynamic broker default, else the
//! broker's static settings; with `include_synonyms` each entry lists those layers, most
//! specific first. The BROKER resource shows the broker-wide defaults of every topic config
//! plus the broker's static settings; the default-broker resource (name "") only the dynamic
//! defaults set on it, as Kafka does. Each resource needs DESCRIBE_CONFIGS on what it is
//! about (see `authz::config_resource`).

use std::collections::BTreeMap;

use proto_kafka::messages::describe_configs_request::DescribeConfigsResource;
use proto_kafka::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use proto_kafka::messages::{ApiKey, DescribeConfigsRequest, DescribeConfigsResponse};

use super::{authz, str_bytes, ApiSpec, Broker, Outcome, Request};
use crate::auth::acl::Operation;
use crate::log::config::{Kind, LogConfig, TOPIC_CONFIGS};
use crate::metadata::Catalog;
use crate::protocol::ErrorCode;

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::DescribeConfigs, 1, 4);

pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;

/// Kafka's ConfigSource values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Topic = 1,
    DynamicBroker = 2,
    DynamicDefaultBroker = 3,
    StaticBroker = 4,
    Default = 5,
}

pub fn entry(name: &str, value: String, source: Source, kind: Kind) -> DescribeConfigsResourceResult {
    let mut e = DescribeConfigsResourceResult::default();
    e.name = str_bytes(name);
    e.value = Some(str_bytes(value));
    e.config_source = source as i8;
    e.config_type = kind as i8;
    e.documentation = None; // include_documentation is not served: Kafka's null
    e
}

fn synonym(name: &str, value: String, source: Source) -> DescribeConfigsSynonym {
    let mut s = DescribeConfigsSynonym::default();
    s.name = str_bytes(name);
    s.value = Some(str_bytes(value));
    s.source = source as i8;
    s
}

/// The layers under a topic: the static broker settings, the dynamic broker defaults over
/// them (cluster-wide, then this broker's own), each with the config source it reports.
pub struct Layers {
    pub static_config: LogConfig,
    pub broker_defaults: BTreeMap<String, String>,
    pub broker_configs: BTreeMap<String, String>,
}

impl Layers {
    pub fn of(broker: &impl Broker, catalog: &Catalog) -> Layers {
        Layers {
            static_config: *broker.log_config(),
            broker_defaults: catalog.broker_defaults.clone(),
            broker_configs: catalog.broker_configs.clone(),
        }
    }

    /// Each layer's value of one broker-named config, most specific first.
    fn broker_values(&self, row: &crate::log::config::TopicConfig) -> Vec<(String, Source)> {
        let name = row.broker_name;
        let mut out = Vec::new();
        if let Some(v) = self.broker_configs.get(name) {
            out.push((v.clone(), Source::DynamicBroker));
        }
        if let Some(v) = self.broker_defaults.get(name) {
            out.push((v.clone(), Source::DynamicDefaultBroker));
        }
        out.push(((row.show)(&self.static_config), Source::Default));
        out
    }
}

/// A topic's effective configs; `synonyms` lists each one's layers.
pub fn topic_configs(
    layers: &Layers,
    own: &BTreeMap<String, String>,
    synonyms: bool,
) -> Vec<DescribeConfigsResourceResult> {
    TOPIC_CONFIGS
        .iter()
        .map(|row| {
            let mut values: Vec<(&str, String, Source)> = Vec::new();
            if let Some(v) = own.get(row.name) {
                values.push((row.name, v.clone(), Source::Topic));
            }
            values.extend(layers.broker_values(row).into_iter().map(|(v, s)| (row.broker_name, v, s)));
            // The most specific layer's value, as it was set.
            let mut e = entry(row.name, values[0].1.clone(), values[0].2, row.kind);
            if synonyms {
                e.synonyms = values.into_iter().map(|(n, v, s)| synonym(n, v, s)).collect();
            }
            e
        })
        .collect()
}

/// The broker's configs: the broker-wide default of every topic config, then the static
/// settings that are not topic defaults.
fn broker_configs(broker: &impl Broker, layers: &Layers, synonyms: bool) -> Vec<DescribeConfigsResourceResult> {
    let c = &broker.config();
    let mut v: Vec<DescribeConfigsResourceResult> = TOPIC_CONFIGS
        .iter()
        .map(|row| {
            let values = layers.broker_values(row);
            let mut e = entry(row.broker_name, values[0].0.clone(), values[0].1, row.kind);
            if synonyms {
                e.synonyms = values.into_iter().map(|(v, s)| synonym(row.broker_name, v, s)).collect();
            }
            e
        })
        .collect();
    let statics = [
        ("broker.id", c.node_id.to_string(), Kind::Int),
        ("node.id", c.node_id.to_string(), Kind::Int),
        ("auto.create.topics.enable", c.auto_create_topics.to_string(), Kind::Boolean),
        ("num.partitions", c.default_partitions.to_string(), Kind::Int),
        ("log.dirs", c.data_dir.display().to_string(), Kind::String),
        ("socket.request.max.bytes", c.max_request_bytes.to_string(), Kind::Int),
        ("max.connections", c.max_connections.to_string(), Kind::Int),
        ("max.connections.per.ip", c.max_connections_per_ip.to_string(), Kind::Int),
        ("max.connections.per.ip.overrides", c.max_connections_per_ip_overrides.clone(), Kind::String),
        ("connections.max.idle.ms", c.connections_max_idle_ms.to_string(), Kind::Long),
        ("default.replication.factor", "1".into(), Kind::Int),
        ("offsets.topic.replication.factor", "1".into(), Kind::Int),
    ];
    for (name, value, kind) in statics {
        let mut e = entry(name, value.clone(), Source::StaticBroker, kind);
        e.read_only = true;
        if synonyms {
            e.synonyms = vec![synonym(name, value, Source::StaticBroker)];
        }
        v.push(e);
    }
    v.sort_by(|a, b| a.name.cmp(&b.name));
    v
}

/// The dynamic defaults set on the default-broker resource (name "").
fn default_broker_configs(layers: &Layers, synonyms: bool) -> Vec<DescribeConfigsResourceResult> {
    TOPIC_CONFIGS
        .iter()
        .filter_map(|row| {
            let v = layers.broker_defaults.get(row.broker_name)?;
            let mut e = entry(row.broker_name, v.clone(), Source::DynamicDefaultBroker, row.kind);
            if synonyms {
                e.synonyms = vec![synonym(row.broker_name, v.clone(), Source::DynamicDefaultBroker)];
            }
            Some(e)
        })
        .collect()
}

/// The configs of one resource, or why there are none to show.
fn resource_configs(
    broker: &impl Broker,
    catalog: &Catalog,
    res: &DescribeConfigsResource,
    synonyms: bool,
) -> Result<Vec<DescribeConfigsResourceResult>, (ErrorCode, String)> {
    let layers = Layers::of(broker, catalog);
    match res.resource_type {
        RESOURCE_TOPIC => match catalog.topic(res.resource_name.as_str()) {
            Some(t) => Ok(topic_configs(&layers, &t.configs, synonyms)),
            None => Err((
                ErrorCode::UnknownTopicOrPartition,
                format!("topic {} does not exist", res.resource_name.as_str()),
            )),
        },
        RESOURCE_BROKER if res.resource_name.is_empty() => Ok(default_broker_configs(&layers, synonyms)),
        RESOURCE_BROKER if res.resource_name.as_str() == broker.config().node_id.to_string() => {
            Ok(broker_configs(broker, &layers, synonyms))
        }
        RESOURCE_BROKER => Err((ErrorCode::InvalidRequest, format!("unknown broker {}", res.resource_name.as_str()))),
        other => Err((ErrorCode::InvalidRequest, format!("resource type {other} is not supported"))),
    }
}

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: DescribeConfigsRequest = req.decode()?;
    let catalog = broker.catalog();
    let mut resp = DescribeConfigsResponse::default();
    for res in &r.resources {
        let mut out = DescribeConfigsResult::default();
        out.error_message = None; // Kafka's answer on success
        out.resource_type = res.resource_type;
        out.resource_name = res.resource_name.clone();
        let configs =
            authz::config_resource(broker, &req, Operation::DescribeConfigs, res.resource_type, &res.resource_name)
                .and_then(|()| resource_configs(broker, &catalog, res, r.include_synonyms));
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
