//! Log compaction of a replicated log. Each replica cleans its own copy, as Kafka's replicas
//! do, by the same rules as a standalone log but keeping every batch from the raft log's
//! start on (emptied if all its records go): such a batch is a raft entry, and raft numbers
//! its entries one after another, so the entries stay where they are and only their bytes
//! shrink. Replicas' bytes then differ below what is cleaned while their records, offsets and
//! terms agree; a replica that lacks an entry is sent the sender's cleaned batch, as a Kafka
//! follower fetches a cleaned one. Retention moves the raft log's start past cleaned records
//! (`Group::apply_retention`): below it emptied batches go, and a replica that lacks those
//! records is sent them in a snapshot.
//!
//! Only entries raft has applied are cleaned and, on a leader, only those every replica
//! heard from lately holds (`Replica::compaction_limit`, the bound retention has too), so
//! cleaned entries are only sent to a replica that was away or is new. The swap itself and
//! the store's move to the new files (`RaftStore::relocate`) run in one step on the shard,
//! with no raft read between; where each entry now lies the cleaning noted as it wrote it
//! (`Cleaned::entries`), so the shard reads nothing back.

use super::Group;
use crate::error::BrokerError;
use crate::log::cleaner::{Cleaned, CleanerSettings, Job};
use crate::log::partition::Due;
use crate::log::{BatchLoc, Partition};

impl Group {
    /// How dirty this replica's log is and the cleaning it is due for (see the module).
    pub fn cleaning_due(&self, now_ms: i64, settings: &CleanerSettings) -> (f64, Option<Due>) {
        if self.stopped.get() || self.failed().is_some() {
            return (0.0, None);
        }
        let peers = self.recent_peers();
        let (limit, raft_start) = {
            let r = self.replica.borrow();
            (r.store().end_offset(r.compaction_limit(&peers)), r.store().start().offset)
        };
        match limit {
            Some(limit) => self.log.replicated_cleaning_due(now_ms, settings, limit, raft_start),
            None => (0.0, None),
        }
    }

    /// Puts a cleaning's segments in place (`Partition::swap_cleaned`) and points the
    /// store's entries at them. False if the cleaning was discarded. An entry without its
    /// batch in the new files takes the replica offline.
    pub fn swap_cleaned(&self, job: &Job, cleaned: &Cleaned) -> Result<bool, BrokerError> {
        if !self.begin_swap(cleaned) {
            return Ok(false);
        }
        let committed = Partition::commit_cleaned(self.log.dir(), cleaned, job.index_interval);
        self.finish_swap(job, cleaned, committed)?;
        Ok(true)
    }

    /// `Partition::begin_swap`, for a replica that is running.
    pub fn begin_swap(&self, cleaned: &Cleaned) -> bool {
        !self.stopped.get() && self.failed().is_none() && self.log.begin_swap(cleaned)
    }

