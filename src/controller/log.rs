//! The metadata log on disk: `metadata.log` in the data directory, one JSON line per commit
//! (`{"index": N, "records": [...]}`), each made durable (fdatasync) before the commit is
//! applied or answered. A commit is one line, so a crash keeps all of its records or none: a
//! torn last line is cut at the next open. The catalog file (`catalog.json`) is the
//! snapshot: it records the index of the last entry it includes (`applied`), so replay
//! starts after it; once the log holds `SNAPSHOT_EVERY` commits the controller writes a new
//! snapshot and empties the log. Every file call goes through `storage`.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::records::Record;
use crate::storage;

pub const LOG_FILE: &str = "metadata.log";
/// Commits kept in the log before a snapshot replaces them.
pub const SNAPSHOT_EVERY: usize = 256;

/// One commit: the records of one request, applied together or not at all.
#[derive(Serialize, Deserialize)]
pub struct Entry {
    pub index: u64,
    pub records: Vec<Record>,
}

pub struct MetadataLog {
    path: PathBuf,
    file: File,
    /// Bytes of whole entries in the file.
    len: u64,
    /// Entries in the file.
    entries: usize,
    /// The index the next commit gets.
    next: u64,
}

impl MetadataLog {
    /// Opens the log in `dir` and returns it with the entries after `applied`, in order. A
    /// torn or unreadable tail (a crash in the middle of an append) is cut.
    pub fn open(dir: &Path, applied: u64) -> io::Result<(MetadataLog, Vec<Entry>)> {
        let path = dir.join(LOG_FILE);
        let bytes = storage::read(&path)?.unwrap_or_default();
        let mut after = Vec::new();
        let (mut len, mut entries, mut next) = (0u64, 0usize, applied + 1);
        for line in bytes.split_inclusive(|b| *b == b'\n') {
            let Some(body) = line.strip_suffix(b"\n") else { break }; // torn: no line end
            let Ok(e) = serde_json::from_slice::<Entry>(body) else { break };
            len += line.len() as u64;
            entries += 1;
            if e.index > applied {
                next = e.index + 1;
                after.push(e);
            }
        }
        // Owner-only, as the catalog: the records carry SCRAM keys.
        let file = storage::open_private(&path)?;
        if len < bytes.len() as u64 {
            tracing::warn!(path = %path.display(), kept = len, dropped = bytes.len() as u64 - len, "cutting a torn metadata log tail");
            storage::set_len(&file, &path, len)?;
            storage::sync(&file, &path)?;
        }
        Ok((MetadataLog { path, file, len, entries, next }, after))
    }

    /// Appends one commit durably; returns its index.
    pub fn append(&mut self, records: &[Record]) -> io::Result<u64> {
        let index = self.next;
        let mut line = serde_json::to_vec(&Entry { index, records: records.to_vec() }).map_err(io::Error::other)?;
        line.push(b'\n');
        if let Err(e) = storage::write_at(&self.file, &self.path, &line, self.len) {
            // Whatever part landed is cut, so the log ends on a whole entry.
            let _ = storage::set_len(&self.file, &self.path, self.len);
            return Err(e);
        }
        storage::sync(&self.file, &self.path)?;
        self.len += line.len() as u64;
        self.entries += 1;
        self.next = index + 1;
        Ok(index)
    }

    /// Whether the log holds enough commits to be replaced by a snapshot.
    pub fn wants_snapshot(&self) -> bool {
        self.entries >= SNAPSHOT_EVERY
    }

    /// Empties the log once a snapshot covers every entry in it.
    pub fn truncate(&mut self) -> io::Result<()> {
        storage::set_len(&self.file, &self.path, 0)?;
        storage::sync(&self.file, &self.path)?;
        self.len = 0;
        self.entries = 0;
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.entries
    }

    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }
}
