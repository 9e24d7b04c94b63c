//! The controller of a cluster member, on shard 0, over the metadata quorum (DESIGN §9).
//! Every member runs the same controller: each applies the quorum's committed entries (one
//! entry = the records of one request, as JSON) and hands the new catalog to its shards. The
//! quorum's serving leader is the controller clients are told of (`controller_id`): it
//! decides requests one at a time on the catalog the ones before committed, proposes their
//! records and answers once they are committed and applied here.
//!
//! A member that does not lead calls the leader over the cluster transport (`Call`) for what
//! it is asked: its own registration, a block of producer ids to hand out itself, the topics
//! a Metadata or Produce request creates automatically, and the admin requests clients send
//! it (`shard::forward`; validate-only CreateTopics still answers NOT_CONTROLLER, and clients
//! retry at the `controller_id` of Metadata). Brokers also use these calls between themselves to
//! tell what they lead (`shard::leaderships`) and to ask a preferred replica to take over
//! (`shard::reassign`).

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::cluster::{Meta, METADATA_TOPIC};
use super::controller::{decide, Committed, ControllerOp};
use super::Shard;
use crate::cluster::quorum::{Apply, Quorum};
use crate::controller::records::Record;
use crate::controller::{Controller, Failure, NewTopic};
use crate::error::BrokerError;
use crate::log::Partition;
use crate::metadata::{BrokerRegistration, TopicMeta};
use crate::protocol::ErrorCode;

/// How long a call to the leader waits for its answer.
const CALL_WAIT: Duration = Duration::from_secs(10);
/// How long a new leader waits to have applied what is committed before deciding.
const CATCH_UP_WAIT: Duration = Duration::from_secs(5);

/// What a member asks of the controller over the transport, and (`TakeLeadership`) what an
/// ElectLeaders request asks of a partition's preferred replica.
#[derive(Debug, Serialize, Deserialize)]
pub(super) enum Call {
    Register(BrokerRegistration),
    ReserveProducerIds,
    CreateTopics(Vec<NewTopic>),
    /// A reassigned partition's leader: its group's voters are now these.
    Reassigned {
        topic: String,
        partition: i32,
        voters: Vec<i32>,
    },
    /// To the broker of a partition's preferred replica: take the leadership.
    TakeLeadership {
        topic: String,
        partition: i32,
        wait_ms: u64,
    },
    /// What the calling broker leads (see `shard::leaderships`).
    Leaderships(Vec<(super::Tp, super::cluster::View)>),
    /// An admin request a member received (see `shard::forward`).
    Forward(super::forward::Forwarded),
}

/// The controller's answer to a `Call`.
#[derive(Debug, Serialize, Deserialize)]
pub(super) enum Answer {
    Done,
    Refused(i16, String),
    ProducerIds(i64, i64),
    Topics(Vec<Result<TopicMeta, (i16, String)>>),
    /// The answer to a forwarded request, in its own form (see `shard::forward`).
    Forwarded(serde_json::Value),
}

pub(super) fn not_controller() -> Failure {
    (
        ErrorCode::NotController,
        "this broker does not lead the metadata quorum; ask the controller_id of Metadata".into(),
    )
}

pub(super) fn wire(f: Failure) -> (i16, String) {
    (f.0.code(), f.1)
}

pub(super) fn unwire((code, why): (i16, String)) -> Failure {
    (ErrorCode::try_from_code(code).unwrap_or(ErrorCode::UnknownServerError), why)
}

impl Shard {
    fn controller_cell(&self) -> &RefCell<Controller> {
        self.controller.as_ref().expect("the controller lives on shard 0")
    }

    /// Opens the metadata quorum's log and replays it into the controller, then follows its
    /// commits (shard 0 of a cluster member).
    pub async fn start_metadata_quorum(self: &Rc<Self>) -> Result<(), BrokerError> {
        let cluster = self.cluster().expect("a cluster member").clone();
        let dir = self.config.data_dir.join(Partition::dir_name(METADATA_TOPIC, 0));
        let log = Partition::open(METADATA_TOPIC, 0, dir, self.log_config, self.probe.clone()).await?;
        // Ticked beside the partitions' groups (`tick_raft`), but not offered to clients.
        let group = cluster
            .start_group(METADATA_TOPIC, uuid::Uuid::nil(), 0, &cluster.settings.members(), true, log)
            .await
            .map_err(|e| crate::error::storage(&self.config.data_dir, std::io::Error::other(e)))?;
        let weak = Rc::downgrade(self);
        let apply: Apply = Box::new(move |offset, value| {
            let Some(shard) = weak.upgrade() else { return };
            let records: Vec<Record> = match serde_json::from_slice(value) {
                Ok(r) => r,
                Err(e) => {
                    // A record this version cannot read: applying what follows would build a
                    // catalog that differs from the other members', so stop here.
                    tracing::error!(offset, "metadata record does not decode: {e}; upgrade this broker");
                    return;
                }
            };
            shard.controller_cell().borrow_mut().apply_committed(&records);
            shard.publish_soon();
        });
        let quorum = Quorum::start(group, apply);
        cluster.set_meta(Meta { quorum, turn: glommio::sync::Semaphore::new(1) });
        Ok(())
    }

