//! DescribeConfigs for topics and for the broker, from the one table of topic configs
//! (`log::config::TOPIC_CONFIGS`), named, typed and sourced as Kafka reports them. A
//! topic's value comes from the topic itself, else the dynamic broker default, else the
//! broker's static settings; with `include_synonyms` each entry lists those layers, most
//! specific first. The BROKER resource shows the broker-wide defaults of every topic config
//! plus the broker's static settings; the default-broker resource (name "") only the dynamic
//! defaults set on it, as Kafka does. The BROKER_LOGGER resource of this broker lists its
//! log levels (`loggers`). With `include_documentation` (v3+) each entry says what it does.
//! Each resource needs DESCRIBE_CONFIGS on what it is about (see `authz::config_resource`).

use std::collections::BTreeMap;

use proto_kafka::messages::describe_configs_request::DescribeConfigsResource;
use proto_kafka::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use proto_kafka::messages::{ApiKey, DescribeConfigsRequest, DescribeConfigsResponse};

use super::{authz, str_bytes, ApiSpec, Broker, Outcome, Request};
use crate::auth::acl::Operation;
use crate::log::config::{Form, Kind, LogConfig, REPLICATION_RATES, TOPIC_CONFIGS, UNTHROTTLED};
use crate::metadata::Catalog;
use crate::metadata::ALL_BROKERS;
use crate::protocol::ErrorCode;

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::DescribeConfigs, 1, 4);

pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;
pub const RESOURCE_BROKER_LOGGER: i8 = 8;

/// Kafka's ConfigSource values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Topic = 1,
    DynamicBroker = 2,
    DynamicDefaultBroker = 3,
    StaticBroker = 4,
    Default = 5,
    BrokerLogger = 6,
}

pub fn entry(name: &str, value: String, source: Source, kind: Kind) -> DescribeConfigsResourceResult {
    let mut e = DescribeConfigsResourceResult::default();
    e.name = str_bytes(name);
    e.value = Some(str_bytes(value));
    e.config_source = source as i8;
    e.config_type = kind as i8;
    e.documentation = None; // Kafka's null unless include_documentation asks (`documentation`)
    e
}

/// What the broker's read-only settings on the BROKER resource are.
const STATIC_DOCS: &[(&str, &str)] = &[
    ("auto.create.topics.enable", "Whether a Metadata or Produce request naming a missing topic creates it."),
    ("broker.id", "This broker's id in the cluster (node_id)."),
    ("connections.max.idle.ms", "A connection idle this long is closed."),
    ("default.replication.factor", "Replicas of a topic created without a replication factor."),
    ("log.dirs", "The directory the broker keeps its data in (data_dir)."),
    ("max.connections", "The most connections the broker keeps open; more are refused."),
    ("max.connections.per.ip", "The most connections from one address."),
    ("max.connections.per.ip.overrides", "Exceptions to max.connections.per.ip, as address:count pairs."),
    ("node.id", "This broker's id in the cluster (node_id)."),
    ("num.partitions", "Partitions of a topic created without a count."),
    ("offsets.topic.replication.factor", "Replicas of __consumer_offsets: as many as the brokers, at most 3."),
    ("socket.request.max.bytes", "The largest request the broker reads; a larger one closes its connection."),
];

/// What config `name` of a resource type does, for `include_documentation`.
fn documentation(resource_type: i8, name: &str) -> &'static str {
    let row = |form| crate::log::config::lookup(form, name).ok().map(|r| r.doc);
    let found = match resource_type {
        RESOURCE_TOPIC => row(Form::Topic),
        RESOURCE_BROKER => row(Form::Broker)
            .or_else(|| STATIC_DOCS.iter().chain(&REPLICATION_RATES).find(|(n, _)| *n == name).map(|d| d.1)),
        RESOURCE_BROKER_LOGGER => Some(
            "The level this logger logs at: ALL, TRACE, DEBUG, INFO, WARN, ERROR, FATAL or OFF; one without a level \
             of its own logs at that of the nearest logger above it.",
        ),
        _ => None,
    };
    found.unwrap_or("")
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
    /// What the static layer holds with no setting made: a value that differs was set in
    /// the broker's config file, flags or environment.
    pub builtin: LogConfig,
    pub broker_defaults: BTreeMap<String, String>,
    pub broker_configs: BTreeMap<String, String>,
}

