//! Creating, growing and deleting topics: Kafka's checks and error codes, then the records.

use super::records::Record;
use super::requests::{Failure, NewPartitions, NewTopic, TopicResult};
use super::{assign, plan, Controller};
use crate::group::offsets;
use crate::log::config::Form;
use crate::metadata::{check_creatable, check_topic_name, Catalog};
use crate::protocol::ErrorCode;

/// The most partitions one topic may have.
const MAX_PARTITIONS: i32 = 100_000;

impl Controller {
    /// Creates topics (each one whole or not at all); with `validate_only`, only says what
    /// would happen.
    pub fn create_topics(&mut self, topics: &[NewTopic], validate_only: bool) -> Vec<TopicResult> {
        let planned = plan(&self.state, topics, |cat, t| {
            // Kafka's order: the name, then whether the topic exists (so that a tool creating
            // a topic "if not exists" with arguments this cluster would refuse still learns
            // it exists), then a name colliding in metric names, then the rest.
            check_topic_name(&t.name).map_err(|m| (ErrorCode::InvalidTopicException, m.to_string()))?;
            if cat.topic(&t.name).is_some() {
                return Err((ErrorCode::TopicAlreadyExists, format!("topic {:?} already exists", t.name)));
            }
            if let Some(other) = colliding(cat, &t.name) {
                return Err((
                    ErrorCode::InvalidTopicException,
                    format!(
                        "topic {:?} collides with existing topic {other:?}: '.' and '_' are the same in metric names",
                        t.name
                    ),
                ));
            }
            let (partitions, replicas) = self.check_new_topic(cat, t)?;
            let mut topic = cat.plan_topic(&t.name, partitions, self.ctx.shards, t.configs.clone());
            topic.replicas = replicas;
            Ok((topic.clone(), vec![Record::Topic { topic }]))
        });
        let results = self.finish(planned, validate_only);
        if !validate_only {
            for t in results.iter().flatten() {
                tracing::info!(topic = %t.name, partitions = t.homes.len(), id = %t.id, "created topic");
            }
        }
        results
    }

    /// The new topic's partition count and (in a cluster) replicas, or why it cannot be.
    fn check_new_topic(&self, cat: &Catalog, t: &NewTopic) -> Result<(u32, Vec<Vec<i32>>), Failure> {
        check_creatable(&t.name).map_err(|m| (ErrorCode::InvalidRequest, m))?;
        let partitions = match (&t.assignments, t.partitions) {
            (Some(a), _) if (1..=MAX_PARTITIONS as usize).contains(&a.len()) => a.len() as u32,
            (Some(a), _) => {
                return Err((ErrorCode::InvalidReplicaAssignment, format!("{} partitions assigned", a.len())))
            }
            (None, -1) => self.ctx.default_partitions,
            (None, n) if (1..=MAX_PARTITIONS).contains(&n) => n as u32,
            (None, n) => {
                return Err((ErrorCode::InvalidPartitions, format!("number of partitions must be at least 1, got {n}")))
            }
        };
        if t.assignments.is_some() && t.partitions != -1 {
            return Err((
                ErrorCode::InvalidRequest,
                "give either a number of partitions or replica assignments, not both".into(),
            ));
        }
        if t.assignments.is_some() && t.replication_factor != -1 {
            return Err((
                ErrorCode::InvalidRequest,
                "give either a replication factor or replica assignments, not both".into(),
            ));
        }
        let replicas = self.place(cat, t.assignments.as_deref(), partitions, t.replication_factor)?;
        self.broker_log_config(cat)
            .with(Form::Topic, &t.configs)
            .map_err(|m| (ErrorCode::InvalidConfig, m.to_string()))?;
        Ok((partitions, replicas))
    }

    /// Replicas for `partitions` new partitions: those asked for, checked, or dealt over the
    /// members (`assign`). A broker alone has no replicas to place: it accepts replication
    /// factor 1 and assignments naming only itself.
    fn place(
        &self,
        cat: &Catalog,
        asked: Option<&[Vec<i32>]>,
        partitions: u32,
        rf: i16,
    ) -> Result<Vec<Vec<i32>>, Failure> {
        if self.ctx.members.is_empty() {
            let me = self.ctx.node_id;
            if let Some(bad) = asked.and_then(|a| a.iter().find(|a| a.as_slice() != [me])) {
                return Err((
                    ErrorCode::InvalidReplicaAssignment,
                    format!(
                        "replicas {bad:?}: this cluster has one broker, id {me}, so each partition has replicas [{me}]"
                    ),
                ));
            }
            if !(rf == -1 || rf == 1) {
                return Err((
                    ErrorCode::InvalidReplicationFactor,
                    format!("replication factor {rf} is larger than the 1 available broker"),
                ));
            }
            return Ok(Vec::new());
        }
        let members = self.members();
        if let Some(asked) = asked {
            assign::check(&members, asked)?;
            return Ok(asked.to_vec());
        }
        let rf = match rf {
            -1 => self.ctx.default_replication_factor as usize,
            n if n > 0 => n as usize,
            n => {
                return Err((
                    ErrorCode::InvalidReplicationFactor,
                    format!("replication factor must be positive, got {n}"),
                ))
            }
        };
        // Start where the partitions so far leave off, so leaders spread over topics too.
        let start: usize = cat.topics.values().map(|t| t.replicas.len()).sum();
        assign::assign(&members, partitions, rf, start)
    }

