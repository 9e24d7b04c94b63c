//! The typed messages shards send each other over the mesh. Each carries its reply channel
//! (a oneshot, which wakes the caller's task on its own shard). Record bytes travel as
//! `Bytes` and fetch results as file regions: nothing is copied between shards.

use std::sync::Arc;

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

/// A topic to create, as CreateTopics or auto-creation asks for it.
#[derive(Debug, Clone)]
pub struct NewTopic {
    pub name: String,
    /// -1: the broker default.
    pub partitions: i32,
    pub replication_factor: i16,
    pub configs: std::collections::BTreeMap<String, String>,
}

pub type TopicResult = Result<crate::metadata::TopicMeta, (ErrorCode, String)>;

pub enum Msg {
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
    /// Notify when the high watermark passes `offset` (a delayed fetch waiting for data).
    Watch {
        tp: Tp,
        offset: i64,
        notify: oneshot::Sender<()>,
    },
    Offsets {
        tp: Tp,
        reply: oneshot::Sender<Result<Offsets, ErrorCode>>,
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
    /// To every shard: the groups it coordinates, filtered by state (empty: all).
    ListGroups {
        states: Vec<String>,
        reply: oneshot::Sender<Vec<GroupListing>>,
    },
}
