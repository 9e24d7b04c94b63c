//! A partition log that raft owns (DESIGN §9): the replica decides what is written where and
//! when the high watermark moves; this file gives it the log operations for that. The
//! appender's queue and writer task stay idle: each replica writes through `write_entries`,
//! one write at a time, in the order its Readies came.
//!
//! - A leader checks and rewrites a produced batch with `prepare_replicated` (validation,
//!   idempotence, the topic's rewrites), lets the replica stamp its offset and propose it, and
//!   records the proposal in the idempotence state with `proposed`.
//! - Every replica writes what raft hands it with `write_entries`, after cutting a divergent
//!   uncommitted tail (`truncate_from`: later segments removed, the indexes and the producer
//!   state rolled back to the cut).
//! - `set_high_watermark` moves what fetches may read to the end of the last committed batch.
//! - `raft_batches` and `read_batch` are what the replica's store is rebuilt and read from.

use std::rc::Rc;

use bytes::Bytes;

use super::{now_ms, storage, AppendReply, Appended, BatchLoc, Partition, Pending, Prepared, Refusal};
use crate::error::BrokerError;
use crate::log::segment::Segment;
use crate::protocol::batch::{self, BatchHeader};
use crate::protocol::ErrorCode;

/// A produced batch ready for the leader's replica to stamp and propose.
pub struct ToPropose {
    /// The batch as it will be stored, but for its base offset and leader epoch.
    pub batch: Vec<u8>,
    pub header: BatchHeader,
    /// The broker's clock stamped in (LogAppendTime topics), else -1.
    pub log_append_time: i64,
}

impl Partition {
    /// Hands the log to raft: from now on only the replica moves the high watermark, which
    /// starts at the log start until the replica says what is committed.
    pub fn make_replicated(&self) {
        let mut st = self.st.borrow_mut();
        st.replicated = true;
        // Its leader sends back the records a crash took from under a stored log start
        // (`State::start_past_end`): they were committed before the start moved.
        st.start_past_end = None;
        st.hwm = st.log_start;
        for seg in &st.segments {
            seg.committed.set(0);
        }
    }

    /// Counts every batch below `offset` (the raft log's start) committed, as raft does
    /// whatever commit index its state file kept: fetches, and the records a snapshot carries
    /// (`below`), reach up to it at once after an open, not only once this replica learns a
    /// commit past it.
    pub fn commit_below(&self, offset: i64) -> std::io::Result<()> {
        let mut st = self.st.borrow_mut();
        let offset = offset.min(st.written);
        if offset <= st.hwm {
            return Ok(());
        }
        for seg in st.segments.iter().filter(|s| s.base_offset < offset) {
            let end = match seg.next_offset.get() <= offset {
                true => seg.size.get(),
                // A raft entry starts at the raft log's start: the batch found starts there.
                false => seg.find_before(offset, seg.size.get())?.map_or(seg.size.get(), |(pos, _)| pos),
            };
            seg.committed.set(seg.committed.get().max(end));
        }
        st.hwm = offset;
        Ok(())
    }

    pub fn is_replicated(&self) -> bool {
        self.st.borrow().replicated
    }

    /// A leader's checks of a produced batch, as `append` makes them; the batch to propose,
    /// with `reply` handed back for when it commits. None when it is the retry of a batch
    /// already in the log: `reply` then gets the first append's offsets once committed.
    pub fn prepare_replicated(
        &self,
        records: &Bytes,
        reply: AppendReply,
    ) -> Result<Option<(ToPropose, AppendReply)>, Refusal> {
        match self.prepare(records)? {
            Prepared::Duplicate { appended, last_offset } => {
                self.answer_duplicate(appended, last_offset, reply);
                Ok(None)
            }
            Prepared::New { rewritten, header, log_append_time } => {
                let mut batch = rewritten.unwrap_or_else(|| records.to_vec());
                if log_append_time >= 0 {
                    batch::stamp_log_append_time(&mut batch, log_append_time);
                }
                Ok(Some((ToPropose { batch, header, log_append_time }, reply)))
            }
        }
    }

    /// The leader proposed `header`'s batch at `base_offset`: later batches of its producer
    /// are checked against it.
    pub fn proposed(&self, header: &BatchHeader, base_offset: i64) {
        let h = BatchHeader { base_offset, ..*header };
        self.producers.borrow_mut().update(&h, now_ms());
    }

