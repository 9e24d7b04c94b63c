//! Committed offsets and how they are stored: records in the internal topic
//! `__consumer_offsets`, one partition per group chosen as Kafka does (Java `String.hashCode`
//! of the group id, modulo the partition count). The log is replayed at start, so the
//! latest record per key wins. Pure code: encoding, decoding, and the in-memory map.
//!
//! Record key (big-endian):
//! ```text
//! u8 kind (1 = offset commit, 2 = offset deleted, 3 = group deleted)
//! u16 group length, group bytes
//! kinds 1 and 2: u16 topic length, topic bytes, i32 partition
//! ```
//! Record value for kind 1:
//! ```text
//! i64 offset | i32 leader epoch | i64 commit timestamp (ms) | i16 metadata length (-1 = null), bytes
//! ```

use std::collections::{BTreeMap, HashMap};

use crate::protocol::batch;

pub const TOPIC: &str = "__consumer_offsets";

/// The offsets topic's configs: committed offsets are never deleted by retention.
pub fn topic_configs() -> std::collections::BTreeMap<String, String> {
    let internal = [("retention.ms", "-1"), ("retention.bytes", "-1"), ("cleanup.policy", "compact")];
    internal.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
    pub commit_ts: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    Commit { group: String, topic: String, partition: i32, value: Committed },
    DeleteOffset { group: String, topic: String, partition: i32 },
    DeleteGroup { group: String },
}

/// Kafka's partition for a group: `abs(groupId.hashCode()) % partitions` with Java's
/// String.hashCode over UTF-16 units, so groups land where Kafka would put them.
pub fn partition_for(group: &str, partitions: u32) -> i32 {
    let mut h: i32 = 0;
    for unit in group.encode_utf16() {
        h = h.wrapping_mul(31).wrapping_add(unit as i32);
    }
    // Kafka's Utils.abs maps i32::MIN to 0.
    let abs = if h == i32::MIN { 0 } else { h.abs() };
    abs % partitions.max(1) as i32
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    let b = &s.as_bytes()[..s.len().min(u16::MAX as usize)];
    out.extend_from_slice(&(b.len() as u16).to_be_bytes());
    out.extend_from_slice(b);
}

fn get_str<'a>(b: &mut &'a [u8]) -> Option<&'a str> {
    let len = u16::from_be_bytes(b.get(..2)?.try_into().ok()?) as usize;
    let s = std::str::from_utf8(b.get(2..2 + len)?).ok()?;
    *b = &b[2 + len..];
    Some(s)
}

impl Record {
    pub fn encode(&self) -> (Vec<u8>, Option<Vec<u8>>) {
        let mut key = Vec::new();
        match self {
            Record::Commit { group, topic, partition, value } => {
                key.push(1);
                put_str(&mut key, group);
                put_str(&mut key, topic);
                key.extend_from_slice(&partition.to_be_bytes());
                let mut v = Vec::with_capacity(32);
                v.extend_from_slice(&value.offset.to_be_bytes());
                v.extend_from_slice(&value.leader_epoch.to_be_bytes());
                v.extend_from_slice(&value.commit_ts.to_be_bytes());
                match &value.metadata {
                    Some(m) => {
                        let m = &m.as_bytes()[..m.len().min(i16::MAX as usize)];
                        v.extend_from_slice(&(m.len() as i16).to_be_bytes());
                        v.extend_from_slice(m);
                    }
                    None => v.extend_from_slice(&(-1i16).to_be_bytes()),
                }
                (key, Some(v))
            }
            Record::DeleteOffset { group, topic, partition } => {
                key.push(2);
                put_str(&mut key, group);
                put_str(&mut key, topic);
                key.extend_from_slice(&partition.to_be_bytes());
                (key, None)
            }
            Record::DeleteGroup { group } => {
                key.push(3);
                put_str(&mut key, group);
                (key, None)
            }
        }
    }

    pub fn decode(key: &[u8], value: Option<&[u8]>) -> Option<Record> {
        let (&kind, mut k) = key.split_first()?;
        let group = get_str(&mut k)?.to_string();
        if kind == 3 {
            return Some(Record::DeleteGroup { group });
        }
        let topic = get_str(&mut k)?.to_string();
        let partition = i32::from_be_bytes(k.get(..4)?.try_into().ok()?);
        match kind {
            1 => {
                let v = value?;
                let offset = i64::from_be_bytes(v.get(..8)?.try_into().ok()?);
                let leader_epoch = i32::from_be_bytes(v.get(8..12)?.try_into().ok()?);
                let commit_ts = i64::from_be_bytes(v.get(12..20)?.try_into().ok()?);
                let mlen = i16::from_be_bytes(v.get(20..22)?.try_into().ok()?);
                let metadata = if mlen < 0 {
                    None
                } else {
                    Some(String::from_utf8_lossy(v.get(22..22 + mlen as usize)?).into_owned())
                };
                Some(Record::Commit {
                    group,
                    topic,
                    partition,
                    value: Committed { offset, leader_epoch, metadata, commit_ts },
                })
            }
            2 => Some(Record::DeleteOffset { group, topic, partition }),
            _ => None,
        }
    }
}

