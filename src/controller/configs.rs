//! Dynamic configs (topics', the cluster-wide broker defaults, this broker's) and client
//! quotas. Config names and values are checked against the one table of topic and broker
//! configs (`log::config`), so nothing is accepted that the broker does not do.

use std::collections::BTreeMap;

use super::records::Record;
use super::requests::{ConfigChange, ConfigOp, ConfigTarget, Failure, QuotaChange};
use super::{plan, Controller};
use crate::group::offsets;
use crate::log::config::{self, Form};
use crate::metadata::Catalog;
use crate::protocol::ErrorCode;

/// Kafka's replication throttles, broker and topic configs that `kafka-reassign-partitions`
/// clears after a move: not implemented here, so deleting them is a no-op and setting them is
/// refused.
const REPLICATION_THROTTLES: [&str; 5] = [
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second",
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
];

impl Controller {
    /// Applies each resource's config changes (all of a resource's or none).
    pub fn alter_configs(&mut self, changes: &[ConfigChange], validate_only: bool) -> Vec<Result<(), Failure>> {
        let planned = plan(&self.state, changes, |cat, c| {
            let configs = self.changed_configs(cat, c)?;
            let record = match &c.target {
                ConfigTarget::Topic(name) => Record::TopicConfigs { name: name.clone(), configs },
                ConfigTarget::BrokerDefault => Record::BrokerDefaults { configs },
                ConfigTarget::Broker => Record::BrokerConfigs { configs },
            };
            Ok(((), vec![record]))
        });
        let results = self.finish(planned, validate_only);
        if !validate_only {
            for c in changes.iter().zip(&results).filter(|(_, r)| r.is_ok()).map(|(c, _)| c) {
                tracing::info!(target = ?c.target, changes = ?c.ops, replace = c.replace, "altered configs");
            }
        }
        results
    }

