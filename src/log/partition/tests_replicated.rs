//! The log operations a replica drives (`replicated`): writes of raft's batches, the high
//! watermark only where raft committed, divergent tails cut across segments with the
//! indexes and idempotence state rolled back, and the scan a replica's store is rebuilt from.

use bytes::Bytes;
use futures_channel::oneshot;

use super::tests::{batch, cfg, idem, read_all, run};
use super::*;
use crate::config::FlushPolicy;
use crate::protocol::batch as wire;

/// `b` as the leader would store it at `base` in `epoch`.
fn stamped(b: &Bytes, base: i64, epoch: i32) -> Bytes {
    let mut v = b.to_vec();
    wire::patch(&mut v, base, epoch);
    Bytes::from(v)
}

/// Batches 0..n, each of two records, stamped back to back from offset `from`.
fn entries(from: i64, range: std::ops::Range<usize>, epoch: i32) -> Vec<Bytes> {
    range.enumerate().map(|(k, i)| stamped(&batch(i), from + 2 * k as i64, epoch)).collect()
}

async fn open(path: &std::path::Path, segment_bytes: u64) -> Rc<Partition> {
    let p = Partition::open("t", 0, path.to_path_buf(), cfg(FlushPolicy::Always, segment_bytes), Probe::detached())
        .await
        .unwrap();
    p.make_replicated();
    p
}

fn end_of(locs: &[BatchLoc], batches: &[Bytes], i: usize) -> BatchLoc {
    BatchLoc { segment: locs[i].segment, pos: locs[i].pos + batches[i].len() as u64 }
}

#[test]
fn fetches_see_only_what_raft_committed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    run(async move {
        let p = open(&path, 1 << 20).await;
        let b = entries(0, 0..3, 1);
        let locs = p.write_entries(None, &b).await.unwrap();
        assert_eq!((p.offsets().log_end, p.offsets().high_watermark), (6, 0), "written is not committed");
        assert!(p.read(0, 1 << 20, true).unwrap().records.is_none());
        for past_watermark in [2, 6] {
            assert!(p.read(past_watermark, 1 << 20, true).unwrap().records.is_none(), "written, not yet readable");
        }
        assert_eq!(p.read(7, 1 << 20, true).unwrap_err(), ErrorCode::OffsetOutOfRange, "past the log end");
        p.set_high_watermark(4, end_of(&locs, &b, 1));
        // The newest timestamp is the third batch's, not yet committed: ListOffsets
        // MAX_TIMESTAMP has no answer until it is.
        assert_eq!(p.max_timestamp_offset(), None);
        let r = p.read(0, 1 << 20, true).unwrap();
        assert_eq!(r.records.unwrap().len as usize, b[0].len() + b[1].len(), "never past the watermark");
        assert_eq!(read_all(&p).len(), 2);
        p.set_high_watermark(2, end_of(&locs, &b, 0));
        assert_eq!(p.offsets().high_watermark, 4, "the watermark never goes back");
        p.set_high_watermark(6, end_of(&locs, &b, 2));
        assert_eq!(p.max_timestamp_offset(), Some((4, 1_002)));
        for (loc, x) in locs.iter().zip(&b) {
            assert_eq!(&p.read_batch(*loc, x.len() as u32).unwrap(), x);
        }
        // A batch that does not start at the log end is refused and the replica goes offline.
        assert!(p.write_entries(None, &entries(9, 3..4, 1)).await.is_err());
        assert!(p.write_entries(None, &entries(6, 3..4, 1)).await.is_err(), "offline");
    });
}

