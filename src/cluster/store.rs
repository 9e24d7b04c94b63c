//! raft-rs's `Storage` over a partition log: which batch is which raft entry, with the most
//! recent batches held in memory so a caught-up follower's appends and the commit path never
//! read a file.
//!
//! One slot per entry since the log start: its term, the Kafka offset after its last record,
//! its size and where the batch was written (`Loc`). raft-rs requires an entry to be readable
//! from `Storage` as soon as a Ready hands it over, before it is durable, so `append` takes the
//! batches into memory at once and `written` later records where the write put them; a slot
//! keeps its bytes until it is written and, after that, while the cache budget allows.
//!
//! Cost: a slot is about 56 bytes per batch, in memory from the log start on, and rebuilding
//! the slots at open reads the header of every batch since the log start
//! (`Partition::raft_batches`). Retention bounds both: `compact_to` moves the log start to a
//! committed entry (its segments below are then deleted), and a replica whose log ends before
//! the start is sent a snapshot of the state there (`snapshot`, `install`; see
//! `cluster::snapshot`).
//!
//! A read that fails cannot be reported to raft-rs, which panics on storage errors: the store
//! then marks itself failed, answers with what keeps raft-rs going (an entry without data, or
//! "compacted" for a follower's append, which makes raft-rs ask for a snapshot the store does
//! not have yet) and the replica takes the partition offline before acting on anything else.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io;
use std::rc::Rc;

use bytes::Bytes;
use raft::prelude::{ConfState, Entry, HardState, Snapshot};
use raft::{GetEntriesContext, RaftState, StorageError};

use super::entry::{self, EntryError};
use super::meta::{LogStart, RaftMeta};
use super::snapshot::StartState;

/// Batches up to this size are copied into the cache rather than kept as slices of the
/// buffer they arrived in (`RaftStore::append`).
const COPY_INTO_CACHE_BELOW: usize = 64 << 10;

/// Where a written batch starts: the segment (by its base offset) and the position in it.
pub use crate::log::BatchLoc as Loc;

/// Reads a written batch back (a pread of the segment file in the broker).
pub trait BatchReader {
    fn read(&self, loc: Loc, len: u32) -> io::Result<Bytes>;

    /// The Kafka log start and the batches the log keeps in [log start, `offset`): what a
    /// compacted log holds below the raft log's start (`offset`), for a snapshot. A log that
    /// keeps nothing there (the default) answers `offset` and no bytes.
    fn below(&self, offset: i64) -> io::Result<(i64, Bytes)> {
        Ok((offset, Bytes::new()))
    }
}

struct Slot {
    term: u64,
    /// The Kafka offset after this entry's last record.
    end: i64,
    len: u32,
    loc: Option<Loc>,
    bytes: Option<Bytes>,
    /// The write that carries this slot's batch (see `written`).
    write: u64,
    /// Raft's own entries (control batches) stay in memory: they are tiny and a
    /// configuration change must be readable for raft to apply it.
    pinned: bool,
}

/// What `append` asks the log to do: cut it at `truncate` (a Kafka offset) if a divergent
/// tail must go, then append `batches`.
#[derive(Debug, Default)]
pub struct Appends {
    pub truncate: Option<i64>,
    pub batches: Vec<Bytes>,
}

pub struct RaftStore {
    hard_state: HardState,
    conf_state: ConfState,
    /// The entry that made `conf_state` (0: the group's first configuration).
    conf_index: u64,
    start: LogStart,
    /// The producer state over every batch before the log start (JSON, see
    /// `cluster::snapshot`): what a snapshot carries.
    start_producers: Bytes,
    /// Entry `start.index + 1 + i` is `slots[i]`.
    slots: VecDeque<Slot>,
    reader: Rc<dyn BatchReader>,
    cached: usize,
    cache_limit: usize,
    /// Slots before this one hold no cached bytes (but pinned ones): where eviction resumes.
    evict_from: usize,
    failed: RefCell<Option<String>>,
}

