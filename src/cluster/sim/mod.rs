//! A deterministic simulation of raft-rs replicas: no reactor, sockets, threads or clock, only
//! a seeded PRNG, so a failing seed replays exactly (`RINGBROKER_SIM_SEED=<seed>`).
//!
//! Each step may start or heal a partition, crash or restart a node, propose a payload on a
//! leader and, in five-node runs, a membership change (learners added, joint changes that
//! promote them and remove voters); then every live node ticks, due messages are delivered and every Ready is handled by
//! the contract below, until nothing is left to do in the step. The invariants (`check`) run
//! after every step; at the end the network heals and the logs of the final configuration's
//! members must converge and agree.
//!
//! The nodes are the broker's own replicas (`Replica` over `RaftStore`, Kafka batches in a
//! log file): each Ready is handled by the replica's contract, messages sent now (a leader's,
//! allowed before its own write) and the write applied; then, at once or after later Readies
//! were taken and more messages delivered (a slow fsync, as the broker's writer queue allows),
//! every write so far is synced, and in order each one's messages that needed it are sent and
//! it is `persisted`. A torn crash lands between the writes and the sync: the node never
//! sends what needed that sync, as with a real disk. Some nodes keep no batch in memory, so
//! their reads go to the file.
//!
//! Beyond raft's safety the Kafka view is checked: committed batches are byte-identical on
//! every node, high watermarks never go back, and an acknowledged batch sits at the offset its
//! producer was told. Half the proposals come from idempotent producers that retry
//! (`producers`): no (producer, sequence) is committed twice, and a retry answered as a
//! duplicate names the offset of the first.
//!
//! Retention runs too (`compact`): a node moves its log start to a committed entry, on a
//! leader sometimes past what its followers hold, so that a lagging or new node is sent a
//! snapshot (the state at the start: offset, configuration, producer state) and installs it.
//! Entries below a log start are gone by design; every check covers what the logs still hold,
//! and idempotent retries of batches retention deleted must still be recognised.

mod check;
mod disk;
mod net;
mod producers;
mod rng;

use std::collections::HashMap;

use raft::prelude::{Entry, Message};
use raft::GetEntriesContext;

use crate::cluster::replica::{Replica, ReplicaConfig, Settled};
use crate::cluster::store::RaftStore;
use crate::protocol::batch;
use check::{Ack, Checker};
use disk::Disk;
use net::Net;
use producers::{Judged, Producer, Told};
use rng::Rng;

/// How often things happen, per mille: per step, except `torn_write`, per Ready that writes.
#[derive(Clone, Copy)]
struct Faults {
    propose: u64,
    /// A membership change proposed by a leader (five-node runs only).
    reconfigure: u64,
    crash: u64,
    torn_write: u64,
    /// A node moves its log start (retention).
    compact: u64,
    /// A Ready's write is left unsynced while the node goes on (per Ready); pending writes
    /// are synced with the complement's chance at each round of deliveries.
    defer_sync: u64,
    partition: u64,
    heal: u64,
}

const CHAOS: Faults = Faults {
    propose: 300,
    reconfigure: 0,
    crash: 3,
    torn_write: 3,
    compact: 10,
    defer_sync: 400,
    partition: 5,
    heal: 20,
};

/// CHAOS plus membership changes: learners added, joint changes promoting them and removing
/// voters, removals.
const CHURN: Faults = Faults { reconfigure: 15, ..CHAOS };

const CALM: Faults =
    Faults { propose: 0, reconfigure: 0, crash: 0, torn_write: 0, compact: 0, defer_sync: 0, partition: 0, heal: 0 };

/// Every run starts with these voters; in five-node runs nodes 4 and 5 start outside the
/// configuration, as brokers a reassignment adds.
const FIRST_VOTERS: [u64; 3] = [1, 2, 3];

/// Steps the healed cluster gets to converge before the run counts as stuck.
const CONVERGE_STEPS: u64 = 3_000;

