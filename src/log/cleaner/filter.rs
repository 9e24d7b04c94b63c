//! What the cleaner keeps of one batch (Kafka's rules, `LogCleaner.shouldRetainRecord`):
//!
//! - a record whose key has a later record in the map is dropped (superseded);
//! - a record without a key is dropped (a compacted topic refuses them at produce; these
//!   came before the topic was compacted), counted apart;
//! - a tombstone (null value) is kept until its batch's delete horizon has passed: the first
//!   cleaning that keeps it stamps `now + delete.retention.ms` into the batch (KIP-534), a
//!   later one past that time drops it, so consumers have that long to see the deletion. Only
//!   a tombstone the key map covers (below `map_end`) is stamped or dropped: past where the
//!   map ended, an older value of its key may stay (the map never saw the key), and dropping
//!   the tombstone would bring that value back;
//! - a batch whose records all go is dropped, unless it is its producer's last batch: that
//!   one stays, empty, so the producer's sequence state survives a restart; in a replicated
//!   log every batch from the raft log's start on stays, empty if need be, because each is
//!   a raft entry: raft numbers entries one after another and may send any of them to a
//!   replica that lacks it (below the raft log's start a replica that lacks them gets them
//!   in a snapshot, so they go as in a standalone log);
//! - control batches stay as they are.
//!
//! A batch that keeps every record and needs no horizon is copied byte for byte; any other
//! keeps its header (base offset, last offset delta, producer, epoch, sequence, maximum
//! timestamp) and gets its remaining records, in its own codec.

use super::keymap::KeyMap;
use crate::protocol::batch::{self, BatchError, BatchHeader};
use crate::protocol::compression;

/// The facts a cleaning decides by.
pub struct Rules<'a> {
    pub map: &'a KeyMap,
    pub now_ms: i64,
    pub delete_retention_ms: i64,
    /// Base offsets of the batches to keep even when empty: each producer's last one.
    pub keep: &'a std::collections::HashSet<i64>,
    /// Batches wholly below the log start go whatever they hold (are emptied, when every
    /// batch stays).
    pub log_start: i64,
    /// Keep every batch from this offset on, emptied rather than dropped (a replicated
    /// log's raft entries: from the raft log's start).
    pub keep_batches_from: Option<i64>,
    /// The most a batch's records may decompress to.
    pub decompress_limit: usize,
    /// Where the key map ends: records from here on are in no map, so none of them supersedes
    /// anything, and their tombstones stay as they are.
    pub map_end: i64,
}

/// What became of one batch.
#[derive(Debug, PartialEq, Eq)]
pub enum Kept {
    /// Every record stays and nothing changes: the original bytes.
    Whole,
    /// A new batch with the records that stay.
    Rewritten(Vec<u8>),
    Dropped,
}

/// What a cleaning dropped, for its log line and metrics.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub records_kept: u64,
    pub superseded: u64,
    pub tombstones_removed: u64,
    pub keyless: u64,
}

