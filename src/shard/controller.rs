//! Runs controller requests on shard 0, the controller's home: the controller decides and
//! logs the change (`crate::controller`), then this hands the new catalog to every shard
//! and waits until all have applied it, and only then answers. So when a CreateTopics
//! response arrives every shard can already serve the topic, when an AlterConfigs response
//! arrives every partition uses the new settings, and when a CreateAcls response arrives
//! every shard checks requests against the new ACLs.

use std::rc::Rc;
use std::sync::Arc;

use futures_channel::oneshot;

use super::Shard;
use crate::auth::acl::{AclBinding, AclFilter};
use crate::controller::{
    ConfigChange, Controller, CredentialChange, Failure, NewPartitions, NewTopic, QuotaChange, Reassignment,
    TopicResult,
};
use crate::protocol::ErrorCode;

/// A request to the controller, with the channel its answer goes back on.
pub enum ControllerOp {
    CreateTopics {
        topics: Vec<NewTopic>,
        validate_only: bool,
        reply: oneshot::Sender<Vec<TopicResult>>,
    },
    DeleteTopics {
        /// Each topic's name and the id it must still have (nil: any).
        names: Vec<(String, uuid::Uuid)>,
        reply: oneshot::Sender<Vec<Result<uuid::Uuid, ErrorCode>>>,
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
    /// Start, replace or cancel partition reassignments.
    AlterReassignments {
        asks: Vec<Reassignment>,
        reply: oneshot::Sender<Vec<Result<(), Failure>>>,
    },
}

/// An answer that a failed commit turns into that failure for every ask that had passed.
trait Fails {
    fn failed(self, f: &Failure) -> Self;
}

impl<T> Fails for Vec<Result<T, Failure>> {
    fn failed(self, f: &Failure) -> Self {
        self.into_iter().map(|r| r.and(Err(f.clone()))).collect()
    }
}

impl<T> Fails for Vec<Result<T, ErrorCode>> {
    fn failed(self, f: &Failure) -> Self {
        self.into_iter().map(|r| r.and(Err(f.0))).collect()
    }
}

impl<T> Fails for Result<T, Failure> {
    fn failed(self, f: &Failure) -> Self {
        self.and(Err(f.clone()))
    }
}

impl<T> Fails for Result<T, ErrorCode> {
    fn failed(self, f: &Failure) -> Self {
        self.and(Err(f.0))
    }
}

/// How a decided request's records fared: `None` committed (or there were none), or the
/// failure every ask that had passed gets instead.
pub type Committed = Option<Failure>;

/// Sends `value` on `reply` when called, or the failure of the commit it waited for.
fn answer<T: Fails + 'static>(reply: oneshot::Sender<T>, value: T) -> Box<dyn FnOnce(Committed)> {
    Box::new(move |committed: Committed| {
        let _ = reply.send(match committed {
            None => value,
            Some(f) => value.failed(&f),
        });
    })
}

/// Decides `op` on `c` (alone, the controller logs what it decides; in a cluster its records
/// wait to be proposed) and returns its answer, to be sent once the records committed and
/// every shard has the resulting catalog. Fakes of the broker run it too.
pub fn decide(c: &mut Controller, op: ControllerOp) -> Box<dyn FnOnce(Committed)> {
    match op {
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
        ControllerOp::AlterReassignments { asks, reply } => answer(reply, c.alter_reassignments(&asks)),
        ControllerOp::AllocateProducerId { reply } => {
            let id = c.allocate_producer_id().map_err(|(_, why)| {
                tracing::error!("cannot allocate a producer id: {why}");
                ErrorCode::CoordinatorNotAvailable
            });
            answer(reply, id)
        }
    }
}

/// Runs `op` on this shard's controller, publishes the catalog if it changed, then answers.
pub async fn run(shard: &Rc<Shard>, op: ControllerOp) {
    let Some(cell) = shard.controller.as_ref() else {
        // Only shard 0 is sent controller requests, and it always has the controller. The
        // dropped reply tells the asker the controller is unreachable.
        tracing::error!(shard = shard.id.0, "a controller request reached a shard without the controller");
        return drop(op);
    };
    if shard.cluster().is_some() {
        return super::quorum::run(shard, cell, op).await;
    }
    let (before, done) = {
        let mut c = cell.borrow_mut();
        let before = c.catalog().version;
        (before, decide(&mut c, op))
    };
    let now = cell.borrow().catalog().version;
    if now != before {
        let snapshot = Arc::new(cell.borrow().catalog().clone());
        shard.broadcast_catalog(snapshot).await;
    }
    done(None);
}

impl Shard {
    /// Runs the controller request `make(reply)` on shard 0 and waits for its answer.
    pub async fn on_controller<T: Send + 'static>(
        self: &Rc<Self>,
        make: impl FnOnce(oneshot::Sender<T>) -> ControllerOp + Send + 'static,
    ) -> Result<T, ErrorCode> {
        let on_controller = move |here: Rc<Shard>| async move {
            let (tx, rx) = oneshot::channel();
            run(&here, make(tx)).await;
            rx.await.map_err(|_| ErrorCode::NotController)
        };
        if self.id.0 == 0 {
            return on_controller(self.clone()).await;
        }
        self.call(0, on_controller).await?
    }
}
