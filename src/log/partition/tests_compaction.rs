//! Compaction of a partition log: what a cleaning keeps, where, and that a crash at any
//! step of it leaves the old segments or the new ones (faults through `storage::faults`).

use std::collections::BTreeMap;

use bytes::Bytes;

use super::tests::{cfg, run};
use super::*;
use crate::config::FlushPolicy;
use crate::log::cleaner::{self, CleanerSettings};
use crate::protocol::batch;
use crate::storage::faults::{self, Fault, Op};

const SETTINGS: CleanerSettings = CleanerSettings { map_capacity: 1 << 16, io_limit: None };

/// (offset, key, value) of a record; None value: a tombstone.
type Rec = (i64, Vec<u8>, Option<Vec<u8>>);

fn compacted(segment_bytes: u64) -> LogConfig {
    let mut c = cfg(FlushPolicy::Os, segment_bytes);
    (c.compact, c.delete) = (true, false);
    c.min_cleanable_dirty_ratio = 0.0;
    c
}

/// Appends one record per batch: record i sets key `i % keys` to `v<i>`, or deletes it when
/// `tombstone(i)`. Returns what was appended.
async fn fill(p: &Partition, from: usize, n: usize, keys: usize, tombstone: impl Fn(usize) -> bool) -> Vec<Rec> {
    let mut out = Vec::new();
    for i in from..from + n {
        let key = format!("key-{:03}", i % keys).into_bytes();
        let value = (!tombstone(i)).then(|| format!("v{i}").into_bytes());
        let b = batch::build_keyed(crate::sys::unix_now_ms(), &[(Some(&key), value.as_deref())]);
        let at = p.append(&Bytes::from(b)).unwrap().await.unwrap().unwrap().base_offset;
        out.push((at, key, value));
    }
    out
}

/// Every record a fetch from the log start reads, in order (offsets may have gaps).
fn records(p: &Partition) -> Vec<Rec> {
    use std::os::unix::fs::FileExt;
    let mut out = Vec::new();
    let mut next = p.offsets().log_start;
    while next < p.offsets().high_watermark {
        let r = p.read(next, 1 << 20, true).unwrap();
        let Some(region) = r.records else { break };
        let mut buf = vec![0; region.len as usize];
        region.file.read_exact_at(&mut buf, region.pos).unwrap();
        let mut at = 0;
        while let Some(Ok(size)) = batch::batch_size(&buf[at..]) {
            if at + size > buf.len() {
                break;
            }
            let h = batch::check_batch(&buf[at..at + size]).unwrap();
            let body = batch::record_bytes(&buf[at..at + size], 1 << 24).unwrap();
            for r in batch::parse_records(&body, h.base_timestamp) {
                let o = h.base_offset + r.offset_delta as i64;
                if o >= next {
                    out.push((o, r.key.unwrap_or_default().to_vec(), r.value.map(<[u8]>::to_vec)));
                }
            }
            next = next.max(h.last_offset() + 1);
            at += size;
        }
    }
    out
}

/// What compaction must leave of `appended`: each key's latest record, at its offset.
fn latest(appended: &[Rec]) -> BTreeMap<Vec<u8>, Rec> {
    appended.iter().map(|r| (r.1.clone(), r.clone())).collect()
}

/// Runs the cleaning the log is due for, as the shard's cleaner does (the file work in
/// place of the blocking pool). None if it is not due.
fn clean(p: &Partition, settings: &CleanerSettings) -> Option<Result<bool, BrokerError>> {
    let (_, due) = p.cleaning_due(crate::sys::unix_now_ms(), settings);
    let job = due?.job;
    let cleaned = match cleaner::pass::run(&job) {
        Ok(c) => c,
        Err(e) => return Some(Err(storage(&job.dir, e))),
    };
    Some(p.swap_cleaned(&job, &cleaned))
}

