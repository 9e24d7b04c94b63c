//! The appender: a produced batch is checked and rewritten for its topic (`append`),
//! given its offsets and queued; one writer task per partition drains the queue with one
//! write per segment and one fdatasync for all of it (group commit, see the module table of
//! `partition`), rolls segments, and handles a write that fails: a full disk refuses the
//! batches and lets later appends try again, any other error takes the partition offline.

use std::path::Path;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_channel::oneshot;
use glommio::channels::local_channel::LocalReceiver;

use super::{now_ms, storage, AppendReply, Appended, BatchLoc, Partition, Pending, Prepared, Queue, Refusal};
use crate::error::BrokerError;
use crate::log::config::{Durability, LogConfig, TimestampType, TopicCompression, NEVER};
use crate::log::segment::{self, Segment};
use crate::producer::Verdict;
use crate::protocol::batch::{self, BatchError, BatchHeader, RecordsSummary};
use crate::protocol::ErrorCode;
use crate::storage::{AppendMode, Appender, Chunk};

impl Partition {
    /// Validates one produced batch, rewrites it where the topic's configs say (recompression
    /// for `compression.type`, the broker's clock for LogAppendTime) and queues it; resolves
    /// once the batch is acknowledged under the flush policy (see the module table).
    /// `min.insync.replicas` asks nothing more here: Kafka 4 waits for at most as many
    /// in-sync replicas as the partition has (KIP-966), and a partition has one.
    pub fn append(&self, records: &Bytes) -> Result<oneshot::Receiver<Result<Appended, ErrorCode>>, Refusal> {
        let (tx, rx) = oneshot::channel();
        let (rewritten, mut header, log_append_time) = match self.prepare(records)? {
            Prepared::New { rewritten, header, log_append_time } => (rewritten, header, log_append_time),
            Prepared::Duplicate { appended, last_offset } => {
                self.answer_duplicate(appended, last_offset, tx);
                return Ok(rx);
            }
        };
        let base = {
            let mut st = self.st.borrow_mut();
            let base = st.next_offset;
            st.next_offset += header.record_count as i64;
            base
        };
        header.base_offset = base;
        self.producers.borrow_mut().update(&header, now_ms());
        let mut q = self.queue.borrow_mut();
        let at = q.buf.len();
        q.buf.extend_from_slice(rewritten.as_deref().unwrap_or(records));
        if log_append_time >= 0 {
            batch::stamp_log_append_time(&mut q.buf[at..], log_append_time);
        }
        batch::patch(&mut q.buf[at..], base, 0);
        q.items.push(Pending { header, at, log_append_time, reply: Some(tx) });
        drop(q);
        self.wake_write_loop();
        Ok(rx)
    }

    /// Wakes the write loop (a standalone log's): for queued batches, or for a roll with none.
    pub(super) fn wake_write_loop(&self) {
        if let Some(w) = self.wake.borrow().as_ref() {
            let _ = w.try_send(()); // full means a wake-up is already pending
        }
    }

