//! The typed messages shards send each other over the mesh. Record bytes travel as `Bytes`
//! and fetch results as file regions: nothing is copied between shards.
//!
//! A request's reply channel (a oneshot) is only ever completed and awaited on the *home*
//! shard: a remote request travels inside `Msg::Call` together with a relay future that
//! awaits the reply there and sends it back as `Msg::Reply`. glommio 0.9 must not have a task
//! woken from another thread: such a foreign wake races with the task's own reference
//! counting, seen as a double free under load.

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_channel::oneshot;
use uuid::Uuid;

use crate::group::{GroupListing, GroupOp};
use crate::log::{Appended, Offsets, ReadOut};
use crate::metadata::Catalog;
use crate::protocol::ErrorCode;

/// A topic partition by topic id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Tp {
    pub topic: Uuid,
    pub partition: i32,
}

/// One change to a config: set it to a value, delete it (back to the default), or, for a
/// list config, add or remove items of its current value (IncrementalAlterConfigs APPEND and
/// SUBTRACT).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigOp {
    Set(String),
    Delete,
    Append(String),
    Subtract(String),
}

/// Whose dynamic configs change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigTarget {
    Topic(String),
    /// The cluster-wide broker defaults (the BROKER resource named "").
    BrokerDefault,
    /// This broker's own (the BROKER resource named by its node id).
    Broker,
}

/// The config changes AlterConfigs or IncrementalAlterConfigs asks for on one resource.
#[derive(Debug, Clone)]
pub struct ConfigChange {
    pub target: ConfigTarget,
    pub ops: Vec<(String, ConfigOp)>,
    /// AlterConfigs (the legacy API): the resource's dynamic configs become exactly the
    /// ones set, every other one going back to its default.
    pub replace: bool,
}

/// A topic to create, as CreateTopics or auto-creation asks for it.
#[derive(Debug, Clone)]
pub struct NewTopic {
    pub name: String,
    /// -1: the broker default.
    pub partitions: i32,
    pub replication_factor: i16,
    pub configs: std::collections::BTreeMap<String, String>,
}

/// AlterClientQuotas for one entity: each quota key set to a value or removed (`None`).
#[derive(Debug, Clone)]
pub struct QuotaChange {
    pub entity: crate::quota::QuotaEntity,
    pub ops: Vec<(String, Option<f64>)>,
}

/// CreatePartitions for one topic: the new total, and the replicas the client chose for each
/// new partition (broker ids), if it chose.
#[derive(Debug, Clone)]
pub struct NewPartitions {
    pub topic: String,
    pub count: i32,
    pub assignments: Option<Vec<Vec<i32>>>,
}

pub type TopicResult = Result<crate::metadata::TopicMeta, (ErrorCode, String)>;

/// Awaits a request's reply on the home shard, type-erased for the trip back.
pub type Relay = Pin<Box<dyn Future<Output = Box<dyn Any + Send>> + Send>>;

pub enum Msg {
    /// A request from shard `origin`; `relay` resolves with the reply, which goes back as
    /// `Reply { id }`.
    Call {
        origin: usize,
        id: u64,
        msg: Box<Msg>,
        relay: Relay,
    },
    Reply {
        id: u64,
        value: Box<dyn Any + Send>,
    },
    Produce {
        tp: Tp,
        records: Bytes,
        reply: oneshot::Sender<Result<Appended, ErrorCode>>,
    },
    Fetch {
        tp: Tp,
        offset: i64,
        max_bytes: u32,
        reply: oneshot::Sender<Result<ReadOut, ErrorCode>>,
    },
    /// Answer when the high watermark passes `offset` or `wait` has passed (a delayed fetch).
    Watch {
        tp: Tp,
        offset: i64,
        wait: Duration,
        reply: oneshot::Sender<()>,
    },
    Offsets {
        tp: Tp,
        reply: oneshot::Sender<Result<Offsets, ErrorCode>>,
    },
    /// DeleteRecords: move the log start (-1: to the high watermark); the new log start.
    DeleteRecords {
        tp: Tp,
        offset: i64,
        reply: oneshot::Sender<Result<i64, ErrorCode>>,
    },
    /// DescribeProducers: the partition's idempotent producers.
    Producers {
        tp: Tp,
        reply: oneshot::Sender<Result<Vec<crate::producer::ProducerSummary>, ErrorCode>>,
    },
    /// ListOffsets by timestamp (or -3 for the max timestamp): (offset, timestamp).
    OffsetForTime {
        tp: Tp,
        timestamp: i64,
        reply: oneshot::Sender<Result<Option<(i64, i64)>, ErrorCode>>,
    },
    /// To the controller.
    CreateTopics {
        topics: Vec<NewTopic>,
        validate_only: bool,
        reply: oneshot::Sender<Vec<TopicResult>>,
    },
    /// To the controller: change topic or broker configs.
    AlterConfigs {
        changes: Vec<ConfigChange>,
        validate_only: bool,
        reply: oneshot::Sender<Vec<Result<(), (ErrorCode, String)>>>,
    },
    /// To the controller: grow topics to these partition counts.
    CreatePartitions {
        asks: Vec<NewPartitions>,
        validate_only: bool,
        reply: oneshot::Sender<Vec<Result<(), (ErrorCode, String)>>>,
    },
    /// To the controller: set or remove client quotas.
    AlterClientQuotas {
        changes: Vec<QuotaChange>,
        validate_only: bool,
        reply: oneshot::Sender<Vec<Result<(), (ErrorCode, String)>>>,
    },
    /// To the controller: delete by name.
    DeleteTopics {
        names: Vec<String>,
        reply: oneshot::Sender<Vec<Result<Uuid, ErrorCode>>>,
    },
    /// From the controller: a new catalog snapshot to apply (open/close local partitions).
    ApplyCatalog {
        catalog: Arc<Catalog>,
        reply: oneshot::Sender<()>,
    },
    /// To a group's home shard.
    Group {
        group: String,
        op: GroupOp,
    },
    /// To the controller: a new producer id.
    AllocateProducerId {
        reply: oneshot::Sender<Result<i64, ErrorCode>>,
    },
    /// To the controller: add ACLs.
    CreateAcls {
        bindings: Vec<crate::auth::acl::AclBinding>,
        reply: oneshot::Sender<Result<(), super::security::Failure>>,
    },
    /// To the controller: delete the ACLs each filter matches.
    DeleteAcls {
        filters: Vec<crate::auth::acl::AclFilter>,
        reply: oneshot::Sender<Result<Vec<Vec<crate::auth::acl::AclBinding>>, super::security::Failure>>,
    },
    /// To the controller: set or delete users' SCRAM credentials.
    AlterCredentials {
        changes: Vec<(String, super::security::CredentialChange)>,
        reply: oneshot::Sender<Vec<Result<(), (ErrorCode, String)>>>,
    },
    /// To every shard: the groups it coordinates, filtered by state (empty: all).
    ListGroups {
        states: Vec<String>,
        reply: oneshot::Sender<Vec<GroupListing>>,
    },
}
