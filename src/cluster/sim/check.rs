//! The safety invariants, checked as the simulation runs. Every violation panics with the seed
//! so the run can be replayed.

use std::collections::{BTreeMap, HashMap, HashSet};

use raft::prelude::Entry;
use raft::{GetEntriesContext, RawNode, StateRole};

use crate::cluster::store::RaftStore;
use crate::protocol::batch;

/// A proposal the leader saw committed: from then on it must never be lost. `data` is the
/// batch as proposed, offset and epoch stamped: every replica stores exactly these bytes.
#[derive(Clone)]
pub(super) struct Ack {
    pub(super) index: u64,
    pub(super) term: u64,
    pub(super) base_offset: i64,
    pub(super) data: Vec<u8>,
}

/// The payload a simulated client put in a batch (its one record's value); empty for raft's
/// own entries.
pub(super) fn payload(entry: &Entry) -> Vec<u8> {
    if entry.data.is_empty() || batch::read_header(&entry.data).is_ok_and(|h| h.is_control()) {
        return Vec::new();
    }
    batch::records(&entry.data).next().and_then(|r| r.value).unwrap_or(&[]).to_vec()
}

pub(super) struct Checker {
    seed: u64,
    leader_of_term: HashMap<u64, u64>,
    /// Every entry any node has applied, by index: all nodes must apply the same one.
    committed: BTreeMap<u64, (u64, Vec<u8>)>,
    index_of_payload: HashMap<Vec<u8>, u64>,
    pub(super) acked: Vec<Ack>,
    leaders_checked: HashSet<(u64, u64)>,
}

impl Checker {
    pub(super) fn new(seed: u64) -> Checker {
        Checker {
            seed,
            leader_of_term: HashMap::new(),
            committed: BTreeMap::new(),
            index_of_payload: HashMap::new(),
            acked: Vec::new(),
            leaders_checked: HashSet::new(),
        }
    }

    pub(super) fn fail(&self, what: String) -> ! {
        panic!("invariant violated: {what}; replay with RINGBROKER_SIM_SEED={}", self.seed)
    }

    /// A committed entry `node` applies must be the one every other node applied at its index,
    /// and a payload is committed at one index only.
    pub(super) fn applied(&mut self, node: u64, entry: &Entry) {
        let data = entry.data.to_vec();
        match self.committed.get(&entry.index) {
            Some((term, known)) if *term != entry.term || *known != data => self.fail(format!(
                "node {node} committed term {} at index {}, others term {term}",
                entry.term, entry.index
            )),
            Some(_) => {}
            None => {
                let payload = payload(entry);
                if !payload.is_empty() {
                    if let Some(other) = self.index_of_payload.insert(payload.clone(), entry.index) {
                        self.fail(format!("payload {payload:?} committed at {other} and at {}", entry.index));
                    }
                }
                self.committed.insert(entry.index, (entry.term, data));
            }
        }
    }

    /// One leader per term, and a new leader holds every acknowledged entry of earlier terms
    /// (an ack of a later term may come from a leader elected after it, by delayed votes).
    pub(super) fn leader(&mut self, rn: &RawNode<RaftStore>) {
        if rn.raft.state != StateRole::Leader {
            return;
        }
        let (id, term) = (rn.raft.id, rn.raft.term);
        if let Some(&other) = self.leader_of_term.get(&term) {
            if other != id {
                self.fail(format!("nodes {other} and {id} both lead term {term}"));
            }
        }
        self.leader_of_term.insert(term, id);
        if self.leaders_checked.insert((id, term)) {
            for ack in self.acked.iter().filter(|a| a.term <= term) {
                if !log_holds(rn, ack, false) {
                    self.fail(format!(
                        "leader {id} of term {term} lacks acknowledged entry {}@{}",
                        ack.index, ack.term
                    ));
                }
            }
        }
    }

    /// At the end: every node's committed log holds every acknowledged entry.
    pub(super) fn final_log(&self, rn: &RawNode<RaftStore>) {
        for ack in &self.acked {
            if !log_holds(rn, ack, true) {
                self.fail(format!(
                    "node {} lacks acknowledged entry {}@{} at the end",
                    rn.raft.id, ack.index, ack.term
                ));
            }
        }
    }
}

fn log_holds(rn: &RawNode<RaftStore>, ack: &Ack, committed_only: bool) -> bool {
    let log = &rn.raft.raft_log;
    if committed_only && log.committed < ack.index {
        return false;
    }
    if ack.index < log.first_index() {
        return true; // below the log start: retention deleted it, here or at a snapshot's sender
    }
    match log.slice(ack.index, ack.index + 1, None, GetEntriesContext::empty(false)) {
        Ok(entries) => entries.first().is_some_and(|e| e.term == ack.term && e.data.as_ref() == ack.data.as_slice()),
        Err(_) => false,
    }
}
