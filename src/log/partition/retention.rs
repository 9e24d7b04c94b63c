//! What moves a log's start: time and size retention (whole old segments, and the active one
//! once every record in the log has expired, after rolling it; nothing unless the policy has
//! `delete`), and DeleteRecords (a durable log start offset).

use std::rc::Rc;

use super::{storage, Partition, State, LOG_START_FILE};
use crate::error::BrokerError;
use crate::log::segment::Segment;
use crate::producer::ProducerState;
use crate::protocol::ErrorCode;

impl Partition {
    /// DeleteRecords: moves the log start to `offset` (-1: the high watermark), durably, and
    /// deletes the segments wholly below it (never the active one, as Kafka). Fetches below
    /// the new start get OFFSET_OUT_OF_RANGE. Returns the log start (the low watermark).
    pub fn delete_records(&self, offset: i64) -> Result<i64, ErrorCode> {
        let mut st = self.st.borrow_mut();
        if st.replicated {
            // Every replica's start moves through the raft log (`Group::delete_records`).
            tracing::error!(topic = %self.topic, partition = self.index, "DeleteRecords on a replicated log reached the log instead of its raft group");
            return Err(ErrorCode::UnknownServerError);
        }
        let target = if offset == -1 { st.hwm } else { offset };
        if target < 0 || target > st.hwm {
            return Err(ErrorCode::OffsetOutOfRange);
        }
        if target <= st.log_start {
            return Ok(st.log_start);
        }
        if let Err(e) = self.persist_log_start(target) {
            tracing::error!(topic = %self.topic, partition = self.index, "cannot persist the log start offset: {e}");
            return Err(ErrorCode::KafkaStorageError);
        }
        st.log_start = target;
        let deleted = self.remove_segments_below(&mut st, target);
        tracing::info!(topic = %self.topic, partition = self.index, log_start = target, deleted, "records deleted");
        Ok(target)
    }

    /// A log not replicated whose stored start lies past the end recovery found (under
    /// `flush=os` a crash took the unsynced batches below a DeleteRecords start): emptied to
    /// start there, as Kafka's log loader does. Every record it held lay below that start,
    /// and starting lower would hand those offsets out again and move the low watermark back.
    pub async fn start_at_stored_start(self: &Rc<Self>) -> Result<(), BrokerError> {
        let (start, end) = {
            let mut st = self.st.borrow_mut();
            let Some(start) = st.start_past_end.take() else { return Ok(()) };
            (start, st.next_offset)
        };
        tracing::warn!(
            topic = %self.topic,
            partition = self.index,
            log_start = start,
            log_end = end,
            "the stored log start lies past the recovered log end (a crash took the unsynced tail): the log is emptied to start there"
        );
        self.reset_to(start, ProducerState::default()).await
    }

    /// Writes the log start offset where the next open reads it, durably.
    pub(super) fn persist_log_start(&self, offset: i64) -> Result<(), BrokerError> {
        let path = self.dir.join(LOG_START_FILE);
        crate::storage::write_atomic(&path, offset.to_string().as_bytes(), 0o644).map_err(|e| storage(&path, e))
    }

    /// Deletes whole old segments beyond `retention_bytes` / `retention_ms` (never the
    /// active one) when `cleanup.policy` contains `delete`. Returns
    /// how many were deleted. A replicated log's start moves with its replica instead
    /// (`retention_point`, `drop_below`).
    pub fn apply_retention(&self, now_ms: i64) -> usize {
        if self.st.borrow().replicated || self.swapping.get() {
            return 0; // a swap under way holds its segments: the next pass deletes
        }
        let n = self.expired_segments(now_ms);
        if self.active_expires_with(now_ms, n) {
            // The roll runs on the write loop, which then calls this again to delete it.
            self.roll_requested.set(true);
            self.wake_write_loop();
        }
        if n == 0 {
            return 0;
        }
        let mut st = self.st.borrow_mut();
        let expired: Vec<Segment> = st.segments.drain(..n).collect();
        for seg in &expired {
            self.probe.log_bytes(-(seg.size.get() as i64));
            if let Err(e) = seg.remove_files() {
                tracing::warn!(topic = %self.topic, partition = self.index, "deleting segment {}: {e}", seg.path.display());
            }
        }
        Segment::retire(expired);
        st.log_start = st.segments[0].base_offset.max(st.log_start);
        tracing::info!(topic = %self.topic, partition = self.index, deleted = n, log_start = st.log_start, "retention deleted segments");
        n
    }