    /// Forgets proposals that may never commit (leadership lost, or just won): the
    /// idempotence state goes back to what the log holds.
    pub fn reset_proposals(&self) {
        *self.producers.borrow_mut() = self.producers_written.borrow().clone();
        // A retry parked on a proposal waits for offsets that may now go to other batches.
        self.fail_duplicates(ErrorCode::NotLeaderOrFollower);
    }

    /// What a producer is told for a committed batch at `base_offset`.
    pub fn appended(&self, base_offset: i64, log_append_time: i64) -> Appended {
        Appended { base_offset, log_start_offset: self.st.borrow().log_start, log_append_time }
    }

    /// Writes batches raft handed over (offsets already in them), after cutting the log at
    /// `truncate` if given; durable as the flush policy says. Returns where each landed.
    pub async fn write_entries(
        self: &Rc<Self>,
        truncate: Option<i64>,
        batches: &[Bytes],
    ) -> Result<Vec<BatchLoc>, BrokerError> {
        if self.st.borrow().failed {
            return Err(self.offline());
        }
        if let Some(offset) = truncate {
            self.truncate_from(offset).await?;
        }
        if batches.is_empty() {
            return Ok(Vec::new());
        }
        let mut items = Vec::with_capacity(batches.len());
        let mut at = 0;
        for b in batches {
            let header = batch::read_header(b).map_err(|e| self.corrupt(e.to_string()))?;
            items.push(Pending { header, at, log_append_time: -1, reply: None });
            at += b.len();
        }
        let (first, end) = (items[0].header.base_offset, self.st.borrow().written);
        if first != end {
            return Err(self.corrupt(format!("raft hands over batches from offset {first} to a log ending at {end}")));
        }
        self.st.borrow_mut().next_offset = items.last().expect("one").header.last_offset() + 1;
        let mut locs = Vec::with_capacity(items.len());
        let chunk = crate::storage::Chunk::Batches(batches.to_vec());
        let (written, result) = self.write_queued(chunk, &items, &mut locs).await;
        match result {
            Ok(()) if written == items.len() => Ok(locs),
            Ok(()) => Err(self.corrupt("a write stopped short without an error".into())),
            Err(e) => {
                // Raft counts an entry only once it is durable: any failure, a full disk
                // included, takes the replica offline (its peers still have the data).
                self.st.borrow_mut().failed = true;
                tracing::error!(topic = %self.topic, partition = self.index, "replicated log write failed, the replica is offline until a restart recovers it: {e}");
                Err(e)
            }
        }
    }

    /// Cuts the log at `offset`: every batch at or after it goes (an uncommitted tail raft
    /// replaced). Later segments are removed, the containing one is cut and re-indexed, and
    /// the idempotence state is rebuilt for the shorter log.
    pub async fn truncate_from(self: &Rc<Self>, offset: i64) -> Result<(), BrokerError> {
        self.swap_ended().await;
        let (hwm, written) = {
            let st = self.st.borrow();
            (st.hwm, st.written)
        };
        if offset >= written {
            return Ok(());
        }
        if offset < hwm {
            return Err(self.corrupt(format!("raft asked to cut at {offset}, below the committed {hwm}")));
        }
        let cfg = self.cfg.get();
        let cap = cfg.index_capacity();
        let mut removed = 0u64;
        let (path, reopen) = {
            let mut st = self.st.borrow_mut();
            let old_active = st.segments.last().expect("one segment").base_offset;
            while st.segments.len() > 1 && st.segments.last().expect("one").base_offset >= offset {
                let seg = st.segments.pop().expect("checked");
                removed += seg.size.get();
                seg.remove_files().map_err(|e| storage(&seg.path, e))?;
            }
            let seg = st.segments.last().expect("one segment");
            // The batch holding `offset` (one starts there: raft cuts between entries) and all after it go.
            let found = seg.find_before(offset, seg.size.get()).map_err(|e| storage(&seg.path, e))?;
            let pos = found.map_or(seg.size.get(), |(pos, _)| pos);
            removed += seg.size.get() - pos;
            seg.truncate_durably(pos).map_err(|e| storage(&seg.path, e))?;
            // Re-index the cut segment from its batches: its index files may point past the cut.
            let base = seg.base_offset;
            let mut fresh = Segment::open(&self.dir, base, cap, false).map_err(|e| storage(&self.dir, e))?;
            fresh.rebuild(0, false, cfg.index_interval_bytes).map_err(|e| storage(&fresh.path, e))?;
            fresh.committed.set(seg.committed.get().min(pos));
            fresh.first_append.set(seg.first_append.get());
            let path = fresh.path.clone();
            *st.segments.last_mut().expect("one segment") = fresh;
            st.written = offset;
            st.next_offset = offset;
            (path, base != old_active)
        };
        self.probe.log_bytes(-(removed as i64));
        if reopen {
            let writer = self.open_active_writer(&path).await?;
            self.st.borrow_mut().writer = Some(writer);
        }
        crate::storage::sync_dir(&self.dir).map_err(|e| storage(&self.dir, e))?;
        super::snapshot::discard_after(&self.dir, offset).map_err(|e| storage(&self.dir, e))?;
        let producers = {
            let st = self.st.borrow();
            super::snapshot::recover(&self.dir, &st.segments, offset, now_ms()).map_err(|e| storage(&self.dir, e))?
        };
        *self.producers_written.borrow_mut() = producers.clone();
        *self.producers.borrow_mut() = producers;
        self.fail_duplicates(ErrorCode::NotLeaderOrFollower);
        tracing::info!(topic = %self.topic, partition = self.index, offset, removed, "cut a divergent log tail");
        Ok(())
    }

