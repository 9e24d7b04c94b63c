//! IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT (the last two for list configs
//! such as `cleanup.policy`) of topic configs, and of the dynamic broker configs (the
//! broker-wide defaults of topic configs, `log.retention.ms` and the like) on the BROKER
//! resource, cluster-wide (name "") or for this broker (its node id). The controller checks
//! every change against the table of topic configs, persists it and answers once every
//! shard uses it. Each resource needs ALTER_CONFIGS on what it is about (see
//! `authz::config_resource`), checked first.

use proto_kafka::messages::incremental_alter_configs_request::AlterConfigsResource;
use proto_kafka::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use proto_kafka::messages::{ApiKey, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse};

use super::{alter_configs, str_bytes, ApiSpec, Broker, Outcome, Request};
use crate::controller::{ConfigChange, ConfigOp};
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
                return Err((
                    ErrorCode::InvalidConfig,
                    format!("{name} needs a value for operation {}", c.config_operation),
                ))
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

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: IncrementalAlterConfigsRequest = req.decode()?;
    let asks = r.resources.iter().map(|res| {
        alter_configs::authorized(broker, &req, res.resource_type, &res.resource_name)
            .and_then(|()| change_of(broker, res))
    });
    let outcomes = alter_configs::apply(broker, asks.collect(), r.validate_only).await;
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
