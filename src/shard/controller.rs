//! Topic creation, deletion and config changes, run on the controller shard (shard 0), the
//! single writer of the catalog: check each request, change the writable catalog, persist it
//! once, then broadcast the new snapshot and wait until every shard has applied it — so when
//! a CreateTopics response arrives, every shard can already serve the topic, and when an
//! AlterConfigs or IncrementalAlterConfigs response arrives, every partition uses the new
//! settings. Config names and values are checked against the one table of topic configs
//! (`log::config`), so nothing is accepted that the broker does not do.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

use super::{ConfigChange, ConfigOp, ConfigTarget, NewPartitions, NewTopic, QuotaChange, Shard, TopicResult};
use crate::log::config::{self, Form};
use crate::metadata::{check_topic_name, Catalog, QuotaSetting};
use crate::protocol::ErrorCode;

/// The most partitions one topic may have.
const MAX_PARTITIONS: i32 = 100_000;

fn check(shard: &Shard, cat: &Catalog, t: &NewTopic) -> Result<u32, (ErrorCode, String)> {
    check_topic_name(&t.name).map_err(|m| (ErrorCode::InvalidTopicException, m))?;
    let partitions = match t.partitions {
        -1 => shard.config.default_partitions,
        n if (1..=MAX_PARTITIONS).contains(&n) => n as u32,
        n => return Err((ErrorCode::InvalidPartitions, format!("number of partitions must be at least 1, got {n}"))),
    };
    if !(t.replication_factor == -1 || t.replication_factor == 1) {
        return Err((
            ErrorCode::InvalidReplicationFactor,
            format!("replication factor {} is larger than the 1 available broker", t.replication_factor),
        ));
    }
    shard.broker_log_config(cat).with(Form::Topic, &t.configs).map_err(|m| (ErrorCode::InvalidConfig, m))?;
    Ok(partitions)
}

pub async fn create_topics(shard: &Rc<Shard>, topics: Vec<NewTopic>, validate_only: bool) -> Vec<TopicResult> {
    let Some(master) = shard.controller_catalog() else {
        return vec![Err((ErrorCode::NotController, "not the controller".into())); topics.len()];
    };
    let mut results = Vec::with_capacity(topics.len());
    let mut changed = false;
    {
        let mut cat = master.borrow_mut();
        for t in &topics {
            let r = check(shard, &cat, t).and_then(|partitions| {
                if cat.topic(&t.name).is_some() {
                    return Err((ErrorCode::TopicAlreadyExists, format!("topic {:?} already exists", t.name)));
                }
                if validate_only {
                    let mut probe = cat.clone();
                    return Ok(probe.add_topic(&t.name, partitions, shard.count, t.configs.clone()).clone());
                }
                changed = true;
                Ok(cat.add_topic(&t.name, partitions, shard.count, t.configs.clone()).clone())
            });
            results.push(r);
        }
        if changed {
            if let Err(e) = cat.persist(&shard.config.data_dir) {
                tracing::error!("cannot persist the catalog: {e}");
                // Undo: the topics were not durably created.
                for r in &mut results {
                    if let Ok(t) = r {
                        cat.remove_topic(&t.name.clone());
                        *r = Err((ErrorCode::KafkaStorageError, format!("cannot persist topic metadata: {e}")));
                    }
                }
                return results;
            }
        }
    }
    if changed {
        let snapshot = Arc::new(master.borrow().clone());
        shard.broadcast_catalog(snapshot).await;
        for t in results.iter().flatten() {
            tracing::info!(topic = %t.name, partitions = t.homes.len(), id = %t.id, "created topic");
        }
    }
    results
}

