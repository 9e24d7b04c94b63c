//! Admin requests that reach a cluster member which does not lead the metadata quorum are
//! forwarded to the leader (as Kafka's brokers forward them to the active controller), which
//! decides them as its own and sends back the answer. Kafka's admin client sends most of them
//! to the `controller_id` anyway; some go to a given broker (a broker's own configs, such as
//! the replication throttles `kafka-reassign-partitions --verify` clears), and every one may
//! cross a controller change.

use std::rc::Rc;

use futures_channel::oneshot;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::controller::ControllerOp;
use super::quorum::{unwire, wire, Answer, Call};
use super::Shard;
use crate::auth::acl::{AclBinding, AclFilter};
use crate::controller::{ConfigChange, CredentialChange, Failure, NewPartitions, QuotaChange, Reassignment};
use crate::protocol::ErrorCode;

/// A controller request as it travels to the leader (its reply channel stays behind).
#[derive(Debug, Serialize, Deserialize)]
pub(super) enum Forwarded {
    DeleteTopics(Vec<(String, uuid::Uuid)>),
    CreatePartitions(Vec<NewPartitions>, bool),
    AlterConfigs(Vec<ConfigChange>, bool),
    AlterClientQuotas(Vec<QuotaChange>, bool),
    CreateAcls(Vec<AclBinding>),
    DeleteAcls(Vec<AclFilter>),
    AlterCredentials(Vec<(String, CredentialChange)>),
    AlterReassignments(Vec<Reassignment>),
}

type WireFailure = (i16, String);

fn many_out<T>(v: Vec<Result<T, Failure>>) -> Vec<Result<T, WireFailure>> {
    v.into_iter().map(|r| r.map_err(wire)).collect()
}

fn many_in<T>(v: Vec<Result<T, WireFailure>>) -> Vec<Result<T, Failure>> {
    v.into_iter().map(|r| r.map_err(unwire)).collect()
}

fn code_of(code: i16) -> ErrorCode {
    ErrorCode::try_from_code(code).unwrap_or(ErrorCode::UnknownServerError)
}

impl Shard {
    /// At a member that does not lead: sends `op` to the leader and answers it with the
    /// leader's answer. Requests that are not forwarded come back.
    pub(super) async fn forward(self: &Rc<Self>, op: ControllerOp) -> Option<ControllerOp> {
        match op {
            ControllerOp::DeleteTopics { names, reply } => {
                let n = names.len();
                let r = self.forwarded::<Vec<Result<uuid::Uuid, i16>>>(Forwarded::DeleteTopics(names)).await;
                let _ = reply.send(match r {
                    Ok(v) => v.into_iter().map(|r| r.map_err(code_of)).collect(),
                    Err(f) => vec![Err(f.0); n],
                });
            }
            ControllerOp::CreatePartitions { asks, validate_only, reply } => {
                let n = asks.len();
                self.forward_many(Forwarded::CreatePartitions(asks, validate_only), n, reply).await
            }
            ControllerOp::AlterConfigs { changes, validate_only, reply } => {
                let n = changes.len();
                self.forward_many(Forwarded::AlterConfigs(changes, validate_only), n, reply).await
            }
            ControllerOp::AlterClientQuotas { changes, validate_only, reply } => {
                let n = changes.len();
                self.forward_many(Forwarded::AlterClientQuotas(changes, validate_only), n, reply).await
            }
            ControllerOp::AlterCredentials { changes, reply } => {
                let n = changes.len();
                self.forward_many(Forwarded::AlterCredentials(changes), n, reply).await
            }
            ControllerOp::AlterReassignments { asks, reply } => {
                let n = asks.len();
                self.forward_many(Forwarded::AlterReassignments(asks), n, reply).await
            }
            ControllerOp::CreateAcls { bindings, reply } => {
                let r = self.forwarded::<Result<(), WireFailure>>(Forwarded::CreateAcls(bindings)).await;
                let _ = reply.send(r.and_then(|r| r.map_err(unwire)));
            }
            ControllerOp::DeleteAcls { filters, reply } => {
                let r =
                    self.forwarded::<Result<Vec<Vec<AclBinding>>, WireFailure>>(Forwarded::DeleteAcls(filters)).await;
                let _ = reply.send(r.and_then(|r| r.map_err(unwire)));
            }
            op => return Some(op),
        }
        None
    }

