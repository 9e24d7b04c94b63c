//! A compacted log's side of a cleaning (see `log::cleaner`): when one is due and what it
//! may touch (`cleaning_due`), rolling an idle log's active segment so that it can be
//! (`roll_if_idle`), and putting its segments in place (`begin_swap`, `commit_cleaned` off the
//! shard's thread, `finish_swap`; `swap_cleaned` all three in a row). A replicated log is
//! cleaned the same way but keeps every batch from its raft log's start on (each is a raft
//! entry), and its replica then points its entries at the new files
//! (`cluster::group::Group::swap_cleaned`).

use std::collections::HashSet;

use super::{storage, Partition};
use crate::error::BrokerError;
use crate::log::cleaner::{self, Cleaned, CleanerSettings, Job};
use crate::log::segment::Segment;

/// Where the last cleaning's key map ended, as decimal text: offsets below are clean.
pub(super) const CHECKPOINT_FILE: &str = "cleaner-checkpoint";

/// A cleaning a log is due for, and how dirty it is.
pub struct Due {
    pub job: Job,
    /// The dirty part's share of the cleanable bytes.
    pub dirty_ratio: f64,
}

impl Partition {
    /// Rolls the active segment of a compacted log that has had no append for `segment.ms`
    /// since its first record, so that an idle log gets cleaned too (the active segment
    /// never is). Appends roll on their own; Kafka rolls only then, so an idle compacted
    /// partition there keeps its last segment uncleaned. The roll itself runs on the log's
    /// write loop (`write_loop`), which this only wakes. Not for a replicated log: its
    /// replica writes through `write_entries`, not the write loop, so it rolls at appends
    /// only, as Kafka's logs do.
    pub fn roll_if_idle(&self) {
        let cfg = self.cfg.get();
        let st = self.st.borrow();
        if !cfg.compact || st.replicated || st.failed {
            return;
        }
        let seg = st.segments.last().expect("active segment");
        if seg.size.get() > 0 && seg.roll_time_passed(cfg.segment_ms, cfg.segment_jitter_ms) {
            drop(st);
            self.wake_write_loop();
        }
    }

    /// How dirty this log is (0 when it is not compacted or has nothing cleanable), and the
    /// cleaning it is due for now, if any. Cleanable: every inactive segment wholly below the
    /// high watermark, up to the first holding a record newer than `min.compaction.lag.ms`.
    /// A replicated log's replica decides (`replicated_cleaning_due`).
    pub fn cleaning_due(&self, now_ms: i64, settings: &CleanerSettings) -> (f64, Option<Due>) {
        let hwm = {
            let st = self.st.borrow();
            if st.replicated {
                return (0.0, None);
            }
            st.hwm
        };
        self.due(now_ms, settings, hwm, None)
    }

    /// `cleaning_due` for a replicated log, whose cleanable segments end at or below `limit`
    /// too: what its replica allows (what raft has applied and, on a leader, what every
    /// replica heard from lately holds). Its batches from `raft_start` (the raft log's first
    /// entry) on are raft entries, kept even when emptied.
    pub fn replicated_cleaning_due(
        &self,
        now_ms: i64,
        settings: &CleanerSettings,
        limit: i64,
        raft_start: i64,
    ) -> (f64, Option<Due>) {
        let hwm = {
            let st = self.st.borrow();
            if !st.replicated {
                return (0.0, None);
            }
            st.hwm
        };
        self.due(now_ms, settings, limit.min(hwm), Some(raft_start))
    }

