//! One raft group on its home shard: a `Replica` driven over its partition log and the
//! transport. `produce` is a leader's Produce; `step` and `tick` feed raft; `pump` turns each
//! Ready into sends at once and a write queued for the log. One writer task per group takes
//! the queue in order, everything queued at a time in one log write and one fsync (group
//! commit per partition), then sends what waited for it and tells raft.
//!
//! Readies are taken while a write is under way (raft-rs's asynchronous persistence): a
//! leader's appends leave for its followers as soon as they are proposed, and what commits is
//! applied and answered as soon as this replica's own write of it is durable, not after the
//! write that follows it.
//!
//! "Durable" is the topic's flush policy: under `always` a write is fsynced before raft counts
//! it; under `os` or `interval` an acks=all produce is held by a majority's page caches, as
//! Kafka's acks=all is (before KIP-966): a power loss of a majority at once can take it back,
//! and so can one replica's power loss followed by a failover before the replica caught up
//! again (it comes back without the entry and may then elect a leader that lacks it too).
//!
//! The replica state file (`raft-state` in the partition's directory) is written and fsynced
//! before the log write of the same Ready, and before any message that depends on it. It is
//! written on the shard's thread: it changes only with the term, the vote, the configuration
//! or the log start, a few times per election or retention pass, never per produce.
//!
//! Retention (`apply_retention`) moves the raft log's start: the producer state there is
//! written first (`raft-start-<index>.producers`), then the replica state naming the new
//! start, then the segments below are deleted (a compacted log keeps them); a crash between
//! any two leaves files the next open or retention pass ignores or deletes. A replica sent a
//! snapshot replaces its log with the snapshot's (see `Group::install`).

mod cleaning;

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_channel::oneshot;
use raft::prelude::{Message, MessageType};

use super::frame::GroupId;
use super::meta::RaftMeta;
use super::replica::{Replica, ReplicaConfig, Settled, Work};
use super::snapshot::StartState;
use super::store::{BatchReader, Loc, RaftStore};
use super::throttle::{Covers, Throttle, Throttled, THROTTLED_INFLIGHT};
use super::transport::Transport;
use crate::error::{storage, BrokerError};
use crate::log::{Appended, Partition, Refusal};
use crate::producer::ProducerState;
use crate::protocol::ErrorCode;

/// The replica state's file name in a partition directory.
pub const STATE_FILE: &str = "raft-state";
/// The largest batch a replicated partition takes: its entry, with the message around it,
/// must fit one frame of the peer link.
pub const MAX_ENTRY_BYTES: usize = super::frame::MAX_FRAME - (64 << 10);

/// The most of a compacted log a snapshot carries (see `apply_retention`): well within a
/// peer frame, and what a replica holds in memory to install it.
const SNAPSHOT_DATA_MAX: u64 = 16 << 20;

/// How much of its log's end a follower keeps in the page cache: what consumers at the tail
/// would read from it right after it became leader. Behind that, nothing reads a follower's
/// log but a leader's catch-up and the cleaner, so its pages are dropped once synced
/// (`Partition::drop_cached_behind`) rather than left to crowd out the pages leaders serve.
/// A follower that syncs every write caches none of it: it appends past the page cache
/// (`Partition::set_tail_cached`), and a new leader's first fetches read the disk.
const FOLLOWER_CACHE_BYTES: u64 = 16 << 20;

type Reply = oneshot::Sender<Result<Appended, ErrorCode>>;

/// How one group is set up on this broker.
#[derive(Debug, Clone)]
pub struct GroupConfig {
    pub node_id: u64,
    /// The voters the group was created with (an existing replica reads its own from its
    /// state). The same on every replica, one added later included: that one starts outside
    /// the configuration and replays the changes after it from the log.
    pub voters: Vec<u64>,
    pub replica: ReplicaConfig,
    /// Bytes of recent batches kept in memory for followers' appends and the commit path.
    pub cache_bytes: usize,
    /// A voter not heard from for this long is out of sync (`replica.lag.time.max.ms`).
    pub replica_lag: Duration,
}

/// When a produce is answered (Kafka's `acks`; 0 is the API's business: no answer at all).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acks {
    /// Once the leader's own write of it is durable under the flush policy (`acks=1`): a
    /// failover before it commits may lose it, as in Kafka.
    Leader,
    /// Once committed and held by at least `min_insync` voters (`acks=all`).
    All { min_insync: usize },
}

struct Waiter {
    reply: Reply,
    log_append_time: i64,
    acks: Acks,
    base_offset: i64,
}

struct LogReader(Rc<Partition>);

impl BatchReader for LogReader {
    fn read(&self, loc: Loc, len: u32) -> std::io::Result<Bytes> {
        self.0.read_batch(loc, len)
    }

    /// A compacted log's records below the raft log's start (see `apply_retention`); any
    /// other log's start is the raft log's and a snapshot carries no records.
    fn below(&self, offset: i64) -> std::io::Result<(i64, Bytes)> {
        match self.0.config().compact {
            true => self.0.below(offset),
            false => Ok((offset, Bytes::new())),
        }
    }
}

