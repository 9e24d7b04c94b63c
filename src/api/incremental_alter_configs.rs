//! IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT (the last two for list configs
//! such as `cleanup.policy`) of topic configs, and of the dynamic broker configs (the
//! broker-wide defaults of topic configs, `log.retention.ms` and the like) on the BROKER
//! resource, cluster-wide (name "") or for this broker (its node id). The controller checks
//! every change against the table of topic configs, persists it and answers once every
//! shard uses it. The BROKER_LOGGER resource of this broker (its node id) changes its log
//! levels here, not through the controller: SET and DELETE, each resource's changes all or
//! none, lasting until the broker stops, as in Kafka (`loggers`). A resource named twice in one request is INVALID_REQUEST for each entry
//! (Kafka's first check), as is a SET, APPEND or SUBTRACT without a value. Each resource needs
//! ALTER_CONFIGS on what it is about (see `authz::config_resource`), checked before the
//! changes.

use proto_kafka::messages::incremental_alter_configs_request::AlterConfigsResource;
use proto_kafka::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use proto_kafka::messages::{ApiKey, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse};

use super::alter_configs::Refusal;
use super::describe_configs::RESOURCE_BROKER_LOGGER;
use super::{alter_configs, str_bytes, ApiSpec, Broker, Outcome, Request};
use crate::controller::{ConfigChange, ConfigOp};
use crate::loggers::{Change, Refused};
use crate::protocol::ErrorCode;

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::IncrementalAlterConfigs, 0, 1);

// Kafka's AlterConfigOp.OpType values.
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;
const OP_APPEND: i8 = 2;
const OP_SUBTRACT: i8 = 3;

/// The change a resource asks for, or why it cannot be made.
fn change_of(broker: &impl Broker, r: &AlterConfigsResource) -> Result<ConfigChange, (ErrorCode, String)> {
    let target = alter_configs::target_of(broker, r.resource_type, &r.resource_name)?;
    let mut ops: Vec<(String, ConfigOp)> = Vec::with_capacity(r.configs.len());
    for c in &r.configs {
        let name = c.name.to_string();
        if ops.iter().any(|(n, _)| *n == name) {
            return Err((ErrorCode::InvalidRequest, format!("config {name} appears twice")));
        }
        let value = c.value.as_ref().map(|v| v.to_string());
        let op = match (c.config_operation, value) {
            (OP_DELETE, _) => ConfigOp::Delete,
            (OP_SET | OP_APPEND | OP_SUBTRACT, None) => {
                return Err((ErrorCode::InvalidRequest, format!("Null value not supported for : {name}")))
            }
            (OP_SET, Some(v)) => ConfigOp::Set(v),
            (OP_APPEND, Some(v)) => ConfigOp::Append(v),
            (OP_SUBTRACT, Some(v)) => ConfigOp::Subtract(v),
            (op, _) => {
                return Err((
                    ErrorCode::InvalidRequest,
                    format!("operation {op} on {name}: SET (0), DELETE (1), APPEND (2) and SUBTRACT (3) exist"),
                ))
            }
        };
        ops.push((name, op));
    }
    Ok(ConfigChange { target, ops, replace: false })
}

