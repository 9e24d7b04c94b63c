//! One raft group on its home shard: a `Replica` driven over its partition log and the
//! transport. `produce` is a leader's Produce; `step` and `tick` feed raft; `pump` turns each
//! Ready into sends and one log write at a time (the next Ready waits for it, so batches that
//! arrive meanwhile go out in the next write: group commit per partition).
//!
//! The replica state file (`raft-state` in the partition's directory) is written and fsynced
//! before the log write of the same Ready, and before any message that depends on it. It is
//! written on the shard's thread: it changes only with the term, the vote or the
//! configuration, a few times per election, never per produce.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;

use bytes::Bytes;
use futures_channel::oneshot;
use raft::prelude::Message;

use super::frame::GroupId;
use super::meta::RaftMeta;
use super::replica::{Replica, ReplicaConfig, Settled, Work};
use super::store::{BatchReader, Loc, RaftStore};
use super::transport::Transport;
use crate::error::BrokerError;
use crate::log::{Appended, Partition};
use crate::protocol::ErrorCode;

/// The replica state's file name in a partition directory.
pub const STATE_FILE: &str = "raft-state";

type Reply = oneshot::Sender<Result<Appended, ErrorCode>>;

/// How one group is set up on this broker.
#[derive(Debug, Clone)]
pub struct GroupConfig {
    pub node_id: u64,
    /// The voters a new group starts with (an existing one reads its own from its state).
    pub voters: Vec<u64>,
    pub replica: ReplicaConfig,
    /// Bytes of recent batches kept in memory for followers' appends and the commit path.
    pub cache_bytes: usize,
}

struct LogReader(Rc<Partition>);

impl BatchReader for LogReader {
    fn read(&self, loc: Loc, len: u32) -> std::io::Result<Bytes> {
        self.0.read_batch(loc, len)
    }
}

pub struct Group {
    id: GroupId,
    log: Rc<Partition>,
    replica: RefCell<Replica>,
    transport: Rc<Transport>,
    state_path: PathBuf,
    /// Produces waiting for their entry to commit, by raft index: reply, LogAppendTime.
    waiting: RefCell<HashMap<u64, (Reply, i64)>>,
    writing: Cell<bool>,
    serving: Cell<bool>,
    stopped: Cell<bool>,
}

fn storage(path: &std::path::Path, source: std::io::Error) -> BrokerError {
    BrokerError::Storage { path: path.to_path_buf(), source }
}

impl Group {
    /// Takes over `log` for raft: reads the replica state (or starts one with the configured
    /// voters), rebuilds the store from the log's batches and starts following.
    pub fn open(
        id: GroupId,
        log: Rc<Partition>,
        cfg: &GroupConfig,
        transport: Rc<Transport>,
        logger: &slog::Logger,
    ) -> Result<Rc<Group>, BrokerError> {
        let state_path = log.dir().join(STATE_FILE);
        let meta = match crate::storage::read(&state_path).map_err(|e| storage(&state_path, e))? {
            Some(bytes) => RaftMeta::decode(&bytes)
                .map_err(|e| storage(&state_path, std::io::Error::new(std::io::ErrorKind::InvalidData, e)))?,
            None => {
                let meta = RaftMeta::initial(cfg.voters.clone());
                crate::storage::write_atomic(&state_path, &meta.encode(), 0o644)
                    .map_err(|e| storage(&state_path, e))?;
                meta
            }
        };
        log.make_replicated();
        let batches = log.raft_batches().map_err(|e| storage(log.dir(), e))?;
        let reader = Rc::new(LogReader(log.clone()));
        let invalid = |e: String| storage(log.dir(), std::io::Error::new(std::io::ErrorKind::InvalidData, e));
        let store = RaftStore::recover(&meta, batches, reader, cfg.cache_bytes).map_err(|e| invalid(e.to_string()))?;
        let replica = Replica::new(cfg.node_id, cfg.replica, store, meta.conf_index, logger)
            .map_err(|e| invalid(format!("{id:?}: {e}")))?;
        if let Some(loc) = replica.high_watermark_loc() {
            log.set_high_watermark(replica.high_watermark(), loc);
        }
        Ok(Rc::new(Group {
            id,
            log,
            replica: RefCell::new(replica),
            transport,
            state_path,
            waiting: RefCell::new(HashMap::new()),
            writing: Cell::new(false),
            serving: Cell::new(false),
            stopped: Cell::new(false),
        }))
    }

    pub fn id(&self) -> &GroupId {
        &self.id
    }

    pub fn log(&self) -> &Rc<Partition> {
        &self.log
    }

    pub fn leader(&self) -> Option<u64> {
        self.replica.borrow().leader()
    }

    /// The leader epoch: raft's term.
    pub fn term(&self) -> u64 {
        self.replica.borrow().term()
    }

    /// Leading, with an entry of its own term committed: produces and fetches go here.
    pub fn serving(&self) -> bool {
        self.replica.borrow().serving()
    }

    pub fn failed(&self) -> Option<String> {
        self.replica.borrow().failed().map(str::to_string)
    }

