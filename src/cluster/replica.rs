//! One replica of a replicated partition log, sans-IO: raft-rs's `RawNode` over the store of
//! Kafka batches (`store`), with Kafka's view on top (offsets, leader epoch, the high
//! watermark, which produce waits are settled how). The shard drives it; the simulation tests
//! it. Nothing here touches a file, a socket or a clock.
//!
//! The cycle (raft-rs's asynchronous-persistence contract):
//! 1. `tick`, `step` (a peer's message) and `propose` (a leader's batch) feed raft.
//! 2. `next_work` turns a Ready into `Work`: messages to send now (a leader's appends may go
//!    before its own write), the `Write` for the log (cut a divergent tail, append batches,
//!    write the replica state first when term, vote or configuration changed), and messages
//!    to send only once that write is durable (votes, a follower's acknowledgements).
//! 3. The driver performs the write and calls `persisted` with where the batches landed;
//!    raft-rs then counts them, and the next `next_work` carries what that allowed.
//!
//! The leader stamps a batch with its offset and epoch before proposing it, so every replica
//! stores the same bytes. A produce waiting on a proposal is settled `Committed` once raft
//! commits that (index, term) and `Lost` if another entry takes the index or the replica
//! stops leading: the producer gets NOT_LEADER_OR_FOLLOWER and retries, deduplicated by the
//! producer state every replica builds from the log.
//!
//! The high watermark is the Kafka offset after the last committed entry. A new leader's commit
//! index may lag the old leader's until an entry of its own term commits; until then it
//! serves nothing (`serving`), so no client sees a watermark step back.

use std::collections::VecDeque;

use bytes::Bytes;
use protobuf::Message as _;
use raft::prelude::{ConfChange, ConfChangeSingle, ConfChangeV2, Entry, EntryType, Message};
use raft::{RawNode, StateRole};

use super::entry;
use super::meta::RaftMeta;
use super::snapshot::StartState;
use super::store::{Loc, RaftStore};
use crate::protocol::batch;

/// Raft timing and flow control for one group.
#[derive(Debug, Clone, Copy)]
pub struct ReplicaConfig {
    /// Ticks without a leader's word before a follower campaigns; raft-rs picks each
    /// election timeout from [election_tick, max_election_tick).
    pub election_tick: usize,
    pub max_election_tick: usize,
    pub heartbeat_tick: usize,
    pub max_size_per_msg: u64,
    pub max_inflight_msgs: usize,
    /// A leader tells its followers of a new commit index only with its next append or
    /// heartbeat instead of at once in a message of its own (raft-rs's `skip_bcast_commit`;
    /// it still does at once while a configuration change is pending). A partition's
    /// followers serve nothing from their watermark, so waiting costs nothing there, while the
    /// extra message and its answer per commit were a third of a moderately loaded
    /// partition's raft traffic. The metadata quorum keeps the broadcast: every member applies
    /// what commits.
    pub skip_bcast_commit: bool,
}

impl Default for ReplicaConfig {
    fn default() -> Self {
        ReplicaConfig {
            election_tick: 10,
            max_election_tick: 20,
            heartbeat_tick: 1,
            max_size_per_msg: 1 << 20,
            max_inflight_msgs: 256,
            skip_bcast_commit: false,
        }
    }
}

/// A batch the leader proposed: where it will sit if it commits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Proposal {
    pub index: u64,
    pub term: u64,
    pub base_offset: i64,
    pub last_offset: i64,
}

/// How a proposal ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    Committed(Proposal),
    /// Never committed here: leadership moved or the entry was replaced. Retriable.
    Lost(Proposal),
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProposeError {
    /// Not the leader, or a leader whose term has nothing committed yet.
    #[error("not the serving leader (leader {leader:?}, term {term})")]
    NotLeader { leader: Option<u64>, term: u64 },
    /// raft-rs dropped it (a leadership transfer in progress).
    #[error("the proposal was dropped by raft (leadership transfer in progress)")]
    Dropped,
    #[error("the replica failed: {0}")]
    Failed(String),
}

/// What the log must do for one Ready.
#[derive(Debug)]
pub struct Write {
    pub number: u64,
    /// Cut the log at this Kafka offset first (a divergent tail).
    pub truncate: Option<i64>,
    pub batches: Vec<Bytes>,
    /// The replica state to write atomically and fsync before anything else of this write.
    pub meta: Option<RaftMeta>,
    /// A leader's snapshot to install first: empty the log and start it at the snapshot's
    /// offset, with its producer state (then `truncate` is None). The log is reset before the
    /// replica state is written: a crash between leaves an empty log the state does not
    /// start at, which the next open empties again at the state's start.
    pub install: Option<StartState>,
}

pub struct Work {
    pub send: Vec<Message>,
    pub write: Write,
    /// Send once `write` is durable.
    pub after: Vec<Message>,
}

