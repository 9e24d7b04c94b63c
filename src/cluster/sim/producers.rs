//! Simulated idempotent producers with retries. Each producer keeps up to `IN_FLIGHT` batches
//! unacknowledged and, whenever it sends, either retries its oldest unacknowledged one (to
//! whichever node leads now) or sends its next sequence. A leader judges every batch with the
//! broker's own producer state (`producer::ProducerState`), rebuilt from its raft log when it
//! starts leading a term and updated as it proposes, as a replicated partition does: a retry
//! of a batch it holds is a duplicate, answered with the first one's offset once that is
//! committed, and never proposed again.
//!
//! The checks: every batch's payload is its (producer, sequence), and the checker refuses a
//! payload committed at two indexes, so no (producer, sequence) is committed twice; every
//! acknowledgement, the duplicates' included, names the offset the committed log holds it at.

use std::collections::VecDeque;

use raft::GetEntriesContext;

use crate::cluster::replica::Replica;
use crate::producer::{ProducerState, Verdict};
use crate::protocol::batch::{self, BatchHeader};

/// Batches one producer has unacknowledged at most (Kafka allows five; two reach the
/// out-of-order paths often enough).
const IN_FLIGHT: usize = 2;

pub(super) struct Producer {
    pub(super) id: i64,
    next_seq: i32,
    /// Sequences sent and not acknowledged, oldest first.
    unacked: VecDeque<i32>,
}

/// What an acknowledgement told a producer.
#[derive(Debug, Clone, Copy)]
pub(super) struct Told {
    pub(super) producer: i64,
    pub(super) sequence: i32,
    pub(super) offset: i64,
}

impl Producer {
    pub(super) fn new(id: i64) -> Producer {
        Producer { id, next_seq: 0, unacked: VecDeque::new() }
    }

    /// The sequence to send now: a retry of the oldest unacknowledged batch (`retry`, or when
    /// as many are in flight as allowed), else the next one.
    pub(super) fn next_send(&mut self, retry: bool) -> i32 {
        match self.unacked.front() {
            Some(&oldest) if retry || self.unacked.len() >= IN_FLIGHT => oldest,
            _ => {
                let seq = self.next_seq;
                self.next_seq += 1;
                self.unacked.push_back(seq);
                seq
            }
        }
    }

    /// The batch was acknowledged; false if it already was.
    pub(super) fn acked(&mut self, seq: i32) -> bool {
        let before = self.unacked.len();
        self.unacked.retain(|s| *s != seq);
        self.unacked.len() != before
    }
}

/// The batch of (producer, sequence): one record whose value names both, so a retry carries
/// the same payload as the first send.
pub(super) fn batch_of(producer: i64, seq: i32) -> Vec<u8> {
    let payload = format!("p{producer}s{seq}");
    let mut b = batch::build(0, &[payload.as_bytes()]);
    batch::set_producer(&mut b, producer, 0, seq);
    b
}

/// The producer state a leader starts its term with: the state at its log start (what
/// retention or a snapshot left), then every batch in its raft log.
pub(super) fn state_of(r: &Replica) -> ProducerState {
    let log = &r.raw().raft.raft_log;
    let (first, last) = (log.first_index(), log.last_index());
    state_over(r, start_state(r), first, last)
}

/// The producer state at the replica's log start.
pub(super) fn start_state(r: &Replica) -> ProducerState {
    let bytes = r.store().start_producers();
    if bytes.is_empty() {
        return ProducerState::default();
    }
    serde_json::from_slice(bytes).expect("the simulation's producer states are JSON")
}

/// `state` carried over entries `from..=to` of the replica's log.
pub(super) fn state_over(r: &Replica, mut state: ProducerState, from: u64, to: u64) -> ProducerState {
    if to < from {
        return state;
    }
    let log = &r.raw().raft.raft_log;
    let entries = log.slice(from, to + 1, None, GetEntriesContext::empty(false)).expect("a replica reads its own log");
    for h in entries.iter().filter_map(|e| header(&e.data)) {
        state.update(&h, 0);
    }
    state
}

/// The header of an idempotent producer's batch, if `data` is one.
pub(super) fn header(data: &[u8]) -> Option<BatchHeader> {
    batch::read_header(data).ok().filter(|h| !h.is_control() && h.producer_id >= 0)
}

/// How a leader judges a batch: propose it, answer a duplicate already committed with its
/// offset, or nothing (a duplicate not committed yet, or out of sequence: the producer
/// retries later).
pub(super) enum Judged {
    Propose(BatchHeader),
    Duplicate(i64),
    Wait,
}

pub(super) fn judge(state: &ProducerState, data: &[u8], high_watermark: i64) -> Judged {
    let h = header(data).expect("simulated batches are idempotent");
    match state.check(&h) {
        Ok(Verdict::Append) => Judged::Propose(h),
        Ok(Verdict::Duplicate { first_offset, last_offset, .. }) if last_offset < high_watermark => {
            Judged::Duplicate(first_offset)
        }
        Ok(Verdict::Duplicate { .. }) | Err(_) => Judged::Wait,
    }
}
