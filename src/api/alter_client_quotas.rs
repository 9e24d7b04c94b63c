//! AlterClientQuotas (`kafka-configs --alter --entity-type users|clients --add-config
//! producer_byte_rate=...`): sets or removes quotas of users, client-ids and users'
//! client-ids, the default of either included (a null name). The controller keeps them in
//! the catalog and answers once every shard enforces them (see `quota`). Kafka's checks,
//! each refusing only its entry with INVALID_REQUEST: a non-empty entity of known types,
//! each once; `ip` entities (connection-rate quotas) and `controller_mutation_rate` are
//! refused because this broker does not enforce them; byte rates are positive whole
//! numbers, `request_percentage` positive.
//!
//! Authorization, Kafka's: ALTER_CONFIGS on the cluster, else CLUSTER_AUTHORIZATION_FAILED.

use proto_kafka::messages::alter_client_quotas_request::EntityData as AskedEntity;
use proto_kafka::messages::alter_client_quotas_response::{EntityData, EntryData};
use proto_kafka::messages::{AlterClientQuotasRequest, AlterClientQuotasResponse, ApiKey};

use super::{authz, str_bytes, ApiSpec, Broker, Outcome, Request};
use crate::auth::acl::Operation;
use crate::controller::QuotaChange;
use crate::protocol::ErrorCode;
use crate::quota::{EntityName, QuotaEntity, CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE};

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::AlterClientQuotas, 0, 1);

pub const USER: &str = "user";
pub const CLIENT_ID: &str = "client-id";
pub const IP: &str = "ip";

type Refusal = (ErrorCode, String);

fn invalid(m: impl Into<String>) -> Refusal {
    (ErrorCode::InvalidRequest, m.into())
}

/// The entity named by (type, name) parts; a null name is the type's default.
pub fn entity_of<'a>(parts: impl IntoIterator<Item = (&'a str, Option<&'a str>)>) -> Result<QuotaEntity, Refusal> {
    let mut e = QuotaEntity { user: None, client_id: None };
    for (kind, name) in parts {
        let name = name.map_or(EntityName::Default, |n| EntityName::Named(n.to_string()));
        let slot = match kind {
            USER => &mut e.user,
            CLIENT_ID => &mut e.client_id,
            IP => {
                return Err(invalid(
                    "ip quotas (connection_creation_rate) are not supported: use max_connection_creation_rate",
                ))
            }
            other => return Err(invalid(format!("unknown quota entity type {other:?}: user and client-id exist"))),
        };
        if slot.replace(name).is_some() {
            return Err(invalid(format!("the entity names {kind} twice")));
        }
    }
    if e.user.is_none() && e.client_id.is_none() {
        return Err(invalid("the quota entity is empty"));
    }
    Ok(e)
}

/// A quota key and value this broker enforces, or why not.
fn check_value(key: &str, value: f64) -> Result<(), Refusal> {
    match key {
        PRODUCER_BYTE_RATE | CONSUMER_BYTE_RATE if value.fract() != 0.0 || value < 1.0 => {
            Err(invalid(format!("{key} must be a whole number of bytes a second, at least 1; got {value}")))
        }
        REQUEST_PERCENTAGE if !(value > 0.0 && value.is_finite()) => {
            Err(invalid(format!("{key} must be a positive percentage; got {value}")))
        }
        PRODUCER_BYTE_RATE | CONSUMER_BYTE_RATE | REQUEST_PERCENTAGE => Ok(()),
        "controller_mutation_rate" => {
            Err(invalid("controller_mutation_rate is not supported: topic creations and deletions are not throttled"))
        }
        other => Err(invalid(format!(
            "unknown quota {other:?}: {PRODUCER_BYTE_RATE}, {CONSUMER_BYTE_RATE} and {REQUEST_PERCENTAGE} exist"
        ))),
    }
}

fn change_of(
    entity: &[AskedEntity],
    ops: &[proto_kafka::messages::alter_client_quotas_request::OpData],
) -> Result<QuotaChange, Refusal> {
    let entity = entity_of(entity.iter().map(|p| (p.entity_type.as_str(), p.entity_name.as_deref())))?;
    let mut changes: Vec<(String, Option<f64>)> = Vec::with_capacity(ops.len());
    for op in ops {
        let key = op.key.to_string();
        if changes.iter().any(|(k, _)| *k == key) {
            return Err(invalid(format!("{key} appears twice")));
        }
        if !op.remove {
            check_value(&key, op.value)?;
        } else if ![PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE].contains(&key.as_str()) {
            check_value(&key, 1.0)?;
        }
        changes.push((key, (!op.remove).then_some(op.value)));
    }
    Ok(QuotaChange { entity, ops: changes })
}

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: AlterClientQuotasRequest = req.decode()?;
    let allowed = authz::cluster(broker, &req, Operation::AlterConfigs);
    let asks: Vec<Result<QuotaChange, Refusal>> = r
        .entries
        .iter()
        .map(|e| {
            if !allowed {
                return Err((
                    ErrorCode::ClusterAuthorizationFailed,
                    "AlterClientQuotas needs ALTER_CONFIGS on the cluster".into(),
                ));
            }
            change_of(&e.entity, &e.ops)
        })
        .collect();
    let valid: Vec<QuotaChange> = asks.iter().filter_map(|a| a.as_ref().ok().cloned()).collect();
    let mut done = broker.alter_client_quotas(valid, r.validate_only).await.into_iter();
    let mut resp = AlterClientQuotasResponse::default();
    for (e, ask) in r.entries.iter().zip(asks) {
        let outcome = match ask {
            Ok(_) => done.next().unwrap_or_else(|| Err((ErrorCode::UnknownServerError, "no answer".into()))),
            Err(e) => Err(e),
        };
        let mut out = EntryData::default();
        out.error_message = None;
        out.entity = e
            .entity
            .iter()
            .map(|p| {
                let mut d = EntityData::default();
                d.entity_type = p.entity_type.clone();
                d.entity_name = p.entity_name.clone();
                d
            })
            .collect();
        if let Err((code, msg)) = outcome {
            out.error_code = code.code();
            out.error_message = Some(str_bytes(msg));
        }
        resp.entries.push(out);
    }
    req.respond(resp)
}