/// Why a topic cannot grow as asked, Kafka's checks and codes: a count above the current
/// one, within the broker's limit, and client-chosen replicas (if any) naming one replica on
/// this broker for each new partition.
fn check_new_partitions(shard: &Shard, cat: &Catalog, ask: &NewPartitions) -> Result<u32, (ErrorCode, String)> {
    let Some(topic) = cat.topic(&ask.topic) else {
        return Err((ErrorCode::UnknownTopicOrPartition, format!("topic {:?} does not exist", ask.topic)));
    };
    if ask.topic == crate::group::offsets::TOPIC {
        return Err((
            ErrorCode::InvalidRequest,
            "the offsets topic keeps its partition count: groups are placed by it".into(),
        ));
    }
    let have = topic.partitions();
    if ask.count == have {
        return Err((ErrorCode::InvalidPartitions, format!("topic already has {have} partitions")));
    }
    if ask.count < have {
        return Err((
            ErrorCode::InvalidPartitions,
            format!("topic currently has {have} partitions, which is higher than the requested {}", ask.count),
        ));
    }
    if ask.count > MAX_PARTITIONS {
        return Err((ErrorCode::InvalidPartitions, format!("at most {MAX_PARTITIONS} partitions, got {}", ask.count)));
    }
    if let Some(assignments) = &ask.assignments {
        let new = (ask.count - have) as usize;
        if assignments.len() != new {
            return Err((
                ErrorCode::InvalidReplicaAssignment,
                format!("{} replica assignments for {new} new partitions", assignments.len()),
            ));
        }
        let me = shard.config.node_id;
        if let Some(bad) = assignments.iter().find(|a| a.as_slice() != [me]) {
            return Err((
                ErrorCode::InvalidReplicaAssignment,
                format!(
                    "replicas {bad:?}: this cluster has one broker, id {me}, so each partition has replicas [{me}]"
                ),
            ));
        }
    }
    Ok(ask.count as u32)
}

/// Grows topics (all partitions of a topic or none), persists the catalog once, and returns
/// once every shard serves the new partitions.
pub async fn create_partitions(
    shard: &Rc<Shard>,
    asks: Vec<NewPartitions>,
    validate_only: bool,
) -> Vec<Result<(), (ErrorCode, String)>> {
    let Some(master) = shard.controller_catalog() else {
        return vec![Err((ErrorCode::NotController, "not the controller".into())); asks.len()];
    };
    let mut results = Vec::with_capacity(asks.len());
    let mut changed = false;
    {
        let mut cat = master.borrow_mut();
        let before = cat.clone();
        for ask in &asks {
            let r = check_new_partitions(shard, &cat, ask).map(|total| {
                if !validate_only {
                    cat.add_partitions(&ask.topic, total, shard.count);
                    changed = true;
                }
            });
            results.push(r);
        }
        if changed {
            if let Err(e) = cat.persist(&shard.config.data_dir) {
                tracing::error!("cannot persist the catalog: {e}");
                *cat = before;
                let msg = format!("cannot persist topic metadata: {e}");
                return vec![Err((ErrorCode::KafkaStorageError, msg)); asks.len()];
            }
        }
    }
    if changed {
        let snapshot = Arc::new(master.borrow().clone());
        shard.broadcast_catalog(snapshot).await;
        for ask in asks.iter().zip(&results).filter(|(_, r)| r.is_ok()).map(|(a, _)| a) {
            tracing::info!(topic = %ask.topic, partitions = ask.count, "added partitions");
        }
    }
    results
}

