//! The partition log's tests: appends, reads, recovery after clean and unclean stops, torn
//! tails, retention, idempotence across crashes, the topic configs that rewrite batches, and
//! storage faults injected through `storage::faults`.

use std::path::Path;
use std::time::Duration;

use bytes::Bytes;

use super::*;
use crate::config::FlushPolicy;
use crate::log::config::{TimestampType, TopicCompression};
use crate::protocol::batch;
use crate::sys::unix_now_ms;

pub(super) fn cfg(flush: FlushPolicy, segment_bytes: u64) -> LogConfig {
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

pub(super) fn idem(i: usize, pid: i64, epoch: i16, seq: i32) -> Bytes {
    let mut b = batch(i).to_vec();
    batch::set_producer(&mut b, pid, epoch, seq);
    Bytes::from(b)
}

async fn send(p: &Partition, b: &Bytes) -> Result<i64, ErrorCode> {
    let rx = p.append(b).map_err(|r| r.code)?;
    rx.await.unwrap().map(|a| a.base_offset)
}

pub(super) fn run<F: std::future::Future<Output = ()> + 'static>(f: F) {
    glommio::LocalExecutorBuilder::default().io_memory(512 * 1024).make().unwrap().run(f);
}

pub(super) fn batch(i: usize) -> Bytes {
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
pub(super) fn read_all(p: &Partition) -> Vec<BatchHeader> {
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
        let p = Partition::open("t", 0, path.clone(), cfg(FlushPolicy::Always, 2048), Probe::detached()).await.unwrap();
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
fn a_full_index_rolls_the_segment_as_segment_index_bytes_asks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    run(async move {
        // Room for four time-index entries, one per batch (each batch passes the interval).
        let c = LogConfig { index_max_bytes: 48, index_interval_bytes: 1, ..cfg(FlushPolicy::Always, 1 << 30) };
        assert_eq!(c.index_capacity(), 4);
        let p = Partition::open("t", 0, path.clone(), c, Probe::detached()).await.unwrap();
        append_n(&p, 0, 20).await;
        assert_eq!(p.segment_count(), 5, "a segment of four batches each");
        assert_eq!(read_all(&p).len(), 20);
        assert_eq!(p.offset_for_time(1_013).unwrap(), Some((26, 1_013)), "every index answers");
        p.close().await.unwrap();
        // The default holds far more than a segment's worth at the default interval.
        let default = cfg(FlushPolicy::Always, 1 << 30);
        assert_eq!(
            default.index_capacity(),
            crate::log::segment::Segment::index_capacity(1 << 30, 256).min((10 << 20) / 12)
        );
    });
}

#[test]
fn segment_jitter_ms_brings_a_segments_time_roll_forward() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    run(async move {
        let c = LogConfig { segment_ms: 60_000, segment_jitter_ms: 60_000, ..cfg(FlushPolicy::Always, 1 << 30) };
        let p = Partition::open("t", 0, path.clone(), c, Probe::detached()).await.unwrap();
        let draw = |p: &Partition, seed: u64| p.st.borrow().segments.last().unwrap().roll_seed.set(seed);
        append_n(&p, 0, 1).await;
        draw(&p, 0); // this segment's jitter takes nothing off segment.ms
        glommio::timer::sleep(Duration::from_millis(20)).await;
        append_n(&p, 1, 1).await;
        assert_eq!(p.segment_count(), 1, "a minute has not passed");
        draw(&p, 59_995); // due 5 ms after its first append
        glommio::timer::sleep(Duration::from_millis(20)).await;
        append_n(&p, 2, 1).await;
        assert_eq!(p.segment_count(), 2, "rolled at segment.ms less its jitter");
        assert_eq!(read_all(&p).len(), 3);
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
fn a_stale_clean_marker_does_not_make_zeros_or_a_torn_batch_data() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    run(async move {
        let c = cfg(FlushPolicy::Always, 1 << 20);
        for tail in ["zeros", "torn"] {
            let p = Partition::open("t", 0, path.clone(), c, Probe::detached()).await.unwrap();
            let first = p.offsets().log_end;
            append_n(&p, 0, 10).await;
            p.close().await.unwrap();
            let good_len = p.offsets().size;
            drop(p);
            // The marker stays, yet the log was written after it (its removal lost in a crash):
            // zeros ahead of the data, and half a batch over them.
            let log = path.join(segment::file_name(0, "log"));
            let f = std::fs::OpenOptions::new().write(true).open(&log).unwrap();
            std::os::unix::fs::FileExt::write_all_at(&f, &vec![0u8; 64 << 10], good_len).unwrap();
            if tail == "torn" {
                let torn = batch(99);
                std::os::unix::fs::FileExt::write_all_at(&f, &torn[..torn.len() / 2], good_len).unwrap();
            }
            drop(f);
            assert!(path.join(CLEAN_MARKER).exists());
            let p = Partition::open("t", 0, path.clone(), c, Probe::detached()).await.unwrap();
            assert_eq!(p.offsets().size, good_len, "{tail}: only whole batches are data");
            assert_eq!(p.offsets().log_end, first + 20);
            assert_eq!(append_n(&p, 10, 1).await, vec![first + 20], "{tail}: appends follow the last batch");
            assert_eq!(read_all(&p).len() as i64, (first + 22) / 2, "{tail}: every batch reads back");
            p.close().await.unwrap();
        }
    });
}

#[test]
fn a_clean_start_whose_last_indexed_batch_is_corrupt_cuts_there_and_reuses_no_offset() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    run(async move {
        let mut c = cfg(FlushPolicy::Always, 1 << 20);
        c.index_interval_bytes = 512;
        let p = Partition::open("t", 0, path.clone(), c, Probe::detached()).await.unwrap();
        append_n(&p, 0, 40).await;
        p.close().await.unwrap();
        drop(p);
        // Bit rot in a record of the batch the last index entry points at: the one a clean
        // start checks. (A closed index file holds its entries only.)
        let index = std::fs::read(path.join(segment::file_name(0, "index"))).unwrap();
        let entry = &index[index.len() - 8..];
        let bad = i64::from(u32::from_be_bytes(entry[..4].try_into().unwrap()));
        let pos = u64::from(u32::from_be_bytes(entry[4..].try_into().unwrap()));
        assert!(bad > 0, "batches before the last index entry");
        let f =
            std::fs::OpenOptions::new().read(true).write(true).open(path.join(segment::file_name(0, "log"))).unwrap();
        let mut header = [0u8; batch::HEADER_LEN];
        f.read_exact_at(&mut header, pos).unwrap();
        let h = batch::read_header(&header).unwrap();
        assert_eq!(h.base_offset, bad);
        let mut byte = [0u8];
        let at = pos + h.size as u64 - 1;
        f.read_exact_at(&mut byte, at).unwrap();
        f.write_all_at(&[byte[0] ^ 1], at).unwrap();
        drop(f);

        assert!(path.join(CLEAN_MARKER).exists());
        let p = Partition::open("t", 0, path.clone(), c, Probe::detached()).await.unwrap();
        assert_eq!(p.offsets().log_end, bad, "the log ends where the corrupt batch began");
        assert_eq!(read_all(&p).len() as i64, bad / 2, "every batch before it reads back");
        assert_eq!(append_n(&p, 40, 1).await, vec![bad], "offsets go on from there, none handed out twice");
    });
}

#[test]
fn a_clean_start_without_a_usable_index_keeps_only_whole_batches() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    run(async move {
        let c = cfg(FlushPolicy::Always, 1 << 20);
        for (i, damage) in ["index lost", "index past the end"].into_iter().enumerate() {
            let path = dir.path().join(format!("t-{i}"));
            let p = Partition::open("t", i as i32, path.clone(), c, Probe::detached()).await.unwrap();
            let mut ends = Vec::new();
            for b in 0..20 {
                append_n(&p, b, 1).await;
                ends.push(p.offsets().size);
            }
            p.close().await.unwrap();
            drop(p);
            // Either way the log ends in part of a batch, and the clean start's shortcut (its
            // last index entry) is missing or lies past the log's end.
            let (log, index) = (path.join(segment::file_name(0, "log")), path.join(segment::file_name(0, "index")));
            let f = std::fs::OpenOptions::new().write(true).open(&log).unwrap();
            let len = if damage == "index lost" {
                std::fs::OpenOptions::new().write(true).open(&index).unwrap().set_len(0).unwrap();
                let torn = batch(99);
                f.write_all_at(&torn[..torn.len() / 2], ends[19]).unwrap();
                ends[19] + (torn.len() / 2) as u64
            } else {
                let entries = std::fs::read(&index).unwrap();
                let last = u64::from(u32::from_be_bytes(entries[entries.len() - 4..].try_into().unwrap()));
                f.set_len(last - 10).unwrap();
                last - 10
            };
            drop(f);
            let whole = ends.iter().filter(|&&end| end <= len).count();

            let p = Partition::open("t", i as i32, path.clone(), c, Probe::detached()).await.unwrap();
            assert_eq!(p.offsets().size, ends[whole - 1], "{damage}: only whole batches are data");
            assert_eq!(p.offsets().log_end, 2 * whole as i64, "{damage}");
            assert_eq!(append_n(&p, 20, 1).await, vec![2 * whole as i64], "{damage}: appends follow the last batch");
            assert_eq!(read_all(&p).len(), whole + 1, "{damage}: every batch reads back");
        }
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
        let good_len = p.offsets().size;
        drop(p);
        // Half a batch where the next would go, over the zeros preallocated there.
        let log = path.join(segment::file_name(0, "log"));
        assert!(std::fs::metadata(&log).unwrap().len() > good_len, "flush = always preallocates");
        let torn = batch(99);
        let f = std::fs::OpenOptions::new().write(true).open(&log).unwrap();
        std::os::unix::fs::FileExt::write_all_at(&f, &torn[..torn.len() / 2], good_len).unwrap();
        drop(f);

        let p = Partition::open("t", 0, path.clone(), c, Probe::detached()).await.unwrap();
        assert_eq!(std::fs::metadata(&log).unwrap().len(), good_len, "torn bytes removed");
        assert_eq!(p.offsets().log_end, 20);
        assert_eq!(read_all(&p).len(), 10);
        assert_eq!(append_n(&p, 10, 1).await, vec![20]);
    });
}

