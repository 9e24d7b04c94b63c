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
        if name == Some("") && matches!(kind, USER | CLIENT_ID) {
            // Kafka's: an empty name is neither an entity nor the default (a null name).
            return Err(invalid(format!("an empty {kind} is not supported: give a name, or none for the default")));
        }
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proto_kafka::messages::alter_client_quotas_request::{EntryData as AskedEntry, OpData};

    use super::*;
    use crate::api::fake::Fake;
    use crate::auth::acl::{ResourceType, CLUSTER_NAME};

    fn entry(entity: &[(&str, Option<&str>)], ops: &[(&str, f64, bool)]) -> AskedEntry {
        let mut e = AskedEntry::default();
        e.entity = entity
            .iter()
            .map(|(t, n)| {
                let mut d = AskedEntity::default();
                d.entity_type = str_bytes(*t);
                d.entity_name = n.map(str_bytes);
                d
            })
            .collect();
        e.ops = ops
            .iter()
            .map(|(k, v, remove)| {
                let mut o = OpData::default();
                o.key = str_bytes(*k);
                o.value = *v;
                o.remove = *remove;
                o
            })
            .collect();
        e
    }

    fn alter_as(b: &Fake, principal: Option<&str>, entries: Vec<AskedEntry>, validate_only: bool) -> Vec<i16> {
        let mut req = AlterClientQuotasRequest::default();
        req.entries = entries;
        req.validate_only = validate_only;
        let resp: AlterClientQuotasResponse = b.call_as(principal, ApiKey::AlterClientQuotas, 1, &req);
        for (asked, answered) in req.entries.iter().zip(&resp.entries) {
            let asked_names: Vec<_> = asked.entity.iter().map(|d| (&d.entity_type, &d.entity_name)).collect();
            let answered_names: Vec<_> = answered.entity.iter().map(|d| (&d.entity_type, &d.entity_name)).collect();
            assert_eq!(asked_names, answered_names, "each entry names its entity");
            assert_eq!(answered.error_code != 0, answered.error_message.is_some());
        }
        resp.entries.iter().map(|e| e.error_code).collect()
    }

    fn alter(b: &Fake, entries: Vec<AskedEntry>) -> Vec<i16> {
        alter_as(b, None, entries, false)
    }

    fn named(n: &str) -> Option<EntityName> {
        Some(EntityName::Named(n.into()))
    }

    /// The stored quotas: (entity, values).
    fn stored(b: &Fake) -> Vec<(QuotaEntity, BTreeMap<String, f64>)> {
        b.catalog().client_quotas.iter().map(|s| (s.entity.clone(), s.values.clone())).collect()
    }

    fn values(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn quotas_are_set_per_entity_and_removed_key_by_key() {
        let b = Fake::new();
        let entries = vec![
            entry(&[(USER, Some("alice"))], &[(PRODUCER_BYTE_RATE, 1024.0, false), (REQUEST_PERCENTAGE, 50.0, false)]),
            entry(&[(USER, None)], &[(CONSUMER_BYTE_RATE, 2048.0, false)]),
            entry(&[(USER, Some("alice")), (CLIENT_ID, Some("app"))], &[(PRODUCER_BYTE_RATE, 512.0, false)]),
        ];
        assert_eq!(alter(&b, entries), vec![0, 0, 0]);
        assert_eq!(
            stored(&b),
            vec![
                (
                    QuotaEntity { user: named("alice"), client_id: None },
                    values(&[(PRODUCER_BYTE_RATE, 1024.0), (REQUEST_PERCENTAGE, 50.0)])
                ),
                (QuotaEntity { user: named("alice"), client_id: named("app") }, values(&[(PRODUCER_BYTE_RATE, 512.0)])),
                (
                    QuotaEntity { user: Some(EntityName::Default), client_id: None },
                    values(&[(CONSUMER_BYTE_RATE, 2048.0)])
                ),
            ]
        );
        let entries = vec![
            entry(&[(USER, Some("alice"))], &[(REQUEST_PERCENTAGE, 0.0, true)]),
            entry(&[(USER, None)], &[(CONSUMER_BYTE_RATE, 0.0, true)]),
        ];
        assert_eq!(alter(&b, entries), vec![0, 0]);
        let left: Vec<QuotaEntity> = stored(&b).into_iter().map(|(e, _)| e).collect();
        assert_eq!(
            left,
            vec![
                QuotaEntity { user: named("alice"), client_id: None },
                QuotaEntity { user: named("alice"), client_id: named("app") },
            ],
            "an entity left with no quota is gone"
        );
        assert_eq!(stored(&b)[0].1, values(&[(PRODUCER_BYTE_RATE, 1024.0)]));
    }

    #[test]
    fn entries_kafka_refuses_or_this_broker_does_not_enforce_are_invalid_request_alone() {
        let b = Fake::new();
        let rate = |v: f64| [(PRODUCER_BYTE_RATE, v, false)];
        let entries = vec![
            entry(&[(IP, Some("10.0.0.1"))], &[("connection_creation_rate", 10.0, false)]),
            entry(&[("group", Some("g"))], &rate(1024.0)),
            entry(&[], &rate(1024.0)),
            entry(&[(USER, Some("a")), (USER, Some("b"))], &rate(1024.0)),
            entry(&[(USER, Some("a"))], &[("no_such_quota", 1.0, false)]),
            entry(&[(USER, Some("a"))], &[("controller_mutation_rate", 1.0, false)]),
            entry(&[(USER, Some("a"))], &rate(10.5)),
            entry(&[(USER, Some("a"))], &rate(0.0)),
            entry(&[(USER, Some("a"))], &[(REQUEST_PERCENTAGE, 0.0, false)]),
            entry(&[(USER, Some("a"))], &[(PRODUCER_BYTE_RATE, 1024.0, false), (PRODUCER_BYTE_RATE, 1.0, true)]),
            entry(&[(USER, Some("a"))], &[("no_such_quota", 0.0, true)]),
            entry(&[(USER, Some(""))], &rate(1024.0)),
            entry(&[(CLIENT_ID, Some(""))], &rate(1024.0)),
            entry(&[(CLIENT_ID, Some("ok"))], &rate(4096.0)),
        ];
        let n = entries.len();
        let invalid = ErrorCode::InvalidRequest.code();
        let mut expected = vec![invalid; n - 1];
        expected.push(0);
        assert_eq!(alter(&b, entries), expected);
        assert_eq!(
            stored(&b),
            vec![(QuotaEntity { user: None, client_id: named("ok") }, values(&[(PRODUCER_BYTE_RATE, 4096.0)]))]
        );
    }

    #[test]
    fn validate_only_checks_but_stores_nothing() {
        let b = Fake::new();
        let entries = vec![
            entry(&[(USER, Some("alice"))], &[(PRODUCER_BYTE_RATE, 1024.0, false)]),
            entry(&[(IP, None)], &[(PRODUCER_BYTE_RATE, 1024.0, false)]),
        ];
        assert_eq!(alter_as(&b, None, entries, true), vec![0, ErrorCode::InvalidRequest.code()]);
        assert!(stored(&b).is_empty());
    }

    #[test]
    fn altering_quotas_needs_alter_configs_on_the_cluster() {
        let b = Fake::with(|c| c.authorizer_enabled = true);
        let ask = || vec![entry(&[(USER, Some("eve"))], &[(PRODUCER_BYTE_RATE, 1e9, false)])];
        assert_eq!(alter_as(&b, Some("User:eve"), ask(), false), vec![ErrorCode::ClusterAuthorizationFailed.code()]);
        assert!(stored(&b).is_empty());
        b.allow("User:ops", ResourceType::Cluster, CLUSTER_NAME, Operation::AlterConfigs);
        assert_eq!(alter_as(&b, Some("User:ops"), ask(), false), vec![0]);
        assert_eq!(stored(&b).len(), 1);
    }
}
