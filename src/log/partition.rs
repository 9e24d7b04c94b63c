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
//! A failed write or sync leaves the partition failed: later appends get
//! KAFKA_STORAGE_ERROR, and the next start recovers the log from disk.
//!
//! Metrics (through the home shard's probe): each fdatasync's latency (one per group
//! commit), and the bytes held in segment files, added as batches are written and
//! subtracted as retention or topic deletion removes them.

use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use futures_channel::oneshot;
use glommio::channels::local_channel::{self, LocalReceiver, LocalSender};
use glommio::io::BufferedFile;

use super::config::{Durability, LogConfig, TimestampType, TopicCompression, NEVER};
use super::segment::{self, Segment};
use super::snapshot;
use crate::error::BrokerError;
use crate::metrics::Probe;
use crate::producer::{ProducerState, Verdict};
use crate::protocol::batch::{self, BatchError, BatchHeader};
use crate::protocol::response::FileRegion;
use crate::protocol::ErrorCode;

/// What a producer is told about its batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    pub base_offset: i64,
    pub log_start_offset: i64,
    /// The broker's clock stamped into the batch (LogAppendTime topics), else -1.
    pub log_append_time: i64,
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

const CLEAN_MARKER: &str = ".clean-shutdown";
/// The log start offset DeleteRecords set, as decimal text (absent: the first segment's base).
const LOG_START_FILE: &str = "log-start-offset";

