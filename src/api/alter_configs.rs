//! AlterConfigs, the legacy (non-incremental) API that confluent-kafka, sarama and older
//! tools call: each resource's dynamic configs become exactly the ones given, every other
//! one going back to its default. Topics and the BROKER resource (cluster-wide defaults
//! under name "", or this broker by its node id), as in IncrementalAlterConfigs, whose
//! helpers live here too: which configs a resource names, the once-per-request check, the
//! ALTER_CONFIGS check, and the trip to the controller. As in Kafka, a resource named twice is
//! INVALID_REQUEST for each entry, and so is a config without a value.

use proto_kafka::messages::alter_configs_response::AlterConfigsResourceResponse;
use proto_kafka::messages::{AlterConfigsRequest, AlterConfigsResponse, ApiKey};

use super::describe_configs::{RESOURCE_BROKER, RESOURCE_TOPIC};
use super::{authz, str_bytes, ApiSpec, Broker, Outcome, Request};
use crate::auth::acl::Operation;
use crate::controller::{ConfigChange, ConfigOp, ConfigTarget};
use crate::protocol::ErrorCode;

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::AlterConfigs, 0, 2);

pub type Refusal = (ErrorCode, String);

/// Whose configs a resource names.
pub fn target_of(broker: &impl Broker, resource_type: i8, name: &str) -> Result<ConfigTarget, Refusal> {
    match resource_type {
        RESOURCE_TOPIC => Ok(ConfigTarget::Topic(name.to_string())),
        RESOURCE_BROKER if name.is_empty() => Ok(ConfigTarget::BrokerDefault),
        RESOURCE_BROKER if name == broker.config().node_id.to_string() => {
            Ok(ConfigTarget::Broker(broker.config().node_id))
        }
        RESOURCE_BROKER => Err((ErrorCode::InvalidRequest, format!("unknown broker {name:?}"))),
        t => Err((ErrorCode::InvalidRequest, format!("resource type {t} has no alterable configs here"))),
    }
}

/// Kafka's first check: a resource appears at most once per request; every entry of one
/// named more often is refused (none of them applies).
pub fn once<'a>(resource_type: i8, name: &str, all: impl IntoIterator<Item = (i8, &'a str)>) -> Result<(), Refusal> {
    match all.into_iter().filter(|&(t, n)| t == resource_type && n == name).count() {
        0 | 1 => Ok(()),
        _ => Err((ErrorCode::InvalidRequest, "Each resource must appear at most once.".into())),
    }
}

/// ALTER_CONFIGS on what the resource is about.
pub fn authorized(broker: &impl Broker, req: &Request, resource_type: i8, name: &str) -> Result<(), Refusal> {
    authz::config_resource(broker, req, Operation::AlterConfigs, resource_type, name)
}

/// Sends the valid changes to the controller; the outcome of every ask, in order.
pub async fn apply(
    broker: &impl Broker,
    asks: Vec<Result<ConfigChange, Refusal>>,
    validate_only: bool,
) -> Vec<Result<(), Refusal>> {
    let valid: Vec<ConfigChange> = asks.iter().filter_map(|a| a.as_ref().ok().cloned()).collect();
    let mut done = broker.alter_configs(valid, validate_only).await.into_iter();
    asks.into_iter()
        .map(|ask| match ask {
            Ok(_) => done.next().unwrap_or_else(|| Err((ErrorCode::UnknownServerError, "no answer".into()))),
            Err(e) => Err(e),
        })
        .collect()
}