pub async fn delete_topics(shard: &Rc<Shard>, names: Vec<String>) -> Vec<Result<uuid::Uuid, ErrorCode>> {
    let Some(master) = shard.controller_catalog() else {
        return vec![Err(ErrorCode::NotController); names.len()];
    };
    let mut results = Vec::with_capacity(names.len());
    let mut changed = false;
    {
        let mut cat = master.borrow_mut();
        for n in &names {
            if n == crate::group::offsets::TOPIC {
                results.push(Err(ErrorCode::InvalidTopicException));
                continue;
            }
            match cat.remove_topic(n) {
                Some(t) => {
                    changed = true;
                    results.push(Ok(t.id));
                }
                None => results.push(Err(ErrorCode::UnknownTopicOrPartition)),
            }
        }
        if changed {
            if let Err(e) = cat.persist(&shard.config.data_dir) {
                tracing::error!("cannot persist the catalog: {e}");
                return vec![Err(ErrorCode::KafkaStorageError); names.len()];
            }
        }
    }
    if changed {
        let snapshot = Arc::new(master.borrow().clone());
        shard.broadcast_catalog(snapshot).await;
        for n in names.iter().zip(&results).filter(|(_, r)| r.is_ok()).map(|(n, _)| n) {
            tracing::info!(topic = %n, "deleted topic");
        }
    }
    results
}

/// The dynamic configs of a change's resource in `cat`.
fn configs_of<'a>(cat: &'a Catalog, target: &ConfigTarget) -> Option<&'a BTreeMap<String, String>> {
    match target {
        ConfigTarget::Topic(name) => cat.topic(name).map(|t| &t.configs),
        ConfigTarget::BrokerDefault => Some(&cat.broker_defaults),
        ConfigTarget::Broker => Some(&cat.broker_configs),
    }
}

/// A resource's dynamic configs after `change`, checked against the table: every name must
/// be one the broker implements (a broker config must be one it can change at run time),
/// every value valid, and APPEND/SUBTRACT only on list configs.
fn changed_configs(
    shard: &Shard,
    cat: &Catalog,
    change: &ConfigChange,
) -> Result<BTreeMap<String, String>, (ErrorCode, String)> {
    let invalid = |m: String| (ErrorCode::InvalidConfig, m);
    let (form, under) = match &change.target {
        ConfigTarget::Topic(name) => {
            if name == crate::group::offsets::TOPIC {
                return Err(invalid("the configs of the offsets topic are fixed".into()));
            }
            (Form::Topic, shard.broker_log_config(cat))
        }
        ConfigTarget::BrokerDefault => (Form::Broker, shard.log_config),
        ConfigTarget::Broker => (Form::Broker, shard.log_config.with_stored(Form::Broker, &cat.broker_defaults)),
    };
    let Some(current) = configs_of(cat, &change.target) else {
        let ConfigTarget::Topic(name) = &change.target else { unreachable!("broker configs always exist") };
        return Err((ErrorCode::UnknownTopicOrPartition, format!("topic {name:?} does not exist")));
    };
    let mut next = if change.replace { BTreeMap::new() } else { current.clone() };
    for (name, op) in &change.ops {
        let row = config::lookup(form, name).map_err(|why| match form {
            Form::Topic => invalid(why),
            Form::Broker => (
                ErrorCode::InvalidRequest,
                format!(
                    "{name} cannot be changed at run time: set it in the broker's config file, environment or flags"
                ),
            ),
        })?;
        // APPEND and SUBTRACT work on the resource's own value or, when it sets none, the
        // built-in default (not a dynamic broker default), as Kafka's controller does.
        let list = || -> Vec<String> {
            let value = next.get(name).cloned().unwrap_or_else(|| (row.show)(&shard.log_config));
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
                let mut items = list();
                for item in v.split(',').map(str::trim).filter(|i| !i.is_empty()) {
                    if !items.iter().any(|i| i == item) {
                        items.push(item.to_string());
                    }
                }
                next.insert(name.clone(), items.join(","));
            }
            ConfigOp::Subtract(v) => {
                let gone: Vec<&str> = v.split(',').map(str::trim).collect();
                let items: Vec<String> = list().into_iter().filter(|i| !gone.contains(&i.as_str())).collect();
                next.insert(name.clone(), items.join(","));
            }
        }
    }
    // A bad value: INVALID_CONFIG for a topic, INVALID_REQUEST for a broker, as in Kafka.
    under.with(form, &next).map_err(|why| match form {
        Form::Topic => invalid(why),
        Form::Broker => (ErrorCode::InvalidRequest, why),
    })?;
    Ok(next)
}

