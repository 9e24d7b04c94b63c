//! Reads: the file region a fetch sends (never past the high watermark, the first batch
//! whole), offsets by timestamp (the exact record, inside compressed batches too), and whole
//! batches for replaying internal logs. A failed read takes the partition offline.

use std::cell::RefCell;
use std::fs::File;
use std::sync::{Arc, Weak};

use super::{Partition, ReadOut};
use crate::log::segment::{Scan, Segment};
use crate::protocol::batch::{self, BatchHeader};
use crate::protocol::response::FileRegion;
use crate::protocol::ErrorCode;

impl Partition {
    /// The records a fetch at `offset` gets: from the batch containing `offset`, at most
    /// `max_bytes` (the first batch whole when `min_one`), never past the high watermark
    /// (nothing at or past it; OFFSET_OUT_OF_RANGE only below the log start or past its end).
    pub fn read(&self, offset: i64, max_bytes: u32, min_one: bool) -> Result<ReadOut, ErrorCode> {
        let st = self.st.borrow();
        if st.failed {
            return Err(ErrorCode::KafkaStorageError);
        }
        let offsets = st.offsets();
        // Past the log end is out of range; between the high watermark and the log end is
        // only not readable yet, as in Kafka: a consumer whose position came from a leader
        // whose watermark was ahead waits there instead of resetting its offset.
        if offset < st.log_start || offset > st.written {
            return Err(ErrorCode::OffsetOutOfRange);
        }
        if offset >= st.hwm {
            return Ok(ReadOut { offsets, records: None, first_batch_len: 0 });
        }
        let i = st.segments.partition_point(|s| s.base_offset <= offset).saturating_sub(1);
        for (j, seg) in st.segments.iter().enumerate().skip(i) {
            let found = seg.find(offset.max(seg.base_offset)).and_then(|at| match at {
                Some((pos, h)) if h.record_count == 0 => Ok(Some(
                    past_emptied(&self.emptied_scans, &st.segments[j..], pos, &h, EMPTIED_SCAN_BUDGET)?
                        .unwrap_or((seg, pos, h)),
                )),
                other => Ok(other.map(|(pos, h)| (seg, pos, h))),
            });
            match found {
                Ok(Some((seg, pos, h))) => {
                    let avail = seg.committed.get() - pos;
                    let mut len = (max_bytes as u64).min(avail);
                    if min_one {
                        len = len.max(h.size as u64);
                    }
                    let records = (len > 0).then(|| FileRegion { file: seg.file.clone(), pos, len: len as u32 });
                    return Ok(ReadOut { offsets, records, first_batch_len: h.size as u32 });
                }
                Ok(None) => continue,
                Err(e) => {
                    drop(st);
                    self.read_failed(&e);
                    return Err(ErrorCode::KafkaStorageError);
                }
            }
        }
        Ok(ReadOut { offsets, records: None, first_batch_len: 0 })
    }

    /// A read of the log failed (EIO): the partition goes offline, as after a failed write.
    fn read_failed(&self, e: &std::io::Error) {
        tracing::error!(topic = %self.topic, partition = self.index, "log read failed, the partition is offline until a restart recovers it: {e}");
        self.st.borrow_mut().failed = true;
    }

    /// ListOffsets: the first record at or after the log start with a timestamp >= `ts`, as
    /// (offset, timestamp), as Kafka answers; `None` when no such record is committed.
    pub fn offset_for_time(&self, ts: i64) -> Result<Option<(i64, i64)>, ErrorCode> {
        let st = self.st.borrow();
        let limit = self.cfg.get().decompressed_limit();
        for seg in &st.segments {
            if seg.max_timestamp.get() < ts {
                continue;
            }
            match first_record_from(seg, ts, st.log_start, limit) {
                Ok(Some(found)) => return Ok(Some(found).filter(|(o, _)| *o < st.hwm)),
                Ok(None) => continue,
                Err(e) => {
                    drop(st);
                    self.read_failed(&e);
                    return Err(ErrorCode::KafkaStorageError);
                }
            }
        }
        Ok(None)
    }

