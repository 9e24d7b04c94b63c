//! A node's fake disk: one log file of Kafka batches and the replica's state file. A write
//! lands in the "page cache" (`current`, which reads see) at once and becomes durable at the
//! next sync; several may wait for one sync, as the broker's queued writes do. A crash before
//! it loses them, or tears them: in order, each write's state file (written and fsynced
//! first) and cut survive with a prefix of its batches, and a later write's only if every
//! batch before it did. The synced state is all a restarted node gets back.
//!
//! Retention moving the log start only rewrites the state file (`compacted`): the batches
//! below stay in the file, as segments a crash kept from being deleted would, and recovery
//! skips them. Installing a leader's snapshot empties the file (before the state is written,
//! as the broker does; both survive a crash that tears the batches after them).

use std::cell::RefCell;
use std::io;
use std::rc::Rc;

use bytes::Bytes;

use crate::cluster::meta::RaftMeta;
use crate::cluster::replica::Write;
use crate::cluster::store::{BatchReader, Loc};
use crate::protocol::batch;

/// The file as reads see it, shared with the replica's store.
#[derive(Default)]
pub(super) struct File(RefCell<Vec<u8>>);

impl BatchReader for File {
    fn read(&self, loc: Loc, len: u32) -> io::Result<Bytes> {
        let f = self.0.borrow();
        let at = loc.pos as usize;
        let b = f.get(at..at + len as usize).ok_or_else(|| io::Error::other("read past the end of the log"))?;
        Ok(Bytes::copy_from_slice(b))
    }
}

struct Pending {
    /// A snapshot's install: the log emptied first, and the producer state at its start.
    reset: Option<Bytes>,
    cut: Option<usize>,
    batches: Vec<Bytes>,
    meta: Option<RaftMeta>,
}

pub(super) struct Disk {
    synced: Vec<u8>,
    meta: RaftMeta,
    /// The producer state at the log start (the broker's `raft-start-<index>.producers`).
    start_producers: Bytes,
    pub(super) current: Rc<File>,
    /// Writes since the last sync, oldest first.
    pending: Vec<Pending>,
}

impl Disk {
    pub(super) fn new(voters: &[u64]) -> Disk {
        Disk {
            synced: Vec::new(),
            meta: RaftMeta::initial(voters.to_vec()),
            start_producers: Bytes::new(),
            current: Rc::default(),
            pending: Vec::new(),
        }
    }

    /// Applies `w` to the page cache; returns where its batches landed.
    pub(super) fn write(&mut self, w: &Write) -> Vec<Loc> {
        let mut f = self.current.0.borrow_mut();
        let reset = w.install.as_ref().map(|state| state.producers.clone());
        if reset.is_some() {
            f.clear();
        }
        let cut = w.truncate.map(|offset| position_of(&f, offset));
        if let Some(at) = cut {
            f.truncate(at);
        }
        let mut locs = Vec::with_capacity(w.batches.len());
        for b in &w.batches {
            locs.push(Loc { segment: 0, pos: f.len() as u64 });
            f.extend_from_slice(b);
        }
        self.pending.push(Pending { reset, cut, batches: w.batches.clone(), meta: w.meta.clone() });
        locs
    }

    /// Batches written since the last sync.
    pub(super) fn pending_batches(&self) -> usize {
        self.pending.iter().map(|p| p.batches.len()).sum()
    }

    pub(super) fn sync(&mut self) {
        self.crash_keeping(usize::MAX);
    }

    /// Loses what was written since the last sync but the first `keep` batches, with the
    /// state files and cuts of the writes that reach them (see the module).
    pub(super) fn crash(&mut self, keep: usize) {
        self.crash_keeping(keep);
        *self.current.0.borrow_mut() = self.synced.clone();
    }

    fn crash_keeping(&mut self, mut keep: usize) {
        for p in std::mem::take(&mut self.pending) {
            let whole = p.batches.len() <= keep;
            keep -= apply(self, p, keep);
            if !whole {
                break;
            }
        }
    }

    pub(super) fn meta(&self) -> &RaftMeta {
        &self.meta
    }

    pub(super) fn start_producers(&self) -> &Bytes {
        &self.start_producers
    }

    /// Retention moved the log start: the producer state there and the state file naming it
    /// are written durably at once.
    pub(super) fn compacted(&mut self, meta: RaftMeta, producers: Bytes) {
        assert!(self.pending.is_empty(), "compacting with a write pending");
        self.meta = meta;
        self.start_producers = producers;
    }

    /// Where the synced log starts for the replica (batches below are skipped).
    pub(super) fn start_offset(&self) -> i64 {
        self.meta.log_start.offset
    }

    /// The synced log as recovery scans it: each batch's location and bytes.
    pub(super) fn scan(&self) -> Vec<(Loc, Bytes)> {
        assert!(self.pending.is_empty(), "recovering with a write pending");
        let mut out = Vec::new();
        let mut pos = 0;
        while pos < self.synced.len() {
            let size = batch::read_header(&self.synced[pos..]).expect("the simulation writes whole batches").size;
            out.push((Loc { segment: 0, pos: pos as u64 }, Bytes::copy_from_slice(&self.synced[pos..pos + size])));
            pos += size;
        }
        out
    }

    /// Where each synced batch starts, by its base offset.
    pub(super) fn positions(&self) -> std::collections::HashMap<i64, usize> {
        self.scan()
            .into_iter()
            .map(|(loc, b)| (batch::read_header(&b).expect("whole").base_offset, loc.pos as usize))
            .collect()
    }

    /// The synced log's bytes from the batch at `from` up to (not including) the one at `to`.
    pub(super) fn bytes_between(&self, from: i64, to: i64) -> &[u8] {
        &self.synced[position_of(&self.synced, from)..position_of(&self.synced, to)]
    }
}

/// Applies `p` to the synced state with at most `keep` of its batches; returns how many.
fn apply(disk: &mut Disk, p: Pending, keep: usize) -> usize {
    if let Some(producers) = p.reset {
        disk.synced.clear();
        disk.start_producers = producers;
    }
    if let Some(m) = p.meta {
        disk.meta = m;
    }
    if let Some(at) = p.cut {
        disk.synced.truncate(at);
    }
    let kept = p.batches.len().min(keep);
    for b in &p.batches[..kept] {
        disk.synced.extend_from_slice(b);
    }
    kept
}

/// Where the batch at `offset` starts (or the end, if the log ends before it).
fn position_of(log: &[u8], offset: i64) -> usize {
    let mut pos = 0;
    while pos < log.len() {
        let h = batch::read_header(&log[pos..]).expect("whole batches");
        if h.last_offset() >= offset {
            break;
        }
        pos += h.size;
    }
    pos
}
