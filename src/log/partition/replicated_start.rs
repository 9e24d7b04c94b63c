//! Where a replicated log starts (DESIGN §9). Its replica decides: retention proposes a start
//! (`retention_point`, the same rules as a standalone log's, bounded by what the replica may
//! give up), the replica moves its raft log start there and writes that durably, and only
//! then are the segments below deleted (`drop_below`). A replica sent a leader's snapshot
//! empties its log and starts it afresh at the snapshot's offset (`reset_to`). At open the
//! log is checked against the start its replica recorded (`starts_at`).
//!
//! A compacted log can keep records below its raft log's start: `below` reads them for a
//! snapshot to carry, and `install` puts a snapshot's records in place of a log (`reset_to`
//! is an install without any).
//!
//! DeleteRecords moves the log start of every replica through the raft log: the leader
//! proposes the start as an entry, and each replica applying it calls `move_start`, which
//! records it as a standalone log's DeleteRecords does (`log-start-offset`); the segments
//! wholly below then go at the next retention pass, as retention's own do.
//!
//! Producer state travels with the start: `producers_before` carries the state at the old
//! start over the batches up to the new one, for the snapshot a lagging peer will get.

use std::rc::Rc;

use bytes::Bytes;

use super::{now_ms, snapshot, storage, Partition, LOG_START_FILE};
use crate::error::BrokerError;
use crate::log::segment::Segment;
use crate::producer::ProducerState;
use crate::protocol::batch;
use crate::protocol::ErrorCode;

impl Partition {
    /// Where retention would start the log now (the base of the first segment it keeps),
    /// deleting only segments that end at or before `limit`; None if nothing would go.
    pub fn retention_point(&self, now_ms: i64, limit: i64) -> Option<i64> {
        let mut n = self.expired_segments(now_ms);
        let st = self.st.borrow();
        // And the segments DeleteRecords left wholly below the log start (never the active one).
        while n + 1 < st.segments.len() && st.segments[n + 1].base_offset <= st.log_start {
            n += 1;
        }
        while n > 0 && st.segments[n].base_offset > limit {
            n -= 1;
        }
        (n > 0).then(|| st.segments[n].base_offset)
    }

    /// Where a compacted log's raft log may start instead (its records below stay, cleaned
    /// as a standalone log's, and travel in snapshots): the base of the newest segment in
    /// (`after`, `limit`] with at most `max_bytes` of log below it. None if there is none or
    /// the log is not compacted.
    pub fn raft_start_point(&self, after: i64, limit: i64, max_bytes: u64) -> Option<i64> {
        if !self.cfg.get().compact {
            return None;
        }
        let st = self.st.borrow();
        let mut below = 0u64;
        let mut point = None;
        for seg in &st.segments {
            if seg.base_offset > limit || below > max_bytes {
                break;
            }
            if seg.base_offset > after {
                point = Some(seg.base_offset);
            }
            below += seg.size.get();
        }
        point
    }

    /// `state` (the producer state over every batch before `from`) carried over the batches
    /// in [from, to).
    pub fn producers_before(&self, mut state: ProducerState, from: i64, to: i64) -> std::io::Result<ProducerState> {
        let st = self.st.borrow();
        let now = now_ms();
        for seg in st.segments.iter().filter(|s| s.next_offset.get() > from && s.base_offset < to) {
            let end = seg.size.get();
            let mut pos = match seg.find_before(from.max(seg.base_offset), end)? {
                Some((pos, _)) => pos,
                None => continue,
            };
            while let Some(h) = seg.header_at(pos, end)? {
                if h.base_offset >= to {
                    break;
                }
                if h.base_offset >= from && !h.is_control() {
                    state.update(&h, now);
                }
                pos += h.size as u64;
            }
        }
        Ok(state)
    }