    /// A leader's Produce of one batch: resolves once raft committed it (acks=all), with
    /// NOT_LEADER_OR_FOLLOWER if this replica is not the serving leader or stops leading
    /// before that.
    pub fn produce(
        self: &Rc<Self>,
        records: &Bytes,
    ) -> Result<oneshot::Receiver<Result<Appended, ErrorCode>>, ErrorCode> {
        if !self.serving() || self.stopped.get() {
            return Err(ErrorCode::NotLeaderOrFollower);
        }
        let (tx, rx) = oneshot::channel();
        let Some((prop, tx)) = self.log.prepare_replicated(records, tx)? else {
            return Ok(rx); // a retry of a batch in the log, answered by the log
        };
        let p = self.replica.borrow_mut().propose(prop.batch).map_err(|e| {
            tracing::debug!(group = ?self.id, "produce refused: {e}");
            ErrorCode::NotLeaderOrFollower
        })?;
        self.log.proposed(&prop.header, p.base_offset);
        self.waiting.borrow_mut().insert(p.index, (tx, prop.log_append_time));
        self.pump();
        Ok(rx)
    }

    /// A peer's raft message for this group.
    pub fn step(self: &Rc<Self>, m: Message) {
        self.replica.borrow_mut().step(m);
        self.pump();
    }

    pub fn tick(self: &Rc<Self>) {
        self.replica.borrow_mut().tick();
        self.pump();
    }

    /// Stops taking part (the broker stops or the replica moves away): waiting produces get
    /// NOT_LEADER_OR_FOLLOWER; the state is written with the current commit.
    pub fn stop(&self) -> Result<(), BrokerError> {
        self.stopped.set(true);
        for (_, (tx, _)) in self.waiting.borrow_mut().drain() {
            let _ = tx.send(Err(ErrorCode::NotLeaderOrFollower));
        }
        if self.replica.borrow().failed().is_some() {
            return Ok(());
        }
        let meta = self.replica.borrow().meta();
        crate::storage::write_atomic(&self.state_path, &meta.encode(), 0o644).map_err(|e| storage(&self.state_path, e))
    }

    /// Handles Readies until raft has none, or a log write is under way (its completion pumps
    /// again). Writes that need nothing durable are finished on the spot.
    fn pump(self: &Rc<Self>) {
        while !self.writing.get() && !self.stopped.get() {
            let work = self.replica.borrow_mut().next_work();
            self.settle();
            let Some(mut work) = work else { return };
            self.transport.send(&self.id, std::mem::take(&mut work.send));
            let w = &work.write;
            if w.batches.is_empty() && w.truncate.is_none() && w.meta.is_none() {
                self.transport.send(&self.id, work.after);
                self.replica.borrow_mut().persisted(w.number, &[]);
                continue;
            }
            self.writing.set(true);
            let g = self.clone();
            glommio::spawn_local(async move {
                g.write(work).await;
                g.writing.set(false);
                g.pump();
            })
            .detach();
        }
    }

    async fn write(&self, work: Work) {
        let Work { write, after, .. } = work;
        if let Some(meta) = &write.meta {
            if let Err(e) = crate::storage::write_atomic(&self.state_path, &meta.encode(), 0o644) {
                self.fail(format!("cannot write the replica state {}: {e}", self.state_path.display()));
                return;
            }
        }
        match self.log.write_entries(write.truncate, &write.batches).await {
            Ok(locs) => {
                if self.stopped.get() {
                    return;
                }
                self.transport.send(&self.id, after);
                self.replica.borrow_mut().persisted(write.number, &locs);
            }
            Err(e) => self.fail(format!("cannot write the log: {e}")),
        }
    }

    fn fail(&self, why: String) {
        tracing::error!(group = ?self.id, "replica offline until a restart recovers it: {why}");
        self.replica.borrow_mut().fail(why);
        self.settle();
    }

    /// Answers the produces raft settled, follows leadership changes and moves the log's high
    /// watermark to the replica's.
    fn settle(&self) {
        let mut r = self.replica.borrow_mut();
        let settled = r.take_settled();
        let serving = r.serving();
        let hwm = (r.high_watermark(), r.high_watermark_loc());
        drop(r);
        if serving != self.serving.replace(serving) {
            // What the idempotence checks count is what the log holds, nothing proposed.
            self.log.reset_proposals();
            tracing::info!(group = ?self.id, serving, "leadership changed");
        }
        // The watermark first: a producer told of its commit may fetch it at once.
        if let (offset, Some(loc)) = hwm {
            self.log.set_high_watermark(offset, loc);
        }
        let mut waiting = self.waiting.borrow_mut();
        for s in settled {
            let (result, p) = match s {
                Settled::Committed(p) => (Ok(()), p),
                Settled::Lost(p) => (Err(ErrorCode::NotLeaderOrFollower), p),
            };
            if let Some((tx, log_append_time)) = waiting.remove(&p.index) {
                let _ = tx.send(result.map(|()| self.log.appended(p.base_offset, log_append_time)));
            }
        }
        drop(waiting);
    }
}

#[cfg(test)]
mod tests;