/// Applies each resource's config changes (all of a resource's or none), persists the
/// catalog once, and returns after every shard uses the new settings.
pub async fn alter_configs(
    shard: &Rc<Shard>,
    changes: Vec<ConfigChange>,
    validate_only: bool,
) -> Vec<Result<(), (ErrorCode, String)>> {
    let Some(master) = shard.controller_catalog() else {
        return vec![Err((ErrorCode::NotController, "not the controller".into())); changes.len()];
    };
    let mut results = Vec::with_capacity(changes.len());
    let mut changed = false;
    {
        let mut cat = master.borrow_mut();
        let before = cat.clone();
        for c in &changes {
            let r = changed_configs(shard, &cat, c).map(|next| {
                if !validate_only {
                    match &c.target {
                        ConfigTarget::Topic(name) => {
                            cat.set_topic_configs(name, next);
                        }
                        ConfigTarget::BrokerDefault => cat.broker_defaults = next,
                        ConfigTarget::Broker => cat.broker_configs = next,
                    }
                    cat.bump();
                }
            });
            changed |= r.is_ok() && !validate_only;
            results.push(r);
        }
        if changed {
            if let Err(e) = cat.persist(&shard.config.data_dir) {
                tracing::error!("cannot persist the catalog: {e}");
                *cat = before;
                let msg = format!("cannot persist the config change: {e}");
                return vec![Err((ErrorCode::KafkaStorageError, msg)); changes.len()];
            }
        }
    }
    if changed {
        let snapshot = Arc::new(master.borrow().clone());
        shard.broadcast_catalog(snapshot).await;
        for c in changes.iter().zip(&results).filter(|(_, r)| r.is_ok()).map(|(c, _)| c) {
            tracing::info!(target = ?c.target, changes = ?c.ops, replace = c.replace, "altered configs");
        }
    }
    results
}

/// Sets and removes client quotas (checked by the handler), persists the catalog once, and
/// returns once every shard enforces them. An entity left with no quota is dropped.
pub async fn alter_client_quotas(
    shard: &Rc<Shard>,
    changes: Vec<QuotaChange>,
    validate_only: bool,
) -> Vec<Result<(), (ErrorCode, String)>> {
    let Some(master) = shard.controller_catalog() else {
        return vec![Err((ErrorCode::NotController, "not the controller".into())); changes.len()];
    };
    if validate_only || changes.is_empty() {
        return vec![Ok(()); changes.len()];
    }
    {
        let mut cat = master.borrow_mut();
        let before = cat.clone();
        for c in &changes {
            let at = match cat.client_quotas.iter().position(|s| s.entity == c.entity) {
                Some(i) => i,
                None => {
                    cat.client_quotas.push(QuotaSetting { entity: c.entity.clone(), values: BTreeMap::new() });
                    cat.client_quotas.len() - 1
                }
            };
            let values = &mut cat.client_quotas[at].values;
            for (key, value) in &c.ops {
                match value {
                    Some(v) => values.insert(key.clone(), *v),
                    None => values.remove(key),
                };
            }
            if values.is_empty() {
                cat.client_quotas.remove(at);
            }
        }
        cat.client_quotas.sort_by(|a, b| a.entity.cmp(&b.entity));
        cat.bump();
        if let Err(e) = cat.persist(&shard.config.data_dir) {
            tracing::error!("cannot persist the catalog: {e}");
            *cat = before;
            let msg = format!("cannot persist the quotas: {e}");
            return vec![Err((ErrorCode::KafkaStorageError, msg)); changes.len()];
        }
    }
    let snapshot = Arc::new(master.borrow().clone());
    shard.broadcast_catalog(snapshot).await;
    for c in &changes {
        tracing::info!(entity = ?c.entity, changes = ?c.ops, "altered client quotas");
    }
    vec![Ok(()); changes.len()]
}