    /// Hands the controller's catalog to every shard, once, after the current task yields:
    /// a replay applies many entries and publishes once.
    fn publish_soon(self: &Rc<Self>) {
        if self.publishing.replace(true) {
            return;
        }
        let shard = self.clone();
        glommio::spawn_local(async move {
            glommio::yield_if_needed().await;
            shard.publishing.set(false);
            let snapshot = Arc::new(shard.controller_cell().borrow().catalog().clone());
            shard.broadcast_catalog(snapshot).await;
        })
        .detach();
    }

    fn leads_metadata(&self) -> bool {
        self.cluster().and_then(|c| c.meta()).is_some_and(|m| m.quorum.group().serving())
    }

    /// Registers this broker with the controller (and, at a new cluster's first start, waits
    /// for its identity), retrying until the catalog has both.
    pub async fn register(self: &Rc<Self>, me: BrokerRegistration) {
        let mut said = Instant::now();
        loop {
            {
                let c = self.controller_cell().borrow();
                let cat = c.catalog();
                if !cat.cluster_id.is_empty() && cat.brokers.get(&me.node_id) == Some(&me) {
                    break;
                }
            }
            let outcome = match self.leads_metadata() {
                true => self
                    .commit_with(|c| c.register(me.clone()))
                    .await
                    .and_then(|(r, committed)| r.and(committed.map_or(Ok(()), Err))),
                false => match self.call_controller(Call::Register(me.clone())).await {
                    Ok(Answer::Done) => Ok(()),
                    Ok(Answer::Refused(code, why)) => Err(unwire((code, why))),
                    Ok(other) => Err((ErrorCode::UnknownServerError, format!("unexpected answer {other:?}"))),
                    Err(f) => Err(f),
                },
            };
            if let Err((_, why)) = outcome {
                if said.elapsed() > Duration::from_secs(5) {
                    tracing::info!("waiting to register with the metadata quorum: {why}");
                    said = Instant::now();
                }
            }
            glommio::timer::sleep(Duration::from_millis(100)).await;
        }
        tracing::info!(node_id = me.node_id, "registered with the metadata quorum");
    }

    /// Reports that a reassigned partition's voters are `voters` (shard 0; see
    /// `shard::reassign`).
    pub(super) async fn reassigned(
        self: &Rc<Self>,
        topic: String,
        partition: i32,
        voters: Vec<i32>,
    ) -> Result<(), Failure> {
        let answer = match self.leads_metadata() {
            true => self.answer_call(Call::Reassigned { topic, partition, voters }).await,
            false => self.call_controller(Call::Reassigned { topic, partition, voters }).await?,
        };
        done_or_refused(answer)
    }

    /// Asks broker `to`'s replica of a partition to take the leadership, waiting at most
    /// `wait` (any shard: calls go out from shard 0, where their replies arrive).
    pub(super) async fn ask_to_lead(
        self: &Rc<Self>,
        to: i32,
        topic: String,
        partition: i32,
        wait: Duration,
    ) -> Result<(), Failure> {
        let call = Call::TakeLeadership { topic, partition, wait_ms: wait.as_millis() as u64 };
        let unreachable = ErrorCode::PreferredLeaderNotAvailable;
        let asked = self
            .on_shard(0, move |zero| async move {
                zero.call_peer(to as u64, &call, wait + CALL_WAIT, unreachable, &format!("broker {to}")).await
            })
            .await
            .map_err(|e| (e, "shard 0 did not answer".to_string()))?;
        done_or_refused(asked?)
    }

    /// Tells peer `to` what this broker leads (shard 0), without waiting for more than
    /// `wait`.
    pub(super) async fn tell_leaderships(
        &self,
        to: i32,
        views: Vec<(super::Tp, super::cluster::View)>,
        wait: Duration,
    ) {
        let call = Call::Leaderships(views);
        if let Err((_, e)) = self.call_peer(to as u64, &call, wait, ErrorCode::UnknownServerError, "a peer").await {
            tracing::debug!(to, "telling a peer the leaderships: {e}");
        }
    }

    /// Calls the metadata quorum's leader.
    pub(super) async fn call_controller(&self, call: Call) -> Result<Answer, Failure> {
        let cluster = self.cluster().expect("a cluster member");
        let leader = cluster
            .meta()
            .and_then(|m| m.quorum.group().leader())
            .ok_or_else(|| (ErrorCode::NotController, "the metadata quorum has no leader yet".to_string()))?;
        self.call_peer(leader, &call, CALL_WAIT, ErrorCode::NotController, "the controller").await
    }

