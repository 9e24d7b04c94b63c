//! Running an operation on a group's home shard from an API handler.

use futures_channel::oneshot;

use crate::group::GroupOp;
use crate::protocol::ErrorCode;
use crate::shard::Shard;

/// Sends `make(reply)` to the group's home shard and waits for the reply. A reply channel
/// dropped on the way (home unreachable, shutting down) is COORDINATOR_NOT_AVAILABLE, which
/// clients retry.
pub async fn call<T>(
    shard: &Shard,
    group: &str,
    make: impl FnOnce(oneshot::Sender<T>) -> GroupOp,
) -> Result<T, ErrorCode> {
    let (tx, rx) = oneshot::channel();
    shard.group_op(group.to_string(), make(tx)).await;
    rx.await.map_err(|_| ErrorCode::CoordinatorNotAvailable)
}

/// A member id for a new member: `<client id>-<uuid>`, as Kafka makes them.
pub fn fresh_member_id(client_id: Option<&str>) -> String {
    format!("{}-{}", client_id.unwrap_or(""), uuid::Uuid::new_v4())
}

pub fn opt_str(s: &Option<proto_kafka::protocol::StrBytes>) -> Option<String> {
    s.as_ref().map(|s| s.to_string())
}
