//! One cleaning of one partition, the part that reads and writes files: it runs on a
//! cleaner thread of the shard's own (`shard::cleaning`), so the shard goes on serving. It
//! reads only inactive segments, which appends never touch; it builds the key map over the
//! dirty part, then writes each group of old segments as one new segment (log and indexes,
//! fsynced) into `cleaner.tmp/` beside them. Replacing the old segments is the shard's
//! business (`swap`), once it has checked that they are all still there.

use std::collections::HashSet;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::filter::{self, Counts, Kept, Rules};
use super::keymap::KeyMap;
use super::reader::{corrupt, Batches, Check};
use crate::log::segment::{self, Segment};
use crate::protocol::batch;
use crate::storage;

/// Where a cleaning writes its new segments, inside the partition's directory.
pub const TMP_DIR: &str = "cleaner.tmp";

/// Bytes written to a new segment at a time.
const WRITE_CHUNK: usize = 1 << 20;

/// An old segment the cleaning may read: its base offset and size when planned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OldSegment {
    pub base: i64,
    pub size: u64,
    /// The offset after its last (the next segment's base).
    pub end: i64,
}

/// Everything a cleaning needs, plain data (it crosses to the cleaner thread).
#[derive(Debug, Clone)]
pub struct Job {
    pub dir: PathBuf,
    pub topic: String,
    pub partition: i32,
    /// The cleanable segments, oldest first: inactive, wholly committed, old enough.
    pub segments: Vec<OldSegment>,
    /// Offsets below are clean: a cleaning has already kept only their latest values.
    pub first_dirty: i64,
    /// The offset the cleanable segments end at (the next one's base).
    pub end: i64,
    pub log_start: i64,
    /// The size a group of old segments may add up to (the topic's `segment.bytes`).
    pub segment_bytes: u64,
    pub index_interval: u32,
    /// Keys the map may hold (`log_cleaner_dedupe_buffer_size`).
    pub map_capacity: usize,
    pub now_ms: i64,
    pub delete_retention_ms: i64,
    /// Base offsets of each producer's last batch: kept even when emptied.
    pub keep: HashSet<i64>,
    /// Every batch from this offset on is kept, emptied rather than dropped: a replicated
    /// log's raft entries (see `filter`).
    pub keep_batches_from: Option<i64>,
    pub decompress_limit: usize,
    /// Bytes read and written per second at most (`log_cleaner_io_max_bytes_per_second`).
    pub io_limit: Option<u64>,
}

/// One new segment replacing a run of old ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSegment {
    pub base: i64,
    /// The old segments it replaces, by base offset; the first is `base`.
    pub replaces: Vec<i64>,
    pub size: u64,
}

/// A batch a cleaning kept at or past `Job::keep_batches_from` (a replicated log's raft
/// entry) and where it now lies: the replica's store is pointed there after the swap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeptEntry {
    pub base_offset: i64,
    /// The base offset of the new segment holding it.
    pub segment: i64,
    pub pos: u64,
    pub size: u32,
}

/// What a cleaning wrote, for the shard to swap in.
#[derive(Debug, Clone)]
pub struct Cleaned {
    pub segments: Vec<NewSegment>,
    /// The batches kept at or past `Job::keep_batches_from`, in offset order. Noted as they
    /// are written, on the cleaner thread: reading their headers back after the swap cost
    /// the shard's thread one read per raft entry.
    pub entries: Vec<KeptEntry>,
    /// The new first dirty offset: where the key map ended.
    pub map_end: i64,
    pub bytes_before: u64,
    pub bytes_after: u64,
    pub counts: Counts,
    pub elapsed: Duration,
}

/// Holds I/O to `limit` bytes per second on average.
///
/// It sleeps only once the cleaner is at least `MIN_SLEEP` ahead of its rate. Sleeping off
/// each batch's few microseconds of lead instead woke the cleaner thread, on the shard's own
/// core, once per batch: it then spent 3.5 times the CPU per byte cleaned that it spends
/// unthrottled, and every wake-up preempted the shard or its write worker.
struct Throttle {
    limit: Option<u64>,
    started: Instant,
    bytes: u64,
}