pub struct Group {
    id: GroupId,
    log: Rc<Partition>,
    replica: RefCell<Replica>,
    transport: Rc<Transport>,
    state_path: PathBuf,
    /// Produces waiting on their entry, by raft index.
    waiting: RefCell<HashMap<u64, Waiter>>,
    /// Committed acks=all produces still short of `min.insync.replicas` copies.
    short: RefCell<Vec<(u64, Waiter)>>,
    /// When each peer's last message arrived: who counts as in sync.
    heard: RefCell<HashMap<u64, Instant>>,
    /// A voter silent for longer is out of sync (Kafka's `replica.lag.time.max.ms`).
    lag: Duration,
    /// Ticks left in which a replica that stood at once stands again while leaderless.
    eager: Cell<usize>,
    /// The election timeout in ticks: how long `campaign` keeps standing.
    election_ticks: usize,
    /// Readies' writes not yet durable, oldest first: the writer task's queue.
    queued: RefCell<VecDeque<Work>>,
    /// The writer task runs (it does while anything is queued).
    writing: Cell<bool>,
    serving: Cell<bool>,
    stopped: Cell<bool>,
    /// The replication throttles over this partition's appends, when its topic's lists name
    /// any of its replicas (see `cluster::throttle`).
    throttle: RefCell<Option<(Rc<Throttle>, Throttled)>>,
    /// Peers whose window of appends in flight a throttle narrowed, and to what (0: closed
    /// until the rate has paid back the debt).
    limited: RefCell<HashMap<u64, usize>>,
    /// The term `limited` was narrowed in.
    limited_term: Cell<u64>,
}

/// Replaces the replica state file with `meta`, durably.
fn write_state(path: &std::path::Path, meta: &RaftMeta) -> Result<(), BrokerError> {
    crate::storage::write_atomic(path, &meta.encode(), 0o644).map_err(|e| storage(path, e))
}

/// The file holding the producer state at a log start past entry `index`.
fn start_producers_path(dir: &std::path::Path, index: u64) -> PathBuf {
    dir.join(format!("raft-start-{index:020}.producers"))
}

/// Writes the producer state at a log start past entry `index`, durably, and removes the
/// files of earlier starts (the replica state names the new one by then, or names an
/// earlier one whose file `keep` still is).
fn write_start_producers(dir: &std::path::Path, index: u64, producers: &[u8]) -> Result<(), BrokerError> {
    let path = start_producers_path(dir, index);
    crate::storage::write_atomic(&path, producers, 0o644).map_err(|e| storage(&path, e))
}

/// The file holding a leader's snapshot (`StartState`, encoded) while it replaces the log
/// as the start past entry `index` (see `Group::install`).
fn pending_install_path(dir: &std::path::Path, index: u64) -> PathBuf {
    dir.join(format!("raft-start-{index:020}.install"))
}

/// Removes the producer-state files of every log start but `index`'s, and every snapshot
/// kept for an install (the log holds it, or the replica state never named its start).
/// A kept snapshot that cannot be removed is an error: found at the next open, it would be
/// installed again over entries acknowledged since. A stale producer-state file is only
/// space, and is left with a warning.
fn remove_other_starts(dir: &std::path::Path, index: u64) -> Result<(), BrokerError> {
    let keep = start_producers_path(dir, index);
    for p in crate::storage::list(dir).map_err(|e| storage(dir, e))? {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let producers = name.ends_with(".producers") && p != keep;
        if !name.starts_with("raft-start-") {
            continue;
        }
        if name.ends_with(".install") {
            crate::storage::remove_file(&p).map_err(|e| storage(&p, e))?;
        } else if producers {
            if let Err(e) = crate::storage::remove_file(&p) {
                tracing::warn!(path = %p.display(), "cannot remove an old log start's producer state: {e}");
            }
        }
    }
    Ok(())
}

/// The snapshot an install cut short by a crash left for the log start past entry `index`.
fn read_pending_install(dir: &std::path::Path, index: u64) -> Result<Option<StartState>, BrokerError> {
    let path = pending_install_path(dir, index);
    let Some(bytes) = crate::storage::read(&path).map_err(|e| storage(&path, e))? else { return Ok(None) };
    let state = StartState::decode(&bytes)
        .map_err(|e| storage(&path, std::io::Error::new(std::io::ErrorKind::InvalidData, e)))?;
    Ok(Some(state))
}

/// The producer state at the log start past entry `index` (none at the group's beginning).
fn read_start_producers(dir: &std::path::Path, index: u64) -> Result<Bytes, BrokerError> {
    if index == 0 {
        return Ok(Bytes::new());
    }
    let path = start_producers_path(dir, index);
    match crate::storage::read(&path).map_err(|e| storage(&path, e))? {
        Some(b) => Ok(Bytes::from(b)),
        None => {
            tracing::warn!(path = %path.display(), "the producer state at the log start is missing: a snapshot sent from here will not dedupe retries of batches before it");
            Ok(Bytes::new())
        }
    }
}

/// The producer state a start's file or a snapshot holds (JSON of `ProducerState`).
fn decode_producers(bytes: &[u8]) -> Result<ProducerState, String> {
    if bytes.is_empty() {
        return Ok(ProducerState::default());
    }
    serde_json::from_slice(bytes).map_err(|e| format!("unreadable producer state at the log start: {e}"))
}