    /// ListOffsets MAX_TIMESTAMP: the first record carrying the largest timestamp among
    /// those at or after the log start.
    pub fn max_timestamp_offset(&self) -> Option<(i64, i64)> {
        let st = self.st.borrow();
        if st.log_start >= st.hwm {
            return None; // every record deleted (DeleteRecords), though the active segment holds them
        }
        let limit = self.cfg.get().decompressed_limit();
        let mut best: Option<(&Segment, i64)> = None;
        for seg in &st.segments {
            // Only a segment the log start lies in holds deleted records, whose timestamps
            // its own maximum may be.
            let ts = if seg.base_offset >= st.log_start {
                seg.max_timestamp.get()
            } else {
                max_timestamp_from(seg, st.log_start, limit).ok()?
            };
            if ts >= 0 && best.is_none_or(|(_, max)| ts > max) {
                best = Some((seg, ts));
            }
        }
        let (seg, ts) = best?;
        let (offset, _) = first_record_from(seg, ts, st.log_start, limit).ok()??;
        // A record past the high watermark is no answer yet (Kafka's too): its timestamp is
        // not the one any record a consumer may read carries.
        Some((offset, ts)).filter(|(offset, _)| *offset < st.hwm)
    }

    /// Calls `f` with every committed batch from the one holding offset `from` on, oldest
    /// first (replay of internal logs and of the metadata quorum's records).
    pub fn scan_batches(&self, from: i64, mut f: impl FnMut(&[u8])) -> std::io::Result<()> {
        let st = self.st.borrow();
        let mut buf = Vec::new();
        let first = st.segments.partition_point(|s| s.base_offset <= from).saturating_sub(1);
        for seg in &st.segments[first..] {
            let end = seg.committed.get();
            let Some((mut pos, _)) = seg.find(from.max(seg.base_offset))? else { continue };
            while let Some(h) = seg.header_at(pos, end)? {
                buf.resize(h.size, 0);
                seg.read_at(&mut buf, pos)?;
                f(&buf);
                pos += h.size as u64;
            }
        }
        Ok(())
    }
}

/// Bytes of batch headers a fetch reads at most to step over emptied batches (some 17,000
/// of them).
const EMPTIED_SCAN_BUDGET: u64 = 1 << 20;

/// Scans a partition remembers, for that many fetch positions at once.
const EMPTIED_SCANS: usize = 8;

/// How far the fetches landing on the emptied batch at offset `landed` got stepping over the
/// emptied batches after it: the next one goes on from byte `pos` of the segment whose file
/// `file` is. Weak, so that the memory does not keep a removed segment's file (and its disk
/// space) open; while it lives, no other file can take its place.
pub(super) struct EmptiedScan {
    landed: i64,
    file: Weak<File>,
    pos: u64,
}

