//! Raft entries as Kafka record batches: the partition log is the Raft log (DESIGN §9).
//!
//! Every entry is one batch in the partition's segments, byte-identical on every replica, so
//! fetches keep sending segment bytes with sendfile:
//!
//! | raft entry                      | batch in the log                                       |
//! |---------------------------------|--------------------------------------------------------|
//! | normal, with data               | the data itself: the batch the leader proposed         |
//! | normal, empty (a leader's no-op)| control batch, type 2 (Kafka's LEADER_CHANGE), no value |
//! | configuration change (v1 or v2) | control batch, type 6 (KRAFT_VOTERS), value = kind byte + the change |
//! | a new log start (DeleteRecords) | control batch, type 0x5253 (this broker's own), value = the offset (i64) |
//!
//! The term is the batch's `partitionLeaderEpoch`; the index is implicit: the n-th batch after
//! the log's first index. Raft's own entries carry no offset when raft creates them, so their
//! batch takes the offset right after the previous entry's last one, and no timestamp (-1):
//! two replicas holding the same previous entry write the same bytes. Consumers skip control
//! batches of every type (Java's fetcher and librdkafka both do), so they never see these.
//! The value layout of type 6 is this broker's own; Kafka's KRaft tools would not parse it.
//! A log start is a normal entry the leader proposes like data (so it carries its offset and
//! epoch), and every replica moves its log start when it applies the entry: DeleteRecords
//! reaches all of them through the log. Kafka defines control types 0 to 6; an unknown type
//! is skipped by consumers like any control batch.

use bytes::Bytes;
use raft::prelude::{Entry, EntryType};

use crate::protocol::batch::{self, BatchError};

/// Kafka's control type for a leader change, used for a new leader's empty entry.
const NO_OP: i16 = 2;
/// Kafka's control type for a change of the voter set, used for configuration changes.
const CONF_CHANGE: i16 = 6;

/// This broker's control type for a DeleteRecords log start ("RS").
const LOG_START: i16 = 0x5253;

const KIND_V1: u8 = 1;
const KIND_V2: u8 = 2;

#[derive(Debug, thiserror::Error)]
pub enum EntryError {
    #[error("raft entry {index} holds no valid record batch: {source}")]
    Batch { index: u64, source: BatchError },
    #[error("raft entry {index} is at base offset {found}, expected {expected}")]
    Offset { index: u64, found: i64, expected: i64 },
    #[error("raft entry {index} of term {term} holds a batch of leader epoch {found}")]
    Epoch { index: u64, found: i32, term: u64 },
    #[error("raft term {0} does not fit a Kafka leader epoch (i32)")]
    Term(u64),
    #[error("raft entry {index} carries a context, which the log has no place for")]
    Context { index: u64 },
    #[error("raft's configuration change at entry {index} has no kind byte")]
    ConfChange { index: u64 },
}

/// The leader epoch a term is written as.
pub fn epoch(term: u64) -> Result<i32, EntryError> {
    i32::try_from(term).map_err(|_| EntryError::Term(term))
}

/// The batch that stores `entry`, which follows an entry ending at `next_offset` (the offset
/// after its last record). A data entry must already carry that base offset and its term as
/// epoch, which the leader stamped before proposing it.
pub fn to_batch(entry: &Entry, next_offset: i64) -> Result<Bytes, EntryError> {
    let index = entry.index;
    if !entry.context.is_empty() {
        return Err(EntryError::Context { index });
    }
    let epoch = epoch(entry.term)?;
    let (kind, value) = match entry.get_entry_type() {
        EntryType::EntryNormal if !entry.data.is_empty() => {
            let h = batch::check_batch(&entry.data).map_err(|source| EntryError::Batch { index, source })?;
            if h.base_offset != next_offset {
                return Err(EntryError::Offset { index, found: h.base_offset, expected: next_offset });
            }
            if epoch_of(&entry.data) != epoch {
                return Err(EntryError::Epoch { index, found: epoch_of(&entry.data), term: entry.term });
            }
            return Ok(entry.data.clone());
        }
        EntryType::EntryNormal => (NO_OP, None),
        EntryType::EntryConfChange => (CONF_CHANGE, Some(KIND_V1)),
        EntryType::EntryConfChangeV2 => (CONF_CHANGE, Some(KIND_V2)),
    };
    let value: Option<Vec<u8>> = value.map(|k| std::iter::once(k).chain(entry.data.iter().copied()).collect());
    let mut b = batch::build_control(kind, value.as_deref());
    batch::patch(&mut b, next_offset, epoch);
    Ok(Bytes::from(b))
}

/// The raft entry at `index` that `batch` stores (the inverse of `to_batch`).
pub fn from_batch(index: u64, batch: Bytes) -> Result<Entry, EntryError> {
    let h = batch::read_header(&batch).map_err(|source| EntryError::Batch { index, source })?;
    // A negative epoch never came from a raft term; it reads as term 0, which no entry has.
    let term = u64::try_from(epoch_of(&batch)).unwrap_or(0);
    let mut e = Entry { index, term, ..Default::default() };
    if !h.is_control() {
        e.data = batch;
        return Ok(e);
    }
    match batch::control_type(&batch) {
        Some(NO_OP) => e.set_entry_type(EntryType::EntryNormal),
        Some(CONF_CHANGE) => {
            let value = batch::records(&batch).next().and_then(|r| r.value).unwrap_or(&[]);
            let kind = match value.first() {
                Some(&KIND_V1) => EntryType::EntryConfChange,
                Some(&KIND_V2) => EntryType::EntryConfChangeV2,
                _ => return Err(EntryError::ConfChange { index }),
            };
            e.set_entry_type(kind);
            e.data = batch.slice_ref(&value[1..]);
        }
        // Any other control batch (a transaction marker) is data a leader proposed.
        _ => e.data = batch,
    }
    Ok(e)
}