    /// Rolls a replicated log's active segment for retention (`active_expired`): its replica's
    /// writer calls this between writes, as the write loop does a standalone log's roll.
    pub async fn roll_for_retention(&self) -> Result<(), BrokerError> {
        self.roll_requested.set(true);
        let rolled = self.roll_if_needed(0, None).await;
        self.roll_requested.set(false);
        rolled
    }

    /// Deletes the segments wholly below `offset` (never the active one); returns how many.
    /// While a cleaning's swap is under way none are: its end deletes them
    /// (`finish_swap`).
    pub(super) fn remove_segments_below(&self, st: &mut State, offset: i64) -> usize {
        if self.swapping.get() {
            return 0;
        }
        let mut below = Vec::new();
        while st.segments.len() > 1 && st.segments[1].base_offset <= offset {
            let seg = st.segments.remove(0);
            self.probe.log_bytes(-(seg.size.get() as i64));
            if let Err(e) = seg.remove_files() {
                tracing::warn!(topic = %self.topic, partition = self.index, "deleting segment {}: {e}", seg.path.display());
            }
            below.push(seg);
        }
        let deleted = below.len();
        Segment::retire(below);
        deleted
    }

    /// Whether time retention would take the active segment too: every segment before it
    /// goes now, it holds records, all older than `retention_ms`, and everything written is
    /// committed. Kafka then rolls a new, empty active segment and deletes the old one, so
    /// that an idle topic's records expire too; so does a log here, in two steps: a roll
    /// (`roll_requested`, or `roll_for_retention` on a replicated log), then a retention pass.
    pub fn active_expired(&self, now_ms: i64) -> bool {
        self.active_expires_with(now_ms, self.expired_segments(now_ms))
    }

    /// `active_expired`, given how many of the oldest segments expire now.
    fn active_expires_with(&self, now_ms: i64, expiring: usize) -> bool {
        let cfg = self.cfg.get();
        let st = self.st.borrow();
        let active = st.segments.last().expect("active segment");
        cfg.retention_deletes()
            && cfg.retention_ms >= 0
            && expiring + 1 == st.segments.len()
            && active.size.get() > 0
            && st.hwm == st.written
            && !st.failed
            && older_than(active, now_ms, cfg.retention_ms)
    }

    /// How many of the oldest segments retention would delete now: beyond `retention_bytes`
    /// or all older than `retention_ms`, never the active one, none unless the policy has `delete`.
    pub(super) fn expired_segments(&self, now_ms: i64) -> usize {
        let cfg = self.cfg.get();
        if !cfg.retention_deletes() {
            return 0; // `compact` alone: the cleaner keeps the latest of each key, nothing goes by age
        }
        let st = self.st.borrow();
        let total: u64 = st.segments.iter().map(|s| s.size.get()).sum();
        let mut excess = if cfg.retention_bytes >= 0 { total.saturating_sub(cfg.retention_bytes as u64) } else { 0 };
        let mut n = 0;
        while n + 1 < st.segments.len() {
            let seg = &st.segments[n];
            let too_big = excess >= seg.size.get() && excess > 0;
            // An inactive segment holding nothing (a cleaning dropped all it had) has no age of
            // its own and nothing to keep: it goes with the old segments around it rather than
            // stopping retention at it.
            let too_old = cfg.retention_ms >= 0 && (seg.size.get() == 0 || older_than(seg, now_ms, cfg.retention_ms));
            if !(too_big || too_old) {
                break;
            }
            excess = excess.saturating_sub(seg.size.get());
            n += 1;
        }
        n
    }
}

/// Whether `seg`'s newest record (or, with no timestamps, its file) is older than `retention_ms`.
fn older_than(seg: &Segment, now_ms: i64, retention_ms: i64) -> bool {
    seg.newest_time_ms().is_some_and(|t| now_ms.saturating_sub(t) > retention_ms)
}