/// Encodes records as one uncompressed record batch, ready to append.
pub fn to_batch(records: &[Record], now_ms: i64) -> Vec<u8> {
    let encoded: Vec<(Vec<u8>, Option<Vec<u8>>)> = records.iter().map(Record::encode).collect();
    let kvs: Vec<batch::KeyValue> = encoded.iter().map(|(k, v)| (Some(k.as_slice()), v.as_deref())).collect();
    batch::build_keyed(now_ms, &kvs)
}

/// Every record of a batch this broker wrote.
pub fn from_batch(buf: &[u8]) -> Vec<Record> {
    batch::records(buf).filter_map(|r| Record::decode(r.key?, r.value)).collect()
}

/// The committed offsets of every group on one shard.
#[derive(Debug, Default)]
pub struct OffsetStore {
    groups: HashMap<String, BTreeMap<(String, i32), Committed>>,
}

impl OffsetStore {
    pub fn apply(&mut self, r: Record) {
        match r {
            Record::Commit { group, topic, partition, value } => {
                self.groups.entry(group).or_default().insert((topic, partition), value);
            }
            Record::DeleteOffset { group, topic, partition } => {
                if let Some(g) = self.groups.get_mut(&group) {
                    g.remove(&(topic, partition));
                    if g.is_empty() {
                        self.groups.remove(&group);
                    }
                }
            }
            Record::DeleteGroup { group } => {
                self.groups.remove(&group);
            }
        }
    }

    pub fn get(&self, group: &str, topic: &str, partition: i32) -> Option<&Committed> {
        self.groups.get(group)?.get(&(topic.to_string(), partition))
    }

    pub fn group(&self, group: &str) -> Option<&BTreeMap<(String, i32), Committed>> {
        self.groups.get(group)
    }

    pub fn groups(&self) -> impl Iterator<Item = &String> {
        self.groups.keys()
    }

    /// Drops the offsets of the groups `which` picks.
    pub fn forget(&mut self, which: impl Fn(&str) -> bool) {
        self.groups.retain(|g, _| !which(g));
    }

    /// Offsets of `group` older than `retention_ms` at `now_ms`, counted from the later of
    /// their commit and `empty_since_ms` (Kafka 2.1+: retention starts when the group empties).
    pub fn expired(&self, group: &str, now_ms: i64, empty_since_ms: i64, retention_ms: i64) -> Vec<(String, i32)> {
        let Some(g) = self.groups.get(group) else { return Vec::new() };
        g.iter()
            .filter(|(_, c)| now_ms - c.commit_ts.max(empty_since_ms) > retention_ms)
            .map(|(k, _)| k.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_partitions_match_kafka() {
        // "my-group".hashCode() is -1906497762 in Java; Kafka takes abs() % partitions.
        assert_eq!(partition_for("", 50), 0);
        assert_eq!(partition_for("my-group", 50), 1_906_497_762 % 50);
        assert_eq!(partition_for("my-group", 50), 12);
        assert!((0..1000).all(|i| (0..7).contains(&partition_for(&format!("g{i}"), 7))));
    }

    #[test]
    fn records_round_trip_through_a_batch() {
        let recs = vec![
            Record::Commit {
                group: "g".into(),
                topic: "t".into(),
                partition: 3,
                value: Committed { offset: 42, leader_epoch: 0, metadata: Some("m".into()), commit_ts: 1000 },
            },
            Record::Commit {
                group: "g".into(),
                topic: "t".into(),
                partition: 4,
                value: Committed { offset: 7, leader_epoch: -1, metadata: None, commit_ts: 1001 },
            },
            Record::DeleteOffset { group: "g".into(), topic: "t".into(), partition: 3 },
            Record::DeleteGroup { group: "h".into() },
        ];
        let b = to_batch(&recs, 5);
        batch::check_batch(&b).unwrap();
        assert_eq!(from_batch(&b), recs);
    }

    #[test]
    fn the_latest_record_wins_on_replay() {
        let mut s = OffsetStore::default();
        let c = |o| Committed { offset: o, leader_epoch: 0, metadata: None, commit_ts: 0 };
        s.apply(Record::Commit { group: "g".into(), topic: "t".into(), partition: 0, value: c(1) });
        s.apply(Record::Commit { group: "g".into(), topic: "t".into(), partition: 0, value: c(5) });
        s.apply(Record::Commit { group: "g".into(), topic: "t".into(), partition: 1, value: c(9) });
        assert_eq!(s.get("g", "t", 0).unwrap().offset, 5);
        s.apply(Record::DeleteOffset { group: "g".into(), topic: "t".into(), partition: 0 });
        assert!(s.get("g", "t", 0).is_none());
        assert_eq!(s.get("g", "t", 1).unwrap().offset, 9);
        s.apply(Record::DeleteGroup { group: "g".into() });
        assert!(s.group("g").is_none());
    }

    #[test]
    fn retention_counts_from_when_the_group_emptied() {
        let mut s = OffsetStore::default();
        s.apply(Record::Commit {
            group: "g".into(),
            topic: "t".into(),
            partition: 0,
            value: Committed { offset: 1, leader_epoch: 0, metadata: None, commit_ts: 100 },
        });
        assert!(s.expired("g", 1_000, 900, 500).is_empty(), "emptied at 900: not yet");
        assert_eq!(s.expired("g", 1_500, 900, 500), vec![("t".to_string(), 0)]);
    }
}