/// Checks that `got` holds the latest record of every key (tombstones included, unless
/// `tombstones_gone`) at its original offset, in offset order, and, in what was cleaned (the
/// segments before the active one, `p`'s), each key once.
fn check_compacted(p: &Partition, got: &[Rec], appended: &[Rec], tombstones_gone: bool) {
    let cut = p.st.borrow().segments.last().unwrap().base_offset;
    let want = latest(appended);
    let offsets: Vec<i64> = got.iter().map(|r| r.0).collect();
    assert!(offsets.windows(2).all(|w| w[0] < w[1]), "offsets only grow");
    let last_seen: BTreeMap<Vec<u8>, Rec> = got.iter().map(|r| (r.1.clone(), r.clone())).collect();
    for (key, rec) in &want {
        match (&rec.2, last_seen.get(key)) {
            (None, None) if tombstones_gone => {}
            (_, Some(seen)) => assert_eq!(seen, rec, "the latest record of {}", String::from_utf8_lossy(key)),
            (_, None) => panic!("{} lost its latest record {rec:?}", String::from_utf8_lossy(key)),
        }
    }
    let cleaned: Vec<&Rec> = got.iter().filter(|r| r.0 < cut).collect();
    let keys: std::collections::HashSet<&Vec<u8>> = cleaned.iter().map(|r| &r.1).collect();
    assert_eq!(keys.len(), cleaned.len(), "each key once below the active segment ({cut})");
}

#[test]
fn a_cleaning_keeps_the_latest_record_of_each_key_at_its_offset_and_tombstones_for_a_while() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    run(async move {
        let c = compacted(2048);
        let p = Partition::open("t", 0, path.clone(), c, Probe::detached()).await.unwrap();
        let mut appended = fill(&p, 0, 400, 20, |i| i % 37 == 5).await;
        let before = p.offsets();
        assert!(p.segment_count() > 5);
        assert_eq!(clean(&p, &SETTINGS).map(Result::unwrap), Some(true), "due and cleaned");
        // The replaced segments' files are closed (by the shard's closer thread), not left open.
        let open_deleted = || {
            std::fs::read_dir("/proc/self/fd")
                .unwrap()
                .flatten()
                .filter_map(|fd| std::fs::read_link(fd.path()).ok())
                .filter(|target| target.starts_with(&path) && target.to_string_lossy().ends_with(" (deleted)"))
                .count()
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while open_deleted() > 0 {
            assert!(std::time::Instant::now() < deadline, "{} removed segment files still open", open_deleted());
            glommio::timer::sleep(std::time::Duration::from_millis(5)).await;
        }
        let after = p.offsets();
        assert!(after.size < before.size / 3, "{} bytes became {}", before.size, after.size);
        assert_eq!((after.log_start, after.high_watermark), (before.log_start, before.high_watermark));
        // The active segment is never cleaned: its records are all still there.
        let got = records(&p);
        let cut = p.st.borrow().segments.last().unwrap().base_offset;
        assert_eq!(got.iter().filter(|r| r.0 >= cut).count(), appended.iter().filter(|r| r.0 >= cut).count());
        check_compacted(&p, &got, &appended, false);
        assert!(got.iter().any(|r| r.2.is_none()), "tombstones stay until delete.retention.ms has passed");
        assert!(clean(&p, &SETTINGS).is_none(), "nothing dirty: not due");

        // More updates; with delete.retention.ms over, the next cleaning drops the tombstones.
        let mut c0 = c;
        c0.delete_retention_ms = 0;
        p.set_config(c0);
        appended.extend(fill(&p, 400, 200, 20, |_| false).await);
        assert_eq!(clean(&p, &SETTINGS).map(Result::unwrap), Some(true));
        check_compacted(&p, &records(&p), &appended, true);
        // It survives a restart (the checkpoint too: nothing is due right after).
        p.close().await.unwrap();
        let p = Partition::open("t", 0, path.clone(), c0, Probe::detached()).await.unwrap();
        check_compacted(&p, &records(&p), &appended, true);
        assert!(clean(&p, &SETTINGS).is_none());
        assert_eq!(p.offsets().log_end, after.log_end + 200);
    });
}

