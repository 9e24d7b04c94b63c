//! Partition reassignments (`kafka-reassign-partitions`): the controller records a
//! partition's target replicas, the partition's leader moves its raft group there (learners
//! added, caught up, one joint configuration change, left; `shard::reassign`), and when the
//! group's voters are the target the leader reports it (`complete_reassignment`) and the
//! target becomes the partition's replicas. Brokers open a replica as soon as they are in a
//! target and delete theirs only once they are no longer in the replicas, so no broker drops
//! data raft may still count on.
//!
//! Cancelling a reassignment (a null target) makes the current replicas the target again: the
//! leader undoes the steps it took (learners removed) and the same report ends it.

use super::assign;
use super::records::Record;
use super::requests::{Failure, Reassignment};
use super::{plan, Controller};
use crate::metadata::{Catalog, TopicMeta};
use crate::protocol::ErrorCode;

impl Controller {
    /// Starts, replaces or cancels each reassignment (Kafka's AlterPartitionReassignments).
    pub fn alter_reassignments(&mut self, asks: &[Reassignment]) -> Vec<Result<(), Failure>> {
        let planned = plan(&self.state, asks, |cat, ask| {
            let topic = self.check_reassignment(cat, ask)?;
            let p = ask.partition;
            let mut t = topic.clone();
            match &ask.target {
                None => {
                    if !t.reassigning.contains_key(&p) {
                        return Err((
                            ErrorCode::NoReassignmentInProgress,
                            format!("partition {}-{p} is not being reassigned", t.name),
                        ));
                    }
                    // Back to where it started: the leader undoes what it added.
                    let replaced = t.reassigning.insert(p, t.replicas_of(p).to_vec());
                    retire(&mut t, p, replaced);
                }
                // Already there (a broker alone: its own id, checked above).
                Some(target)
                    if !t.replicated()
                        || (target.as_slice() == t.replicas_of(p) && !t.reassigning.contains_key(&p)) =>
                {
                    return Ok((false, Vec::new()));
                }
                Some(target) => {
                    t.first_voters.entry(p).or_insert_with(|| topic.replicas_of(p).to_vec());
                    let replaced = t.reassigning.insert(p, target.clone());
                    retire(&mut t, p, replaced);
                }
            }
            Ok((true, vec![Record::Topic { topic: t }]))
        });
        let results = self.finish(planned, false);
        for (ask, _) in asks.iter().zip(&results).filter(|(_, r)| matches!(r, Ok(true))) {
            match &ask.target {
                Some(target) => tracing::info!(topic = %ask.topic, partition = ask.partition, ?target, "reassigning"),
                None => tracing::info!(topic = %ask.topic, partition = ask.partition, "cancelling a reassignment"),
            }
        }
        results.into_iter().map(|r| r.map(drop)).collect()
    }

    /// The topic of a reassignment that may go ahead, or why it may not.
    fn check_reassignment<'c>(&self, cat: &'c Catalog, ask: &Reassignment) -> Result<&'c TopicMeta, Failure> {
        let unknown = || {
            (ErrorCode::UnknownTopicOrPartition, format!("partition {}-{} does not exist", ask.topic, ask.partition))
        };
        let topic = cat.topic(&ask.topic).ok_or_else(unknown)?;
        if !(0..topic.partitions()).contains(&ask.partition) {
            return Err(unknown());
        }
        let Some(target) = &ask.target else { return Ok(topic) };
        if !topic.replicated() {
            let me = self.ctx.node_id;
            if target.as_slice() == [me] {
                return Ok(topic);
            }
            return Err((
                ErrorCode::InvalidReplicaAssignment,
                format!("replicas {target:?}: this broker runs alone, so each partition has replicas [{me}]"),
            ));
        }
        assign::check(&self.members(), std::slice::from_ref(target))
            .map_err(|(code, why)| (code, why.replacen("partition 0", &format!("partition {}", ask.partition), 1)))?;
        let rf = topic.replicas_of(ask.partition).len();
        if !ask.allow_replication_factor_change && target.len() != rf {
            return Err((
                ErrorCode::InvalidReplicationFactor,
                format!(
                    "the target has {} replicas where the partition has {rf}, and the request does not allow a change",
                    target.len()
                ),
            ));
        }
        Ok(topic)
    }

    /// The leader of a reassigned partition reports its raft group's voters are the target:
    /// the target becomes the partition's replicas. Refused if no reassignment to those
    /// voters is under way (it was replaced or cancelled since).
    pub fn complete_reassignment(&mut self, topic: &str, partition: i32, voters: &[i32]) -> Result<(), Failure> {
        let stale = |why: &str| Err((ErrorCode::InvalidRequest, format!("{topic}-{partition}: {why}")));
        let Some(t) = self.state.topic(topic) else { return stale("the topic no longer exists") };
        let Some(target) = t.reassigning.get(&partition) else { return stale("no reassignment is under way") };
        let (mut want, mut have) = (target.clone(), voters.to_vec());
        want.sort_unstable();
        have.sort_unstable();
        if want != have {
            return stale(&format!("the target is now {target:?}, not the voters {voters:?}"));
        }
        let mut t = t.clone();
        t.replicas[partition as usize] = t.reassigning.remove(&partition).expect("checked above");
        // The group's voters are the target now: brokers of an earlier target may go.
        t.retiring.remove(&partition);
        tracing::info!(topic, partition, replicas = ?t.replicas[partition as usize], "reassignment complete");
        self.commit(vec![Record::Topic { topic: t }])
    }
}

/// Keeps the brokers of a target being replaced (cancelled, or replaced by another) among
/// the partition's holders: its leader may have moved the raft group to them already, and
/// were their replicas deleted, a group whose voters are all gone would never serve again.
fn retire(t: &mut TopicMeta, p: i32, replaced: Option<Vec<i32>>) {
    let Some(replaced) = replaced else { return };
    let keep: Vec<i32> = replaced.into_iter().filter(|b| !t.replicas_of(p).contains(b)).collect();
    let retiring = t.retiring.entry(p).or_default();
    for b in keep {
        if !retiring.contains(&b) {
            retiring.push(b);
        }
    }
    if retiring.is_empty() {
        t.retiring.remove(&p);
    }
}

/// A reassignment as ListPartitionReassignments shows it: all replicas (the target first),
/// those being added and those being removed.
pub struct Ongoing {
    pub replicas: Vec<i32>,
    pub adding: Vec<i32>,
    pub removing: Vec<i32>,
}

/// Partition `p`'s reassignment under way, if any.
pub fn ongoing(t: &TopicMeta, p: i32) -> Option<Ongoing> {
    let target = t.reassigning.get(&p)?;
    let current = t.replicas_of(p);
    Some(Ongoing {
        replicas: t.holders_of(p),
        adding: target.iter().filter(|r| !current.contains(r)).copied().collect(),
        removing: current.iter().filter(|r| !target.contains(r)).copied().collect(),
    })
}