pub struct Replica {
    rn: RawNode<RaftStore>,
    pending: VecDeque<Proposal>,
    settled: Vec<Settled>,
    hwm: i64,
    /// The committed entry the high watermark ends with.
    hwm_index: u64,
    conf_index: u64,
    /// Term and vote as last written: a change in either must be written before acting.
    written_vote: (u64, u64),
    meta_dirty: bool,
    failed: Option<String>,
    /// The write that installs a snapshot, and the snapshot's index: applied once durable.
    installing: Option<(u64, u64)>,
    /// Ticks each peer has spent waiting for a snapshot this leader sent (see `tick`).
    snapshot_waits: std::collections::HashMap<u64, usize>,
    election_tick: usize,
    /// raft's window of appends in flight to one peer.
    max_inflight: usize,
    /// The furthest log start a committed entry asked for (DeleteRecords), not yet taken.
    log_start: Option<i64>,
    /// Where this replica's log ends, when a leader's heartbeat took it to hold more (it lost
    /// its disk since it acknowledged those entries): its answer says so (`step`).
    short_of: Option<u64>,
    /// raft-rs's logger, which names the group.
    logger: slog::Logger,
}

impl Replica {
    pub fn new(
        id: u64,
        cfg: ReplicaConfig,
        mut store: RaftStore,
        conf_index: u64,
        logger: &slog::Logger,
    ) -> raft::Result<Replica> {
        let mut hs = store.hard_state().clone();
        let last_term = store.slot_term(store.last()).unwrap_or(store.start().term);
        if last_term > hs.term {
            // The state file is older than the log (lost or restored from elsewhere): the vote
            // of that term is unknown, and voting again could elect two leaders.
            return Err(raft::Error::ConfigInvalid(format!(
                "the log holds term {last_term} but the replica state says term {}: the state file is stale",
                hs.term
            )));
        }
        // Entries the flush policy left in the page cache can be gone after a power loss
        // while the commit index that covered them was written: count only what is there.
        hs.commit = hs.commit.min(store.last());
        let written_vote = (hs.term, hs.vote);
        store.set_hard_state(hs.clone());
        let hwm = store.end_offset(hs.commit).unwrap_or(store.start().offset);
        let mut c = raft::Config::new(id);
        c.election_tick = cfg.election_tick;
        c.min_election_tick = cfg.election_tick;
        c.max_election_tick = cfg.max_election_tick;
        c.heartbeat_tick = cfg.heartbeat_tick;
        c.max_size_per_msg = cfg.max_size_per_msg;
        c.max_inflight_msgs = cfg.max_inflight_msgs;
        c.pre_vote = true;
        c.check_quorum = true;
        c.skip_bcast_commit = cfg.skip_bcast_commit;
        c.applied = conf_index.min(hs.commit).max(store.start().index);
        c.validate()?;
        let rn = RawNode::new(&c, store, logger)?;
        Ok(Replica {
            rn,
            pending: VecDeque::new(),
            settled: Vec::new(),
            hwm,
            hwm_index: hs.commit,
            conf_index,
            written_vote,
            meta_dirty: false,
            failed: None,
            installing: None,
            snapshot_waits: std::collections::HashMap::new(),
            log_start: None,
            election_tick: cfg.election_tick,
            max_inflight: cfg.max_inflight_msgs,
            short_of: None,
            logger: logger.clone(),
        })
    }

    pub fn id(&self) -> u64 {
        self.rn.raft.id
    }

    pub fn term(&self) -> u64 {
        self.rn.raft.term
    }

    pub fn leader(&self) -> Option<u64> {
        Some(self.rn.raft.leader_id).filter(|&l| l != raft::INVALID_ID)
    }

    pub fn is_leader(&self) -> bool {
        self.rn.raft.state == StateRole::Leader
    }

    /// A leader with an entry of its own term committed: it may answer produces and fetches.
    pub fn serving(&self) -> bool {
        self.is_leader() && self.rn.raft.commit_to_current_term() && self.failed.is_none()
    }

    pub fn high_watermark(&self) -> i64 {
        self.hwm
    }

    /// Where the batch that ends the high watermark ends in the log (None at the log start).
    pub fn high_watermark_loc(&self) -> Option<Loc> {
        self.rn.store().end_loc(self.hwm_index)
    }

    /// The last entry this replica has written durably.
    pub fn persisted_index(&self) -> u64 {
        self.rn.raft.raft_log.persisted
    }

    /// The voters of the applied configuration (both sides of a joint one).
    pub fn voters(&self) -> Vec<u64> {
        let cs = self.rn.store().conf_state();
        union(&cs.voters, &cs.voters_outgoing)
    }

    /// Whether a leader is replicating to `id` (its log matched, appends flowing), not
    /// probing for where their logs agree.
    pub fn replicating(&self, id: u64) -> bool {
        self.is_leader() && self.rn.raft.prs().get(id).is_some_and(|p| p.state == raft::ProgressState::Replicate)
    }

    /// How many voters hold entry `index`, as a leader knows (itself included).
    pub fn voters_holding(&self, index: u64) -> usize {
        let prs = self.rn.raft.prs();
        self.voters().into_iter().filter(|&id| prs.get(id).is_some_and(|p| p.matched >= index)).count()
    }

    pub fn commit_index(&self) -> u64 {
        self.rn.raft.raft_log.committed
    }

