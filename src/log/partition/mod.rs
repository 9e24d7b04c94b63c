//! One partition's log on its home shard: the appender (offset assignment, one writer task
//! per partition with group commit), the high watermark, reads for fetches and offset
//! lookups, recovery at open, roll and retention.
//!
//! Offsets are assigned when an append is queued, synchronously, so they follow arrival
//! order. A single writer task drains the queue: every batch that arrived while the previous
//! write (and fdatasync) was in flight is written with one `write_at` and made durable by one
//! fdatasync — group commit. The high watermark (what consumers may read) advances only over
//! data the flush policy has made durable:
//!
//! | policy     | producer ack after         | high watermark advances after |
//! |------------|----------------------------|-------------------------------|
//! | `always`   | write + fdatasync          | the same fdatasync            |
//! | `interval` | write (page cache)         | the periodic fdatasync        |
//! | `os`       | write (page cache)         | the write                     |
//!
//! A write the full disk refuses fails its batches and lets later appends try again; any
//! other failed write, sync or read leaves the partition offline: it answers
//! KAFKA_STORAGE_ERROR, and the next start recovers the log from disk.
//!
//! The parts: this file holds the state, opening (with recovery) and closing; `appender`
//! the write path; `reader` fetches and lookups; `retention` what moves the log start;
//! `compaction` a compacted log's side of a cleaning (see `log::cleaner`);
//! `replicated` and `replicated_start` the operations a raft replica drives.
//!
//! Metrics (through the home shard's probe): each fdatasync's latency (one per group
//! commit), and the bytes held in segment files, added as batches are written and
//! subtracted as retention or topic deletion removes them.

use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Instant;

use futures_channel::oneshot;
use glommio::channels::local_channel::{self, LocalSender};

mod appender;
mod compaction;
mod reader;
mod replicated;
mod replicated_start;
mod retention;

pub use compaction::Due;

use super::config::LogConfig;
use super::segment::{self, Segment};
use super::snapshot;
use crate::error::{storage, BrokerError};
use crate::metrics::Probe;
use crate::producer::ProducerState;
use crate::protocol::batch::BatchHeader;
use crate::protocol::response::FileRegion;
use crate::protocol::ErrorCode;
use crate::storage::Appender;

/// What a producer is told about its batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    pub base_offset: i64,
    pub log_start_offset: i64,
    /// The broker's clock stamped into the batch (LogAppendTime topics), else -1.
    pub log_append_time: i64,
}

/// A produced batch the log refused before giving it offsets, with what Kafka tells the
/// producer of it: the error, a message saying why, and the records at fault by their index
/// in the batch (KIP-467: Produce v8+ carries both; the Java producer fails those records
/// with the message and the others of the batch as merely batched with them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: ErrorCode,
    pub message: Option<String>,
    pub records: Vec<i32>,
}

impl From<ErrorCode> for Refusal {
    fn from(code: ErrorCode) -> Refusal {
        Refusal { code, message: None, records: Vec::new() }
    }
}

impl PartialEq<ErrorCode> for Refusal {
    fn eq(&self, code: &ErrorCode) -> bool {
        self.code == *code
    }
}

/// Offsets of the log at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Offsets {
    pub log_start: i64,
    pub high_watermark: i64,
    /// Offset the next appended batch gets.
    pub log_end: i64,
    /// Bytes in the log's segment files.
    pub size: u64,
}

/// Where a written batch starts: its segment (by base offset) and the position in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchLoc {
    pub segment: i64,
    pub pos: u64,
}

/// A fetch's view of the log.
#[derive(Debug, Clone)]
pub struct ReadOut {
    pub offsets: Offsets,
    pub records: Option<FileRegion>,
    /// Size of the first batch in `records`, which a response must never cut.
    pub first_batch_len: u32,
}

/// Where a producer's append result goes.
type AppendReply = oneshot::Sender<Result<Appended, ErrorCode>>;

/// A produced batch checked and rewritten for its topic, before it gets its offsets.
enum Prepared {
    New {
        /// The batch re-encoded for the topic's codec, if it had to be.
        rewritten: Option<Vec<u8>>,
        /// Its header, the base offset still unset.
        header: BatchHeader,
        /// The broker's clock to stamp in (LogAppendTime topics), else -1.
        log_append_time: i64,
    },
    /// A retry of a batch already in the log, with what its producer was told.
    Duplicate { appended: Appended, last_offset: i64 },
}

