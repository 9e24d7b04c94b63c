//! A node's fake disk. A Ready's writes are pending until the sync that ends its handling; a
//! crash before that sync loses them, or tears them (keeps a prefix of the entries, the old
//! hard state). The synced state is all a restarted node gets back.

use raft::prelude::{ConfState, Entry, HardState};
use raft::storage::MemStorage;

struct Pending {
    entries: Vec<Entry>,
    hard_state: Option<HardState>,
}

pub(super) struct Disk {
    /// Synced entries; the log starts at index 1 (the simulation never compacts).
    entries: Vec<Entry>,
    hard_state: HardState,
    pending: Option<Pending>,
}

impl Disk {
    pub(super) fn new() -> Disk {
        Disk { entries: Vec::new(), hard_state: HardState::default(), pending: None }
    }

    pub(super) fn write(&mut self, entries: &[Entry], hard_state: Option<&HardState>) {
        assert!(self.pending.is_none(), "a write is already pending");
        self.pending = Some(Pending { entries: entries.to_vec(), hard_state: hard_state.cloned() });
    }

    pub(super) fn pending_entries(&self) -> usize {
        self.pending.as_ref().map_or(0, |p| p.entries.len())
    }

    pub(super) fn sync(&mut self) {
        if let Some(p) = self.pending.take() {
            append(&mut self.entries, &p.entries);
            if let Some(hs) = p.hard_state {
                self.hard_state = hs;
            }
        }
    }

    /// Loses the pending write except its first `keep` entries. The overwrite of a conflicting
    /// suffix is kept even when no new entry is: truncating first is what a real log does.
    pub(super) fn crash(&mut self, keep: usize) {
        if let Some(p) = self.pending.take() {
            if !p.entries.is_empty() {
                let first = p.entries[0].index;
                self.entries.truncate(first as usize - 1);
                append(&mut self.entries, &p.entries[..keep.min(p.entries.len())]);
            }
        }
    }

    pub(super) fn hard_state(&self) -> &HardState {
        &self.hard_state
    }

    /// What a restarted node's raft storage holds: exactly the synced state.
    pub(super) fn recover(&self, voters: &[u64]) -> MemStorage {
        assert!(self.pending.is_none(), "recovering with a write pending");
        let store = MemStorage::new_with_conf_state(ConfState::from((voters.to_vec(), vec![])));
        let mut core = store.wl();
        core.append(&self.entries).expect("synced entries are contiguous");
        core.set_hardstate(self.hard_state.clone());
        drop(core);
        store
    }
}

/// raft's append: the new entries replace everything from their first index on.
fn append(log: &mut Vec<Entry>, entries: &[Entry]) {
    let Some(first) = entries.first() else { return };
    let at = first.index as usize - 1;
    assert!(at <= log.len(), "append at {} leaves a gap after {}", first.index, log.len());
    log.truncate(at);
    log.extend_from_slice(entries);
}
