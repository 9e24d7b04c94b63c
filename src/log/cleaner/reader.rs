//! An old segment's batches as a cleaning reads them: through one aligned buffer filled by
//! large O_DIRECT reads (`storage::open_direct`), each batch checked (its CRC) and lent out
//! in place. Before, each batch was read twice (its length, then itself) into a fresh buffer
//! through the page cache: the kernel's copy, the allocation and the check streamed every
//! byte through the CPU three times per pass, on the core its shard serves from; that
//! streaming is the likeliest reason the shard's own work got slower while a cleaning ran
//! (bench/results/2026-12-03-compaction.md: 70% more CPU for the same requests). Now the
//! device writes the buffer and the CPU reads each byte once, in the check; the page cache
//! the shard's fetches use is untouched. `bench/run.sh compaction` reports the shard's CPU
//! per record and the cleaner's CPU per GB to tell.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use crate::log::segment;
use crate::protocol::batch::{self, BatchHeader};
use crate::storage;

/// O_DIRECT wants positions, lengths and buffers aligned to the logical block size: 4 KiB
/// covers every device's.
const ALIGN: usize = 4096;
/// Bytes read at a time (more when a batch is larger).
const CHUNK: usize = 1 << 20;

/// How much of each batch `Batches::next` checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Check {
    /// Framing and CRC: for the pass that writes what it read.
    Crc,
    /// Framing only, the header alone. The key map's pass: every batch it reads is checked
    /// with its CRC before the new segments can replace the old ones (by the writing pass,
    /// or on its own for a segment not rewritten: `pass::run`), so a corrupt batch still
    /// fails the cleaning; without the CRC the map's pass reads the records' headers and
    /// keys, not every byte of every value, and leaves the shard's core's caches to the shard.
    Framing,
}

pub(super) struct Batches {
    file: File,
    pub(super) path: PathBuf,
    size: u64,
    /// Where the next batch starts.
    pub(super) pos: u64,
    /// The buffer; its aligned part starts at `at` and is `cap` long.
    buf: Vec<u8>,
    at: usize,
    cap: usize,
    /// The file's bytes [`win`, `win` + `len`) are in the aligned part.
    win: u64,
    len: usize,
    /// The last batch `next` returned, as a range of the aligned part.
    current: (usize, usize),
    check: Check,
}

impl Batches {
    pub(super) fn open(dir: &Path, base: i64, check: Check) -> io::Result<Batches> {
        let path = dir.join(segment::file_name(base, "log"));
        let file = storage::open_direct(&path)?;
        let size = file.metadata()?.len();
        let mut b = Batches {
            file,
            path,
            size,
            pos: 0,
            buf: Vec::new(),
            at: 0,
            cap: 0,
            win: 0,
            len: 0,
            current: (0, 0),
            check,
        };
        b.grow(CHUNK);
        Ok(b)
    }

    fn grow(&mut self, cap: usize) {
        self.buf = vec![0u8; cap + ALIGN];
        self.at = self.buf.as_ptr().align_offset(ALIGN);
        self.cap = cap;
        self.len = 0;
    }

    fn window(&self) -> &[u8] {
        &self.buf[self.at..self.at + self.len]
    }

    /// Makes the file's bytes [`pos`, `pos` + `n`) be in the window.
    fn fill(&mut self, pos: u64, n: usize) -> io::Result<()> {
        if pos >= self.win && pos + n as u64 <= self.win + self.len as u64 {
            return Ok(());
        }
        let start = pos - pos % ALIGN as u64;
        let need = (pos - start) as usize + n;
        if need > self.cap {
            self.grow(need.next_multiple_of(ALIGN));
        }
        let (at, cap) = (self.at, self.cap);
        let mut len = 0;
        // Whole aligned reads; one that comes back short is the end of the file.
        while len < need {
            let got = storage::read_at(&self.file, &self.path, &mut self.buf[at + len..at + cap], start + len as u64)?;
            len += got;
            if got == 0 || len % ALIGN != 0 {
                break;
            }
        }
        (self.win, self.len) = (start, len);
        if len < need {
            return Err(corrupt(&self.path, pos, "a batch runs past the end of a sealed segment"));
        }
        Ok(())
    }