    /// A committed DeleteRecords entry moves the log start to `offset` (no further than the
    /// log's end), durably: fetches below it get OFFSET_OUT_OF_RANGE and ListOffsets EARLIEST
    /// answers it. A start at or below the current one changes nothing. Returns the start.
    pub fn move_start(&self, offset: i64) -> Result<i64, BrokerError> {
        let mut st = self.st.borrow_mut();
        let target = offset.min(st.written);
        if target <= st.log_start {
            return Ok(st.log_start);
        }
        self.persist_log_start(target)?;
        st.log_start = target;
        tracing::info!(topic = %self.topic, partition = self.index, log_start = target, "records deleted");
        Ok(target)
    }

    /// The log starts at `offset` from now on: fetches below it get OFFSET_OUT_OF_RANGE and
    /// the segments wholly below it are deleted (never the active one). The replica has
    /// already recorded the start durably; a crash part way leaves segments the next open
    /// deletes again.
    pub fn drop_below(&self, offset: i64) -> usize {
        let mut st = self.st.borrow_mut();
        st.log_start = st.log_start.max(offset);
        let deleted = self.remove_segments_below(&mut st, offset);
        if deleted > 0 {
            tracing::info!(topic = %self.topic, partition = self.index, deleted, log_start = st.log_start, "retention deleted segments");
        }
        deleted
    }

    /// Whether this log fits a raft log starting at `offset`: its first batch at or after
    /// `offset` starts exactly there, or it holds none and ends exactly there.
    pub fn starts_at(&self, offset: i64) -> std::io::Result<bool> {
        let st = self.st.borrow();
        for seg in st.segments.iter().filter(|s| s.next_offset.get() > offset) {
            let end = seg.size.get();
            let mut pos = match seg.find_before(offset.max(seg.base_offset), end)? {
                Some((pos, _)) => pos,
                None => continue,
            };
            while let Some(h) = seg.header_at(pos, end)? {
                if h.base_offset >= offset {
                    return Ok(h.base_offset == offset);
                }
                pos += h.size as u64;
            }
        }
        Ok(st.written == offset)
    }

    /// The log start (at most `offset`: DeleteRecords may have moved it past) and the
    /// committed batches from it up to `offset` (whole batches: one holding the log start is
    /// included), as they are in the segments.
    pub fn below(&self, offset: i64) -> std::io::Result<(i64, Bytes)> {
        let st = self.st.borrow();
        let mut out = Vec::new();
        for seg in st.segments.iter().filter(|s| s.next_offset.get() > st.log_start && s.base_offset < offset) {
            let end = seg.committed.get();
            let mut pos = match seg.find_before(st.log_start.max(seg.base_offset), end)? {
                Some((pos, _)) => pos,
                None => continue,
            };
            while let Some(h) = seg.header_at(pos, end)? {
                if h.base_offset >= offset {
                    break;
                }
                if h.last_offset() >= st.log_start {
                    let at = out.len();
                    out.resize(at + h.size, 0);
                    seg.read_at(&mut out[at..], pos)?;
                }
                pos += h.size as u64;
            }
        }
        Ok((st.log_start.min(offset), Bytes::from(out)))
    }

    /// Empties the log and starts it afresh at `offset` with the idempotence state
    /// `producers` (a leader's snapshot: this log ends before the leader's start).
    pub async fn reset_to(self: &Rc<Self>, offset: i64, producers: ProducerState) -> Result<(), BrokerError> {
        self.install(offset, &[], offset, producers).await
    }

