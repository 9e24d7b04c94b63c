//! What a raft snapshot of a partition carries: the state at the raft log's start and the
//! records a compacted log keeps below it (DESIGN §9). Retention deletes whole segments below
//! a committed entry every in-sync replica holds and moves the raft log's start there; a
//! compacted log may keep records below its raft log's start, cleaned as a standalone log's
//! are (emptied batches dropped), since no raft entry refers to them. A replica whose
//! log ends before that start (down meanwhile, or added by a reassignment) is sent this
//! instead of entries, replaces its log with `data` from `log_start` on, starts its raft log
//! at `offset` and takes the producer state, then gets the entries after.
//!
//! - `offset`: the Kafka offset the raft log starts at.
//! - `log_start`: the Kafka log start offset consumers see (at most `offset`).
//! - `data`: the sender's batches in [`log_start`, `offset`), cleaned as it cleaned them
//!   (empty unless the log is compacted and keeps records below its raft log's start).
//! - `conf_index`: the entry that made the configuration the snapshot carries (raft-rs sends
//!   the sender's applied configuration, which may be newer than the log start): the receiver
//!   skips the configuration changes up to it when they reach it again from the log.
//! - `producers`: the idempotent producers' state over every batch before `offset` (JSON of
//!   `producer::ProducerState`, the partition's own snapshot format), so that a new leader
//!   still recognises retries of batches retention deleted.
//!
//! The epoch boundaries below the start are not carried: OffsetForLeaderEpoch answers an
//! epoch older than the log start with the log start, as Kafka does.
//!
//! Layout (big-endian): magic "RBSN", version 2, offset, conf_index, producers length (u32)
//! and bytes, log_start, data length (u32) and bytes, CRC-32C of everything before it.
//! Version 1 (from an older broker) ends after the producers: no data, the log starting at
//! `offset`. Snapshots come only from peer brokers; a damaged one is refused and the replica
//! goes offline rather than guess.

use bytes::Bytes;

use super::cursor::Cursor;

const MAGIC: &[u8; 4] = b"RBSN";
const VERSION: u8 = 2;

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StartState {
    pub offset: i64,
    pub conf_index: u64,
    pub producers: Bytes,
    pub log_start: i64,
    pub data: Bytes,
}

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum SnapshotError {
    #[error("raft snapshot of {0} bytes is too short to be one")]
    Short(usize),
    #[error("raft snapshot does not start with its magic bytes")]
    Magic,
    #[error("raft snapshot version {0} is not one this broker reads")]
    Version(u8),
    #[error("raft snapshot CRC mismatch: damaged in transit or on disk")]
    Crc,
    #[error("raft snapshot's log start {log_start} is past its raft log start {offset}")]
    Range { log_start: i64, offset: i64 },
}

impl StartState {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(41 + self.producers.len() + self.data.len());
        b.extend_from_slice(MAGIC);
        b.push(VERSION);
        b.extend_from_slice(&self.offset.to_be_bytes());
        b.extend_from_slice(&self.conf_index.to_be_bytes());
        b.extend_from_slice(&(self.producers.len() as u32).to_be_bytes());
        b.extend_from_slice(&self.producers);
        b.extend_from_slice(&self.log_start.to_be_bytes());
        b.extend_from_slice(&(self.data.len() as u32).to_be_bytes());
        b.extend_from_slice(&self.data);
        let crc = crc32c::crc32c(&b);
        b.extend_from_slice(&crc.to_be_bytes());
        b
    }

    pub fn decode(buf: &[u8]) -> Result<StartState, SnapshotError> {
        let short = || SnapshotError::Short(buf.len());
        let split = buf.len().checked_sub(4).ok_or_else(short)?;
        let (body, crc) = buf.split_at(split);
        if body.len() < 5 {
            return Err(short());
        }
        if &body[..4] != MAGIC {
            return Err(SnapshotError::Magic);
        }
        if body[4] != VERSION && body[4] != 1 {
            return Err(SnapshotError::Version(body[4]));
        }
        if crc32c::crc32c(body) != u32::from_be_bytes(crc.try_into().expect("4 bytes")) {
            return Err(SnapshotError::Crc);
        }
        let mut r = Cursor::new(&body[5..], short());
        let offset = i64::from_be_bytes(r.array()?);
        let conf_index = u64::from_be_bytes(r.array()?);
        let len = u32::from_be_bytes(r.array()?) as usize;
        let producers = Bytes::copy_from_slice(r.take(len)?);
        if body[4] == 1 {
            return Ok(StartState { offset, conf_index, producers, log_start: offset, data: Bytes::new() });
        }
        let log_start = i64::from_be_bytes(r.array()?);
        let len = u32::from_be_bytes(r.array()?) as usize;
        let data = Bytes::copy_from_slice(r.take(len)?);
        if log_start > offset {
            return Err(SnapshotError::Range { log_start, offset });
        }
        Ok(StartState { offset, conf_index, producers, log_start, data })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_state_comes_back_as_written_and_damage_is_refused() {
        let s = StartState {
            offset: 4096,
            conf_index: 17,
            producers: Bytes::from_static(b"{\"producers\":{}}"),
            log_start: 100,
            data: Bytes::from_static(b"batches"),
        };
        let bytes = s.encode();
        assert_eq!(StartState::decode(&bytes).unwrap(), s);
        assert_eq!(StartState::decode(&StartState::default().encode()).unwrap(), StartState::default());
        for cut in 0..bytes.len() {
            assert!(StartState::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        for at in 0..bytes.len() {
            let mut flipped = bytes.clone();
            flipped[at] ^= 0x04;
            assert!(StartState::decode(&flipped).is_err(), "flip at {at}");
        }
    }

    #[test]
    fn an_older_brokers_snapshot_starts_the_log_at_its_offset_with_no_data() {
        let mut v1 = b"RBSN\x01".to_vec();
        v1.extend_from_slice(&4096i64.to_be_bytes());
        v1.extend_from_slice(&17u64.to_be_bytes());
        v1.extend_from_slice(&2u32.to_be_bytes());
        v1.extend_from_slice(b"{}");
        let crc = crc32c::crc32c(&v1);
        v1.extend_from_slice(&crc.to_be_bytes());
        let s = StartState::decode(&v1).unwrap();
        assert_eq!((s.offset, s.conf_index, &s.producers[..]), (4096, 17, &b"{}"[..]));
        assert_eq!((s.log_start, s.data.len()), (4096, 0));
        let past = StartState { offset: 10, log_start: 11, ..Default::default() };
        assert_eq!(StartState::decode(&past.encode()), Err(SnapshotError::Range { log_start: 11, offset: 10 }));
    }
}