#[test]
fn a_divergent_tail_is_cut_across_segments_and_the_log_reopens_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    run(async move {
        let p = open(&path, 600).await;
        let b = entries(0, 0..20, 1);
        let locs = p.write_entries(None, &b).await.unwrap();
        let segments = p.segment_count();
        assert!(segments > 3, "small segments roll: {segments}");
        p.set_high_watermark(10, end_of(&locs, &b, 4));
        assert!(p.truncate_from(8).await.is_err(), "committed data is never cut");
        let p = open(&path, 600).await; // the failed cut took that one offline
        p.set_high_watermark(10, BatchLoc { segment: locs[4].segment, pos: locs[4].pos + b[4].len() as u64 });
        // A new leader of epoch 2 replaces everything from offset 14 (batch 7) on.
        let fresh = entries(14, 100..104, 2);
        let new_locs = p.write_entries(Some(14), &fresh).await.unwrap();
        assert!(p.segment_count() < segments, "later segments removed");
        assert_eq!(p.offsets().log_end, 22);
        let last = fresh.len() - 1;
        p.set_high_watermark(22, end_of(&new_locs, &fresh, last));
        let all = read_all(&p);
        assert_eq!(all.len(), 11);
        let scanned = p.raft_batches().unwrap();
        let epochs: Vec<i32> = scanned.iter().map(|(_, h)| i32::from_be_bytes(h[12..16].try_into().unwrap())).collect();
        assert_eq!(epochs, [vec![1; 7], vec![2; 4]].concat());
        p.close().await.unwrap();

        // After a restart the same batches are found where they were written.
        let p = open(&path, 600).await;
        let again = p.raft_batches().unwrap();
        assert_eq!(
            again.iter().map(|(l, _)| *l).collect::<Vec<_>>(),
            scanned.iter().map(|(l, _)| *l).collect::<Vec<_>>()
        );
        assert_eq!(&p.read_batch(again[10].0, fresh[3].len() as u32).unwrap(), &fresh[3]);
        assert_eq!(p.offsets().high_watermark, 0, "a replicated log waits for its replica");
        // Lookups use rebuilt indexes: a read in the middle finds its batch.
        p.set_high_watermark(22, end_of(&new_locs, &fresh, last));
        assert_eq!(p.read(15, 1, true).unwrap().first_batch_len as usize, fresh[0].len());
    });
}

#[test]
fn a_cut_rolls_the_idempotence_state_back_with_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    run(async move {
        let p = open(&path, 1 << 20).await;
        let b: Vec<Bytes> = (0..3).map(|s| stamped(&idem(s, 7, 0, 2 * s as i32), 2 * s as i64, 1)).collect();
        p.write_entries(None, &b).await.unwrap();
        p.reset_proposals();
        let (tx, _rx) = oneshot::channel();
        assert!(p.prepare_replicated(&idem(2, 7, 0, 4), tx).unwrap().is_none(), "a retry of the last batch");
        // The third batch never committed: a new leader cut it, so its retry is new again.
        p.write_entries(Some(4), &[]).await.unwrap();
        let (tx, _rx) = oneshot::channel();
        let (prop, _reply) = p.prepare_replicated(&idem(2, 7, 0, 4), tx).unwrap().expect("new after the cut");
        assert_eq!(prop.header.base_sequence, 4);
        let (tx, _rx) = oneshot::channel();
        assert_eq!(
            p.prepare_replicated(&idem(3, 7, 0, 6), tx).err().map(|r| r.code),
            Some(ErrorCode::OutOfOrderSequenceNumber),
            "a gap in sequence"
        );
    });
}

#[test]
fn a_retry_parked_on_a_proposal_is_refused_once_leadership_is_lost_or_the_tail_cut() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    run(async move {
        let p = open(&path, 1 << 20).await;
        for (pid, lost) in [(7, "leadership"), (17, "a cut")] {
            let end = p.offsets().log_end;
            // The leader proposes the producer's batch at `end`; a retry comes before it
            // commits and is parked on it.
            let (tx, _first) = oneshot::channel();
            let (prop, _reply) = p.prepare_replicated(&idem(0, pid, 0, 0), tx).unwrap().expect("new");
            p.proposed(&prop.header, end);
            let (tx, mut retry) = oneshot::channel();
            assert!(p.prepare_replicated(&idem(0, pid, 0, 0), tx).unwrap().is_none(), "parked");
            let other = stamped(&idem(0, pid + 1, 0, 0), end, 2);
            match lost {
                "leadership" => p.reset_proposals(),
                _ => {
                    // Written here, then cut by a new leader's entry at the same offset.
                    p.write_entries(None, &[stamped(&idem(0, pid, 0, 0), end, 1)]).await.unwrap();
                }
            }
            // Another leader's batch lands at those offsets and commits: the retry is not told
            // it was stored there.
            let cut = (lost == "a cut").then_some(end);
            let locs = p.write_entries(cut, std::slice::from_ref(&other)).await.unwrap();
            p.set_high_watermark(end + 2, end_of(&locs, std::slice::from_ref(&other), 0));
            let answer = retry.try_recv().unwrap().expect("answered");
            assert_eq!(answer.err(), Some(ErrorCode::NotLeaderOrFollower), "after {lost}");
        }
    });
}

