//! The shard's log cleaner: one cleaning at a time over the compacted logs homed here, the
//! dirtiest due first; the reading and writing runs on the blocking pool (see
//! `log::cleaner`), the swap back on the shard. Metrics: bytes cleaned, cleaning time, the
//! dirtiest log's dirty share and how many logs are due.

use std::rc::Rc;

use super::Shard;
use crate::log::cleaner::{self, CleanerSettings};
use crate::log::partition::Due;

impl Shard {
    /// The cleaner settings of this shard: its share of the dedupe buffer, the I/O bound.
    fn cleaner_settings(&self) -> CleanerSettings {
        let share = self.config.log_cleaner_dedupe_buffer_size / self.count.max(1) as u64;
        let limit = self.config.log_cleaner_io_max_bytes_per_second;
        CleanerSettings {
            map_capacity: cleaner::keymap::KeyMap::capacity_for(share),
            io_limit: (limit > 0).then_some(limit),
        }
    }

    /// Cleans the dirtiest compacted log that is due, if any; returns whether one was.
    pub async fn clean_once(self: &Rc<Self>) -> bool {
        let settings = self.cleaner_settings();
        let now = crate::sys::unix_now_ms();
        let logs: Vec<_> = self.logs.borrow().values().cloned().collect();
        let (mut due, mut max_ratio, mut best) = (0usize, 0f64, None);
        for p in logs {
            let (ratio, job) = p.cleaning_due(now, &settings);
            max_ratio = max_ratio.max(ratio);
            if let Some(d) = job {
                due += 1;
                if best.as_ref().is_none_or(|(_, b): &(_, Due)| d.dirty_ratio > b.dirty_ratio) {
                    best = Some((p, d));
                }
            }
        }
        self.probe.cleaner_backlog(due, max_ratio);
        let Some((p, d)) = best else { return false };
        let job = d.job;
        let for_pool = job.clone();
        let result = glommio::executor().spawn_blocking(move || cleaner::pass::run(&for_pool)).await;
        let cleaned = match result {
            Ok(c) => c,
            Err(e) => {
                // The old segments are untouched; the next check tries again.
                tracing::error!(topic = %job.topic, partition = job.partition, "cleaning failed: {e}");
                let _ = crate::storage::remove_dir_all(&job.dir.join(cleaner::pass::TMP_DIR));
                return false;
            }
        };
        match p.swap_cleaned(&job, &cleaned) {
            Ok(true) => {
                self.probe.cleaned(cleaned.bytes_before, cleaned.bytes_after, cleaned.elapsed);
                let c = cleaned.counts;
                tracing::info!(
                    topic = %job.topic,
                    partition = job.partition,
                    dirty_ratio = format!("{:.2}", d.dirty_ratio),
                    segments = cleaned.segments.len(),
                    bytes_before = cleaned.bytes_before,
                    bytes_after = cleaned.bytes_after,
                    kept = c.records_kept,
                    superseded = c.superseded,
                    tombstones_removed = c.tombstones_removed,
                    keyless_removed = c.keyless,
                    clean_up_to = cleaned.map_end,
                    ms = cleaned.elapsed.as_millis() as u64,
                    "log cleaned"
                );
                true
            }
            Ok(false) => false,
            Err(e) => {
                tracing::error!(topic = %job.topic, partition = job.partition, "cleaning not swapped in: {e}");
                false
            }
        }
    }
}
