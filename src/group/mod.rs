//! Consumer groups: the classic group protocol (`state`, pure), committed offsets and their
//! record format (`offsets`, pure), a group's stored membership (`metadata`, pure), and the
//! per-shard driver that owns the groups homed on
//! its shard (`coordinator`). A group's home is the shard that homes its partition of
//! `__consumer_offsets` (`offsets::partition_for`), so a group's offsets are always
//! appended to a local log.

pub mod coordinator;
pub mod metadata;
pub mod offsets;
pub mod state;

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use futures_channel::oneshot;

use crate::protocol::ErrorCode;
pub use offsets::Committed;
pub use state::{GroupLimits, JoinRequest, JoinResponse, SyncRequest, SyncResponse};

/// Where a coordinator makes its records durable: its group's partition of
/// `__consumer_offsets`. The shard hands it that partition's log (so `group` needs nothing of
/// `log`); unit tests hand it memory.
pub trait OffsetsLog {
    /// Appends one batch of offset records; resolves once it is durable. A failure is
    /// COORDINATOR_NOT_AVAILABLE to the client, which retries.
    fn append(&self, batch: Bytes) -> Pin<Box<dyn Future<Output = Result<(), ErrorCode>>>>;
}

/// One offset to commit.
#[derive(Debug, Clone)]
pub struct CommitEntry {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
}

/// A group as DescribeGroups shows it.
#[derive(Debug, Clone, Default)]
pub struct GroupDescription {
    pub found: bool,
    pub state: String,
    pub protocol_type: String,
    pub protocol: String,
    pub members: Vec<state::MemberView>,
}

/// A group as ListGroups shows it.
#[derive(Debug, Clone)]
pub struct GroupListing {
    pub group_id: String,
    pub protocol_type: String,
    pub state: String,
}

pub type PerEntry = Vec<Result<(), ErrorCode>>;

/// An operation on one group, run on its home shard; each carries its reply channel.
pub enum GroupOp {
    Join {
        req: JoinRequest,
        reply: oneshot::Sender<JoinResponse>,
    },
    Sync {
        req: SyncRequest,
        reply: oneshot::Sender<SyncResponse>,
    },
    Heartbeat {
        member_id: String,
        instance_id: Option<String>,
        generation: i32,
        reply: oneshot::Sender<Result<(), ErrorCode>>,
    },
    Leave {
        members: Vec<(String, Option<String>)>,
        reply: oneshot::Sender<Result<PerEntry, ErrorCode>>,
    },
    Commit {
        member_id: String,
        instance_id: Option<String>,
        generation: i32,
        entries: Vec<CommitEntry>,
        reply: oneshot::Sender<Result<(), ErrorCode>>,
    },
    /// `None`: every committed offset of the group.
    FetchOffsets {
        topics: Option<Vec<(String, Vec<i32>)>>,
        reply: oneshot::Sender<Vec<(String, i32, Option<Committed>)>>,
    },
    Describe {
        reply: oneshot::Sender<GroupDescription>,
    },
    Delete {
        reply: oneshot::Sender<Result<(), ErrorCode>>,
    },
    DeleteOffsets {
        partitions: Vec<(String, i32)>,
        reply: oneshot::Sender<Result<PerEntry, ErrorCode>>,
    },
}
