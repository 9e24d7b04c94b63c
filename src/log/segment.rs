//! One segment of a partition log: `<base offset, 20 digits>.log` with its `.index` and
//! `.timeindex` (see `index.rs`). The `.log` holds record batches exactly as they were
//! produced (offsets patched), back to back, so a fetch can send file ranges unchanged.
//!
//! Roll rules (checked before each append, in `partition.rs`): a new segment starts when
//! the active one would pass `segment_bytes`, when its first batch was appended more than
//! `segment_ms` ago, or when its index is full. The new segment's base offset is the next
//! batch's offset.
//!
//! Preallocation: under a flush policy that syncs, the active segment's `.log` is written
//! with zeros a little past its last batch (`preallocation`), so that an append overwrites
//! blocks the file already has and its fdatasync writes the data alone. An append past the
//! end of the file makes the fdatasync allocate blocks and write the inode for the new size
//! too (ext4 without a journal writes the inode synchronously; with one, the size change
//! waits for a journal commit): measured on ext4 here, 16 KiB appends each followed by
//! fdatasync ran 1.4–1.6x as many per second into zeros written ahead, at two thirds of
//! the CPU. The zeros are cut off when the segment is sealed or closed (`trim`); a crash
//! leaves them for recovery, which cuts the log at the first byte that is not a whole batch.

use std::cell::Cell;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use super::index::{OffsetIndex, TimeIndex};
use crate::protocol::batch::{self, BatchHeader};
use crate::storage;

pub fn file_name(base: i64, ext: &str) -> String {
    format!("{base:020}.{ext}")
}

/// Parses `00000000000000000042.log` into 42.
pub fn parse_log_name(name: &str) -> Option<i64> {
    let digits = name.strip_suffix(".log")?;
    (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit())).then(|| digits.parse().ok())?
}

pub struct Segment {
    pub base_offset: i64,
    pub path: PathBuf,
    /// Read side, shared with in-flight fetch responses.
    pub file: Arc<File>,
    pub index: OffsetIndex,
    pub time_index: TimeIndex,
    /// Bytes written to the .log.
    pub size: Cell<u64>,
    /// Bytes covered by the high watermark: what fetches may read.
    pub committed: Cell<u64>,
    /// Offset after this segment's last batch.
    pub next_offset: Cell<i64>,
    pub max_timestamp: Cell<i64>,
    /// Log bytes since the last index entry.
    pub bytes_since_index: Cell<u64>,
    /// When the first batch was appended in this process (for `segment_ms`).
    pub first_append: Cell<Option<Instant>>,
    /// A random number drawn when the segment was opened: its share of `segment.jitter.ms`
    /// (see `roll_after_ms`).
    pub roll_seed: Cell<u64>,
    /// How far the file is written, zeros preallocated past the data included: at least
    /// `size` (see the module).
    pub allocated: Cell<u64>,
    /// Bytes before this were dropped from the page cache (`Partition::drop_cached_behind`).
    pub uncached: Cell<u64>,
}

/// The most offsets a segment spans past its base: its indexes hold 32-bit relative offsets,
/// and Kafka rolls (and groups cleaned segments) at the same bound.
pub const MAX_OFFSET_SPAN: i64 = i32::MAX as i64;

/// The least and the most a preallocation writes ahead of the data: ahead by an eighth of
/// what the segment holds, so an idle partition's file grows by little and a busy one's
/// fdatasyncs write its inode once per MiB.
const PREALLOCATE_MIN: u64 = 64 << 10;
const PREALLOCATE_MAX: u64 = 1 << 20;
const PAGE: u64 = 4096;

/// How long after its first append a segment is rolled by time: Kafka's `segment.ms` less a
/// jitter drawn per segment from [0, min(`segment.jitter.ms`, `segment.ms`)), so that logs
/// created together do not all roll at once.
pub fn roll_after_ms(segment_ms: u64, jitter_ms: u64, seed: u64) -> u64 {
    match jitter_ms.min(segment_ms) {
        0 => segment_ms,
        span => segment_ms - seed % span,
    }
}

/// A segment's random draw for its jitter: not guessable from the base offset alone, as
/// segments of many partitions start at the same offsets.
fn roll_seed(base: i64) -> u64 {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    crate::rng::SplitMix64::new(nanos ^ (base as u64).rotate_left(32)).next_u64()
}