const CLEAN_MARKER: &str = ".clean-shutdown";
/// The log start offset DeleteRecords set, as decimal text (absent: the first segment's base).
const LOG_START_FILE: &str = "log-start-offset";

fn read_log_start(dir: &Path) -> Result<Option<i64>, BrokerError> {
    read_offset_file(&dir.join(LOG_START_FILE))
}

/// An offset kept as decimal text in its own file (None: no such file).
fn read_offset_file(path: &Path) -> Result<Option<i64>, BrokerError> {
    let path = path.to_path_buf();
    let Some(bytes) = crate::storage::read(&path).map_err(|e| storage(&path, e))? else { return Ok(None) };
    let text = String::from_utf8_lossy(&bytes);
    let not_an_offset = || std::io::Error::new(std::io::ErrorKind::InvalidData, format!("not an offset: {text:?}"));
    text.trim().parse().map(Some).map_err(|_| storage(&path, not_an_offset()))
}

struct Pending {
    header: BatchHeader,
    /// Where this batch starts in the queued buffer.
    at: usize,
    /// What the producer is told: the stamped time, or -1.
    log_append_time: i64,
    reply: Option<oneshot::Sender<Result<Appended, ErrorCode>>>,
}

#[derive(Default)]
struct Queue {
    buf: Vec<u8>,
    items: Vec<Pending>,
}

struct State {
    /// Raft owns this log (`replicated`): the high watermark moves only when it commits.
    replicated: bool,
    segments: Vec<Segment>,
    writer: Option<Rc<Appender>>,
    next_offset: i64,
    written: i64,
    hwm: i64,
    log_start: i64,
    /// The log start DeleteRecords stored, when it lies past the end recovery found (a crash
    /// took the unsynced tail under it); `log_start` is that end until the owner decides
    /// (`Partition::start_at_stored_start`, `make_replicated`).
    start_past_end: Option<i64>,
    failed: bool,
    unsynced_bytes: u64,
    unsynced_records: u64,
}

impl State {
    fn offsets(&self) -> Offsets {
        Offsets {
            log_start: self.log_start,
            high_watermark: self.hwm,
            log_end: self.written,
            size: self.segments.iter().map(|s| s.size.get()).sum(),
        }
    }
}

pub struct Partition {
    pub topic: String,
    pub index: i32,
    dir: PathBuf,
    /// Replaced when the topic's configs change (IncrementalAlterConfigs); read per use, so
    /// a new retention or segment size applies from the next append, roll or retention pass.
    cfg: Cell<LogConfig>,
    st: RefCell<State>,
    queue: RefCell<Queue>,
    wake: RefCell<Option<LocalSender<()>>>,
    waiters: RefCell<Vec<oneshot::Sender<()>>>,
    writer_done: RefCell<Option<oneshot::Receiver<()>>>,
    syncing: Cell<bool>,
    /// A sync is scheduled for the `flush.ms` bound (see `schedule_sync`).
    sync_scheduled: Cell<bool>,
    /// Idempotence state including queued batches: what new batches are checked against.
    producers: RefCell<ProducerState>,
    /// The same state over written batches only: what snapshots save, so a snapshot at
    /// offset X never holds a batch at X or later (a crash may take those back).
    producers_written: RefCell<ProducerState>,
    /// Retried batches answered with their first offsets once those are committed.
    duplicates: RefCell<Vec<(i64, Appended, AppendReply)>>,
    /// Offsets below are clean: where the last cleaning's key map ended (compacted topics).
    first_dirty: Cell<i64>,
    /// A replicated compacted log's raft log start when it was last cleaned (None: not yet
    /// known since the open): once it rises, the batches emptied below it can go.
    cleaned_raft_start: Cell<Option<i64>>,
    /// Where fetches stepping over long runs of emptied batches got to (`reader`).
    emptied_scans: RefCell<Vec<reader::EmptiedScan>>,
    /// Whether fresh data is read soon after it is written (`set_tail_cached`).
    tail_cached: Cell<bool>,
    /// A cleaning's segments are being put in place off the shard's thread
    /// (`begin_swap`..`finish_swap`): the segments it replaces must stay until it ends.
    swapping: Cell<bool>,
    /// Retention asked for the active segment to roll: every record in it has expired, and
    /// a segment goes only once it is not the active one (`active_expired`).
    roll_requested: Cell<bool>,
    /// The log was replaced (a leader's snapshot installed) since the last cleaning was
    /// planned: that cleaning read segments that are gone, whatever their offsets, and its
    /// swap is discarded (`begin_swap`).
    replaced: Cell<bool>,
    probe: Probe,
}