    /// A resource's dynamic configs after `change`, checked against the table: every name
    /// must be one the broker implements (a broker config must be one it can change at run
    /// time), every value valid, and APPEND/SUBTRACT only on list configs.
    fn changed_configs(&self, cat: &Catalog, change: &ConfigChange) -> Result<BTreeMap<String, String>, Failure> {
        let invalid = |m: String| (ErrorCode::InvalidConfig, m);
        let static_log = &self.ctx.static_log;
        let (throttles, ops): (Vec<_>, Vec<_>) =
            change.ops.iter().cloned().partition(|(name, _)| REPLICATION_THROTTLES.contains(&name.as_str()));
        if let Some((name, _)) = throttles.iter().find(|(_, op)| *op != ConfigOp::Delete) {
            return Err(invalid(format!(
                "{name}: replication throttles are not implemented (replicas catch up at full speed); only deleting one is accepted"
            )));
        }
        if ops.is_empty() && !change.replace {
            // Only throttles cleared (kafka-reassign-partitions --verify does so): nothing to do.
            return Ok(match &change.target {
                ConfigTarget::Topic(name) => match cat.topic(name) {
                    Some(t) => t.configs.clone(),
                    None => return Err((ErrorCode::UnknownTopicOrPartition, format!("topic {name:?} does not exist"))),
                },
                ConfigTarget::BrokerDefault => cat.broker_defaults.clone(),
                ConfigTarget::Broker => cat.broker_configs.clone(),
            });
        }
        let change = &ConfigChange { ops, ..change.clone() };
        if change.target == ConfigTarget::Broker && !self.ctx.members.is_empty() {
            // The catalog keeps one set of per-broker configs, which every member would apply.
            return Err((
                ErrorCode::InvalidRequest,
                "one broker's dynamic configs are not supported in a cluster yet: set the cluster-wide \
                 default (the BROKER resource named \"\") or the broker's own settings"
                    .into(),
            ));
        }
        let (form, under) = match &change.target {
            ConfigTarget::Topic(name) => {
                if name == offsets::TOPIC {
                    return Err(invalid("the configs of the offsets topic are fixed".into()));
                }
                (Form::Topic, self.broker_log_config(cat))
            }
            ConfigTarget::BrokerDefault => (Form::Broker, *static_log),
            ConfigTarget::Broker => (Form::Broker, static_log.with_stored(Form::Broker, &cat.broker_defaults)),
        };
        let current = match &change.target {
            ConfigTarget::Topic(name) => match cat.topic(name) {
                Some(t) => &t.configs,
                // Kafka's answers for a name no topic can have.
                None if name.is_empty() => {
                    return Err((ErrorCode::InvalidRequest, "a topic config needs a topic name".into()))
                }
                None if crate::metadata::check_topic_name(name).is_err() => {
                    return Err((ErrorCode::InvalidTopicException, format!("{name:?} is not a valid topic name")))
                }
                None => return Err((ErrorCode::UnknownTopicOrPartition, format!("topic {name:?} does not exist"))),
            },
            ConfigTarget::BrokerDefault => &cat.broker_defaults,
            ConfigTarget::Broker => &cat.broker_configs,
        };
        let mut next = if change.replace { BTreeMap::new() } else { current.clone() };
        for (name, op) in &change.ops {
            let row = config::lookup(form, name).map_err(|why| match form {
                Form::Topic => invalid(why.to_string()),
                Form::Broker => (
                    ErrorCode::InvalidRequest,
                    format!(
                        "{name} cannot be changed at run time: set it in the broker's config file, environment or flags"
                    ),
                ),
            })?;
            // APPEND and SUBTRACT work on the resource's own value or, when it sets none, the
            // built-in default (not a dynamic broker default), as Kafka's controller does.
            let list = |next: &BTreeMap<String, String>| -> Vec<String> {
                let value = next.get(name).cloned().unwrap_or_else(|| (row.show)(static_log));
                value.split(',').map(str::trim).filter(|v| !v.is_empty()).map(str::to_string).collect()
            };
            match op {
                ConfigOp::Set(v) => {
                    next.insert(name.clone(), v.clone());
                }
                ConfigOp::Delete => {
                    next.remove(name);
                }
                ConfigOp::Append(_) | ConfigOp::Subtract(_) if !row.is_list() => {
                    return Err(invalid(format!("{name} is not a list: APPEND and SUBTRACT do not apply to it")));
                }
                ConfigOp::Append(v) => {
                    let mut items = list(&next);
                    for item in v.split(',').map(str::trim).filter(|i| !i.is_empty()) {
                        if !items.iter().any(|i| i == item) {
                            items.push(item.to_string());
                        }
                    }
                    next.insert(name.clone(), items.join(","));
                }
                ConfigOp::Subtract(v) => {
                    let gone: Vec<&str> = v.split(',').map(str::trim).collect();
                    let items: Vec<String> = list(&next).into_iter().filter(|i| !gone.contains(&i.as_str())).collect();
                    next.insert(name.clone(), items.join(","));
                }
            }
        }
        // A bad value: INVALID_CONFIG for a topic, INVALID_REQUEST for a broker, as in Kafka.
        under.with(form, &next).map_err(|why| match form {
            Form::Topic => invalid(why.to_string()),
            Form::Broker => (ErrorCode::InvalidRequest, why.to_string()),
        })?;
        Ok(next)
    }

    /// Sets and removes client quotas (checked by the handler). An entity left with no
    /// quota is dropped.
    pub fn alter_client_quotas(&mut self, changes: &[QuotaChange], validate_only: bool) -> Vec<Result<(), Failure>> {
        let planned = plan(&self.state, changes, |cat, c| {
            let mut values =
                cat.client_quotas.iter().find(|s| s.entity == c.entity).map(|s| s.values.clone()).unwrap_or_default();
            for (key, value) in &c.ops {
                match value {
                    Some(v) => values.insert(key.clone(), *v),
                    None => values.remove(key),
                };
            }
            Ok(((), vec![Record::ClientQuota { entity: c.entity.clone(), values }]))
        });
        let results = self.finish(planned, validate_only);
        if !validate_only {
            for c in changes.iter().zip(&results).filter(|(_, r)| r.is_ok()).map(|(c, _)| c) {
                tracing::info!(entity = ?c.entity, changes = ?c.ops, "altered client quotas");
            }
        }
        results
    }
}