/// What `Segment::next_with_records` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scan {
    /// The batch with records at this position.
    Found(u64, BatchHeader),
    /// Only batches without records up to this position: the segment's committed end, or
    /// where the budget ran out (it is then 0). A later scan goes on from here.
    Reached(u64),
    /// A header that does not parse: where the next batch starts is not known.
    Unreadable,
}

/// What a scan of a segment's batches found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ScanResult {
    /// Bytes of valid batches from the start of the file.
    pub valid_len: u64,
    pub batches: u64,
    pub next_offset: Option<i64>,
    pub max_timestamp: i64,
}

impl Segment {
    /// Whether `segment.ms`, less this segment's jitter, has passed since its first append in
    /// this process: time to roll it.
    pub fn roll_time_passed(&self, segment_ms: u64, jitter_ms: u64) -> bool {
        let after = roll_after_ms(segment_ms, jitter_ms, self.roll_seed.get());
        self.first_append.get().is_some_and(|t| t.elapsed() >= std::time::Duration::from_millis(after))
    }

    /// The time retention counts this segment's age from: its newest record's timestamp or,
    /// when no record has one (every timestamp -1, as v0 messages), when its file was last
    /// modified, as Kafka's `largestTimestamp`. None if neither is known.
    pub fn newest_time_ms(&self) -> Option<i64> {
        let ts = self.max_timestamp.get();
        if ts >= 0 {
            return Some(ts);
        }
        let modified = std::fs::metadata(&self.path).and_then(|m| m.modified()).ok()?;
        Some(modified.duration_since(std::time::UNIX_EPOCH).ok()?.as_millis() as i64)
    }

    pub fn index_capacity(segment_bytes: u64, index_interval: u32) -> usize {
        (segment_bytes / index_interval.max(1) as u64) as usize + 16
    }

    /// Opens or creates the segment files. With `trust_indexes`, index entries on disk are
    /// kept; otherwise they start empty and `rebuild` fills them.
    pub fn open(dir: &Path, base: i64, index_capacity: usize, trust_indexes: bool) -> io::Result<Segment> {
        let path = dir.join(file_name(base, "log"));
        let file = storage::open_rw(&path)?;
        let size = file.metadata()?.len();
        let index = OffsetIndex::open(&dir.join(file_name(base, "index")), index_capacity, trust_indexes)?;
        let time_index = TimeIndex::open(&dir.join(file_name(base, "timeindex")), index_capacity, trust_indexes)?;
        Ok(Segment {
            base_offset: base,
            path,
            file: Arc::new(file),
            index,
            time_index,
            size: Cell::new(size),
            committed: Cell::new(size),
            next_offset: Cell::new(base),
            max_timestamp: Cell::new(-1),
            bytes_since_index: Cell::new(0),
            first_append: Cell::new(None),
            roll_seed: Cell::new(roll_seed(base)),
            allocated: Cell::new(size),
            uncached: Cell::new(0),
        })
    }

    /// Reads `buf.len()` bytes of the .log at `pos`.
    pub fn read_at(&self, buf: &mut [u8], pos: u64) -> io::Result<()> {
        storage::read_exact_at(&self.file, &self.path, buf, pos)
    }

    /// Cuts the .log to `len` bytes (a torn tail, or a failed write's part that landed).
    pub fn truncate(&self, len: u64) -> io::Result<()> {
        storage::set_len(&self.file, &self.path, len)?;
        self.allocated.set(len);
        Ok(())
    }

    /// The zeros to write past the data, as a range of the file, once less than half of
    /// what a preallocation writes ahead is left: none past `segment_bytes` (where the
    /// segment rolls).
    pub fn preallocation(&self, segment_bytes: u64) -> Option<(u64, u64)> {
        let (size, allocated) = (self.size.get(), self.allocated.get());
        let ahead = (size / 8).clamp(PREALLOCATE_MIN, PREALLOCATE_MAX);
        if allocated >= size + ahead / 2 {
            return None;
        }
        let from = allocated.max(size);
        let to = (size + ahead).next_multiple_of(PAGE).min(segment_bytes);
        (to > from).then_some((from, to))
    }