    fn due(&self, now_ms: i64, settings: &CleanerSettings, limit: i64, keep_from: Option<i64>) -> (f64, Option<Due>) {
        let cfg = self.cfg.get();
        let st = self.st.borrow();
        if !cfg.compact || st.failed || self.wake.borrow().is_none() {
            return (0.0, None);
        }
        let lag = i64::try_from(cfg.min_compaction_lag_ms).unwrap_or(i64::MAX);
        let inactive = &st.segments[..st.segments.len() - 1];
        let n = inactive
            .iter()
            .take_while(|s| {
                s.next_offset.get() <= limit && (lag == 0 || s.max_timestamp.get() <= now_ms.saturating_sub(lag))
            })
            .count();
        if n == 0 {
            return (0.0, None);
        }
        let end = st.segments[n].base_offset;
        let first_dirty = self.first_dirty.get().max(st.log_start);
        let (mut clean, mut dirty, mut first_dirty_segment) = (0u64, 0u64, n);
        for (i, s) in st.segments[..n].iter().enumerate() {
            if st.segments[i + 1].base_offset <= first_dirty {
                clean += s.size.get();
            } else {
                dirty += s.size.get();
                first_dirty_segment = first_dirty_segment.min(i);
            }
        }
        // A replicated log whose raft log start rose since its last cleaning: a pass over the
        // clean part alone (nothing dirty, no key map) drops the batches emptied below it.
        if self.cleaned_raft_start.get().is_none() {
            self.cleaned_raft_start.set(keep_from);
        }
        let start_rose = keep_from > self.cleaned_raft_start.get() && clean > 0;
        if dirty == 0 && !start_rose {
            return (0.0, None);
        }
        let ratio = dirty as f64 / (clean + dirty) as f64;
        let max_lag = i64::try_from(cfg.max_compaction_lag_ms).unwrap_or(i64::MAX);
        // As Kafka: the oldest first batch of the dirty segments stands for the dirty part's
        // age (each segment's first batch's newest timestamp; none known: not overdue). Read
        // only when a bound is set (the default is none).
        let overdue = max_lag < i64::MAX
            && st.segments[first_dirty_segment..n]
                .iter()
                .filter_map(|s| s.header_at(0, s.size.get()).ok().flatten())
                .map(|h| h.max_timestamp)
                .filter(|&ts| ts > 0)
                .min()
                .is_some_and(|ts| now_ms.saturating_sub(ts) > max_lag);
        if ratio < cfg.min_cleanable_dirty_ratio && !overdue && !start_rose {
            return (ratio, None);
        }
        let keep: HashSet<i64> = self
            .producers_written
            .borrow()
            .producers
            .values()
            .filter_map(|p| p.batches.back())
            .map(|b| b.first_offset)
            .collect();
        let job = Job {
            dir: self.dir.clone(),
            topic: self.topic.clone(),
            partition: self.index,
            segments: st.segments[..n]
                .iter()
                .zip(&st.segments[1..])
                .map(|(s, next)| cleaner::pass::OldSegment {
                    base: s.base_offset,
                    size: s.size.get(),
                    end: next.base_offset,
                })
                .collect(),
            first_dirty,
            end,
            log_start: st.log_start,
            segment_bytes: cfg.segment_bytes,
            index_interval: cfg.index_interval_bytes,
            map_capacity: settings.map_capacity,
            now_ms,
            delete_retention_ms: i64::try_from(cfg.delete_retention_ms).unwrap_or(i64::MAX),
            keep,
            keep_batches_from: keep_from,
            decompress_limit: cfg.decompressed_limit(),
            io_limit: settings.io_limit,
        };
        self.replaced.set(false);
        (ratio, Some(Due { job, dirty_ratio: ratio }))
    }

    /// Puts a cleaning's new segments in place of the old ones it read, unless the log
    /// changed meanwhile (retention or DeleteRecords removed one of them, or the log closed
    /// or failed): then the cleaning is discarded and false returned. A failure once the swap
    /// is committed takes the log offline; the next open finishes the swap. All of it on the
    /// calling thread; the shard runs the file work on its cleaner thread instead
    /// (`begin_swap`, `commit_cleaned`, `finish_swap`).
    pub fn swap_cleaned(&self, job: &Job, cleaned: &Cleaned) -> Result<bool, BrokerError> {
        if !self.begin_swap(cleaned) {
            return Ok(false);
        }
        let committed = Partition::commit_cleaned(&self.dir, cleaned, job.index_interval);
        self.finish_swap(job, cleaned, committed)?;
        Ok(true)
    }

    /// The first part of a swap, on the shard: whether the old segments the cleaning read
    /// are all still the log's. If so, the log holds them (retention and DeleteRecords delete
    /// no segment, a cut of the log or a close waits) until `finish_swap`; if not, the
    /// cleaning is discarded and false returned.
    pub fn begin_swap(&self, cleaned: &Cleaned) -> bool {
        let st = self.st.borrow();
        let olds: Vec<i64> = cleaned.segments.iter().flat_map(|s| s.replaces.iter().copied()).collect();
        let first = st.segments.iter().position(|s| Some(&s.base_offset) == olds.first());
        let unchanged = !st.failed
            && !self.swapping.get()
            && !self.replaced.get()
            && self.wake.borrow().is_some()
            && first.is_some_and(|at| {
                olds.len() < st.segments.len() - at
                    && st.segments[at..at + olds.len()].iter().map(|s| s.base_offset).eq(olds.iter().copied())
            });
        drop(st);
        if !unchanged {
            let _ = crate::storage::remove_dir_all(&self.dir.join(cleaner::pass::TMP_DIR));
            tracing::info!(topic = %self.topic, partition = self.index, "cleaning discarded: the log changed meanwhile");
            return false;
        }
        self.swapping.set(true);
        true
    }