fn read_log_start(dir: &Path) -> Result<Option<i64>, BrokerError> {
    let path = dir.join(LOG_START_FILE);
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
    segments: Vec<Segment>,
    writer: Option<Rc<BufferedFile>>,
    next_offset: i64,
    written: i64,
    hwm: i64,
    log_start: i64,
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
    probe: Probe,
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

fn storage(path: &Path, source: std::io::Error) -> BrokerError {
    BrokerError::Storage { path: path.to_path_buf(), source }
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
        let cap = Segment::index_capacity(cfg.segment_bytes, cfg.index_interval_bytes);
        let interval = cfg.index_interval_bytes;
        let mut segments = Vec::with_capacity(bases.len());
        for (i, &base) in bases.iter().enumerate() {
            let last = i + 1 == bases.len();
            let seg = if last && !clean {
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
                let mut seg = Segment::open(&dir, base, cap, false).map_err(|e| storage(&dir, e))?;
                let scan = seg.rebuild(0, true, interval).map_err(|e| storage(&seg.path, e))?;
                let size = seg.file.metadata().map_err(|e| storage(&seg.path, e))?.len();
                if scan.valid_len < size {
                    tracing::warn!(
                        topic,
                        partition = index,
                        segment = base,
                        kept = scan.valid_len,
                        dropped = size - scan.valid_len,
                        "truncating torn or corrupt log tail"
                    );
                    seg.truncate(scan.valid_len).map_err(|e| storage(&seg.path, e))?;
                    crate::storage::sync(&seg.file, &seg.path).map_err(|e| storage(&seg.path, e))?;
                }
                seg.size.set(scan.valid_len);
                seg
            } else {
                // Sealed segments were synced and their indexes trimmed at roll; the active
                // one was closed cleanly. Re-derive the tail state from the last index entry.
                let mut seg = Segment::open(&dir, base, if last { cap } else { 0 }, true)
                    .or_else(|_| Segment::open(&dir, base, cap, false))
                    .map_err(|e| storage(&dir, e))?;
                let from = seg.index.last().map_or(0, |(_, pos)| pos as u64);
                let size = seg.size.get();
                let indexed = from > 0 || seg.index.last().is_some();
                if from > size || (!indexed && size > 0) {
                    seg = Segment::open(&dir, base, cap, false).map_err(|e| storage(&dir, e))?;
                    seg.rebuild(0, false, interval).map_err(|e| storage(&seg.path, e))?;
                } else {
                    // headers only: the data was verified when it was written or recovered
                    if let Some((ts, _)) = seg.time_index.last() {
                        seg.max_timestamp.set(ts);
                    }
                    seg.rebuild(from, false, interval).map_err(|e| storage(&seg.path, e))?;
                }
                if !last {
                    seg.seal_indexes().map_err(|e| storage(&seg.path, e))?;
                }
                seg
            };
            seg.committed.set(seg.size.get());
            if seg.size.get() > 0 {
                seg.first_append.set(Some(Instant::now()));
            }
            segments.push(seg);
        }
        let _ = crate::storage::remove_file(&marker);
        let next = segments.last().map_or(0, |s| s.next_offset.get());
        let producers = snapshot::recover(&dir, &segments, next, now_ms()).map_err(|e| storage(&dir, e))?;
        // DeleteRecords may have moved the log start into the first segment.
        let log_start = read_log_start(&dir)?.unwrap_or(0).clamp(segments[0].base_offset, next);
        let active_path = segments.last().expect("one segment").path.clone();
        let writer = crate::storage::open_appender(&active_path).await.map_err(|e| storage(&active_path, e))?;
        let (tx, rx) = local_channel::new_bounded(1);
        let (done_tx, done_rx) = oneshot::channel();
        probe.log_bytes(segments.iter().map(|s| s.size.get() as i64).sum());
        let p = Rc::new(Partition {
            topic: topic.to_string(),
            index,
            dir,
            cfg: Cell::new(cfg),
            st: RefCell::new(State {
                segments,
                writer: Some(Rc::new(writer)),
                next_offset: next,
                written: next,
                hwm: next,
                log_start,
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

    pub fn offsets(&self) -> Offsets {
        let st = self.st.borrow();
        st.offsets()
    }

    /// Validates one produced batch, rewrites it where the topic's configs say (recompression
    /// for `compression.type`, the broker's clock for LogAppendTime) and queues it; resolves
    /// once the batch is acknowledged under the flush policy (see the module table).
    /// `min.insync.replicas` asks nothing more here: Kafka 4 waits for at most as many
    /// in-sync replicas as the partition has (KIP-966), and a partition has one.
    pub fn append(&self, records: &Bytes) -> Result<oneshot::Receiver<Result<Appended, ErrorCode>>, ErrorCode> {
        let cfg = self.cfg.get();
        let refuse = |e: BatchError| {
            tracing::debug!(topic = %self.topic, partition = self.index, "refused batch: {e}");
            e.code()
        };
        let header = batch::validate_produce(records, cfg.message_max_bytes as usize).map_err(refuse)?;
        let now = now_ms();
        if cfg.timestamp_type == TimestampType::CreateTime {
            check_timestamps(records, &header, &cfg, now).map_err(refuse)?;
        }
        let mut st = self.st.borrow_mut();
        if st.failed {
            return Err(ErrorCode::KafkaStorageError);
        }
        let (tx, rx) = oneshot::channel();
        match self.producers.borrow().check(&header)? {
            Verdict::Append => {}
            Verdict::Duplicate { first_offset, last_offset, max_timestamp } => {
                // A retry: answer with the first append's offsets, once those are committed.
                let log_append_time =
                    if cfg.timestamp_type == TimestampType::LogAppendTime { max_timestamp } else { -1 };
                let a = Appended { base_offset: first_offset, log_start_offset: st.log_start, log_append_time };
                if st.hwm > last_offset {
                    let _ = tx.send(Ok(a));
                } else {
                    self.duplicates.borrow_mut().push((last_offset, a, tx));
                }
                return Ok(rx);
            }
        }
        let rewritten = match cfg.compression {
            TopicCompression::Codec(codec) if codec != header.codec() => {
                let b = batch::recompress(records, codec, cfg.decompressed_limit()).map_err(refuse)?;
                if b.len() > cfg.message_max_bytes as usize {
                    return Err(refuse(BatchError::TooLarge { size: b.len(), max: cfg.message_max_bytes as usize }));
                }
                Some(b)
            }
            _ => None,
        };
        let bytes: &[u8] = rewritten.as_deref().unwrap_or(records);
        let mut header = BatchHeader { size: bytes.len(), ..batch::read_header(bytes).map_err(refuse)? };
        let log_append_time = match cfg.timestamp_type {
            TimestampType::LogAppendTime => {
                header.max_timestamp = now;
                now
            }
            TimestampType::CreateTime => -1,
        };
        let base = st.next_offset;
        st.next_offset += header.record_count as i64;
        drop(st);
        header.base_offset = base;
        self.producers.borrow_mut().update(&header, now);
        let mut q = self.queue.borrow_mut();
        let at = q.buf.len();
        q.buf.extend_from_slice(bytes);
        if log_append_time >= 0 {
            batch::stamp_log_append_time(&mut q.buf[at..], now);
        }
        batch::patch(&mut q.buf[at..], base, 0);
        q.items.push(Pending { header, at, log_append_time, reply: Some(tx) });
        drop(q);
        if let Some(w) = self.wake.borrow().as_ref() {
            let _ = w.try_send(()); // full means a wake-up is already pending
        }
        Ok(rx)
    }

    async fn write_loop(self: Rc<Self>, wake: LocalReceiver<()>) {
        while wake.recv().await.is_some() {
            loop {
                let q = std::mem::take(&mut *self.queue.borrow_mut());
                if q.items.is_empty() {
                    break;
                }
                let Queue { buf, mut items } = q;
                let (written, result) = self.write_queued(buf, &items).await;
                if let Err(e) = &result {
                    self.write_failed(e, items.len() - written);
                }
                let log_start = self.st.borrow().log_start;
                for (i, it) in items.iter_mut().enumerate() {
                    let r = match i < written {
                        true => Ok(Appended {
                            base_offset: it.header.base_offset,
                            log_start_offset: log_start,
                            log_append_time: it.log_append_time,
                        }),
                        false => Err(ErrorCode::KafkaStorageError),
                    };
                    if let Some(tx) = it.reply.take() {
                        let _ = tx.send(r);
                    }
                }
            }
        }
    }

    /// After a write stopped with `e`, `refused` of the drained batches unwritten. A full
    /// disk refuses just those batches (and the ones queued meanwhile, whose offsets came
    /// after them): the part that landed is cut, offsets and idempotence state go back to
    /// what was written, and the next append tries again, so writes resume once space is
    /// freed. Any other error (EIO, a failed sync) takes the partition offline: it answers
    /// KAFKA_STORAGE_ERROR until the broker restarts and recovers it from disk.
    fn write_failed(&self, e: &BrokerError, refused: usize) {
        let queued = std::mem::take(&mut *self.queue.borrow_mut()).items;
        for mut it in queued {
            if let Some(tx) = it.reply.take() {
                let _ = tx.send(Err(ErrorCode::KafkaStorageError));
            }
        }
        if e.is_no_space() && !self.st.borrow().failed {
            let mut st = self.st.borrow_mut();
            let seg = st.segments.last().expect("active segment");
            if let Err(cut) = seg.truncate(seg.size.get()) {
                tracing::warn!(topic = %self.topic, partition = self.index, "cannot cut a failed write's tail (recovery will): {cut}");
            }
            st.next_offset = st.written;
            drop(st);
            *self.producers.borrow_mut() = self.producers_written.borrow().clone();
            self.probe.log_write_refused();
            tracing::warn!(topic = %self.topic, partition = self.index, refused, "append refused, writes resume when the disk has room: {e}");
            return;
        }
        tracing::error!(topic = %self.topic, partition = self.index, "log write failed, the partition is offline until a restart recovers it: {e}");
        self.st.borrow_mut().failed = true;
        for (_, _, tx) in self.duplicates.borrow_mut().drain(..) {
            let _ = tx.send(Err(ErrorCode::KafkaStorageError));
        }
    }

    /// Writes the queued batches, segment by segment, then makes what was written durable
    /// under the flush policy. Returns how many of `items` are written and acknowledged as
    /// the policy says, and the error that stopped the rest.
    async fn write_queued(self: &Rc<Self>, mut buf: Vec<u8>, items: &[Pending]) -> (usize, Result<(), BrokerError>) {
        let mut first = 0;
        let mut buf_base = 0; // position in the original buffer where `buf` starts
        let mut stopped = None;
        while first < items.len() {
            let need = items[first].header.size as u64;
            if let Err(e) = self.roll_if_needed(need).await {
                stopped = Some(e);
                break;
            }
            let (writer, pos, path) = {
                let st = self.st.borrow();
                let seg = st.segments.last().expect("active segment");
                (st.writer.clone().expect("writer"), seg.size.get(), seg.path.clone())
            };
            // Take every batch that still fits in this segment.
            let room = self.cfg.get().segment_bytes.saturating_sub(pos);
            let mut last = first + 1;
            while last < items.len() && (items[last].at + items[last].header.size - items[first].at) as u64 <= room {
                last += 1;
            }
            let end = items.get(last).map_or(buf_base + buf.len(), |it| it.at);
            let rest = buf.split_off(end - buf_base);
            let chunk = std::mem::replace(&mut buf, rest);
            buf_base = end;
            let len = chunk.len();
            if let Err(e) = crate::storage::append_at(&writer, &path, chunk, pos).await {
                stopped = Some(storage(&path, e));
                break;
            }
            let mut st = self.st.borrow_mut();
            let interval = self.cfg.get().index_interval_bytes;
            let seg = st.segments.last_mut().expect("active segment");
            let mut at = pos;
            let mut written = self.producers_written.borrow_mut();
            let now = now_ms();
            for it in &items[first..last] {
                seg.note_batch(&it.header, at, interval);
                written.update(&it.header, now);
                at += it.header.size as u64;
            }
            drop(written);
            if seg.first_append.get().is_none() {
                seg.first_append.set(Some(Instant::now()));
            }
            seg.size.set(pos + len as u64);
            self.probe.log_bytes(len as i64);
            st.written = items[last - 1].header.last_offset() + 1;
            st.unsynced_bytes += len as u64;
            st.unsynced_records += items[first..last].iter().map(|it| it.header.record_count as u64).sum::<u64>();
            first = last;
        }
        if first > 0 {
            if let Err(e) = self.make_durable().await {
                return (0, Err(e));
            }
        }
        (first, stopped.map_or(Ok(()), Err))
    }

    /// What the flush policy asks after a write: sync now, schedule one, or nothing.
    async fn make_durable(self: &Rc<Self>) -> Result<(), BrokerError> {
        match self.cfg.get().durability() {
            Durability::Always => self.sync().await?,
            Durability::Interval { messages, bytes, ms } => {
                let due = {
                    let st = self.st.borrow();
                    st.unsynced_bytes >= bytes || st.unsynced_records >= messages
                };
                if due {
                    self.sync().await?
                } else {
                    self.schedule_sync(ms);
                }
            }
            Durability::Os => self.advance_hwm(),
        }
        Ok(())
    }

    /// Syncs `ms` from now unless a sync is already scheduled: the `flush.ms` bound on how
    /// long written data stays unsynced (and out of consumers' reach).
    fn schedule_sync(self: &Rc<Self>, ms: u64) {
        if self.sync_scheduled.replace(true) {
            return;
        }
        let p = self.clone();
        glommio::spawn_local(async move {
            glommio::timer::sleep(Duration::from_millis(ms)).await;
            p.sync_scheduled.set(false);
            if let Err(e) = p.sync_if_dirty().await {
                tracing::error!(topic = %p.topic, partition = p.index, "scheduled flush failed: {e}");
            }
        })
        .detach();
    }

    /// fdatasync the active segment and advance the high watermark over what it covered. A
    /// failed sync takes the partition offline: what it covered may be lost from the page
    /// cache, so nothing after the last good sync is served or acknowledged.
    pub async fn sync(&self) -> Result<(), BrokerError> {
        // What this sync covers, captured before it starts: a roll may happen meanwhile.
        let (writer, written, base, size, unsynced, unsynced_records, path) = {
            let st = self.st.borrow();
            let seg = st.segments.last();
            (
                st.writer.clone(),
                st.written,
                seg.map_or(0, |s| s.base_offset),
                seg.map_or(0, |s| s.size.get()),
                st.unsynced_bytes,
                st.unsynced_records,
                seg.map_or_else(|| self.dir.clone(), |s| s.path.clone()),
            )
        };
        let Some(writer) = writer else { return Ok(()) };
        self.syncing.set(true);
        let started = Instant::now();
        let r = crate::storage::fdatasync(&writer, &path).await;
        self.probe.fsync(started.elapsed());
        self.syncing.set(false);
        if let Err(e) = r {
            self.st.borrow_mut().failed = true;
            tracing::error!(topic = %self.topic, partition = self.index, "fdatasync failed, the partition is offline until a restart recovers it: {e}");
            return Err(storage(&path, e));
        }
        {
            let mut st = self.st.borrow_mut();
            if written > st.hwm {
                st.hwm = written;
                if let Some(seg) = st.segments.iter().rev().find(|s| s.base_offset == base) {
                    seg.committed.set(seg.committed.get().max(size));
                }
            }
            st.unsynced_bytes = st.unsynced_bytes.saturating_sub(unsynced);
            st.unsynced_records = st.unsynced_records.saturating_sub(unsynced_records);
        }
        self.wake_waiters();
        Ok(())
    }

    /// For the `interval` policy's timer: sync when something was written since the last sync.
    pub async fn sync_if_dirty(&self) -> Result<(), BrokerError> {
        let dirty = {
            let st = self.st.borrow();
            st.written > st.hwm && !st.failed
        };
        if dirty && !self.syncing.get() {
            self.sync().await?;
        }
        Ok(())
    }

    fn advance_hwm(&self) {
        {
            let mut st = self.st.borrow_mut();
            st.hwm = st.written;
            if let Some(seg) = st.segments.last() {
                seg.committed.set(seg.size.get());
            }
        }
        self.wake_waiters();
    }

    fn wake_waiters(&self) {
        for w in self.waiters.borrow_mut().drain(..) {
            let _ = w.send(());
        }
        let hwm = self.st.borrow().hwm;
        let mut dups = self.duplicates.borrow_mut();
        if !dups.is_empty() {
            let (ready, waiting): (Vec<_>, Vec<_>) = dups.drain(..).partition(|(last, _, _)| *last < hwm);
            *dups = waiting;
            for (_, a, tx) in ready {
                let _ = tx.send(Ok(a));
            }
        }
    }

    /// Resolves once the high watermark passes `offset` (at once if it already has).
    pub fn watch(&self, offset: i64, tx: oneshot::Sender<()>) {
        if self.st.borrow().hwm > offset {
            let _ = tx.send(());
            return;
        }
        let mut w = self.waiters.borrow_mut();
        w.retain(|t| !t.is_canceled());
        w.push(tx);
    }

    /// New settings from the topic's configs; they apply from the next append, roll or
    /// retention pass (an active segment keeps its index, and rolls early if that fills).
    pub fn set_config(&self, cfg: LogConfig) {
        self.cfg.set(cfg);
    }

    async fn roll_if_needed(&self, need: u64) -> Result<(), BrokerError> {
        let roll = {
            let st = self.st.borrow();
            let seg = st.segments.last().expect("active segment");
            let size = seg.size.get();
            size > 0
                && (size + need > self.cfg.get().segment_bytes
                    || seg.index.is_full()
                    || seg
                        .first_append
                        .get()
                        .is_some_and(|t| t.elapsed() >= Duration::from_millis(self.cfg.get().segment_ms)))
        };
        if !roll {
            return Ok(());
        }
        // Seal the old segment durably, whatever the policy, so that recovery after a crash
        // only ever needs to scan the newest segment.
        self.sync().await?;
        let (base, path) = {
            let mut st = self.st.borrow_mut();
            let base = st.written;
            let seg = st.segments.last_mut().expect("active segment");
            seg.seal_indexes().map_err(|e| storage(&seg.path, e))?;
            (base, self.dir.join(segment::file_name(base, "log")))
        };
        self.write_producer_snapshot(base)?;
        let cap = Segment::index_capacity(self.cfg.get().segment_bytes, self.cfg.get().index_interval_bytes);
        let seg = Segment::open(&self.dir, base, cap, false).map_err(|e| storage(&path, e))?;
        let writer = crate::storage::open_appender(&path).await.map_err(|e| storage(&path, e))?;
        // The new file's directory entry must survive a crash too.
        crate::storage::sync_dir(&self.dir).map_err(|e| storage(&self.dir, e))?;
        let mut st = self.st.borrow_mut();
        st.segments.push(seg);
        st.writer = Some(Rc::new(writer));
        tracing::debug!(topic = %self.topic, partition = self.index, base, "rolled segment");
        Ok(())
    }

    /// The records a fetch at `offset` gets: from the batch containing `offset`, at most
    /// `max_bytes` (the first batch whole when `min_one`), never past the high watermark.
    pub fn read(&self, offset: i64, max_bytes: u32, min_one: bool) -> Result<ReadOut, ErrorCode> {
        let st = self.st.borrow();
        if st.failed {
            return Err(ErrorCode::KafkaStorageError);
        }
        let offsets = st.offsets();
        if offset < st.log_start || offset > st.hwm {
            return Err(ErrorCode::OffsetOutOfRange);
        }
        if offset == st.hwm {
            return Ok(ReadOut { offsets, records: None, first_batch_len: 0 });
        }
        let i = st.segments.partition_point(|s| s.base_offset <= offset).saturating_sub(1);
        for seg in &st.segments[i..] {
            match seg.find(offset.max(seg.base_offset)) {
                Ok(Some((pos, h))) => {
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

    /// ListOffsets: the first record with a timestamp >= `ts`, as (offset, timestamp); `None`
    /// when no such record is committed. After DeleteRecords moved the log start into a
    /// batch, a match below the start answers the start.
    pub fn offset_for_time(&self, ts: i64) -> Result<Option<(i64, i64)>, ErrorCode> {
        let st = self.st.borrow();
        for seg in &st.segments {
            if seg.max_timestamp.get() < ts {
                continue;
            }
            match seg.find_by_time(ts) {
                Ok(Some(h)) => {
                    let (offset, found_ts) = first_record_at(seg, &h, ts, self.cfg.get().decompressed_limit())
                        .unwrap_or((h.base_offset, h.max_timestamp));
                    return Ok(Some((offset.max(st.log_start), found_ts)).filter(|(o, _)| *o < st.hwm));
                }
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

    /// ListOffsets MAX_TIMESTAMP: the batch holding the largest timestamp.
    pub fn max_timestamp_offset(&self) -> Option<(i64, i64)> {
        let st = self.st.borrow();
        let seg = st.segments.iter().filter(|s| s.max_timestamp.get() >= 0).max_by_key(|s| s.max_timestamp.get())?;
        let ts = seg.max_timestamp.get();
        let h = seg.find_by_time(ts).ok()??;
        // The first record carrying the maximum, as Kafka answers.
        let (offset, _) =
            first_record_at(seg, &h, ts, self.cfg.get().decompressed_limit()).unwrap_or((h.base_offset, ts));
        Some((offset.max(st.log_start).min(st.hwm - 1), ts))
    }

    /// DeleteRecords: moves the log start to `offset` (-1: the high watermark), durably, and
    /// deletes the segments wholly below it (never the active one, as Kafka). Fetches below
    /// the new start get OFFSET_OUT_OF_RANGE. Returns the log start (the low watermark).
    pub fn delete_records(&self, offset: i64) -> Result<i64, ErrorCode> {
        let mut st = self.st.borrow_mut();
        let target = if offset == -1 { st.hwm } else { offset };
        if target < 0 || target > st.hwm {
            return Err(ErrorCode::OffsetOutOfRange);
        }
        if target <= st.log_start {
            return Ok(st.log_start);
        }
        let path = self.dir.join(LOG_START_FILE);
        if let Err(e) = crate::storage::write_atomic(&path, target.to_string().as_bytes(), 0o644) {
            tracing::error!(topic = %self.topic, partition = self.index, "cannot persist the log start offset: {e}");
            return Err(ErrorCode::KafkaStorageError);
        }
        st.log_start = target;
        let mut deleted = 0;
        while st.segments.len() > 1 && st.segments[1].base_offset <= target {
            let seg = st.segments.remove(0);
            self.probe.log_bytes(-(seg.size.get() as i64));
            if let Err(e) = seg.remove_files() {
                tracing::warn!(topic = %self.topic, partition = self.index, "deleting segment {}: {e}", seg.path.display());
            }
            deleted += 1;
        }
        tracing::info!(topic = %self.topic, partition = self.index, log_start = target, deleted, "records deleted");
        Ok(target)
    }

    /// The idempotent producers with state in this partition (DescribeProducers).
    pub fn producers(&self) -> Vec<crate::producer::ProducerSummary> {
        self.producers_written.borrow().summaries()
    }

    /// Deletes whole old segments beyond `retention_bytes` / `retention_ms` (never the
    /// active one); a topic whose `cleanup.policy` contains `compact` keeps them all. Returns
    /// how many were deleted.
    pub fn apply_retention(&self, now_ms: i64) -> usize {
        if !self.cfg.get().retention_deletes() {
            return 0; // compacted topics keep every segment until compaction exists
        }
        let mut st = self.st.borrow_mut();
        let total: u64 = st.segments.iter().map(|s| s.size.get()).sum();
        let mut excess = if self.cfg.get().retention_bytes >= 0 {
            total.saturating_sub(self.cfg.get().retention_bytes as u64)
        } else {
            0
        };
        let mut n = 0;
        while st.segments.len() > 1 {
            let seg = &st.segments[0];
            let too_big = excess >= seg.size.get() && excess > 0;
            let too_old = self.cfg.get().retention_ms >= 0
                && seg.size.get() > 0
                && seg.max_timestamp.get() >= 0
                && now_ms.saturating_sub(seg.max_timestamp.get()) > self.cfg.get().retention_ms;
            if !(too_big || too_old) {
                break;
            }
            excess = excess.saturating_sub(seg.size.get());
            let seg = st.segments.remove(0);
            self.probe.log_bytes(-(seg.size.get() as i64));
            if let Err(e) = seg.remove_files() {
                tracing::warn!(topic = %self.topic, partition = self.index, "deleting segment {}: {e}", seg.path.display());
            }
            n += 1;
        }
        if n > 0 {
            st.log_start = st.segments[0].base_offset.max(st.log_start);
            tracing::info!(topic = %self.topic, partition = self.index, deleted = n, log_start = st.log_start, "retention deleted segments");
        }
        n
    }

    /// Stops the writer after the queued appends, syncs, trims the active indexes and
    /// leaves the marker that lets the next start skip recovery.
    pub async fn close(&self) -> Result<(), BrokerError> {
        self.wake.borrow_mut().take();
        let done = self.writer_done.borrow_mut().take();
        if let Some(done) = done {
            let _ = done.await;
        }
        if self.st.borrow().failed {
            return Ok(()); // leave it to recovery
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
        let now = now_ms();
        let expiry = self.cfg.get().producer_id_expiration_ms;
        let expired = self.producers.borrow_mut().expire(now, expiry);
        let mut written = self.producers_written.borrow_mut();
        written.expire(now, expiry);
        if expired > 0 {
            tracing::debug!(topic = %self.topic, partition = self.index, expired, "expired idle producer ids");
        }
        snapshot::write(&self.dir, offset, &written).map_err(|e| storage(&self.dir, e))
    }

    /// Removes the partition's files (topic deletion). The caller has closed it.
    pub fn delete_files(&self) -> std::io::Result<()> {
        let size: u64 = self.st.borrow().segments.iter().map(|s| s.size.get()).sum();
        self.probe.log_bytes(-(size as i64));
        crate::storage::remove_dir_all(&self.dir)
    }

    /// Calls `f` with every committed batch, oldest first (replay of internal logs).
    pub fn scan_batches(&self, mut f: impl FnMut(&[u8])) -> std::io::Result<()> {
        let st = self.st.borrow();
        let mut buf = Vec::new();
        for seg in &st.segments {
            let end = seg.committed.get();
            let mut pos = 0;
            while let Some(h) = seg.header_at(pos, end)? {
                buf.resize(h.size, 0);
                seg.read_at(&mut buf, pos)?;
                f(&buf);
                pos += h.size as u64;
            }
        }
        Ok(())
    }

    pub fn segment_count(&self) -> usize {
        self.st.borrow().segments.len()
    }
}

/// The first record of batch `h` with a timestamp >= `ts`, as (offset, timestamp): every
/// record of a LogAppendTime batch carries the batch's maxTimestamp; other batches are read,
/// and decompressed within `limit` bytes when compressed. `None` when the batch cannot be
/// read (the caller then falls back to the batch's base offset).
fn first_record_at(seg: &Segment, h: &BatchHeader, ts: i64, limit: usize) -> Option<(i64, i64)> {
    if h.is_log_append_time() {
        return Some((h.base_offset, h.max_timestamp));
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
    let found = batch::parse_records(&records, h.base_timestamp).find(|r| r.timestamp >= ts);
    found.map(|r| (h.base_offset + r.offset_delta as i64, r.timestamp))
}

/// Kafka's `message.timestamp.after.max.ms` / `before.max.ms` for a CreateTime batch: its
/// newest timestamp (maxTimestamp) may not be further ahead of `now`, its oldest record not
/// further behind (records are only read when a `before` bound is set). Records without a
/// timestamp (-1) are exempt, as in Kafka.
fn check_timestamps(records: &[u8], h: &BatchHeader, cfg: &LogConfig, now: i64) -> Result<(), BatchError> {
    let after = cfg.timestamp_after_max_ms;
    if after != NEVER && h.max_timestamp != -1 && h.max_timestamp > now.saturating_add(after as i64) {
        return Err(BatchError::Timestamp { timestamp: h.max_timestamp, now, bound_ms: after, side: "ahead of" });
    }
    let before = cfg.timestamp_before_max_ms;
    if before != NEVER {
        if let Some(oldest) = batch::min_timestamp(records, cfg.decompressed_limit())? {
            if oldest < now.saturating_sub(before as i64) {
                return Err(BatchError::Timestamp { timestamp: oldest, now, bound_ms: before, side: "behind" });
            }
        }
    }
    Ok(())
}

pub fn unix_now_ms() -> i64 {
    now_ms()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::FlushPolicy;

    fn cfg(flush: FlushPolicy, segment_bytes: u64) -> LogConfig {
        LogConfig::from_config(&crate::config::Config {
            flush,
            segment_bytes,
            segment_ms: u64::MAX / 2,
            retention_bytes: -1,
            retention_ms: -1,
            index_interval_bytes: 256,
            flush_interval_bytes: u64::MAX,
            message_max_bytes: 1 << 20,
            ..Default::default()
        })
    }

    fn idem(i: usize, pid: i64, epoch: i16, seq: i32) -> Bytes {
        let mut b = batch(i).to_vec();
        batch::set_producer(&mut b, pid, epoch, seq);
        Bytes::from(b)
    }

    async fn send(p: &Partition, b: &Bytes) -> Result<i64, ErrorCode> {
        let rx = p.append(b)?;
        rx.await.unwrap().map(|a| a.base_offset)
    }

    fn run<F: std::future::Future<Output = ()> + 'static>(f: F) {
        glommio::LocalExecutorBuilder::default().io_memory(512 * 1024).make().unwrap().run(f);
    }

    fn batch(i: usize) -> Bytes {
        let v = format!("value-{i:05}-{}", "x".repeat(i % 50));
        Bytes::from(batch::build(1_000 + i as i64, &[v.as_bytes(), b"second"]))
    }

    async fn append_n(p: &Partition, from: usize, n: usize) -> Vec<i64> {
        let mut offsets = Vec::new();
        for i in from..from + n {
            let rx = p.append(&batch(i)).unwrap();
            offsets.push(rx.await.unwrap().unwrap().base_offset);
        }
        offsets
    }

    /// Reads every batch back through `read`, checking offsets are dense from log start.
    fn read_all(p: &Partition) -> Vec<BatchHeader> {
        use std::os::unix::fs::FileExt;
        let mut out = Vec::new();
        let mut next = p.offsets().log_start;
        while next < p.offsets().high_watermark {
            let r = p.read(next, 1 << 20, true).unwrap();
            let region = r.records.expect("records below the high watermark");
            let mut buf = vec![0; region.len as usize];
            region.file.read_exact_at(&mut buf, region.pos).unwrap();
            let mut at = 0;
            while at + batch::HEADER_LEN <= buf.len() {
                let Some(Ok(size)) = batch::batch_size(&buf[at..]) else { break };
                if at + size > buf.len() {
                    break;
                }
                let h = batch::check_batch(&buf[at..at + size]).unwrap();
                if h.last_offset() >= next {
                    assert_eq!(h.base_offset, next, "offsets are dense");
                    next = h.last_offset() + 1;
                    out.push(h);
                }
                at += size;
            }
        }
        out
    }

    #[test]
    fn appends_roll_segments_and_read_back_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0");
        run(async move {
            let p =
                Partition::open("t", 0, path.clone(), cfg(FlushPolicy::Always, 2048), Probe::detached()).await.unwrap();
            let offsets = append_n(&p, 0, 60).await;
            assert_eq!(offsets, (0..60).map(|i| i * 2).collect::<Vec<i64>>());
            assert!(p.segment_count() > 3, "small segments roll: {}", p.segment_count());
            assert_eq!(p.offsets().high_watermark, 120);
            assert_eq!(read_all(&p).len(), 60);
            // a read in the middle of a batch starts at that batch
            let r = p.read(7, 1, true).unwrap();
            assert_eq!(r.first_batch_len as usize, batch(3).len());
            assert_eq!(p.read(121, 1, true).unwrap_err(), ErrorCode::OffsetOutOfRange);
            assert!(p.read(120, 1, true).unwrap().records.is_none());
            // by time: batch i has timestamp 1000 + i
            assert_eq!(p.offset_for_time(1_030).unwrap(), Some((60, 1_030)));
            assert_eq!(p.offset_for_time(5_000).unwrap(), None);
            p.close().await.unwrap();
        });
    }

    #[test]
    fn reopening_after_clean_or_unclean_stops_keeps_every_record() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0");
        run(async move {
            let c = cfg(FlushPolicy::Always, 4096);
            let p = Partition::open("t", 0, path.clone(), c, Probe::detached()).await.unwrap();
            append_n(&p, 0, 40).await;
            p.close().await.unwrap();
            assert!(path.join(CLEAN_MARKER).exists());

            let p = Partition::open("t", 0, path.clone(), c, Probe::detached()).await.unwrap();
            assert!(!path.join(CLEAN_MARKER).exists(), "the marker is consumed at open");
            assert_eq!(p.offsets().log_end, 80);
            assert_eq!(read_all(&p).len(), 40);
            append_n(&p, 40, 10).await;
            drop(p); // no close: as after kill -9

            let p = Partition::open("t", 0, path.clone(), c, Probe::detached()).await.unwrap();
            assert_eq!(p.offsets().log_end, 100);
            assert_eq!(read_all(&p).len(), 50);
            assert_eq!(append_n(&p, 50, 1).await, vec![100], "offsets continue, never reused");
        });
    }

    #[test]
    fn a_torn_tail_is_cut_at_the_last_whole_batch() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0");
        run(async move {
            let c = cfg(FlushPolicy::Always, 1 << 20);
            let p = Partition::open("t", 0, path.clone(), c, Probe::detached()).await.unwrap();
            append_n(&p, 0, 10).await;
            drop(p);
            let log = path.join(segment::file_name(0, "log"));
            let good_len = std::fs::metadata(&log).unwrap().len();
            let torn = batch(99);
            let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
            std::io::Write::write_all(&mut f, &torn[..torn.len() / 2]).unwrap();
            drop(f);

            let p = Partition::open("t", 0, path.clone(), c, Probe::detached()).await.unwrap();
            assert_eq!(std::fs::metadata(&log).unwrap().len(), good_len, "torn bytes removed");
            assert_eq!(p.offsets().log_end, 20);
            assert_eq!(read_all(&p).len(), 10);
            assert_eq!(append_n(&p, 10, 1).await, vec![20]);
        });
    }

    #[test]
    fn retention_by_bytes_deletes_whole_old_segments() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0");
        run(async move {
            let mut c = cfg(FlushPolicy::Os, 2048);
            c.retention_bytes = 4096;
            let p = Partition::open("t", 0, path.clone(), c, Probe::detached()).await.unwrap();
            append_n(&p, 0, 100).await;
            let before = p.segment_count();
            let deleted = p.apply_retention(unix_now_ms());
            assert!(deleted > 0 && p.segment_count() == before - deleted);
            let start = p.offsets().log_start;
            assert!(start > 0);
            assert_eq!(p.read(start - 1, 100, true).unwrap_err(), ErrorCode::OffsetOutOfRange);
            assert!(p.read(start, 100, true).unwrap().records.is_some());
            let logs = std::fs::read_dir(&path)
                .unwrap()
                .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "log"))
                .count();
            assert_eq!(logs, p.segment_count());
        });
    }

    #[test]
    fn retried_batches_are_not_appended_twice_even_after_a_crash() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0");
        run(async move {
            let c = cfg(FlushPolicy::Always, 1024);
            let p = Partition::open("t", 0, path.clone(), c, Probe::detached()).await.unwrap();
            // each batch holds 2 records: sequences 0-1, 2-3, ...
            for i in 0..30 {
                assert_eq!(send(&p, &idem(i, 7, 0, 2 * i as i32)).await, Ok(2 * i as i64));
            }
            assert_eq!(send(&p, &idem(29, 7, 0, 58)).await, Ok(58), "a retry gets its first offsets");
            assert_eq!(send(&p, &idem(30, 7, 0, 62)).await, Err(ErrorCode::OutOfOrderSequenceNumber));
            assert_eq!(p.offsets().log_end, 60, "nothing appended twice");
            drop(p); // as after kill -9: state comes back from the last snapshot plus the log

            let p = Partition::open("t", 0, path.clone(), c, Probe::detached()).await.unwrap();
            assert!(p.segment_count() > 2, "rolled, so snapshots exist");
            assert_eq!(send(&p, &idem(28, 7, 0, 56)).await, Ok(56), "retry after restart");
            assert_eq!(send(&p, &idem(30, 7, 0, 60)).await, Ok(60));
            p.close().await.unwrap();

            let p = Partition::open("t", 0, path.clone(), c, Probe::detached()).await.unwrap();
            assert_eq!(send(&p, &idem(30, 7, 0, 60)).await, Ok(60), "after a clean close too");
            assert_eq!(send(&p, &idem(31, 7, 1, 0)).await, Ok(62), "an epoch bump starts over at 0");
            assert_eq!(send(&p, &idem(32, 7, 0, 62)).await, Err(ErrorCode::InvalidProducerEpoch));
            assert_eq!(read_all(&p).len(), 32);
        });
    }

    #[test]
    fn syncs_and_log_bytes_are_recorded_on_the_probe() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0");
        run(async move {
            let probe = Probe::detached();
            let mut c = cfg(FlushPolicy::Always, 2048);
            c.retention_bytes = 2048;
            let p = Partition::open("t", 0, path.clone(), c, probe.clone()).await.unwrap();
            append_n(&p, 0, 40).await;
            let on_disk = |path: &Path| -> i64 {
                std::fs::read_dir(path)
                    .unwrap()
                    .map(|e| e.unwrap().path())
                    .filter(|f| f.extension().is_some_and(|x| x == "log"))
                    .map(|f| std::fs::metadata(f).unwrap().len() as i64)
                    .sum()
            };
            let m = probe.metrics();
            assert!(m.fsync.snapshot().count() >= 1, "flush = always syncs");
            assert_eq!(m.log_bytes.get(), on_disk(&path));
            assert!(p.apply_retention(unix_now_ms()) > 0);
            assert_eq!(m.log_bytes.get(), on_disk(&path), "retention subtracts what it deletes");
            p.close().await.unwrap();
            let before = m.log_bytes.get();
            // Reopening adds what is already there.
            let p = Partition::open("t", 0, path.clone(), cfg(FlushPolicy::Always, 2048), probe.clone()).await.unwrap();
            assert_eq!(m.log_bytes.get(), before * 2);
            p.close().await.unwrap();
            p.delete_files().unwrap();
            assert_eq!(m.log_bytes.get(), before);
        });
    }

    #[test]
    fn bad_batches_are_refused_with_kafka_codes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0");
        run(async move {
            let p = Partition::open("t", 0, path, cfg(FlushPolicy::Os, 1 << 20), Probe::detached()).await.unwrap();
            let mut b = batch(1).to_vec();
            let last = b.len() - 1;
            b[last] ^= 1;
            assert_eq!(p.append(&Bytes::from(b)).unwrap_err(), ErrorCode::CorruptMessage);
            assert_eq!(p.offsets().log_end, 0, "a refused batch takes no offsets");
            assert_eq!(append_n(&p, 0, 1).await, vec![0]);
        });
    }

    fn stored(p: &Partition) -> Vec<Vec<u8>> {
        use std::os::unix::fs::FileExt;
        let mut out = Vec::new();
        let mut next = p.offsets().log_start;
        while next < p.offsets().high_watermark {
            let r = p.read(next, 1, true).unwrap();
            let region = r.records.unwrap();
            let mut buf = vec![0; r.first_batch_len as usize];
            region.file.read_exact_at(&mut buf, region.pos).unwrap();
            next = batch::read_header(&buf).unwrap().last_offset() + 1;
            out.push(buf);
        }
        out
    }

    #[test]
    fn log_append_time_stamps_each_batch_and_tells_the_producer() {
        let dir = tempfile::tempdir().unwrap();
        run(async move {
            let mut c = cfg(FlushPolicy::Always, 1 << 20);
            c.timestamp_type = TimestampType::LogAppendTime;
            let p = Partition::open("t", 0, dir.path().join("t-0"), c, Probe::detached()).await.unwrap();
            let before = now_ms();
            let a = p.append(&batch(1)).unwrap().await.unwrap().unwrap();
            assert!(a.log_append_time >= before && a.log_append_time <= now_ms(), "{a:?}");
            let h = batch::check_batch(&stored(&p)[0]).unwrap();
            assert!(h.is_log_append_time());
            assert_eq!(h.max_timestamp, a.log_append_time);
            // By time, every record of such a batch has the stamped time.
            assert_eq!(p.offset_for_time(a.log_append_time).unwrap(), Some((0, a.log_append_time)));
            c.timestamp_type = TimestampType::CreateTime;
            p.set_config(c);
            let a = p.append(&batch(2)).unwrap().await.unwrap().unwrap();
            assert_eq!(a.log_append_time, -1, "CreateTime topics answer -1");
        });
    }

    #[test]
    fn compression_type_recompresses_and_by_time_lookups_find_the_exact_record() {
        use crate::protocol::compression::{GZIP, LZ4, NONE, SNAPPY, ZSTD};
        let dir = tempfile::tempdir().unwrap();
        run(async move {
            let mut c = cfg(FlushPolicy::Os, 1 << 20);
            let p = Partition::open("t", 0, dir.path().join("t-0"), c, Probe::detached()).await.unwrap();
            let timed: Vec<(i64, batch::KeyValue)> =
                (0..10).map(|i| (1000 + 10 * i, (None, Some(&b"v"[..])))).collect();
            let plain = Bytes::from(batch::build_timed(&timed));
            let zstd = Bytes::from(batch::recompress(&plain, ZSTD, 1 << 20).unwrap());
            for (target, sent) in [(GZIP, &plain), (SNAPPY, &zstd), (LZ4, &plain), (NONE, &zstd), (ZSTD, &zstd)] {
                c.compression = TopicCompression::Codec(target);
                p.set_config(c);
                p.append(sent).unwrap().await.unwrap().unwrap();
            }
            c.compression = TopicCompression::Producer;
            p.set_config(c);
            p.append(&zstd).unwrap().await.unwrap().unwrap();
            let codecs: Vec<u8> = stored(&p).iter().map(|b| batch::check_batch(b).unwrap().codec()).collect();
            assert_eq!(codecs, vec![GZIP, SNAPPY, LZ4, NONE, ZSTD, ZSTD]);
            for b in stored(&p) {
                let same = batch::recompress(&b, NONE, 1 << 20).unwrap();
                assert_eq!(same[21..], plain[21..], "records and header fields survive (offsets aside)");
            }
            // Record 5 of the snappy batch (offsets 10-19) is the first at or after 1045.
            assert_eq!(p.offset_for_time(1045).unwrap(), Some((5, 1050)), "inside the first (gzip) batch");
            assert_eq!(p.max_timestamp_offset(), Some((9, 1090)), "the first record carrying the maximum");
        });
    }

    #[test]
    fn timestamps_out_of_bounds_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        run(async move {
            let mut c = cfg(FlushPolicy::Os, 1 << 20);
            c.timestamp_after_max_ms = 60_000;
            c.timestamp_before_max_ms = 60_000;
            let p = Partition::open("t", 0, dir.path().join("t-0"), c, Probe::detached()).await.unwrap();
            let now = now_ms();
            let at = |ts: &[i64]| {
                let timed: Vec<(i64, batch::KeyValue)> = ts.iter().map(|t| (*t, (None, Some(&b"v"[..])))).collect();
                Bytes::from(batch::build_timed(&timed))
            };
            assert_eq!(p.append(&at(&[now, now + 120_000])).unwrap_err(), ErrorCode::InvalidTimestamp);
            // The oldest record need not be the first: every record is looked at.
            let old =
                batch::recompress(&at(&[now, now - 120_000]), crate::protocol::compression::LZ4, 1 << 20).unwrap();
            assert_eq!(p.append(&Bytes::from(old)).unwrap_err(), ErrorCode::InvalidTimestamp);
            let ok = p.append(&at(&[now - 1000, now + 1000, -1])).expect("within bounds; -1 is exempt");
            ok.await.unwrap().unwrap();
            assert_eq!(p.offsets().log_end, 3, "refused batches take no offsets");
        });
    }

    #[test]
    fn delete_records_moves_the_log_start_for_good_and_drops_whole_segments() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0");
        run(async move {
            let c = cfg(FlushPolicy::Always, 1024);
            let p = Partition::open("t", 0, path.clone(), c, Probe::detached()).await.unwrap();
            append_n(&p, 0, 40).await; // 80 records over several segments
            let segments = p.segment_count();
            assert_eq!(p.delete_records(81), Err(ErrorCode::OffsetOutOfRange), "past the high watermark");
            assert_eq!(p.delete_records(41), Ok(41));
            assert_eq!(p.offsets().log_start, 41);
            assert!(p.segment_count() < segments, "segments wholly below 41 are gone");
            assert_eq!(p.read(40, 100, true).unwrap_err(), ErrorCode::OffsetOutOfRange);
            assert!(p.read(41, 100, true).unwrap().records.is_some());
            assert_eq!(p.delete_records(10), Ok(41), "never moves back");
            assert_eq!(p.offset_for_time(0).unwrap().map(|(o, _)| o), Some(41), "by time starts at the log start");
            drop(p); // as after kill -9
            let p = Partition::open("t", 0, path.clone(), c, Probe::detached()).await.unwrap();
            assert_eq!(p.offsets().log_start, 41, "the log start survives a restart");
            assert_eq!(p.delete_records(-1), Ok(80), "-1: up to the high watermark");
            assert_eq!(p.offsets().log_start, 80);
            assert_eq!(append_n(&p, 40, 1).await, vec![80]);
        });
    }

    #[test]
    fn compacted_topics_are_never_trimmed_by_retention() {
        let dir = tempfile::tempdir().unwrap();
        run(async move {
            let mut c = cfg(FlushPolicy::Os, 2048);
            c.retention_bytes = 1;
            c.retention_ms = 0;
            c.compact = true;
            let p = Partition::open("t", 0, dir.path().join("t-0"), c, Probe::detached()).await.unwrap();
            append_n(&p, 0, 60).await;
            assert_eq!(p.apply_retention(unix_now_ms()), 0);
            c.compact = false;
            p.set_config(c);
            assert!(p.apply_retention(unix_now_ms()) > 0, "the same log with cleanup.policy=delete is trimmed");
        });
    }

    #[test]
    fn flush_ms_and_flush_messages_bound_how_long_data_stays_unsynced() {
        let dir = tempfile::tempdir().unwrap();
        run(async move {
            let mut c = cfg(FlushPolicy::Os, 1 << 20);
            c.flush_ms = 50;
            c.flush_messages = 10;
            let probe = Probe::detached();
            let p = Partition::open("t", 0, dir.path().join("t-0"), c, probe.clone()).await.unwrap();
            append_n(&p, 0, 1).await; // acked after the write: 2 records unsynced
            assert_eq!(p.offsets().high_watermark, 0, "consumers wait for the sync");
            glommio::timer::sleep(Duration::from_millis(200)).await;
            assert_eq!(p.offsets().high_watermark, 2, "flush.ms synced it with no further append");
            let syncs = probe.metrics().fsync.snapshot().count();
            c.flush_ms = 3_600_000;
            p.set_config(c);
            append_n(&p, 1, 4).await; // 8 records: under flush.messages
            assert_eq!(p.offsets().high_watermark, 2);
            append_n(&p, 5, 1).await; // 10: synced at once
            assert_eq!(p.offsets().high_watermark, 12);
            assert_eq!(probe.metrics().fsync.snapshot().count(), syncs + 1);
        });
    }

    use crate::storage::faults::{self, Fault, Op};

    async fn result_of(p: &Partition, b: &Bytes) -> Result<i64, ErrorCode> {
        match p.append(b) {
            Ok(rx) => rx.await.unwrap().map(|a| a.base_offset),
            Err(e) => Err(e),
        }
    }

    #[test]
    fn a_full_disk_refuses_appends_and_writes_resume_when_space_returns() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0");
        run(async move {
            let c = cfg(FlushPolicy::Always, 4096);
            let p = Partition::open("t", 0, path.clone(), c, Probe::detached()).await.unwrap();
            append_n(&p, 0, 10).await;
            assert_eq!(send(&p, &idem(10, 9, 0, 0)).await, Ok(20));
            faults::inject(&path, Op::Write, Fault::NoSpace, None);
            for i in 11..14 {
                assert_eq!(result_of(&p, &batch(i)).await, Err(ErrorCode::KafkaStorageError));
            }
            assert_eq!(send(&p, &idem(14, 9, 0, 2)).await, Err(ErrorCode::KafkaStorageError));
            assert_eq!(p.offsets().log_end, 22, "nothing refused took an offset");
            assert_eq!(read_all(&p).len(), 11, "what was acknowledged is still served");
            faults::clear(&path);
            // Writes resume at the next offset; the refused idempotent batch is new, not a gap.
            assert_eq!(append_n(&p, 15, 1).await, vec![22]);
            assert_eq!(send(&p, &idem(14, 9, 0, 2)).await, Ok(24));
            drop(p); // as after kill -9
            let p = Partition::open("t", 0, path.clone(), c, Probe::detached()).await.unwrap();
            assert_eq!(p.offsets().log_end, 26);
            assert_eq!(read_all(&p).len(), 13, "every acknowledged batch, no refused one");
        });
    }

    #[test]
    fn a_write_torn_at_any_byte_is_cut_and_every_acknowledged_batch_kept() {
        let size = batch(5).len();
        for keep in 0..size {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("t-0");
            run(async move {
                let c = cfg(FlushPolicy::Always, 1 << 20);
                let p = Partition::open("t", 0, path.clone(), c, Probe::detached()).await.unwrap();
                append_n(&p, 0, 5).await;
                // The write lands `keep` bytes; the cut of them fails too, so they stay on disk
                // for recovery to find, as after a crash in the middle of a write.
                faults::inject(&path, Op::Write, Fault::Torn { keep }, Some(1));
                faults::inject(&path, Op::Truncate, Fault::Io, Some(1));
                assert_eq!(result_of(&p, &batch(5)).await, Err(ErrorCode::KafkaStorageError));
                faults::clear(&path);
                drop(p);
                let p = Partition::open("t", 0, path.clone(), c, Probe::detached()).await.unwrap();
                assert_eq!(p.offsets().log_end, 10, "torn at byte {keep} of {size}");
                assert_eq!(read_all(&p).len(), 5);
                assert_eq!(append_n(&p, 5, 1).await, vec![10]);
            });
        }
    }

    #[test]
    fn a_failed_fsync_or_read_takes_only_that_partition_offline() {
        let dir = tempfile::tempdir().unwrap();
        run(async move {
            let c = cfg(FlushPolicy::Always, 1 << 20);
            let (a_dir, b_dir) = (dir.path().join("t-0"), dir.path().join("t-1"));
            let a = Partition::open("t", 0, a_dir.clone(), c, Probe::detached()).await.unwrap();
            let b = Partition::open("t", 1, b_dir.clone(), c, Probe::detached()).await.unwrap();
            append_n(&a, 0, 3).await;
            append_n(&b, 0, 3).await;
            faults::inject(&a_dir, Op::Sync, Fault::Io, Some(1));
            assert_eq!(result_of(&a, &batch(3)).await, Err(ErrorCode::KafkaStorageError));
            assert_eq!(result_of(&a, &batch(4)).await, Err(ErrorCode::KafkaStorageError), "offline, not retried");
            assert_eq!(a.read(0, 100, true).unwrap_err(), ErrorCode::KafkaStorageError);
            assert_eq!(append_n(&b, 3, 1).await, vec![6], "the other partition keeps working");
            // EIO on a read: offline too, even once the device answers again.
            faults::inject(&b_dir, Op::Read, Fault::Io, Some(1));
            assert_eq!(b.read(2, 100, true).unwrap_err(), ErrorCode::KafkaStorageError);
            assert_eq!(b.read(0, 100, true).unwrap_err(), ErrorCode::KafkaStorageError);
            drop((a, b));
            // A restart recovers both from disk, with every acknowledged batch. The batch whose
            // sync failed was refused, yet its bytes may be on disk: recovery keeps what it
            // finds whole, as after a crash between a write and its ack (an idempotent
            // producer's retry of it is then recognized as a duplicate).
            let a = Partition::open("t", 0, a_dir, c, Probe::detached()).await.unwrap();
            let b = Partition::open("t", 1, b_dir, c, Probe::detached()).await.unwrap();
            assert!((3..=4).contains(&read_all(&a).len()));
            assert_eq!(read_all(&b).len(), 4);
        });
    }

    #[test]
    fn a_full_disk_at_recovery_leaves_indexes_sparser_never_a_sigbus() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0");
        run(async move {
            let mut c = cfg(FlushPolicy::Always, 1 << 20);
            c.index_interval_bytes = 1; // an index entry per batch
            let p = Partition::open("t", 0, path.clone(), c, Probe::detached()).await.unwrap();
            append_n(&p, 0, 2000).await;
            drop(p); // unclean: the next open rebuilds the indexes
            faults::inject(&path, Op::Allocate, Fault::NoSpace, None);
            let p = Partition::open("t", 0, path.clone(), c, Probe::detached()).await.unwrap();
            assert_eq!(p.offsets().log_end, 4000);
            assert_eq!(read_all(&p).len(), 2000, "every batch is found without the index entries");
            assert_eq!(p.offset_for_time(1_000 + 1500).unwrap(), Some((3000, 2500)));
            assert_eq!(append_n(&p, 2000, 1).await, vec![4000], "appends work: the log has room");
            faults::clear(&path);
        });
    }
}