impl RaftStore {
    /// The store over a log whose batches, in order, are `batches`: each a batch's location
    /// and bytes holding at least its header (the whole batch for control batches, which is
    /// how recovery finds raft's configuration changes). Batches before the log start (left
    /// by a retention pass that stopped before deleting them) are skipped; the first one
    /// after must start at the log start. `start_producers` is the producer state there.
    pub fn recover(
        meta: &RaftMeta,
        batches: impl IntoIterator<Item = (Loc, Bytes)>,
        reader: Rc<dyn BatchReader>,
        cache_limit: usize,
    ) -> Result<RaftStore, EntryError> {
        let mut store = RaftStore {
            hard_state: meta.hard_state.clone(),
            conf_state: meta.conf_state.clone(),
            conf_index: meta.conf_index,
            start: meta.log_start,
            start_producers: Bytes::new(),
            slots: VecDeque::new(),
            reader,
            cached: 0,
            cache_limit,
            evict_from: 0,
            failed: RefCell::new(None),
        };
        for (loc, bytes) in batches {
            let index = store.last() + 1;
            let h =
                crate::protocol::batch::read_header(&bytes).map_err(|source| EntryError::Batch { index, source })?;
            if h.base_offset < store.start.offset {
                continue;
            }
            let expected = store.end_offset(store.last()).expect("the last entry");
            if h.base_offset != expected {
                return Err(EntryError::Offset { index, found: h.base_offset, expected });
            }
            let term = u64::try_from(entry::epoch_of(&bytes)).unwrap_or(0);
            let pinned = h.is_control() && bytes.len() >= h.size;
            let bytes = pinned.then(|| bytes.slice(..h.size));
            store.slots.push_back(Slot {
                term,
                end: h.last_offset() + 1,
                len: h.size as u32,
                loc: Some(loc),
                bytes,
                write: 0,
                pinned,
            });
        }
        Ok(store)
    }

    pub fn last(&self) -> u64 {
        self.start.index + self.slots.len() as u64
    }

    fn slot(&self, index: u64) -> Option<&Slot> {
        let at = index.checked_sub(self.start.index + 1)?;
        self.slots.get(usize::try_from(at).ok()?)
    }

    /// The Kafka offset after entry `index` (the log start's offset for the entry before the
    /// first); None outside the log.
    pub fn end_offset(&self, index: u64) -> Option<i64> {
        if index == self.start.index {
            return Some(self.start.offset);
        }
        self.slot(index).map(|s| s.end)
    }

    /// Where the batch of entry `index` ends in its segment, once written.
    pub fn end_loc(&self, index: u64) -> Option<Loc> {
        let s = self.slot(index)?;
        s.loc.map(|l| Loc { segment: l.segment, pos: l.pos + u64::from(s.len) })
    }

    /// OffsetForLeaderEpoch (KIP-320) as Kafka's leader answers it: `(epoch, end offset)`
    /// where `epoch` is the largest the log holds up to the one asked for and the end is where
    /// the next one starts (the log end for the latest); an epoch older than every one held
    /// answers itself with the log's first offset; one newer than the latest, or a negative
    /// one, is unknown: (-1, -1).
    pub fn end_offset_for_epoch(&self, epoch: i32) -> (i32, i64) {
        const UNKNOWN: (i32, i64) = (-1, -1);
        let Ok(wanted) = u64::try_from(epoch) else { return UNKNOWN };
        let latest = self.slots.back().map_or(self.start.term, |s| s.term);
        let as_epoch = |term: u64| i32::try_from(term).unwrap_or(i32::MAX);
        if wanted == latest {
            return (epoch, self.end_offset(self.last()).expect("the last entry"));
        }
        if wanted > latest {
            return UNKNOWN;
        }
        let after = self.slots.partition_point(|s| s.term <= wanted);
        match after.checked_sub(1) {
            // The entry before the next term's first is the end of this one.
            Some(last) => (as_epoch(self.slots[last].term), self.slots[last].end),
            None => (epoch, self.start.offset),
        }
    }

