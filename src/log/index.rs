//! Sparse indexes of one segment, memory-mapped (`<base>.index`, `<base>.timeindex`).
//!
//! Offset index entry, 8 bytes, big-endian:
//! ```text
//! 0  4  relative offset (batch base offset − segment base offset)
//! 4  4  file position of that batch in the segment's .log
//! ```
//! Time index entry, 12 bytes, big-endian:
//! ```text
//! 0  8  largest timestamp seen in the segment up to and including this batch
//! 8  4  relative offset of that batch
//! ```
//! An entry is added every `index_interval_bytes` of log. Files are sized to their capacity
//! while the segment is active (the tail past `entries` reads as zero and holds no blocks)
//! and trimmed to their entries on close; recovery rebuilds them from the log when in doubt.
//!
//! Entries are stored through a memory map, and a store to a page the file system cannot back
//! (a full disk) would kill the broker with SIGBUS. So blocks are reserved (`storage::allocate`)
//! in `ALLOCATE_CHUNK`s ahead of the entries written, and a chunk that cannot be reserved just
//! leaves the index sparser: it is a shortcut into the log, never the only way to find a
//! batch. Stale entries are cleared by punching a hole (`storage::zero`), not by storing zeros.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use crate::storage;
use crate::sys::MappedFile;

/// Bytes of an index file reserved at a time, ahead of its entries.
const ALLOCATE_CHUNK: usize = 64 * 1024;

/// A fixed-width entry array in a mapped file.
pub struct MappedEntries<const W: usize> {
    file: File,
    path: PathBuf,
    map: MappedFile,
    entries: usize,
    capacity: usize,
    /// Bytes from the start of the file whose blocks are reserved.
    allocated: usize,
    /// Entries are being skipped for want of blocks (logged once, until one fits again).
    starved: bool,
}

impl<const W: usize> MappedEntries<W> {
    /// Opens (creating if needed) with room for `capacity` entries. With `trust_contents`, the
    /// entries already in the file are kept — as far as each key (`key`) grows over the one
    /// before it, which drops the zero tail of a file that was pre-sized and never trimmed —
    /// and the capacity is at least what was kept (sealed segments reopen with capacity 0:
    /// they take no new entries). Otherwise the index starts empty and is rebuilt by the caller.
    fn open(path: &Path, capacity: usize, trust_contents: bool, key: fn(&[u8]) -> i64) -> io::Result<Self> {
        let file = storage::open_rw(path)?;
        let mut entries = 0;
        if trust_contents {
            let bytes = storage::read(path)?.unwrap_or_default();
            let mut prev = None;
            for e in bytes.chunks_exact(W) {
                let k = key(e);
                if prev.is_some_and(|p| k <= p) {
                    break;
                }
                prev = Some(k);
                entries += 1;
            }
        }
        let capacity = capacity.max(entries);
        let old_len = file.metadata()?.len() as usize;
        // Clear stale entries; growth past the old length reads as zero already (and stays
        // unallocated until used, so an idle partition's index costs no disk or memory).
        let stale_end = old_len.min(capacity * W);
        if stale_end > entries * W {
            storage::zero(&file, path, (entries * W) as u64, (stale_end - entries * W) as u64)?;
        }
        storage::set_len(&file, path, (capacity * W) as u64)?;
        let map = MappedFile::map(&file, capacity * W)?;
        let allocated = entries * W;
        Ok(MappedEntries { file, path: path.to_path_buf(), map, entries, capacity, allocated, starved: false })
    }