fn now_ms() -> i64 {
    crate::sys::unix_now_ms()
}

/// A segment sealed at roll (synced, its indexes trimmed): its tail state re-derived from its
/// last index entry, reading headers only (the data was verified when it was written or
/// recovered).
fn open_sealed(dir: &Path, base: i64, cap: usize, interval: u32) -> Result<Segment, BrokerError> {
    let mut seg = Segment::open(dir, base, 0, true)
        .or_else(|_| Segment::open(dir, base, cap, false))
        .map_err(|e| storage(dir, e))?;
    let from = seg.index.last().map_or(0, |(_, pos)| pos as u64);
    if from > seg.size.get() || (seg.index.last().is_none() && seg.size.get() > 0) {
        seg = Segment::open(dir, base, cap, false).map_err(|e| storage(dir, e))?;
        seg.rebuild(0, false, interval).map_err(|e| storage(&seg.path, e))?;
    } else {
        if let Some((ts, _)) = seg.time_index.last() {
            seg.max_timestamp.set(ts);
        }
        seg.rebuild(from, false, interval).map_err(|e| storage(&seg.path, e))?;
    }
    seg.seal_indexes().map_err(|e| storage(&seg.path, e))?;
    Ok(seg)
}

/// The active segment of a log closed cleanly, its indexes trusted: only the batches from
/// its last index entry on (a few KiB) are read, each checked whole. None when that check
/// cannot vouch for the segment: no usable index entry, an entry naming some other batch, or
/// anything but whole batches from there to the end of the file (a marker left stale, its
/// removal lost in a crash on a file system that does not order metadata, must not make
/// zeros written ahead, or a torn batch, count as data). The caller then scans it all.
fn open_closed_active(dir: &Path, base: i64, cap: usize, interval: u32) -> Result<Option<Segment>, BrokerError> {
    let Ok(mut seg) = Segment::open(dir, base, cap, true) else { return Ok(None) };
    let size = seg.size.get();
    let Some((rel, pos)) = seg.index.last() else {
        return Ok((size == 0).then_some(seg)); // empty, as a roll leaves it
    };
    let from = pos as u64;
    let indexed = seg.header_at(from, size).map_err(|e| storage(&seg.path, e))?;
    if indexed.is_none_or(|h| h.base_offset != base + i64::from(rel)) {
        return Ok(None);
    }
    if let Some((ts, _)) = seg.time_index.last() {
        seg.max_timestamp.set(ts);
    }
    let scan = seg.rebuild(from, true, interval).map_err(|e| storage(&seg.path, e))?;
    Ok((scan.batches > 0 && scan.valid_len == size).then_some(seg))
}

/// The active segment after an unclean stop, or one whose clean close cannot be trusted:
/// every batch verified and indexed afresh, the file cut at the first byte that is not part
/// of a whole batch (a torn write, unsynced garbage, preallocated zeros).
fn recover_active(
    dir: &Path,
    base: i64,
    cap: usize,
    interval: u32,
    topic: &str,
    index: i32,
) -> Result<Segment, BrokerError> {
    let mut seg = Segment::open(dir, base, cap, false).map_err(|e| storage(dir, e))?;
    let scan = seg.rebuild(0, true, interval).map_err(|e| storage(&seg.path, e))?;
    let size = seg.file.metadata().map_err(|e| storage(&seg.path, e))?.len();
    if scan.valid_len < size {
        let zeros = seg.zeros_from(scan.valid_len).map_err(|e| storage(&seg.path, e))?;
        let (kept, dropped) = (scan.valid_len, size - scan.valid_len);
        if zeros {
            tracing::info!(
                topic,
                partition = index,
                segment = base,
                kept,
                dropped,
                "cutting the preallocated zeros off the log tail"
            );
        } else {
            tracing::warn!(
                topic,
                partition = index,
                segment = base,
                kept,
                dropped,
                "truncating torn or corrupt log tail"
            );
        }
        seg.truncate_durably(scan.valid_len).map_err(|e| storage(&seg.path, e))?;
    }
    seg.size.set(scan.valid_len);
    Ok(seg)
}

