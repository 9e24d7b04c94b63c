//! What a replica keeps beside its log: raft's hard state (term, vote, commit), the
//! configuration applied so far and where the log starts. It is small, rewritten whole
//! (atomically, fsynced) whenever the term, the vote or the configuration changes, and
//! checked by CRC when read back.
//!
//! The commit index alone is not rewritten each time it moves: a restarted replica learns it
//! again from its leader, and a stale one only makes the high watermark start lower. It is
//! written with every other change and at a clean close. Term and vote are what raft's safety
//! needs durable before a node acts on them (a vote given twice in one term breaks elections).
//!
//! Layout (big-endian): magic "RBRM", version 1, then term, vote, commit, conf index,
//! log-start index, log-start term, log-start offset, auto_leave (1 byte), four id lists
//! (voters, learners, outgoing voters, next learners: a u32 count then u64 ids), CRC-32C of
//! everything before it.

use raft::prelude::{ConfState, HardState};

use super::cursor::Cursor;

const MAGIC: &[u8; 4] = b"RBRM";
const VERSION: u8 = 1;

/// Where the raft log starts: the entry before its first one (`index`, `term`) and the Kafka
/// offset its first entry takes. A new log starts at index 0, term 0, offset 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LogStart {
    pub index: u64,
    pub term: u64,
    pub offset: i64,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct RaftMeta {
    pub hard_state: HardState,
    pub conf_state: ConfState,
    /// The index of the entry that made `conf_state` (0: the initial configuration).
    pub conf_index: u64,
    pub log_start: LogStart,
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum MetaError {
    #[error("raft state file is {0} bytes, too short to be one")]
    Short(usize),
    #[error("raft state file does not start with its magic bytes")]
    Magic,
    #[error("raft state file version {0} is not one this broker reads")]
    Version(u8),
    #[error("raft state file CRC mismatch: it is corrupt (restore the replica from its peers)")]
    Crc,
}

impl RaftMeta {
    /// A new replica's state: term 0, no vote, the given voters.
    pub fn initial(voters: Vec<u64>) -> RaftMeta {
        RaftMeta { conf_state: ConfState::from((voters, vec![])), ..Default::default() }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(128);
        b.extend_from_slice(MAGIC);
        b.push(VERSION);
        let hs = &self.hard_state;
        for v in [hs.term, hs.vote, hs.commit, self.conf_index, self.log_start.index, self.log_start.term] {
            b.extend_from_slice(&v.to_be_bytes());
        }
        b.extend_from_slice(&self.log_start.offset.to_be_bytes());
        let cs = &self.conf_state;
        b.push(u8::from(cs.auto_leave));
        for ids in [&cs.voters, &cs.learners, &cs.voters_outgoing, &cs.learners_next] {
            b.extend_from_slice(&(ids.len() as u32).to_be_bytes());
            for id in ids {
                b.extend_from_slice(&id.to_be_bytes());
            }
        }
        let crc = crc32c::crc32c(&b);
        b.extend_from_slice(&crc.to_be_bytes());
        b
    }

    pub fn decode(buf: &[u8]) -> Result<RaftMeta, MetaError> {
        let short = || MetaError::Short(buf.len());
        let (body, crc) = buf.split_at_checked(buf.len().checked_sub(4).ok_or_else(short)?).ok_or_else(short)?;
        if body.len() < 5 {
            return Err(short());
        }
        if &body[..4] != MAGIC {
            return Err(MetaError::Magic);
        }
        if body[4] != VERSION {
            return Err(MetaError::Version(body[4]));
        }
        if crc32c::crc32c(body) != u32::from_be_bytes(crc.try_into().expect("4 bytes")) {
            return Err(MetaError::Crc);
        }
        let mut r = Cursor::new(&body[5..], short());
        let mut word = || r.array().map(u64::from_be_bytes);
        let hs = HardState { term: word()?, vote: word()?, commit: word()?, ..Default::default() };
        let conf_index = word()?;
        let index = word()?;
        let term = word()?;
        let offset = word()? as i64;
        let mut cs = ConfState { auto_leave: r.take(1)?[0] != 0, ..Default::default() };
        for ids in [&mut cs.voters, &mut cs.learners, &mut cs.voters_outgoing, &mut cs.learners_next] {
            let n = u32::from_be_bytes(r.array()?);
            for _ in 0..n {
                ids.push(u64::from_be_bytes(r.array()?));
            }
        }
        Ok(RaftMeta { hard_state: hs, conf_state: cs, conf_index, log_start: LogStart { index, term, offset } })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> RaftMeta {
        let mut m = RaftMeta::initial(vec![1, 2, 3]);
        m.hard_state.term = 7;
        m.hard_state.vote = 2;
        m.hard_state.commit = 41;
        m.conf_index = 12;
        m.conf_state.learners = vec![4];
        m.conf_state.voters_outgoing = vec![1, 2, 5];
        m.conf_state.auto_leave = true;
        m.log_start = LogStart { index: 10, term: 3, offset: 977 };
        m
    }

    #[test]
    fn the_state_comes_back_as_written() {
        let m = sample();
        assert_eq!(RaftMeta::decode(&m.encode()).unwrap(), m);
        assert_eq!(RaftMeta::decode(&RaftMeta::default().encode()).unwrap(), RaftMeta::default());
    }

    #[test]
    fn a_damaged_file_is_refused_never_misread() {
        let bytes = sample().encode();
        for cut in 0..bytes.len() {
            assert!(RaftMeta::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        for at in 0..bytes.len() {
            let mut flipped = bytes.clone();
            flipped[at] ^= 0x10;
            assert!(RaftMeta::decode(&flipped).is_err(), "flip at {at}");
        }
    }
}
