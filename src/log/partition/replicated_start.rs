//! Where a replicated log starts (DESIGN §9). Its replica decides: retention proposes a start
//! (`retention_point`, the same rules as a standalone log's, bounded by what the replica may
//! give up), the replica moves its raft log start there and writes that durably, and only
//! then are the segments below deleted (`drop_below`). A replica sent a leader's snapshot
//! empties its log and starts it afresh at the snapshot's offset (`reset_to`). At open the
//! log is checked against the start its replica recorded (`starts_at`).
//!
//! DeleteRecords moves the log start of every replica through the raft log: the leader
//! proposes the start as an entry, and each replica applying it calls `move_start`, which
//! records it as a standalone log's DeleteRecords does (`log-start-offset`); the segments
//! wholly below then go at the next retention pass, as retention's own do.
//!
//! Producer state travels with the start: `producers_before` carries the state at the old
//! start over the batches up to the new one, for the snapshot a lagging peer will get.

use std::rc::Rc;

use super::{now_ms, snapshot, storage, Partition, LOG_START_FILE};
use crate::error::BrokerError;
use crate::log::segment::Segment;
use crate::producer::ProducerState;

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

    /// Empties the log and starts it afresh at `offset` with the idempotence state
    /// `producers` (a leader's snapshot: this log ends before the leader's start). Every
    /// segment is removed, newest first, then an empty one is created at `offset`; the
    /// producer state is saved as of `offset` so that a restart recovers it.
    pub async fn reset_to(self: &Rc<Self>, offset: i64, producers: ProducerState) -> Result<(), BrokerError> {
        let cfg = self.cfg.get();
        let cap = Segment::index_capacity(cfg.segment_bytes, cfg.index_interval_bytes);
        let path = {
            let mut st = self.st.borrow_mut();
            let mut removed = 0u64;
            while let Some(seg) = st.segments.pop() {
                removed += seg.size.get();
                seg.remove_files().map_err(|e| storage(&seg.path, e))?;
            }
            self.probe.log_bytes(-(removed as i64));
            let seg = Segment::open(&self.dir, offset, cap, false).map_err(|e| storage(&self.dir, e))?;
            let path = seg.path.clone();
            st.segments.push(seg);
            st.written = offset;
            st.next_offset = offset;
            st.hwm = offset;
            st.log_start = offset;
            path
        };
        let writer = crate::storage::open_appender(&path).await.map_err(|e| storage(&path, e))?;
        self.st.borrow_mut().writer = Some(Rc::new(writer));
        let _ = crate::storage::remove_file(&self.dir.join(LOG_START_FILE));
        snapshot::discard_after(&self.dir, -1).map_err(|e| storage(&self.dir, e))?;
        snapshot::write(&self.dir, offset, &producers).map_err(|e| storage(&self.dir, e))?;
        crate::storage::sync_dir(&self.dir).map_err(|e| storage(&self.dir, e))?;
        *self.producers_written.borrow_mut() = producers.clone();
        *self.producers.borrow_mut() = producers;
        tracing::info!(topic = %self.topic, partition = self.index, offset, "log emptied to start at a leader's snapshot");
        Ok(())
    }
}
