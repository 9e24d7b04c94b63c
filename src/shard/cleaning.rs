//! The shard's log cleaner: one cleaning at a time over the compacted logs homed here, the
//! dirtiest due first. The swap is checked and finished on the shard; its file work (the
//! fsyncs of the commit, opening the new segments) runs on the cleaner thread and the old
//! segments are dropped on the closer thread: all of it on the shard held every partition
//! of the shard up for 35–55 ms per cleaning of 3 GB, 0.14 ms now (the `swap_us` of the log
//! line). Metrics: bytes cleaned, cleaning time, the dirtiest log's dirty share and how many
//! logs are due.
//!
//! The reading and writing (see `log::cleaner`) runs on a thread of the shard's own, made at
//! its first cleaning on the shard's thread, so it inherits the shard's CPU placement, and
//! niced to 19 with the shortest slice (`sys::spawn_niced_beside`): it takes what the shard
//! leaves of its core, and little while the shard is busy (measured: at the default nice the
//! cleaner took 40% of a busy shard's produce throughput; `bench/run.sh compaction`). It is
//! held to `log_cleaner_io_max_bytes_per_second`, 100 MB/s unless set: with no core of its
//! own, an unlimited cleaning cost the shard's other partitions' p99 far more than the 10%
//! it may (see the setting). The SCHED_IDLE class instead, under which a
//! waking shard takes the core at once, was measured and not kept: the shard's max produce
//! on other partitions fell to 0.72× of the cleaner-off figure, where nice 19 kept 1.07×
//! (bench/results/2026-12-06-cleaner-scheduling.md, which also has a `sched_yield` every
//! 64 KiB, measured and not kept). This departs from running it on glommio's
//! blocking pool, whose one thread at the shard's own priority also serves sendfile's
//! page-ins and SASL: a cleaning there would hold those up for its whole length.

use std::cell::RefCell;
use std::io;
use std::rc::Rc;
use std::sync::mpsc;

use futures_channel::oneshot;

use super::Shard;
use crate::log::cleaner::{self, CleanerSettings};
use crate::log::partition::Due;
use crate::log::Partition;

/// How long a log whose cleaning failed (a batch the cleaner cannot read: corrupt on disk, or
/// a client's malformed batch from before the produce checks) is passed over. Kafka marks
/// such a partition uncleanable until the broker restarts (KIP-346); here the shard tries it
/// again after this long, and meanwhile cleans its other logs, which the failing one, ever
/// the dirtiest, would otherwise keep from ever being cleaned.
const FAILED_CLEANING_BACKOFF: std::time::Duration = std::time::Duration::from_secs(600);

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
        let logs: Vec<_> = self.logs.borrow().iter().map(|(tp, p)| (*tp, p.clone())).collect();
        let (mut due, mut max_ratio, mut best) = (0usize, 0f64, None);
        let started = std::time::Instant::now();
        self.cleaning_failed.borrow_mut().retain(|_, until| *until > started);
        for (tp, p) in logs {
            if self.cleaning_failed.borrow().contains_key(&tp) {
                continue;
            }
            // A replicated log is cleaned as its replica allows (`cluster::group`).
            let replica = self.cluster().and_then(|c| c.group(&tp)).filter(|_| p.is_replicated());
            let (ratio, job) = match &replica {
                Some(g) => g.cleaning_due(now, &settings),
                None => {
                    p.roll_if_idle();
                    p.cleaning_due(now, &settings)
                }
            };
            max_ratio = max_ratio.max(ratio);
            if let Some(d) = job {
                due += 1;
                if best.as_ref().is_none_or(|(_, _, _, b): &(_, _, _, Due)| d.dirty_ratio > b.dirty_ratio) {
                    best = Some((tp, p, replica, d));
                }
            }
        }
        self.probe.cleaner_backlog(due, max_ratio);
        let Some((tp, p, replica, d)) = best else { return false };
        let mut swap_us = 0;
        let job = d.job;
        let for_thread = job.clone();
        let cleaned = match on_cleaner_thread(move || cleaner::pass::run(&for_thread)).await {
            Ok(c) => c,
            Err(e) => {
                // The old segments are untouched.
                let minutes = FAILED_CLEANING_BACKOFF.as_secs() / 60;
                tracing::error!(topic = %job.topic, partition = job.partition, "cleaning failed, the log is passed over for {minutes} minutes: {e}");
                let _ = crate::storage::remove_dir_all(&job.dir.join(cleaner::pass::TMP_DIR));
                self.cleaning_failed.borrow_mut().insert(tp, std::time::Instant::now() + FAILED_CLEANING_BACKOFF);
                return false;
            }
        };
        // The swap: checked and finished on the shard, its file work on the cleaner thread,
        // where it holds up no partition of the shard (`Partition::commit_cleaned`). How long
        // the shard's own part took is logged.
        let began = match &replica {
            Some(g) => g.begin_swap(&cleaned),
            None => p.begin_swap(&cleaned),
        };
        let swapped = if began {
            let (dir, for_thread, interval) = (p.dir().to_path_buf(), cleaned.clone(), job.index_interval);
            let committed = on_cleaner_thread(move || Partition::commit_cleaned(&dir, &for_thread, interval)).await;
            let finish_started = std::time::Instant::now();
            let finished = match &replica {
                Some(g) => g.finish_swap(&job, &cleaned, committed),
                None => p.finish_swap(&job, &cleaned, committed),
            };
            swap_us = finish_started.elapsed().as_micros() as u64;
            finished.map(|()| true)
        } else {
            Ok(false)
        };
        match swapped {
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
                    swap_us,
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

/// A piece of blocking file work for the cleaner thread.
type Work = Box<dyn FnOnce() + Send>;

thread_local! {
    /// This shard's cleaner thread (every shard is a thread of its own), started on first use;
    /// it ends when the shard does and this sender goes.
    static CLEANER: RefCell<Option<mpsc::Sender<Work>>> = const { RefCell::new(None) };
}

/// Runs `work` on this shard's cleaner thread and returns its result; an error if the
/// thread cannot be started or stopped.
async fn on_cleaner_thread<T: Send + 'static>(work: impl FnOnce() -> io::Result<T> + Send + 'static) -> io::Result<T> {
    let sent = CLEANER.with(|slot| {
        let mut slot = slot.borrow_mut();
        if slot.is_none() {
            *slot = start_cleaner_thread();
        }
        let (tx, rx) = oneshot::channel();
        let work: Work = Box::new(move || {
            let _ = tx.send(work());
        });
        slot.as_ref()?.send(work).ok()?;
        Some(rx)
    });
    match sent {
        Some(rx) => rx.await.unwrap_or_else(|_| Err(io::Error::other("the cleaner thread stopped"))),
        None => Err(io::Error::other("cannot start the cleaner thread")),
    }
}

fn start_cleaner_thread() -> Option<mpsc::Sender<Work>> {
    let (tx, rx) = mpsc::channel::<Work>();
    let spawned = crate::sys::spawn_niced_beside("cleaner", move || {
        while let Ok(work) = rx.recv() {
            work();
        }
    });
    match spawned {
        Ok(()) => Some(tx),
        Err(e) => {
            tracing::error!("cannot start the cleaner thread: {e}");
            None
        }
    }
}