#[test]
fn a_small_key_map_cleans_over_several_passes() {
    let dir = tempfile::tempdir().unwrap();
    run(async move {
        let p = Partition::open("t", 0, dir.path().join("t-0"), compacted(1024), Probe::detached()).await.unwrap();
        let appended = fill(&p, 0, 300, 30, |_| false).await;
        let small = CleanerSettings { map_capacity: 7, io_limit: None };
        let mut passes = 0;
        while let Some(r) = clean(&p, &small) {
            assert!(r.unwrap());
            passes += 1;
            assert!(passes < 100);
        }
        assert!(passes > 1, "{passes} passes");
        check_compacted(&p, &records(&p), &appended, false);
    });
}

#[test]
fn a_segment_a_cleaning_emptied_does_not_stop_time_retention() {
    let dir = tempfile::tempdir().unwrap();
    run(async move {
        let mut c = compacted(1024);
        (c.delete, c.retention_ms) = (true, 3_600_000);
        let p = Partition::open("t", 0, dir.path().join("t-0"), c, Probe::detached()).await.unwrap();
        let now = crate::sys::unix_now_ms();
        // Two hours old: keys a-* (each later superseded by a fresh record), then keys o-*
        // (never). Then the fresh records.
        let append = |key: String, ts: i64| {
            let b = batch::build_keyed(ts, &[(Some(key.as_bytes()), Some(&[b'x'; 100][..]))]);
            p.append(&Bytes::from(b)).unwrap()
        };
        for i in 0..8 {
            append(format!("a-{i}"), now - 7_200_000).await.unwrap().unwrap();
        }
        let old_end = p.offsets().log_end;
        for i in 0..8 {
            append(format!("o-{i}"), now - 7_200_000).await.unwrap().unwrap();
        }
        for i in 0..24 {
            append(format!("a-{}", i % 8), now).await.unwrap().unwrap();
        }
        assert_eq!(clean(&p, &SETTINGS).map(Result::unwrap), Some(true));
        let first = p.st.borrow().segments[0].size.get();
        assert_eq!(first, 0, "the cleaning emptied the first segment");
        assert!(p.apply_retention(now) >= 2, "it goes, and the old segment after it");
        assert!(p.offsets().log_start >= old_end);
    });
}

#[test]
fn a_producers_last_batch_stays_empty_and_keyless_records_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    run(async move {
        let p = Partition::open("t", 0, dir.path().join("t-0"), compacted(1024), Probe::detached()).await.unwrap();
        let keyless = Bytes::from(batch::build(1, &[b"no key"]));
        assert_eq!(p.append(&keyless).unwrap_err(), ErrorCode::InvalidRecord);
        // A batch whose header counts a record its body lacks (its CRC right for it): the
        // cleaner could never rewrite it.
        let mut short = batch::build_keyed(crate::sys::unix_now_ms(), &[(Some(b"key-000"), Some(b"one"))]);
        short[23..27].copy_from_slice(&1i32.to_be_bytes()); // last offset delta
        short[57..61].copy_from_slice(&2i32.to_be_bytes()); // record count
        let crc = crc32c::crc32c(&short[21..]);
        short[17..21].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(p.append(&Bytes::from(short)).unwrap_err(), ErrorCode::InvalidRecord);
        let mut b = batch::build_keyed(crate::sys::unix_now_ms(), &[(Some(b"key-000"), Some(b"idempotent"))]);
        batch::set_producer(&mut b, 7, 0, 0);
        let at = p.append(&Bytes::from(b.clone())).unwrap().await.unwrap().unwrap().base_offset;
        let appended = fill(&p, 0, 100, 1, |_| false).await;
        assert_eq!(clean(&p, &SETTINGS).map(Result::unwrap), Some(true));
        let headers: Vec<_> = p.st.borrow().segments.iter().flat_map(headers_of).collect();
        let kept = headers.iter().find(|h| h.base_offset == at).expect("the producer's last batch");
        assert_eq!((kept.record_count, kept.producer_id, kept.base_sequence), (0, 7, 0));
        check_compacted(&p, &records(&p), &appended, false);
        // Its retry is still known as one.
        let again = p.append(&Bytes::from(b)).unwrap().await.unwrap().unwrap();
        assert_eq!(again.base_offset, at);
    });
}