/// The shortest sleep the throttle takes: up to this much lead is let through as a burst
/// (at 200 MB/s, 200 kB).
const MIN_SLEEP: Duration = Duration::from_millis(1);

impl Throttle {
    fn account(&mut self, n: u64) {
        if let Some(wait) = self.lead(n, self.started.elapsed()) {
            std::thread::sleep(wait);
        }
    }

    /// Counts `n` more bytes and says how long to sleep, `elapsed` after the start, to be
    /// back on the rate: nothing while the lead is shorter than `MIN_SLEEP`. The rate is
    /// reckoned from the start, so an oversleep is made up by the bursts after it.
    fn lead(&mut self, n: u64, elapsed: Duration) -> Option<Duration> {
        self.bytes += n;
        let limit = self.limit.filter(|l| *l > 0)?;
        let due = Duration::from_secs_f64(self.bytes as f64 / limit as f64);
        due.checked_sub(elapsed).filter(|wait| *wait >= MIN_SLEEP)
    }
}

/// Runs `job`: the key map, then the new segments in `cleaner.tmp/`. An error leaves the old
/// segments as they were (the next open removes `cleaner.tmp/`).
pub fn run(job: &Job) -> io::Result<Cleaned> {
    let started = Instant::now();
    let mut throttle = Throttle { limit: job.io_limit, started, bytes: 0 };
    let (map, map_end, mapped) = build_map(job, &mut throttle)?;
    // Every cleanable segment that starts below where the map ends is rewritten; records at
    // or past `map_end` in the last of them are not in the map and stay.
    let olds: Vec<OldSegment> = job.segments.iter().copied().filter(|s| s.base < map_end).collect();
    // The map's pass skipped the CRCs, which the writing pass checks: a segment the map took
    // keys from that is not rewritten (offsets a client's odd batch put out of order) is
    // checked here instead, so no key from a corrupt batch decides what is dropped.
    for s in &job.segments[..mapped] {
        if s.base >= map_end {
            let mut batches = Batches::open(&job.dir, s.base, Check::Crc)?;
            while let Some(h) = batches.next()? {
                throttle.account(h.size as u64);
            }
        }
    }
    let tmp = job.dir.join(TMP_DIR);
    if tmp.exists() {
        storage::remove_dir_all(&tmp)?;
    }
    storage::create_dir_all(&tmp)?;
    let rules = Rules {
        map: &map,
        now_ms: job.now_ms,
        delete_retention_ms: job.delete_retention_ms,
        keep: &job.keep,
        log_start: job.log_start,
        keep_batches_from: job.keep_batches_from,
        decompress_limit: job.decompress_limit,
        map_end,
    };
    let mut counts = Counts::default();
    let (mut out, mut entries) = (Vec::new(), Vec::new());
    for group in groups(&olds, job.segment_bytes) {
        out.push(write_group(job, &tmp, &group, &rules, &mut counts, &mut throttle, &mut entries)?);
    }
    storage::sync_dir(&tmp)?;
    Ok(Cleaned {
        bytes_before: olds.iter().map(|s| s.size).sum(),
        bytes_after: out.iter().map(|s| s.size).sum(),
        segments: out,
        entries,
        map_end,
        counts,
        elapsed: started.elapsed(),
    })
}

/// The key map over the dirty part, [first_dirty, end), the offset it ends at (`end`, or the
/// first record that did not fit), and how many of the segments it took keys from (the
/// first ones). Batches are checked for framing only (`Check::Framing`).
fn build_map(job: &Job, throttle: &mut Throttle) -> io::Result<(KeyMap, i64, usize)> {
    let mut map = KeyMap::new(job.map_capacity);
    for (i, s) in job.segments.iter().enumerate() {
        let next_base = job.segments.get(i + 1).map_or(job.end, |n| n.base);
        if next_base <= job.first_dirty {
            continue;
        }
        let mut batches = Batches::open(&job.dir, s.base, Check::Framing)?;
        while let Some(h) = batches.next()? {
            throttle.account(h.size as u64);
            if h.last_offset() < job.first_dirty || h.is_control() {
                continue;
            }
            let records = batch::record_bytes(batches.batch(), job.decompress_limit)
                .map_err(|e| corrupt(&batches.path, batches.pos, &e.to_string()))?;
            for r in batch::parse_records(&records, h.base_timestamp) {
                let offset = h.base_offset + r.offset_delta as i64;
                let Some(key) = r.key.filter(|_| offset >= job.first_dirty) else { continue };
                if !map.put(key, offset) {
                    return Ok((map, offset, i + 1));
                }
            }
        }
    }
    Ok((map, job.end, job.segments.len()))
}