impl Layers {
    pub fn of(broker: &impl Broker, catalog: &Catalog) -> Layers {
        Layers {
            static_config: *broker.log_config(),
            builtin: LogConfig::from_config(&crate::config::Config::default()),
            broker_defaults: catalog.broker_defaults.clone(),
            broker_configs: catalog.broker_configs.clone(),
        }
    }

    /// Each layer's value of one broker-named config, most specific first (for a topic-only
    /// config, its built-in default).
    fn broker_values(&self, row: &crate::log::config::TopicConfig) -> Vec<(String, Source)> {
        let name = row.broker_name;
        if !row.has_broker_default() {
            return vec![((row.show)(&self.builtin), Source::Default)];
        }
        let mut out = Vec::new();
        if let Some(v) = self.broker_configs.get(name) {
            out.push((v.clone(), Source::DynamicBroker));
        }
        if let Some(v) = self.broker_defaults.get(name) {
            out.push((v.clone(), Source::DynamicDefaultBroker));
        }
        // Kafka's STATIC_BROKER_CONFIG for a value the broker was started with, over the
        // default it replaces.
        let (set, builtin) = ((row.show)(&self.static_config), (row.show)(&self.builtin));
        if set != builtin {
            out.push((set, Source::StaticBroker));
        }
        out.push((builtin, Source::Default));
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
            if !row.has_broker_default() {
                // No broker synonym, and as in Kafka no default one either.
                values.retain(|(_, _, s)| *s == Source::Topic);
            }
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
        .filter(|row| row.has_broker_default())
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
        ("default.replication.factor", c.default_replication_factor.to_string(), Kind::Int),
        ("offsets.topic.replication.factor", offsets_replication(broker).to_string(), Kind::Int),
    ];
    v.extend(replication_rates(broker, synonyms));
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

/// The replicas `__consumer_offsets` has, or gets when first used: as many as the cluster's
/// brokers, at most 3 (one for a broker alone).
fn offsets_replication(broker: &impl Broker) -> usize {
    let catalog = broker.catalog();
    match catalog.topic(crate::group::offsets::TOPIC) {
        Some(t) => t.replicas.first().map_or(1, Vec::len),
        None => broker.config().cluster().ok().flatten().map_or(1, |c| c.members().len().clamp(1, 3)),
    }
}

/// This broker's replication throttle rates: its own, the cluster-wide ones, Kafka's default.
fn replication_rates(broker: &impl Broker, synonyms: bool) -> Vec<DescribeConfigsResourceResult> {
    let catalog = broker.catalog();
    let node = broker.config().node_id;
    REPLICATION_RATES
        .iter()
        .map(|(name, _)| {
            let set = |n: i32, source| catalog.replication_rates.get(&n)?.get(*name).map(|r| (r.to_string(), source));
            let mut values: Vec<(String, Source)> =
                [set(node, Source::DynamicBroker), set(ALL_BROKERS, Source::DynamicDefaultBroker)]
                    .into_iter()
                    .flatten()
                    .collect();
            values.push((UNTHROTTLED.to_string(), Source::Default));
            let mut e = entry(name, values[0].0.clone(), values[0].1, Kind::Long);
            if synonyms {
                e.synonyms = values.into_iter().map(|(v, s)| synonym(name, v, s)).collect();
            }
            e
        })
        .collect()
}

/// The dynamic defaults set on the default-broker resource (name "").
fn default_broker_configs(
    layers: &Layers,
    rates: Option<&BTreeMap<String, u64>>,
    synonyms: bool,
) -> Vec<DescribeConfigsResourceResult> {
    let rates = rates.into_iter().flatten().map(|(name, rate)| {
        let mut e = entry(name, rate.to_string(), Source::DynamicDefaultBroker, Kind::Long);
        if synonyms {
            e.synonyms = vec![synonym(name, rate.to_string(), Source::DynamicDefaultBroker)];
        }
        e
    });
    TOPIC_CONFIGS
        .iter()
        .filter(|row| row.has_broker_default())
        .filter_map(|row| {
            let v = layers.broker_defaults.get(row.broker_name)?;
            let mut e = entry(row.broker_name, v.clone(), Source::DynamicDefaultBroker, row.kind);
            if synonyms {
                e.synonyms = vec![synonym(row.broker_name, v.clone(), Source::DynamicDefaultBroker)];
            }
            Some(e)
        })
        .chain(rates)
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
            // A name no topic can have, as Kafka answers it.
            None if crate::metadata::check_topic_name(res.resource_name.as_str()).is_err() => Err((
                ErrorCode::InvalidTopicException,
                format!("{:?} is not a valid topic name", res.resource_name.as_str()),
            )),
            None => Err((
                ErrorCode::UnknownTopicOrPartition,
                format!("topic {} does not exist", res.resource_name.as_str()),
            )),
        },
        RESOURCE_BROKER if res.resource_name.is_empty() => {
            Ok(default_broker_configs(&layers, catalog.replication_rates.get(&ALL_BROKERS), synonyms))
        }
        RESOURCE_BROKER if res.resource_name.as_str() == broker.config().node_id.to_string() => {
            Ok(broker_configs(broker, &layers, synonyms))
        }
        RESOURCE_BROKER => Err((ErrorCode::InvalidRequest, format!("unknown broker {}", res.resource_name.as_str()))),
        RESOURCE_BROKER_LOGGER if res.resource_name.as_str() == broker.config().node_id.to_string() => Ok(broker
            .loggers()
            .levels()
            .into_iter()
            .map(|(name, level)| entry(&name, level, Source::BrokerLogger, Kind::String))
            .collect()),
        RESOURCE_BROKER_LOGGER => Err((
            ErrorCode::InvalidRequest,
            format!(
                "this is broker {}, not {}: ask that broker for its loggers",
                broker.config().node_id,
                res.resource_name.as_str()
            ),
        )),
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
                // No keys, or an empty list (Kafka's rule): every config.
                if let Some(keys) = res.configuration_keys.as_ref().filter(|k| !k.is_empty()) {
                    c.retain(|e| keys.iter().any(|k| k.as_str() == e.name.as_str()));
                }
                if r.include_documentation {
                    for e in &mut c {
                        e.documentation = Some(str_bytes(documentation(res.resource_type, e.name.as_str())));
                    }
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

#[cfg(test)]
mod tests {
    use proto_kafka::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
    use proto_kafka::messages::{IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse};

    use super::*;
    use crate::api::fake::Fake;
    use crate::auth::acl::{ResourceType, CLUSTER_NAME};

    fn resource(resource_type: i8, name: &str, keys: Option<&[&str]>) -> DescribeConfigsResource {
        let mut r = DescribeConfigsResource::default();
        r.resource_type = resource_type;
        r.resource_name = str_bytes(name);
        r.configuration_keys = keys.map(|k| k.iter().map(|k| str_bytes(*k)).collect());
        r
    }

    fn request(resources: Vec<DescribeConfigsResource>, synonyms: bool) -> DescribeConfigsRequest {
        let mut r = DescribeConfigsRequest::default();
        r.resources = resources;
        r.include_synonyms = synonyms;
        r
    }

    fn describe(b: &Fake, resources: Vec<DescribeConfigsResource>, synonyms: bool) -> DescribeConfigsResponse {
        b.call(ApiKey::DescribeConfigs, 4, &request(resources, synonyms))
    }

    fn find<'a>(r: &'a DescribeConfigsResult, name: &str) -> &'a DescribeConfigsResourceResult {
        r.configs.iter().find(|c| c.name.as_str() == name).unwrap_or_else(|| panic!("{name} listed"))
    }

