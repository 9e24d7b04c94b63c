//! A node's fake disk: one log file of Kafka batches and the replica's state file. A write
//! lands in the "page cache" (`current`, which reads see) at once and becomes durable at the
//! sync that ends its handling; a crash before that sync loses it, or tears it: the state
//! file (written and fsynced first) and the cut survive with a prefix of the batches. The
//! synced state is all a restarted node gets back.
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
    /// A snapshot's install: the log emptied first.
    reset: bool,
    cut: Option<usize>,
    batches: Vec<Bytes>,
    meta: Option<RaftMeta>,
}

pub(super) struct Disk {
    synced: Vec<u8>,
    meta: RaftMeta,
    pub(super) current: Rc<File>,
    pending: Option<Pending>,
}

impl Disk {
    pub(super) fn new(voters: &[u64]) -> Disk {
        Disk { synced: Vec::new(), meta: RaftMeta::initial(voters.to_vec()), current: Rc::default(), pending: None }
    }

    /// Applies `w` to the page cache; returns where its batches landed.
    pub(super) fn write(&mut self, w: &Write) -> Vec<Loc> {
        assert!(self.pending.is_none(), "a write is already pending");
        let mut f = self.current.0.borrow_mut();
        let reset = w.install.is_some();
        if reset {
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
        self.pending = Some(Pending { reset, cut, batches: w.batches.clone(), meta: w.meta.clone() });
        locs
    }

    pub(super) fn pending_batches(&self) -> usize {
        self.pending.as_ref().map_or(0, |p| p.batches.len())
    }

    pub(super) fn sync(&mut self) {
        if let Some(p) = self.pending.take() {
            apply(&mut self.synced, &mut self.meta, p, usize::MAX);
        }
    }

    /// Loses the pending write except its state file, its cut and its first `keep` batches.
    pub(super) fn crash(&mut self, keep: usize) {
        if let Some(p) = self.pending.take() {
            apply(&mut self.synced, &mut self.meta, p, keep);
        }
        *self.current.0.borrow_mut() = self.synced.clone();
    }

    pub(super) fn meta(&self) -> &RaftMeta {
        &self.meta
    }

    /// Retention moved the log start: the state file naming it is written durably at once.
    pub(super) fn compacted(&mut self, meta: RaftMeta) {
        assert!(self.pending.is_none(), "compacting with a write pending");
        self.meta = meta;
    }

    /// Where the synced log starts for the replica (batches below are skipped).
    pub(super) fn start_offset(&self) -> i64 {
        self.meta.log_start.offset
    }

    /// The synced log as recovery scans it: each batch's location and bytes.
    pub(super) fn scan(&self) -> Vec<(Loc, Bytes)> {
        assert!(self.pending.is_none(), "recovering with a write pending");
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

fn apply(synced: &mut Vec<u8>, meta: &mut RaftMeta, p: Pending, keep: usize) {
    if p.reset {
        synced.clear();
    }
    if let Some(m) = p.meta {
        *meta = m;
    }
    if let Some(at) = p.cut {
        synced.truncate(at);
    }
    for b in p.batches.iter().take(keep) {
        synced.extend_from_slice(b);
    }
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
