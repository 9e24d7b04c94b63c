//! What goes into and comes out of the group state machine: the JoinGroup and SyncGroup
//! requests and replies, the effects the driver delivers, and a member as DescribeGroups
//! shows it.

use bytes::Bytes;

use crate::protocol::ErrorCode;

/// Identifies a request waiting for a JoinGroup or SyncGroup answer.
pub type Token = u64;

#[derive(Debug, Clone)]
pub struct JoinRequest {
    pub token: Token,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: u64,
    pub rebalance_timeout_ms: u64,
    pub protocol_type: String,
    /// (name, metadata) in the member's order of preference.
    pub protocols: Vec<(String, Bytes)>,
    /// v4+: a member without an id gets one and must join again with it (KIP-394).
    pub require_known_member_id: bool,
    /// An id to give this member if it needs one (the driver makes it unique).
    pub fresh_member_id: String,
    /// v9+ (KIP-814): a returning static leader can be told to skip computing an assignment.
    pub supports_skip_assignment: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinedMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub metadata: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JoinResponse {
    pub error: Option<ErrorCode>,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub member_id: String,
    /// Every member with its metadata for the chosen protocol: for the leader only.
    pub members: Vec<JoinedMember>,
    /// The leader must not assign: the group keeps its current assignment (KIP-814).
    pub skip_assignment: bool,
}

impl JoinResponse {
    pub fn error(e: ErrorCode, member_id: &str) -> JoinResponse {
        JoinResponse { error: Some(e), generation: -1, member_id: member_id.to_string(), ..Default::default() }
    }
}

#[derive(Debug, Clone)]
pub struct SyncRequest {
    pub token: Token,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignments: Vec<(String, Bytes)>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SyncResponse {
    pub error: Option<ErrorCode>,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

impl SyncResponse {
    pub fn error(e: ErrorCode) -> SyncResponse {
        SyncResponse { error: Some(e), ..Default::default() }
    }
}

/// A reply the driver must deliver, or the group to store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    Join(Token, JoinResponse),
    Sync(Token, SyncResponse),
    /// Store the group as it is now (`Group::to_metadata`) before delivering the effects
    /// after this one: they tell members about a generation that must survive a coordinator
    /// change. If the store fails, they are answered with its error instead.
    Store,
}

/// What DescribeGroups shows of a member.
#[derive(Debug, Clone)]
pub struct MemberView {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub metadata: Bytes,
    pub assignment: Bytes,
}
