//! A deterministic simulation of raft-rs replicas: no reactor, sockets, threads or clock, only
//! a seeded PRNG, so a failing seed replays exactly (`RINGBROKER_SIM_SEED=<seed>`).
//!
//! Each step may start or heal a partition, crash or restart a node and propose a payload on a
//! leader; then every live node ticks, due messages are delivered and every Ready is handled by
//! the contract below, until nothing is left to do in the step. The invariants (`check`) run
//! after every step; at the end the network heals and the logs must converge and agree.
//!
//! A Ready is handled completely inside one step: messages (a leader's, allowed before its own
//! persistence), committed entries applied, entries and hard state written, the write synced,
//! then the persisted messages, `advance`, and the LightReady. A torn crash lands between the
//! write and the sync: the node never sends what needed that sync, as with a real disk.

mod check;
mod disk;
mod net;
mod rng;

use std::collections::HashMap;

use raft::prelude::{Config, Entry, EntryType, Message};
use raft::storage::MemStorage;
use raft::{GetEntriesContext, RawNode, StateRole, Storage};

use check::{Ack, Checker};
use disk::Disk;
use net::Net;
use rng::Rng;

/// How often things happen, per mille: per step, except `torn_write`, per Ready that writes.
#[derive(Clone, Copy)]
struct Faults {
    propose: u64,
    crash: u64,
    torn_write: u64,
    partition: u64,
    heal: u64,
}

const CHAOS: Faults = Faults { propose: 300, crash: 3, torn_write: 3, partition: 5, heal: 20 };

const CALM: Faults = Faults { propose: 0, crash: 0, torn_write: 0, partition: 0, heal: 0 };

/// Steps the healed cluster gets to converge before the run counts as stuck.
const CONVERGE_STEPS: u64 = 3_000;

struct Node {
    cfg: Config,
    /// None while crashed.
    raft: Option<RawNode<MemStorage>>,
    disk: Disk,
    incarnation: u64,
    restart_at: u64,
    commit_seen: u64,
    /// A targeted test's crash: tear the next write that has entries, keeping this many.
    tear_next_write: Option<usize>,
}

struct Proposal {
    node: usize,
    incarnation: u64,
    data: Vec<u8>,
}

struct Outcome {
    trace: u64,
    commit: u64,
    acked: usize,
    crashes: u64,
    torn: u64,
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
    /// FNV-1a over deliveries, crashes and restarts: two runs agree iff they took one path.
    trace: u64,
    crashes: u64,
    torn: u64,
    logger: slog::Logger,
}