/// For a fetch landing on the emptied batch `h` at `pos` in `segs[0]`: the first batch after
/// it that holds records, in that segment or a later one. A cleaned log, a replicated one
/// above all (`cluster::group::cleaning` keeps every batch), can hold long runs of batches
/// whose records all went, and kafkajs (2.2) does not step over a fetch answer made only of
/// those: it fetches the same offset again for ever. Serving such a fetch from the next batch
/// with records skips no record. One fetch reads at most `budget` bytes of headers;
/// where that does not reach a batch with records (a longer run, or one reaching the end of
/// the log) the fetch is served from where it landed, as before, and `scans` remembers how
/// far it got, so that the same fetch again (kafkajs's) goes on from there. So the clients
/// that do step over emptied batches (Java, librdkafka) still reach the end offset (Kafka
/// Streams waits for that when it restores a changelog), and kafkajs gets past any run in
/// as many fetches as the run has MiB of headers.
pub(super) fn past_emptied<'a>(
    scans: &RefCell<Vec<EmptiedScan>>,
    segs: &'a [Segment],
    pos: u64,
    h: &BatchHeader,
    mut budget: u64,
) -> std::io::Result<Option<(&'a Segment, u64, BatchHeader)>> {
    let mut scans = scans.borrow_mut();
    let (mut k, mut from) = (0, pos + h.size as u64);
    if let Some(i) = scans.iter().position(|s| s.landed == h.base_offset) {
        let known = scans.remove(i);
        let file = known.file.upgrade();
        if let Some(at) = segs.iter().position(|seg| file.as_ref().is_some_and(|f| Arc::ptr_eq(f, &seg.file))) {
            (k, from) = (at, known.pos);
        }
    }
    while let Some(seg) = segs.get(k) {
        match seg.next_with_records(from, &mut budget)? {
            Scan::Found(at, next) => return Ok(Some((seg, at, next))),
            Scan::Unreadable => return Ok(None),
            Scan::Reached(at) if budget == 0 || k + 1 == segs.len() => {
                if scans.len() == EMPTIED_SCANS {
                    scans.remove(0);
                }
                scans.push(EmptiedScan { landed: h.base_offset, file: Arc::downgrade(&seg.file), pos: at });
                return Ok(None);
            }
            Scan::Reached(_) => (k, from) = (k + 1, 0),
        }
    }
    Ok(None)
}

/// The first committed record of `seg` at or after offset `from` with a timestamp >= `ts`, as
/// (offset, timestamp), as Kafka's search for a timestamp finds it.
fn first_record_from(seg: &Segment, ts: i64, mut from: i64, limit: usize) -> std::io::Result<Option<(i64, i64)>> {
    while let Some(h) = seg.find_by_time(ts, from)? {
        let Some(records) = records_from(seg, &h, from, limit) else {
            return Ok(Some((h.base_offset.max(from), h.max_timestamp)));
        };
        if let Some(found) = records.into_iter().find(|&(_, t)| t >= ts) {
            return Ok(Some(found));
        }
        // None there after all: the batch `from` lies in (its late records are below it),
        // or one compaction emptied.
        from = h.last_offset() + 1;
    }
    Ok(None)
}

/// The records of batch `h` at offsets >= `from`, as (offset, timestamp): every record of a
/// LogAppendTime batch carries the batch's maxTimestamp (the first stands for them all);
/// other batches are read, and decompressed within `limit` bytes when compressed. `None`
/// when the batch cannot be read (callers then fall back to the batch's header).
fn records_from(seg: &Segment, h: &BatchHeader, from: i64, limit: usize) -> Option<Vec<(i64, i64)>> {
    if h.is_log_append_time() {
        return Some(vec![(h.base_offset.max(from), h.max_timestamp)]);
    }
    if h.size > limit {
        return None;
    }
    let (pos, _) = seg.find(h.base_offset).ok()??;
    let mut buf = vec![0u8; h.size];
    seg.read_at(&mut buf, pos).ok()?;
    let records = match batch::record_bytes(&buf, limit) {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(offset = h.base_offset, "cannot read a batch's records for a timestamp lookup: {e}");
            return None;
        }
    };
    let records = batch::parse_records(&records, h.base_timestamp);
    Some(records.map(|r| (h.base_offset + r.offset_delta as i64, r.timestamp)).filter(|&(o, _)| o >= from).collect())
}

/// The largest timestamp of the committed records at or after `from` in `seg` (-1: none),
/// for a segment `from` lies in: of the batch holding it only the records from there on
/// count (all of them when it cannot be read).
fn max_timestamp_from(seg: &Segment, from: i64, limit: usize) -> std::io::Result<i64> {
    let end = seg.committed.get();
    let Some((mut pos, h)) = seg.find(from)? else { return Ok(-1) };
    let mut max = match records_from(seg, &h, from, limit) {
        Some(records) => records.iter().map(|&(_, t)| t).max().unwrap_or(-1),
        None => h.max_timestamp,
    };
    pos += h.size as u64;
    while let Some(h) = seg.header_at(pos, end)? {
        max = max.max(h.max_timestamp);
        pos += h.size as u64;
    }
    Ok(max)
}
