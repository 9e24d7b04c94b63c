//! What the controller is asked to do, as the API handlers put it.

use std::collections::BTreeMap;

use crate::auth::scram::{Mechanism, ScramCredential};
use crate::metadata::TopicMeta;
use crate::protocol::ErrorCode;

/// Why a change was refused: a Kafka error code and the message the client gets.
pub type Failure = (ErrorCode, String);

/// A topic to create, as CreateTopics or auto-creation asks for it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct NewTopic {
    pub name: String,
    /// -1: the broker default.
    pub partitions: i32,
    pub replication_factor: i16,
    /// Replicas asked for explicitly, by partition (CreateTopics' `assignments`); they set
    /// the partition count and replication factor.
    pub assignments: Option<Vec<Vec<i32>>>,
    pub configs: BTreeMap<String, String>,
}

pub type TopicResult = Result<TopicMeta, Failure>;

/// CreatePartitions for one topic: the new total, and the replicas the client chose for each
/// new partition (broker ids), if it chose.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct NewPartitions {
    pub topic: String,
    pub count: i32,
    pub assignments: Option<Vec<Vec<i32>>>,
}

/// AlterPartitionReassignments for one partition: its target replicas (the preferred leader
/// first), or None to cancel the reassignment under way.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Reassignment {
    pub topic: String,
    pub partition: i32,
    pub target: Option<Vec<i32>>,
    /// Whether the target may have another replica count (v1's flag; v0 allows it).
    pub allow_replication_factor_change: bool,
}

/// One change to a config: set it to a value, delete it (back to the default), or, for a
/// list config, add or remove items of its current value (IncrementalAlterConfigs APPEND and
/// SUBTRACT).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ConfigOp {
    Set(String),
    Delete,
    Append(String),
    Subtract(String),
}

/// Whose dynamic configs change.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ConfigTarget {
    Topic(String),
    /// The cluster-wide broker defaults (the BROKER resource named "").
    BrokerDefault,
    /// One broker's own (the BROKER resource named by its node id): the node id.
    Broker(i32),
}

/// The config changes AlterConfigs or IncrementalAlterConfigs asks for on one resource.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ConfigChange {
    pub target: ConfigTarget,
    pub ops: Vec<(String, ConfigOp)>,
    /// AlterConfigs (the legacy API): the resource's dynamic configs become exactly the
    /// ones set, every other one going back to its default.
    pub replace: bool,
}

/// AlterClientQuotas for one entity: each quota key set to a value or removed (`None`).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct QuotaChange {
    pub entity: crate::quota::QuotaEntity,
    pub ops: Vec<(String, Option<f64>)>,
}

/// A change to the credentials of one user and mechanism.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub enum CredentialChange {
    Upsert(ScramCredential),
    Delete(Mechanism),
}
