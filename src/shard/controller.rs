//! Runs controller requests on shard 0, the controller's home: the controller decides and
//! logs the change (`crate::controller`), then this hands the new catalog to every shard
//! and waits until all have applied it, and only then answers. So when a CreateTopics
//! response arrives every shard can already serve the topic, when an AlterConfigs response
//! arrives every partition uses the new settings, and when a CreateAcls response arrives
//! every shard checks requests against the new ACLs.

use std::rc::Rc;
use std::sync::Arc;

use futures_channel::oneshot;

use super::message::ControllerOp;
use super::Shard;
use crate::protocol::ErrorCode;

/// Sends `value` on `reply` when called: an answer held back until the catalog is out.
fn answer<T: 'static>(reply: oneshot::Sender<T>, value: T) -> Box<dyn FnOnce()> {
    Box::new(move || {
        let _ = reply.send(value);
    })
}

/// Runs `op` on this shard's controller, publishes the catalog if it changed, then answers.
pub async fn run(shard: &Rc<Shard>, op: ControllerOp) {
    let Some(cell) = shard.controller.as_ref() else {
        // Only shard 0 is sent controller requests, and it always has the controller. The
        // dropped reply tells the asker the controller is unreachable.
        tracing::error!(shard = shard.id.0, "a controller request reached a shard without the controller");
        return drop(op);
    };
    let (before, done) = {
        let mut c = cell.borrow_mut();
        let before = c.catalog().version;
        let done = match op {
            ControllerOp::CreateTopics { topics, validate_only, reply } => {
                answer(reply, c.create_topics(&topics, validate_only))
            }
            ControllerOp::DeleteTopics { names, reply } => answer(reply, c.delete_topics(&names)),
            ControllerOp::CreatePartitions { asks, validate_only, reply } => {
                answer(reply, c.create_partitions(&asks, validate_only))
            }
            ControllerOp::AlterConfigs { changes, validate_only, reply } => {
                answer(reply, c.alter_configs(&changes, validate_only))
            }
            ControllerOp::AlterClientQuotas { changes, validate_only, reply } => {
                answer(reply, c.alter_client_quotas(&changes, validate_only))
            }
            ControllerOp::CreateAcls { bindings, reply } => answer(reply, c.create_acls(&bindings)),
            ControllerOp::DeleteAcls { filters, reply } => answer(reply, c.delete_acls(&filters)),
            ControllerOp::AlterCredentials { changes, reply } => answer(reply, c.alter_credentials(&changes)),
            ControllerOp::AllocateProducerId { reply } => {
                let id = c.allocate_producer_id().map_err(|(_, why)| {
                    tracing::error!("cannot allocate a producer id: {why}");
                    ErrorCode::CoordinatorNotAvailable
                });
                answer(reply, id)
            }
        };
        (before, done)
    };
    let now = cell.borrow().catalog().version;
    if now != before {
        let snapshot = Arc::new(cell.borrow().catalog().clone());
        shard.broadcast_catalog(snapshot).await;
    }
    done();
}