    /// Sends `call` to broker `to` over the cluster transport (from shard 0, where replies
    /// arrive) and reads its answer: `unreachable` if no answer came within `wait`.
    async fn call_peer(
        &self,
        to: u64,
        call: &Call,
        wait: Duration,
        unreachable: ErrorCode,
        whom: &str,
    ) -> Result<Answer, Failure> {
        let cluster = self.cluster().expect("a cluster member");
        let body = Bytes::from(serde_json::to_vec(call).expect("calls serialize"));
        let reply = cluster
            .transport()
            .call(to, body, wait)
            .await
            .map_err(|e| (unreachable, format!("cannot reach {whom}: {e}")))?;
        serde_json::from_slice(&reply)
            .map_err(|e| (ErrorCode::UnknownServerError, format!("bad answer from {whom}: {e}")))
    }

    /// Serves a member's call, as the leader.
    pub(super) async fn serve_call(self: &Rc<Self>, from: u64, body: Bytes) -> Bytes {
        let answer = match serde_json::from_slice::<Call>(&body) {
            Err(e) => {
                tracing::warn!(from, "a peer's controller call does not decode: {e}");
                Answer::Refused(ErrorCode::InvalidRequest.code(), e.to_string())
            }
            Ok(call) => self.answer_call(call).await,
        };
        Bytes::from(serde_json::to_vec(&answer).expect("answers serialize"))
    }

    async fn answer_call(self: &Rc<Self>, call: Call) -> Answer {
        let refused = |f: Failure| Answer::Refused(f.0.code(), f.1);
        match call {
            Call::Forward(f) => self.decide_forwarded(f).await,
            Call::Leaderships(views) => {
                self.take_told(views);
                Answer::Done
            }
            Call::TakeLeadership { topic, partition, wait_ms } => {
                match self.lead_here(topic, partition, Duration::from_millis(wait_ms)).await {
                    Ok(()) => Answer::Done,
                    Err(f) => refused(f),
                }
            }
            Call::Reassigned { topic, partition, voters } => {
                match self.commit_with(|c| c.complete_reassignment(&topic, partition, &voters)).await {
                    Ok((Ok(()), None)) => Answer::Done,
                    Ok((Err(f), _)) | Ok((_, Some(f))) | Err(f) => refused(f),
                }
            }
            Call::Register(b) => match self.commit_with(|c| c.register(b)).await {
                Ok((Ok(()), None)) => Answer::Done,
                Ok((Err(f), _)) | Ok((_, Some(f))) | Err(f) => refused(f),
            },
            Call::ReserveProducerIds => match self.commit_with(|c| c.reserve_producer_ids()).await {
                Ok((Ok((from, until)), None)) => Answer::ProducerIds(from, until),
                Ok((Err(f), _)) | Ok((_, Some(f))) | Err(f) => refused(f),
            },
            Call::CreateTopics(topics) => match self.commit_with(|c| c.create_topics(&topics, false)).await {
                Ok((results, committed)) => {
                    let results = results.into_iter().map(|r| match (&committed, r) {
                        (Some(f), Ok(_)) => Err(wire(f.clone())),
                        (_, r) => r.map_err(wire),
                    });
                    Answer::Topics(results.collect())
                }
                Err(f) => refused(f),
            },
        }
    }

    /// As the leader, one at a time: makes sure the cluster has its identity and the offsets
    /// topic, runs `f` on the controller, proposes the records it decided and waits until
    /// they are applied here and every shard has the new catalog. `Err` if this broker does
    /// not lead; otherwise `f`'s value and how the commit went.
    async fn commit_with<T>(self: &Rc<Self>, f: impl FnOnce(&mut Controller) -> T) -> Result<(T, Committed), Failure> {
        let meta = self.cluster().and_then(|c| c.meta()).expect("shard 0 of a cluster member");
        let _turn = meta.turn.acquire_permit(1).await.map_err(|_| not_controller())?;
        if !meta.quorum.group().serving() {
            return Err(not_controller());
        }
        caught_up(&meta.quorum).await?;
        let cell = self.controller_cell();
        let (value, records) = {
            let mut c = cell.borrow_mut();
            c.found_cluster();
            if let Err(e) = c.ensure_internal_topic(
                crate::group::offsets::TOPIC,
                self.count as u32,
                crate::group::offsets::topic_configs(),
            ) {
                tracing::warn!("cannot plan the offsets topic: {e}");
            }
            let value = f(&mut c);
            (value, c.take_pending())
        };
        if records.is_empty() {
            return Ok((value, None));
        }
        let entry = serde_json::to_vec(&records).expect("records serialize");
        let committed = match meta.quorum.propose(&entry).await {
            Ok(_) => None,
            Err(e) => {
                cell.borrow_mut().abandon();
                tracing::info!("a metadata change was not committed: {e:?}");
                Some((
                    ErrorCode::NotController,
                    "the controller lost its leadership before the change committed; retry".into(),
                ))
            }
        };
        let snapshot = Arc::new(cell.borrow().catalog().clone());
        self.broadcast_catalog(snapshot).await;
        Ok((value, committed))
    }
}