/// Decides about `raw`, one whole checked batch with header `h`.
pub fn filter(raw: &[u8], h: &BatchHeader, rules: &Rules, counts: &mut Counts) -> Result<Kept, BatchError> {
    if h.is_control() {
        return Ok(Kept::Whole);
    }
    let every = rules.keep_batches_from.is_some_and(|from| h.base_offset >= from);
    let emptied = || match every || rules.keep.contains(&h.base_offset) {
        true => batch::rebuild(raw, &[], 0, compression::NONE, None).map(Kept::Rewritten),
        false => Ok(Kept::Dropped),
    };
    if h.last_offset() < rules.log_start {
        return match every {
            true => emptied(),
            false => Ok(Kept::Dropped),
        };
    }
    let records = batch::record_bytes(raw, rules.decompress_limit)?;
    let horizon_passed = h.delete_horizon().is_some_and(|t| rules.now_ms >= t);
    let mut kept = Vec::new();
    let (mut all, mut tombstones) = (true, false);
    let spans: Vec<batch::RecordSpan> = batch::record_spans(&records, h.base_timestamp).collect();
    if spans.len() != h.record_count.max(0) as usize {
        let reason = format!("{} records where the header says {}", spans.len(), h.record_count);
        let codec = compression::name(h.codec());
        return Err(BatchError::Records(compression::CodecError::Corrupt { codec, reason }));
    }
    if spans.is_empty() {
        // Emptied by an earlier cleaning: it stays as it is while a rule above keeps it.
        return Ok(match every || rules.keep.contains(&h.base_offset) {
            true => Kept::Whole,
            false => Kept::Dropped,
        });
    }
    for s in &spans {
        let offset = h.base_offset + s.record.offset_delta as i64;
        let keep = match s.record.key {
            None => {
                counts.keyless += 1;
                false
            }
            Some(key) if rules.map.get(key).is_some_and(|latest| latest > offset) => {
                counts.superseded += 1;
                false
            }
            Some(_) if s.record.value.is_none() && horizon_passed && offset < rules.map_end => {
                counts.tombstones_removed += 1;
                false
            }
            Some(_) => {
                tombstones |= s.record.value.is_none() && offset < rules.map_end;
                true
            }
        };
        if keep {
            counts.records_kept += 1;
            kept.push(s);
        }
        all &= keep;
    }
    let stamp = tombstones && h.delete_horizon().is_none();
    if all && !stamp {
        return Ok(Kept::Whole);
    }
    if kept.is_empty() {
        return emptied();
    }
    let horizon = match stamp {
        true => Some(rules.now_ms.saturating_add(rules.delete_retention_ms)),
        false => h.delete_horizon(),
    };
    let mut body = Vec::with_capacity(kept.iter().map(|s| s.bytes.len()).sum());
    for s in &kept {
        match horizon {
            // Timestamps are encoded against the base timestamp, which now holds the horizon.
            Some(t) if t != h.base_timestamp => batch::reencode_record(&mut body, s, t),
            _ => body.extend_from_slice(s.bytes),
        }
    }
    batch::rebuild(raw, &body, kept.len() as i32, h.codec(), horizon).map(Kept::Rewritten)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;
    use crate::protocol::batch::KeyValue;

    fn keyed(base_offset: i64, ts: i64, kvs: &[KeyValue]) -> Vec<u8> {
        let timed: Vec<(i64, KeyValue)> = kvs.iter().enumerate().map(|(i, kv)| (ts + i as i64, *kv)).collect();
        let mut b = batch::build_timed(&timed);
        batch::patch(&mut b, base_offset, 0);
        b
    }

    /// (offset, timestamp, key, value) of a record.
    type Read = (i64, i64, Option<Vec<u8>>, Option<Vec<u8>>);

    /// Each record of a batch.
    fn read(b: &[u8]) -> Vec<Read> {
        let h = batch::check_batch(b).unwrap();
        let recs = batch::record_bytes(b, 1 << 20).unwrap();
        batch::parse_records(&recs, h.base_timestamp)
            .map(|r| {
                (
                    h.base_offset + r.offset_delta as i64,
                    r.timestamp,
                    r.key.map(<[u8]>::to_vec),
                    r.value.map(<[u8]>::to_vec),
                )
            })
            .collect()
    }

    fn run(b: &[u8], map: &KeyMap, now: i64, keep: &HashSet<i64>) -> (Kept, Counts) {
        run_with(b, map, now, keep, (0, None))
    }

    /// With the log start and the offset from which every batch stays.
    fn run_with(
        b: &[u8],
        map: &KeyMap,
        now: i64,
        keep: &HashSet<i64>,
        (log_start, every): (i64, Option<i64>),
    ) -> (Kept, Counts) {
        let rules = Rules {
            map,
            now_ms: now,
            delete_retention_ms: 1000,
            keep,
            log_start,
            keep_batches_from: every,
            decompress_limit: 1 << 20,
            map_end: i64::MAX,
        };
        let mut counts = Counts::default();
        let h = batch::check_batch(b).unwrap();
        (filter(b, &h, &rules, &mut counts).unwrap(), counts)
    }

    #[test]
    fn superseded_and_keyless_records_go_and_the_rest_keep_their_offsets_and_timestamps() {
        let b = keyed(
            100,
            5_000,
            &[(Some(b"a"), Some(b"1")), (Some(b"b"), Some(b"2")), (None, Some(b"x")), (Some(b"c"), Some(b"3"))],
        );
        let mut map = KeyMap::new(10);
        map.put(b"a", 200);
        map.put(b"c", 103);
        let (kept, counts) = run(&b, &map, 9_000, &HashSet::new());
        let Kept::Rewritten(nb) = kept else { panic!("rewritten: {kept:?}") };
        let h = batch::check_batch(&nb).unwrap();
        assert_eq!((h.base_offset, h.last_offset_delta, h.record_count), (100, 3, 2), "the offset range stays");
        assert_eq!(
            read(&nb),
            vec![
                (101, 5_001, Some(b"b".to_vec()), Some(b"2".to_vec())),
                (103, 5_003, Some(b"c".to_vec()), Some(b"3".to_vec()))
            ]
        );
        assert_eq!(counts, Counts { records_kept: 2, superseded: 1, tombstones_removed: 0, keyless: 1 });
        // Nothing to drop: the batch stays byte for byte.
        let mut none = KeyMap::new(10);
        none.put(b"a", 100);
        let whole = keyed(100, 5_000, &[(Some(b"a"), Some(b"1"))]);
        assert_eq!(run(&whole, &none, 9_000, &HashSet::new()).0, Kept::Whole);
    }

    #[test]
    fn a_tombstone_gets_a_horizon_then_goes_once_it_has_passed() {
        let b = keyed(10, 5_000, &[(Some(b"gone"), None), (Some(b"k"), Some(b"v"))]);
        let map = KeyMap::new(10);
        let (kept, _) = run(&b, &map, 9_000, &HashSet::new());
        let Kept::Rewritten(stamped) = kept else { panic!("stamped: {kept:?}") };
        let h = batch::check_batch(&stamped).unwrap();
        assert_eq!(h.delete_horizon(), Some(10_000), "now + delete.retention.ms");
        assert_eq!(read(&stamped), read(&b), "timestamps re-encoded against the horizon read the same");
        // Before the horizon: kept as is; after: the tombstone goes, the live record stays.
        assert_eq!(run(&stamped, &map, 9_999, &HashSet::new()).0, Kept::Whole);
        let (kept, counts) = run(&stamped, &map, 10_000, &HashSet::new());
        let Kept::Rewritten(after) = kept else { panic!("rewritten: {kept:?}") };
        assert_eq!(read(&after), vec![(11, 5_001, Some(b"k".to_vec()), Some(b"v".to_vec()))]);
        assert_eq!(counts.tombstones_removed, 1);
    }

    #[test]
    fn a_tombstone_past_where_the_key_map_ended_is_neither_stamped_nor_dropped() {
        // The map ended at 11: the tombstone at 10 is covered, the one at 12 is not (an older
        // value of `late` may sit between 11 and 12, and it stays).
        let b = keyed(10, 5_000, &[(Some(b"gone"), None), (Some(b"k"), Some(b"v")), (Some(b"late"), None)]);
        let map = KeyMap::new(10);
        let keep = HashSet::new();
        let rules = |now_ms, map_end| Rules {
            map: &map,
            now_ms,
            delete_retention_ms: 1000,
            keep: &keep,
            log_start: 0,
            keep_batches_from: None,
            decompress_limit: 1 << 20,
            map_end,
        };
        let filtered = |b: &[u8], r: &Rules| {
            let h = batch::check_batch(b).unwrap();
            filter(b, &h, r, &mut Counts::default()).unwrap()
        };
        // With only tombstones past the map's end, nothing is stamped.
        let past = keyed(10, 5_000, &[(Some(b"late"), None)]);
        assert_eq!(filtered(&past, &rules(9_000, 10)), Kept::Whole);
        let Kept::Rewritten(stamped) = filtered(&b, &rules(9_000, 11)) else { panic!("stamped") };
        assert_eq!(batch::check_batch(&stamped).unwrap().delete_horizon(), Some(10_000));
        // Past the horizon, a later cleaning whose map also ended at 11 drops only the
        // tombstone it covers.
        let Kept::Rewritten(after) = filtered(&stamped, &rules(10_000, 11)) else { panic!("rewritten") };
        let keys: Vec<Option<Vec<u8>>> = read(&after).into_iter().map(|r| r.2).collect();
        assert_eq!(keys, vec![Some(b"k".to_vec()), Some(b"late".to_vec())]);
        // One whose map covered the whole batch drops both.
        let Kept::Rewritten(all) = filtered(&stamped, &rules(10_000, 13)) else { panic!("rewritten") };
        assert_eq!(read(&all).len(), 1);
    }

    #[test]
    fn in_a_replicated_log_every_batch_stays_with_its_offsets_and_leader_epoch() {
        let mut b = keyed(50, 1, &[(Some(b"a"), Some(b"1")), (Some(b"a"), Some(b"2"))]);
        batch::patch(&mut b, 50, 9);
        let mut map = KeyMap::new(10);
        map.put(b"a", 90);
        for log_start in [0, 60] {
            let (kept, _) = run_with(&b, &map, 2, &HashSet::new(), (log_start, Some(50)));
            let Kept::Rewritten(empty) = kept else { panic!("kept empty: {kept:?}") };
            let h = batch::check_batch(&empty).unwrap();
            assert_eq!((h.base_offset, h.last_offset(), h.record_count), (50, 51, 0), "below the start {log_start}");
            assert_eq!(&empty[12..16], &9i32.to_be_bytes(), "the leader epoch: the raft term of the entry");
        }
        assert_eq!(run_with(&b, &map, 2, &HashSet::new(), (60, None)).0, Kept::Dropped);
        // Below the raft log's start a replicated log drops it as a standalone one does.
        assert_eq!(run_with(&b, &map, 2, &HashSet::new(), (0, Some(52))).0, Kept::Dropped);
        // Emptied by an earlier cleaning: kept as it is from the raft log's start (or as a
        // producer's last batch), dropped once the raft log starts past it.
        let Kept::Rewritten(empty) = run_with(&b, &map, 2, &HashSet::new(), (0, Some(50))).0 else { panic!() };
        assert_eq!(run_with(&empty, &map, 2, &HashSet::new(), (0, Some(50))).0, Kept::Whole);
        assert_eq!(run_with(&empty, &map, 2, &HashSet::from([50]), (0, None)).0, Kept::Whole);
        assert_eq!(run_with(&empty, &map, 2, &HashSet::new(), (0, Some(52))).0, Kept::Dropped);
    }

    #[test]
    fn a_producers_last_batch_stays_empty_and_others_go() {
        let mut b = keyed(50, 1, &[(Some(b"a"), Some(b"1")), (Some(b"a"), Some(b"2"))]);
        batch::set_producer(&mut b, 7, 0, 40);
        let mut map = KeyMap::new(10);
        map.put(b"a", 90);
        assert_eq!(run(&b, &map, 2, &HashSet::new()).0, Kept::Dropped);
        let (kept, _) = run(&b, &map, 2, &HashSet::from([50]));
        let Kept::Rewritten(empty) = kept else { panic!("kept empty: {kept:?}") };
        let h = batch::check_batch(&empty).unwrap();
        assert_eq!((h.base_offset, h.last_offset(), h.record_count), (50, 51, 0));
        assert_eq!((h.producer_id, h.producer_epoch, h.base_sequence), (7, 0, 40));
        assert!(read(&empty).is_empty());
    }

    #[test]
    fn a_compressed_batch_is_rewritten_in_its_codec() {
        let plain = keyed(0, 1, &[(Some(b"a"), Some(b"old")), (Some(b"b"), Some(b"live"))]);
        let gz = batch::recompress(&plain, 1, 1 << 20).unwrap();
        let mut map = KeyMap::new(10);
        map.put(b"a", 5);
        let (kept, _) = run(&gz, &map, 2, &HashSet::new());
        let Kept::Rewritten(nb) = kept else { panic!("rewritten: {kept:?}") };
        assert_eq!(batch::check_batch(&nb).unwrap().codec(), 1);
        assert_eq!(read(&nb), vec![(1, 2, Some(b"b".to_vec()), Some(b"live".to_vec()))]);
    }
}
