//! IncrementalAlterConfigs for topics: SET and DELETE of the topic configs the broker knows,
//! forwarded to the controller, which persists them and answers once every shard's
//! partitions use them. Broker configs are static here (file, environment, flags), so a
//! BROKER resource is refused with a message saying where to set it; APPEND and SUBTRACT
//! (for list-typed configs) are refused too. Each resource needs ALTER_CONFIGS on what it is
//! about (see `authz::config_resource`), checked first.

use std::rc::Rc;

use proto_kafka::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use proto_kafka::messages::{ApiKey, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse};

use super::{authz, str_bytes, ApiSpec, Outcome, Request};
use crate::auth::acl::Operation;
use crate::protocol::ErrorCode;
use crate::shard::{ConfigOp, Shard, TopicConfigChange};

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::IncrementalAlterConfigs, 0, 1);

const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
// Kafka's AlterConfigOp.OpType values.
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;

/// The topic change a resource asks for, or why it cannot be made.
fn change_of(
    r: &proto_kafka::messages::incremental_alter_configs_request::AlterConfigsResource,
) -> Result<TopicConfigChange, (ErrorCode, String)> {
    match r.resource_type {
        RESOURCE_TOPIC => {}
        RESOURCE_BROKER => {
            return Err((
                ErrorCode::InvalidRequest,
                "broker configs are static in Ringbroker: set them in its config file, environment or flags".into(),
            ))
        }
        t => return Err((ErrorCode::InvalidRequest, format!("resource type {t} has no alterable configs here"))),
    }
    let mut ops = Vec::with_capacity(r.configs.len());
    for c in &r.configs {
        let name = c.name.to_string();
        if ops.iter().any(|(n, _)| *n == name) {
            return Err((ErrorCode::InvalidRequest, format!("config {name} appears twice")));
        }
        let op = match (c.config_operation, &c.value) {
            (OP_SET, Some(v)) => ConfigOp::Set(v.to_string()),
            (OP_SET, None) => return Err((ErrorCode::InvalidConfig, format!("SET of {name} needs a value"))),
            (OP_DELETE, _) => ConfigOp::Delete,
            (op, _) => {
                return Err((
                    ErrorCode::InvalidConfig,
                    format!("operation {op} on {name}: only SET (0) and DELETE (1) are supported"),
                ))
            }
        };
        ops.push((name, op));
    }
    Ok(TopicConfigChange { topic: r.resource_name.to_string(), ops })
}

pub async fn handle(shard: &Rc<Shard>, req: Request) -> Outcome {
    let r: IncrementalAlterConfigsRequest = req.decode()?;
    let asks: Vec<Result<TopicConfigChange, (ErrorCode, String)>> = r
        .resources
        .iter()
        .map(|res| {
            authz::config_resource(shard, &req, Operation::AlterConfigs, res.resource_type, &res.resource_name)
                .and_then(|()| change_of(res))
        })
        .collect();
    let valid: Vec<TopicConfigChange> = asks.iter().filter_map(|a| a.as_ref().ok().cloned()).collect();
    let mut done = shard.alter_topic_configs(valid, r.validate_only).await.into_iter();
    let mut resp = IncrementalAlterConfigsResponse::default();
    for (res, ask) in r.resources.iter().zip(asks) {
        let outcome = match ask {
            Ok(_) => done.next().unwrap_or_else(|| Err((ErrorCode::UnknownServerError, "no answer".into()))),
            Err(e) => Err(e),
        };
        let mut o = AlterConfigsResourceResponse::default();
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
