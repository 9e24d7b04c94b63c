//! Idempotent-producer state of one partition: for each producer id its epoch and the
//! sequence ranges and offsets of its last five batches (the most a client keeps in
//! flight). Pure code: a batch header goes in, a verdict comes out.
//!
//! Rules (Kafka's, for idempotent producers without transactions):
//! - a batch that repeats one of the last five (same epoch, same sequence range) is a
//!   retry: it is not appended again, and gets the offsets it got the first time;
//! - otherwise its first sequence must follow the producer's last one (wrapping after
//!   i32::MAX), or be 0 for a producer id not seen yet: a gap is OUT_OF_ORDER_SEQUENCE;
//! - an older epoch is INVALID_PRODUCER_EPOCH; a newer epoch must start at sequence 0
//!   (the client-side epoch bump of KIP-360).

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::protocol::batch::BatchHeader;
use crate::protocol::ErrorCode;

/// Batches remembered per producer (Kafka's max.in.flight limit for idempotence).
pub const REMEMBERED: usize = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchRecord {
    pub first_seq: i32,
    pub last_seq: i32,
    pub first_offset: i64,
    pub last_offset: i64,
    /// The batch's maxTimestamp as written (a retry of a LogAppendTime batch is told it).
    #[serde(default = "no_timestamp")]
    pub max_timestamp: i64,
}

fn no_timestamp() -> i64 {
    -1
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerEntry {
    pub epoch: i16,
    pub batches: VecDeque<BatchRecord>,
    /// Wall-clock ms of the last append (producer id expiration counts from here).
    pub last_append_ms: i64,
}

/// What to do with a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Append it (non-idempotent, or the next batch in sequence).
    Append,
    /// A retry of a batch already appended at these offsets, with this maxTimestamp.
    Duplicate { first_offset: i64, last_offset: i64, max_timestamp: i64 },
}

/// One producer's state as DescribeProducers shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerSummary {
    pub producer_id: i64,
    pub epoch: i16,
    pub last_sequence: i32,
    /// maxTimestamp of its last batch.
    pub last_timestamp: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerState {
    pub producers: BTreeMap<i64, ProducerEntry>,
}

fn last_seq_of(h: &BatchHeader) -> i32 {
    // Sequences wrap around after i32::MAX.
    ((h.base_sequence as i64 + h.last_offset_delta as i64) % (i32::MAX as i64 + 1)) as i32
}

fn next_seq(s: i32) -> i32 {
    if s == i32::MAX {
        0
    } else {
        s + 1
    }
}

impl ProducerState {
    /// Judges a batch before it is appended.
    pub fn check(&self, h: &BatchHeader) -> Result<Verdict, ErrorCode> {
        if h.producer_id < 0 {
            return Ok(Verdict::Append);
        }
        if h.base_sequence < 0 {
            return Err(ErrorCode::InvalidRecord);
        }
        // A producer this log has no state of may start at any sequence, as in Kafka: its
        // state expired (`producer.id.expiration.ms`) or went with the segments retention or
        // DeleteRecords removed, and refusing would fail a live producer's next send.
        let Some(e) = self.producers.get(&h.producer_id) else { return Ok(Verdict::Append) };
        if h.producer_epoch < e.epoch {
            return Err(ErrorCode::InvalidProducerEpoch);
        }
        if h.producer_epoch > e.epoch {
            return if h.base_sequence == 0 { Ok(Verdict::Append) } else { Err(ErrorCode::OutOfOrderSequenceNumber) };
        }
        let last = last_seq_of(h);
        if let Some(b) = e.batches.iter().find(|b| b.first_seq == h.base_sequence && b.last_seq == last) {
            return Ok(Verdict::Duplicate {
                first_offset: b.first_offset,
                last_offset: b.last_offset,
                max_timestamp: b.max_timestamp,
            });
        }
        match e.batches.back() {
            Some(b) if next_seq(b.last_seq) == h.base_sequence => Ok(Verdict::Append),
            None if h.base_sequence == 0 => Ok(Verdict::Append),
            _ => Err(ErrorCode::OutOfOrderSequenceNumber),
        }
    }

    /// Records a batch that was appended at `h.base_offset` (headers as written, or as
    /// found by recovery).
    pub fn update(&mut self, h: &BatchHeader, now_ms: i64) {
        if h.producer_id < 0 {
            return;
        }
        let e = self.producers.entry(h.producer_id).or_insert_with(|| ProducerEntry {
            epoch: h.producer_epoch,
            batches: VecDeque::new(),
            last_append_ms: now_ms,
        });
        if h.producer_epoch != e.epoch {
            e.epoch = h.producer_epoch;
            e.batches.clear();
        }
        e.batches.push_back(BatchRecord {
            first_seq: h.base_sequence,
            last_seq: last_seq_of(h),
            first_offset: h.base_offset,
            last_offset: h.last_offset(),
            max_timestamp: h.max_timestamp,
        });
        while e.batches.len() > REMEMBERED {
            e.batches.pop_front();
        }
        e.last_append_ms = e.last_append_ms.max(now_ms);
    }