    /// The next batch's header, checked as `check` says; its bytes are `batch()` until the
    /// next call.
    pub(super) fn next(&mut self) -> io::Result<Option<BatchHeader>> {
        if self.pos + batch::LOG_OVERHEAD as u64 > self.size {
            return Ok(None);
        }
        self.fill(self.pos, batch::LOG_OVERHEAD)?;
        let off = (self.pos - self.win) as usize;
        let len = match batch::batch_size(&self.window()[off..]) {
            Some(Ok(len)) if self.pos + len as u64 <= self.size => len,
            _ => return Err(corrupt(&self.path, self.pos, "a batch runs past the end of a sealed segment")),
        };
        self.fill(self.pos, len)?;
        let off = (self.pos - self.win) as usize;
        let bytes = &self.window()[off..off + len];
        let h = match self.check {
            Check::Crc => batch::check_batch(bytes),
            Check::Framing => batch::check_framing(bytes),
        }
        .map_err(|e| corrupt(&self.path, self.pos, &e.to_string()))?;
        self.current = (off, off + len);
        self.pos += len as u64;
        Ok(Some(h))
    }

    /// The bytes of the batch `next` returned last.
    pub(super) fn batch(&self) -> &[u8] {
        &self.window()[self.current.0..self.current.1]
    }
}

pub(super) fn corrupt(path: &Path, pos: u64, why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("{} at byte {pos}: {why}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A segment of `n` batches of growing sizes, one of them larger than a read.
    fn segment(dir: &Path, n: usize) -> Vec<Vec<u8>> {
        let mut all = Vec::new();
        let mut file = Vec::new();
        for i in 0..n {
            let value = vec![b'x'; if i == n / 2 { CHUNK + 3 * ALIGN } else { 100 + i * 37 }];
            let mut b = batch::build(1_000, &[&value[..]]);
            batch::patch(&mut b, i as i64, 0);
            file.extend_from_slice(&b);
            all.push(b);
        }
        std::fs::write(dir.join(segment::file_name(0, "log")), &file).unwrap();
        all
    }

    #[test]
    fn every_batch_comes_back_whole_across_reads_and_a_batch_larger_than_one() {
        let dir = tempfile::tempdir().unwrap();
        let want = segment(dir.path(), 3_000);
        let mut r = Batches::open(dir.path(), 0, Check::Crc).unwrap();
        let mut got = Vec::new();
        while let Some(h) = r.next().unwrap() {
            assert_eq!(h.size, r.batch().len());
            got.push(r.batch().to_vec());
        }
        assert_eq!(got.len(), want.len());
        assert!(got == want, "the batches, byte for byte");
    }

    #[test]
    fn a_torn_or_corrupt_batch_is_an_error_naming_where() {
        let dir = tempfile::tempdir().unwrap();
        segment(dir.path(), 10);
        let path = dir.path().join(segment::file_name(0, "log"));
        let mut bytes = std::fs::read(&path).unwrap();
        let len = bytes.len();
        bytes[len - 5] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        let mut r = Batches::open(dir.path(), 0, Check::Crc).unwrap();
        let err = loop {
            match r.next() {
                Ok(Some(_)) => continue,
                Ok(None) => panic!("the corrupt batch was read"),
                Err(e) => break e,
            }
        };
        assert!(err.to_string().contains("crc") || err.to_string().contains("CRC"), "{err}");
        // Framing alone reads past it: the headers are intact.
        let mut r = Batches::open(dir.path(), 0, Check::Framing).unwrap();
        let n = std::iter::from_fn(|| r.next().unwrap()).count();
        assert_eq!(n, 10);
        std::fs::write(&path, &bytes[..len - 5]).unwrap();
        let mut r = Batches::open(dir.path(), 0, Check::Crc).unwrap();
        let err = std::iter::from_fn(|| Some(r.next())).find_map(Result::err).unwrap();
        assert!(err.to_string().contains("runs past the end"), "{err}");
    }
}