    /// Whether the .log holds only zero bytes from `pos` to its end (a preallocated tail).
    pub fn zeros_from(&self, mut pos: u64) -> io::Result<bool> {
        let end = self.file.metadata()?.len();
        let mut buf = vec![0u8; (end.saturating_sub(pos)).min(1 << 20) as usize];
        while pos < end {
            let n = (end - pos).min(buf.len() as u64) as usize;
            self.read_at(&mut buf[..n], pos)?;
            if buf[..n].iter().any(|&b| b != 0) {
                return Ok(false);
            }
            pos += n as u64;
        }
        Ok(true)
    }

    /// `truncate`, then synced: for a cut that a crash must not undo (a torn tail, a
    /// divergent tail, a refused write's bytes).
    pub fn truncate_durably(&self, len: u64) -> io::Result<()> {
        self.truncate(len)?;
        storage::sync(&self.file, &self.path)
    }

    /// Cuts preallocated zeros off the .log, so the file ends with its last batch: before
    /// the segment is sealed or the log closed (a later open takes the file's length as the
    /// data's). The caller syncs after.
    pub fn trim(&self) -> io::Result<()> {
        let size = self.size.get();
        let meta = self.file.metadata()?;
        if meta.len() > size {
            self.truncate(size)?;
            // Cutting zeros writes no record: the file keeps the time it was last written,
            // which retention reads for records without timestamps (`newest_time_ms`).
            if let Ok(modified) = meta.modified() {
                self.file.set_modified(modified)?;
            }
        }
        Ok(())
    }

    /// Reads the header of the batch at `pos` (no CRC check), if one fits before `end`.
    pub fn header_at(&self, pos: u64, end: u64) -> io::Result<Option<BatchHeader>> {
        if pos + batch::HEADER_LEN as u64 > end {
            return Ok(None);
        }
        let mut h = [0u8; batch::HEADER_LEN];
        self.read_at(&mut h, pos)?;
        match batch::read_header(&h) {
            Ok(h) if pos + h.size as u64 <= end => Ok(Some(h)),
            _ => Ok(None),
        }
    }

    /// Notes a batch appended at `pos` in the indexes, every `interval` bytes.
    pub fn note_batch(&mut self, h: &BatchHeader, pos: u64, interval: u32) {
        let rel = (h.base_offset - self.base_offset) as u32;
        if self.bytes_since_index.get() >= interval as u64 || self.index.last().is_none() {
            if self.index.append(rel, pos as u32) {
                self.bytes_since_index.set(0);
            }
            let ts = self.max_timestamp.get().max(h.max_timestamp);
            self.time_index.append(ts, rel);
        }
        self.bytes_since_index.set(self.bytes_since_index.get() + h.size as u64);
        self.max_timestamp.set(self.max_timestamp.get().max(h.max_timestamp));
        self.next_offset.set(h.last_offset() + 1);
    }

    /// Scans batches from `from` (a batch boundary) to the end of the file, checking each
    /// fully (length, magic, CRC, count) when `verify`, indexing each, and stopping at the
    /// first invalid byte. Returns what was found; the caller truncates past `valid_len`.
    pub fn rebuild(&mut self, from: u64, verify: bool, interval: u32) -> io::Result<ScanResult> {
        let size = self.file.metadata()?.len();
        let mut pos = from;
        let mut res = ScanResult { valid_len: from, max_timestamp: -1, ..Default::default() };
        let mut buf = Vec::new();
        while pos + batch::LOG_OVERHEAD as u64 <= size {
            let mut pre = [0u8; batch::LOG_OVERHEAD];
            self.read_at(&mut pre, pos)?;
            let len = match batch::batch_size(&pre) {
                Some(Ok(len)) if pos + len as u64 <= size => len,
                _ => break,
            };
            let checked = if verify {
                buf.resize(len, 0);
                self.read_at(&mut buf, pos)?;
                batch::check_batch(&buf)
            } else {
                buf.resize(batch::HEADER_LEN.min(len), 0);
                self.read_at(&mut buf, pos)?;
                batch::read_header(&buf)
            };
            let Ok(h) = checked else { break };
            if res.next_offset.is_some_and(|n| h.base_offset < n) || h.base_offset < self.base_offset {
                break; // offsets must only grow: anything else is not ours
            }
            self.note_batch(&h, pos, interval);
            res.batches += 1;
            res.next_offset = Some(h.last_offset() + 1);
            res.max_timestamp = res.max_timestamp.max(h.max_timestamp);
            pos += len as u64;
            res.valid_len = pos;
        }
        Ok(res)
    }