    /// The file work of a swap, which blocks on several fsyncs and opens the new segments
    /// (tens of milliseconds on a busy disk: too long for the shard's thread, where every
    /// partition of the shard would wait): commits the cleaned segments in place of the old
    /// ones (`cleaner::swap`), records where the cleaning ended (only an optimisation: a
    /// failure there is logged), and opens the new segments, their indexes brought up to
    /// their ends. Fetches meanwhile keep reading the old segments' open files.
    pub fn commit_cleaned(
        dir: &std::path::Path,
        cleaned: &Cleaned,
        index_interval: u32,
    ) -> std::io::Result<Vec<Segment>> {
        cleaner::swap::commit(dir, &cleaned.segments)?;
        let path = dir.join(CHECKPOINT_FILE);
        if let Err(e) = crate::storage::write_atomic(&path, cleaned.map_end.to_string().as_bytes(), 0o644) {
            // Only costs cleaning the same range again.
            tracing::warn!(dir = %dir.display(), "cannot write the cleaner checkpoint: {e}");
        }
        cleaned
            .segments
            .iter()
            .map(|s| {
                let mut seg = Segment::open(dir, s.base, 0, true)?;
                let from = seg.index.last().map_or(0, |(_, pos)| pos as u64);
                if let Some((ts, _)) = seg.time_index.last() {
                    seg.max_timestamp.set(ts);
                }
                seg.rebuild(from, false, index_interval)?;
                seg.committed.set(seg.size.get());
                Ok(seg)
            })
            .collect()
    }

    /// The last part of a swap, on the shard: puts the new segments (`committed`, from
    /// `commit_cleaned`) in the log in place of the old ones, whose last closes go to the
    /// shard's closer thread, then deletes what retention or DeleteRecords left for it. An
    /// error from `commit_cleaned` takes the log offline (the next open finishes the swap
    /// from its manifest).
    pub fn finish_swap(
        &self,
        job: &Job,
        cleaned: &Cleaned,
        committed: std::io::Result<Vec<Segment>>,
    ) -> Result<(), BrokerError> {
        self.swapping.set(false);
        let mut st = self.st.borrow_mut();
        let fail = |st: &mut super::State, e: std::io::Error| {
            st.failed = true;
            tracing::error!(topic = %self.topic, partition = self.index, "swapping in cleaned segments failed, the partition is offline until a restart finishes the swap: {e}");
            storage(&self.dir, e)
        };
        let fresh = match committed {
            Ok(fresh) => fresh,
            Err(e) => return Err(fail(&mut st, e)),
        };
        let olds: Vec<i64> = cleaned.segments.iter().flat_map(|s| s.replaces.iter().copied()).collect();
        let Some(at) = st.segments.iter().position(|s| Some(&s.base_offset) == olds.first()) else {
            // `begin_swap` holds them against everything that deletes segments.
            return Err(fail(
                &mut st,
                std::io::Error::other("the segments a cleaning replaced left the log during its swap"),
            ));
        };
        // An empty new segment still ends where its old ones did, for the offsets after it.
        for (seg, s) in fresh.iter().zip(&cleaned.segments) {
            let old_end = st.segments[at..at + olds.len()]
                .iter()
                .filter(|o| s.replaces.contains(&o.base_offset))
                .map(|o| o.next_offset.get())
                .max()
                .unwrap_or(s.base);
            seg.next_offset.set(seg.next_offset.get().max(old_end));
        }
        let removed: Vec<Segment> = st.segments.splice(at..at + olds.len(), fresh).collect();
        Segment::retire(removed);
        self.probe.log_bytes(cleaned.bytes_after as i64 - cleaned.bytes_before as i64);
        self.first_dirty.set(cleaned.map_end);
        self.cleaned_raft_start.set(job.keep_batches_from);
        let start = st.log_start;
        self.remove_segments_below(&mut st, start);
        Ok(())
    }

    /// Returns once no swap is under way (at once, mostly).
    pub(super) async fn swap_ended(&self) {
        while self.swapping.get() {
            glommio::timer::sleep(std::time::Duration::from_millis(1)).await;
        }
    }
}