#[test]
fn a_syncing_log_writes_zeros_ahead_and_its_files_end_with_their_data_once_sealed() {
    let dir = tempfile::tempdir().unwrap();
    let len = |p: &Path| std::fs::metadata(p).unwrap().len();
    run(async move {
        // flush = always: the active segment's file runs ahead of its data, in zeros.
        let path = dir.path().join("t-0");
        let c = cfg(FlushPolicy::Always, 16 << 10);
        let p = Partition::open("t", 0, path.clone(), c, Probe::detached()).await.unwrap();
        append_n(&p, 0, 10).await;
        let active = |p: &Partition| {
            let st = p.st.borrow();
            let seg = st.segments.last().unwrap();
            (seg.path.clone(), seg.size.get())
        };
        let (log, size) = active(&p);
        assert!(len(&log) > size, "zeros ahead of {size} bytes");
        let seg = p.st.borrow().segments.last().unwrap().base_offset;
        assert!(p.st.borrow().segments.last().unwrap().zeros_from(size).unwrap());
        // A roll seals the old segment at its data's end.
        append_n(&p, 10, 200).await;
        let sealed = path.join(segment::file_name(seg, "log"));
        assert!(p.segment_count() > 1);
        let sealed_size = p.st.borrow().segments[0].size.get();
        assert_eq!(len(&sealed), sealed_size, "a sealed segment has no zeros");
        // As after kill -9: recovery cuts the zeros and keeps every batch.
        let (log, size) = active(&p);
        assert!(len(&log) > size);
        drop(p);
        let p = Partition::open("t", 0, path.clone(), c, Probe::detached()).await.unwrap();
        assert_eq!(len(&log), size, "recovery cut the zeros");
        assert_eq!(read_all(&p).len(), 210);
        append_n(&p, 210, 3).await;
        let (log, size) = active(&p);
        p.close().await.unwrap();
        assert_eq!(len(&log), size, "a closed log has no zeros");
        let p = Partition::open("t", 0, path.clone(), c, Probe::detached()).await.unwrap();
        assert_eq!(read_all(&p).len(), 213);

        // flush = os never syncs, and writes nothing ahead.
        let path = dir.path().join("u-0");
        let p = Partition::open("u", 0, path, cfg(FlushPolicy::Os, 16 << 10), Probe::detached()).await.unwrap();
        append_n(&p, 0, 10).await;
        let (log, size) = active(&p);
        assert_eq!(len(&log), size);
    });
}

