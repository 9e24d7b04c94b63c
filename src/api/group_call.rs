//! Running an operation on a group's home shard from an API handler, and the checks that
//! come before it.

use futures_channel::oneshot;

use super::{authz, Broker, Request};
use crate::auth::acl::Operation;
use crate::group::GroupOp;
use crate::protocol::ErrorCode;

/// Whether the request may do `op` on `group` (Kafka: READ to be a member or commit, DESCRIBE
/// to look, DELETE to delete), and then whether the id is one: GROUP_AUTHORIZATION_FAILED or
/// INVALID_GROUP_ID, in that order, as Kafka's broker checks before its coordinator.
pub(super) fn admit(broker: &impl Broker, req: &Request, group: &str, op: Operation) -> Result<(), ErrorCode> {
    if !authz::group(broker, req, op, group) {
        return Err(ErrorCode::GroupAuthorizationFailed);
    }
    if group.is_empty() {
        return Err(ErrorCode::InvalidGroupId);
    }
    Ok(())
}

/// Runs `make(reply)` on the group's home shard and waits for the reply; a home that
/// cannot be reached is COORDINATOR_NOT_AVAILABLE, which clients retry.
pub(super) async fn call<T: Send + 'static>(
    broker: &impl Broker,
    group: &str,
    make: impl FnOnce(oneshot::Sender<T>) -> GroupOp + Send + 'static,
) -> Result<T, ErrorCode> {
    broker.group_op(group.to_string(), make).await
}

/// A member id for a new member: `<client id>-<uuid>`, as Kafka makes them.
pub(super) fn fresh_member_id(client_id: Option<&str>) -> String {
    format!("{}-{}", client_id.unwrap_or(""), uuid::Uuid::new_v4())
}

pub(super) fn opt_str(s: &Option<proto_kafka::protocol::StrBytes>) -> Option<String> {
    s.as_ref().map(|s| s.to_string())
}