    /// Replaces the log with a leader's snapshot: `data` (its batches in [`log_start`,
    /// `offset`), checked here batch by batch) and an empty active segment at `offset`, with
    /// the idempotence state `producers` as of `offset`. Every segment is removed, newest
    /// first; the data is written and synced as one sealed segment before the active one is
    /// created, and the producer state is saved as of `offset` so that a restart recovers it.
    /// The caller keeps the snapshot until this has returned, and installs it again after a
    /// crash (`cluster::group`).
    pub async fn install(
        self: &Rc<Self>,
        log_start: i64,
        data: &[u8],
        offset: i64,
        producers: ProducerState,
    ) -> Result<(), BrokerError> {
        self.swap_ended().await;
        let cfg = self.cfg.get();
        let cap = cfg.index_capacity();
        let invalid = |why: String| storage(&self.dir, std::io::Error::new(std::io::ErrorKind::InvalidData, why));
        let first = match data.is_empty() {
            true => None,
            false => Some(batch::read_header(data).map_err(|e| invalid(format!("snapshot data: {e}")))?.base_offset),
        };
        let path = {
            let mut st = self.st.borrow_mut();
            let mut removed = 0u64;
            let mut old = Vec::new();
            while let Some(seg) = st.segments.pop() {
                removed += seg.size.get();
                seg.remove_files().map_err(|e| storage(&seg.path, e))?;
                old.push(seg);
            }
            Segment::retire(old);
            self.probe.log_bytes(-(removed as i64));
            if let Some(first) = first {
                let base = first.min(log_start);
                let seg_path = self.dir.join(crate::log::segment::file_name(base, "log"));
                let file = crate::storage::open_rw(&seg_path).map_err(|e| storage(&seg_path, e))?;
                crate::storage::write_at(&file, &seg_path, data, 0).map_err(|e| storage(&seg_path, e))?;
                crate::storage::sync(&file, &seg_path).map_err(|e| storage(&seg_path, e))?;
                let mut seg = Segment::open(&self.dir, base, cap, false).map_err(|e| storage(&self.dir, e))?;
                let scan = seg.rebuild(0, true, cfg.index_interval_bytes).map_err(|e| storage(&seg_path, e))?;
                if scan.valid_len != data.len() as u64 || scan.next_offset.is_some_and(|n| n > offset) {
                    let _ = seg.remove_files();
                    return Err(invalid(format!(
                        "snapshot data holds {} valid bytes of {} below offset {offset}",
                        scan.valid_len,
                        data.len()
                    )));
                }
                seg.seal_indexes().map_err(|e| storage(&seg_path, e))?;
                seg.committed.set(seg.size.get());
                self.probe.log_bytes(data.len() as i64);
                st.segments.push(seg);
            }
            let seg = Segment::open(&self.dir, offset, cap, false).map_err(|e| storage(&self.dir, e))?;
            let path = seg.path.clone();
            st.segments.push(seg);
            st.written = offset;
            st.next_offset = offset;
            st.hwm = offset;
            st.log_start = log_start.clamp(st.segments[0].base_offset, offset);
            path
        };
        let writer = self.open_active_writer(&path).await?;
        self.st.borrow_mut().writer = Some(writer);
        let (start, first_base) = {
            let st = self.st.borrow();
            (st.log_start, st.segments[0].base_offset)
        };
        if start > first_base {
            self.persist_log_start(start)?;
        } else {
            let _ = crate::storage::remove_file(&self.dir.join(LOG_START_FILE));
        }
        snapshot::discard_after(&self.dir, -1).map_err(|e| storage(&self.dir, e))?;
        snapshot::write(&self.dir, offset, &producers).map_err(|e| storage(&self.dir, e))?;
        // Where this replica's own cleanings had got to says nothing of the leader's records.
        let checkpoint = self.dir.join(super::compaction::CHECKPOINT_FILE);
        crate::storage::remove_file(&checkpoint).map_err(|e| storage(&checkpoint, e))?;
        crate::storage::sync_dir(&self.dir).map_err(|e| storage(&self.dir, e))?;
        *self.producers_written.borrow_mut() = producers.clone();
        *self.producers.borrow_mut() = producers;
        self.fail_duplicates(ErrorCode::NotLeaderOrFollower);
        // The leader's records are cleaned as far as its cleanings went, not this replica's:
        // all of them are dirty here, and a cleaning under way read the segments just removed.
        self.first_dirty.set(0);
        self.replaced.set(true);
        tracing::info!(topic = %self.topic, partition = self.index, offset, log_start, bytes = data.len(), "log replaced: it starts anew at the offset (a leader's snapshot, or a log start stored past a crashed tail)");
        Ok(())
    }
}