    async fn forward_many(self: &Rc<Self>, f: Forwarded, n: usize, reply: oneshot::Sender<Vec<Result<(), Failure>>>) {
        let r = self.forwarded::<Vec<Result<(), WireFailure>>>(f).await;
        let _ = reply.send(match r {
            Ok(v) => many_in(v),
            Err(f) => vec![Err(f); n],
        });
    }

    /// Sends a forwarded request to the leader and reads its answer as `T`.
    async fn forwarded<T: DeserializeOwned>(self: &Rc<Self>, f: Forwarded) -> Result<T, Failure> {
        match self.call_controller(Call::Forward(f)).await? {
            Answer::Forwarded(value) => serde_json::from_value(value)
                .map_err(|e| (ErrorCode::UnknownServerError, format!("bad answer from the controller: {e}"))),
            Answer::Refused(code, why) => Err(unwire((code, why))),
            other => Err((ErrorCode::UnknownServerError, format!("unexpected answer {other:?}"))),
        }
    }

    /// As the leader: decides a forwarded request and returns its answer for the member.
    pub(super) async fn decide_forwarded(self: &Rc<Self>, f: Forwarded) -> Answer {
        fn value(v: impl Serialize) -> Answer {
            Answer::Forwarded(serde_json::to_value(v).expect("answers serialize"))
        }
        async fn asked<T>(shard: &Rc<Shard>, make: impl FnOnce(oneshot::Sender<T>) -> ControllerOp) -> Option<T> {
            let (tx, rx) = oneshot::channel();
            super::quorum::decide_here(shard, make(tx)).await;
            rx.await.ok() // dropped: this broker stopped leading
        }
        let answer = match f {
            Forwarded::DeleteTopics(names) => asked(self, |reply| ControllerOp::DeleteTopics { names, reply })
                .await
                .map(|v| value(v.into_iter().map(|r| r.map_err(|e| e.code())).collect::<Vec<_>>())),
            Forwarded::CreatePartitions(asks, validate_only) => {
                asked(self, |reply| ControllerOp::CreatePartitions { asks, validate_only, reply })
                    .await
                    .map(|v| value(many_out(v)))
            }
            Forwarded::AlterConfigs(changes, validate_only) => {
                asked(self, |reply| ControllerOp::AlterConfigs { changes, validate_only, reply })
                    .await
                    .map(|v| value(many_out(v)))
            }
            Forwarded::AlterClientQuotas(changes, validate_only) => {
                asked(self, |reply| ControllerOp::AlterClientQuotas { changes, validate_only, reply })
                    .await
                    .map(|v| value(many_out(v)))
            }
            Forwarded::AlterCredentials(changes) => {
                asked(self, |reply| ControllerOp::AlterCredentials { changes, reply }).await.map(|v| value(many_out(v)))
            }
            Forwarded::AlterReassignments(asks) => {
                asked(self, |reply| ControllerOp::AlterReassignments { asks, reply }).await.map(|v| value(many_out(v)))
            }
            Forwarded::CreateAcls(bindings) => {
                asked(self, |reply| ControllerOp::CreateAcls { bindings, reply }).await.map(|r| value(r.map_err(wire)))
            }
            Forwarded::DeleteAcls(filters) => {
                asked(self, |reply| ControllerOp::DeleteAcls { filters, reply }).await.map(|r| value(r.map_err(wire)))
            }
        };
        answer.unwrap_or_else(|| {
            let (code, why) = super::quorum::not_controller();
            Answer::Refused(code.code(), why)
        })
    }
}
