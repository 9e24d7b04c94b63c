//! Committed offsets and how they are stored: records in the internal topic
//! `__consumer_offsets`, one partition per group chosen as Kafka does (Java `String.hashCode`
//! of the group id, modulo the partition count). The log is replayed at start, so the
//! latest record per key wins. Pure code: encoding, decoding, and the in-memory map.
//!
//! The records are Kafka's own (its `OffsetCommitKey`, `OffsetCommitValue`,
//! `GroupMetadataKey` and `GroupMetadataValue`), so that compaction keeps exactly the live offsets and Kafka's tools
//! can read the topic. Big-endian; a string is an i16 length and its bytes:
//! ```text
//! offset commit   key   i16 version 1 | group | topic | i32 partition
//!                 value i16 version 3 | i64 offset | i32 leader epoch | metadata | i64 commit timestamp (ms)
//! offset deleted  the same key, null value (a tombstone)
//! group           key   i16 version 2 | group
//!                 value GroupMetadataValue v3 (generation, members: see `metadata`)
//! group deleted   the same key, null value (after a tombstone of each of its offsets)
//! ```
//! Logs written before this format (a kind byte 1, 2 or 3 first, never 0 as Kafka's
//! versions start) still replay: `decode` reads both.

use std::collections::{BTreeMap, HashMap};

use super::metadata::GroupMetadata;
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
    Commit {
        group: String,
        topic: String,
        partition: i32,
        value: Committed,
    },
    DeleteOffset {
        group: String,
        topic: String,
        partition: i32,
    },
    /// A group's generation and members (Kafka's GroupMetadataValue).
    Group {
        group: String,
        value: GroupMetadata,
    },
    /// The group's tombstone: its stored membership goes. Its offsets go by their own
    /// tombstones, written before it (as Kafka does), so that a tombstone landing after a
    /// new commit to a group of the same name never takes that commit with it.
    DeleteGroup {
        group: String,
    },
    /// A deleted group in logs written before Kafka's records, where one record deleted the
    /// group's offsets too. Read only; written as the group's tombstone.
    DeleteGroupAndOffsets {
        group: String,
    },
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

/// A Kafka string: i16 length, then the bytes (cut at i16::MAX, far past any group id or
/// topic name).
pub(super) fn put_str(out: &mut Vec<u8>, s: &str) {
    let b = &s.as_bytes()[..s.len().min(i16::MAX as usize)];
    out.extend_from_slice(&(b.len() as i16).to_be_bytes());
    out.extend_from_slice(b);
}

/// A nullable string: length -1 for none.
pub(super) fn put_nullable_str(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => put_str(out, s),
        None => out.extend_from_slice(&(-1i16).to_be_bytes()),
    }
}

pub(super) fn get_str<'a>(b: &mut &'a [u8]) -> Option<&'a str> {
    let len = usize::try_from(i16::from_be_bytes(b.get(..2)?.try_into().ok()?)).ok()?;
    let s = std::str::from_utf8(b.get(2..2 + len)?).ok()?;
    *b = &b[2 + len..];
    Some(s)
}

/// `Some(None)` for a null string, None for a value cut short.
pub(super) fn get_nullable_str<'a>(b: &mut &'a [u8]) -> Option<Option<&'a str>> {
    if i16::from_be_bytes(b.get(..2)?.try_into().ok()?) < 0 {
        *b = &b[2..];
        return Some(None);
    }
    get_str(b).map(Some)
}

pub(super) fn get_i16(b: &mut &[u8]) -> Option<i16> {
    let v = i16::from_be_bytes(b.get(..2)?.try_into().ok()?);
    *b = &b[2..];
    Some(v)
}

pub(super) fn get_i32(b: &mut &[u8]) -> Option<i32> {
    let v = i32::from_be_bytes(b.get(..4)?.try_into().ok()?);
    *b = &b[4..];
    Some(v)
}

pub(super) fn get_i64(b: &mut &[u8]) -> Option<i64> {
    let v = i64::from_be_bytes(b.get(..8)?.try_into().ok()?);
    *b = &b[8..];
    Some(v)
}

/// Kafka's key versions: 0 and 1 are an offset commit's key, 2 a group's.
const OFFSET_KEY: i16 = 1;
const GROUP_KEY: i16 = 2;
/// The OffsetCommitValue version written: offset, leader epoch, metadata, commit timestamp.
const OFFSET_VALUE: i16 = 3;

