//! AlterConfigs, the legacy (non-incremental) API that confluent-kafka, sarama and older
//! tools call: each resource's dynamic configs become exactly the ones given, every other
//! one going back to its default. Topics and the BROKER resource (cluster-wide defaults
//! under name "", or this broker by its node id), as in IncrementalAlterConfigs, whose
//! helpers live here too: which configs a resource names, the ALTER_CONFIGS check, and the
//! trip to the controller.

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
        RESOURCE_BROKER if name == broker.config().node_id.to_string() => Ok(ConfigTarget::Broker),
        RESOURCE_BROKER => Err((ErrorCode::InvalidRequest, format!("unknown broker {name:?}"))),
        t => Err((ErrorCode::InvalidRequest, format!("resource type {t} has no alterable configs here"))),
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
            return Err((ErrorCode::InvalidConfig, format!("{name} needs a value")));
        };
        ops.push((name, ConfigOp::Set(value.to_string())));
    }
    Ok(ConfigChange { target, ops, replace: true })
}

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: AlterConfigsRequest = req.decode()?;
    let asks = r.resources.iter().map(|res| {
        authorized(broker, &req, res.resource_type, &res.resource_name).and_then(|()| change_of(broker, res))
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