/// The batch a leader proposes to move every replica's log start to `offset`.
pub fn log_start_batch(offset: i64) -> Vec<u8> {
    batch::build_control(LOG_START, Some(&offset.to_be_bytes()))
}

/// The log start a committed data entry moves the log to, if it is a `log_start_batch`.
pub fn log_start_of(data: &[u8]) -> Option<i64> {
    if batch::control_type(data)? != LOG_START {
        return None;
    }
    let value = batch::records(data).next()?.value?;
    Some(i64::from_be_bytes(value.try_into().ok()?))
}

/// The `partitionLeaderEpoch` of a batch: its raft term.
pub fn epoch_of(batch: &[u8]) -> i32 {
    i32::from_be_bytes(batch[12..16].try_into().expect("a batch header"))
}

/// The offset after the last record of a stored batch.
pub fn end_offset(batch: &[u8]) -> Result<i64, BatchError> {
    Ok(batch::read_header(batch)?.last_offset() + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(index: u64, term: u64, kind: EntryType, data: &[u8]) -> Entry {
        let mut e = Entry { index, term, data: Bytes::copy_from_slice(data), ..Default::default() };
        e.set_entry_type(kind);
        e
    }

    #[test]
    fn a_data_entry_is_its_batch_and_comes_back_whole() {
        let mut b = batch::build(1_000, &[b"a", b"b", b"c"]);
        batch::patch(&mut b, 40, 3);
        let e = entry(9, 3, EntryType::EntryNormal, &b);
        let stored = to_batch(&e, 40).unwrap();
        assert_eq!(stored.as_ref(), b.as_slice());
        assert_eq!(end_offset(&stored).unwrap(), 43);
        assert_eq!(from_batch(9, stored).unwrap(), e);
    }

    #[test]
    fn raft_entries_become_control_batches_consumers_skip() {
        for (kind, data) in [
            (EntryType::EntryNormal, &b""[..]),
            (EntryType::EntryConfChangeV2, &b"\x0a\x02\x08\x01"[..]),
            (EntryType::EntryConfChange, &b"\x08\x03"[..]),
            (EntryType::EntryConfChangeV2, &b""[..]),
        ] {
            let e = entry(5, 7, kind, data);
            let stored = to_batch(&e, 100).unwrap();
            let h = batch::check_batch(&stored).unwrap();
            assert!(h.is_control() && !h.is_transactional());
            assert_eq!((h.base_offset, h.record_count, h.max_timestamp, epoch_of(&stored)), (100, 1, -1, 7));
            assert_eq!(from_batch(5, stored.clone()).unwrap(), e, "{kind:?}");
            // Two replicas with the same previous entry store the same bytes.
            assert_eq!(to_batch(&e, 100).unwrap(), stored);
        }
    }

    #[test]
    fn a_data_entry_at_the_wrong_offset_or_term_is_refused() {
        let mut b = batch::build(0, &[b"x"]);
        batch::patch(&mut b, 10, 1);
        let e = entry(2, 1, EntryType::EntryNormal, &b);
        assert!(matches!(to_batch(&e, 11), Err(EntryError::Offset { found: 10, expected: 11, .. })));
        let huge = entry(2, 1 << 40, EntryType::EntryNormal, &[]);
        assert!(matches!(to_batch(&huge, 0), Err(EntryError::Term(_))));
        let mut torn = b.clone();
        torn.truncate(b.len() - 1);
        assert!(matches!(to_batch(&entry(2, 1, EntryType::EntryNormal, &torn), 10), Err(EntryError::Batch { .. })));
    }

    #[test]
    fn a_log_start_is_a_data_entry_every_replica_reads_back() {
        let mut b = log_start_batch(1234);
        batch::patch(&mut b, 50, 4);
        let h = batch::check_batch(&b).unwrap();
        assert!(h.is_control() && !h.is_transactional());
        let e = entry(7, 4, EntryType::EntryNormal, &b);
        let stored = to_batch(&e, 50).unwrap();
        let back = from_batch(7, stored).unwrap();
        assert_eq!(back.get_entry_type(), EntryType::EntryNormal);
        assert_eq!(log_start_of(&back.data), Some(1234));
        let mut data = batch::build(0, &[b"12345678"]);
        batch::patch(&mut data, 50, 4);
        assert_eq!(log_start_of(&data), None, "a data batch whose value looks like an offset");
        assert_eq!(log_start_of(&batch::build_control(NO_OP, None)), None);
    }

    #[test]
    fn a_transaction_marker_is_data_not_one_of_raft_entries() {
        let mut abort = batch::build_control(0, None);
        batch::patch(&mut abort, 0, 1);
        let e = from_batch(1, Bytes::from(abort.clone())).unwrap();
        assert_eq!((e.get_entry_type(), e.data.as_ref()), (EntryType::EntryNormal, abort.as_slice()));
        let mut wrong_epoch = abort;
        batch::patch(&mut wrong_epoch, 0, 2);
        let e = entry(1, 1, EntryType::EntryNormal, &wrong_epoch);
        assert!(matches!(to_batch(&e, 0), Err(EntryError::Epoch { found: 2, term: 1, .. })));
    }
}