    /// Sets `name` = `value` on a resource with IncrementalAlterConfigs.
    fn set(b: &Fake, resource_type: i8, resource_name: &str, name: &str, value: &str) {
        let mut c = AlterableConfig::default();
        c.name = str_bytes(name);
        c.value = Some(str_bytes(value));
        let mut res = AlterConfigsResource::default();
        res.resource_type = resource_type;
        res.resource_name = str_bytes(resource_name);
        res.configs.push(c);
        let mut req = IncrementalAlterConfigsRequest::default();
        req.resources.push(res);
        let resp: IncrementalAlterConfigsResponse = b.call(ApiKey::IncrementalAlterConfigs, 1, &req);
        assert_eq!(resp.responses[0].error_code, 0, "{:?}", resp.responses[0].error_message);
    }

    #[test]
    fn a_topics_own_value_is_sourced_from_the_topic_and_the_others_from_the_defaults() {
        let b = Fake::new();
        b.topic("t", 1);
        set(&b, RESOURCE_TOPIC, "t", "retention.ms", "60000");
        let resp = describe(&b, vec![resource(RESOURCE_TOPIC, "t", None)], false);
        let r = &resp.results[0];
        assert_eq!((r.error_code, r.error_message.as_ref()), (0, None));
        assert_eq!(r.configs.len(), TOPIC_CONFIGS.len(), "every topic config is listed");
        let retention = find(r, "retention.ms");
        assert_eq!(retention.value.as_deref(), Some("60000"));
        assert_eq!((retention.config_source, retention.config_type), (Source::Topic as i8, Kind::Long as i8));
        assert!(retention.synonyms.is_empty(), "no synonyms unless asked");
        let policy = find(r, "cleanup.policy");
        assert_eq!((policy.value.as_deref(), policy.config_source), (Some("delete"), Source::Default as i8));
    }