fn offset_key(group: &str, topic: &str, partition: i32) -> Vec<u8> {
    let mut key = OFFSET_KEY.to_be_bytes().to_vec();
    put_str(&mut key, group);
    put_str(&mut key, topic);
    key.extend_from_slice(&partition.to_be_bytes());
    key
}

fn group_key(group: &str) -> Vec<u8> {
    let mut key = GROUP_KEY.to_be_bytes().to_vec();
    put_str(&mut key, group);
    key
}

impl Record {
    pub fn encode(&self) -> (Vec<u8>, Option<Vec<u8>>) {
        match self {
            Record::Commit { group, topic, partition, value } => {
                let mut v = Vec::with_capacity(32);
                v.extend_from_slice(&OFFSET_VALUE.to_be_bytes());
                v.extend_from_slice(&value.offset.to_be_bytes());
                v.extend_from_slice(&value.leader_epoch.to_be_bytes());
                // Kafka's metadata is never null: none is stored as "", as Kafka does.
                put_str(&mut v, value.metadata.as_deref().unwrap_or(""));
                v.extend_from_slice(&value.commit_ts.to_be_bytes());
                (offset_key(group, topic, *partition), Some(v))
            }
            Record::DeleteOffset { group, topic, partition } => (offset_key(group, topic, *partition), None),
            Record::Group { group, value } => (group_key(group), Some(value.encode())),
            Record::DeleteGroup { group } | Record::DeleteGroupAndOffsets { group } => (group_key(group), None),
        }
    }

    pub fn decode(key: &[u8], value: Option<&[u8]>) -> Option<Record> {
        if key.first() != Some(&0) {
            return legacy::decode(key, value);
        }
        let mut k = key;
        match get_i16(&mut k)? {
            0 | 1 => {
                let group = get_str(&mut k)?.to_string();
                let topic = get_str(&mut k)?.to_string();
                let partition = get_i32(&mut k)?;
                let Some(mut v) = value else { return Some(Record::DeleteOffset { group, topic, partition }) };
                let version = get_i16(&mut v)?;
                let offset = get_i64(&mut v)?;
                let leader_epoch = if version >= 3 { get_i32(&mut v)? } else { -1 };
                let metadata = get_str(&mut v)?;
                let commit_ts = get_i64(&mut v)?;
                let metadata = (!metadata.is_empty()).then(|| metadata.to_string());
                Some(Record::Commit {
                    group,
                    topic,
                    partition,
                    value: Committed { offset, leader_epoch, metadata, commit_ts },
                })
            }
            GROUP_KEY => {
                let group = get_str(&mut k)?.to_string();
                match value {
                    Some(v) => Some(Record::Group { group, value: GroupMetadata::decode(v)? }),
                    None => Some(Record::DeleteGroup { group }),
                }
            }
            _ => None,
        }
    }
}

/// The format of logs written before Kafka's records: a kind byte, u16-length strings.
mod legacy {
    use super::{Committed, Record};