    /// What every append does before the batch gets its offsets: validation, the idempotence
    /// check and the topic's rewrites (the caller stamps LogAppendTime into its own copy).
    pub(super) fn prepare(&self, records: &Bytes) -> Result<Prepared, Refusal> {
        let cfg = self.cfg.get();
        let refuse = |e: BatchError| {
            tracing::debug!(topic = %self.topic, partition = self.index, "refused batch: {e}");
            Refusal { code: e.code(), message: Some(e.to_string()), records: Vec::new() }
        };
        let header = batch::validate_produce(records, cfg.message_max_bytes as usize).map_err(refuse)?;
        let summary = batch::check_records(records, &header, cfg.decompressed_limit()).map_err(refuse)?;
        let now = now_ms();
        if cfg.timestamp_type == TimestampType::CreateTime {
            check_timestamps(&summary, &cfg, now).map_err(refuse)?;
        }
        if cfg.compact && !summary.keyless.is_empty() {
            let message = format!(
                "{} of the batch's records have no key, and compacted topic {} takes only records with a key",
                summary.keyless.len(),
                self.topic
            );
            tracing::debug!(topic = %self.topic, partition = self.index, "refused batch: {message}");
            return Err(Refusal { code: ErrorCode::InvalidRecord, message: Some(message), records: summary.keyless });
        }
        let log_start = {
            let st = self.st.borrow();
            if st.failed {
                return Err(ErrorCode::KafkaStorageError.into());
            }
            st.log_start
        };
        if let Verdict::Duplicate { first_offset, last_offset, max_timestamp } =
            self.producers.borrow().check(&header)?
        {
            let log_append_time = if cfg.timestamp_type == TimestampType::LogAppendTime { max_timestamp } else { -1 };
            let appended = Appended { base_offset: first_offset, log_start_offset: log_start, log_append_time };
            return Ok(Prepared::Duplicate { appended, last_offset });
        }
        let mut rewritten = match cfg.compression {
            TopicCompression::Codec(codec) if codec != header.codec() => {
                let b =
                    batch::recompress_at(records, codec, cfg.level(codec), cfg.decompressed_limit()).map_err(refuse)?;
                if b.len() > cfg.message_max_bytes as usize {
                    return Err(refuse(BatchError::TooLarge { size: b.len(), max: cfg.message_max_bytes as usize }));
                }
                Some(b)
            }
            _ => None,
        };
        // The header's maxTimestamp is what retention and ListOffsets go by: it must be the
        // records' own, as Kafka's validation sets it (producers all send it right).
        if cfg.timestamp_type == TimestampType::CreateTime && header.max_timestamp != summary.max_timestamp {
            let b = rewritten.get_or_insert_with(|| records.to_vec());
            batch::set_max_timestamp(b, summary.max_timestamp);
        }
        let bytes: &[u8] = rewritten.as_deref().unwrap_or(records);
        let mut header = BatchHeader { size: bytes.len(), ..batch::read_header(bytes).map_err(refuse)? };
        let log_append_time = match cfg.timestamp_type {
            TimestampType::LogAppendTime => {
                header.max_timestamp = now;
                now
            }
            TimestampType::CreateTime => -1,
        };
        Ok(Prepared::New { rewritten, header, log_append_time })
    }

    /// A retry of a batch already in the log: answered with the first append's offsets once
    /// those are committed.
    pub(super) fn answer_duplicate(&self, appended: Appended, last_offset: i64, reply: AppendReply) {
        if self.st.borrow().hwm > last_offset {
            let _ = reply.send(Ok(appended));
        } else {
            self.duplicates.borrow_mut().push((last_offset, appended, reply));
        }
    }