    #[test]
    fn a_value_the_broker_was_started_with_is_a_static_broker_config_over_the_default() {
        let b = Fake::with(|c| c.segment_bytes = 1 << 21);
        b.topic("t", 1);
        let default = LogConfig::from_config(&crate::config::Config::default()).segment_bytes.to_string();
        let resp = describe(&b, vec![resource(RESOURCE_TOPIC, "t", Some(&["segment.bytes", "retention.ms"]))], true);
        let r = &resp.results[0];
        let e = find(r, "segment.bytes");
        assert_eq!((e.value.as_deref(), e.config_source), (Some("2097152"), Source::StaticBroker as i8));
        let layers: Vec<(Option<&str>, i8)> = e.synonyms.iter().map(|s| (s.value.as_deref(), s.source)).collect();
        assert_eq!(
            layers,
            vec![(Some("2097152"), Source::StaticBroker as i8), (Some(&*default), Source::Default as i8)]
        );
        assert_eq!(find(r, "retention.ms").config_source, Source::Default as i8, "a setting left alone");
    }

    #[test]
    fn synonyms_list_each_layer_most_specific_first() {
        let b = Fake::new();
        b.topic("t", 1);
        set(&b, RESOURCE_BROKER, "", "log.retention.ms", "120000");
        let default = (b.log_config().retention_ms).to_string();
        let resp = describe(&b, vec![resource(RESOURCE_TOPIC, "t", Some(&["retention.ms"]))], true);
        let r = &resp.results[0];
        assert_eq!(r.configs.len(), 1, "only the key asked for");
        let e = &r.configs[0];
        assert_eq!((e.value.as_deref(), e.config_source), (Some("120000"), Source::DynamicDefaultBroker as i8));
        let layers: Vec<(&str, Option<&str>, i8)> =
            e.synonyms.iter().map(|s| (s.name.as_str(), s.value.as_deref(), s.source)).collect();
        assert_eq!(
            layers,
            vec![
                ("log.retention.ms", Some("120000"), Source::DynamicDefaultBroker as i8),
                ("log.retention.ms", Some(default.as_str()), Source::Default as i8),
            ]
        );
        set(&b, RESOURCE_TOPIC, "t", "retention.ms", "5000");
        let resp = describe(&b, vec![resource(RESOURCE_TOPIC, "t", Some(&["retention.ms"]))], true);
        let sources: Vec<i8> = resp.results[0].configs[0].synonyms.iter().map(|s| s.source).collect();
        assert_eq!(sources, vec![Source::Topic as i8, Source::DynamicDefaultBroker as i8, Source::Default as i8]);
    }

    #[test]
    fn an_empty_key_list_means_every_config_as_in_kafka() {
        let b = Fake::new();
        b.topic("t", 1);
        let resp = describe(&b, vec![resource(RESOURCE_TOPIC, "t", Some(&[]))], false);
        assert_eq!(resp.results[0].configs.len(), TOPIC_CONFIGS.len());
    }

    #[test]
    fn the_broker_shows_its_static_settings_and_the_default_resource_only_dynamic_defaults() {
        let b = Fake::new();
        let id = b.config().node_id.to_string();
        let resp = describe(&b, vec![resource(RESOURCE_BROKER, &id, None), resource(RESOURCE_BROKER, "", None)], false);
        let broker = &resp.results[0];
        assert_eq!(broker.error_code, 0);
        let broker_id = find(broker, "broker.id");
        assert_eq!(broker_id.value.as_deref(), Some(id.as_str()));
        assert!(broker_id.read_only);
        assert_eq!(broker_id.config_source, Source::StaticBroker as i8);
        assert!(!find(broker, "log.retention.ms").read_only, "topic defaults are dynamic");
        assert!(resp.results[1].configs.is_empty(), "no dynamic default set yet");
        for name in ["default.replication.factor", "offsets.topic.replication.factor"] {
            assert_eq!(find(broker, name).value.as_deref(), Some("1"), "{name}: one copy on a broker alone");
        }

        set(&b, RESOURCE_BROKER, "", "log.retention.ms", "120000");
        let resp = describe(&b, vec![resource(RESOURCE_BROKER, &id, None), resource(RESOURCE_BROKER, "", None)], false);
        let e = find(&resp.results[0], "log.retention.ms");
        assert_eq!((e.value.as_deref(), e.config_source), (Some("120000"), Source::DynamicDefaultBroker as i8));
        let defaults: Vec<(&str, Option<&str>)> =
            resp.results[1].configs.iter().map(|c| (c.name.as_str(), c.value.as_deref())).collect();
        assert_eq!(defaults, vec![("log.retention.ms", Some("120000"))]);
    }