    /// Position of the batch that contains `offset`, scanning from the index's floor entry;
    /// `None` when the offset lies past what is committed.
    pub fn find(&self, offset: i64) -> io::Result<Option<(u64, BatchHeader)>> {
        self.find_before(offset, self.committed.get())
    }

    /// `find` among the batches that end by byte `end` (the written size: what recovery
    /// reads, committed or not).
    pub fn find_before(&self, offset: i64, end: u64) -> io::Result<Option<(u64, BatchHeader)>> {
        let mut pos = self.index.lookup(offset - self.base_offset);
        while let Some(h) = self.header_at(pos, end)? {
            if h.last_offset() >= offset {
                return Ok(Some((pos, h)));
            }
            pos += h.size as u64;
        }
        Ok(None)
    }

    /// Looks for the first committed batch holding a record from byte `pos` on, reading at
    /// most `*budget` bytes (which it lowers) in large reads.
    pub fn next_with_records(&self, mut pos: u64, budget: &mut u64) -> io::Result<Scan> {
        const CHUNK: u64 = 64 << 10;
        let end = self.committed.get();
        let mut buf = Vec::new();
        while end.saturating_sub(pos) >= batch::HEADER_LEN as u64 {
            let n = (end - pos).min(CHUNK).min(*budget) as usize;
            if n < batch::HEADER_LEN {
                *budget = 0;
                return Ok(Scan::Reached(pos));
            }
            buf.resize(n, 0);
            self.read_at(&mut buf, pos)?;
            *budget -= n as u64;
            let mut at = 0;
            while at + batch::HEADER_LEN <= n {
                let Ok(h) = batch::read_header(&buf[at..]) else { return Ok(Scan::Unreadable) };
                if h.record_count > 0 {
                    return Ok(Scan::Found(pos + at as u64, h));
                }
                at += h.size;
            }
            pos += at as u64;
        }
        Ok(Scan::Reached(pos))
    }

    /// First committed batch whose max timestamp is >= `ts` among those holding an offset
    /// >= `from` (the log start: the batches wholly below it are deleted).
    pub fn find_by_time(&self, ts: i64, from: i64) -> io::Result<Option<BatchHeader>> {
        let end = self.committed.get();
        // Each index points at or before the batch sought: the scan starts at the later.
        let rel = i64::from(self.time_index.scan_start(ts)).max(from - self.base_offset);
        let mut pos = self.index.lookup(rel);
        while let Some(h) = self.header_at(pos, end)? {
            if h.max_timestamp >= ts && h.last_offset() >= from {
                return Ok(Some(h));
            }
            pos += h.size as u64;
        }
        Ok(None)
    }

    /// Trims index files to their entries and syncs them (clean close or roll).
    pub fn seal_indexes(&mut self) -> io::Result<()> {
        self.index.inner().trim()?;
        self.time_index.inner().trim()
    }

    /// Drops segments taken out of a log (cleaned, past retention, below the log start, or
    /// replaced by a snapshot) on the shard's closer thread (`storage::close_in_background`):
    /// their files' last close frees the pages a file has cached, 700 ms for 3 GB, and
    /// unmapping and closing their indexes took another 25 ms for the 47 segments of a
    /// cleaning. Fetches in flight hold handles of their own and keep reading.
    pub fn retire(segments: impl IntoIterator<Item = Segment>) {
        storage::close_in_background(segments.into_iter().collect());
    }