    pub fn last_index(&self) -> u64 {
        self.rn.raft.raft_log.last_index()
    }

    pub fn failed(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    pub fn store(&self) -> &RaftStore {
        self.rn.store()
    }

    pub fn raw(&self) -> &RawNode<RaftStore> {
        &self.rn
    }

    /// The Kafka offset the next proposed batch gets: the end of raft's last entry, counting
    /// entries not yet handed to the store.
    pub fn log_end_offset(&self) -> i64 {
        let log = &self.rn.raft.raft_log;
        let unstable = &log.unstable;
        let store = self.rn.store();
        let before = unstable.offset - 1;
        let mut end = store.end_offset(before.min(store.last())).expect("unstable follows the store");
        for e in &unstable.entries {
            end = next_end(e, end);
        }
        end
    }

    pub fn tick(&mut self) {
        if self.failed.is_none() {
            if !self.must_not_stand() {
                self.rn.tick();
            }
            self.retry_lost_snapshots();
        }
    }

    /// Whether this replica, the only voter and not leading, holds entries not yet durable.
    /// raft-rs elects a lone voter within the tick or campaign that starts its election and
    /// then asserts that its whole log is durable (a panic): say the partition just moved
    /// here and the old leader's last appends wait behind a slow fsync. Such a replica
    /// stands once its writes are done, as TiKV's peers do.
    fn must_not_stand(&self) -> bool {
        let log = &self.rn.raft.raft_log;
        !self.is_leader() && log.persisted < log.last_index() && self.voters() == [self.id()]
    }

    /// raft-rs waits for a follower to answer a snapshot before it sends anything else to it;
    /// a snapshot lost on the way (a connection dropped, the follower restarted) would stall
    /// that follower for good. After a few election timeouts without an answer the snapshot
    /// is reported failed, and raft-rs probes the follower and sends it again.
    fn retry_lost_snapshots(&mut self) {
        if !self.is_leader() {
            self.snapshot_waits.clear();
            return;
        }
        let waiting: Vec<u64> = self
            .rn
            .raft
            .prs()
            .iter()
            .filter(|(_, p)| p.state == raft::ProgressState::Snapshot)
            .map(|(id, _)| *id)
            .collect();
        self.snapshot_waits.retain(|id, _| waiting.contains(id));
        for id in waiting {
            let ticks = self.snapshot_waits.entry(id).or_default();
            *ticks += 1;
            if *ticks > 3 * self.election_tick {
                self.snapshot_waits.remove(&id);
                self.rn.report_snapshot(id, raft::SnapshotStatus::Failure);
            }
        }
    }

    /// The latest entry retention may move the log start past: committed and written here,
    /// and on a leader also held by every replica of the group it heard from recently
    /// (`active`; other ids are ignored), so that only a peer that was away needs a snapshot.
    pub fn compaction_limit(&self, active: &[u64]) -> u64 {
        // raft-rs reads the entries after `applied` (a restarted replica applies again from its
        // last configuration change): they must stay in the log.
        let applied = self.rn.raft.raft_log.applied;
        let mut limit = self.hwm_index.min(self.persisted_index()).min(applied);
        if self.is_leader() {
            for id in active.iter().filter(|&&id| id != self.id()) {
                if let Some(m) = self.matched(*id) {
                    limit = limit.min(m);
                }
            }
        }
        limit
    }

    /// A cleaning moved the batches of the entries in [`from`, `to`) (`RaftStore::relocate`).
    pub fn relocate(&mut self, from: i64, to: i64, moved: &[(i64, Loc, u32)]) -> Result<(), String> {
        self.rn.mut_store().relocate(from, to, moved)
    }

    /// Moves the log start past entry `index` (at most `compaction_limit`), whose producer
    /// state is `producers`; returns the replica state to write, durably, before the log's
    /// segments below are deleted.
    pub fn compact_to(&mut self, index: u64, producers: Bytes) -> RaftMeta {
        assert!(index <= self.compaction_limit(&[]), "compacting past what is applied and written");
        self.rn.mut_store().compact_to(index, producers);
        self.meta()
    }

    /// Stands for election now instead of after an election timeout (the preferred replica
    /// of a new partition, so that it leads within a round trip).
    pub fn campaign(&mut self) {
        if self.failed.is_none() && !self.must_not_stand() {
            let _ = self.rn.campaign();
        }
    }

    /// `campaign` again, unless a leader is known or a vote of its own is under way: a
    /// replica that stood before its peers had opened the group got no answers.
    pub fn campaign_if_leaderless(&mut self) {
        let r = &self.rn.raft;
        if self.leader().is_none() && !matches!(r.state, StateRole::Candidate | StateRole::Leader) {
            self.campaign();
        }
    }

    /// A peer's message. Stale and foreign messages are refused by raft-rs and dropped here.
    pub fn step(&mut self, mut m: Message) {
        if self.failed.is_some() {
            return;
        }
        // A heartbeat commits what the leader last knew this replica to hold; one that lost
        // its disk since holds less, and raft-rs panics committing past its log's end: it
        // commits no further than it holds. The leader takes what it counted as held for good
        // (raft's progress never goes back) and would send only entries after it, which this
        // replica refuses for want of those before: it would never catch up. So the answer
        // to such a heartbeat says where this log ends (`reject`, `reject_hint`, which raft-rs
        // does not read in a heartbeat's answer), and the leader starts over from there.
        if m.get_msg_type() == raft::prelude::MessageType::MsgHeartbeat {
            let last = self.rn.raft.raft_log.last_index();
            if m.commit > last {
                self.short_of = Some(last);
            }
            m.commit = m.commit.min(last);
        }
        // Only an answer of this term: an older one may predate the catch-up it asks for, and
        // raft-rs drops it as stale anyway.
        let answer = raft::prelude::MessageType::MsgHeartbeatResponse;
        if m.get_msg_type() == answer && m.reject && m.term == self.rn.raft.term && self.is_leader() {
            if let Some(pr) = self.rn.raft.mut_prs().get_mut(m.from) {
                if pr.matched > m.reject_hint {
                    slog::warn!(self.logger, "a replica holds less than it acknowledged (it lost its disk): sending it the log again from where it ends";
                        "peer" => m.from, "holds" => m.reject_hint, "acknowledged" => pr.matched);
                    pr.matched = m.reject_hint;
                    pr.become_probe();
                }
            }
        }
        let _ = self.rn.step(m);
    }

    /// Stamps `batch` (one validated batch) with the next offset and the leader epoch and
    /// proposes it.
    pub fn propose(&mut self, mut batch: Vec<u8>) -> Result<Proposal, ProposeError> {
        self.check_serving()?;
        let term = self.term();
        let base_offset = self.log_end_offset();
        let epoch = entry::epoch(term).map_err(|e| ProposeError::Failed(e.to_string()))?;
        batch::patch(&mut batch, base_offset, epoch);
        let h = batch::read_header(&batch).map_err(|e| ProposeError::Failed(e.to_string()))?;
        let before = self.last_index();
        self.rn.propose(vec![], batch).map_err(|_| ProposeError::Dropped)?;
        let index = self.last_index();
        assert_eq!(index, before + 1, "a proposal is one entry");
        let p = Proposal { index, term, base_offset, last_offset: h.last_offset() };
        self.pending.push_back(p);
        Ok(p)
    }

    /// raft's window of appends in flight to one peer, when nothing narrows it.
    pub fn max_inflight(&self) -> usize {
        self.max_inflight
    }

    /// Sets a leader's window of appends in flight to peer `id` (see `cluster::throttle`):
    /// at 0 raft sends it no new entries until the window is widened again. raft-rs keeps
    /// the appends already in flight counted until answered. Does nothing unless leading.
    pub fn set_inflight_cap(&mut self, id: u64, cap: usize) {
        if !self.is_leader() {
            return;
        }
        if let Some(pr) = self.rn.raft.mut_prs().get_mut(id) {
            pr.ins.set_cap(cap);
        }
    }

    /// Widens the window to `cap` and sends peer `id` what is due at once.
    pub fn widen_inflight(&mut self, id: u64, cap: usize) {
        if !self.is_leader() || cap == 0 {
            return;
        }
        let raft = &mut self.rn.raft;
        let Some(pr) = raft.mut_prs().get_mut(id) else { return };
        pr.ins.set_cap(cap);
        pr.resume();
        raft.send_append(id);
    }

    /// Puts every peer's window back to raft's own, whatever this replica's role: raft-rs
    /// keeps a narrowed window across a change of leadership.
    pub fn reset_inflight_caps(&mut self) {
        let max = self.max_inflight;
        let ids: Vec<u64> = self.rn.raft.prs().iter().map(|(id, _)| *id).collect();
        for id in ids {
            if let Some(pr) = self.rn.raft.mut_prs().get_mut(id) {
                pr.ins.set_cap(max);
            }
        }
    }

    /// Asks the leader to hand leadership to `to` once that voter has caught up (controlled
    /// shutdown, preferred-leader election). Proposals are dropped while it is under way.
    pub fn transfer_leader(&mut self, to: u64) {
        if self.is_leader() && self.failed.is_none() {
            self.rn.transfer_leader(to);
        }
    }

    /// Proposes a change of the voters and learners (a reassignment's steps: add learners,
    /// then the joint change that makes them voters and drops others, left automatically).
    /// It takes effect on each replica as the entry is applied (`voters`, `learners`).
    pub fn propose_conf_change(&mut self, cc: ConfChangeV2) -> Result<(), ProposeError> {
        self.check_serving()?;
        self.rn.propose_conf_change(vec![], cc).map_err(|_| ProposeError::Dropped)
    }

    /// Whether a membership change is under way: proposed and not yet applied, or a joint
    /// configuration not yet left. raft-rs takes one change at a time.
    pub fn changing_membership(&self) -> bool {
        let r = &self.rn.raft;
        r.pending_conf_index > r.raft_log.applied || !self.rn.store().conf_state().voters_outgoing.is_empty()
    }

    /// The last entry a leader knows replica `id` holds (None if not leading or not a peer).
    pub fn matched(&self, id: u64) -> Option<u64> {
        self.rn.raft.prs().get(id).filter(|_| self.is_leader()).map(|p| p.matched)
    }

    /// Asks for the leadership (a preferred-leader election): a follower's request goes to
    /// its leader, which hands over once this replica has caught up.
    pub fn take_leadership(&mut self) {
        if !self.is_leader() && self.failed.is_none() {
            let me = self.id();
            self.rn.transfer_leader(me);
        }
    }

    /// The learners of the applied configuration (with those a joint one turns into learners).
    pub fn learners(&self) -> Vec<u64> {
        let cs = self.rn.store().conf_state();
        union(&cs.learners, &cs.learners_next)
    }

    /// What a proposal is refused with unless this replica is the serving leader.
    fn check_serving(&self) -> Result<(), ProposeError> {
        if let Some(why) = &self.failed {
            return Err(ProposeError::Failed(why.clone()));
        }
        if !self.serving() {
            return Err(ProposeError::NotLeader { leader: self.leader(), term: self.term() });
        }
        Ok(())
    }

    /// Proposals settled since the last call, in index order.
    pub fn take_settled(&mut self) -> Vec<Settled> {
        std::mem::take(&mut self.settled)
    }

    /// The log start committed entries moved the log to since the last call (DeleteRecords;
    /// a restarted replica applies them again, so the log must take it idempotently).
    pub fn take_log_start(&mut self) -> Option<i64> {
        self.log_start.take()
    }

    /// The next Ready as work for the driver; None when raft has nothing to do (or the
    /// replica failed: see `failed`).
    pub fn next_work(&mut self) -> Option<Work> {
        if self.failed.is_some() || !self.rn.has_ready() {
            return None;
        }
        let mut rd = self.rn.ready();
        let number = rd.number();
        let mut send = rd.take_messages();
        let mut install = None;
        if !rd.snapshot().is_empty() {
            let snap = rd.snapshot();
            let state = match StartState::decode(&snap.data) {
                Ok(s) => s,
                Err(e) => {
                    self.fail(format!("a peer sent a snapshot this replica cannot read: {e}"));
                    return None;
                }
            };
            let m = snap.get_metadata();
            tracing::info!(
                index = m.index,
                term = m.term,
                offset = state.offset,
                "installing a snapshot: the leader's log starts past this one's end"
            );
            self.rn.mut_store().install(m.index, m.term, &state, m.get_conf_state().clone());
            self.conf_index = self.rn.store().conf_index();
            self.hwm = self.hwm.max(state.offset);
            self.hwm_index = m.index;
            self.lose_from(0);
            self.meta_dirty = true;
            self.installing = Some((number, m.index));
            install = Some(state);
        }
        let committed = rd.take_committed_entries();
        let appends = match self.rn.mut_store().append(rd.entries(), number) {
            Ok(a) => a,
            Err(e) => {
                self.fail(format!("cannot store what the leader sent: {e}"));
                return None;
            }
        };
        if let Some(first) = rd.entries().first().filter(|_| appends.truncate.is_some()) {
            self.lose_from(first.index);
        }
        if let Some(hs) = rd.hs() {
            if (hs.term, hs.vote) != self.written_vote {
                self.meta_dirty = true;
            }
            self.rn.mut_store().set_hard_state(hs.clone());
        }
        let mut after = rd.take_persisted_messages();
        if let Some(last) = self.short_of.take() {
            for m in send.iter_mut().chain(after.iter_mut()) {
                if m.get_msg_type() == raft::prelude::MessageType::MsgHeartbeatResponse {
                    m.reject = true;
                    m.reject_hint = last;
                }
            }
        }
        // raft-rs requires nothing appended between `ready` and this call; applying a
        // configuration change may append (a joint configuration's automatic leave), so the
        // committed entries are applied after it.
        self.rn.advance_append_async(rd);
        self.apply(&committed);
        if !self.is_leader() {
            self.lose_from(0);
        }
        let meta = self.meta_dirty.then(|| self.meta());
        if let Some(m) = &meta {
            self.written_vote = (m.hard_state.term, m.hard_state.vote);
            self.meta_dirty = false;
        }
        if let Some(why) = self.rn.store().failed() {
            self.fail(why);
        }
        let write = Write { number, truncate: appends.truncate, batches: appends.batches, meta, install };
        Some(Work { send, write, after })
    }

    /// Write `number` is durable, its batches at `locs` in order.
    pub fn persisted(&mut self, number: u64, locs: &[Loc]) {
        self.rn.mut_store().written(number, locs);
        self.rn.on_persist_ready(number);
        if let Some((_, index)) = self.installing.filter(|(n, _)| *n <= number) {
            self.installing = None;
            // What the snapshot holds counts as applied once it is durable (raft-rs requires
            // applied <= persisted).
            if self.rn.raft.raft_log.applied < index {
                self.rn.advance_apply_to(index);
            }
        }
    }

    /// The state a clean close writes, with the current commit index as far as this
    /// replica's log durably holds it: a commit index past that would, after a restart,
    /// count as committed an entry that a Ready still queued would have cut (a divergent
    /// tail), and raft-rs refuses to cut a committed entry.
    pub fn meta(&self) -> RaftMeta {
        let store = self.rn.store();
        let mut hard_state = store.hard_state().clone();
        let persisted = self.rn.raft.raft_log.persisted;
        hard_state.commit = hard_state.commit.min(persisted).max(self.conf_index);
        RaftMeta {
            hard_state,
            conf_state: store.conf_state().clone(),
            conf_index: self.conf_index,
            log_start: store.start(),
        }
    }

    /// Stops the replica for good (a write of its log failed): every pending proposal is
    /// lost, and it takes no part in raft until a restart recovers it.
    pub fn fail(&mut self, why: String) {
        if self.failed.is_none() {
            self.failed = Some(why);
            self.lose_from(0);
        }
    }

    fn apply(&mut self, committed: &[Entry]) {
        let Some(last) = committed.last().map(|e| e.index) else { return };
        for e in committed {
            let change = match e.get_entry_type() {
                EntryType::EntryNormal => {
                    if let Some(offset) = entry::log_start_of(&e.data) {
                        self.log_start = self.log_start.max(Some(offset));
                    }
                    continue;
                }
                // Already in the configuration a snapshot brought.
                _ if e.index <= self.conf_index => continue,
                EntryType::EntryConfChange => ConfChange::parse_from_bytes(&e.data).map(v1_to_v2),
                EntryType::EntryConfChangeV2 => ConfChangeV2::parse_from_bytes(&e.data),
            };
            let cs = change
                .map_err(|err| err.to_string())
                .and_then(|cc| self.rn.apply_conf_change(&cc).map_err(|err| err.to_string()));
            match cs {
                Ok(cs) => {
                    let me = self.id();
                    if self.is_leader() && !cs.voters.contains(&me) && !cs.voters_outgoing.contains(&me) {
                        // raft-rs keeps a leader that removed itself leading, and panics at its
                        // next commit (it has no progress of its own any more): step down; the
                        // remaining voters elect one of themselves.
                        tracing::info!(node = me, "removed from the voters while leading: stepping down");
                        let term = self.rn.raft.term;
                        self.rn.raft.become_follower(term, raft::INVALID_ID);
                    }
                    self.rn.mut_store().set_conf_state(cs, e.index);
                    self.conf_index = e.index;
                    self.meta_dirty = true;
                }
                Err(why) => {
                    self.fail(format!("cannot apply the configuration change at {}: {why}", e.index));
                    return;
                }
            }
        }
        let store = self.rn.store();
        while let Some(p) = self.pending.front().copied().filter(|p| p.index <= last) {
            self.pending.pop_front();
            let ours = store.slot_term(p.index) == Some(p.term);
            self.settled.push(if ours { Settled::Committed(p) } else { Settled::Lost(p) });
        }
        if let Some(end) = store.end_offset(last).filter(|&end| end > self.hwm) {
            self.hwm = end;
            self.hwm_index = last;
        }
        self.rn.advance_apply_to(last);
    }

    /// Settles as lost every pending proposal at `index` or later.
    fn lose_from(&mut self, index: u64) {
        while let Some(p) = self.pending.back().copied().filter(|p| p.index >= index) {
            self.pending.pop_back();
            self.settled.push(Settled::Lost(p));
        }
        // Keep `settled` in index order for the driver.
        self.settled.sort_by_key(|s| match s {
            Settled::Committed(p) | Settled::Lost(p) => p.index,
        });
    }
}

/// The ids in `a` or `b`, sorted, each once.
fn union(a: &[u64], b: &[u64]) -> Vec<u64> {
    let mut ids: Vec<u64> = a.iter().chain(b).copied().collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// The offset after entry `e`, which follows an entry ending at `prev`.
fn next_end(e: &Entry, prev: i64) -> i64 {
    if e.get_entry_type() == EntryType::EntryNormal && !e.data.is_empty() {
        entry::end_offset(&e.data).unwrap_or(prev)
    } else {
        prev + 1
    }
}

/// A single-node change (raft's first format) as the joint-consensus one raft-rs applies.
fn v1_to_v2(c: ConfChange) -> ConfChangeV2 {
    let mut single = ConfChangeSingle::default();
    single.set_change_type(c.get_change_type());
    single.node_id = c.node_id;
    let mut v2 = ConfChangeV2::default();
    v2.mut_changes().push(single);
    v2.context = c.context;
    v2
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::store::BatchReader;
    use std::io;
    use std::rc::Rc;

    struct NoFile;

    impl BatchReader for NoFile {
        fn read(&self, _: Loc, _: u32) -> io::Result<Bytes> {
            Err(io::Error::other("everything is cached in this test"))
        }
    }

    fn single(meta: &RaftMeta, batches: Vec<(Loc, Bytes)>) -> raft::Result<Replica> {
        let store = RaftStore::recover(meta, batches, Rc::new(NoFile), 1 << 20).unwrap();
        Replica::new(1, ReplicaConfig::default(), store, meta.conf_index, &crate::cluster::logging::logger())
    }

    /// Where `batches` land, one after another from `pos` in one segment.
    fn locs(pos: &mut u64, batches: &[Bytes]) -> Vec<Loc> {
        let mut out = Vec::with_capacity(batches.len());
        for b in batches {
            out.push(Loc { segment: 0, pos: *pos });
            *pos += b.len() as u64;
        }
        out
    }

    /// Handles work until none is left, as the shard does; returns the batches written.
    fn drive(r: &mut Replica) -> Vec<Bytes> {
        let mut written = Vec::new();
        let mut pos = 0;
        while let Some(work) = r.next_work() {
            assert!(work.send.is_empty() && work.after.is_empty(), "a single voter sends nothing");
            let locs = locs(&mut pos, &work.write.batches);
            written.extend(work.write.batches.iter().cloned());
            r.persisted(work.write.number, &locs);
        }
        written
    }

    #[test]
    fn a_single_voter_leads_serves_and_commits_at_the_offsets_it_stamped() {
        let mut r = single(&RaftMeta::initial(vec![1]), vec![]).unwrap();
        assert!(matches!(r.propose(batch::build(0, &[b"x"])), Err(ProposeError::NotLeader { .. })));
        for _ in 0..30 {
            r.tick();
        }
        let noop = drive(&mut r);
        assert!(r.serving(), "elected and its no-op committed");
        assert_eq!((noop.len(), r.high_watermark()), (1, 1), "the no-op takes offset 0");
        let a = r.propose(batch::build(0, &[b"a", b"b"])).unwrap();
        let b = r.propose(batch::build(0, &[b"c"])).unwrap();
        assert_eq!((a.base_offset, a.last_offset, b.base_offset, b.last_offset), (1, 2, 3, 3));
        assert_eq!(r.high_watermark(), 1, "nothing counts before it is written");
        let written = drive(&mut r);
        assert_eq!(r.take_settled(), vec![Settled::Committed(a), Settled::Committed(b)]);
        assert_eq!(r.high_watermark(), 4);
        let term = r.term() as i32;
        for (w, base) in written.iter().zip([1, 3]) {
            assert_eq!((batch::read_header(w).unwrap().base_offset, entry::epoch_of(w)), (base, term));
        }
    }

    #[test]
    fn a_lone_voter_stands_for_election_only_once_its_writes_are_durable() {
        use raft::prelude::{Entry, Message, MessageType};
        // The partition moved here from broker 2, whose last append is not written yet.
        let mut r = single(&RaftMeta::initial(vec![1]), vec![]).unwrap();
        let mut m = Message::default();
        m.set_msg_type(MessageType::MsgAppend);
        (m.from, m.to, m.term) = (2, 1, 5);
        m.entries = vec![Entry { index: 1, term: 5, ..Default::default() }].into();
        r.step(m);
        let work = r.next_work().expect("the entry to write");
        assert_eq!(work.write.batches.len(), 1);
        for _ in 0..40 {
            r.tick();
        }
        r.campaign();
        assert!(!r.is_leader(), "no election while its log is not durable");
        let mut pos = 0;
        r.persisted(work.write.number, &locs(&mut pos, &work.write.batches));
        for _ in 0..40 {
            r.tick();
        }
        while let Some(work) = r.next_work() {
            r.persisted(work.write.number, &locs(&mut pos, &work.write.batches));
        }
        assert!(r.is_leader(), "elected once its writes are done");
    }

    /// Three voters with `skip_bcast_commit` as given, replica 1 elected and its no-op
    /// committed everywhere.
    fn three(skip_bcast_commit: bool) -> Vec<Replica> {
        let meta = RaftMeta::initial(vec![1, 2, 3]);
        let cfg = ReplicaConfig { skip_bcast_commit, ..ReplicaConfig::default() };
        let mut rs: Vec<Replica> = (1..=3)
            .map(|id| {
                let store = RaftStore::recover(&meta, vec![], Rc::new(NoFile), 1 << 20).unwrap();
                Replica::new(id, cfg, store, meta.conf_index, &crate::cluster::logging::logger()).unwrap()
            })
            .collect();
        rs[0].campaign();
        exchange(&mut rs);
        for _ in 0..2 {
            rs[0].tick();
            exchange(&mut rs);
        }
        assert!(rs[0].serving(), "elected and its no-op committed");
        assert!(rs.iter().all(|r| r.high_watermark() == 1), "a heartbeat tells the followers");
        rs
    }

    /// Runs every replica's work, each write durable at once, and delivers what they send
    /// until nothing moves; returns the appends (with or without entries) the leader sent.
    fn exchange(rs: &mut [Replica]) -> usize {
        let mut pos = [0u64; 3];
        let mut appends = 0;
        loop {
            let mut out = Vec::new();
            for (i, r) in rs.iter_mut().enumerate() {
                while let Some(work) = r.next_work() {
                    let locs = locs(&mut pos[i], &work.write.batches);
                    out.extend(work.send);
                    r.persisted(work.write.number, &locs);
                    out.extend(work.after);
                }
            }
            if out.is_empty() {
                return appends;
            }
            for m in out {
                if m.from == 1 && m.get_msg_type() == raft::prelude::MessageType::MsgAppend {
                    appends += 1;
                }
                rs[m.to as usize - 1].step(m);
            }
        }
    }

    #[test]
    fn a_partition_leader_tells_its_followers_of_a_commit_with_its_next_message() {
        for skip in [false, true] {
            let mut rs = three(skip);
            let p = rs[0].propose(batch::build(0, &[b"a"])).unwrap();
            let appends = exchange(&mut rs);
            assert_eq!(rs[0].take_settled(), vec![Settled::Committed(p)]);
            assert_eq!(rs[0].high_watermark(), 2);
            let followers: Vec<i64> = rs[1..].iter().map(|r| r.high_watermark()).collect();
            if skip {
                // One append per follower, and the commit waits for the next message.
                assert_eq!((appends, followers), (2, vec![1, 1]));
                rs[0].tick();
                exchange(&mut rs);
                assert_eq!(rs.iter().map(|r| r.high_watermark()).collect::<Vec<_>>(), vec![2, 2, 2]);
            } else {
                // raft-rs's default: a second append to each follower carries the commit.
                assert_eq!((appends, followers), (4, vec![2, 2]));
            }
        }
    }

    #[test]
    fn a_closed_window_holds_a_peers_entries_until_it_is_widened() {
        let mut rs = three(false);
        let before = rs[0].matched(3);
        rs[0].set_inflight_cap(3, 0);
        for _ in 0..3 {
            rs[0].propose(batch::build(0, &[b"x"])).unwrap();
            exchange(&mut rs);
            rs[0].tick();
            exchange(&mut rs);
        }
        assert_eq!(rs[0].high_watermark(), 4, "the leader and node 2 commit");
        assert_eq!(rs[0].matched(3), before, "node 3 got no entry, heartbeats notwithstanding");
        assert_eq!(rs[2].log_end_offset(), 1);
        let max = rs[0].max_inflight();
        rs[0].widen_inflight(3, max);
        exchange(&mut rs);
        assert_eq!(rs[0].matched(3), rs[0].matched(2), "widened, it is sent everything due at once");
        assert_eq!(rs[2].log_end_offset(), 4);
    }

    #[test]
    fn a_leader_sends_the_log_again_only_on_a_short_answer_of_its_own_term() {
        use raft::prelude::{Message, MessageType};
        let mut rs = three(false);
        let held = rs[0].matched(2).unwrap();
        assert!(held >= 1, "the follower acknowledged the no-op");
        let short = |term| {
            let mut m = Message::default();
            m.set_msg_type(MessageType::MsgHeartbeatResponse);
            (m.from, m.to, m.term, m.reject, m.reject_hint) = (2, 1, term, true, 0);
            m
        };
        let term = rs[0].term();
        rs[0].step(short(term - 1));
        assert_eq!(rs[0].matched(2), Some(held), "an answer of an older term changes nothing");
        rs[0].step(short(term));
        assert_eq!(rs[0].matched(2), Some(0), "the follower holds nothing: the leader starts over");
    }

    #[test]
    fn the_state_written_never_commits_past_what_the_log_durably_holds() {
        let mut rs = three(false);
        rs[0].propose(batch::build(0, &[b"a"])).unwrap();
        // The leader's own write stays queued; its followers write theirs and answer.
        let work = rs[0].next_work().expect("the leader's append");
        let mut pos = [0u64; 3];
        for m in work.send {
            rs[m.to as usize - 1].step(m);
        }
        for i in 1..3 {
            while let Some(w) = rs[i].next_work() {
                let locs = locs(&mut pos[i], &w.write.batches);
                rs[i].persisted(w.write.number, &locs);
                for m in w.send.into_iter().chain(w.after) {
                    rs[0].step(m);
                }
            }
        }
        assert_eq!(rs[0].commit_index(), 2, "two followers commit it");
        // The next Ready carries the new commit index, before the leader's write is durable.
        let next = rs[0].next_work().expect("a Ready with the commit");
        assert_eq!(rs[0].rn.store().hard_state().commit, 2);
        assert_eq!(rs[0].persisted_index(), 1, "the leader's own write is not durable yet");
        assert_eq!(rs[0].meta().hard_state.commit, 1, "a restart would not count the entry the log may lack");
        let locs = locs(&mut pos[0], &work.write.batches);
        rs[0].persisted(work.write.number, &locs);
        rs[0].persisted(next.write.number, &[]);
        assert_eq!(rs[0].meta().hard_state.commit, 2);
    }

    #[test]
    fn a_state_file_older_than_the_log_is_refused() {
        let mut meta = RaftMeta::initial(vec![1]);
        let mut b = batch::build(0, &[b"x"]);
        batch::patch(&mut b, 0, 5);
        meta.hard_state.term = 4;
        let err = single(&meta, vec![(Loc { segment: 0, pos: 0 }, Bytes::from(b))]).err().unwrap();
        assert!(err.to_string().contains("state file is stale"), "{err}");
    }
}