#[test]
fn a_replicated_log_start_moves_only_as_far_as_allowed_and_a_reset_starts_it_afresh() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    run(async move {
        let p = open(&path, 300).await;
        // Batches of producer 9, two records each, one write each so that small segments roll.
        let mut end = BatchLoc { segment: 0, pos: 0 };
        for i in 0..12 {
            let b = vec![stamped(&idem(i, 9, 0, 2 * i as i32), 2 * i as i64, 1)];
            let locs = p.write_entries(None, &b).await.unwrap();
            end = end_of(&locs, &b, 0);
        }
        p.set_high_watermark(24, end);
        let segments = p.segment_count();
        assert!(segments >= 3, "{segments} segments");
        let now = now_ms();
        assert_eq!(p.retention_point(now, i64::MAX), None, "retention keeps everything by default");
        let mut c = p.config();
        c.retention_bytes = 0;
        p.set_config(c);
        let all = p.retention_point(now, i64::MAX).expect("everything but the active segment expired");
        let bounded = p.retention_point(now, all - 1).expect("a segment ends below the bound");
        assert!(bounded < all && bounded > 0);
        assert_eq!(p.retention_point(now, 0), None, "no segment ends at or before offset 0");
        assert!(p.starts_at(bounded).unwrap() && !p.starts_at(bounded + 1).unwrap(), "a batch starts at {bounded}");

        let state = p.producers_before(ProducerState::default(), 0, bounded).unwrap();
        let last = state.summaries()[0].last_sequence;
        assert_eq!(i64::from(last) + 1, bounded, "the last batch before {bounded} ends it (sequence = offset)");
        let carried = p.producers_before(state, bounded, 24).unwrap();
        assert_eq!(carried.summaries()[0].last_sequence, 23);

        assert!(p.drop_below(bounded) > 0);
        assert_eq!((p.offsets().log_start, p.offsets().log_end), (bounded, 24));
        assert!(p.segment_count() < segments);
        assert_eq!(read_all(&p).first().map(|h| h.base_offset), Some(bounded));

        p.reset_to(100, carried).await.unwrap();
        let o = p.offsets();
        assert_eq!((o.log_start, o.high_watermark, o.log_end, p.segment_count()), (100, 100, 100, 1));
        assert!(p.starts_at(100).unwrap() && !p.starts_at(90).unwrap());
        assert_eq!(p.producers()[0].last_sequence, 23, "the snapshot's producer state is the log's");
        let b = entries(100, 0..2, 2);
        let locs = p.write_entries(None, &b).await.unwrap();
        p.set_high_watermark(104, end_of(&locs, &b, 1));
        p.close().await.unwrap();
        let p = open(&path, 300).await;
        assert_eq!((p.offsets().log_start, p.offsets().log_end), (100, 104), "a restart finds the new start");
        assert_eq!(p.producers()[0].last_sequence, 23, "and the producer state saved with it");
    });
}

#[test]
fn a_snapshots_data_replaces_the_log_below_its_start_and_survives_a_restart() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let (from, to) = (dir.path().join("t-0"), dir.path().join("t-1"));
    run(async move {
        let leader = open(&from, 300).await;
        let b = entries(0, 0..8, 1);
        let locs = leader.write_entries(None, &b).await.unwrap();
        leader.set_high_watermark(16, end_of(&locs, &b, 7));
        let (start, below) = leader.below(10).unwrap();
        let whole: Vec<u8> = b[..5].iter().flat_map(|x| x.to_vec()).collect();
        assert_eq!((start, &below[..]), (0, &whole[..]), "the batches starting below 10, as written");
        // What a cleaning left: the batches at 4 and 8, the log starting at 3.
        let cleaned: Vec<u8> = [&b[2], &b[4]].iter().flat_map(|x| x.to_vec()).collect();
        let p = open(&to, 300).await;
        p.write_entries(None, &entries(0, 0..1, 1)).await.unwrap();
        let mut torn = cleaned.clone();
        torn.truncate(cleaned.len() - 1);
        assert!(p.install(3, &torn, 10, ProducerState::default()).await.is_err(), "a torn batch is refused");
        // Where this replica's own cleanings got to says nothing of the leader's records.
        let checkpoint = to.join(super::compaction::CHECKPOINT_FILE);
        std::fs::write(&checkpoint, b"9").unwrap();
        p.first_dirty.set(9);
        p.install(3, &cleaned, 10, ProducerState::default()).await.unwrap();
        assert!(!checkpoint.exists() && p.first_dirty.get() == 0, "all of the snapshot's records are dirty here");
        let read = |p: &Partition, at: i64| {
            let region = p.read(at, 1 << 20, true).unwrap().records.expect("records");
            let mut buf = vec![0; region.len as usize];
            region.file.read_exact_at(&mut buf, region.pos).unwrap();
            buf
        };
        let o = p.offsets();
        assert_eq!((o.log_start, o.high_watermark, o.log_end), (3, 10, 10));
        assert_eq!(read(&p, 3), cleaned, "read from the log start, gaps and all");
        assert_eq!(p.below(10).unwrap(), (3, Bytes::from(cleaned.clone())), "and sent on as it came");
        assert!(p.starts_at(10).unwrap(), "the raft log starts after the data");
        let next = entries(10, 0..1, 2);
        let locs = p.write_entries(None, &next).await.unwrap();
        p.set_high_watermark(12, end_of(&locs, &next, 0));
        p.close().await.unwrap();
        let p = open(&to, 300).await;
        assert_eq!((p.offsets().log_start, p.offsets().log_end), (3, 12), "a restart finds the start and the data");
        // Before raft's commit is known again, what lies below the raft log's start counts
        // as committed: a snapshot sent now carries it.
        assert_eq!(p.below(10).unwrap(), (3, Bytes::new()), "nothing counted before");
        p.commit_below(10).unwrap();
        assert_eq!(p.offsets().high_watermark, 10);
        assert_eq!(p.below(10).unwrap(), (3, Bytes::from(cleaned.clone())), "the records below the raft start");
        p.set_high_watermark(12, end_of(&locs, &next, 0)); // raft's commit, as after any restart
        assert_eq!(read(&p, 3)[..cleaned.len()], cleaned[..]);
    });
}