fn headers_of(seg: &crate::log::segment::Segment) -> Vec<batch::BatchHeader> {
    let (mut pos, end, mut out) = (0, seg.size.get(), Vec::new());
    while let Some(h) = seg.header_at(pos, end).unwrap() {
        pos += h.size as u64;
        out.push(h);
    }
    out
}

/// A crash at each step of a cleaning, modelled by failing the n-th call of one kind (the
/// call and all after it never happen), then reopening: the log reads exactly as before the
/// cleaning or exactly as after it.
#[test]
fn a_crash_at_any_step_of_a_cleaning_leaves_the_old_segments_or_the_new_ones() {
    let base = tempfile::tempdir().unwrap();
    let base_path = base.path().to_path_buf();
    run(async move {
        let c = compacted(1024);
        // The log before and after a cleaning that is not interrupted.
        let reference = base_path.join("reference");
        let p = Partition::open("t", 0, reference.join("t-0"), c, Probe::detached()).await.unwrap();
        let appended = fill(&p, 0, 120, 10, |_| false).await;
        let old = records(&p);
        clean(&p, &SETTINGS).unwrap().unwrap();
        let new = records(&p);
        check_compacted(&p, &new, &appended, false);
        assert_ne!(old, new);
        drop(p);
        let mut outcomes = BTreeMap::new();
        for op in [Op::Write, Op::Sync, Op::Rename, Op::Remove] {
            for skip in 0..40 {
                let dir = base_path.join(format!("{op:?}-{skip}"));
                copy_dir(&reference.join("t-0"), &dir, &old, &appended).await;
                let p = Partition::open("t", 0, dir.clone(), c, Probe::detached()).await.unwrap();
                assert_eq!(records(&p), old);
                faults::inject_after(&dir, op, Fault::Io, skip, None);
                let r = clean(&p, &SETTINGS).expect("due");
                faults::clear(&dir);
                drop(p); // as after kill -9: no close
                let p = Partition::open("t", 0, dir.clone(), c, Probe::detached()).await.unwrap();
                let got = records(&p);
                let outcome = if got == old {
                    "old"
                } else {
                    assert_eq!(got, new, "{op:?} failing after {skip} calls: neither the old log nor the cleaned one");
                    "new"
                };
                *outcomes.entry((format!("{op:?}"), outcome, r.is_ok())).or_insert(0) += 1;
                assert!(!dir.join(cleaner::swap::MANIFEST).exists() && !dir.join(cleaner::pass::TMP_DIR).exists());
                drop(p);
            }
        }
        // Both outcomes happen: crashes before the commit point and after it.
        assert!(outcomes.keys().any(|k| k.1 == "old" && !k.2), "{outcomes:?}");
        assert!(outcomes.keys().any(|k| k.1 == "new" && !k.2), "{outcomes:?}");
    });
}

/// A fresh log in `dir` holding what the reference log held before its cleaning.
async fn copy_dir(_reference: &std::path::Path, dir: &std::path::Path, old: &[Rec], appended: &[Rec]) {
    let p = Partition::open("t", 0, dir.to_path_buf(), compacted(1024), Probe::detached()).await.unwrap();
    for (offset, key, value) in appended {
        let b = batch::build_keyed(crate::sys::unix_now_ms(), &[(Some(key), value.as_deref())]);
        let at = p.append(&Bytes::from(b)).unwrap().await.unwrap().unwrap().base_offset;
        assert_eq!(at, *offset);
    }
    assert_eq!(records(&p), old);
    p.close().await.unwrap();
}