    /// The leader epoch of the batch holding `offset`, as Kafka's ListOffsets answers it (a
    /// client validates the position it found with that epoch, KIP-320): the term of the
    /// entry whose records reach past it; the latest term at or past the log end. Below the
    /// first entry (records a snapshot covers) it is the snapshot's term, the latest that
    /// can have written them.
    pub fn epoch_at(&self, offset: i64) -> i32 {
        let term = match offset < self.start.offset {
            true => self.start.term,
            false => {
                let at = self.slots.partition_point(|s| s.end <= offset);
                self.slots.get(at).or(self.slots.back()).map_or(self.start.term, |s| s.term)
            }
        };
        i32::try_from(term).unwrap_or(i32::MAX)
    }

    /// The term of entry `index`, if the log holds it.
    pub fn slot_term(&self, index: u64) -> Option<u64> {
        self.slot(index).map(|s| s.term)
    }

    /// The offset the batch at `index` starts at.
    pub fn base_offset(&self, index: u64) -> Option<i64> {
        self.end_offset(index.checked_sub(1)?)
    }

    pub fn start(&self) -> LogStart {
        self.start
    }

    pub fn hard_state(&self) -> &HardState {
        &self.hard_state
    }

    pub fn set_hard_state(&mut self, hs: HardState) {
        self.hard_state = hs;
    }

    pub fn conf_state(&self) -> &ConfState {
        &self.conf_state
    }

    /// The configuration entry `index` made, applied.
    pub fn set_conf_state(&mut self, cs: ConfState, index: u64) {
        self.conf_state = cs;
        self.conf_index = index;
    }

    pub fn conf_index(&self) -> u64 {
        self.conf_index
    }

    /// The producer state at the log start (see `cluster::snapshot`).
    pub fn set_start_producers(&mut self, producers: Bytes) {
        self.start_producers = producers;
    }

    pub fn start_producers(&self) -> &Bytes {
        &self.start_producers
    }

    /// The entry whose batch ends right before `offset` (the log start's entry for the start
    /// offset): where a log cut at `offset` ends. None unless a batch boundary is there.
    pub fn index_ending_at(&self, offset: i64) -> Option<u64> {
        if offset == self.start.offset {
            return Some(self.start.index);
        }
        let at = self.slots.partition_point(|s| s.end < offset);
        self.slots.get(at).filter(|s| s.end == offset).map(|_| self.start.index + 1 + at as u64)
    }

    /// Moves the log start past entry `index` (committed and written: retention deletes the
    /// segments below it next); `producers` is the producer state there. The caller writes
    /// the replica state with the new start before deleting anything.
    pub fn compact_to(&mut self, index: u64, producers: Bytes) {
        assert!(index > self.start.index && index <= self.last(), "compacting to {index} outside the log");
        let s = self.slot(index).expect("inside the log");
        assert!(s.loc.is_some(), "compacting past an entry not yet written");
        let start = LogStart { index, term: s.term, offset: s.end };
        let n = (index - self.start.index) as usize;
        for s in self.slots.drain(..n) {
            if !s.pinned {
                self.cached -= s.bytes.as_ref().map_or(0, |b| b.len());
            }
        }
        self.evict_from = self.evict_from.saturating_sub(n);
        self.start = start;
        self.start_producers = producers;
    }

    /// A cleaning rewrote the batches of the entries that start in [`from`, `to`): `moved`
    /// (base offset, location, size, in offset order) is where each batch now is. Every one
    /// of those entries must have its batch there (a replicated log is cleaned keeping every
    /// batch); the error names the first that does not. Cached bytes of the moved entries
    /// are let go: reads then see the cleaned batches.
    pub fn relocate(&mut self, from: i64, to: i64, moved: &[(i64, Loc, u32)]) -> Result<(), String> {
        let mut base = self.start.offset;
        let mut at = 0;
        let mut freed = 0;
        for (i, s) in self.slots.iter_mut().enumerate() {
            let b = std::mem::replace(&mut base, s.end);
            if b < from {
                continue;
            }
            if b >= to {
                break;
            }
            while moved.get(at).is_some_and(|m| m.0 < b) {
                at += 1;
            }
            match moved.get(at) {
                Some(&(offset, loc, len)) if offset == b => {
                    s.loc = Some(loc);
                    s.len = len;
                    if !s.pinned {
                        freed += s.bytes.take().map_or(0, |x| x.len());
                    }
                }
                _ => {
                    return Err(format!(
                        "the cleaned log has no batch at offset {b} (entry {})",
                        self.start.index + 1 + i as u64
                    ))
                }
            }
        }
        self.cached -= freed;
        Ok(())
    }