struct Node {
    cfg: ReplicaConfig,
    /// Bytes of batches the node's store keeps in memory (0: every read goes to the file).
    cache: usize,
    /// None while crashed.
    raft: Option<Replica>,
    disk: Disk,
    hwm_seen: i64,
    incarnation: u64,
    restart_at: u64,
    commit_seen: u64,
    /// A targeted test's crash: tear the next write that has entries, keeping this many.
    tear_next_write: Option<usize>,
    /// Writes applied but not yet synced, oldest first: each one's messages to send once
    /// durable, its Ready's number and where its batches landed.
    unsynced: Vec<(Vec<Message>, u64, Vec<crate::cluster::store::Loc>)>,
    /// As a leader: the producer state of its term (see `producers`).
    producer_state: Option<(u64, crate::producer::ProducerState)>,
}

struct Proposal {
    node: usize,
    incarnation: u64,
    /// The batch as proposed, before the leader stamped its offset and epoch.
    data: Vec<u8>,
    /// The idempotent producer and sequence that sent it, if one did.
    sent_by: Option<(usize, i32)>,
}

struct Outcome {
    trace: u64,
    /// Acknowledgements idempotent producers got (duplicates' included).
    told: usize,
    duplicates: usize,
    /// Membership changes committed (joint leaves included).
    reconfigured: usize,
    commit: u64,
    acked: usize,
    crashes: u64,
    torn: u64,
    compactions: u64,
    installs: u64,
}

struct Sim {
    rng: Rng,
    now: u64,
    nodes: Vec<Node>,
    voters: Vec<u64>,
    net: Net,
    check: Checker,
    faults: Faults,
    /// By (index, term) of the entry the leader appended for it.
    proposals: HashMap<(u64, u64), Proposal>,
    next_payload: u64,
    producers: Vec<Producer>,
    /// What the idempotent producers were told, checked against the final log.
    told: Vec<Told>,
    /// Retries a leader found in its log (answered, or waiting for the first to commit).
    duplicates: usize,
    /// FNV-1a over deliveries, crashes and restarts: two runs agree iff they took one path.
    trace: u64,
    crashes: u64,
    torn: u64,
    /// Log starts moved, and snapshots installed.
    compactions: u64,
    installs: u64,
    logger: slog::Logger,
}

impl Sim {
    fn new(seed: u64, count: usize, faults: Faults) -> Sim {
        let mut rng = Rng::new(seed);
        let voters = FIRST_VOTERS.to_vec();
        // raft-rs draws the election timeout from [min, max) with thread_rng: a one-value range
        // makes it deterministic, distinct per node so elections do not tie forever.
        let mut offsets: Vec<u64> = (0..20).collect();
        for i in 0..count {
            let j = i + rng.below((offsets.len() - i) as u64) as usize;
            offsets.swap(i, j);
        }
        let logger = crate::cluster::logging::logger();
        let mut sim = Sim {
            rng,
            now: 0,
            nodes: Vec::new(),
            voters,
            net: Net::new(count),
            check: Checker::new(seed),
            faults,
            proposals: HashMap::new(),
            next_payload: 1,
            producers: (0..3).map(|k| Producer::new(1000 + k)).collect(),
            told: Vec::new(),
            duplicates: 0,
            trace: 0xcbf2_9ce4_8422_2325,
            crashes: 0,
            torn: 0,
            compactions: 0,
            installs: 0,
            logger,
        };
        // Both ways a group tells followers of commits, by seed: partitions wait for the next
        // message, the metadata quorum sends one at once.
        let skip_bcast_commit = sim.rng.below(2) == 1;
        for (i, offset) in offsets.iter().take(count).enumerate() {
            let election_tick = 10 + *offset as usize;
            let cfg = ReplicaConfig {
                election_tick,
                max_election_tick: election_tick + 1,
                heartbeat_tick: 1,
                max_size_per_msg: 1 << 20,
                max_inflight_msgs: 64,
                skip_bcast_commit,
            };
            let cache = [0, 200, 1 << 20][sim.rng.below(3) as usize];
            let voters = sim.voters.clone();
            sim.nodes.push(Node {
                cfg,
                cache,
                raft: None,
                disk: Disk::new(&voters),
                hwm_seen: 0,
                incarnation: 0,
                restart_at: 0,
                commit_seen: 0,
                tear_next_write: None,
                unsynced: Vec::new(),
                producer_state: None,
            });
            sim.restart(i);
        }
        sim
    }