    pub fn summaries(&self) -> Vec<ProducerSummary> {
        self.producers
            .iter()
            .map(|(&producer_id, e)| ProducerSummary {
                producer_id,
                epoch: e.epoch,
                last_sequence: e.batches.back().map_or(-1, |b| b.last_seq),
                last_timestamp: e.batches.back().map_or(-1, |b| b.max_timestamp),
            })
            .collect()
    }

    /// Drops producers idle longer than `expiration_ms` (`producer.id.expiration.ms`).
    pub fn expire(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        let before = self.producers.len();
        self.producers.retain(|_, e| now_ms - e.last_append_ms <= expiration_ms);
        before - self.producers.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pid: i64, epoch: i16, seq: i32, count: i32, offset: i64) -> BatchHeader {
        BatchHeader {
            base_offset: offset,
            size: 100,
            attributes: 0,
            last_offset_delta: count - 1,
            base_timestamp: 0,
            max_timestamp: 0,
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
            record_count: count,
        }
    }

    fn append(s: &mut ProducerState, b: BatchHeader) {
        assert_eq!(s.check(&b), Ok(Verdict::Append), "{b:?}");
        s.update(&b, 0);
    }

    #[test]
    fn sequences_must_follow_on() {
        let mut s = ProducerState::default();
        append(&mut s, h(7, 0, 0, 5, 0));
        append(&mut s, h(7, 0, 5, 2, 5));
        assert_eq!(s.check(&h(7, 0, 8, 1, 7)), Err(ErrorCode::OutOfOrderSequenceNumber), "gap");
        append(&mut s, h(7, 0, 7, 1, 7));
    }

    #[test]
    fn a_producer_without_state_may_go_on_from_any_sequence() {
        let mut s = ProducerState::default();
        assert_eq!(s.check(&h(7, 0, 42, 1, 0)), Ok(Verdict::Append), "its state expired or was deleted");
        append(&mut s, h(7, 0, 42, 1, 0));
        assert_eq!(s.check(&h(7, 0, 44, 1, 1)), Err(ErrorCode::OutOfOrderSequenceNumber), "then it follows on");
        assert_eq!(s.check(&h(7, 1, 5, 1, 1)), Err(ErrorCode::OutOfOrderSequenceNumber), "a new epoch starts at 0");
    }

    #[test]
    fn retries_get_their_original_offsets() {
        let mut s = ProducerState::default();
        append(&mut s, h(7, 0, 0, 5, 100));
        append(&mut s, h(7, 0, 5, 5, 200));
        assert_eq!(
            s.check(&h(7, 0, 0, 5, -1)),
            Ok(Verdict::Duplicate { first_offset: 100, last_offset: 104, max_timestamp: 0 })
        );
        assert_eq!(
            s.check(&h(7, 0, 5, 5, -1)),
            Ok(Verdict::Duplicate { first_offset: 200, last_offset: 204, max_timestamp: 0 })
        );
        // only the last five are remembered
        for i in 2..7 {
            append(&mut s, h(7, 0, i * 5, 5, 100 * (i as i64 + 1)));
        }
        assert_eq!(s.check(&h(7, 0, 0, 5, -1)), Err(ErrorCode::OutOfOrderSequenceNumber));
    }

    #[test]
    fn epochs_fence_old_producers_and_a_bump_restarts_sequences() {
        let mut s = ProducerState::default();
        append(&mut s, h(7, 3, 0, 1, 0));
        append(&mut s, h(7, 3, 1, 1, 1));
        assert_eq!(s.check(&h(7, 2, 2, 1, 2)), Err(ErrorCode::InvalidProducerEpoch));
        assert_eq!(s.check(&h(7, 4, 5, 1, 2)), Err(ErrorCode::OutOfOrderSequenceNumber));
        append(&mut s, h(7, 4, 0, 1, 2));
        assert_eq!(s.check(&h(7, 3, 2, 1, 3)), Err(ErrorCode::InvalidProducerEpoch), "the old epoch is fenced");
    }

    #[test]
    fn sequences_wrap_after_i32_max() {
        let mut s = ProducerState::default();
        append(&mut s, h(1, 0, 0, 1, 0));
        s.producers.get_mut(&1).unwrap().batches.back_mut().unwrap().last_seq = i32::MAX - 2;
        append(&mut s, h(1, 0, i32::MAX - 1, 2, 1)); // sequences MAX-1 and MAX
        assert_eq!(s.producers[&1].batches.back().unwrap().last_seq, i32::MAX);
        append(&mut s, h(1, 0, 0, 1, 3));
    }

    #[test]
    fn non_idempotent_batches_pass_and_idle_producers_expire() {
        let mut s = ProducerState::default();
        assert_eq!(s.check(&h(-1, -1, -1, 3, 0)), Ok(Verdict::Append));
        s.update(&h(9, 0, 0, 1, 0), 1_000);
        s.update(&h(10, 0, 0, 1, 1), 5_000);
        assert_eq!(s.expire(10_000, 6_000), 1);
        assert!(s.producers.contains_key(&10));
    }
}