    /// Replaces the whole log with a snapshot's start (the leader's log starts past this
    /// one's end): no entries, the start at (`index`, `term`, `state.offset`), the
    /// configuration the snapshot carries.
    pub fn install(&mut self, index: u64, term: u64, state: &StartState, cs: ConfState) {
        self.slots.clear();
        self.cached = 0;
        self.evict_from = 0;
        self.start = LogStart { index, term, offset: state.offset };
        self.start_producers = state.producers.clone();
        self.conf_state = cs;
        self.conf_index = state.conf_index.max(index);
        self.hard_state.commit = self.hard_state.commit.max(index);
    }

    /// Takes the entries of a Ready (contiguous, the first possibly replacing a divergent
    /// tail) into memory, as write `write`; returns what the log must do.
    pub fn append(&mut self, entries: &[Entry], write: u64) -> Result<Appends, EntryError> {
        let mut out = Appends::default();
        let Some(first) = entries.first() else { return Ok(out) };
        assert!(
            first.index > self.start.index && first.index <= self.last() + 1,
            "raft appends {} to a log of [{}, {}]",
            first.index,
            self.start.index + 1,
            self.last()
        );
        if first.index <= self.last() {
            let keep = (first.index - self.start.index - 1) as usize;
            for s in self.slots.drain(keep..) {
                if !s.pinned {
                    self.cached -= s.bytes.as_ref().map_or(0, |b| b.len());
                }
            }
            out.truncate = self.end_offset(first.index - 1);
        }
        let mut next = self.end_offset(first.index - 1).expect("checked above");
        for e in entries {
            let batch = entry::to_batch(e, next)?;
            next = entry::end_offset(&batch).expect("to_batch checked the batch");
            let pinned = e.get_entry_type() != raft::prelude::EntryType::EntryNormal || e.data.is_empty();
            if !pinned {
                self.cached += batch.len();
            }
            // A follower's entry is a slice of the peer link's read buffer, which it keeps
            // whole while cached: a small batch alone in a read would hold 16 KiB or more,
            // and the cache counts only the batch. Small ones are cached as copies.
            let cached = match batch.len() <= COPY_INTO_CACHE_BELOW {
                true => Bytes::copy_from_slice(&batch),
                false => batch.clone(),
            };
            self.slots.push_back(Slot {
                term: e.term,
                end: next,
                len: batch.len() as u32,
                loc: None,
                bytes: Some(cached),
                write,
                pinned,
            });
            out.batches.push(batch);
        }
        Ok(out)
    }

    /// Write `write` put its batches at `locs`, in order; slots a later Ready replaced since
    /// are left alone. Then the cache gives back what exceeds its budget, oldest first.
    pub fn written(&mut self, write: u64, locs: &[Loc]) {
        // The write's slots are contiguous, followed only by those of later writes; a later
        // write may have cut some of them off the end, never from the front.
        let later = self.slots.iter().rev().take_while(|s| s.write > write).count();
        let ours = self.slots.iter().rev().skip(later).take_while(|s| s.write == write).count();
        let first = self.slots.len() - later - ours;
        for (s, loc) in self.slots.range_mut(first..first + ours).zip(locs) {
            s.loc = Some(*loc);
        }
        self.evict_from = self.evict_from.min(self.slots.len());
        while self.cached > self.cache_limit && self.evict_from < self.slots.len() {
            let s = &mut self.slots[self.evict_from];
            if s.loc.is_none() {
                break;
            }
            if !s.pinned {
                if let Some(b) = s.bytes.take() {
                    self.cached -= b.len();
                }
            }
            self.evict_from += 1;
        }
    }

    fn read(&self, index: u64) -> io::Result<Bytes> {
        let s = self.slot(index).expect("raft reads inside the log");
        match (&s.bytes, s.loc) {
            (Some(b), _) => Ok(b.clone()),
            (None, Some(loc)) => self.reader.read(loc, s.len),
            (None, None) => unreachable!("a slot keeps its bytes until written"),
        }
    }