impl Partition {
    pub fn dir_name(topic: &str, index: i32) -> String {
        format!("{topic}-{index}")
    }

    /// Opens (or creates) the log in `dir`, recovering it if the last shutdown was not
    /// clean, and starts its writer task on the current shard.
    pub async fn open(
        topic: &str,
        index: i32,
        dir: PathBuf,
        cfg: LogConfig,
        probe: Probe,
    ) -> Result<Rc<Partition>, BrokerError> {
        crate::storage::create_dir_all(&dir).map_err(|e| storage(&dir, e))?;
        // A cleaning the last run committed is finished before the segments are listed;
        // one it had not committed is thrown away.
        if crate::log::cleaner::swap::recover(&dir).map_err(|e| storage(&dir, e))? {
            tracing::info!(topic, partition = index, "finished swapping in cleaned segments");
        }
        let first_dirty = read_offset_file(&dir.join(compaction::CHECKPOINT_FILE))?.unwrap_or(0);
        let marker = dir.join(CLEAN_MARKER);
        let clean = marker.exists();
        let mut bases: Vec<i64> = crate::storage::list(&dir)
            .map_err(|e| storage(&dir, e))?
            .iter()
            .filter_map(|p| p.file_name()?.to_str().and_then(segment::parse_log_name))
            .collect();
        bases.sort_unstable();
        let fresh = bases.is_empty();
        if fresh {
            bases.push(0);
        }
        let cap = cfg.index_capacity();
        let interval = cfg.index_interval_bytes;
        let mut segments = Vec::with_capacity(bases.len());
        for (i, &base) in bases.iter().enumerate() {
            let last = i + 1 == bases.len();
            let seg = match (last, clean) {
                (false, _) => open_sealed(&dir, base, cap, interval)?,
                (true, true) => match open_closed_active(&dir, base, cap, interval)? {
                    Some(seg) => seg,
                    None => {
                        // Nothing says where the good data ends, and taking the segment's
                        // base for its end would hand its offsets out again.
                        tracing::warn!(
                            topic,
                            partition = index,
                            segment = base,
                            "the cleanly closed log's tail does not check out: scanning the whole active segment"
                        );
                        probe.log_recovery();
                        recover_active(&dir, base, cap, interval, topic, index)?
                    }
                },
                (true, false) => {
                    // The tail may be torn or hold unsynced garbage: verify every batch.
                    if !fresh {
                        tracing::info!(
                            topic,
                            partition = index,
                            segment = base,
                            "no clean-shutdown marker: scanning the log tail"
                        );
                        probe.log_recovery();
                    }
                    recover_active(&dir, base, cap, interval, topic, index)?
                }
            };
            seg.committed.set(seg.size.get());
            if seg.size.get() > 0 {
                seg.first_append.set(Some(Instant::now()));
            }
            segments.push(seg);
        }
        if clean {
            // The marker goes for good before anything is written: a crash from here on must
            // find it absent and recover.
            crate::storage::remove_file(&marker).map_err(|e| storage(&marker, e))?;
            crate::storage::sync_dir(&dir).map_err(|e| storage(&dir, e))?;
        }
        let next = segments.last().map_or(0, |s| s.next_offset.get());
        let producers = snapshot::recover(&dir, &segments, next, now_ms()).map_err(|e| storage(&dir, e))?;
        // DeleteRecords may have moved the log start into the first segment.
        let stored_start = read_log_start(&dir)?;
        let log_start = stored_start.unwrap_or(0).clamp(segments[0].base_offset, next);
        let start_past_end = stored_start.filter(|&stored| stored > next);
        let active_path = segments.last().expect("one segment").path.clone();
        let writer = appender::open_writer(&active_path, &cfg, true).await?;
        let (tx, rx) = local_channel::new_bounded(1);
        let (done_tx, done_rx) = oneshot::channel();
        probe.log_bytes(segments.iter().map(|s| s.size.get() as i64).sum());
        let p = Rc::new(Partition {
            topic: topic.to_string(),
            index,
            dir,
            cfg: Cell::new(cfg),
            st: RefCell::new(State {
                replicated: false,
                segments,
                writer: Some(writer),
                next_offset: next,
                written: next,
                hwm: next,
                log_start,
                start_past_end,
                failed: false,
                unsynced_bytes: 0,
                unsynced_records: 0,
            }),
            queue: RefCell::new(Queue::default()),
            wake: RefCell::new(Some(tx)),
            waiters: RefCell::new(Vec::new()),
            writer_done: RefCell::new(Some(done_rx)),
            syncing: Cell::new(false),
            sync_scheduled: Cell::new(false),
            producers_written: RefCell::new(producers.clone()),
            producers: RefCell::new(producers),
            duplicates: RefCell::new(Vec::new()),
            first_dirty: Cell::new(first_dirty),
            cleaned_raft_start: Cell::new(None),
            emptied_scans: RefCell::new(Vec::new()),
            tail_cached: Cell::new(true),
            swapping: Cell::new(false),
            roll_requested: Cell::new(false),
            replaced: Cell::new(false),
            probe,
        });
        let writer = p.clone();
        glommio::spawn_local(async move {
            writer.write_loop(rx).await;
            let _ = done_tx.send(());
        })
        .detach();
        Ok(p)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The home shard's probe, for what the layers over the log record of this partition.
    pub fn probe(&self) -> &Probe {
        &self.probe
    }

    pub fn offsets(&self) -> Offsets {
        let st = self.st.borrow();
        st.offsets()
    }

    /// New settings from the topic's configs; they apply from the next append, roll or
    /// retention pass (an active segment keeps its index, and rolls early if that fills).
    pub fn set_config(&self, cfg: LogConfig) {
        self.cfg.set(cfg);
    }

    /// The settings in force.
    pub fn config(&self) -> LogConfig {
        self.cfg.get()
    }

    /// The idempotent producers with state in this partition (DescribeProducers).
    pub fn producers(&self) -> Vec<crate::producer::ProducerSummary> {
        self.producers_written.borrow().summaries()
    }

    /// Stops the writer after the queued appends, syncs, trims the active indexes and
    /// leaves the marker that lets the next start skip recovery.
    pub async fn close(&self) -> Result<(), BrokerError> {
        self.swap_ended().await;
        self.wake.borrow_mut().take();
        let done = self.writer_done.borrow_mut().take();
        if let Some(done) = done {
            let _ = done.await;
        }
        if self.st.borrow().failed {
            return Ok(()); // leave it to recovery
        }
        if let Some(seg) = self.st.borrow().segments.last() {
            seg.trim().map_err(|e| storage(&seg.path, e))?;
        }
        self.sync().await?;
        let mut st = self.st.borrow_mut();
        if let Some(seg) = st.segments.last_mut() {
            seg.seal_indexes().map_err(|e| storage(&seg.path, e))?;
        }
        let end = st.written;
        drop(st);
        self.write_producer_snapshot(end)?;
        crate::storage::write_file(&self.dir.join(CLEAN_MARKER), b"").map_err(|e| storage(&self.dir, e))?;
        Ok(())
    }

    /// Saves the idempotence state as of `offset` (everything before it is covered), after
    /// dropping expired producers, so recovery only rescans batches after it.
    fn write_producer_snapshot(&self, offset: i64) -> Result<(), BrokerError> {
        self.expire_producers(now_ms());
        snapshot::write(&self.dir, offset, &self.producers_written.borrow()).map_err(|e| storage(&self.dir, e))
    }

    /// Forgets the producers idle for longer than `producer.id.expiration.ms`: at every roll,
    /// and from the shard's periodic pass (as Kafka's producer expiration check), so that a
    /// log that seldom rolls does not keep every short-lived producer it has seen. Returns how
    /// many went.
    pub fn expire_producers(&self, now_ms: i64) -> usize {
        let expiry = self.cfg.get().producer_id_expiration_ms;
        let expired = self.producers.borrow_mut().expire(now_ms, expiry);
        self.producers_written.borrow_mut().expire(now_ms, expiry);
        if expired > 0 {
            tracing::debug!(topic = %self.topic, partition = self.index, expired, "expired idle producer ids");
        }
        expired
    }

    /// Removes the partition's files (topic deletion). The caller has closed it.
    pub fn delete_files(&self) -> std::io::Result<()> {
        let size: u64 = self.st.borrow().segments.iter().map(|s| s.size.get()).sum();
        self.probe.log_bytes(-(size as i64));
        crate::storage::remove_dir_all(&self.dir)
    }

    pub fn segment_count(&self) -> usize {
        self.st.borrow().segments.len()
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_compaction;
#[cfg(test)]
mod tests_replicated;
