//! Dynamic configs (topics', the cluster-wide broker defaults, this broker's) and client
//! quotas. Config names and values are checked against the one table of topic and broker
//! configs (`log::config`), so nothing is accepted that the broker does not do.

use std::collections::BTreeMap;

use super::records::Record;
use super::requests::{ConfigChange, ConfigOp, ConfigTarget, Failure, QuotaChange};
use super::{plan, Controller};
use crate::group::offsets;
use crate::log::config::{self, Form};
use crate::metadata::{Catalog, ALL_BROKERS};
use crate::protocol::ErrorCode;

/// A broker config `kafka-reassign-partitions` clears after a move that throttles moves
/// between one broker's log dirs: Ringbroker has one log dir per broker, so deleting it is a
/// no-op and setting it is refused.
const LOG_DIRS_THROTTLE: &str = "replica.alter.log.dirs.io.max.bytes.per.second";

/// A resource's dynamic configs after a change, and a broker's replication rates when the
/// change touches them.
type Changed = (BTreeMap<String, String>, Option<BTreeMap<String, u64>>);

impl Controller {
    /// Applies each resource's config changes (all of a resource's or none).
    pub fn alter_configs(&mut self, changes: &[ConfigChange], validate_only: bool) -> Vec<Result<(), Failure>> {
        let planned = plan(&self.state, changes, |cat, c| {
            let (configs, rates) = self.changed_configs(cat, c)?;
            let mut records = Vec::new();
            let node = match &c.target {
                ConfigTarget::Topic(name) => {
                    records.push(Record::TopicConfigs { name: name.clone(), configs });
                    None
                }
                ConfigTarget::BrokerDefault => {
                    records.push(Record::BrokerDefaults { configs });
                    Some(ALL_BROKERS)
                }
                ConfigTarget::Broker(node) => {
                    if configs != cat.broker_configs {
                        records.push(Record::BrokerConfigs { configs });
                    }
                    Some(*node)
                }
            };
            if let (Some(node), Some(rates)) = (node, rates) {
                records.push(Record::ReplicationRates { node, rates });
            }
            Ok(((), records))
        });
        let results = self.finish(planned, validate_only);
        if !validate_only {
            for c in changes.iter().zip(&results).filter(|(_, r)| r.is_ok()).map(|(c, _)| c) {
                tracing::info!(target = ?c.target, changes = ?c.ops, replace = c.replace, "altered configs");
            }
        }
        results
    }

    /// A broker's replication rates after `ops` (the rates' own ops only), or None when
    /// the change leaves them alone.
    fn changed_rates(
        cat: &Catalog,
        change: &ConfigChange,
        ops: &[(String, ConfigOp)],
    ) -> Result<Option<BTreeMap<String, u64>>, Failure> {
        let node = match change.target {
            ConfigTarget::Topic(_) => return Ok(None),
            ConfigTarget::BrokerDefault => ALL_BROKERS,
            ConfigTarget::Broker(node) => node,
        };
        if ops.is_empty() && !change.replace {
            return Ok(None);
        }
        let mut rates = match change.replace {
            true => BTreeMap::new(),
            false => cat.replication_rates.get(&node).cloned().unwrap_or_default(),
        };
        for (name, op) in ops {
            match op {
                ConfigOp::Set(v) => {
                    let rate = config::replication_rate(v)
                        .map_err(|why| (ErrorCode::InvalidRequest, format!("{name}={v}: {why}")))?;
                    rates.insert(name.clone(), rate);
                }
                ConfigOp::Delete => {
                    rates.remove(name);
                }
                ConfigOp::Append(_) | ConfigOp::Subtract(_) => {
                    return Err((
                        ErrorCode::InvalidConfig,
                        format!("{name} is not a list: APPEND and SUBTRACT do not apply to it"),
                    ))
                }
            }
        }
        Ok(Some(rates))
    }

    /// A resource's dynamic configs after `change`, checked against the table: every name
    /// must be one the broker implements (a broker config must be one it can change at run
    /// time), every value valid, and APPEND/SUBTRACT only on list configs. The replication
    /// rates of a broker resource come back apart (see `Catalog::replication_rates`).
    fn changed_configs(&self, cat: &Catalog, change: &ConfigChange) -> Result<Changed, Failure> {
        let invalid = |m: String| (ErrorCode::InvalidConfig, m);
        let static_log = &self.ctx.static_log;
        let broker = !matches!(change.target, ConfigTarget::Topic(_));
        let is_rate = |name: &str| broker && config::REPLICATION_RATES.iter().any(|(n, _)| *n == name);
        let (log_dirs, ops): (Vec<_>, Vec<_>) =
            change.ops.iter().cloned().partition(|(name, _)| broker && name == LOG_DIRS_THROTTLE);
        if log_dirs.iter().any(|(_, op)| *op != ConfigOp::Delete) {
            return Err(invalid(format!(
                "{LOG_DIRS_THROTTLE}: Ringbroker keeps one log directory per broker, so nothing moves between them to throttle; only deleting it is accepted"
            )));
        }
        let (rate_ops, ops): (Vec<_>, Vec<_>) = ops.into_iter().partition(|(name, _)| is_rate(name));
        let rates = Self::changed_rates(cat, change, &rate_ops)?;
        let cluster_broker = matches!(change.target, ConfigTarget::Broker(_)) && !self.ctx.members.is_empty();
        if ops.is_empty() && (!change.replace || (cluster_broker && cat.broker_configs.is_empty())) {
            // Only rates changed, or throttles cleared (kafka-reassign-partitions --verify
            // does so): the other configs stay. (A legacy AlterConfigs of one broker in a
            // cluster naming only rates replaces nothing else: there is nothing else.)
            let configs = match &change.target {
                ConfigTarget::Topic(name) => match cat.topic(name) {
                    Some(t) => t.configs.clone(),
                    None => return Err((ErrorCode::UnknownTopicOrPartition, format!("topic {name:?} does not exist"))),
                },
                ConfigTarget::BrokerDefault => cat.broker_defaults.clone(),
                ConfigTarget::Broker(_) => cat.broker_configs.clone(),
            };
            return Ok((configs, rates));
        }
        let change = &ConfigChange { ops, ..change.clone() };
        if cluster_broker {
            // The catalog keeps one set of per-broker configs, which every member would apply.
            return Err((
                ErrorCode::InvalidRequest,
                "one broker's dynamic configs other than its replication rates are not supported in a \
                 cluster yet: set the cluster-wide default (the BROKER resource named \"\") or the \
                 broker's own settings"
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
            ConfigTarget::Broker(_) => (Form::Broker, static_log.with_stored(Form::Broker, &cat.broker_defaults)),
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
            ConfigTarget::Broker(_) => &cat.broker_configs,
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
        Ok((next, rates))
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