/// Changes this broker's log levels as `r` asks (BROKER_LOGGER).
fn change_loggers(broker: &impl Broker, r: &AlterConfigsResource, validate_only: bool) -> Result<(), Refusal> {
    let id = broker.config().node_id.to_string();
    if r.resource_name.as_str() != id {
        let name = r.resource_name.as_str();
        return Err((ErrorCode::InvalidRequest, format!("this is broker {id}, not {name}: ask that broker")));
    }
    let mut changes = Vec::with_capacity(r.configs.len());
    for c in &r.configs {
        let name = c.name.to_string();
        changes.push(match (c.config_operation, c.value.as_ref()) {
            (OP_SET, Some(v)) => Change::Set(name, v.to_string()),
            (OP_SET, None) => {
                return Err((ErrorCode::InvalidRequest, format!("Null value not supported for : {name}")))
            }
            (OP_DELETE, _) => Change::Remove(name),
            (op, _) => {
                let why = format!("operation {op} on logger {name}: only SET (0) and DELETE (1) change a logger");
                return Err((ErrorCode::InvalidRequest, why));
            }
        });
    }
    broker.loggers().change(&changes, validate_only).map_err(|e| {
        let code = match e {
            Refused::RootRemoved => ErrorCode::InvalidRequest,
            Refused::Level(_) | Refused::Name(_) | Refused::Apply(_) => ErrorCode::InvalidConfig,
        };
        (code, e.to_string())
    })
}

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: IncrementalAlterConfigsRequest = req.decode()?;
    let named = || r.resources.iter().map(|o| (o.resource_type, o.resource_name.as_str()));
    let checked: Vec<Result<(), Refusal>> = r
        .resources
        .iter()
        .map(|res| {
            alter_configs::once(res.resource_type, &res.resource_name, named())
                .and_then(|()| alter_configs::authorized(broker, &req, res.resource_type, &res.resource_name))
        })
        .collect();
    let is_logger = |res: &&AlterConfigsResource| res.resource_type == RESOURCE_BROKER_LOGGER;
    let asks = r
        .resources
        .iter()
        .zip(&checked)
        .filter(|(res, _)| !is_logger(res))
        .map(|(res, check)| check.clone().and_then(|()| change_of(broker, res)));
    let mut stored = alter_configs::apply(broker, asks.collect(), r.validate_only).await.into_iter();
    let outcomes = r.resources.iter().zip(checked).map(|(res, check)| match is_logger(&res) {
        true => check.and_then(|()| change_loggers(broker, res, r.validate_only)),
        false => stored.next().unwrap_or_else(|| Err((ErrorCode::UnknownServerError, "no answer".into()))),
    });
    let outcomes: Vec<_> = outcomes.collect();
    let mut resp = IncrementalAlterConfigsResponse::default();
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

    use proto_kafka::messages::incremental_alter_configs_request::AlterableConfig;

    use super::*;
    use crate::api::describe_configs::{RESOURCE_BROKER, RESOURCE_TOPIC};
    use crate::api::fake::Fake;
    use crate::auth::acl::{Operation, ResourceType, CLUSTER_NAME};

    fn op(name: &str, operation: i8, value: Option<&str>) -> AlterableConfig {
        let mut c = AlterableConfig::default();
        c.name = str_bytes(name);
        c.config_operation = operation;
        c.value = value.map(str_bytes);
        c
    }

    fn resource(resource_type: i8, name: &str, configs: Vec<AlterableConfig>) -> AlterConfigsResource {
        let mut r = AlterConfigsResource::default();
        r.resource_type = resource_type;
        r.resource_name = str_bytes(name);
        r.configs = configs;
        r
    }

    fn alter_as(
        b: &Fake,
        principal: Option<&str>,
        resources: Vec<AlterConfigsResource>,
        validate_only: bool,
    ) -> Vec<i16> {
        let mut req = IncrementalAlterConfigsRequest::default();
        req.resources = resources;
        req.validate_only = validate_only;
        let resp: IncrementalAlterConfigsResponse = b.call_as(principal, ApiKey::IncrementalAlterConfigs, 1, &req);
        assert_eq!(resp.responses.len(), req.resources.len());
        for (asked, answered) in req.resources.iter().zip(&resp.responses) {
            assert_eq!((asked.resource_type, &asked.resource_name), (answered.resource_type, &answered.resource_name));
            assert_eq!(answered.error_code != 0, answered.error_message.is_some(), "a message exactly on errors");
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
    fn set_and_delete_change_only_the_named_topic_configs() {
        let b = Fake::new();
        b.topic("t", 1);
        let set = vec![op("retention.ms", OP_SET, Some("60000")), op("segment.ms", OP_SET, Some("3600000"))];
        assert_eq!(alter(&b, vec![resource(RESOURCE_TOPIC, "t", set)]), vec![0]);
        assert_eq!(b.topic_configs("t"), map(&[("retention.ms", "60000"), ("segment.ms", "3600000")]));
        let delete = vec![op("segment.ms", OP_DELETE, None), op("max.message.bytes", OP_SET, Some("2048"))];
        assert_eq!(alter(&b, vec![resource(RESOURCE_TOPIC, "t", delete)]), vec![0]);
        assert_eq!(b.topic_configs("t"), map(&[("max.message.bytes", "2048"), ("retention.ms", "60000")]));
    }

    #[test]
    fn append_and_subtract_edit_a_list_config_from_its_default() {
        let b = Fake::new();
        b.topic("t", 1);
        let append = vec![op("cleanup.policy", OP_APPEND, Some("compact"))];
        assert_eq!(alter(&b, vec![resource(RESOURCE_TOPIC, "t", append)]), vec![0]);
        assert_eq!(b.topic_configs("t"), map(&[("cleanup.policy", "delete,compact")]));
        let subtract = vec![op("cleanup.policy", OP_SUBTRACT, Some("delete"))];
        assert_eq!(alter(&b, vec![resource(RESOURCE_TOPIC, "t", subtract)]), vec![0]);
        assert_eq!(b.topic_configs("t"), map(&[("cleanup.policy", "compact")]));
        let not_a_list = vec![op("retention.ms", OP_APPEND, Some("5"))];
        assert_eq!(alter(&b, vec![resource(RESOURCE_TOPIC, "t", not_a_list)]), vec![ErrorCode::InvalidConfig.code()]);
    }

    #[test]
    fn bad_changes_fail_their_resource_alone_and_change_nothing() {
        let b = Fake::new();
        for t in ["t1", "t2", "t3", "t4", "ok"] {
            b.topic(t, 1);
        }
        let other = (b.config().node_id + 1).to_string();
        let resources = vec![
            resource(RESOURCE_TOPIC, "never", vec![op("retention.ms", OP_SET, Some("1"))]),
            resource(
                RESOURCE_TOPIC,
                "t1",
                vec![op("retention.ms", OP_SET, Some("1")), op("no.such", OP_SET, Some("1"))],
            ),
            resource(RESOURCE_TOPIC, "t2", vec![op("retention.ms", OP_SET, Some("soon"))]),
            resource(RESOURCE_TOPIC, "t3", vec![op("retention.ms", 7, Some("1"))]),
            resource(
                RESOURCE_TOPIC,
                "t4",
                vec![op("retention.ms", OP_SET, Some("1")), op("retention.ms", OP_DELETE, None)],
            ),
            resource(RESOURCE_BROKER, &other, vec![op("log.retention.ms", OP_SET, Some("1"))]),
            resource(RESOURCE_BROKER, "", vec![op("num.partitions", OP_SET, Some("3"))]),
            resource(RESOURCE_TOPIC, "ok", vec![op("retention.ms", OP_SET, Some("1000"))]),
        ];
        let (invalid_config, invalid_request) = (ErrorCode::InvalidConfig.code(), ErrorCode::InvalidRequest.code());
        assert_eq!(
            alter(&b, resources),
            vec![
                ErrorCode::UnknownTopicOrPartition.code(),
                invalid_config,
                invalid_config,
                invalid_request,
                invalid_request,
                invalid_request,
                invalid_request,
                0,
            ]
        );
        for t in ["t1", "t2", "t3", "t4"] {
            assert!(b.topic_configs(t).is_empty(), "a resource's changes apply all or none");
        }
        assert_eq!(b.topic_configs("ok"), map(&[("retention.ms", "1000")]));
        assert!(b.catalog().broker_defaults.is_empty());
    }

    #[test]
    fn a_set_without_a_value_is_invalid_request_as_in_kafka() {
        let b = Fake::new();
        b.topic("t", 1);
        let asks = vec![resource(RESOURCE_TOPIC, "t", vec![op("retention.ms", OP_SET, None)])];
        assert_eq!(alter(&b, asks), vec![ErrorCode::InvalidRequest.code()]);
        assert!(b.topic_configs("t").is_empty());
    }

    #[test]
    fn a_resource_named_twice_is_invalid_request_for_both() {
        let b = Fake::new();
        b.topic("t", 1);
        let asks = vec![
            resource(RESOURCE_TOPIC, "t", vec![op("retention.ms", OP_SET, Some("1000"))]),
            resource(RESOURCE_TOPIC, "t", vec![op("segment.ms", OP_SET, Some("3600000"))]),
        ];
        let invalid = ErrorCode::InvalidRequest.code();
        assert_eq!(alter(&b, asks), vec![invalid, invalid]);
        assert!(b.topic_configs("t").is_empty());
    }

    #[test]
    fn this_brokers_loggers_change_here_alongside_topic_configs() {
        use crate::api::describe_configs::RESOURCE_BROKER_LOGGER;
        let b = Fake::new();
        b.topic("t", 1);
        let id = b.config().node_id.to_string();
        let other = (b.config().node_id + 1).to_string();
        let loggers = |ops| resource(RESOURCE_BROKER_LOGGER, &id, ops);
        let set = vec![op("ringbroker.cluster", OP_SET, Some("DEBUG")), op("root", OP_SET, Some("WARN"))];
        let topic = vec![op("retention.ms", OP_SET, Some("60000"))];
        assert_eq!(alter(&b, vec![resource(RESOURCE_TOPIC, "t", topic), loggers(set)]), vec![0, 0]);
        assert_eq!(b.topic_configs("t"), map(&[("retention.ms", "60000")]));
        let levels = || b.loggers().set_levels();
        let want = vec![("ringbroker.cluster".to_string(), "DEBUG".to_string())];
        assert_eq!(levels(), want);
        assert_eq!(b.loggers().levels()[0], ("root".to_string(), "WARN".to_string()));

        let invalid_config = ErrorCode::InvalidConfig.code();
        let invalid = ErrorCode::InvalidRequest.code();
        for (ops, code) in [
            (vec![op("ringbroker::net", OP_SET, Some("LOUD"))], invalid_config),
            (
                vec![op("ringbroker::net", OP_SET, Some("INFO")), op("no,such=thing", OP_SET, Some("INFO"))],
                invalid_config,
            ),
            (vec![op("root", OP_DELETE, None)], invalid),
            (vec![op("ringbroker::net", OP_APPEND, Some("INFO"))], invalid),
            (vec![op("ringbroker::net", OP_SET, None)], invalid),
        ] {
            assert_eq!(alter(&b, vec![loggers(ops)]), vec![code]);
        }
        let elsewhere = resource(RESOURCE_BROKER_LOGGER, &other, vec![op("root", OP_SET, Some("INFO"))]);
        assert_eq!(alter(&b, vec![elsewhere]), vec![invalid]);
        let checked = vec![op("ringbroker.cluster", OP_DELETE, None)];
        assert_eq!(alter_as(&b, None, vec![loggers(checked.clone())], true), vec![0]);
        assert_eq!(levels(), want, "nothing refused or only validated changed");

        assert_eq!(alter(&b, vec![loggers(checked)]), vec![0]);
        assert_eq!(levels(), vec![], "the logger follows the root again");
    }

    #[test]
    fn broker_configs_go_to_the_cluster_defaults_or_to_this_broker() {
        let b = Fake::new();
        let id = b.config().node_id.to_string();
        let asks = vec![
            resource(RESOURCE_BROKER, "", vec![op("log.retention.ms", OP_SET, Some("120000"))]),
            resource(RESOURCE_BROKER, &id, vec![op("log.segment.bytes", OP_SET, Some("1048576"))]),
        ];
        assert_eq!(alter(&b, asks), vec![0, 0]);
        let catalog = b.catalog();
        assert_eq!(catalog.broker_defaults, map(&[("log.retention.ms", "120000")]));
        assert_eq!(catalog.broker_configs, map(&[("log.segment.bytes", "1048576")]));
    }

    #[test]
    fn validate_only_checks_but_leaves_no_trace() {
        let b = Fake::new();
        b.topic("t", 1);
        let asks = vec![
            resource(RESOURCE_TOPIC, "t", vec![op("retention.ms", OP_SET, Some("1000"))]),
            resource(RESOURCE_TOPIC, "never", vec![op("retention.ms", OP_SET, Some("1000"))]),
            resource(RESOURCE_TOPIC, "no/such", vec![op("retention.ms", OP_SET, Some("1000"))]),
            resource(RESOURCE_TOPIC, "", vec![op("retention.ms", OP_SET, Some("1000"))]),
        ];
        let codes = vec![
            0,
            ErrorCode::UnknownTopicOrPartition.code(),
            ErrorCode::InvalidTopicException.code(),
            ErrorCode::InvalidRequest.code(),
        ];
        assert_eq!(alter_as(&b, None, asks, true), codes);
        assert!(b.topic_configs("t").is_empty());
    }

    #[test]
    fn without_alter_configs_each_resource_is_refused_by_what_it_is_about() {
        let b = Fake::with(|c| c.authorizer_enabled = true);
        b.topic("t", 1);
        b.topic("mine", 1);
        b.allow("User:eve", ResourceType::Topic, "mine", Operation::AlterConfigs);
        let set = || vec![op("retention.ms", OP_SET, Some("1000"))];
        let asks = vec![
            resource(RESOURCE_TOPIC, "t", set()),
            resource(RESOURCE_TOPIC, "never", set()),
            resource(RESOURCE_BROKER, "", vec![op("log.retention.ms", OP_SET, Some("1000"))]),
            resource(RESOURCE_TOPIC, "mine", set()),
        ];
        let topic = ErrorCode::TopicAuthorizationFailed.code();
        assert_eq!(
            alter_as(&b, Some("User:eve"), asks, false),
            vec![topic, topic, ErrorCode::ClusterAuthorizationFailed.code(), 0]
        );
        assert!(b.topic_configs("t").is_empty() && b.catalog().broker_defaults.is_empty());
        assert_eq!(b.topic_configs("mine"), map(&[("retention.ms", "1000")]));

        b.allow("User:eve", ResourceType::Cluster, CLUSTER_NAME, Operation::AlterConfigs);
        let asks = vec![resource(RESOURCE_BROKER, "", vec![op("log.retention.ms", OP_SET, Some("1000"))])];
        assert_eq!(alter_as(&b, Some("User:eve"), asks, false), vec![0]);
    }
}