fn change_of(
    broker: &impl Broker,
    r: &proto_kafka::messages::alter_configs_request::AlterConfigsResource,
) -> Result<ConfigChange, Refusal> {
    let target = target_of(broker, r.resource_type, &r.resource_name)?;
    let mut ops: Vec<(String, ConfigOp)> = Vec::with_capacity(r.configs.len());
    for c in &r.configs {
        let name = c.name.to_string();
        if ops.iter().any(|(n, _)| *n == name) {
            return Err((ErrorCode::InvalidRequest, format!("config {name} appears twice")));
        }
        let Some(value) = &c.value else {
            return Err((ErrorCode::InvalidRequest, format!("Null value not supported for : {name}")));
        };
        ops.push((name, ConfigOp::Set(value.to_string())));
    }
    Ok(ConfigChange { target, ops, replace: true })
}

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: AlterConfigsRequest = req.decode()?;
    let named = || r.resources.iter().map(|o| (o.resource_type, o.resource_name.as_str()));
    let asks = r.resources.iter().map(|res| {
        once(res.resource_type, &res.resource_name, named())
            .and_then(|()| authorized(broker, &req, res.resource_type, &res.resource_name))
            .and_then(|()| change_of(broker, res))
    });
    let outcomes = apply(broker, asks.collect(), r.validate_only).await;
    let mut resp = AlterConfigsResponse::default();
    for (res, outcome) in r.resources.iter().zip(outcomes) {
        let mut o = AlterConfigsResourceResponse::default();
        o.error_message = None; // Kafka's answer on success
        o.resource_type = res.resource_type;
        o.resource_name = res.resource_name.clone();
        if let Err((code, msg)) = outcome {
            o.error_code = code.code();
            o.error_message = Some(str_bytes(msg));
        }
        resp.responses.push(o);
    }
    req.respond(resp)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proto_kafka::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};

    use super::*;
    use crate::api::fake::Fake;
    use crate::auth::acl::{ResourceType, CLUSTER_NAME};

    fn resource(resource_type: i8, name: &str, configs: &[(&str, Option<&str>)]) -> AlterConfigsResource {
        let mut r = AlterConfigsResource::default();
        r.resource_type = resource_type;
        r.resource_name = str_bytes(name);
        r.configs = configs
            .iter()
            .map(|(n, v)| {
                let mut c = AlterableConfig::default();
                c.name = str_bytes(*n);
                c.value = v.map(str_bytes);
                c
            })
            .collect();
        r
    }

    fn alter_as(
        b: &Fake,
        principal: Option<&str>,
        resources: Vec<AlterConfigsResource>,
        validate_only: bool,
    ) -> Vec<i16> {
        let mut req = AlterConfigsRequest::default();
        req.resources = resources;
        req.validate_only = validate_only;
        let resp: AlterConfigsResponse = b.call_as(principal, ApiKey::AlterConfigs, 2, &req);
        for (asked, answered) in req.resources.iter().zip(&resp.responses) {
            assert_eq!((asked.resource_type, &asked.resource_name), (answered.resource_type, &answered.resource_name));
        }
        resp.responses.iter().map(|r| r.error_code).collect()
    }

    fn alter(b: &Fake, resources: Vec<AlterConfigsResource>) -> Vec<i16> {
        alter_as(b, None, resources, false)
    }

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn the_configs_given_replace_the_topics_dynamic_configs() {
        let b = Fake::new();
        b.topic("t", 1);
        let first = resource(RESOURCE_TOPIC, "t", &[("retention.ms", Some("60000")), ("segment.ms", Some("3600000"))]);
        assert_eq!(alter(&b, vec![first]), vec![0]);
        assert_eq!(b.topic_configs("t"), map(&[("retention.ms", "60000"), ("segment.ms", "3600000")]));
        assert_eq!(alter(&b, vec![resource(RESOURCE_TOPIC, "t", &[("max.message.bytes", Some("2048"))])]), vec![0]);
        assert_eq!(b.topic_configs("t"), map(&[("max.message.bytes", "2048")]), "the others went back to defaults");
        assert_eq!(alter(&b, vec![resource(RESOURCE_TOPIC, "t", &[])]), vec![0]);
        assert!(b.topic_configs("t").is_empty());
    }

    #[test]
    fn the_broker_resource_replaces_the_cluster_defaults_or_this_brokers_configs() {
        let b = Fake::new();
        let id = b.config().node_id.to_string();
        let asks = vec![
            resource(RESOURCE_BROKER, "", &[("log.retention.ms", Some("120000"))]),
            resource(RESOURCE_BROKER, &id, &[("log.segment.bytes", Some("1048576"))]),
        ];
        assert_eq!(alter(&b, asks), vec![0, 0]);
        assert_eq!(b.catalog().broker_defaults, map(&[("log.retention.ms", "120000")]));
        assert_eq!(b.catalog().broker_configs, map(&[("log.segment.bytes", "1048576")]));
        let other = (b.config().node_id + 1).to_string();
        let asks = vec![resource(RESOURCE_BROKER, &other, &[("log.retention.ms", Some("1"))])];
        assert_eq!(alter(&b, asks), vec![ErrorCode::InvalidRequest.code()]);
    }

    #[test]
    fn bad_resources_fail_alone_with_kafkas_codes() {
        let b = Fake::new();
        for t in ["t1", "t2", "t3", "ok"] {
            b.topic(t, 1);
        }
        let asks = vec![
            resource(RESOURCE_TOPIC, "never", &[("retention.ms", Some("1"))]),
            resource(RESOURCE_TOPIC, "t1", &[("retention.ms", Some("1")), ("retention.ms", Some("2"))]),
            resource(RESOURCE_TOPIC, "t2", &[("retention.ms", Some("soon"))]),
            resource(RESOURCE_TOPIC, "t3", &[("retention.ms", None)]),
            resource(RESOURCE_TOPIC, "ok", &[("retention.ms", Some("1000"))]),
        ];
        let invalid_request = ErrorCode::InvalidRequest.code();
        assert_eq!(
            alter(&b, asks),
            vec![
                ErrorCode::UnknownTopicOrPartition.code(),
                invalid_request,
                ErrorCode::InvalidConfig.code(),
                invalid_request, // Kafka: "Null value not supported"
                0,
            ]
        );
        for t in ["t1", "t2", "t3"] {
            assert!(b.topic_configs(t).is_empty());
        }
        assert_eq!(b.topic_configs("ok"), map(&[("retention.ms", "1000")]));
    }

    #[test]
    fn a_resource_named_twice_is_invalid_request_for_both() {
        let b = Fake::new();
        b.topic("t", 1);
        let asks = vec![
            resource(RESOURCE_TOPIC, "t", &[("retention.ms", Some("1000"))]),
            resource(RESOURCE_TOPIC, "t", &[("segment.ms", Some("3600000"))]),
        ];
        let invalid = ErrorCode::InvalidRequest.code();
        assert_eq!(alter(&b, asks), vec![invalid, invalid]);
        assert!(b.topic_configs("t").is_empty());
    }

    #[test]
    fn validate_only_checks_but_leaves_no_trace() {
        let b = Fake::new();
        b.topic("t", 1);
        let asks = vec![resource(RESOURCE_TOPIC, "t", &[("retention.ms", Some("1000"))])];
        assert_eq!(alter_as(&b, None, asks, true), vec![0]);
        assert!(b.topic_configs("t").is_empty());
    }

    #[test]
    fn without_alter_configs_topics_and_the_broker_are_refused() {
        let b = Fake::with(|c| c.authorizer_enabled = true);
        b.topic("t", 1);
        let asks = vec![
            resource(RESOURCE_TOPIC, "t", &[("retention.ms", Some("1000"))]),
            resource(RESOURCE_TOPIC, "never", &[("retention.ms", Some("1000"))]),
            resource(RESOURCE_BROKER, "", &[("log.retention.ms", Some("1000"))]),
        ];
        let topic = ErrorCode::TopicAuthorizationFailed.code();
        assert_eq!(
            alter_as(&b, Some("User:eve"), asks, false),
            vec![topic, topic, ErrorCode::ClusterAuthorizationFailed.code()]
        );
        assert!(b.topic_configs("t").is_empty() && b.catalog().broker_defaults.is_empty());
        b.allow("User:eve", ResourceType::Topic, "t", Operation::AlterConfigs);
        b.allow("User:eve", ResourceType::Cluster, CLUSTER_NAME, Operation::AlterConfigs);
        let asks = vec![
            resource(RESOURCE_TOPIC, "t", &[("retention.ms", Some("1000"))]),
            resource(RESOURCE_BROKER, "", &[("log.retention.ms", Some("1000"))]),
        ];
        assert_eq!(alter_as(&b, Some("User:eve"), asks, false), vec![0, 0]);
    }
}
