//! The "consumer" embedded protocol of classic consumer groups: what a member puts in
//! JoinGroup (its subscription), what the leader hands out in SyncGroup (assignments), and
//! the "range" assignor the leader runs. Both payloads are a big-endian i16 version followed
//! by the struct at that version, as Java's `ConsumerProtocol` writes them.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::common::{sb, topic_name};
use crate::protocol::messages::consumer_protocol_assignment::TopicPartition;
use crate::protocol::messages::{ConsumerProtocolAssignment, ConsumerProtocolSubscription};
use crate::protocol::{Decodable, Encodable};

/// `protocol_type` of consumer groups.
pub const PROTOCOL_TYPE: &str = "consumer";
/// The assignor this CLI offers (and runs when it leads the group).
pub const RANGE: &str = "range";
/// Newest payload version the codec knows; newer payloads only append fields, so they are
/// read as this one (Java does the same).
const MAX_VERSION: i16 = 3;

/// Topics -> partitions of one member.
pub type Assignment = BTreeMap<String, Vec<i32>>;

pub fn encode_subscription(topics: &[String]) -> Result<Bytes> {
    let mut s = ConsumerProtocolSubscription::default();
    s.topics = topics.iter().map(|t| sb(t)).collect();
    // v0 carries everything the range assignor needs, and every consumer reads it.
    encode_versioned(&s, 0)
}

pub fn decode_subscription(mut data: Bytes) -> Result<Vec<String>> {
    let version = read_version(&mut data)?;
    let s = ConsumerProtocolSubscription::decode(&mut data, version).context("decoding a consumer subscription")?;
    Ok(s.topics.iter().map(|t| t.to_string()).collect())
}

pub fn encode_assignment(assignment: &Assignment) -> Result<Bytes> {
    let mut a = ConsumerProtocolAssignment::default();
    for (topic, partitions) in assignment {
        let mut tp = TopicPartition::default();
        tp.topic = topic_name(topic);
        tp.partitions = partitions.clone();
        a.assigned_partitions.push(tp);
    }
    encode_versioned(&a, 0)
}

/// An empty payload is an empty assignment (a leader gives one to members it left out).
pub fn decode_assignment(mut data: Bytes) -> Result<Assignment> {
    if data.is_empty() {
        return Ok(Assignment::new());
    }
    let version = read_version(&mut data)?;
    let a = ConsumerProtocolAssignment::decode(&mut data, version).context("decoding a consumer assignment")?;
    let mut out = Assignment::new();
    for tp in a.assigned_partitions {
        out.entry(tp.topic.to_string()).or_default().extend(tp.partitions);
    }
    Ok(out)
}

fn encode_versioned<M: Encodable>(m: &M, version: i16) -> Result<Bytes> {
    let mut buf = BytesMut::new();
    buf.put_i16(version);
    m.encode(&mut buf, version)?;
    Ok(buf.freeze())
}

fn read_version(data: &mut Bytes) -> Result<i16> {
    anyhow::ensure!(data.remaining() >= 2, "consumer protocol payload of {} bytes", data.remaining());
    let v = data.get_i16();
    anyhow::ensure!(v >= 0, "consumer protocol payload version {v}");
    Ok(v.min(MAX_VERSION))
}

/// Kafka's `RangeAssignor`: for each topic, its subscribers sorted by member id share its
/// partitions in contiguous ranges, the first `partitions % subscribers` getting one more.
/// `members` are (member id, subscribed topics); `partitions` the count per topic (topics
/// missing from it are skipped). Every member gets an entry, empty if nothing fell to it.
pub fn range_assign(
    members: &[(String, Vec<String>)],
    partitions: &BTreeMap<String, i32>,
) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = members.iter().map(|(m, _)| (m.clone(), Assignment::new())).collect();
    for (topic, &count) in partitions {
        let mut subscribers: Vec<&String> =
            members.iter().filter(|(_, topics)| topics.contains(topic)).map(|(m, _)| m).collect();
        if subscribers.is_empty() || count <= 0 {
            continue;
        }
        subscribers.sort();
        let n = subscribers.len() as i32;
        let (per, extra) = (count / n, count % n);
        for (i, member) in subscribers.into_iter().enumerate() {
            let i = i as i32;
            let start = i * per + i.min(extra);
            let len = per + i32::from(i < extra);
            if len > 0 {
                out.get_mut(member)
                    .expect("every member has an entry")
                    .insert(topic.clone(), (start..start + len).collect());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(list: &[(&str, &[&str])]) -> Vec<(String, Vec<String>)> {
        list.iter().map(|(m, ts)| (m.to_string(), ts.iter().map(|t| t.to_string()).collect())).collect()
    }

    #[test]
    fn range_gives_the_first_members_the_remainder() {
        let m = members(&[("c", &["t"]), ("a", &["t"]), ("b", &["t"])]);
        let counts = BTreeMap::from([("t".to_string(), 7)]);
        let got = range_assign(&m, &counts);
        assert_eq!(got["a"]["t"], vec![0, 1, 2]);
        assert_eq!(got["b"]["t"], vec![3, 4]);
        assert_eq!(got["c"]["t"], vec![5, 6]);
    }

    #[test]
    fn range_assigns_each_topic_among_its_own_subscribers() {
        let m = members(&[("a", &["x", "y"]), ("b", &["y"])]);
        let counts = BTreeMap::from([("x".to_string(), 2), ("y".to_string(), 1), ("z".to_string(), 4)]);
        let got = range_assign(&m, &counts);
        assert_eq!(got["a"], BTreeMap::from([("x".to_string(), vec![0, 1]), ("y".to_string(), vec![0])]));
        assert!(got["b"].is_empty(), "one partition of y, and a sorts first");
    }

    #[test]
    fn payloads_round_trip_with_their_version_prefix() {
        let sub = encode_subscription(&["orders".to_string()]).unwrap();
        assert_eq!(&sub[..2], &[0, 0], "version 0");
        assert_eq!(decode_subscription(sub).unwrap(), vec!["orders".to_string()]);
        let a = BTreeMap::from([("orders".to_string(), vec![0, 2])]);
        assert_eq!(decode_assignment(encode_assignment(&a).unwrap()).unwrap(), a);
        assert!(decode_assignment(Bytes::new()).unwrap().is_empty());
    }

    #[test]
    fn a_newer_subscription_version_is_read_as_the_newest_known() {
        // A v3 subscription as Java 4.x writes it, with an extra trailing byte standing for a
        // field a future version might add.
        let mut s = ConsumerProtocolSubscription::default();
        s.topics = vec![sb("t")];
        s.generation_id = 4;
        let mut buf = BytesMut::new();
        buf.put_i16(4);
        s.encode(&mut buf, 3).unwrap();
        buf.put_u8(0);
        assert_eq!(decode_subscription(buf.freeze()).unwrap(), vec!["t".to_string()]);
    }
}