/// Pages of `path` in the page cache (`cachestat`, Linux 6.5+), counted one by one.
fn cached_pages(path: &std::path::Path) -> usize {
    let file = std::fs::File::open(path).unwrap();
    let len = file.metadata().unwrap().len();
    (0..len.div_ceil(4096)).filter(|i| crate::sys::resident(&file, i * 4096, 4096)).count()
}

/// A follower (`set_tail_cached(false)`) of a log that syncs every write appends past the
/// page cache; as leader it writes through it again, and back. Across the switches, rolls and
/// a cut tail the log holds every batch where the replica was told it landed, and a restart
/// finds them all.
#[test]
fn a_follower_appends_past_the_page_cache_and_a_leader_through_it_with_the_same_log() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    run(async move {
        use crate::storage::AppendMode;
        let p = open(&path, 16 << 10).await;
        let mode = |p: &Partition| p.st.borrow().writer.as_ref().map(|w| w.mode());
        let mut written: Vec<(BatchLoc, Bytes)> = Vec::new();
        let mut next = 0i64;
        let mut i = 0;
        for (phase, cached) in [false, true, false].into_iter().enumerate() {
            p.set_tail_cached(cached);
            for _ in 0..300 {
                // One to three batches per write, as raft hands them over.
                let n = 1 + i % 3;
                let b = entries(next, i..i + n, 1);
                let locs = p.write_entries(None, &b).await.unwrap();
                written.extend(locs.into_iter().zip(b));
                next += 2 * n as i64;
                i += n;
            }
            let want = if cached { AppendMode::CachedDurable } else { AppendMode::Direct };
            assert_eq!(mode(&p), Some(want), "phase {phase}");
            if !cached {
                let sealed = p.st.borrow().segments.iter().rev().nth(1).map(|s| s.path.clone()).unwrap();
                assert!(cached_pages(&sealed) <= 1, "phase {phase}: a follower's segment stays out of the page cache");
            }
        }
        // A new leader replaces the last 10 batches, written by this follower past the cache.
        let cut = written.len() - 10;
        let at = next - 20;
        written.truncate(cut);
        let b = entries(at, 5000..5004, 2);
        let locs = p.write_entries(Some(at), &b).await.unwrap();
        written.extend(locs.into_iter().zip(b));
        let end = next - 20 + 8;
        assert_eq!(p.offsets().log_end, end);
        for (loc, bytes) in &written {
            assert_eq!(&p.read_batch(*loc, bytes.len() as u32).unwrap(), bytes, "at {loc:?}");
        }
        let (loc, bytes) = written.last().unwrap();
        p.set_high_watermark(end, BatchLoc { segment: loc.segment, pos: loc.pos + bytes.len() as u64 });
        assert_eq!(read_all(&p).len(), written.len(), "every batch, read as fetches read");
        p.close().await.unwrap();

        let p = open(&path, 16 << 10).await;
        assert_eq!(p.offsets().log_end, end, "a restart finds the data's end, not the zeros after it");
        let found: Vec<BatchLoc> = p.raft_batches().unwrap().into_iter().map(|(l, _)| l).collect();
        assert_eq!(found, written.iter().map(|(l, _)| *l).collect::<Vec<_>>());
    });
}