impl Sim {
    fn new(seed: u64, count: usize, faults: Faults) -> Sim {
        let mut rng = Rng::new(seed);
        let voters: Vec<u64> = (1..=count as u64).collect();
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
            trace: 0xcbf2_9ce4_8422_2325,
            crashes: 0,
            torn: 0,
            logger,
        };
        for (i, offset) in offsets.iter().take(count).enumerate() {
            let mut cfg = Config::new(i as u64 + 1);
            cfg.election_tick = 10;
            cfg.heartbeat_tick = 1;
            cfg.pre_vote = true;
            cfg.check_quorum = true;
            cfg.min_election_tick = 10 + *offset as usize;
            cfg.max_election_tick = cfg.min_election_tick + 1;
            cfg.max_size_per_msg = 1 << 20;
            cfg.max_inflight_msgs = 64;
            cfg.validate().expect("simulation raft config");
            sim.nodes.push(Node {
                cfg,
                raft: None,
                disk: Disk::new(),
                incarnation: 0,
                restart_at: 0,
                commit_seen: 0,
                tear_next_write: None,
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
            self.propose();
        }
        for node in &mut self.nodes {
            if let Some(rn) = node.raft.as_mut() {
                rn.tick();
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
                if let Some(rn) = self.nodes[msg.to as usize - 1].raft.as_mut() {
                    // Errors are stale or foreign messages, which raft-rs rightly refuses.
                    let _ = rn.step(msg);
                }
            }
            for i in 0..self.nodes.len() {
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
        let Some(mut rn) = self.nodes[i].raft.take() else {
            return false;
        };
        if !rn.has_ready() {
            self.nodes[i].raft = Some(rn);
            return false;
        }
        let mut rd = rn.ready();
        self.send(rd.take_messages());
        // Nothing compacts its log, so no leader ever needs to send a snapshot.
        assert!(rd.snapshot().is_empty(), "unexpected snapshot");
        self.apply(i, rd.take_committed_entries());

        let store = rn.store().clone();
        if !rd.entries().is_empty() {
            store.wl().append(rd.entries()).expect("raft appends contiguously");
        }
        if let Some(hs) = rd.hs() {
            store.wl().set_hardstate(hs.clone());
        }
        self.nodes[i].disk.write(rd.entries(), rd.hs());
        let pending = self.nodes[i].disk.pending_entries();
        if pending > 0 {
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
        self.nodes[i].disk.sync();

        self.send(rd.take_persisted_messages());
        let mut light = rn.advance(rd);
        if let Some(commit) = light.commit_index() {
            store.wl().mut_hard_state().set_commit(commit);
        }
        self.send(light.take_messages());
        self.apply(i, light.take_committed_entries());
        rn.advance_apply();
        self.nodes[i].raft = Some(rn);
        true
    }

    fn apply(&mut self, i: usize, entries: Vec<Entry>) {
        let id = i as u64 + 1;
        for entry in entries {
            assert_eq!(entry.get_entry_type(), EntryType::EntryNormal);
            self.check.applied(id, &entry);
            let key = (entry.index, entry.term);
            let ours = self.proposals.get(&key).is_some_and(|p| {
                p.node == i && p.incarnation == self.nodes[i].incarnation && p.data.as_slice() == entry.data.as_ref()
            });
            if ours {
                let p = self.proposals.remove(&key).expect("checked above");
                self.check.acked.push(Ack { index: entry.index, term: entry.term, data: p.data });
            }
        }
    }

    /// The node is already down (its RawNode dropped); its disk loses what was not synced.
    fn crashed(&mut self, i: usize, keep: usize) {
        self.crashes += 1;
        self.mix(0xc0ff_ee00 | i as u64);
        self.nodes[i].disk.crash(keep);
        self.nodes[i].restart_at = self.now + 5 + self.rng.below(50);
        self.proposals.retain(|_, p| p.node != i);
    }

    /// Rebuilds the node from its synced disk alone.
    fn restart(&mut self, i: usize) {
        self.mix(0xbeef_0000 | i as u64);
        let node = &mut self.nodes[i];
        let store = node.disk.recover(&self.voters);
        let rn = RawNode::new(&node.cfg, store, &self.logger).expect("restart from synced disk");
        let synced_commit = node.disk.hard_state().commit;
        if rn.raft.raft_log.committed != synced_commit {
            self.check.fail(format!(
                "node {} restarted with commit {} but synced {synced_commit}",
                i + 1,
                rn.raft.raft_log.committed
            ));
        }
        node.commit_seen = synced_commit;
        node.incarnation += 1;
        node.raft = Some(rn);
    }

    fn leaders(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| self.nodes[i].raft.as_ref().is_some_and(|rn| rn.raft.state == StateRole::Leader))
            .collect()
    }

    /// A client's proposal of a fresh payload to some node that thinks it leads.
    fn propose(&mut self) {
        let leaders = self.leaders();
        if leaders.is_empty() {
            return;
        }
        let i = leaders[self.rng.below(leaders.len() as u64) as usize];
        let data = self.next_payload.to_be_bytes().to_vec();
        self.next_payload += 1;
        let rn = self.nodes[i].raft.as_mut().expect("a leader is live");
        let before = rn.raft.raft_log.last_index();
        if rn.propose(vec![], data.clone()).is_err() {
            return;
        }
        let index = rn.raft.raft_log.last_index();
        if index == before + 1 {
            let term = rn.raft.term;
            let incarnation = self.nodes[i].incarnation;
            self.proposals.insert((index, term), Proposal { node: i, incarnation, data });
        }
    }

    fn check_nodes(&mut self) {
        for i in 0..self.nodes.len() {
            let node = &mut self.nodes[i];
            let Some(rn) = node.raft.as_ref() else {
                continue;
            };
            let commit = rn.raft.raft_log.committed;
            if commit < node.commit_seen {
                self.check.fail(format!("node {} commit went from {} to {commit}", i + 1, node.commit_seen));
            }
            node.commit_seen = commit;
            self.check.leader(rn);
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
        let commit = self.nodes[0].raft.as_ref().expect("all live").raft.raft_log.committed;
        let logs: Vec<Vec<Entry>> = self
            .nodes
            .iter()
            .map(|n| {
                let rn = n.raft.as_ref().expect("all live");
                self.check.final_log(rn);
                rn.store().entries(1, commit + 1, None, GetEntriesContext::empty(false)).expect("the log starts at 1")
            })
            .collect();
        if let Some(i) = logs.iter().position(|l| l != &logs[0]) {
            self.check.fail(format!("node {} log differs from node 1 up to {commit}", i + 1));
        }
        for entry in &logs[0] {
            self.mix(entry.index ^ (entry.term << 32));
        }
        Outcome { trace: self.trace, commit, acked: self.check.acked.len(), crashes: self.crashes, torn: self.torn }
    }

    fn converged(&self) -> bool {
        let mut marks = self
            .nodes
            .iter()
            .map(|n| n.raft.as_ref().map(|rn| (rn.raft.raft_log.committed, rn.raft.raft_log.last_index())));
        let Some(Some(first)) = marks.next() else {
            return false;
        };
        first.0 == first.1 && marks.all(|m| m == Some(first)) && self.leaders().len() == 1
    }
}

/// One chaotic run of `steps` steps; odd seeds run five nodes, even seeds three.
fn run(seed: u64, steps: u64) -> Outcome {
    let mut sim = Sim::new(seed, if seed.is_multiple_of(2) { 3 } else { 5 }, CHAOS);
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
        let (mut acked, mut crashes, mut torn) = (0, 0, 0);
        for &seed in &seeds {
            let outcome = run(seed, STEPS);
            acked += outcome.acked;
            crashes += outcome.crashes;
            torn += outcome.torn;
        }
        eprintln!("{} runs: {acked} acknowledged, {crashes} crashes ({torn} torn)", seeds.len());
        // The runs must have made progress and hit the faults, or they proved nothing.
        assert!(acked > seeds.len() * 50, "only {acked} acknowledged");
        assert!(crashes > 0 && torn > 0, "crashes {crashes}, torn {torn}");
    }

    #[test]
    fn a_crash_tearing_unsynced_entries_never_loses_an_acknowledged_one() {
        let mut sim = Sim::new(7, 3, CALM);
        sim.net.lossy = false;
        while sim.leaders().is_empty() {
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
    fn the_same_seed_replays_the_same_run() {
        let first = run(42, 600);
        let again = run(42, 600);
        assert_eq!((first.trace, first.commit, first.acked), (again.trace, again.commit, again.acked));
        assert_ne!(first.trace, run(43, 600).trace);
    }
}
