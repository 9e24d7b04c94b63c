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

use crate::auth::acl::{AclBinding, AclFilter};
use crate::controller::{ConfigChange, CredentialChange, Failure, NewPartitions, NewTopic, QuotaChange, TopicResult};
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
    /// To the controller (shard 0).
    Controller(ControllerOp),
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
    /// To every shard: the groups it coordinates, filtered by state (empty: all).
    ListGroups {
        states: Vec<String>,
        reply: oneshot::Sender<Vec<GroupListing>>,
    },
}

/// A request to the controller, with the channel its answer goes back on.
pub enum ControllerOp {
    CreateTopics {
        topics: Vec<NewTopic>,
        validate_only: bool,
        reply: oneshot::Sender<Vec<TopicResult>>,
    },
    DeleteTopics {
        names: Vec<String>,
        reply: oneshot::Sender<Vec<Result<Uuid, ErrorCode>>>,
    },
    /// Grow topics to these partition counts.
    CreatePartitions {
        asks: Vec<NewPartitions>,
        validate_only: bool,
        reply: oneshot::Sender<Vec<Result<(), Failure>>>,
    },
    /// Change topic or broker configs.
    AlterConfigs {
        changes: Vec<ConfigChange>,
        validate_only: bool,
        reply: oneshot::Sender<Vec<Result<(), Failure>>>,
    },
    AlterClientQuotas {
        changes: Vec<QuotaChange>,
        validate_only: bool,
        reply: oneshot::Sender<Vec<Result<(), Failure>>>,
    },
    CreateAcls {
        bindings: Vec<AclBinding>,
        reply: oneshot::Sender<Result<(), Failure>>,
    },
    /// Delete the ACLs each filter matches.
    DeleteAcls {
        filters: Vec<AclFilter>,
        reply: oneshot::Sender<Result<Vec<Vec<AclBinding>>, Failure>>,
    },
    /// Set or delete users' SCRAM credentials.
    AlterCredentials {
        changes: Vec<(String, CredentialChange)>,
        reply: oneshot::Sender<Vec<Result<(), Failure>>>,
    },
    AllocateProducerId {
        reply: oneshot::Sender<Result<i64, ErrorCode>>,
    },
}