    /// Records a read failure from inside a `Storage` call, which only has `&self`.
    fn fail(&self, why: String) {
        self.failed.borrow_mut().get_or_insert(why);
    }

    /// Why the store failed, if it did: the replica checks after every call into raft-rs.
    pub fn failed(&self) -> Option<String> {
        self.failed.borrow().clone()
    }
}

impl raft::Storage for RaftStore {
    fn initial_state(&self) -> raft::Result<RaftState> {
        Ok(RaftState { hard_state: self.hard_state.clone(), conf_state: self.conf_state.clone() })
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        if low <= self.start.index {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        assert!(high <= self.last() + 1, "raft reads [{low}, {high}) past the last entry {}", self.last());
        let max = max_size.into().unwrap_or(u64::MAX);
        let mut out = Vec::with_capacity((high - low) as usize);
        let mut size = 0u64;
        for index in low..high {
            let len = u64::from(self.slot(index).expect("inside the log").len);
            if !out.is_empty() && size + len > max {
                break;
            }
            size += len;
            let entry = self
                .read(index)
                .map_err(|e| e.to_string())
                .and_then(|b| entry::from_batch(index, b).map_err(|e| e.to_string()));
            match entry {
                Ok(e) => out.push(e),
                Err(why) => {
                    self.fail(format!("reading raft entry {index}: {why}"));
                    if context.can_async() {
                        return Err(raft::Error::Store(StorageError::Compacted));
                    }
                    let term = self.slot(index).expect("inside the log").term;
                    out.push(Entry { index, term, ..Default::default() });
                }
            }
        }
        Ok(out)
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        if idx == self.start.index {
            return Ok(self.start.term);
        }
        match self.slot(idx) {
            Some(s) => Ok(s.term),
            None if idx < self.start.index => Err(raft::Error::Store(StorageError::Compacted)),
            None => Err(raft::Error::Store(StorageError::Unavailable)),
        }
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(self.start.index + 1)
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(self.last())
    }

    /// raft-rs asks for a snapshot when a peer needs entries before the log start: it gets
    /// the state there and the batches a compacted log keeps below it, with this replica's
    /// applied configuration (which must name it, or raft-rs drops the snapshot: a learner
    /// added after the start is in the applied one).
    fn snapshot(&self, _request_index: u64, _to: u64) -> raft::Result<Snapshot> {
        if self.start.index == 0 {
            return Err(raft::Error::Store(StorageError::SnapshotTemporarilyUnavailable));
        }
        let (log_start, data) = match self.reader.below(self.start.offset) {
            Ok(below) => below,
            Err(e) => {
                self.fail(format!("reading the log below the raft log's start for a snapshot: {e}"));
                return Err(raft::Error::Store(StorageError::SnapshotTemporarilyUnavailable));
            }
        };
        let state = StartState {
            offset: self.start.offset,
            conf_index: self.conf_index,
            producers: self.start_producers.clone(),
            log_start,
            data,
        };
        let mut snap = Snapshot { data: Bytes::from(state.encode()), ..Default::default() };
        let m = snap.mut_metadata();
        m.index = self.start.index;
        m.term = self.start.term;
        m.set_conf_state(self.conf_state.clone());
        Ok(snap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::batch;
    use raft::prelude::EntryType;
    use raft::Storage;

    /// A log file in memory: batches appended at the end, truncation by offset.
    #[derive(Default)]
    struct File(RefCell<Vec<u8>>, RefCell<bool>);

    impl BatchReader for File {
        fn read(&self, loc: Loc, len: u32) -> io::Result<Bytes> {
            if *self.1.borrow() {
                return Err(io::Error::other("injected EIO"));
            }
            let f = self.0.borrow();
            Ok(Bytes::copy_from_slice(&f[loc.pos as usize..loc.pos as usize + len as usize]))
        }
    }

    fn data(index: u64, term: u64, base: i64, records: usize) -> Entry {
        let values: Vec<&[u8]> = (0..records).map(|_| &b"v"[..]).collect();
        let mut b = batch::build(5, &values);
        batch::patch(&mut b, base, term as i32);
        Entry { index, term, data: Bytes::from(b), ..Default::default() }
    }

    fn no_op(index: u64, term: u64) -> Entry {
        Entry { index, term, ..Default::default() }
    }

    fn write(file: &File, store: &mut RaftStore, n: u64, a: Appends) {
        let mut f = file.0.borrow_mut();
        if let Some(cut) = a.truncate {
            // Find the position of the batch at offset `cut`: scan from the start.
            let mut pos = 0;
            while pos < f.len() && batch::read_header(&f[pos..]).unwrap().base_offset < cut {
                pos += batch::read_header(&f[pos..]).unwrap().size;
            }
            f.truncate(pos);
        }
        let mut locs = Vec::new();
        for b in &a.batches {
            locs.push(Loc { segment: 0, pos: f.len() as u64 });
            f.extend_from_slice(b);
        }
        drop(f);
        store.written(n, &locs);
    }

    fn scan(file: &File) -> Vec<(Loc, Bytes)> {
        let f = file.0.borrow();
        let mut out = Vec::new();
        let mut pos = 0;
        while pos < f.len() {
            let size = batch::read_header(&f[pos..]).unwrap().size;
            out.push((Loc { segment: 0, pos: pos as u64 }, Bytes::copy_from_slice(&f[pos..pos + size])));
            pos += size;
        }
        out
    }

    #[test]
    fn entries_map_to_offsets_and_survive_a_rebuild_from_the_log() {
        let file = Rc::new(File::default());
        let meta = RaftMeta::initial(vec![1, 2, 3]);
        let mut store = RaftStore::recover(&meta, [], file.clone(), 1 << 20).unwrap();
        let mut cc = Entry { index: 4, term: 2, data: Bytes::from_static(b"\x0a\x02"), ..Default::default() };
        cc.set_entry_type(EntryType::EntryConfChangeV2);
        let ents = vec![no_op(1, 1), data(2, 1, 1, 3), no_op(3, 2), cc.clone(), data(5, 2, 6, 2)];
        let a = store.append(&ents, 1).unwrap();
        assert_eq!((a.truncate, a.batches.len()), (None, 5));
        write(&file, &mut store, 1, a);
        assert_eq!((1..=5).map(|i| store.end_offset(i).unwrap()).collect::<Vec<_>>(), vec![1, 4, 5, 6, 8]);
        assert_eq!(store.entries(1, 6, None, GetEntriesContext::empty(false)).unwrap(), ents);

        let rebuilt = RaftStore::recover(&meta, scan(&file), file.clone(), 0).unwrap();
        assert_eq!(rebuilt.last(), 5);
        assert_eq!(rebuilt.term(5).unwrap(), 2);
        assert_eq!(rebuilt.end_offset(5), Some(8));
        // Nothing cached: the data batches are read back from the file.
        assert_eq!(rebuilt.entries(1, 6, None, GetEntriesContext::empty(false)).unwrap(), ents);
        assert_eq!(rebuilt.entries(2, 6, Some(1), GetEntriesContext::empty(false)).unwrap().len(), 1);
        assert_eq!(rebuilt.term(0).unwrap(), 0);
        assert!(rebuilt.term(6).is_err());
    }

    #[test]
    fn a_divergent_tail_is_cut_at_its_first_offset() {
        let file = Rc::new(File::default());
        let mut store = RaftStore::recover(&RaftMeta::initial(vec![1]), [], file.clone(), 1 << 20).unwrap();
        let a = store.append(&[no_op(1, 1), data(2, 1, 1, 2), data(3, 1, 3, 2)], 1).unwrap();
        write(&file, &mut store, 1, a);
        let a = store.append(&[no_op(3, 2), data(4, 2, 4, 1)], 2).unwrap();
        assert_eq!(a.truncate, Some(3));
        write(&file, &mut store, 2, a);
        assert_eq!((store.last(), store.end_offset(4), store.term(3).unwrap()), (4, Some(5), 2));
        let scanned: Vec<i64> = scan(&file).iter().map(|(_, b)| batch::read_header(b).unwrap().base_offset).collect();
        assert_eq!(scanned, vec![0, 1, 3, 4]);
        // A data entry that does not start where the log ends is refused, not written.
        assert!(store.append(&[data(5, 2, 9, 1)], 3).is_err());
    }

    #[test]
    fn each_epoch_ends_where_the_next_begins() {
        let file = Rc::new(File::default());
        let mut store = RaftStore::recover(&RaftMeta::initial(vec![1]), [], file.clone(), 1 << 20).unwrap();
        let ents = [no_op(1, 2), data(2, 2, 1, 3), no_op(3, 5), data(4, 5, 5, 2), no_op(5, 6)];
        let a = store.append(&ents, 1).unwrap();
        write(&file, &mut store, 1, a);
        assert_eq!(store.end_offset_for_epoch(1), (1, 0), "older than all: itself, at the log start");
        assert_eq!(store.end_offset_for_epoch(2), (2, 4));
        assert_eq!(store.end_offset_for_epoch(4), (2, 4), "epochs 3 and 4 never led: epoch 2's end");
        assert_eq!(store.end_offset_for_epoch(5), (5, 7));
        assert_eq!(store.end_offset_for_epoch(6), (6, 8), "the latest ends at the log end");
        assert_eq!(store.end_offset_for_epoch(9), (-1, -1), "newer than the latest: unknown");
        assert_eq!(store.end_offset_for_epoch(-1), (-1, -1));
        let epochs: Vec<i32> = (0..=9).map(|offset| store.epoch_at(offset)).collect();
        assert_eq!(epochs, vec![2, 2, 2, 2, 5, 5, 5, 6, 6, 6], "each offset's batch's epoch, the latest past the end");
    }

    #[test]
    fn a_cleaning_moves_entries_to_their_rewritten_batches() {
        let file = Rc::new(File::default());
        // No cache: every read goes to the file.
        let mut store = RaftStore::recover(&RaftMeta::initial(vec![1]), [], file.clone(), 0).unwrap();
        let ents = [no_op(1, 1), data(2, 1, 1, 3), data(3, 1, 4, 2), data(4, 1, 6, 1)];
        let a = store.append(&ents, 1).unwrap();
        write(&file, &mut store, 1, a);
        // The cleaner rewrote offsets 1..6 (entries 2 and 3): entry 2 emptied, entry 3 as is,
        // into a new file after the old one.
        let old = scan(&file);
        let emptied = batch::rebuild(&old[1].1, &[], 0, 0, None).unwrap();
        let kept = old[2].1.to_vec();
        let mut f = file.0.borrow_mut();
        let at = f.len() as u64;
        f.extend_from_slice(&emptied);
        f.extend_from_slice(&kept);
        drop(f);
        let moved = [
            (1, Loc { segment: 0, pos: at }, emptied.len() as u32),
            (4, Loc { segment: 0, pos: at + emptied.len() as u64 }, kept.len() as u32),
        ];
        store.relocate(1, 6, &moved).unwrap();
        let got = store.entries(2, 4, None, GetEntriesContext::empty(false)).unwrap();
        assert_eq!(got[0].data.as_ref(), &emptied[..], "the emptied batch, read from where it went");
        assert_eq!((got[0].index, got[0].term), (2, 1));
        assert_eq!(got[1].data.as_ref(), &kept[..]);
        assert_eq!(store.end_offset(2), Some(4), "an entry's offsets do not move");
        // An entry in the cleaned range without its batch is an error, never a guess.
        let err = store.relocate(1, 6, &moved[1..]).unwrap_err();
        assert!(err.contains("offset 1") && err.contains("entry 2"), "{err}");
    }

    #[test]
    fn a_failed_read_is_reported_not_panicked() {
        let file = Rc::new(File::default());
        let mut store = RaftStore::recover(&RaftMeta::initial(vec![1]), [], file.clone(), 0).unwrap();
        let a = store.append(&[no_op(1, 1), data(2, 1, 1, 2)], 1).unwrap();
        write(&file, &mut store, 1, a);
        *file.1.borrow_mut() = true;
        let got = store.entries(1, 3, None, GetEntriesContext::empty(false)).unwrap();
        assert_eq!((got.len(), got[1].data.len()), (2, 0));
        assert!(store.failed().unwrap().contains("injected EIO"));
    }
}