/// Whether the page cache holds all of the file at `path` (`cachestat`, Linux 6.5+).
fn cached(path: &Path) -> bool {
    let file = std::fs::File::open(path).unwrap();
    let len = file.metadata().unwrap().len();
    crate::sys::resident(&file, 0, len)
}

#[test]
fn dropping_the_cache_behind_a_window_keeps_the_window_cached_and_every_record() {
    let dir = tempfile::tempdir().unwrap();
    run(async move {
        let path = dir.path().join("t-0");
        let p = Partition::open("t", 0, path.clone(), cfg(FlushPolicy::Always, 512 << 10), Probe::detached())
            .await
            .unwrap();
        let value = vec![7u8; 64 << 10];
        for i in 0..64 {
            send(&p, &Bytes::from(batch::build(i, &[&value]))).await.unwrap();
        }
        let logs = || -> Vec<(std::path::PathBuf, u64)> {
            p.st.borrow().segments.iter().map(|s| (s.path.clone(), s.size.get())).collect()
        };
        let (newest, _) = logs().last().cloned().unwrap();
        assert!(cached(&newest), "written and not dropped: cached");
        p.drop_cached_behind(1 << 20);
        let segs = logs();
        let end: u64 = segs.iter().map(|s| s.1).sum();
        let mut start = 0;
        for (path, size) in &segs {
            let behind = end - (start + size);
            if behind >= 1 << 20 {
                assert!(!cached(path), "{} ends {behind} bytes behind the end", path.display());
            }
            start += size;
        }
        assert!(cached(&newest), "the window stays cached");
        assert_eq!(read_all(&p).len(), 64, "dropped from the cache, not from the log");
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

/// Waits (up to 10 s) until the log starts at `offset`: retention's roll of the active
/// segment runs on the write loop.
async fn until_start(p: &Partition, offset: i64) {
    for _ in 0..1_000 {
        if p.offsets().log_start == offset {
            return;
        }
        glommio::timer::sleep(Duration::from_millis(10)).await;
    }
    panic!("the log start stayed at {}, not {offset}", p.offsets().log_start);
}

fn log_files(path: &Path) -> Vec<std::path::PathBuf> {
    let mut logs: Vec<_> = std::fs::read_dir(path)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|f| f.extension().is_some_and(|x| x == "log"))
        .collect();
    logs.sort();
    logs
}

#[test]
fn an_idle_log_whose_records_have_all_expired_is_emptied_its_active_segment_too() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    run(async move {
        let mut c = cfg(FlushPolicy::Os, 2048);
        c.retention_ms = 3_600_000;
        let p = Partition::open("t", 0, path.clone(), c, Probe::detached()).await.unwrap();
        // The batches' timestamps are near 1970: every record is past retention.
        append_n(&p, 0, 60).await;
        let end = p.offsets().log_end;
        assert!(p.segment_count() > 2);
        p.apply_retention(unix_now_ms());
        // The old segments go at once; the active one is rolled, then goes too, as in Kafka.
        until_start(&p, end).await;
        assert_eq!(p.segment_count(), 1);
        assert_eq!(log_files(&path).len(), 1, "only the new, empty active segment is left");
        assert!(p.read(end, 1 << 20, true).unwrap().records.is_none());
        assert_eq!(p.read(end - 1, 1 << 20, true).unwrap_err(), ErrorCode::OffsetOutOfRange);
        // The log goes on at its end, and keeps what has not expired.
        let fresh = Bytes::from(batch::build(unix_now_ms(), &[b"fresh"]));
        assert_eq!(send(&p, &fresh).await, Ok(end));
        p.apply_retention(unix_now_ms());
        glommio::timer::sleep(Duration::from_millis(50)).await;
        assert_eq!(p.offsets().log_start, end);
        assert_eq!(read_all(&p).len(), 1);
        p.close().await.unwrap();
        let p = Partition::open("t", 0, path.clone(), c, Probe::detached()).await.unwrap();
        assert_eq!((p.offsets().log_start, p.offsets().log_end), (end, end + 1), "after a restart too");
    });
}

#[test]
fn records_without_timestamps_expire_by_their_files_age() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    run(async move {
        // `always` writes zeros ahead of the data, which the roll cuts: that cut must not
        // count as a write.
        let mut c = cfg(FlushPolicy::Always, 1 << 20);
        c.retention_ms = 3_600_000;
        let p = Partition::open("t", 0, path.clone(), c, Probe::detached()).await.unwrap();
        for i in 0..5 {
            let b = Bytes::from(batch::build(-1, &[format!("no time {i}").as_bytes()]));
            assert_eq!(send(&p, &b).await, Ok(i));
        }
        p.apply_retention(unix_now_ms());
        glommio::timer::sleep(Duration::from_millis(50)).await;
        assert_eq!(p.offsets().log_start, 0, "a file written just now has not expired");
        // Its file last written two hours ago: as old as Kafka counts such records.
        let two_hours_ago = std::time::SystemTime::now() - Duration::from_secs(7_200);
        let file = std::fs::File::options().write(true).open(&log_files(&path)[0]).unwrap();
        file.set_modified(two_hours_ago).unwrap();
        p.apply_retention(unix_now_ms());
        until_start(&p, 5).await;
        assert_eq!(p.segment_count(), 1);
    });
}