impl Group {
    /// Takes over `log` for raft: reads the replica state (or starts one with the configured
    /// voters), rebuilds the store from the log's batches and starts following.
    pub async fn open(
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
                write_state(&state_path, &meta)?;
                meta
            }
        };
        let invalid = |e: String| storage(log.dir(), std::io::Error::new(std::io::ErrorKind::InvalidData, e));
        let start = meta.log_start;
        let start_producers = read_start_producers(log.dir(), start.index)?;
        if let Some(state) = read_pending_install(log.dir(), start.index)? {
            // The replica state names a snapshot's start; its install may not have finished.
            tracing::info!(group = ?id, offset = start.offset, "installing the leader's snapshot again after a crash");
            let producers = decode_producers(&state.producers).map_err(invalid)?;
            log.install(state.log_start, &state.data, state.offset, producers).await?;
        } else if !log.starts_at(start.offset).map_err(|e| storage(log.dir(), e))? {
            // An install by an older broker emptied the log before writing the state naming
            // its start: a crash between leaves this. The leader sends the snapshot again.
            tracing::warn!(group = ?id, offset = start.offset, "the log does not fit the replica's recorded start (an install cut short): emptying it to start there");
            log.reset_to(start.offset, decode_producers(&start_producers).map_err(invalid)?).await?;
        }
        if !log.config().compact {
            // A retention pass that stopped before deleting leaves segments below the start;
            // a compacted log keeps its records there (`apply_retention`).
            log.drop_below(start.offset);
        }
        remove_other_starts(log.dir(), start.index)?;
        log.make_replicated();
        log.commit_below(start.offset).map_err(|e| storage(log.dir(), e))?;
        let batches = log.raft_batches().map_err(|e| storage(log.dir(), e))?;
        tracing::debug!(group = ?id, batches = batches.len(), term = meta.hard_state.term, vote = meta.hard_state.vote, commit = meta.hard_state.commit, "opening the replica");
        let reader = Rc::new(LogReader(log.clone()));
        let mut store =
            RaftStore::recover(&meta, batches, reader, cfg.cache_bytes).map_err(|e| invalid(e.to_string()))?;
        store.set_start_producers(start_producers);
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
            short: RefCell::new(Vec::new()),
            heard: RefCell::new(HashMap::new()),
            lag: cfg.replica_lag,
            eager: Cell::new(0),
            election_ticks: cfg.replica.election_tick,
            queued: RefCell::new(VecDeque::new()),
            writing: Cell::new(false),
            serving: Cell::new(false),
            stopped: Cell::new(false),
            throttle: RefCell::new(None),
            limited: RefCell::new(HashMap::new()),
            limited_term: Cell::new(0),
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

    /// The check Fetch, ListOffsets and OffsetForLeaderEpoch make of a client's
    /// `current_leader_epoch` (KIP-320), -1 meaning none: only the serving leader answers, and
    /// only clients that know its epoch: an older one is FENCED_LEADER_EPOCH (refresh
    /// metadata), a newer one UNKNOWN_LEADER_EPOCH (this broker has not caught up yet).
    pub fn check_leader_epoch(&self, current: i32) -> Result<(), ErrorCode> {
        if !self.serving() {
            return Err(ErrorCode::NotLeaderOrFollower);
        }
        let epoch = i64::try_from(self.term()).unwrap_or(i64::MAX);
        match i64::from(current) {
            -1 => Ok(()),
            c if c < epoch => Err(ErrorCode::FencedLeaderEpoch),
            c if c > epoch => Err(ErrorCode::UnknownLeaderEpoch),
            _ => Ok(()),
        }
    }

    /// OffsetForLeaderEpoch at the leader (see `RaftStore::end_offset_for_epoch`).
    pub fn end_offset_for_epoch(&self, current: i32, epoch: i32) -> Result<(i32, i64), ErrorCode> {
        self.check_leader_epoch(current)?;
        Ok(self.replica.borrow().store().end_offset_for_epoch(epoch))
    }

    /// The leader epoch of the batch holding `offset` (see `RaftStore::epoch_at`).
    pub fn epoch_at(&self, offset: i64) -> i32 {
        self.replica.borrow().store().epoch_at(offset)
    }

    /// Leading, with an entry of its own term committed: produces and fetches go here.
    pub fn serving(&self) -> bool {
        self.replica.borrow().serving()
    }

    pub fn failed(&self) -> Option<String> {
        self.replica.borrow().failed().map(str::to_string)
    }

    /// A leader's Produce of one batch, answered as `acks` says, with NOT_LEADER_OR_FOLLOWER
    /// if this replica is not the serving leader or stops leading before that, and
    /// NOT_ENOUGH_REPLICAS if acks=all finds fewer voters in sync than `min_insync`.
    pub fn produce(
        self: &Rc<Self>,
        records: &Bytes,
        acks: Acks,
    ) -> Result<oneshot::Receiver<Result<Appended, ErrorCode>>, Refusal> {
        if !self.serving() || self.stopped.get() {
            return Err(ErrorCode::NotLeaderOrFollower.into());
        }
        // An entry goes to a follower whole, in one frame of the peer link: one too large
        // for a frame would never be replicated, and nothing after it would commit.
        if records.len() > MAX_ENTRY_BYTES {
            let message = format!("a batch of a replicated partition may take at most {MAX_ENTRY_BYTES} bytes");
            return Err(Refusal { code: ErrorCode::MessageTooLarge, message: Some(message), records: Vec::new() });
        }
        if let Acks::All { min_insync } = acks {
            if self.in_sync() < min_insync {
                return Err(ErrorCode::NotEnoughReplicas.into());
            }
        }
        let (tx, rx) = oneshot::channel();
        let Some((prop, tx)) = self.log.prepare_replicated(records, tx)? else {
            return Ok(rx); // a retry of a batch in the log, answered by the log
        };
        let p = self.replica.borrow_mut().propose(prop.batch).map_err(|e| {
            tracing::debug!(group = ?self.id, "produce refused: {e}");
            Refusal::from(ErrorCode::NotLeaderOrFollower)
        })?;
        self.log.proposed(&prop.header, p.base_offset);
        let waiter = Waiter { reply: tx, log_append_time: prop.log_append_time, acks, base_offset: p.base_offset };
        self.waiting.borrow_mut().insert(p.index, waiter);
        self.pump();
        Ok(rx)
    }

    /// DeleteRecords on the leader: proposes the log start `offset` (-1: the high watermark)
    /// as an entry; every replica moves its start as it applies it (`settle`). Answered once
    /// committed, with the log start in `log_start_offset`; OFFSET_OUT_OF_RANGE past the high
    /// watermark, NOT_LEADER_OR_FOLLOWER if this replica is not the serving leader or stops
    /// leading first. A start at or below the current one is answered at once.
    pub fn delete_records(
        self: &Rc<Self>,
        offset: i64,
    ) -> Result<oneshot::Receiver<Result<Appended, ErrorCode>>, ErrorCode> {
        if !self.serving() || self.stopped.get() {
            return Err(ErrorCode::NotLeaderOrFollower);
        }
        let now = self.log.offsets();
        let target = if offset == -1 { now.high_watermark } else { offset };
        if target < 0 || target > now.high_watermark {
            return Err(ErrorCode::OffsetOutOfRange);
        }
        let (tx, rx) = oneshot::channel();
        if target <= now.log_start {
            let _ = tx.send(Ok(self.log.appended(-1, -1)));
            return Ok(rx);
        }
        let p = self.replica.borrow_mut().propose(super::entry::log_start_batch(target)).map_err(|e| {
            tracing::debug!(group = ?self.id, "DeleteRecords refused: {e}");
            ErrorCode::NotLeaderOrFollower
        })?;
        // Answered at commit (no copies beyond a majority asked for): by then `settle` has
        // moved this replica's start.
        let waiter =
            Waiter { reply: tx, log_append_time: -1, acks: Acks::All { min_insync: 1 }, base_offset: p.base_offset };
        self.waiting.borrow_mut().insert(p.index, waiter);
        self.pump();
        Ok(rx)
    }

    /// Voters in sync, as a leader sees them: itself, and each follower it heard from within
    /// the lag bound whose log it is replicating to (not probing for a match). Kafka's ISR.
    pub fn in_sync(&self) -> usize {
        self.in_sync_ids().len()
    }

    /// The voters `in_sync` counts.
    pub fn in_sync_ids(&self) -> Vec<u64> {
        let r = self.replica.borrow();
        let heard = self.heard.borrow();
        let now = Instant::now();
        let recent = |id: u64| heard.get(&id).is_some_and(|t| now.duration_since(*t) <= self.lag);
        r.voters().into_iter().filter(|&id| id == r.id() || (recent(id) && r.replicating(id))).collect()
    }

    /// The other replicas (voters and learners) a leader has not heard from within the lag
    /// bound: down, or cut off.
    pub fn silent_ids(&self) -> Vec<u64> {
        let r = self.replica.borrow();
        let heard = self.heard.borrow();
        let now = Instant::now();
        let silent = |id: &u64| heard.get(id).is_none_or(|t| now.duration_since(*t) > self.lag);
        let mut ids = r.voters();
        ids.extend(r.learners());
        ids.into_iter().filter(|id| *id != r.id() && silent(id)).collect()
    }

    /// Hands leadership to voter `to` (see `Replica::transfer_leader`); does nothing unless
    /// this replica leads.
    pub fn transfer_leader(self: &Rc<Self>, to: u64) {
        self.replica.borrow_mut().transfer_leader(to);
        self.pump();
    }

    /// Proposes a membership change (see `Replica::propose_conf_change`); it applies when
    /// committed, which `voters` and `learners` show. One change at a time: raft-rs drops a
    /// second one while the first is pending.
    pub fn change_membership(self: &Rc<Self>, cc: raft::prelude::ConfChangeV2) -> Result<(), ErrorCode> {
        let r = self.replica.borrow_mut().propose_conf_change(cc);
        self.pump();
        r.map_err(|e| {
            tracing::debug!(group = ?self.id, "membership change refused: {e}");
            ErrorCode::NotLeaderOrFollower
        })
    }

    /// Whether a membership change is under way (see `Replica::changing_membership`).
    pub fn changing_membership(&self) -> bool {
        self.replica.borrow().changing_membership()
    }

    /// Whether a leader's follower or learner `id` holds everything committed: it may be
    /// made a voter without slowing commits down.
    pub fn caught_up(&self, id: u64) -> bool {
        let r = self.replica.borrow();
        r.replicating(id) && r.matched(id).is_some_and(|m| m >= r.commit_index())
    }

    /// The membership as this replica applied it, for a reassignment's next step.
    pub fn membership(&self) -> crate::cluster::membership::Membership {
        let r = self.replica.borrow();
        crate::cluster::membership::Membership {
            me: r.id(),
            voters: r.voters(),
            learners: r.learners(),
            changing: r.changing_membership(),
        }
    }

    /// Asks for the leadership (see `Replica::take_leadership`).
    pub fn take_leadership(self: &Rc<Self>) {
        self.replica.borrow_mut().take_leadership();
        self.pump();
    }

    /// The voters of the configuration this replica applied.
    pub fn voters(&self) -> Vec<u64> {
        self.replica.borrow().voters()
    }

    pub fn learners(&self) -> Vec<u64> {
        self.replica.borrow().learners()
    }

    /// A peer's raft message for this group.
    pub fn step(self: &Rc<Self>, m: Message) {
        self.heard.borrow_mut().insert(m.from, Instant::now());
        self.replica.borrow_mut().step(m);
        self.pump();
    }

    /// Stands for election at once (see `Replica::campaign`), and again every other tick
    /// while no leader is known, for an election timeout: the peers of a new partition open
    /// their replicas when they apply its metadata, and a vote request reaching a broker
    /// before that is dropped, which would leave the election to whichever replica's timeout
    /// fires first instead of the preferred one.
    pub fn campaign(self: &Rc<Self>) {
        self.replica.borrow_mut().campaign();
        self.eager.set(self.election_ticks);
        self.pump();
    }

    /// Sets the replication throttles over this partition's appends (None: none).
    pub fn set_throttle(self: &Rc<Self>, throttle: Option<(Rc<Throttle>, Throttled)>) {
        let same = match (&*self.throttle.borrow(), &throttle) {
            (None, None) => true,
            (Some((a, x)), Some((b, y))) => Rc::ptr_eq(a, b) && x == y,
            _ => false,
        };
        if same {
            return;
        }
        *self.throttle.borrow_mut() = throttle;
        self.retune_throttled();
    }

    /// Which rates an append to `peer` counts against now: none if it is in sync, or no
    /// list names it, or no rate it is named for is set.
    fn covers(throttle: &(Rc<Throttle>, Throttled), peer: u64, in_sync: &[u64]) -> Covers {
        if in_sync.contains(&peer) {
            return Covers::default();
        }
        throttle.0.effective(throttle.1.covers(peer), peer)
    }

    /// Applies the replication throttles to a leader's appends about to leave: each one to
    /// a peer a throttle covers is counted against its rates, and once a rate is in debt the
    /// peer's window of appends in flight is closed (`retune_throttled` opens it again). A
    /// covered peer's window is at most `THROTTLED_INFLIGHT`. Through a closed window raft
    /// sends only a probe (a peer in Probe state, which ignores the window): that one is
    /// dropped, and raft probes again after the next heartbeat. Nothing raft counts as in
    /// flight is dropped, so nothing is sent twice.
    fn throttle_sends(&self, send: &mut Vec<Message>) {
        let guard = self.throttle.borrow();
        let Some(t) = guard.as_ref() else { return };
        let appends = |m: &Message| m.get_msg_type() == MessageType::MsgAppend && !m.entries.is_empty();
        if !t.0.any() || !send.iter().any(appends) {
            return;
        }
        let now = Instant::now();
        let in_sync = self.in_sync_ids();
        let mut limited = self.limited.borrow_mut();
        let mut r = self.replica.borrow_mut();
        if !limited.is_empty() && self.limited_term.get() != r.term() {
            r.reset_inflight_caps(); // narrowed by an earlier leadership
            limited.clear();
        }
        self.limited_term.set(r.term());
        send.retain(|m| {
            let covers = if appends(m) { Self::covers(t, m.to, &in_sync) } else { Covers::default() };
            if !covers.any() {
                return true;
            }
            match limited.get(&m.to) {
                Some(0) => return false,
                Some(_) => {}
                None => {
                    limited.insert(m.to, THROTTLED_INFLIGHT);
                    r.set_inflight_cap(m.to, THROTTLED_INFLIGHT);
                }
            }
            let bytes = m.entries.iter().map(|e| e.data.len() as u64).sum();
            t.0.charge(covers, m.to, bytes, now);
            self.log.probe().replication_throttled(bytes);
            if t.0.over(covers, m.to, now) {
                limited.insert(m.to, 0);
                r.set_inflight_cap(m.to, 0);
            }
            true
        });
    }

    /// Once a tick (and when the throttles change), a leader sets each peer's window: a
    /// covered peer's is narrowed to `THROTTLED_INFLIGHT` before raft can send it a burst,
    /// a closed one opens again once the rates have paid back their debt, and one no
    /// throttle covers any more (in sync now, or the lists or rates changed) goes back to
    /// raft's own. A replica that stopped leading, or leads in a new term, puts every window
    /// back: raft-rs keeps them across leaderships.
    fn retune_throttled(self: &Rc<Self>) {
        let guard = self.throttle.borrow();
        if guard.is_none() && self.limited.borrow().is_empty() {
            return;
        }
        {
            let mut r = self.replica.borrow_mut();
            if !r.is_leader() || self.limited_term.get() != r.term() {
                let mut limited = self.limited.borrow_mut();
                if !limited.is_empty() {
                    r.reset_inflight_caps();
                    limited.clear();
                }
                if !r.is_leader() {
                    return;
                }
                self.limited_term.set(r.term());
            }
        }
        let now = Instant::now();
        let in_sync = self.in_sync_ids();
        let (peers, max) = {
            let r = self.replica.borrow();
            let peers: Vec<u64> = r.voters().into_iter().chain(r.learners()).filter(|id| *id != r.id()).collect();
            (peers, r.max_inflight())
        };
        /// What becomes of one peer's window.
        enum Window {
            /// The peer left the configuration, and its window with it.
            Forget,
            /// Covered now: at most `THROTTLED_INFLIGHT` from here on.
            Narrow,
            /// The debt is paid: open to `THROTTLED_INFLIGHT` again.
            Reopen,
            /// No longer covered: raft's own window.
            Restore,
        }
        let mut changes: Vec<(u64, Window)> = Vec::new();
        {
            let limited = self.limited.borrow();
            changes.extend(limited.keys().filter(|p| !peers.contains(p)).map(|p| (*p, Window::Forget)));
            for &peer in &peers {
                let covers = guard.as_ref().map_or(Covers::default(), |t| Self::covers(t, peer, &in_sync));
                let paid = || guard.as_ref().is_some_and(|t| !t.0.over(covers, peer, now));
                match (limited.get(&peer).copied(), covers.any()) {
                    (None, true) => changes.push((peer, Window::Narrow)),
                    (Some(_), false) => changes.push((peer, Window::Restore)),
                    (Some(0), true) if paid() => changes.push((peer, Window::Reopen)),
                    _ => {}
                }
            }
        }
        drop(guard);
        let mut widened = false;
        {
            let mut limited = self.limited.borrow_mut();
            let mut r = self.replica.borrow_mut();
            for (peer, change) in changes {
                match change {
                    Window::Forget => {
                        limited.remove(&peer);
                    }
                    Window::Narrow => {
                        limited.insert(peer, THROTTLED_INFLIGHT);
                        r.set_inflight_cap(peer, THROTTLED_INFLIGHT);
                    }
                    Window::Reopen => {
                        limited.insert(peer, THROTTLED_INFLIGHT);
                        r.widen_inflight(peer, THROTTLED_INFLIGHT);
                        widened = true;
                    }
                    Window::Restore => {
                        limited.remove(&peer);
                        r.widen_inflight(peer, max);
                        widened = true;
                    }
                }
            }
        }
        if widened {
            self.pump();
        }
    }

    pub fn tick(self: &Rc<Self>) {
        self.retune_throttled();
        {
            let mut r = self.replica.borrow_mut();
            r.tick();
            let left = self.eager.get();
            if left > 0 {
                self.eager.set(left - 1);
                if left.is_multiple_of(2) {
                    r.campaign_if_leaderless();
                }
            }
        }
        self.pump();
    }

    /// Stops taking part cleanly (the broker stops or the replica moves away): waiting
    /// produces get NOT_LEADER_OR_FOLLOWER, the write under way finishes, the state is
    /// written with the current commit and the log is closed.
    pub async fn stop(&self) -> Result<(), BrokerError> {
        self.halt().await;
        if self.replica.borrow().failed().is_some() {
            return Ok(()); // leave it to recovery
        }
        // With writes still queued (the writer stops after the one under way) the state
        // raft has moved to may name what they would have written, a snapshot's start
        // above all: the state file keeps what the written log goes with.
        if self.queued.borrow().is_empty() {
            write_state(&self.state_path, &self.replica.borrow().meta())?;
        }
        self.log.close().await
    }

    /// Stops at once, as a crash would but for the write under way, which is let finish so
    /// that nothing else writes the log's files afterwards.
    pub async fn halt(&self) {
        self.stopped.set(true);
        let short = std::mem::take(&mut *self.short.borrow_mut());
        for (_, w) in self.waiting.borrow_mut().drain().chain(short) {
            let _ = w.reply.send(Err(ErrorCode::NotLeaderOrFollower));
        }
        self.log.wake_watchers();
        while self.writing.get() {
            glommio::timer::sleep(Duration::from_millis(1)).await;
        }
    }

    /// Handles Readies until raft has none: sends what may go now and queues each write for
    /// the writer task. A Ready that writes nothing is finished on the spot when no write is
    /// queued before it (raft-rs counts a Ready persisted with every one before it).
    fn pump(self: &Rc<Self>) {
        while !self.stopped.get() {
            let work = self.replica.borrow_mut().next_work();
            self.settle();
            let Some(mut work) = work else { break };
            self.throttle_sends(&mut work.send);
            self.transport.send(&self.id, std::mem::take(&mut work.send));
            let w = &work.write;
            let nothing = w.batches.is_empty() && w.truncate.is_none() && w.meta.is_none();
            if nothing && !self.writing.get() {
                self.transport.send(&self.id, work.after);
                self.replica.borrow_mut().persisted(w.number, &[]);
                continue;
            }
            self.queued.borrow_mut().push_back(work);
            if !self.writing.replace(true) {
                let g = self.clone();
                glommio::spawn_local(async move {
                    g.write_queued().await;
                    g.writing.set(false);
                })
                .detach();
            }
        }
    }

    /// The writer task: takes the queue in order until it is empty (or the group stops).
    async fn write_queued(self: &Rc<Self>) {
        while !self.stopped.get() {
            let mut works = self.take_writes();
            if works.is_empty() {
                // Idle: the log's zeros ahead, while nothing waits for a write.
                self.log.preallocate().await;
                works = self.take_writes();
                if works.is_empty() {
                    return;
                }
            }
            // A follower's fresh entries are read by nobody soon: it appends past the page cache.
            self.log.set_tail_cached(self.replica.borrow().is_leader());
            let Some(locs) = self.write(&works).await else { return };
            if self.stopped.get() {
                return;
            }
            if !self.replica.borrow().is_leader() {
                self.log.drop_cached_behind(FOLLOWER_CACHE_BYTES);
            }
            let mut locs = locs.as_slice();
            for w in works {
                let (these, rest) = locs.split_at(w.write.batches.len());
                locs = rest;
                self.transport.send(&self.id, w.after);
                self.replica.borrow_mut().persisted(w.write.number, these);
            }
            self.answer_written();
            self.pump();
        }
    }

    /// The writes to make in one go: the oldest queued, and after it every one that only
    /// appends (one that cuts the log, or writes the replica state or a snapshot, starts a
    /// write of its own: what it writes first must come after the batches before it).
    fn take_writes(&self) -> Vec<Work> {
        let mut q = self.queued.borrow_mut();
        let Some(first) = q.pop_front() else { return Vec::new() };
        let appends_only = |w: &Work| w.write.meta.is_none() && w.write.install.is_none() && w.write.truncate.is_none();
        let mut works = vec![first];
        while q.front().is_some_and(appends_only) {
            works.push(q.pop_front().expect("front"));
        }
        works
    }

    /// Makes `works` durable: the replica state or a snapshot first, then the log (the first
    /// one's cut, everyone's batches) with one fsync. Returns where the batches landed, in
    /// order; None if the replica failed.
    async fn write(&self, works: &[Work]) -> Option<Vec<Loc>> {
        let first = &works[0].write;
        match (&first.meta, &first.install) {
            (Some(meta), Some(state)) => {
                if let Err(e) = self.install(meta, state).await {
                    self.fail(format!("cannot install the leader's snapshot: {e}"));
                    return None;
                }
            }
            (Some(meta), None) => {
                if let Err(e) = write_state(&self.state_path, meta) {
                    self.fail(e.to_string());
                    return None;
                }
            }
            (None, Some(_)) => unreachable!("an install rewrites the replica state"),
            (None, None) => {}
        }
        let batches: Vec<Bytes> = works.iter().flat_map(|w| w.write.batches.iter().cloned()).collect();
        match self.log.write_entries(first.truncate, &batches).await {
            Ok(locs) => Some(locs),
            Err(e) => {
                self.fail(format!("cannot write the log: {e}"));
                None
            }
        }
    }

    /// Puts a leader's snapshot in place as the log start `meta` names. In an order that a
    /// crash anywhere leaves the old start with its log, or the new start with the snapshot
    /// kept to install again at open: the producer state there and the snapshot itself are
    /// written (`raft-start-<index>.producers` and `.install`), then the replica state naming
    /// the start, then the log is replaced, and only then the snapshot's file removed.
    async fn install(&self, meta: &RaftMeta, state: &StartState) -> Result<(), BrokerError> {
        let dir = self.log.dir();
        let index = meta.log_start.index;
        let invalid = |e: String| storage(dir, std::io::Error::new(std::io::ErrorKind::InvalidData, e));
        let producers = decode_producers(&state.producers).map_err(invalid)?;
        write_start_producers(dir, index, &state.producers)?;
        let pending = pending_install_path(dir, index);
        crate::storage::write_atomic(&pending, &state.encode(), 0o644).map_err(|e| storage(&pending, e))?;
        write_state(&self.state_path, meta)?;
        self.log.install(state.log_start, &state.data, state.offset, producers).await?;
        remove_other_starts(dir, index)?;
        // The kept snapshot's removal is durable before this replica counts anything after
        // it as written: brought back by a power loss, it would be installed again at the
        // next open, over entries this replica acknowledged.
        crate::storage::sync_dir(dir).map_err(|e| storage(dir, e))?;
        Ok(())
    }

    /// Retention of a replicated log: moves the raft log's start to where the topic's
    /// retention would cut (whole segments; the active one is first rolled, once every
    /// record in the log has expired and every peer holds it all), no further than what is
    /// committed and written here and, on a leader, held by every peer heard from within the
    /// lag bound (a peer away longer gets a snapshot when it is back), and deletes the
    /// segments below. Returns the segments deleted.
    ///
    /// A compacted log's raft log start rises further, to the newest segment with at most
    /// `SNAPSHOT_DATA_MAX` bytes below it, deleting nothing: the records below stay in the
    /// log, no longer raft entries, so the raft log forgets them (memory per entry) and the
    /// cleaner drops the batches it empties there; a snapshot carries them to a replica that
    /// lacks them.
    pub fn apply_retention(self: &Rc<Self>, now_ms: i64) -> usize {
        if self.writing.get() || self.stopped.get() || self.failed().is_some() {
            return 0; // the next pass, with no write under way
        }
        let peers = self.recent_peers();
        let (limit, start) = {
            let r = self.replica.borrow();
            (r.store().end_offset(r.compaction_limit(&peers)), r.store().start())
        };
        let Some(limit) = limit else { return 0 };
        let retention = self.log.retention_point(now_ms, limit);
        let target = retention.max(self.log.raft_start_point(start.offset, limit, SNAPSHOT_DATA_MAX));
        let mut raft_start = start.offset;
        if let Some(offset) = target.filter(|&o| o > start.offset) {
            let index = self.replica.borrow().store().index_ending_at(offset);
            if let Some(index) = index {
                if let Err(e) = self.move_raft_start(start.offset, offset, index) {
                    self.fail(format!("cannot move the log start to {offset}: {e}"));
                    return 0;
                }
                raft_start = offset;
            }
        }
        let deleted = match retention.filter(|&r| r <= raft_start) {
            Some(offset) => self.log.drop_below(offset),
            None => 0,
        };
        if limit >= self.log.offsets().log_end && self.log.active_expired(now_ms) {
            self.roll_for_retention(now_ms);
        }
        deleted
    }

    /// Rolls the log's active segment on the writer task, as a write would (raft's writes
    /// queued meanwhile follow it), then runs retention again to delete the old one.
    fn roll_for_retention(self: &Rc<Self>, now_ms: i64) {
        if self.writing.replace(true) {
            return;
        }
        let g = self.clone();
        glommio::spawn_local(async move {
            if let Err(e) = g.log.roll_for_retention().await {
                // Offline, as after a failed write: nothing more is written to this log.
                g.fail(format!("cannot roll the active segment for retention: {e}"));
                g.writing.set(false);
                return;
            }
            g.write_queued().await;
            g.writing.set(false);
            if g.failed().is_none() {
                g.apply_retention(now_ms);
            }
        })
        .detach();
    }

    /// Moves the raft log's start from `from` to `offset`, past entry `index`, durably: the
    /// producer state there first, then the replica state naming it.
    fn move_raft_start(&self, from: i64, offset: i64, index: u64) -> Result<(), String> {
        let dir = self.log.dir().to_path_buf();
        let start_producers = self.replica.borrow().store().start_producers().clone();
        let state = decode_producers(&start_producers)?;
        let state = self.log.producers_before(state, from, offset).map_err(|e| e.to_string())?;
        let producers = serde_json::to_vec(&state).map_err(|e| e.to_string())?;
        write_start_producers(&dir, index, &producers).map_err(|e| e.to_string())?;
        let meta = self.replica.borrow_mut().compact_to(index, Bytes::from(producers));
        write_state(&self.state_path, &meta).map_err(|e| e.to_string())?;
        remove_other_starts(&dir, index).map_err(|e| e.to_string())?;
        tracing::debug!(group = ?self.id, offset, index, "raft log start moved by retention");
        Ok(())
    }

    /// The other replicas (voters and learners) heard from within the lag bound.
    fn recent_peers(&self) -> Vec<u64> {
        let r = self.replica.borrow();
        let heard = self.heard.borrow();
        let now = Instant::now();
        let mut ids = r.voters();
        ids.extend(r.learners());
        ids.retain(|id| *id != r.id() && heard.get(id).is_some_and(|t| now.duration_since(*t) <= self.lag));
        ids
    }

    fn fail(&self, why: String) {
        tracing::error!(group = ?self.id, "replica offline until a restart recovers it: {why}");
        self.replica.borrow_mut().fail(why);
        self.settle();
    }

    /// Answers the produces raft settled, follows leadership changes and moves the log's high
    /// watermark to the replica's.
    fn settle(&self) {
        let start = self.replica.borrow_mut().take_log_start();
        if let Some(offset) = start {
            if let Err(e) = self.log.move_start(offset) {
                self.fail(format!("cannot move the log start to {offset}: {e}"));
                return;
            }
        }
        let mut r = self.replica.borrow_mut();
        let settled = r.take_settled();
        let serving = r.serving();
        let hwm = (r.high_watermark(), r.high_watermark_loc());
        drop(r);
        if serving != self.serving.replace(serving) {
            // What the idempotence checks count is what the log holds, nothing proposed.
            self.log.reset_proposals();
            tracing::info!(group = ?self.id, serving, "leadership changed");
            if !serving {
                // Fetches parked here answer NOT_LEADER_OR_FOLLOWER now, as Kafka completes
                // its delayed fetches when a replica becomes a follower: a leader cut off
                // from its peers sees no new watermark that would wake them.
                self.log.wake_watchers();
            }
        }
        // The watermark first: a producer told of its commit may fetch it at once.
        if let (offset, Some(loc)) = hwm {
            self.log.set_high_watermark(offset, loc);
        }
        let mut waiting = self.waiting.borrow_mut();
        let mut short = self.short.borrow_mut();
        for s in settled {
            match s {
                Settled::Committed(p) => {
                    if let Some(w) = waiting.remove(&p.index) {
                        short.push((p.index, w));
                    }
                }
                Settled::Lost(p) => {
                    if let Some(w) = waiting.remove(&p.index) {
                        let _ = w.reply.send(Err(ErrorCode::NotLeaderOrFollower));
                    }
                }
            }
        }
        drop(waiting);
        if !serving {
            // Committed, but who holds it is a leader's knowledge: the producer retries.
            for (_, w) in short.drain(..) {
                let _ = w.reply.send(Err(ErrorCode::NotEnoughReplicasAfterAppend));
            }
        }
        // Committed; acks=all also waits for `min_insync` copies (more than a majority, when
        // the topic asks for it). Anything else committed is answered now.
        let r = self.replica.borrow();
        let enough = |(index, w): &mut (u64, Waiter)| match w.acks {
            Acks::All { min_insync } => r.voters_holding(*index) >= min_insync,
            Acks::Leader => true,
        };
        for (_, w) in short.extract_if(.., enough) {
            let _ = w.reply.send(Ok(self.log.appended(w.base_offset, w.log_append_time)));
        }
    }

    /// acks=1 produces whose entry the leader has written durably are answered.
    fn answer_written(&self) {
        let written = self.replica.borrow().persisted_index();
        let mut waiting = self.waiting.borrow_mut();
        for (_, w) in waiting.extract_if(|&i, w| i <= written && w.acks == Acks::Leader) {
            let _ = w.reply.send(Ok(self.log.appended(w.base_offset, w.log_append_time)));
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