    #[test]
    fn replication_rates_show_this_brokers_own_over_the_cluster_wide_over_kafkas_default() {
        let b = Fake::new();
        let id = b.config().node_id.to_string();
        let shown = |b: &Fake, name: &str| {
            let resp =
                describe(b, vec![resource(RESOURCE_BROKER, &id, None), resource(RESOURCE_BROKER, "", None)], true);
            let e = find(&resp.results[0], name).clone();
            let defaults: Vec<String> = resp.results[1].configs.iter().map(|c| c.name.to_string()).collect();
            (e.value.unwrap().to_string(), e.config_source, e.synonyms.len(), defaults)
        };
        let rate = "leader.replication.throttled.rate";
        assert_eq!(shown(&b, rate), (i64::MAX.to_string(), Source::Default as i8, 1, vec![]));
        set(&b, RESOURCE_BROKER, "", rate, "2000");
        assert_eq!(shown(&b, rate), ("2000".into(), Source::DynamicDefaultBroker as i8, 2, vec![rate.to_string()]));
        set(&b, RESOURCE_BROKER, &id, rate, "1000");
        assert_eq!(shown(&b, rate), ("1000".into(), Source::DynamicBroker as i8, 3, vec![rate.to_string()]));
        let follower = shown(&b, "follower.replication.throttled.rate");
        assert_eq!((follower.0, follower.1), (i64::MAX.to_string(), Source::Default as i8), "the other rate is apart");

        // A topic's throttled-replica lists have no broker synonym, and no default one.
        b.topic("t", 1);
        let list = "leader.replication.throttled.replicas";
        let topic = || describe(&b, vec![resource(RESOURCE_TOPIC, "t", None)], true);
        let e = find(&topic().results[0], list).clone();
        assert_eq!((e.value.as_deref(), e.config_source, e.synonyms.len()), (Some(""), Source::Default as i8, 0));
        set(&b, RESOURCE_TOPIC, "t", list, "0:0");
        let e = find(&topic().results[0], list).clone();
        assert_eq!((e.value.as_deref(), e.config_source, e.synonyms.len()), (Some("0:0"), Source::Topic as i8, 1));
    }

    #[test]
    fn the_replication_factors_shown_are_those_new_topics_get() {
        let b = Fake::with(|c| c.default_replication_factor = 3);
        let id = b.config().node_id.to_string();
        let resp = describe(&b, vec![resource(RESOURCE_BROKER, &id, None)], false);
        assert_eq!(find(&resp.results[0], "default.replication.factor").value.as_deref(), Some("3"));
    }

    #[test]
    fn documentation_is_given_when_asked_for_every_entry() {
        let b = Fake::new();
        b.topic("t", 1);
        let id = b.config().node_id.to_string();
        let resources = || {
            vec![
                resource(RESOURCE_TOPIC, "t", None),
                resource(RESOURCE_BROKER, &id, None),
                resource(RESOURCE_BROKER_LOGGER, &id, None),
            ]
        };
        let plain = describe(&b, resources(), false);
        assert!(plain.results.iter().flat_map(|r| &r.configs).all(|e| e.documentation.is_none()), "null unless asked");
        let mut req = request(resources(), false);
        req.include_documentation = true;
        let documented: DescribeConfigsResponse = b.call(ApiKey::DescribeConfigs, 4, &req);
        for r in &documented.results {
            assert_eq!(r.error_code, 0);
            for e in &r.configs {
                let doc = e.documentation.as_deref().unwrap_or_default();
                assert!(
                    doc.len() > 20 && doc.ends_with('.'),
                    "{} of resource type {}: {doc:?}",
                    e.name.as_str(),
                    r.resource_type
                );
            }
        }
        let doc =
            |r: usize, name: &str| find(&documented.results[r], name).documentation.as_deref().map(str::to_string);
        assert_eq!(
            doc(0, "retention.ms"),
            doc(1, "log.retention.ms"),
            "a topic config and its broker default say the same"
        );
    }