#[test]
fn idle_producers_are_forgotten_by_the_periodic_pass_without_a_roll() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    run(async move {
        let mut c = cfg(FlushPolicy::Os, 1 << 20);
        c.producer_id_expiration_ms = 60_000;
        let p = Partition::open("t", 0, path.clone(), c, Probe::detached()).await.unwrap();
        assert_eq!(send(&p, &idem(0, 7, 0, 0)).await, Ok(0));
        assert_eq!(send(&p, &idem(1, 8, 0, 0)).await, Ok(2));
        let now = unix_now_ms();
        assert_eq!(p.expire_producers(now), 0, "both appended just now");
        assert_eq!(p.producers().len(), 2);
        assert_eq!(p.expire_producers(now + 120_000), 2);
        assert!(p.producers().is_empty(), "no roll happened, and they are gone");
        assert_eq!(p.segment_count(), 1);
        // A producer forgotten starts again at any sequence, as Kafka lets it.
        assert_eq!(send(&p, &idem(2, 7, 0, 5)).await, Ok(4));
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
        // Log bytes are the batches' bytes: the files hold them, and the active one zeros
        // preallocated after them until it is closed.
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
        assert_eq!(m.log_bytes.get(), p.offsets().size as i64);
        assert!(p.apply_retention(unix_now_ms()) > 0);
        assert_eq!(m.log_bytes.get(), p.offsets().size as i64, "retention subtracts what it deletes");
        p.close().await.unwrap();
        let before = m.log_bytes.get();
        assert_eq!(before, on_disk(&path), "a closed log's files end with their last batch");
        // Reopening adds what is already there.
        let p = Partition::open("t", 0, path.clone(), cfg(FlushPolicy::Always, 2048), probe.clone()).await.unwrap();
        assert_eq!(m.log_bytes.get(), before * 2);
        p.close().await.unwrap();
        p.delete_files().unwrap();
        assert_eq!(m.log_bytes.get(), before);
    });
}