#[test]
fn an_idle_compacted_log_rolls_after_segment_ms_and_gets_cleaned() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    run(async move {
        let mut c = compacted(1 << 20);
        c.segment_ms = 3_600_000;
        let p = Partition::open("t", 0, path.clone(), c, Probe::detached()).await.unwrap();
        let appended = fill(&p, 0, 100, 10, |_| false).await;
        assert_eq!(p.segment_count(), 1, "everything in the active segment");
        p.roll_if_idle();
        glommio::timer::sleep(std::time::Duration::from_millis(20)).await;
        assert_eq!(p.segment_count(), 1, "not rolled before segment.ms");
        assert!(clean(&p, &SETTINGS).is_none(), "the active segment is never cleaned");
        c.segment_ms = 1;
        p.set_config(c);
        glommio::timer::sleep(std::time::Duration::from_millis(5)).await;
        p.roll_if_idle();
        let mut waited = 0;
        while p.segment_count() == 1 && waited < 100 {
            glommio::timer::sleep(std::time::Duration::from_millis(10)).await;
            waited += 1;
        }
        assert_eq!(p.segment_count(), 2, "rolled with no append");
        assert_eq!(clean(&p, &SETTINGS).map(Result::unwrap), Some(true), "the rolled segment is cleaned");
        let got = records(&p);
        assert_eq!(got.len(), 10, "each key's latest record: {got:?}");
        check_compacted(&p, &got, &appended, false);
        // The next append goes to the new segment at the next offset.
        let more = fill(&p, 100, 1, 10, |_| false).await;
        assert_eq!(more[0].0, 100);
        // A log that is not compacted is left as it is.
        let dir2 = tempfile::tempdir().unwrap();
        let mut d = cfg(FlushPolicy::Os, 1 << 20);
        d.segment_ms = 1;
        let q = Partition::open("d", 0, dir2.path().join("d-0"), d, Probe::detached()).await.unwrap();
        fill(&q, 0, 5, 5, |_| false).await;
        // (Appends more than 1 ms apart roll on their own; only the idle roll is in question.)
        let segments = q.segment_count();
        glommio::timer::sleep(std::time::Duration::from_millis(5)).await;
        q.roll_if_idle();
        glommio::timer::sleep(std::time::Duration::from_millis(30)).await;
        assert_eq!(q.segment_count(), segments);
    });
}

#[test]
fn max_compaction_lag_makes_a_log_due_by_its_oldest_dirty_batch() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    run(async move {
        let mut c = compacted(2048);
        c.min_cleanable_dirty_ratio = 1.5; // never due by its dirty share alone
        c.max_compaction_lag_ms = 3_600_000;
        let p = Partition::open("t", 0, path.clone(), c, Probe::detached()).await.unwrap();
        // The first batch 10 minutes old, the rest new: the first dirty segment's newest
        // record is new, its first batch is not, and Kafka goes by the first batch.
        let old = batch::build_keyed(crate::sys::unix_now_ms() - 600_000, &[(Some(b"key-000"), Some(b"old"))]);
        p.append(&Bytes::from(old)).unwrap().await.unwrap().unwrap();
        let mut appended = vec![(0, b"key-000".to_vec(), Some(b"old".to_vec()))];
        appended.extend(fill(&p, 1, 200, 20, |_| false).await);
        assert!(p.segment_count() > 3);
        assert!(clean(&p, &SETTINGS).is_none(), "10 minutes is within a max.compaction.lag.ms of an hour");
        c.max_compaction_lag_ms = 60_000;
        p.set_config(c);
        assert_eq!(clean(&p, &SETTINGS).map(Result::unwrap), Some(true), "overdue by its oldest dirty batch");
        check_compacted(&p, &records(&p), &appended, false);
        // New records only: dirty again, but none of them is a minute old.
        appended.extend(fill(&p, 201, 200, 20, |_| false).await);
        assert!(clean(&p, &SETTINGS).is_none(), "recent dirty records are not overdue");
    });
}

