//! What a raft snapshot of a partition carries: the state at the log start, not the data
//! (DESIGN §9). Retention deletes whole segments below a committed entry every in-sync replica
//! holds and moves the log start there; a replica whose log ends before that start (down
//! while retention ran, or added by a reassignment) is sent this instead of entries, empties
//! its log, starts it at `offset` and takes the producer state, then gets the entries after.
//!
//! - `offset`: the Kafka offset the log starts at (the log start offset consumers see).
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
//! Layout (big-endian): magic "RBSN", version 1, offset, conf_index, producers length (u32)
//! and bytes, CRC-32C of everything before it. Snapshots come only from peer brokers; a
//! damaged one is refused and the replica goes offline rather than guess.

use bytes::Bytes;

use super::cursor::Cursor;

const MAGIC: &[u8; 4] = b"RBSN";
const VERSION: u8 = 1;

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StartState {
    pub offset: i64,
    pub conf_index: u64,
    pub producers: Bytes,
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
}

impl StartState {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(29 + self.producers.len());
        b.extend_from_slice(MAGIC);
        b.push(VERSION);
        b.extend_from_slice(&self.offset.to_be_bytes());
        b.extend_from_slice(&self.conf_index.to_be_bytes());
        b.extend_from_slice(&(self.producers.len() as u32).to_be_bytes());
        b.extend_from_slice(&self.producers);
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
        if body[4] != VERSION {
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
        Ok(StartState { offset, conf_index, producers })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_state_comes_back_as_written_and_damage_is_refused() {
        let s = StartState { offset: 4096, conf_index: 17, producers: Bytes::from_static(b"{\"producers\":{}}") };
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
}