    pub fn remove_files(&self) -> io::Result<()> {
        for ext in ["log", "index", "timeindex"] {
            storage::remove_file(&self.path.with_extension(ext))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::FileExt;

    #[test]
    fn a_segments_time_roll_comes_up_to_its_jitter_before_segment_ms() {
        assert_eq!(roll_after_ms(1000, 0, 12345), 1000, "no jitter");
        let spread: Vec<u64> = (0..200u64).map(|seed| roll_after_ms(1000, 300, seed * 7)).collect();
        assert!(spread.iter().all(|a| (701..=1000).contains(a)), "within segment.ms - jitter: {spread:?}");
        assert!(spread.iter().any(|a| *a < 800) && spread.iter().any(|a| *a > 900), "spread out");
        assert!((0..50).all(|seed| roll_after_ms(100, 10_000, seed) >= 1), "the jitter is capped by segment.ms");

        let dir = tempfile::tempdir().unwrap();
        let seg = Segment::open(dir.path(), 0, 16, false).unwrap();
        let other = Segment::open(dir.path(), 100, 16, false).unwrap();
        assert_ne!(seg.roll_seed.get(), other.roll_seed.get(), "each segment draws its own");
        seg.first_append.set(Some(Instant::now() - std::time::Duration::from_millis(50)));
        seg.roll_seed.set(59_990); // 60 s less 59.99 s: due 10 ms after the first append
        assert!(!seg.roll_time_passed(60_000, 0), "segment.ms alone is a minute away");
        assert!(seg.roll_time_passed(60_000, 60_000), "its jitter brings the roll forward");
        seg.roll_seed.set(0);
        assert!(!seg.roll_time_passed(60_000, 60_000), "a draw of 0 takes nothing off");
    }

    fn write_batches(seg: &Segment, n: usize, base: i64) -> Vec<u64> {
        let mut positions = Vec::new();
        let mut f = &*seg.file;
        for i in 0..n {
            positions.push(f.metadata().unwrap().len());
            let mut b = batch::build(1000 + i as i64, &[b"one", b"two"]);
            batch::patch(&mut b, base + 2 * i as i64, 0);
            f.write_all(&b).unwrap();
        }
        positions
    }

    #[test]
    fn names_round_trip() {
        assert_eq!(file_name(42, "log"), "00000000000000000042.log");
        assert_eq!(parse_log_name("00000000000000000042.log"), Some(42));
        assert_eq!(parse_log_name("42.log"), None);
        assert_eq!(parse_log_name("00000000000000000042.index"), None);
    }

    #[test]
    fn preallocation_keeps_ahead_of_the_data_within_the_segment() {
        let dir = tempfile::tempdir().unwrap();
        let seg = Segment::open(dir.path(), 0, 16, false).unwrap();
        seg.size.set(1000);
        assert_eq!(seg.preallocation(1 << 30), Some((1000, 69632)), "64 KiB ahead, to a page");
        seg.allocated.set(69632);
        assert_eq!(seg.preallocation(1 << 30), None, "more than half of it is left");
        seg.size.set(40_000);
        assert_eq!(seg.preallocation(1 << 30), Some((69632, 106496)), "refilled from where it ends");
        seg.size.set(80 << 20);
        seg.allocated.set(80 << 20);
        assert_eq!(seg.preallocation(1 << 30), Some((80 << 20, 81 << 20)), "at most 1 MiB ahead");
        assert_eq!(seg.preallocation((80 << 20) + 100), Some((80 << 20, (80 << 20) + 100)), "never past the roll");
        assert_eq!(seg.preallocation(80 << 20), None);
    }

    #[test]
    fn trim_cuts_zeros_after_the_data() {
        let dir = tempfile::tempdir().unwrap();
        let seg = Segment::open(dir.path(), 100, 64, false).unwrap();
        let pos = write_batches(&seg, 3, 100);
        let end = seg.file.metadata().unwrap().len();
        seg.size.set(end);
        assert!(seg.zeros_from(end).unwrap(), "nothing after the end");
        seg.file.write_all_at(&[0u8; 5000], end).unwrap();
        assert!(seg.zeros_from(end).unwrap());
        assert!(!seg.zeros_from(pos[2]).unwrap(), "a batch is not zeros");
        seg.trim().unwrap();
        assert_eq!(seg.file.metadata().unwrap().len(), end);
        assert_eq!(seg.allocated.get(), end);
    }

    #[test]
    fn rebuild_indexes_and_finds_offsets() {
        let dir = tempfile::tempdir().unwrap();
        let mut seg = Segment::open(dir.path(), 100, 64, false).unwrap();
        let pos = write_batches(&seg, 10, 100);
        let r = seg.rebuild(0, true, 1).unwrap();
        assert_eq!(r.batches, 10);
        assert_eq!(r.next_offset, Some(120));
        seg.committed.set(r.valid_len);
        assert_eq!(seg.find(100).unwrap().unwrap().0, pos[0]);
        assert_eq!(seg.find(105).unwrap().unwrap().0, pos[2]);
        assert_eq!(seg.find(119).unwrap().unwrap().0, pos[9]);
        assert!(seg.find(120).unwrap().is_none());
        assert_eq!(seg.find_by_time(1004, 100).unwrap().unwrap().base_offset, 108);
        assert!(seg.find_by_time(5000, 100).unwrap().is_none());
        assert_eq!(seg.find_by_time(1004, 112).unwrap().unwrap().base_offset, 112, "none before `from`");
        assert_eq!(seg.find_by_time(1000, 111).unwrap().unwrap().base_offset, 110, "the batch holding it");
    }

    #[test]
    fn a_torn_or_corrupt_tail_stops_the_scan_at_the_last_valid_batch() {
        let dir = tempfile::tempdir().unwrap();
        let mut seg = Segment::open(dir.path(), 0, 64, false).unwrap();
        let pos = write_batches(&seg, 5, 0);
        // torn: half of a sixth batch
        let b = batch::build(1, &[b"torn"]);
        (&*seg.file).write_all(&b[..b.len() / 2]).unwrap();
        let r = seg.rebuild(0, true, 4096).unwrap();
        assert_eq!(r.batches, 5);
        assert_eq!(r.next_offset, Some(10));
        let full = seg.file.metadata().unwrap().len();
        assert!(r.valid_len < full);

        // corrupt: flip a byte inside the fourth batch's records
        let mut seg = Segment::open(dir.path(), 0, 64, false).unwrap();
        seg.file.write_at(&[0xAA], pos[3] + 70).unwrap();
        let r = seg.rebuild(0, true, 4096).unwrap();
        assert_eq!(r.batches, 3);
        assert_eq!(r.valid_len, pos[3]);
    }

    /// A batch the cleaner emptied: its header alone, holding no record.
    fn emptied(base: i64) -> Vec<u8> {
        let mut b = batch::build(1000, &[b"gone"]);
        batch::patch(&mut b, base, 0);
        b.truncate(batch::HEADER_LEN);
        b[8..12].copy_from_slice(&(batch::HEADER_LEN as i32 - 12).to_be_bytes());
        b[57..61].copy_from_slice(&0i32.to_be_bytes());
        b
    }

    #[test]
    fn next_with_records_steps_over_emptied_batches_and_stops_where_it_cannot_tell() {
        let dir = tempfile::tempdir().unwrap();
        let seg = Segment::open(dir.path(), 0, 64, false).unwrap();
        let mut f = &*seg.file;
        for i in 0..3 {
            f.write_all(&emptied(i)).unwrap();
        }
        let with_records = write_batches(&seg, 1, 3)[0];
        f.write_all(&emptied(5)).unwrap();
        let end = f.metadata().unwrap().len();
        seg.committed.set(end);
        let header = batch::HEADER_LEN as u64;

        let mut budget = 1 << 20;
        let Scan::Found(at, h) = seg.next_with_records(0, &mut budget).unwrap() else { panic!("no batch found") };
        assert_eq!((at, h.base_offset, h.record_count), (with_records, 3, 2));
        assert!(budget < 1 << 20, "what it read counts");
        let mut budget = 1 << 20;
        let past = with_records + h.size as u64;
        assert_eq!(seg.next_with_records(past, &mut budget).unwrap(), Scan::Reached(end), "only emptied batches");
        assert!(budget > 0, "the caller may look on in the next segment");
        // A budget of two headers stops after them; the next scan goes on from there.
        let mut budget = 2 * header + 10;
        assert_eq!(seg.next_with_records(0, &mut budget).unwrap(), Scan::Reached(2 * header));
        assert_eq!(budget, 0);
        let mut budget = 1 << 20;
        assert!(
            matches!(seg.next_with_records(2 * header, &mut budget).unwrap(), Scan::Found(at, _) if at == with_records)
        );

        seg.file.write_at(&[0xFF; 12], 2 * header).unwrap();
        let mut budget = 1 << 20;
        assert_eq!(seg.next_with_records(0, &mut budget).unwrap(), Scan::Unreadable);
    }
}