/// A fetch landing on a batch the cleaner emptied is served from the next batch holding
/// records (kafkajs does not step over an answer made only of emptied batches), and a read
/// from the log start still gets every record the cleaning left.
#[test]
fn a_fetch_landing_on_emptied_batches_is_served_from_the_next_batch_with_records() {
    let dir = tempfile::tempdir().unwrap();
    run(async move {
        let p = Partition::open("t", 0, dir.path().join("t-0"), compacted(4096), Probe::detached()).await.unwrap();
        let appended = fill(&p, 0, 400, 4, |_| false).await;
        // Cleaned as a replicated log is: every batch stays, emptied when its record goes.
        let (_, due) = p.cleaning_due(crate::sys::unix_now_ms(), &SETTINGS);
        let mut job = due.expect("due").job;
        job.keep_batches_from = Some(0);
        let cleaned = cleaner::pass::run(&job).unwrap();
        assert!(p.swap_cleaned(&job, &cleaned).unwrap());
        let headers: Vec<_> = p.st.borrow().segments.iter().flat_map(headers_of).collect();
        assert_eq!(headers.len(), 400, "every batch stays");
        let emptied: Vec<i64> = headers.iter().filter(|h| h.record_count == 0).map(|h| h.base_offset).collect();
        assert!(emptied.len() > 300, "{} emptied", emptied.len());
        for &o in &emptied {
            let r = p.read(o, 1 << 20, true).unwrap();
            let region = r.records.expect("records follow");
            let mut h = [0u8; batch::HEADER_LEN];
            std::os::unix::fs::FileExt::read_exact_at(&*region.file, &mut h, region.pos).unwrap();
            let first = batch::read_header(&h).unwrap();
            assert!(first.record_count > 0 && first.base_offset > o, "a fetch at {o} starts at {first:?}");
            assert_eq!(r.first_batch_len, first.size as u32);
        }
        check_compacted(&p, &records(&p), &appended, false);

        // A run longer than one fetch's budget: each fetch at the same offset goes on from
        // where the one before got to, until it reaches the batch with records.
        let st = p.st.borrow();
        let landed = st.segments[0].find(0).unwrap().unwrap();
        assert_eq!(landed.1.record_count, 0);
        let budget = 3 * batch::HEADER_LEN as u64;
        let mut fetches = 0;
        let found = loop {
            fetches += 1;
            assert!(fetches < 1_000, "no progress");
            if let Some((_, _, h)) =
                reader::past_emptied(&p.emptied_scans, &st.segments, landed.0, &landed.1, budget).unwrap()
            {
                break h;
            }
        };
        assert!(found.record_count > 0 && found.base_offset > 300, "{found:?} after {fetches} fetches");
        assert!(fetches > 50, "three headers a fetch: {fetches} fetches");
        assert!(p.emptied_scans.borrow().is_empty(), "a finished scan is forgotten");
    });
}

/// While a cleaning's segments go in place off the shard's thread (`begin_swap` ..
/// `finish_swap`), the log holds the segments it replaces: retention and DeleteRecords
/// delete none of them, and a close waits; the swap's end deletes what DeleteRecords moved
/// the log start past.
#[test]
fn a_swap_under_way_holds_the_segments_it_replaces() {
    let dir = tempfile::tempdir().unwrap();
    run(async move {
        let mut c = compacted(2048);
        c.delete = true;
        c.retention_bytes = 1; // every segment but the active one is past retention
        let p = Partition::open("t", 0, dir.path().join("t-0"), c, Probe::detached()).await.unwrap();
        fill(&p, 0, 300, 20, |_| false).await;
        let now = crate::sys::unix_now_ms();
        let job = p.cleaning_due(now, &SETTINGS).1.expect("due").job;
        let cleaned = cleaner::pass::run(&job).unwrap();
        assert!(p.begin_swap(&cleaned));
        assert!(!p.begin_swap(&cleaned), "one swap at a time");
        let segments = p.segment_count();
        assert_eq!(p.apply_retention(now), 0, "retention waits for the swap");
        assert_eq!(p.delete_records(-1).unwrap(), 300, "to the high watermark");
        assert_eq!(p.segment_count(), segments, "DeleteRecords deletes no segment during the swap");
        let closed = Rc::new(std::cell::Cell::new(false));
        let closing = {
            let (p, closed) = (p.clone(), closed.clone());
            glommio::spawn_local(async move {
                p.close().await.unwrap();
                closed.set(true);
            })
        };
        glommio::timer::sleep(std::time::Duration::from_millis(20)).await;
        assert!(!closed.get(), "a close waits for the swap");
        let committed = Partition::commit_cleaned(p.dir(), &cleaned, job.index_interval);
        p.finish_swap(&job, &cleaned, committed).unwrap();
        assert_eq!(p.segment_count(), 1, "the swap's end deleted every segment below the start");
        closing.await;
        assert!(closed.get());
    });
}