    pub(super) async fn write_loop(self: Rc<Self>, wake: LocalReceiver<()>) {
        while wake.recv().await.is_some() {
            // A wake-up with nothing queued is `roll_if_idle`'s or retention's: the roll runs
            // here, where every other change of a standalone log's active segment does (a
            // replicated log's writes come from its replica instead: `roll_for_retention`).
            let idle = self.queue.borrow().items.is_empty() && {
                let st = self.st.borrow();
                !st.failed && !st.replicated
            };
            if idle {
                let for_retention = self.roll_requested.get();
                match self.roll_if_needed(0, None).await {
                    Err(e) => self.write_failed(&e, 0),
                    Ok(()) if for_retention => {
                        self.apply_retention(now_ms());
                    }
                    Ok(()) => {}
                }
            }
            loop {
                let q = std::mem::take(&mut *self.queue.borrow_mut());
                if q.items.is_empty() {
                    break;
                }
                let Queue { buf, mut items } = q;
                let (written, result) = self.write_queued(buf.into(), &items, &mut Vec::new()).await;
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
            self.preallocate().await;
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
            // Retries parked on the refused batches would wait for offsets others now take.
            self.fail_duplicates(ErrorCode::KafkaStorageError);
            let mut st = self.st.borrow_mut();
            let seg = st.segments.last().expect("active segment");
            // Synced too: a crash must not bring back bytes of batches their producers were
            // told failed.
            if let Err(cut) = seg.truncate_durably(seg.size.get()) {
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
    /// the policy says, and the error that stopped the rest; `locs` gets where each landed.
    pub(super) async fn write_queued(
        self: &Rc<Self>,
        mut buf: Chunk,
        items: &[Pending],
        locs: &mut Vec<BatchLoc>,
    ) -> (usize, Result<(), BrokerError>) {
        let mut first = 0;
        let mut buf_base = 0; // position in the original buffer where `buf` starts
        let mut stopped = None;
        while first < items.len() {
            let need = items[first].header.size as u64;
            if let Err(e) = self.roll_if_needed(need, Some(items[first].header.last_offset())).await {
                stopped = Some(e);
                break;
            }
            if let Err(e) = self.reopen_writer_if_changed().await {
                stopped = Some(e);
                break;
            }
            let (writer, pos, path, seg_base) = {
                let st = self.st.borrow();
                let seg = st.segments.last().expect("active segment");
                (st.writer.clone().expect("writer"), seg.size.get(), seg.path.clone(), seg.base_offset)
            };
            // Take every batch that still fits in this segment, in bytes and in offsets
            // (`roll_if_needed`).
            let room = self.cfg.get().segment_bytes.saturating_sub(pos);
            let mut last = first + 1;
            while last < items.len()
                && (items[last].at + items[last].header.size - items[first].at) as u64 <= room
                && items[last].header.last_offset() - seg_base <= segment::MAX_OFFSET_SPAN
            {
                last += 1;
            }
            let end = items.get(last).map_or(buf_base + buf.len(), |it| it.at);
            let chunk = buf.split_front(end - buf_base, last - first);
            buf_base = end;
            let len = chunk.len();
            let started = Instant::now();
            if let Err(e) = crate::storage::append_at(&writer, &path, chunk, pos).await {
                stopped = Some(storage(&path, e));
                break;
            }
            if writer.writes_durably() {
                // The write was the sync: the fsync histogram counts it whole.
                self.probe.fsync(started.elapsed());
            }
            let mut st = self.st.borrow_mut();
            let interval = self.cfg.get().index_interval_bytes;
            let seg = st.segments.last_mut().expect("active segment");
            let mut at = pos;
            let mut written = self.producers_written.borrow_mut();
            let now = now_ms();
            for it in &items[first..last] {
                locs.push(BatchLoc { segment: seg.base_offset, pos: at });
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

    /// Writes zeros past the active segment's data and syncs them (see `segment`), if the
    /// flush policy syncs and little of what was written ahead is left. For a writer with
    /// nothing queued: appends that arrive meanwhile wait for it, so it runs when the log is
    /// idle, and a log busy for longer appends past the end of its file until it is not. A
    /// failed write or sync of zeros only costs later fdatasyncs their speed.
    pub async fn preallocate(&self) {
        let cfg = self.cfg.get();
        if cfg.durability() == Durability::Os {
            return;
        }
        let (writer, path, from, to) = {
            let st = self.st.borrow();
            let (Some(seg), Some(writer)) = (st.segments.last(), st.writer.clone()) else { return };
            if st.failed {
                return;
            }
            let Some((from, to)) = seg.preallocation(cfg.segment_bytes) else { return };
            (writer, seg.path.clone(), from, to)
        };
        let filled = async {
            crate::storage::write_zeros(&writer, &path, from, to).await?;
            if writer.writes_durably() {
                return Ok(());
            }
            // This sync also writes the log's own dirty pages; the kernel reports a lost one
            // once per open file, to whichever sync comes first: this one may be the only one
            // to hear of it.
            if let Err(e) = crate::storage::fdatasync(&writer, &path).await {
                self.st.borrow_mut().failed = true;
                tracing::error!(topic = %self.topic, partition = self.index, "fdatasync failed, the partition is offline until a restart recovers it: {e}");
                return Err(e);
            }
            Ok(())
        };
        match filled.await {
            Ok(()) => {
                let st = self.st.borrow();
                if let Some(seg) = st.segments.last().filter(|s| s.path == path) {
                    seg.allocated.set(seg.allocated.get().max(to));
                }
            }
            Err(e) => {
                tracing::debug!(topic = %self.topic, partition = self.index, "cannot preallocate the active segment: {e}")
            }
        }
    }

    /// What the flush policy asks after a write: sync now, schedule one, or nothing.
    async fn make_durable(self: &Rc<Self>) -> Result<(), BrokerError> {
        match self.cfg.get().durability() {
            // A durable writer's writes are synced as they return: only the bookkeeping.
            Durability::Always => self.sync_written(!self.writes_durably()).await?,
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
        self.sync_written(true).await
    }

    /// Whether the active segment's writer syncs every write as it makes it.
    pub(super) fn writes_durably(&self) -> bool {
        self.st.borrow().writer.as_ref().is_some_and(|w| w.writes_durably())
    }

    /// How the active segment is appended to, for tests of the replicas that switch it.
    #[cfg(test)]
    pub(crate) fn append_mode(&self) -> Option<AppendMode> {
        self.st.borrow().writer.as_ref().map(|w| w.mode())
    }

    /// `sync`, or with `fsync` false only its bookkeeping: for what a durable writer wrote,
    /// which was on stable storage before `written` counted it.
    async fn sync_written(&self, fsync: bool) -> Result<(), BrokerError> {
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
        let r = if fsync {
            self.syncing.set(true);
            let started = Instant::now();
            let r = crate::storage::fdatasync(&writer, &path).await;
            self.probe.fsync(started.elapsed());
            self.syncing.set(false);
            r
        } else {
            Ok(())
        };
        if let Err(e) = r {
            self.st.borrow_mut().failed = true;
            tracing::error!(topic = %self.topic, partition = self.index, "fdatasync failed, the partition is offline until a restart recovers it: {e}");
            return Err(storage(&path, e));
        }
        let moved = {
            let mut st = self.st.borrow_mut();
            st.unsynced_bytes = st.unsynced_bytes.saturating_sub(unsynced);
            st.unsynced_records = st.unsynced_records.saturating_sub(unsynced_records);
            // A replicated log's watermark is the replica's commit, not this sync's reach.
            let moved = written > st.hwm && !st.replicated;
            if moved {
                st.hwm = written;
                if let Some(seg) = st.segments.iter().rev().find(|s| s.base_offset == base) {
                    seg.committed.set(seg.committed.get().max(size));
                }
            }
            moved
        };
        if moved {
            self.wake_waiters();
        }
        Ok(())
    }

    /// Drops from the page cache what lies more than `window` bytes behind the log's end,
    /// oldest first, in steps of at least a MiB (each a system call). For a log whose reads
    /// are rare, a follower replica's: the kernel would keep every byte written until memory
    /// runs short, evicting what readers of other logs use, and a page dropped is one the
    /// next write reuses rather than a fresh one (on a virtual machine that hands free memory
    /// back to its host, several times faster to fill). Advice only: no byte of the log
    /// changes, and a read of a dropped page goes to the disk.
    pub fn drop_cached_behind(&self, window: u64) {
        const STEP: u64 = 1 << 20;
        let st = self.st.borrow();
        let mut keep = window;
        let mut cut_at = None;
        for (i, seg) in st.segments.iter().enumerate().rev() {
            let size = seg.size.get();
            if keep >= size {
                keep -= size;
                continue;
            }
            cut_at = Some((i, (size - keep) & !4095));
            break;
        }
        let Some((last, cut)) = cut_at else { return };
        let seg = &st.segments[last];
        // Below the end: a cut tail is written again, cached again.
        let from = seg.uncached.get().min(seg.size.get());
        let older_dropped = last == 0 || st.segments[last - 1].uncached.get() >= st.segments[last - 1].size.get();
        if cut < from + STEP && older_dropped {
            return;
        }
        // Older segments wholly, back to one already dropped (all before it are too).
        for older in st.segments[..last].iter().rev() {
            let (from, size) = (older.uncached.get(), older.size.get());
            if from >= size {
                break;
            }
            let _ = crate::storage::drop_cached(&older.file, from, size - from);
            older.uncached.set(size);
        }
        // A tail cut below what was dropped (a divergent tail, a cleaning) leaves nothing to
        // drop in this segment.
        if cut > from {
            let _ = crate::storage::drop_cached(&seg.file, from, cut - from);
            seg.uncached.set(cut);
        }
    }

    /// For the `interval` policy's timer: sync when something was written since the last sync.
    pub async fn sync_if_dirty(&self) -> Result<(), BrokerError> {
        // A sync under way covers only what was written before it began: wait for it, then
        // sync what came after.
        while self.syncing.get() {
            glommio::timer::sleep(Duration::from_millis(1)).await;
        }
        let dirty = {
            let st = self.st.borrow();
            st.written > st.hwm && !st.failed
        };
        if dirty {
            self.sync().await?;
        }
        Ok(())
    }

    fn advance_hwm(&self) {
        if self.st.borrow().replicated {
            return;
        }
        {
            let mut st = self.st.borrow_mut();
            st.hwm = st.written;
            if let Some(seg) = st.segments.last() {
                seg.committed.set(seg.size.get());
            }
        }
        self.wake_waiters();
    }

    /// Answers every parked retry (`answer_duplicate`) with `code`: the log it waits on goes
    /// back (a refused write, a lost leadership, a cut tail), and whatever lands at those
    /// offsets next is not its batch. The producer sends it again.
    pub(super) fn fail_duplicates(&self, code: ErrorCode) {
        for (_, _, tx) in self.duplicates.borrow_mut().drain(..) {
            let _ = tx.send(Err(code));
        }
    }

    pub(super) fn wake_waiters(&self) {
        self.wake_watchers();
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

    /// Resolves every `watch` now, whatever the high watermark: for a replica that stopped
    /// leading, whose parked fetches should learn it at once rather than at their deadline.
    pub fn wake_watchers(&self) {
        for w in self.waiters.borrow_mut().drain(..) {
            let _ = w.send(());
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

    /// Whether this log's fresh data is read soon after it is written (the default): a
    /// follower replica's is not, and a log that syncs every write then appends past the page
    /// cache (`AppendMode::Direct`), from its next write on.
    pub fn set_tail_cached(&self, cached: bool) {
        self.tail_cached.set(cached);
    }

    /// Opens the active segment anew if the way it should be appended to changed since its
    /// writer was opened (`append_mode`). Writes through either handle are coherent: the
    /// kernel writes back and drops cached pages that a direct write covers.
    /// Opens `path`, the active segment, for appends in the mode this log's config and
    /// `tail_cached` call for (`append_mode`).
    pub(super) async fn open_active_writer(&self, path: &Path) -> Result<Rc<Appender>, BrokerError> {
        open_writer(path, &self.cfg.get(), self.tail_cached.get()).await
    }

    async fn reopen_writer_if_changed(&self) -> Result<(), BrokerError> {
        let path = {
            let st = self.st.borrow();
            if st.writer.as_ref().map(|w| w.asked()) == Some(append_mode(&self.cfg.get(), self.tail_cached.get())) {
                return Ok(());
            }
            st.segments.last().expect("active segment").path.clone()
        };
        // What the old writer left unsynced is synced first: a durable writer's write makes
        // only its own bytes durable, and the high watermark after it covers the older ones.
        let old = self.st.borrow().writer.clone();
        if let Some(old) = old.filter(|w| !w.writes_durably()) {
            let started = Instant::now();
            crate::storage::fdatasync(&old, &path).await.map_err(|e| storage(&path, e))?;
            self.probe.fsync(started.elapsed());
        }
        let writer = self.open_active_writer(&path).await?;
        self.st.borrow_mut().writer = Some(writer);
        Ok(())
    }

    /// Rolls the active segment if a batch of `need` bytes ending at `last_offset` does not
    /// belong in it: too big for it, its index full, its time up, or (as in Kafka) an offset
    /// too far from its base for the indexes' 32-bit relative offsets.
    pub(super) async fn roll_if_needed(&self, need: u64, last_offset: Option<i64>) -> Result<(), BrokerError> {
        let roll = {
            let st = self.st.borrow();
            let seg = st.segments.last().expect("active segment");
            let size = seg.size.get();
            size > 0
                && (size + need > self.cfg.get().segment_bytes
                    || seg.index.is_full()
                    || seg.roll_time_passed(self.cfg.get().segment_ms, self.cfg.get().segment_jitter_ms)
                    || self.roll_requested.get()
                    || last_offset.is_some_and(|last| last - seg.base_offset > segment::MAX_OFFSET_SPAN))
        };
        if !roll {
            return Ok(());
        }
        // Seal the old segment durably, whatever the policy, so that recovery after a crash
        // only ever needs to scan the newest segment; without its preallocated zeros, so that
        // its length is its data's.
        {
            let st = self.st.borrow();
            let seg = st.segments.last().expect("active segment");
            seg.trim().map_err(|e| storage(&seg.path, e))?;
        }
        self.sync().await?;
        let (base, path) = {
            let mut st = self.st.borrow_mut();
            let base = st.written;
            let seg = st.segments.last_mut().expect("active segment");
            seg.seal_indexes().map_err(|e| storage(&seg.path, e))?;
            (base, self.dir.join(segment::file_name(base, "log")))
        };
        self.write_producer_snapshot(base)?;
        let cap = self.cfg.get().index_capacity();
        let seg = Segment::open(&self.dir, base, cap, false).map_err(|e| storage(&path, e))?;
        let writer = self.open_active_writer(&path).await?;
        // The new file's directory entry must survive a crash too.
        crate::storage::sync_dir(&self.dir).map_err(|e| storage(&self.dir, e))?;
        let mut st = self.st.borrow_mut();
        st.segments.push(seg);
        st.writer = Some(writer);
        self.roll_requested.set(false);
        tracing::debug!(topic = %self.topic, partition = self.index, base, "rolled segment");
        Ok(())
    }
}

/// How the active segment is appended to (`storage::AppendMode`): with durable writes when
/// every ack waits for a sync, and past the page cache when, besides, nobody reads the log's
/// fresh data soon (`tail_cached` false: a follower replica's).
fn append_mode(cfg: &LogConfig, tail_cached: bool) -> AppendMode {
    match (cfg.durability() == Durability::Always, tail_cached) {
        (false, _) => AppendMode::Cached,
        (true, true) => AppendMode::CachedDurable,
        (true, false) => AppendMode::Direct,
    }
}

/// Opens `path`, the active segment, for appends as `append_mode` says. Each write checks the
/// mode again (`write_queued`) and opens the segment anew when it changed: a topic whose flush
/// policy changed, a replica that became leader or follower.
pub(super) async fn open_writer(path: &Path, cfg: &LogConfig, tail_cached: bool) -> Result<Rc<Appender>, BrokerError> {
    let writer =
        crate::storage::open_appender(path, append_mode(cfg, tail_cached)).await.map_err(|e| storage(path, e))?;
    Ok(Rc::new(writer))
}

/// Kafka's `message.timestamp.after.max.ms` / `before.max.ms` for a CreateTime batch: its
/// newest record may not be further ahead of `now`, its oldest not further behind. Records
/// without a timestamp (-1) are exempt, as in Kafka.
fn check_timestamps(records: &RecordsSummary, cfg: &LogConfig, now: i64) -> Result<(), BatchError> {
    let after = cfg.timestamp_after_max_ms;
    let newest = records.max_timestamp;
    if after != NEVER && newest != -1 && newest > now.saturating_add(after as i64) {
        return Err(BatchError::Timestamp { timestamp: newest, now, bound_ms: after, side: "ahead of" });
    }
    let before = cfg.timestamp_before_max_ms;
    if let Some(oldest) = records.min_timestamp {
        if before != NEVER && oldest < now.saturating_sub(before as i64) {
            return Err(BatchError::Timestamp { timestamp: oldest, now, bound_ms: before, side: "behind" });
        }
    }
    Ok(())
}