    #[test]
    fn this_brokers_loggers_are_listed_with_their_levels() {
        let b = Fake::new();
        let id = b.config().node_id.to_string();
        b.loggers().change(&[crate::loggers::Change::Set("ringbroker::log".into(), "trace".into())], false).unwrap();
        let other = (b.config().node_id + 1).to_string();
        let resources =
            vec![resource(RESOURCE_BROKER_LOGGER, &id, None), resource(RESOURCE_BROKER_LOGGER, &other, None)];
        let resp = describe(&b, resources, false);
        let levels: Vec<(&str, Option<&str>, i8)> =
            resp.results[0].configs.iter().map(|c| (c.name.as_str(), c.value.as_deref(), c.config_source)).collect();
        let logger = Source::BrokerLogger as i8;
        assert_eq!(levels.len(), b.loggers().levels().len());
        assert_eq!(levels[0], ("root", Some("INFO"), logger));
        assert!(levels.contains(&("ringbroker.log", Some("TRACE"), logger)), "{levels:?}");
        assert!(levels.contains(&("ringbroker.cluster", Some("INFO"), logger)), "{levels:?}");
        assert_eq!(resp.results[1].error_code, ErrorCode::InvalidRequest.code(), "another broker's loggers");
    }

    #[test]
    fn unknown_topics_other_brokers_and_other_resource_types_fail_alone() {
        let b = Fake::new();
        b.topic("t", 1);
        let other = (b.config().node_id + 1).to_string();
        let resources = vec![
            resource(RESOURCE_TOPIC, "never", None),
            resource(RESOURCE_BROKER, &other, None),
            resource(RESOURCE_TOPIC, "t", Some(&["segment.bytes"])),
            resource(16, "metrics", None),
            resource(RESOURCE_TOPIC, "no/such", None),
        ];
        let resp = describe(&b, resources, false);
        let codes: Vec<i16> = resp.results.iter().map(|r| r.error_code).collect();
        let invalid = ErrorCode::InvalidRequest.code();
        let bad_name = ErrorCode::InvalidTopicException.code();
        assert_eq!(codes, vec![ErrorCode::UnknownTopicOrPartition.code(), invalid, 0, invalid, bad_name]);
        assert!(resp.results[0].configs.is_empty());
        assert_eq!(resp.results[2].configs.len(), 1);
        assert_eq!(resp.results[1].resource_name.as_str(), other, "each result names its resource");
    }

    #[test]
    fn without_describe_configs_topics_and_the_broker_are_refused_before_existence() {
        let b = Fake::with(|c| c.authorizer_enabled = true);
        b.topic("t", 1);
        b.topic("mine", 1);
        b.allow("User:eve", ResourceType::Topic, "mine", Operation::DescribeConfigs);
        let id = b.config().node_id.to_string();
        let resources = vec![
            resource(RESOURCE_TOPIC, "t", None),
            resource(RESOURCE_TOPIC, "never", None),
            resource(RESOURCE_BROKER, &id, None),
            resource(RESOURCE_TOPIC, "mine", None),
        ];
        let resp: DescribeConfigsResponse =
            b.call_as(Some("User:eve"), ApiKey::DescribeConfigs, 4, &request(resources, false));
        let codes: Vec<i16> = resp.results.iter().map(|r| r.error_code).collect();
        let topic = ErrorCode::TopicAuthorizationFailed.code();
        assert_eq!(codes, vec![topic, topic, ErrorCode::ClusterAuthorizationFailed.code(), 0]);
        assert!(resp.results[..3].iter().all(|r| r.configs.is_empty()));
        assert_eq!(resp.results[3].configs.len(), TOPIC_CONFIGS.len());

        b.allow("User:eve", ResourceType::Cluster, CLUSTER_NAME, Operation::DescribeConfigs);
        let resp: DescribeConfigsResponse = b.call_as(
            Some("User:eve"),
            ApiKey::DescribeConfigs,
            4,
            &request(vec![resource(RESOURCE_BROKER, &id, None)], false),
        );
        assert_eq!(resp.results[0].error_code, 0);
    }
}