fn done_or_refused(answer: Answer) -> Result<(), Failure> {
    match answer {
        Answer::Done => Ok(()),
        Answer::Refused(code, why) => Err(unwire((code, why))),
        other => Err((ErrorCode::UnknownServerError, format!("unexpected answer {other:?}"))),
    }
}

/// Waits until the quorum has applied everything committed (a new leader may not have yet).
async fn caught_up(q: &Quorum) -> Result<(), Failure> {
    let deadline = Instant::now() + CATCH_UP_WAIT;
    while q.applied() < q.group().log().offsets().high_watermark {
        if Instant::now() > deadline {
            return Err((ErrorCode::NotController, "the controller is still applying the metadata log".into()));
        }
        glommio::timer::sleep(Duration::from_millis(2)).await;
    }
    Ok(())
}

/// Runs a controller request in a cluster (see the module doc).
pub(super) async fn run(shard: &Rc<Shard>, cell: &RefCell<Controller>, op: ControllerOp) {
    let op = match op {
        // A member hands out producer ids from a block the controller reserved for it.
        ControllerOp::AllocateProducerId { reply } if !shard.leads_metadata() => {
            let id = shard.forwarded_producer_id(cell).await;
            let _ = reply.send(id);
            return;
        }
        ControllerOp::CreateTopics { topics, validate_only: false, reply } if !shard.leads_metadata() => {
            let results = match shard.call_controller(Call::CreateTopics(topics.clone())).await {
                Ok(Answer::Topics(r)) => r.into_iter().map(|r| r.map_err(unwire)).collect(),
                Ok(Answer::Refused(code, why)) => topics.iter().map(|_| Err(unwire((code, why.clone())))).collect(),
                Ok(other) => {
                    topics.iter().map(|_| Err((ErrorCode::UnknownServerError, format!("{other:?}")))).collect()
                }
                Err(f) => topics.iter().map(|_| Err(f.clone())).collect(),
            };
            // The leader answered once it committed; this broker may not have applied it yet.
            let _ = reply.send(results);
            return;
        }
        op if !shard.leads_metadata() => match shard.forward(op).await {
            None => return,
            Some(op) => op,
        },
        op => op,
    };
    decide_here(shard, op).await;
}

/// Decides a controller request as the quorum's leader; if this broker does not lead, the
/// request is dropped, which answers NOT_CONTROLLER.
pub(super) async fn decide_here(shard: &Rc<Shard>, op: ControllerOp) {
    let mut done = None;
    let outcome = shard.commit_with(|c| done = Some(decide(c, op))).await;
    match (done, outcome) {
        (Some(done), Ok(((), committed))) => done(committed),
        // Not the leader: the request was never decided, and its dropped reply answers
        // NOT_CONTROLLER (see `Shard::on_controller`).
        (_, Err((_, why))) => tracing::debug!("controller request refused: {why}"),
        (None, Ok(_)) => unreachable!("commit_with runs its closure when it succeeds"),
    }
}

impl Shard {
    /// A producer id from this member's block, reserving a new block from the leader when it
    /// is used up.
    async fn forwarded_producer_id(&self, cell: &RefCell<Controller>) -> Result<i64, ErrorCode> {
        {
            // A change this broker proposed as the leader may still be waiting for its
            // result: a block it reserved is in the controller's fields, but is only this
            // broker's once committed (`commit_with` abandons it if not). Its turn ends when
            // that is known.
            let meta = self.cluster().and_then(|c| c.meta()).ok_or(ErrorCode::CoordinatorNotAvailable)?;
            let _turn = meta.turn.acquire_permit(1).await.map_err(|_| ErrorCode::CoordinatorNotAvailable)?;
            if let Some(id) = cell.borrow_mut().next_from_block() {
                return Ok(id);
            }
        }
        match self.call_controller(Call::ReserveProducerIds).await {
            Ok(Answer::ProducerIds(from, until)) => {
                let mut c = cell.borrow_mut();
                c.use_block(from, until);
                c.next_from_block().ok_or(ErrorCode::CoordinatorNotAvailable)
            }
            Ok(other) => {
                tracing::warn!("cannot reserve producer ids: {other:?}");
                Err(ErrorCode::CoordinatorNotAvailable)
            }
            Err((_, why)) => {
                tracing::warn!("cannot reserve producer ids: {why}");
                Err(ErrorCode::CoordinatorNotAvailable)
            }
        }
    }
}