    pub fn len(&self) -> usize {
        self.entries
    }
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }
    pub fn is_full(&self) -> bool {
        self.entries >= self.capacity
    }

    fn entry(&self, i: usize) -> &[u8] {
        &self.map.bytes()[i * W..(i + 1) * W]
    }

    /// Adds an entry; false when the index is full, or when the disk has no block for it
    /// (logged: the index stays correct, only sparser).
    fn push(&mut self, e: [u8; W]) -> bool {
        if self.is_full() {
            return false;
        }
        let end = (self.entries + 1) * W;
        if end > self.allocated {
            let want = end.next_multiple_of(ALLOCATE_CHUNK).min(self.capacity * W);
            let at = self.allocated as u64;
            if let Err(e) = storage::allocate(&self.file, &self.path, at, (want - self.allocated) as u64) {
                if !std::mem::replace(&mut self.starved, true) {
                    tracing::warn!(path = %self.path.display(), "index entries skipped until space is freed: {e}");
                }
                return false;
            }
            self.allocated = want;
            self.starved = false;
        }
        self.map.bytes_mut()[self.entries * W..end].copy_from_slice(&e);
        self.entries += 1;
        true
    }

    /// Trims the file to its entries (the form a clean close leaves).
    pub fn trim(&mut self) -> io::Result<()> {
        self.map.flush()?;
        storage::set_len(&self.file, &self.path, (self.entries * W) as u64)?;
        self.capacity = self.entries;
        self.allocated = self.allocated.min(self.entries * W);
        self.map = MappedFile::map(&self.file, self.entries * W)?;
        Ok(())
    }

    pub fn flush(&self) -> io::Result<()> {
        self.map.flush()
    }

    /// Index of the last entry whose key (by `key`) is <= `target`, by binary search.
    fn floor(&self, target: i64, key: impl Fn(&[u8]) -> i64) -> Option<usize> {
        let (mut lo, mut hi) = (0usize, self.entries);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if key(self.entry(mid)) <= target {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo.checked_sub(1)
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

pub struct OffsetIndex(MappedEntries<8>);

impl OffsetIndex {
    pub fn open(path: &Path, capacity: usize, trust: bool) -> io::Result<Self> {
        MappedEntries::open(path, capacity, trust, |e| u32_at(e, 0) as i64).map(OffsetIndex)
    }
    /// Records that the batch with relative offset `rel` starts at `pos`; false when full.
    pub fn append(&mut self, rel: u32, pos: u32) -> bool {
        let mut e = [0u8; 8];
        e[..4].copy_from_slice(&rel.to_be_bytes());
        e[4..].copy_from_slice(&pos.to_be_bytes());
        self.0.push(e)
    }
    /// Position of the last indexed batch whose relative offset is <= `rel` (0 if none).
    pub fn lookup(&self, rel: i64) -> u64 {
        match self.0.floor(rel, |e| u32_at(e, 0) as i64) {
            Some(i) => u32_at(self.0.entry(i), 4) as u64,
            None => 0,
        }
    }
    /// The last entry, (relative offset, position).
    pub fn last(&self) -> Option<(u32, u32)> {
        let n = self.0.len();
        (n > 0).then(|| {
            let e = self.0.entry(n - 1);
            (u32_at(e, 0), u32_at(e, 4))
        })
    }
    pub fn inner(&mut self) -> &mut MappedEntries<8> {
        &mut self.0
    }
    pub fn is_full(&self) -> bool {
        self.0.is_full()
    }
}

pub struct TimeIndex(MappedEntries<12>);

impl TimeIndex {
    pub fn open(path: &Path, capacity: usize, trust: bool) -> io::Result<Self> {
        MappedEntries::open(path, capacity, trust, |e| i64::from_be_bytes(e[..8].try_into().expect("8"))).map(TimeIndex)
    }
    pub fn append(&mut self, max_ts: i64, rel: u32) -> bool {
        if self.last().is_some_and(|(ts, _)| ts >= max_ts) {
            return true; // only increases are worth an entry
        }
        let mut e = [0u8; 12];
        e[..8].copy_from_slice(&max_ts.to_be_bytes());
        e[8..].copy_from_slice(&rel.to_be_bytes());
        self.0.push(e)
    }
    /// Relative offset from which to scan for the first batch with a timestamp >= `ts`: the
    /// last entry whose timestamp is < `ts` (its batch and those before it are all older).
    pub fn scan_start(&self, ts: i64) -> u32 {
        match self.0.floor(ts - 1, |e| i64::from_be_bytes(e[..8].try_into().expect("8"))) {
            Some(i) => u32_at(self.0.entry(i), 8),
            None => 0,
        }
    }
    pub fn last(&self) -> Option<(i64, u32)> {
        let n = self.0.len();
        (n > 0).then(|| {
            let e = self.0.entry(n - 1);
            (i64::from_be_bytes(e[..8].try_into().expect("8")), u32_at(e, 8))
        })
    }
    pub fn inner(&mut self) -> &mut MappedEntries<12> {
        &mut self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_finds_the_floor_entry() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = OffsetIndex::open(&dir.path().join("0.index"), 16, false).unwrap();
        assert_eq!(idx.lookup(5), 0);
        idx.append(0, 0);
        idx.append(10, 4096);
        idx.append(20, 8192);
        assert_eq!(idx.lookup(0), 0);
        assert_eq!(idx.lookup(9), 0);
        assert_eq!(idx.lookup(10), 4096);
        assert_eq!(idx.lookup(15), 4096);
        assert_eq!(idx.lookup(1000), 8192);
        assert_eq!(idx.last(), Some((20, 8192)));
    }

    #[test]
    fn a_trimmed_index_reopens_with_its_entries() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("0.index");
        let mut idx = OffsetIndex::open(&p, 100, false).unwrap();
        for i in 0..5 {
            idx.append(i * 3, i * 100);
        }
        idx.inner().trim().unwrap();
        drop(idx);
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 40);
        let idx = OffsetIndex::open(&p, 100, true).unwrap();
        assert_eq!(idx.last(), Some((12, 400)));
        assert_eq!(idx.lookup(7), 200);
        let sealed = OffsetIndex::open(&p, 0, true).unwrap();
        assert_eq!(sealed.last(), Some((12, 400)), "a sealed index keeps its entries");
        assert!(sealed.is_full());
        drop(sealed);
        let idx = OffsetIndex::open(&p, 100, false).unwrap();
        assert_eq!(idx.last(), None, "an untrusted index starts empty");
    }

    #[test]
    fn full_index_refuses_entries() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = OffsetIndex::open(&dir.path().join("0.index"), 2, false).unwrap();
        assert!(idx.append(0, 0));
        assert!(idx.append(1, 10));
        assert!(!idx.append(2, 20));
        assert!(idx.is_full());
    }

    #[test]
    fn time_index_scan_start_skips_older_batches() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = TimeIndex::open(&dir.path().join("0.timeindex"), 16, false).unwrap();
        t.append(100, 0);
        t.append(200, 10);
        t.append(150, 15); // not an increase: ignored
        t.append(300, 20);
        assert_eq!(t.scan_start(50), 0);
        assert_eq!(t.scan_start(150), 0);
        assert_eq!(t.scan_start(201), 10);
        assert_eq!(t.scan_start(1000), 20);
        assert_eq!(t.last(), Some((300, 20)));
    }
}