    /// Raft committed through `offset` (exclusive), whose last batch ends at `end`: fetches
    /// may read up to there, and retries of batches below it are answered.
    pub fn set_high_watermark(&self, offset: i64, end: BatchLoc) {
        {
            let mut st = self.st.borrow_mut();
            if offset <= st.hwm {
                return;
            }
            st.hwm = offset;
            for seg in st.segments.iter().rev() {
                if seg.base_offset > end.segment {
                    continue;
                }
                if seg.base_offset == end.segment {
                    seg.committed.set(seg.committed.get().max(end.pos));
                    continue;
                }
                if seg.committed.get() == seg.size.get() {
                    break;
                }
                seg.committed.set(seg.size.get());
            }
        }
        self.wake_waiters();
    }

    /// The batch of `len` bytes at `loc`, read from its segment file.
    pub fn read_batch(&self, loc: BatchLoc, len: u32) -> std::io::Result<Bytes> {
        let st = self.st.borrow();
        let seg = st
            .segments
            .iter()
            .rev()
            .find(|s| s.base_offset == loc.segment)
            .ok_or_else(|| std::io::Error::other(format!("no segment at offset {}", loc.segment)))?;
        let mut buf = vec![0u8; len as usize];
        seg.read_at(&mut buf, loc.pos)?;
        Ok(Bytes::from(buf))
    }

    /// Every batch of the log in order, each with its location: its header, or all of it
    /// for a control batch (raft's own entries are among those). What a replica's store is
    /// rebuilt from at open.
    pub fn raft_batches(&self) -> std::io::Result<Vec<(BatchLoc, Bytes)>> {
        let st = self.st.borrow();
        let mut out = Vec::new();
        for seg in &st.segments {
            let mut pos = 0;
            while let Some(h) = seg.header_at(pos, seg.size.get())? {
                let len = if h.is_control() { h.size } else { batch::HEADER_LEN };
                let mut buf = vec![0u8; len];
                seg.read_at(&mut buf, pos)?;
                out.push((BatchLoc { segment: seg.base_offset, pos }, Bytes::from(buf)));
                pos += h.size as u64;
            }
        }
        Ok(out)
    }

    fn offline(&self) -> BrokerError {
        storage(&self.dir, std::io::Error::other("the replica is offline"))
    }

    /// What raft handed over does not fit this log: a bug or a corrupt peer, never a reason
    /// to guess. The replica goes offline.
    fn corrupt(&self, why: String) -> BrokerError {
        self.st.borrow_mut().failed = true;
        tracing::error!(topic = %self.topic, partition = self.index, "replicated log is inconsistent, the replica is offline: {why}");
        storage(&self.dir, std::io::Error::other(why))
    }
}
