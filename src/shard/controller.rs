//! Topic creation, deletion and config changes, run on the controller shard (shard 0), the
//! single writer of the catalog: check each request, change the writable catalog, persist it
//! once, then broadcast the new snapshot and wait until every shard has applied it — so when
//! a CreateTopics response arrives, every shard can already serve the topic, and when an
//! IncrementalAlterConfigs response arrives, every partition of the topic uses the new
//! settings.

use std::rc::Rc;
use std::sync::Arc;

use super::{ConfigOp, NewTopic, Shard, TopicConfigChange, TopicResult};
use crate::metadata::check_topic_name;
use crate::protocol::ErrorCode;

/// Topic configs this broker understands; others are refused with INVALID_CONFIG so that a
/// typo does not pass silently.
pub const TOPIC_CONFIGS: &[&str] = &[
    "cleanup.policy",
    "retention.ms",
    "retention.bytes",
    "segment.bytes",
    "segment.ms",
    "max.message.bytes",
    "message.timestamp.type",
    "min.insync.replicas",
    "compression.type",
    "flush.messages",
    "flush.ms",
];

fn check(shard: &Shard, t: &NewTopic) -> Result<u32, (ErrorCode, String)> {
    check_topic_name(&t.name).map_err(|m| (ErrorCode::InvalidTopicException, m))?;
    let partitions = match t.partitions {
        -1 => shard.config.default_partitions,
        n if (1..=100_000).contains(&n) => n as u32,
        n => return Err((ErrorCode::InvalidPartitions, format!("number of partitions must be at least 1, got {n}"))),
    };
    if !(t.replication_factor == -1 || t.replication_factor == 1) {
        return Err((
            ErrorCode::InvalidReplicationFactor,
            format!("replication factor {} is larger than the 1 available broker", t.replication_factor),
        ));
    }
    for (k, v) in &t.configs {
        check_config(k, Some(v))?;
    }
    Ok(partitions)
}

/// A topic config name this broker knows, with a value of the right kind (`None`: deleting it).
fn check_config(k: &str, v: Option<&String>) -> Result<(), (ErrorCode, String)> {
    if !TOPIC_CONFIGS.contains(&k) {
        return Err((ErrorCode::InvalidConfig, format!("unknown topic config {k:?}")));
    }
    let numeric =
        matches!(k, "retention.ms" | "retention.bytes" | "segment.bytes" | "segment.ms" | "max.message.bytes");
    match v {
        Some(v) if numeric && v.parse::<i64>().is_err() => {
            Err((ErrorCode::InvalidConfig, format!("{k} must be a number, got {v:?}")))
        }
        _ => Ok(()),
    }
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
            let r = check(shard, t).and_then(|partitions| {
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

/// Applies each topic's config changes (all of a topic's or none), persists the catalog
/// once, and returns after every shard uses the new settings.
pub async fn alter_topic_configs(
    shard: &Rc<Shard>,
    changes: Vec<TopicConfigChange>,
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
            let r = (|| {
                let Some(topic) = cat.topic(&c.topic) else {
                    return Err((ErrorCode::UnknownTopicOrPartition, format!("topic {:?} does not exist", c.topic)));
                };
                if c.topic == crate::group::offsets::TOPIC {
                    return Err((ErrorCode::InvalidConfig, "the configs of the offsets topic are fixed".to_string()));
                }
                let mut configs = topic.configs.clone();
                for (k, op) in &c.ops {
                    match op {
                        ConfigOp::Set(v) => {
                            check_config(k, Some(v))?;
                            configs.insert(k.clone(), v.clone());
                        }
                        ConfigOp::Delete => {
                            check_config(k, None)?;
                            configs.remove(k);
                        }
                    }
                }
                if !validate_only {
                    cat.set_topic_configs(&c.topic, configs);
                }
                Ok(())
            })();
            changed |= r.is_ok() && !validate_only;
            results.push(r);
        }
        if changed {
            if let Err(e) = cat.persist(&shard.config.data_dir) {
                tracing::error!("cannot persist the catalog: {e}");
                *cat = before;
                let msg = format!("cannot persist topic metadata: {e}");
                return vec![Err((ErrorCode::KafkaStorageError, msg)); changes.len()];
            }
        }
    }
    if changed {
        let snapshot = Arc::new(master.borrow().clone());
        shard.broadcast_catalog(snapshot).await;
        for c in changes.iter().zip(&results).filter(|(_, r)| r.is_ok()).map(|(c, _)| c) {
            tracing::info!(topic = %c.topic, changes = ?c.ops, "altered topic configs");
        }
    }
    results
}