    pub fn create_partitions(&mut self, asks: &[NewPartitions], validate_only: bool) -> Vec<Result<(), Failure>> {
        let planned = plan(&self.state, asks, |cat, ask| {
            let total = self.check_new_partitions(cat, ask)?;
            let mut topic = cat.plan_partitions(&ask.topic, total, self.ctx.shards).expect("checked: the topic grows");
            if topic.replicated() {
                let have = topic.replicas.len() as u32;
                let rf = topic.replicas[0].len() as i16;
                let asked = ask.assignments.as_deref();
                if asked.is_some_and(|a| a.iter().any(|r| r.len() != rf as usize)) {
                    return Err((
                        ErrorCode::InvalidReplicaAssignment,
                        format!("the topic's partitions have {rf} replicas each"),
                    ));
                }
                topic.replicas.extend(self.place(cat, asked, total - have, rf)?);
            }
            Ok(((), vec![Record::Topic { topic }]))
        });
        let results = self.finish(planned, validate_only);
        if !validate_only {
            for ask in asks.iter().zip(&results).filter(|(_, r)| r.is_ok()).map(|(a, _)| a) {
                tracing::info!(topic = %ask.topic, partitions = ask.count, "added partitions");
            }
        }
        results
    }

    /// Why a topic cannot grow as asked, Kafka's checks and codes: a count above the current
    /// one, within the broker's limit, and client-chosen replicas (if any) naming one replica
    /// on this broker for each new partition.
    fn check_new_partitions(&self, cat: &Catalog, ask: &NewPartitions) -> Result<u32, Failure> {
        let Some(topic) = cat.topic(&ask.topic) else {
            return Err((ErrorCode::UnknownTopicOrPartition, format!("topic {:?} does not exist", ask.topic)));
        };
        if ask.topic == offsets::TOPIC {
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
            return Err((
                ErrorCode::InvalidPartitions,
                format!("at most {MAX_PARTITIONS} partitions, got {}", ask.count),
            ));
        }
        if let Some(assignments) = &ask.assignments {
            let new = (ask.count - have) as usize;
            if assignments.len() != new {
                return Err((
                    ErrorCode::InvalidReplicaAssignment,
                    format!("{} replica assignments for {new} new partitions", assignments.len()),
                ));
            }
            if !topic.replicated() {
                self.place(cat, Some(assignments), new as u32, -1)?;
            }
        }
        Ok(ask.count as u32)
    }

    /// Deletes topics by name; the offsets topic cannot be deleted.
    /// Deletes topics by name; one given with a non-nil id only if it still has that id
    /// (asked by id, at a broker whose catalog may predate a topic created again under the
    /// name: UNKNOWN_TOPIC_ID otherwise).
    pub fn delete_topics(&mut self, names: &[(String, uuid::Uuid)]) -> Vec<Result<uuid::Uuid, ErrorCode>> {
        let planned = plan(&self.state, names, |cat, (name, id)| {
            if name == offsets::TOPIC {
                return Err((ErrorCode::InvalidTopicException, "the offsets topic cannot be deleted".into()));
            }
            let t = match cat.topic(name) {
                Some(t) if !id.is_nil() && t.id != *id => return Err((ErrorCode::UnknownTopicId, String::new())),
                Some(t) => t,
                None if !id.is_nil() => return Err((ErrorCode::UnknownTopicId, String::new())),
                None => return Err((ErrorCode::UnknownTopicOrPartition, String::new())),
            };
            Ok((t.id, vec![Record::RemoveTopic { name: name.clone() }]))
        });
        let results = self.finish(planned, false);
        for ((name, _), _) in names.iter().zip(&results).filter(|(_, r)| r.is_ok()) {
            tracing::info!(topic = %name, "deleted topic");
        }
        results.into_iter().map(|r| r.map_err(|(code, _)| code)).collect()
    }
}

/// An existing topic whose name differs from `name` only by '.' against '_' (Kafka refuses
/// such a pair: its metric names would be the same).
fn colliding<'a>(cat: &'a Catalog, name: &str) -> Option<&'a str> {
    let unified = |n: &str| n.replace('.', "_");
    if !name.contains(['.', '_']) {
        return None;
    }
    let wanted = unified(name);
    cat.topics.keys().map(String::as_str).find(|other| other.contains(['.', '_']) && unified(other) == wanted)
}