    /// `Partition::finish_swap`, then the store's entries pointed at the new segments.
    pub fn finish_swap(
        &self,
        job: &Job,
        cleaned: &Cleaned,
        committed: std::io::Result<Vec<crate::log::segment::Segment>>,
    ) -> Result<(), BrokerError> {
        self.log.finish_swap(job, cleaned, committed)?;
        let Some(from) = cleaned.segments.first().map(|s| s.base) else { return Ok(()) };
        if self.stopped.get() {
            return Ok(()); // the store is gone with the replica; the log holds the new segments
        }
        let moved: Vec<(i64, BatchLoc, u32)> = cleaned
            .entries
            .iter()
            .map(|e| (e.base_offset, BatchLoc { segment: e.segment, pos: e.pos }, e.size))
            .collect();
        // The entries of the segments the cleaning rewrote: up to the next segment's base. A
        // key map that filled up part way ends the rewrite before the last cleanable segment.
        let last = cleaned.segments.iter().flat_map(|s| s.replaces.iter().copied()).max().unwrap_or(from);
        let to = job.segments.iter().map(|s| s.base).find(|&b| b > last).unwrap_or(job.end);
        let relocated = self.replica.borrow_mut().relocate(from, to, &moved);
        if let Err(why) = relocated {
            self.fail(format!("after a cleaning: {why}"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use bytes::Bytes;

    use super::super::tests::{committed_bytes, leader, small_segments, until, with_cluster, Node, ALL};
    use super::*;
    use crate::protocol::{batch, ErrorCode};

    type Latest = BTreeMap<Vec<u8>, (i64, Vec<u8>)>;

    /// Produces records `from..to` at the leader, five to a batch, record `i` under key
    /// `k<i % 10>` with a 100-byte value; records each key's latest (offset, value). A batch
    /// refused with a retriable error (a leadership change, too few replicas in sync while
    /// one restarts) is sent again: if its first send was committed too, the resend is the
    /// later, so the latest, copy of its records.
    async fn produce_keyed(nodes: &[Node], from: usize, to: usize, latest: &mut Latest) {
        until("a leader", || leader(nodes).is_some()).await;
        let g = nodes[leader(nodes).unwrap()].group().unwrap();
        let mut waits = Vec::new();
        for first in (from..to).step_by(5) {
            let kvs: Vec<(Vec<u8>, Vec<u8>)> = (first..first + 5)
                .map(|i| (format!("k{}", i % 10).into_bytes(), format!("v{i:>99}").into_bytes()))
                .collect();
            let refs: Vec<batch::KeyValue> = kvs.iter().map(|(k, v)| (Some(&k[..]), Some(&v[..]))).collect();
            let b = Bytes::from(batch::build_keyed(1_000 + first as i64, &refs));
            waits.push((g.produce(&b, ALL), b, kvs));
        }
        for (sent, b, kvs) in waits {
            let mut answer = match sent {
                Ok(rx) => rx.await.unwrap(),
                Err(refusal) => Err(refusal.code),
            };
            let retriable =
                [ErrorCode::NotLeaderOrFollower, ErrorCode::NotEnoughReplicas, ErrorCode::NotEnoughReplicasAfterAppend];
            for _ in 0..50 {
                if !answer.as_ref().is_err_and(|e| retriable.contains(e)) {
                    break;
                }
                glommio::timer::sleep(Duration::from_millis(50)).await;
                until("a leader", || leader(nodes).is_some()).await;
                let g = nodes[leader(nodes).unwrap()].group().unwrap();
                answer = match g.produce(&b, ALL) {
                    Ok(rx) => rx.await.unwrap(),
                    Err(refusal) => Err(refusal.code),
                };
            }
            let base = answer.expect("acknowledged").base_offset;
            for (i, (key, value)) in kvs.into_iter().enumerate() {
                latest.insert(key, (base + i as i64, value));
            }
        }
    }

    /// (offset, key, value) of every data record a replica serves, from its log start.
    fn served(g: &Group) -> Vec<(i64, Vec<u8>, Vec<u8>)> {
        let bytes = committed_bytes(g, g.log().offsets().log_start);
        let mut out = Vec::new();
        let mut at = 0;
        while let Some(Ok(size)) = batch::batch_size(&bytes[at..]) {
            let h = batch::read_header(&bytes[at..]).unwrap();
            if !h.is_control() {
                for r in batch::records(&bytes[at..at + size]) {
                    let (k, v) = (r.key.unwrap().to_vec(), r.value.unwrap().to_vec());
                    out.push((h.base_offset + r.offset_delta as i64, k, v));
                }
            }
            at += size;
        }
        out
    }

    /// The latest (offset, value) of each key among `records`.
    fn latest_of(records: &[(i64, Vec<u8>, Vec<u8>)]) -> Latest {
        records.iter().map(|(o, k, v)| (k.clone(), (*o, v.clone()))).collect()
    }

    /// Runs one due cleaning on `g` to its end: the bytes it read and left, and the offset
    /// the cleaned segments end at.
    fn clean(g: &Group) -> Option<(u64, u64, i64)> {
        clean_with(g, 10_000).map(|(before, after, end, _)| (before, after, end))
    }

    /// `clean` with a key map of `map_capacity` keys; also the offset the map ended at.
    fn clean_with(g: &Group, map_capacity: usize) -> Option<(u64, u64, i64, i64)> {
        let settings = CleanerSettings { map_capacity, io_limit: None };
        let job = g.cleaning_due(crate::sys::unix_now_ms(), &settings).1?.job;
        let cleaned = crate::log::cleaner::pass::run(&job).unwrap();
        assert!(g.swap_cleaned(&job, &cleaned).unwrap(), "swapped in");
        Some((cleaned.bytes_before, cleaned.bytes_after, job.end, cleaned.map_end))
    }

    fn compacted(g: &Group) {
        small_segments(g, |c| {
            (c.compact, c.delete, c.retention_ms) = (true, false, -1);
            c.min_cleanable_dirty_ratio = 0.0;
        });
    }

    /// Compacts every node's log and produces records 0..100; returns each key's latest.
    async fn compacted_with_records(nodes: &[Node]) -> Latest {
        for n in nodes.iter() {
            compacted(&n.group().unwrap());
        }
        let mut latest = Latest::new();
        produce_keyed(nodes, 0, 100, &mut latest).await;
        latest
    }

    #[test]
    fn each_replica_cleans_its_copy_and_one_that_was_away_catches_up_from_cleaned_entries() {
        with_cluster(3, Duration::from_secs(1), async |nodes, peers| {
            let mut latest = compacted_with_records(nodes).await;
            let l = leader(nodes).unwrap();
            let (away, other) = ((l + 1) % 3, (l + 2) % 3);
            let stopped_at = nodes[away].group().unwrap().log().offsets().high_watermark;
            nodes[away].stop().await;
            produce_keyed(nodes, 100, 400, &mut latest).await;
            // Past the lag bound the away replica no longer holds the leader's cleaning back.
            glommio::timer::sleep(Duration::from_millis(1_300)).await;
            for i in [l, other] {
                let g = nodes[i].group().unwrap();
                let mut cleaned = None;
                until("a cleaning due", || {
                    cleaned = clean(&g);
                    cleaned.is_some()
                })
                .await;
                let (before, after, end) = cleaned.unwrap();
                assert!(after * 3 < before, "node {}: {before} bytes cleaned to {after}", nodes[i].id);
                if i == l {
                    assert!(end > stopped_at, "the leader cleaned past the away replica's end {stopped_at}: {end}");
                }
                let records = served(&g);
                assert_eq!(latest_of(&records), latest, "node {}: each key's latest value at its offset", nodes[i].id);
                assert!(records.len() < 400, "node {}: superseded records are gone", nodes[i].id);
            }
            // The away replica gets the cleaned entries it lacks; a cleaned follower restarts
            // from its cleaned files.
            nodes[other].stop().await;
            nodes[other].start(peers).await;
            nodes[away].start(peers).await;
            for i in [away, other] {
                compacted(&nodes[i].group().unwrap());
            }
            produce_keyed(nodes, 400, 420, &mut latest).await;
            let top = nodes[leader(nodes).unwrap()].group().unwrap().log().offsets().high_watermark;
            let hwm = |n: &Node| n.group().map(|g| g.log().offsets().high_watermark);
            until("every replica at the leader's watermark", || nodes.iter().all(|n| hwm(n) == Some(top))).await;
            for n in nodes.iter() {
                let records = served(&n.group().unwrap());
                assert_eq!(latest_of(&records), latest, "node {}: each key's latest value at its offset", n.id);
                let mut offsets: Vec<i64> = records.iter().map(|r| r.0).collect();
                offsets.dedup();
                assert!(offsets.windows(2).all(|w| w[0] < w[1]), "node {}: offsets only grow", n.id);
            }
            let away_records = served(&nodes[away].group().unwrap()).len();
            assert!(away_records < 400, "the away replica was sent cleaned entries: {away_records} records");
        });
    }

    #[test]
    fn a_cleaning_whose_key_map_fills_part_way_leaves_every_replica_serving() {
        with_cluster(3, Duration::from_secs(1), async |nodes, _| {
            let mut latest = compacted_with_records(nodes).await;
            produce_keyed(nodes, 100, 300, &mut latest).await;
            for n in nodes.iter() {
                let g = n.group().unwrap();
                caught_up(nodes, &g).await;
                // Room for four of the ten keys: the map ends in the first segment, and the
                // segments after it are not rewritten this time.
                let mut cleaned = None;
                until("a cleaning due", || {
                    cleaned = clean_with(&g, 4);
                    cleaned.is_some()
                })
                .await;
                let (_, _, end, map_end) = cleaned.unwrap();
                assert!(map_end < end, "node {}: the map ended at {map_end}, before {end}", n.id);
                assert_eq!(g.failed(), None, "node {}: the replica still serves", n.id);
                assert_eq!(latest_of(&served(&g)), latest, "node {}: each key's latest value at its offset", n.id);
                // Further passes take the rest.
                let mut passes = 0;
                while clean_with(&g, 4).is_some() {
                    passes += 1;
                    assert!(passes < 500, "node {}: the cleanings end", n.id);
                }
                assert_eq!(g.failed(), None);
                assert_eq!(latest_of(&served(&g)), latest);
            }
            produce_keyed(nodes, 300, 320, &mut latest).await;
            for n in nodes.iter() {
                let g = n.group().unwrap();
                caught_up(nodes, &g).await;
                assert_eq!(latest_of(&served(&g)), latest, "node {}: after more produces", n.id);
            }
        });
    }

    /// Waits until `g` has the serving leader's high watermark.
    async fn caught_up(nodes: &[Node], g: &Group) {
        let top = || nodes[leader(nodes).unwrap()].group().unwrap().log().offsets().high_watermark;
        until("the leader's watermark", || leader(nodes).is_some() && g.log().offsets().high_watermark == top()).await;
    }

    /// The emptied batches `g`'s log holds below its raft log's start.
    fn emptied_below_raft_start(g: &Group) -> usize {
        let start = g.replica.borrow().store().start().offset;
        let bytes = committed_bytes(g, g.log().offsets().log_start);
        let mut at = 0;
        let mut emptied = 0;
        while let Some(Ok(size)) = batch::batch_size(&bytes[at..]) {
            let h = batch::read_header(&bytes[at..]).unwrap();
            emptied += usize::from(h.base_offset < start && h.record_count == 0);
            at += size;
        }
        emptied
    }

    #[test]
    fn a_compacted_logs_raft_start_rises_over_its_records_and_a_snapshot_carries_them() {
        with_cluster(3, Duration::from_secs(1), async |nodes, peers| {
            let mut latest = compacted_with_records(nodes).await;
            let l = leader(nodes).unwrap();
            let away = (l + 1) % 3;
            let away_end = nodes[away].group().unwrap().log().offsets().log_end;
            nodes[away].crash().await;
            produce_keyed(nodes, 100, 600, &mut latest).await;
            glommio::timer::sleep(Duration::from_millis(1_300)).await;
            let g = nodes[l].group().unwrap();
            until("a cleaning due", || clean(&g).is_some()).await;
            let entries = g.replica.borrow().store().last() - g.replica.borrow().store().start().index;
            assert_eq!(g.apply_retention(crate::sys::unix_now_ms()), 0, "a compacted log deletes nothing");
            let raft_start = g.replica.borrow().store().start().offset;
            assert!(
                raft_start > away_end,
                "the raft log starts at {raft_start}, past the away replica's end {away_end}"
            );
            let left = g.replica.borrow().store().last() - g.replica.borrow().store().start().index;
            assert!(left * 2 < entries, "the raft log forgot the entries below its start: {entries} to {left}");
            assert_eq!(g.log().offsets().log_start, 0, "the records below it stay");
            assert_eq!(latest_of(&served(&g)), latest);
            // The other live replica's too, whichever of the two leads when the away one is back.
            let other = nodes[3 - l - away].group().unwrap();
            caught_up(nodes, &other).await;
            assert_eq!(other.apply_retention(crate::sys::unix_now_ms()), 0);
            assert!(other.replica.borrow().store().start().offset > away_end);
            // The start's rise alone makes a cleaning due, which drops the batches emptied
            // below it.
            assert!(emptied_below_raft_start(&g) > 0);
            let (before, after, _) = clean(&g).expect("a cleaning due");
            assert!(after < before, "{before} bytes cleaned to {after}");
            assert_eq!(emptied_below_raft_start(&g), 0, "no emptied batch below the raft log's start");
            assert_eq!(latest_of(&served(&g)), latest);

            // The away replica is sent a snapshot holding the records below the leader's
            // raft log start, then the entries after.
            nodes[away].start(peers).await;
            produce_keyed(nodes, 700, 720, &mut latest).await;
            let back = nodes[away].group().unwrap();
            caught_up(nodes, &back).await;
            assert_eq!(back.log().offsets().log_start, 0, "its log starts where the leader's does");
            assert!(back.replica.borrow().store().start().offset > away_end, "it was sent a snapshot");
            assert_eq!(latest_of(&served(&back)), latest, "each key's latest value at its offset");

            // A crash part way through an install (the replica state naming the snapshot's
            // start written, the segments gone) installs the kept snapshot again at open.
            let snap = raft::Storage::snapshot(back.replica.borrow().store(), 0, 0).unwrap();
            let index = snap.get_metadata().index;
            let dir = back.log().dir().to_path_buf();
            drop(back);
            nodes[away].crash().await;
            let state_path = dir.join(super::super::STATE_FILE);
            let mut meta = crate::cluster::meta::RaftMeta::decode(&std::fs::read(&state_path).unwrap()).unwrap();
            meta.hard_state.commit = index;
            std::fs::write(&state_path, meta.encode()).unwrap();
            for p in crate::storage::list(&dir).unwrap() {
                let name = p.file_name().unwrap().to_str().unwrap().to_string();
                if [".log", ".index", ".timeindex"].iter().any(|e| name.ends_with(e)) {
                    std::fs::remove_file(&p).unwrap();
                }
            }
            std::fs::write(super::super::pending_install_path(&dir, index), &snap.data).unwrap();
            nodes[away].start(peers).await;
            produce_keyed(nodes, 720, 730, &mut latest).await;
            let back = nodes[away].group().unwrap();
            caught_up(nodes, &back).await;
            assert_eq!(latest_of(&served(&back)), latest, "after the install was made again");
            assert!(!super::super::pending_install_path(&dir, index).exists(), "the kept snapshot is removed");
        });
    }
}