    fn get_str<'a>(b: &mut &'a [u8]) -> Option<&'a str> {
        let len = u16::from_be_bytes(b.get(..2)?.try_into().ok()?) as usize;
        let s = std::str::from_utf8(b.get(2..2 + len)?).ok()?;
        *b = &b[2 + len..];
        Some(s)
    }

    pub(super) fn decode(key: &[u8], value: Option<&[u8]>) -> Option<Record> {
        let (&kind, mut k) = key.split_first()?;
        let group = get_str(&mut k)?.to_string();
        if kind == 3 {
            return Some(Record::DeleteGroupAndOffsets { group });
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

/// The committed offsets of every group on one shard, and, during a replay, the latest
/// stored membership of each group (taken by the coordinator once the replay ends).
#[derive(Debug, Default)]
pub struct OffsetStore {
    groups: HashMap<String, BTreeMap<(String, i32), Committed>>,
    stored: HashMap<String, GroupMetadata>,
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
            Record::Group { group, value } => {
                self.stored.insert(group, value);
            }
            Record::DeleteGroup { group } => {
                self.stored.remove(&group);
            }
            Record::DeleteGroupAndOffsets { group } => {
                self.groups.remove(&group);
                self.stored.remove(&group);
            }
        }
    }

    /// The memberships replayed since the last call.
    pub fn take_stored(&mut self) -> HashMap<String, GroupMetadata> {
        std::mem::take(&mut self.stored)
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
        self.stored.retain(|g, _| !which(g));
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
            Record::Group {
                group: "g".into(),
                value: GroupMetadata { protocol_type: "consumer".into(), generation: 3, ..Default::default() },
            },
            Record::DeleteGroup { group: "h".into() },
        ];
        let b = to_batch(&recs, 5);
        batch::check_batch(&b).unwrap();
        assert_eq!(from_batch(&b), recs);
    }

    #[test]
    fn records_are_kafkas_offset_commit_and_group_metadata_records() {
        let commit = Record::Commit {
            group: "g".into(),
            topic: "t".into(),
            partition: 2,
            value: Committed { offset: 42, leader_epoch: 7, metadata: Some("m".into()), commit_ts: 1000 },
        };
        let (key, value) = commit.encode();
        assert_eq!(key, b"\0\x01\0\x01g\0\x01t\0\0\0\x02", "OffsetCommitKey v1: group, topic, partition");
        let mut want = b"\0\x03".to_vec(); // OffsetCommitValue v3
        want.extend_from_slice(&42i64.to_be_bytes());
        want.extend_from_slice(&7i32.to_be_bytes());
        want.extend_from_slice(b"\0\x01m");
        want.extend_from_slice(&1000i64.to_be_bytes());
        assert_eq!(value.as_deref(), Some(&want[..]));
        // Deleting an offset is a tombstone of the commit's own key: compaction drops both.
        let (del, none) = Record::DeleteOffset { group: "g".into(), topic: "t".into(), partition: 2 }.encode();
        assert_eq!((del, none), (key.clone(), None));
        let (gk, gv) = Record::DeleteGroup { group: "g".into() }.encode();
        assert_eq!((gk.as_slice(), gv), (&b"\0\x02\0\x01g"[..], None), "GroupMetadataKey v2, tombstone");
        // Kafka's older value versions read too (v1: offset, metadata, commit and expire time).
        let mut v1 = b"\0\x01".to_vec();
        v1.extend_from_slice(&5i64.to_be_bytes());
        v1.extend_from_slice(b"\0\0");
        v1.extend_from_slice(&9i64.to_be_bytes());
        v1.extend_from_slice(&99i64.to_be_bytes());
        let Some(Record::Commit { value, .. }) = Record::decode(&key, Some(&v1)) else { panic!("a v1 value") };
        assert_eq!(value, Committed { offset: 5, leader_epoch: -1, metadata: None, commit_ts: 9 });
    }

    #[test]
    fn logs_in_the_earlier_format_still_replay() {
        let mut key = vec![1u8];
        for s in ["g", "t"] {
            key.extend_from_slice(&(s.len() as u16).to_be_bytes());
            key.extend_from_slice(s.as_bytes());
        }
        key.extend_from_slice(&3i32.to_be_bytes());
        let mut value = 42i64.to_be_bytes().to_vec();
        value.extend_from_slice(&0i32.to_be_bytes());
        value.extend_from_slice(&1000i64.to_be_bytes());
        value.extend_from_slice(&(-1i16).to_be_bytes());
        let want = Committed { offset: 42, leader_epoch: 0, metadata: None, commit_ts: 1000 };
        assert_eq!(
            Record::decode(&key, Some(&value)),
            Some(Record::Commit { group: "g".into(), topic: "t".into(), partition: 3, value: want })
        );
        key[0] = 2;
        assert_eq!(
            Record::decode(&key, None),
            Some(Record::DeleteOffset { group: "g".into(), topic: "t".into(), partition: 3 })
        );
        assert_eq!(Record::decode(b"\x03\0\x01g", None), Some(Record::DeleteGroupAndOffsets { group: "g".into() }));
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
        let stored =
            |generation| Record::Group { group: "g".into(), value: GroupMetadata { generation, ..Default::default() } };
        s.apply(stored(1));
        s.apply(stored(2));
        s.apply(Record::DeleteGroup { group: "g".into() });
        assert!(s.take_stored().is_empty(), "the group's tombstone removes its membership");
        assert_eq!(s.get("g", "t", 1).unwrap().offset, 9, "but not its offsets: they have their own tombstones");
        s.apply(Record::DeleteGroupAndOffsets { group: "g".into() });
        assert!(s.group("g").is_none(), "a deletion in the earlier format took the offsets too");
        s.apply(stored(1));
        s.apply(stored(2));
        assert_eq!(s.take_stored()["g"].generation, 2, "the latest membership wins");
        assert!(s.take_stored().is_empty(), "taken");
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
