//! A replicated state machine over one raft group: the metadata quorum's log (DESIGN §9).
//! Every replica applies the group's committed records, in offset order, exactly once per
//! process: at start it replays what its log holds committed, then it follows each commit.
//! The leader's `propose` resolves once its record is committed and applied here, so the
//! caller answers a request only after the change it asked for took effect on this broker.
//!
//! A record's value is the state machine's own encoding (the controller's records); this
//! module never reads it. Raft's own entries (control batches) are skipped.
//!
//! Replay reads the whole log at every start: the metadata log is small, and a snapshot of
//! the applied state (with the raft snapshot that lets the log start move) will bound it.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use futures_channel::oneshot;
use glommio::Task;

use super::group::{Acks, Group};
use crate::protocol::batch;
use crate::protocol::ErrorCode;

/// What applying a committed record does: (its offset, its value).
pub type Apply = Box<dyn FnMut(i64, &[u8])>;

pub struct Quorum {
    group: Rc<Group>,
    /// The offset after the last record applied.
    applied: Cell<i64>,
    apply: RefCell<Apply>,
    /// Proposals waiting for their record to be applied: (offset, wake).
    waiting: RefCell<Vec<(i64, oneshot::Sender<()>)>>,
    follow: RefCell<Option<Task<()>>>,
}

/// How long the follow loop waits before reading again records it could not read.
const RETRY_UNREADABLE: Duration = Duration::from_secs(1);

impl Quorum {
    /// Applies what `group`'s log holds committed, then follows its commits on this shard.
    pub fn start(group: Rc<Group>, apply: Apply) -> Rc<Quorum> {
        let q = Rc::new(Quorum {
            applied: Cell::new(group.log().offsets().log_start),
            group,
            apply: RefCell::new(apply),
            waiting: RefCell::new(Vec::new()),
            follow: RefCell::new(None),
        });
        q.catch_up();
        let weak = Rc::downgrade(&q);
        *q.follow.borrow_mut() = Some(glommio::spawn_local(async move {
            loop {
                let Some(q) = weak.upgrade() else { return };
                let (tx, rx) = oneshot::channel();
                q.group.log().watch(q.applied.get(), tx);
                drop(q);
                if rx.await.is_err() {
                    glommio::timer::sleep(Duration::from_millis(10)).await;
                }
                let Some(q) = weak.upgrade() else { return };
                if !q.catch_up() {
                    // The watch is ready at once while records stay unapplied: without a
                    // pause the loop would hold the shard.
                    drop(q);
                    glommio::timer::sleep(RETRY_UNREADABLE).await;
                }
            }
        }));
        q
    }

    pub fn group(&self) -> &Rc<Group> {
        &self.group
    }

    /// The offset after the last record applied here.
    pub fn applied(&self) -> i64 {
        self.applied.get()
    }

    /// Proposes one record (a leader's): resolves with its offset once it is committed and
    /// applied on this replica, or with NOT_LEADER_OR_FOLLOWER (retry at the leader).
    pub async fn propose(&self, value: &[u8]) -> Result<i64, ErrorCode> {
        let records = Bytes::from(batch::build(crate::sys::unix_now_ms(), &[value]));
        let appended = self
            .group
            .produce(&records, Acks::All { min_insync: 1 })
            .map_err(|refusal| refusal.code)?
            .await
            .map_err(|_| ErrorCode::NotLeaderOrFollower)??;
        let offset = appended.base_offset;
        if self.applied.get() <= offset {
            let (tx, rx) = oneshot::channel();
            self.waiting.borrow_mut().push((offset, tx));
            self.catch_up();
            rx.await.map_err(|_| ErrorCode::NotLeaderOrFollower)?;
        }
        Ok(offset)
    }

    /// Applies every committed record after `applied`, in order, and wakes the proposals
    /// they cover. A failed read leaves the rest for later (false): nothing after a record
    /// not applied is applied.
    fn catch_up(&self) -> bool {
        let mut stuck = false;
        let scanned = self.group.log().scan_batches(self.applied.get(), |whole| {
            if stuck {
                return;
            }
            let Ok(h) = batch::read_header(whole) else {
                stuck = true;
                return;
            };
            if !h.is_control() {
                for r in batch::records(whole) {
                    let offset = h.base_offset + i64::from(r.offset_delta);
                    if offset >= self.applied.get() {
                        (self.apply.borrow_mut())(offset, r.value.unwrap_or(&[]));
                    }
                }
            }
            self.applied.set(self.applied.get().max(h.last_offset() + 1));
        });
        if let Err(e) = &scanned {
            tracing::error!(group = ?self.group.id(), "cannot read committed records: {e}; trying again in 1 s");
        }
        if stuck {
            tracing::error!(
                group = ?self.group.id(),
                offset = self.applied.get(),
                "a committed batch has no readable header; trying again in 1 s"
            );
        }
        let applied = self.applied.get();
        for (_, tx) in self.waiting.borrow_mut().extract_if(.., |(offset, _)| *offset < applied) {
            let _ = tx.send(());
        }
        scanned.is_ok() && !stuck
    }
}

#[cfg(test)]
mod tests;