    fn mix(&mut self, value: u64) {
        for byte in value.to_le_bytes() {
            self.trace = (self.trace ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn step(&mut self) {
        let f = self.faults;
        if self.net.is_partitioned() {
            if self.rng.chance(f.heal) {
                self.net.heal();
            }
        } else if self.rng.chance(f.partition) {
            let count = self.nodes.len();
            let side = if self.rng.chance(500) {
                let lone = self.rng.below(count as u64) as usize;
                (0..count).map(|i| u8::from(i == lone)).collect()
            } else {
                (0..count).map(|_| self.rng.below(2) as u8).collect()
            };
            self.net.partition(side);
        }
        if self.rng.chance(f.crash) {
            let i = self.rng.below(self.nodes.len() as u64) as usize;
            if self.nodes[i].raft.is_some() {
                self.nodes[i].raft = None;
                self.crashed(i, 0);
            }
        }
        for i in 0..self.nodes.len() {
            if self.nodes[i].raft.is_none() && self.nodes[i].restart_at <= self.now {
                self.restart(i);
            }
        }
        if self.rng.chance(f.propose) {
            if self.rng.chance(500) {
                self.propose();
            } else {
                self.produce_idempotent();
            }
        }
        if self.rng.chance(f.reconfigure) {
            self.reconfigure();
        }
        if self.rng.chance(f.compact) {
            let i = self.rng.below(self.nodes.len() as u64) as usize;
            self.compact(i);
        }
        for node in &mut self.nodes {
            if let Some(r) = node.raft.as_mut() {
                r.tick();
            }
        }
        self.drain();
        self.check_nodes();
        self.now += 1;
    }

    /// Delivers what is due and handles Readies until the step has nothing left.
    fn drain(&mut self) {
        loop {
            let mut progress = false;
            while let Some(msg) = self.net.deliver(self.now) {
                progress = true;
                self.mix((msg.from << 32) | msg.to);
                self.mix(msg.get_msg_type() as u64);
                self.mix(msg.term ^ (msg.index << 20) ^ (msg.commit << 40));
                if let Some(r) = self.nodes[msg.to as usize - 1].raft.as_mut() {
                    r.step(msg);
                }
            }
            for i in 0..self.nodes.len() {
                if !self.nodes[i].unsynced.is_empty() && !self.rng.chance(self.faults.defer_sync) {
                    progress = true;
                    self.sync_writes(i);
                }
                while self.handle_ready(i) {
                    progress = true;
                }
            }
            if !progress {
                return;
            }
        }
    }

    fn send(&mut self, msgs: Vec<Message>) {
        self.net.send(&mut self.rng, self.now, msgs);
    }

    /// One Ready, by the contract in the module doc. False when there was none.
    fn handle_ready(&mut self, i: usize) -> bool {
        let Some(mut r) = self.nodes[i].raft.take() else {
            return false;
        };
        let Some(work) = r.next_work() else {
            if let Some(why) = r.failed() {
                self.check.fail(format!("node {} failed: {why}", i + 1));
            }
            self.nodes[i].raft = Some(r);
            return false;
        };
        self.send(work.send);
        if work.write.install.is_some() {
            self.installs += 1;
            self.mix(0x5a5a_0000 | i as u64);
        }
        let locs = self.nodes[i].disk.write(&work.write);
        let wrote = !work.write.batches.is_empty();
        self.nodes[i].unsynced.push((work.after, work.write.number, locs));
        let pending = self.nodes[i].disk.pending_batches();
        if wrote {
            let armed = self.nodes[i].tear_next_write.take();
            let keep = match armed {
                Some(keep) => Some(keep),
                None if self.rng.chance(self.faults.torn_write) => Some(self.rng.below(pending as u64 + 1) as usize),
                None => None,
            };
            if let Some(keep) = keep {
                self.torn += 1;
                self.crashed(i, keep);
                return true;
            }
        }
        self.settle(i, &mut r);
        self.nodes[i].raft = Some(r);
        if !self.rng.chance(self.faults.defer_sync) {
            self.sync_writes(i);
        }
        true
    }

    /// Syncs node `i`'s writes; then, in order, sends what waited for each and tells raft.
    fn sync_writes(&mut self, i: usize) {
        let Some(mut r) = self.nodes[i].raft.take() else { return };
        self.nodes[i].disk.sync();
        for (after, number, locs) in std::mem::take(&mut self.nodes[i].unsynced) {
            self.send(after);
            r.persisted(number, &locs);
        }
        self.settle(i, &mut r);
        self.nodes[i].raft = Some(r);
    }

    /// Proposals of node `i` that raft settled; a committed one becomes an acknowledgement.
    fn settle(&mut self, i: usize, r: &mut Replica) {
        for s in r.take_settled() {
            let Settled::Committed(p) = s else { continue };
            let Some(prop) = self.proposals.remove(&(p.index, p.term)) else { continue };
            if prop.node != i || prop.incarnation != self.nodes[i].incarnation {
                continue;
            }
            let mut data = prop.data;
            batch::patch(&mut data, p.base_offset, p.term as i32);
            self.check.acked.push(Ack { index: p.index, term: p.term, base_offset: p.base_offset, data });
            if let Some((k, sequence)) = prop.sent_by {
                if self.producers[k].acked(sequence) {
                    self.told.push(Told { producer: self.producers[k].id, sequence, offset: p.base_offset });
                }
            }
        }
    }

    /// The node is already down (its RawNode dropped); its disk loses what was not synced.
    fn crashed(&mut self, i: usize, keep: usize) {
        self.crashes += 1;
        self.mix(0xc0ff_ee00 | i as u64);
        self.nodes[i].disk.crash(keep);
        self.nodes[i].unsynced.clear();
        self.nodes[i].restart_at = self.now + 5 + self.rng.below(50);
        self.proposals.retain(|_, p| p.node != i);
    }

    /// Rebuilds the node from its synced disk alone.
    fn restart(&mut self, i: usize) {
        self.mix(0xbeef_0000 | i as u64);
        let node = &mut self.nodes[i];
        let meta = node.disk.meta().clone();
        let mut store = RaftStore::recover(&meta, node.disk.scan(), node.disk.current.clone(), node.cache)
            .expect("the synced log holds whole batches");
        // As the broker's open reads `raft-start-<index>.producers`: without it a new leader
        // would not know the producers whose batches lie below its log start.
        store.set_start_producers(node.disk.start_producers().clone());
        let r = Replica::new(i as u64 + 1, node.cfg, store, meta.conf_index, &self.logger)
            .expect("restart from synced disk");
        let synced_commit = meta.hard_state.commit.min(r.store().last());
        if r.commit_index() != synced_commit {
            self.check.fail(format!(
                "node {} restarted with commit {} but synced {synced_commit}",
                i + 1,
                r.commit_index()
            ));
        }
        node.commit_seen = synced_commit;
        node.hwm_seen = r.high_watermark();
        node.incarnation += 1;
        node.producer_state = None;
        node.raft = Some(r);
    }

    fn leaders(&self) -> Vec<usize> {
        (0..self.nodes.len()).filter(|&i| self.nodes[i].raft.as_ref().is_some_and(Replica::is_leader)).collect()
    }

    fn serving(&self) -> Vec<usize> {
        (0..self.nodes.len()).filter(|&i| self.nodes[i].raft.as_ref().is_some_and(Replica::serving)).collect()
    }

    /// A client's proposal of a fresh payload to some node that leads and serves.
    fn propose(&mut self) {
        let leaders = self.serving();
        if leaders.is_empty() {
            return;
        }
        let i = leaders[self.rng.below(leaders.len() as u64) as usize];
        let payload = self.next_payload.to_be_bytes().to_vec();
        self.next_payload += 1;
        let data = batch::build(0, &[&payload]);
        let r = self.nodes[i].raft.as_mut().expect("a leader is live");
        let expected = r.log_end_offset();
        if let Ok(p) = r.propose(data.clone()) {
            if p.base_offset != expected || p.last_offset != expected {
                self.check.fail(format!("proposal at {expected} got offsets {}..={}", p.base_offset, p.last_offset));
            }
            let incarnation = self.nodes[i].incarnation;
            self.proposals.insert((p.index, p.term), Proposal { node: i, incarnation, data, sent_by: None });
        }
    }

    /// An idempotent producer sends (or resends) a batch to some node that serves; the leader
    /// judges it against its producer state first (see `producers`).
    fn produce_idempotent(&mut self) {
        let leaders = self.serving();
        if leaders.is_empty() {
            return;
        }
        let i = leaders[self.rng.below(leaders.len() as u64) as usize];
        let k = self.rng.below(self.producers.len() as u64) as usize;
        let retry = self.rng.chance(300);
        let seq = self.producers[k].next_send(retry);
        let data = producers::batch_of(self.producers[k].id, seq);
        let node = &mut self.nodes[i];
        let r = node.raft.as_mut().expect("a leader is live");
        let term = r.term();
        if node.producer_state.as_ref().is_none_or(|(t, _)| *t != term) {
            node.producer_state = Some((term, producers::state_of(r)));
        }
        let state = &mut node.producer_state.as_mut().expect("just set").1;
        match producers::judge(state, &data, r.high_watermark()) {
            Judged::Propose(h) => {
                if let Ok(p) = r.propose(data.clone()) {
                    state.update(&crate::protocol::batch::BatchHeader { base_offset: p.base_offset, ..h }, 0);
                    let incarnation = node.incarnation;
                    let prop = Proposal { node: i, incarnation, data, sent_by: Some((k, seq)) };
                    self.proposals.insert((p.index, p.term), prop);
                }
            }
            Judged::Duplicate(offset) => {
                self.duplicates += 1;
                if self.producers[k].acked(seq) {
                    self.told.push(Told { producer: self.producers[k].id, sequence: seq, offset });
                }
            }
            Judged::Wait => {}
        }
    }

    /// A leader proposes one membership change toward a random node: a stranger becomes a
    /// learner, a learner a voter (in a joint change that may also remove a voter), a voter is
    /// removed; never the leader itself, never below three voters.
    fn reconfigure(&mut self) {
        use raft::prelude::{ConfChangeSingle, ConfChangeType, ConfChangeV2};
        let Some(l) = self.leader() else { return };
        let r = self.nodes[l].raft.as_ref().expect("a leader is live");
        let (voters, learners, me) = (r.voters(), r.learners(), r.id());
        let n = self.rng.below(self.nodes.len() as u64) + 1;
        let mut changes = Vec::new();
        if learners.contains(&n) {
            changes.push((ConfChangeType::AddNode, n));
            let others: Vec<u64> = voters.iter().copied().filter(|&v| v != me).collect();
            if voters.len() >= 3 && !others.is_empty() && self.rng.chance(500) {
                changes.push((ConfChangeType::RemoveNode, others[self.rng.below(others.len() as u64) as usize]));
            }
        } else if voters.contains(&n) {
            if voters.len() > 3 && n != me {
                changes.push((ConfChangeType::RemoveNode, n));
            }
        } else {
            changes.push((ConfChangeType::AddLearnerNode, n));
        }
        if changes.is_empty() {
            return;
        }
        let mut cc = ConfChangeV2::default();
        for (kind, node_id) in changes {
            let mut one = ConfChangeSingle { node_id, ..Default::default() };
            one.set_change_type(kind);
            cc.mut_changes().push(one);
        }
        self.mix(0xc0f0_0000 | n);
        // Refused while another change is pending: raft-rs allows one at a time.
        let _ = self.nodes[l].raft.as_mut().expect("live").propose_conf_change(cc);
    }

    /// Node `i` moves its log start to a random committed entry it may give up: as the broker
    /// bounds it (every peer's match, on a leader) or, half the time, only by its own commit,
    /// which leaves followers behind the start and makes the leader send snapshots.
    fn compact(&mut self, i: usize) {
        if !self.nodes[i].unsynced.is_empty() {
            return; // as the broker's retention waits for its group's writes
        }
        let peers: Vec<u64> = if self.rng.chance(500) { (1..=self.nodes.len() as u64).collect() } else { Vec::new() };
        let Some(r) = self.nodes[i].raft.as_mut() else { return };
        let start = r.store().start().index;
        let limit = r.compaction_limit(&peers);
        if limit <= start {
            return;
        }
        let index = start + 1 + self.rng.below(limit - start);
        let producers = producers::state_over(r, producers::start_state(r), start + 1, index);
        let bytes = serde_json::to_vec(&producers).expect("JSON");
        let bytes = bytes::Bytes::from(bytes);
        let meta = r.compact_to(index, bytes.clone());
        self.nodes[i].disk.compacted(meta, bytes);
        self.compactions += 1;
        self.mix(0xc0c0_0000 | (i as u64) << 24 | index);
    }

    /// The serving leader of the highest term, if any.
    fn leader(&self) -> Option<usize> {
        self.serving().into_iter().max_by_key(|&i| self.nodes[i].raft.as_ref().map(Replica::term))
    }

    /// The nodes of the configuration the leader applied: what must converge at the end.
    fn members(&self) -> Vec<usize> {
        let Some(l) = self.leader() else { return Vec::new() };
        let r = self.nodes[l].raft.as_ref().expect("live");
        let mut ids = r.voters();
        ids.extend(r.learners());
        (0..self.nodes.len()).filter(|&i| ids.contains(&(i as u64 + 1))).collect()
    }

    /// Per node: commit and high watermark never go back, the watermark is the end of a
    /// committed entry, and every newly committed entry agrees with what others committed.
    fn check_nodes(&mut self) {
        for i in 0..self.nodes.len() {
            let node = &mut self.nodes[i];
            let Some(r) = node.raft.as_ref() else {
                continue;
            };
            let commit = r.commit_index();
            if commit < node.commit_seen {
                self.check.fail(format!("node {} commit went from {} to {commit}", i + 1, node.commit_seen));
            }
            let hwm = r.high_watermark();
            let committed_end = r.store().end_offset(commit.min(r.store().last())).expect("inside the log");
            if hwm < node.hwm_seen || hwm > committed_end {
                self.check.fail(format!(
                    "node {} high watermark {hwm} (was {}, committed end {committed_end})",
                    i + 1,
                    node.hwm_seen
                ));
            }
            node.hwm_seen = hwm;
            let log = &r.raw().raft.raft_log;
            // A snapshot's install jumps the commit over entries this node never held.
            let from = (node.commit_seen + 1).max(log.first_index());
            let new = log.slice(from, commit + 1, None, GetEntriesContext::empty(false));
            node.commit_seen = commit;
            let id = i as u64 + 1;
            for entry in new.expect("committed entries are in the log") {
                self.check.applied(id, &entry);
            }
            self.check.leader(r.raw());
        }
    }

    /// Heals everything, restarts the crashed, and runs until the logs converge; then checks
    /// that they agree and hold every acknowledged entry.
    fn finish(mut self) -> Outcome {
        self.faults = CALM;
        self.net.heal();
        self.net.lossy = false;
        for node in &mut self.nodes {
            node.restart_at = self.now;
        }
        let mut converged = false;
        for _ in 0..CONVERGE_STEPS {
            self.step();
            converged = self.converged();
            if converged {
                break;
            }
        }
        if !converged {
            self.check.fail("the healed cluster did not converge".to_string());
        }
        let members = self.members();
        let m0 = &self.nodes[members[0]];
        let first = m0.raft.as_ref().expect("all live");
        let (commit, hwm) = (first.commit_index(), first.high_watermark());
        // What every member still holds: from the latest log start among them.
        let live = |i: usize| self.nodes[i].raft.as_ref().expect("all live");
        let from_index = members.iter().map(|&i| live(i).store().start().index).max().unwrap_or(0) + 1;
        let from_offset = members.iter().map(|&i| live(i).store().start().offset).max().unwrap_or(0);
        let logs: Vec<Vec<Entry>> = members
            .iter()
            .map(|&i| {
                let r = live(i);
                self.check.final_log(r.raw());
                r.raw()
                    .raft
                    .raft_log
                    .slice(from_index, commit + 1, None, GetEntriesContext::empty(false))
                    .expect("held")
            })
            .collect();
        if let Some(i) = logs.iter().position(|l| l != &logs[0]) {
            self.check.fail(format!(
                "node {} log differs from node {} in [{from_index}, {commit}]",
                members[i] + 1,
                members[0] + 1
            ));
        }
        // The files themselves: the same bytes up to the high watermark on every member, and
        // each acknowledged batch still held at the offset its producer was told.
        let file = m0.disk.bytes_between(from_offset, hwm).to_vec();
        for &i in &members {
            let n = &self.nodes[i];
            let r = n.raft.as_ref().expect("all live");
            if r.high_watermark() != hwm || n.disk.bytes_between(from_offset, hwm) != file.as_slice() {
                self.check.fail(format!(
                    "node {} log file differs from node {} in [{from_offset}, {hwm})",
                    i + 1,
                    members[0] + 1
                ));
            }
        }
        let positions = m0.disk.positions();
        let m0_start = m0.disk.start_offset();
        let file = m0.disk.bytes_between(m0_start, hwm).to_vec();
        let base = positions.get(&m0_start).copied().unwrap_or(0);
        let positions: HashMap<i64, usize> =
            positions.into_iter().filter(|(o, _)| *o >= m0_start).map(|(o, p)| (o, p - base)).collect();
        for ack in self.check.acked.iter().filter(|a| a.base_offset >= m0_start) {
            let at = positions.get(&ack.base_offset).copied().unwrap_or(usize::MAX);
            if file.get(at..at.saturating_add(ack.data.len())) != Some(ack.data.as_slice()) {
                self.check.fail(format!("acknowledged batch at offset {} is not in the log there", ack.base_offset));
            }
        }
        for t in self.told.iter().filter(|t| t.offset >= m0_start) {
            let at = positions.get(&t.offset).copied().unwrap_or(usize::MAX);
            let h = file.get(at..).and_then(producers::header);
            if h.is_none_or(|h| (h.producer_id, h.base_sequence) != (t.producer, t.sequence)) {
                self.check.fail(format!(
                    "producer {} was told sequence {} is at offset {}, where the log holds {h:?}",
                    t.producer, t.sequence, t.offset
                ));
            }
        }
        for entry in &logs[0] {
            self.mix(entry.index ^ (entry.term << 32));
        }
        let reconfigured =
            logs[0].iter().filter(|e| e.get_entry_type() == raft::prelude::EntryType::EntryConfChangeV2).count();
        Outcome {
            told: self.told.len(),
            duplicates: self.duplicates,
            trace: self.trace,
            reconfigured,
            commit,
            acked: self.check.acked.len(),
            crashes: self.crashes,
            torn: self.torn,
            compactions: self.compactions,
            installs: self.installs,
        }
    }

    /// The members of the leader's configuration agree on commit, log end and watermark, and
    /// all they hold is committed; nodes removed along the way are left behind.
    fn converged(&self) -> bool {
        let members = self.members();
        let mut marks = members.iter().map(|&i| {
            let n = &self.nodes[i];
            n.raft.as_ref().map(|r| (r.commit_index(), r.last_index(), r.high_watermark(), r.store().last()))
        });
        let Some(Some(first)) = marks.next() else {
            return false;
        };
        first.0 == first.1 && first.1 == first.3 && marks.all(|m| m == Some(first))
    }
}

/// One chaotic run of `steps` steps; odd seeds run five nodes, even seeds three.
fn run(seed: u64, steps: u64) -> Outcome {
    let (count, faults) = if seed.is_multiple_of(2) { (3, CHAOS) } else { (5, CHURN) };
    let mut sim = Sim::new(seed, count, faults);
    for _ in 0..steps {
        sim.step();
    }
    sim.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Sized to stay well under 30 s in a debug build on a loaded two-core machine.
    const SEEDS: u64 = 200;
    const STEPS: u64 = 1_500;

    #[test]
    fn a_few_hundred_seeded_runs_keep_every_acknowledged_entry() {
        let seeds: Vec<u64> = match std::env::var("RINGBROKER_SIM_SEED") {
            Ok(seed) => vec![seed.parse().expect("RINGBROKER_SIM_SEED is a number")],
            Err(_) => (0..SEEDS).collect(),
        };
        let (mut acked, mut crashes, mut torn, mut reconfigured, mut told) = (0, 0, 0, 0, 0);
        let (mut duplicates, mut compactions, mut installs) = (0, 0, 0);
        for &seed in &seeds {
            let outcome = run(seed, STEPS);
            acked += outcome.acked;
            crashes += outcome.crashes;
            torn += outcome.torn;
            reconfigured += outcome.reconfigured;
            told += outcome.told;
            duplicates += outcome.duplicates;
            compactions += outcome.compactions;
            installs += outcome.installs;
        }
        eprintln!(
            "{} runs: {acked} acknowledged ({told} to idempotent producers, {duplicates} retries answered as duplicates), {crashes} crashes ({torn} torn), {reconfigured} membership changes, {compactions} log starts moved, {installs} snapshots installed",
            seeds.len()
        );
        // The runs must have made progress and hit the faults, or they proved nothing.
        assert!(acked > seeds.len() * 50, "only {acked} acknowledged");
        assert!(crashes > 0 && torn > 0, "crashes {crashes}, torn {torn}");
        assert!(told > seeds.len() * 20, "only {told} told to idempotent producers");
        if seeds.len() > 1 {
            assert!(duplicates > 0, "no retry found its batch already in the log");
        }
        if seeds.len() > 1 {
            assert!(reconfigured > seeds.len() / 2, "only {reconfigured} membership changes");
            assert!(
                installs > seeds.len() as u64 / 4,
                "only {installs} snapshots installed ({compactions} compactions)"
            );
        }
    }

    #[test]
    fn a_crash_tearing_unsynced_entries_never_loses_an_acknowledged_one() {
        let mut sim = Sim::new(7, 3, CALM);
        sim.net.lossy = false;
        while sim.serving().is_empty() {
            assert!(sim.now < 500, "no leader elected");
            sim.step();
        }
        for _ in 0..5 {
            sim.propose();
        }
        for _ in 0..20 {
            sim.step();
        }
        assert_eq!(sim.check.acked.len(), 5);
        // The leader writes three entries in one Ready and dies keeping one (its appends went
        // out before the write, as a leader's may); a follower dies in its first write of them,
        // keeping at most one; only the third node syncs them whole.
        let leader = sim.leaders()[0];
        let follower = (leader + 1) % 3;
        sim.nodes[leader].tear_next_write = Some(1);
        sim.nodes[follower].tear_next_write = Some(1);
        for _ in 0..3 {
            sim.propose();
        }
        for _ in 0..10 {
            sim.step();
        }
        assert_eq!(sim.torn, 2);
        let outcome = sim.finish();
        assert!(outcome.acked >= 5);
    }

    #[test]
    fn a_leader_that_applies_its_own_removal_steps_down_and_the_rest_go_on() {
        use raft::prelude::{ConfChangeSingle, ConfChangeType, ConfChangeV2};
        let change = |kind: ConfChangeType, node_id: u64| {
            let mut cc = ConfChangeV2::default();
            let mut one = ConfChangeSingle { node_id, ..Default::default() };
            one.set_change_type(kind);
            cc.mut_changes().push(one);
            cc
        };
        let mut sim = Sim::new(11, 5, CALM);
        sim.net.lossy = false;
        let mut steps = 0;
        let mut settle = |sim: &mut Sim, what: &str, done: &dyn Fn(&Sim) -> bool| {
            while !done(sim) {
                steps += 1;
                assert!(steps < 2_000, "never: {what}");
                sim.step();
            }
        };
        settle(&mut sim, "a leader", &|s| s.leader().is_some());
        let l = sim.leader().unwrap();
        sim.nodes[l].raft.as_mut().unwrap().propose_conf_change(change(ConfChangeType::AddNode, 4)).unwrap();
        settle(&mut sim, "four voters", &|s| {
            s.leader().is_some_and(|l| s.nodes[l].raft.as_ref().unwrap().voters().len() == 4)
        });
        for _ in 0..5 {
            sim.propose();
        }
        let l = sim.leader().unwrap();
        let id = l as u64 + 1;
        sim.nodes[l].raft.as_mut().unwrap().propose_conf_change(change(ConfChangeType::RemoveNode, id)).unwrap();
        settle(&mut sim, "another leader", &|s| s.leader().is_some_and(|n| n != l));
        let n = sim.leader().unwrap();
        assert!(!sim.nodes[n].raft.as_ref().unwrap().voters().contains(&id));
        assert!(!sim.nodes[l].raft.as_ref().unwrap().is_leader(), "the removed leader stepped down");
        for _ in 0..5 {
            sim.propose();
        }
        let outcome = sim.finish();
        assert!(outcome.acked >= 5, "{} acknowledged", outcome.acked);
    }

    #[test]
    fn the_same_seed_replays_the_same_run() {
        let first = run(42, 600);
        let again = run(42, 600);
        assert_eq!((first.trace, first.commit, first.acked), (again.trace, again.commit, again.acked));
        assert_ne!(first.trace, run(43, 600).trace);
    }
}