#[test]
fn a_batch_keeps_its_records_largest_timestamp_as_its_max_timestamp() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    run(async move {
        let p = Partition::open("t", 0, path, cfg(FlushPolicy::Os, 1 << 20), Probe::detached()).await.unwrap();
        let now = unix_now_ms();
        let kv: batch::KeyValue = (None, Some(b"v"));
        // A producer's header claiming a maxTimestamp its records do not have (CRC right).
        let mut b = batch::build_timed(&[(now - 50, kv), (now - 10, kv), (now - 30, kv)]);
        batch::set_max_timestamp(&mut b, 0);
        assert_eq!(send(&p, &Bytes::from(b)).await, Ok(0));
        let stored = read_all(&p);
        assert_eq!(stored[0].max_timestamp, now - 10, "retention and ListOffsets go by the records' own");
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
        let timed: Vec<(i64, batch::KeyValue)> = (0..10).map(|i| (1000 + 10 * i, (None, Some(&b"v"[..])))).collect();
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
fn by_time_lookups_count_only_records_from_the_log_start_on() {
    let dir = tempfile::tempdir().unwrap();
    run(async move {
        let c = cfg(FlushPolicy::Os, 1 << 20);
        let p = Partition::open("t", 0, dir.path().join("t-0"), c, Probe::detached()).await.unwrap();
        for ts in [[2000, 2000], [100, 100], [2000, 1200], [1800, 1800]] {
            let timed: Vec<(i64, batch::KeyValue)> = ts.iter().map(|&t| (t, (None, Some(&b"v"[..])))).collect();
            send(&p, &Bytes::from(batch::build_timed(&timed))).await.unwrap();
        }
        // Kafka looks only at batches ending at or after the log start.
        assert_eq!(p.delete_records(2), Ok(2));
        assert_eq!(p.offset_for_time(1500).unwrap(), Some((4, 2000)), "not the deleted batch's record");
        assert_eq!(p.max_timestamp_offset(), Some((4, 2000)));
        // In the batch the start lies in, only the records from there on.
        assert_eq!(p.delete_records(5), Ok(5));
        assert_eq!(p.offset_for_time(1500).unwrap(), Some((6, 1800)), "record 4 is deleted, 5 too old");
        assert_eq!(p.offset_for_time(1000).unwrap(), Some((5, 1200)));
        assert_eq!(p.max_timestamp_offset(), Some((6, 1800)));
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
        let old = batch::recompress(&at(&[now, now - 120_000]), crate::protocol::compression::LZ4, 1 << 20).unwrap();
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
fn a_log_start_past_the_log_end_a_crash_left_empties_the_log_to_start_there() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    run(async move {
        let c = cfg(FlushPolicy::Os, 1 << 20);
        let p = Partition::open("t", 0, path.clone(), c, Probe::detached()).await.unwrap();
        append_n(&p, 0, 5).await;
        let five = p.offsets().size;
        append_n(&p, 5, 5).await;
        assert_eq!(p.delete_records(20), Ok(20), "stored durably, unlike the batches under it");
        drop(p); // as after a power loss that takes the unsynced tail: half the batches
        std::fs::OpenOptions::new()
            .write(true)
            .open(path.join(segment::file_name(0, "log")))
            .unwrap()
            .set_len(five)
            .unwrap();

        let p = Partition::open("t", 0, path.clone(), c, Probe::detached()).await.unwrap();
        p.start_at_stored_start().await.unwrap();
        let o = p.offsets();
        assert_eq!((o.log_start, o.log_end), (20, 20), "emptied to start at the stored start");
        assert_eq!(append_n(&p, 10, 10).await[0], 20, "no offset below the start is handed out again");
        p.close().await.unwrap();

        let p = Partition::open("t", 0, path.clone(), c, Probe::detached()).await.unwrap();
        p.start_at_stored_start().await.unwrap();
        assert_eq!(p.offsets().log_start, 20, "acknowledged records stay visible after a restart");
        let read: Vec<i64> = read_all(&p).iter().map(|h| h.base_offset).collect();
        assert_eq!(read, (20..40).step_by(2).collect::<Vec<i64>>());
    });
}

#[test]
fn compacted_topics_are_trimmed_by_retention_only_with_delete() {
    let dir = tempfile::tempdir().unwrap();
    run(async move {
        let mut c = cfg(FlushPolicy::Os, 2048);
        c.retention_bytes = 1;
        c.retention_ms = 0;
        (c.compact, c.delete) = (true, false);
        let p = Partition::open("t", 0, dir.path().join("t-0"), c, Probe::detached()).await.unwrap();
        for i in 0..60 {
            let v = format!("value-{i}");
            p.append(&Bytes::from(batch::build_keyed(1_000, &[(Some(b"k"), Some(v.as_bytes()))])))
                .unwrap()
                .await
                .unwrap()
                .unwrap();
        }
        assert_eq!(p.apply_retention(unix_now_ms()), 0, "compact alone");
        c.delete = true;
        p.set_config(c);
        assert!(p.apply_retention(unix_now_ms()) > 0, "compact,delete is trimmed, as in Kafka");
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

#[test]
fn a_log_syncing_every_ack_syncs_as_it_writes_and_a_changed_policy_applies_from_the_next_write() {
    let dir = tempfile::tempdir().unwrap();
    run(async move {
        let always = cfg(FlushPolicy::Always, 1 << 20);
        let probe = Probe::detached();
        let p = Partition::open("t", 0, dir.path().join("t-0"), always, probe.clone()).await.unwrap();
        assert!(p.writes_durably(), "flush = always opens the segment for durable writes");
        append_n(&p, 0, 3).await;
        assert_eq!(p.offsets().high_watermark, 6, "each ack is durable and readable");
        assert_eq!(probe.metrics().fsync.snapshot().count(), 3, "each write is a sync");

        // Opened under an interval, then switched to always: the next write reopens the
        // segment for durable writes.
        let mut interval = cfg(FlushPolicy::Os, 1 << 20);
        interval.flush_messages = 1_000;
        interval.flush_ms = 3_600_000;
        let probe = Probe::detached();
        let q = Partition::open("t", 1, dir.path().join("t-1"), interval, probe.clone()).await.unwrap();
        assert!(!q.writes_durably());
        append_n(&q, 0, 1).await;
        assert_eq!(q.offsets().high_watermark, 0, "unsynced under the interval");
        q.set_config(always);
        append_n(&q, 1, 1).await;
        assert_eq!(q.offsets().high_watermark, 4, "synced before the ack once the policy says so");
        assert_eq!(
            probe.metrics().fsync.snapshot().count(),
            2,
            "what the interval left unsynced first (a durable write makes only itself durable), then the durable write"
        );
        assert!(q.writes_durably());
        // And back: the writer is plain again, and the interval applies.
        q.set_config(interval);
        append_n(&q, 2, 1).await;
        assert!(!q.writes_durably());
        assert_eq!(q.offsets().high_watermark, 4, "unsynced under the interval again");
    });
}

use crate::storage::faults::{self, Fault, Op};

async fn result_of(p: &Partition, b: &Bytes) -> Result<i64, ErrorCode> {
    match p.append(b) {
        Ok(rx) => rx.await.unwrap().map(|a| a.base_offset),
        Err(refusal) => Err(refusal.code),
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
            // Unless the bytes the tear left out were zeros already there (the end of the
            // batch falls in the preallocated zeros): then the batch is whole, byte for byte,
            // and recovery keeps it, as it would one written whole before a crash.
            let end = p.offsets().log_end;
            let whole = batch(5)[keep..].iter().all(|&b| b == 0);
            assert_eq!(end, if whole { 12 } else { 10 }, "torn at byte {keep} of {size}");
            assert_eq!(read_all(&p).len(), 5 + usize::from(whole));
            assert_eq!(append_n(&p, 6, 1).await, vec![end]);
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