/// Runs of consecutive segments whose sizes add up to at most `limit` (each run at least
/// one segment), so that a new segment is never larger than the topic's segments.
fn groups(segments: &[OldSegment], limit: u64) -> Vec<Vec<OldSegment>> {
    let mut out: Vec<Vec<OldSegment>> = Vec::new();
    let mut size = 0;
    for s in segments {
        match out.last_mut() {
            // A cleaned segment's indexes hold offsets relative to its base in 32 bits.
            Some(g) if size + s.size <= limit && s.end - 1 - g[0].base <= segment::MAX_OFFSET_SPAN => {
                g.push(*s);
                size += s.size;
            }
            _ => {
                out.push(vec![*s]);
                size = s.size;
            }
        }
    }
    out
}

fn write_group(
    job: &Job,
    tmp: &Path,
    group: &[OldSegment],
    rules: &Rules,
    counts: &mut Counts,
    throttle: &mut Throttle,
    entries: &mut Vec<KeptEntry>,
) -> io::Result<NewSegment> {
    let base = group[0].base;
    let cap = Segment::index_capacity(job.segment_bytes.max(group.iter().map(|s| s.size).sum()), job.index_interval);
    let mut seg = Segment::open(tmp, base, cap, false)?;
    let mut pending = Vec::with_capacity(WRITE_CHUNK);
    let mut pos = 0u64;
    let flush = |seg: &Segment, pending: &mut Vec<u8>, pos: &mut u64, throttle: &mut Throttle| -> io::Result<()> {
        storage::write_at(&seg.file, &seg.path, pending, *pos)?;
        *pos += pending.len() as u64;
        throttle.account(pending.len() as u64);
        pending.clear();
        Ok(())
    };
    for old in group {
        let mut batches = Batches::open(&job.dir, old.base, Check::Crc)?;
        while let Some(h) = batches.next()? {
            throttle.account(h.size as u64);
            let raw = batches.batch();
            let kept = filter::filter(raw, &h, rules, counts)
                .map_err(|e| corrupt(&batches.path, batches.pos, &e.to_string()))?;
            let bytes = match &kept {
                Kept::Whole => raw,
                Kept::Rewritten(b) => b,
                Kept::Dropped => continue,
            };
            let nh = batch::read_header(bytes).map_err(|e| corrupt(&batches.path, batches.pos, &e.to_string()))?;
            let at = pos + pending.len() as u64;
            seg.note_batch(&nh, at, job.index_interval);
            if job.keep_batches_from.is_some_and(|from| nh.base_offset >= from) {
                entries.push(KeptEntry {
                    base_offset: nh.base_offset,
                    segment: base,
                    pos: at,
                    size: bytes.len() as u32,
                });
            }
            pending.extend_from_slice(bytes);
            if pending.len() >= WRITE_CHUNK {
                flush(&seg, &mut pending, &mut pos, throttle)?;
            }
        }
    }
    if !pending.is_empty() {
        flush(&seg, &mut pending, &mut pos, throttle)?;
    }
    storage::sync(&seg.file, &seg.path)?;
    seg.seal_indexes()?;
    for ext in ["index", "timeindex"] {
        let path = tmp.join(segment::file_name(base, ext));
        storage::sync(&std::fs::File::open(&path)?, &path)?;
    }
    Ok(NewSegment { base, replaces: group.iter().map(|s| s.base).collect(), size: pos })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes `batches` (base offset, batch) as the old segment that starts at `base`.
    fn old_segment(dir: &Path, base: i64, batches: Vec<(i64, Vec<u8>)>) -> OldSegment {
        let (mut file, mut end) = (Vec::new(), base);
        for (offset, mut b) in batches {
            batch::patch(&mut b, offset, 0);
            end = batch::read_header(&b).unwrap().last_offset() + 1;
            file.extend_from_slice(&b);
        }
        std::fs::write(dir.join(segment::file_name(base, "log")), &file).unwrap();
        OldSegment { base, size: file.len() as u64, end }
    }

    fn job(dir: &Path, segments: Vec<OldSegment>, end: i64, map_capacity: usize) -> Job {
        Job {
            dir: dir.to_path_buf(),
            topic: "t".into(),
            partition: 0,
            segments,
            first_dirty: 0,
            end,
            log_start: 0,
            segment_bytes: 1 << 20,
            index_interval: 4096,
            map_capacity,
            now_ms: 0,
            delete_retention_ms: i64::MAX,
            keep: HashSet::new(),
            keep_batches_from: None,
            decompress_limit: 1 << 20,
            io_limit: None,
        }
    }

    /// A batch of k2@11 then k3@10: a client's batch with its records' offset deltas out of
    /// order (produce checks only the last delta), its CRC made right for them; `flip` then
    /// corrupts a byte of the last value.
    fn odd_batch(flip: bool) -> Vec<u8> {
        let mut b =
            batch::build_keyed(0, &[(Some(&b"k2"[..]), Some(&b"v2"[..])), (Some(&b"k3"[..]), Some(&b"v3"[..]))]);
        // Each record: length, attributes, timestamp delta, offset delta, all one-byte
        // varints here (zigzag: 1 is 2).
        let first = batch::HEADER_LEN;
        let second = first + 1 + usize::from(b[first] / 2);
        (b[first + 3], b[second + 3]) = (2, 0);
        let crc = crc32c::crc32c(&b[21..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        if flip {
            *b.last_mut().unwrap() ^= 0xff;
        }
        b
    }

    #[test]
    fn a_corrupt_batch_fails_the_cleaning_though_the_map_skips_crcs() {
        for (flip, in_map_only) in [(false, false), (true, false), (false, true), (true, true)] {
            let dir = tempfile::tempdir().unwrap();
            let a = batch::build_keyed(0, &[(Some(&b"k0"[..]), Some(&b"a"[..])), (Some(&b"k1"[..]), Some(&b"b"[..]))]);
            let first = old_segment(dir.path(), 0, vec![(0, a)]);
            // Map room for three keys: k0, k1, then k2@11 fits and k3@10 does not, so the map
            // ends at 10 and the segment at 10, whose k2 it holds, is not rewritten.
            // Otherwise all four fit and both segments are rewritten.
            let second = old_segment(dir.path(), 10, vec![(10, odd_batch(flip))]);
            let capacity = if in_map_only { 3 } else { 4 };
            let outcome = run(&job(dir.path(), vec![first, second], 12, capacity));
            match (flip, outcome) {
                (false, Ok(c)) => {
                    let (map_end, replaced) = if in_map_only { (10, vec![0]) } else { (12, vec![0, 10]) };
                    assert_eq!((c.map_end, c.segments.len()), (map_end, 1));
                    assert_eq!(c.segments[0].replaces, replaced);
                }
                (true, Err(e)) => assert!(e.to_string().to_lowercase().contains("crc"), "{e}"),
                (flip, outcome) => panic!("flip {flip}, in map only {in_map_only}: {:?}", outcome.map(|c| c.map_end)),
            }
        }
    }

    #[test]
    fn the_entries_kept_are_noted_where_they_were_written() {
        let dir = tempfile::tempdir().unwrap();
        let kv = |k: &'static [u8], v: &'static [u8]| batch::build_keyed(0, &[(Some(k), Some(v))]);
        // k0 is written four times, once per batch; from offset 2 on every batch is a raft
        // entry and stays, emptied if need be.
        let first = old_segment(dir.path(), 0, vec![(0, kv(b"k0", b"a")), (1, kv(b"k0", b"b"))]);
        let second = old_segment(dir.path(), 2, vec![(2, kv(b"k0", b"c")), (3, kv(b"k0", b"d"))]);
        let mut j = job(dir.path(), vec![first, second], 4, 16);
        j.segment_bytes = first.size.max(second.size); // a new segment for each old one
        j.keep_batches_from = Some(2);
        let c = run(&j).unwrap();
        assert_eq!(c.segments.iter().map(|s| s.base).collect::<Vec<_>>(), vec![0, 2]);
        assert_eq!(c.entries.iter().map(|e| e.base_offset).collect::<Vec<_>>(), vec![2, 3], "none below 2");
        // Each is where the new file has a batch with its offset and size.
        let file = std::fs::read(dir.path().join(TMP_DIR).join(segment::file_name(2, "log"))).unwrap();
        assert_eq!(c.entries[1].pos, c.entries[0].size as u64, "back to back");
        for e in &c.entries {
            assert_eq!(e.segment, 2);
            let h = batch::read_header(&file[e.pos as usize..]).unwrap();
            assert_eq!((h.base_offset, h.size as u32), (e.base_offset, e.size));
        }
        assert_eq!(file.len() as u64, c.entries.iter().map(|e| e.size as u64).sum::<u64>());
        assert_eq!(c.entries[0].size as usize, batch::HEADER_LEN, "the superseded k0@2 is emptied, not dropped");
        let plain = job(dir.path(), vec![first, second], 4, 16);
        assert!(run(&plain).unwrap().entries.is_empty(), "a log raft does not own notes none");
    }

    #[test]
    fn groups_add_up_to_the_segment_size_and_keep_order() {
        let s = |base, size| OldSegment { base, size, end: base + 10 };
        let segs = [s(0, 40), s(10, 40), s(20, 40), s(30, 100), s(40, 10)];
        let g = groups(&segs, 100);
        let bases: Vec<Vec<i64>> = g.iter().map(|g| g.iter().map(|s| s.base).collect()).collect();
        assert_eq!(bases, vec![vec![0, 10], vec![20], vec![30], vec![40]]);
        assert!(groups(&[], 100).is_empty());
        // Small segments far apart in offsets: a group spans at most i32::MAX of them.
        let max = i64::from(i32::MAX);
        let wide = [
            OldSegment { base: 0, size: 1, end: max / 2 },
            OldSegment { base: max / 2, size: 1, end: max + 1 },
            OldSegment { base: max + 1, size: 1, end: max + 2 },
        ];
        let bases: Vec<Vec<i64>> = groups(&wide, 100).iter().map(|g| g.iter().map(|s| s.base).collect()).collect();
        assert_eq!(bases, vec![vec![0, max / 2], vec![max + 1]]);
    }

    #[test]
    fn the_throttle_sleeps_only_once_a_millisecond_of_lead_has_built_up() {
        // 1 MB/s: a millisecond is 1,000 bytes.
        let mut t = Throttle { limit: Some(1_000_000), started: Instant::now(), bytes: 0 };
        let at = Duration::ZERO;
        let sleeps = (0..999).filter(|_| t.lead(1, at).is_some()).count();
        assert_eq!(sleeps, 0, "999 bytes are less than a millisecond ahead");
        let near = |d: Option<Duration>, ms: u64| {
            d.is_some_and(|d| d.abs_diff(Duration::from_millis(ms)) < Duration::from_micros(1))
        };
        assert!(near(t.lead(1, at), 1), "the 1,000th byte makes a millisecond of lead");
        // Behind the rate (the bytes were slow to come): no sleep however much is counted.
        assert_eq!(t.lead(4_000, Duration::from_millis(10)), None);
        // Ahead again by 5 ms after 10 ms: 15,000 bytes due by 15 ms.
        assert!(near(t.lead(10_000, Duration::from_millis(10)), 5));
        let mut free = Throttle { limit: None, started: Instant::now(), bytes: 0 };
        assert_eq!(free.lead(u64::MAX / 2, at), None);
        let mut zero = Throttle { limit: Some(0), started: Instant::now(), bytes: 0 };
        assert_eq!(zero.lead(1 << 30, at), None, "a limit of 0 means no limit");
    }
}
