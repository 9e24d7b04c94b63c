//! A group's membership as `__consumer_offsets` stores it: Kafka's `GroupMetadataValue`
//! (the value under a `GroupMetadataKey`), written when a rebalance completes (the leader's
//! SyncGroup), when a group empties and when a static member is replaced, so that a
//! coordinator that takes a group over (a restart, a failover) resumes its generation and
//! members instead of starting at generation 0, which would let a stale member's generation
//! match a new one. Pure code: the value and its encoding.
//!
//! Version 3, big-endian; a string is an i16 length and its bytes (-1: null), bytes an i32
//! length:
//! ```text
//! i16 version 3 | protocol type | i32 generation | protocol? | leader? | i64 state timestamp (ms)
//! | i32 member count, each: member id | instance id? | client id | client host
//!                          | i32 rebalance timeout | i32 session timeout | subscription | assignment
//! ```
//! Versions 0–2 read too (no instance id before 3, no state timestamp before 2, no rebalance
//! timeout before 1); version 4 (flexible, with tagged fields) is not written by Kafka for
//! classic groups and is not read.

use bytes::Bytes;

use super::offsets::{get_i16, get_i32, get_i64, get_nullable_str, get_str, put_nullable_str, put_str};

const VERSION: i16 = 3;

/// A group's generation and members as stored.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GroupMetadata {
    pub protocol_type: String,
    pub generation: i32,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    /// When the group entered its current state (wall-clock ms; -1 unknown).
    pub state_ts: i64,
    pub members: Vec<StoredMember>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StoredMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    /// The member's metadata for the group's protocol.
    pub subscription: Bytes,
    pub assignment: Bytes,
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as i32).to_be_bytes());
    out.extend_from_slice(b);
}

fn get_bytes(b: &mut &[u8]) -> Option<Bytes> {
    let len = usize::try_from(get_i32(b)?).ok()?;
    let v = Bytes::copy_from_slice(b.get(..len)?);
    *b = &b[len..];
    Some(v)
}

impl GroupMetadata {
    pub fn encode(&self) -> Vec<u8> {
        let mut v = VERSION.to_be_bytes().to_vec();
        put_str(&mut v, &self.protocol_type);
        v.extend_from_slice(&self.generation.to_be_bytes());
        put_nullable_str(&mut v, self.protocol.as_deref());
        put_nullable_str(&mut v, self.leader.as_deref());
        v.extend_from_slice(&self.state_ts.to_be_bytes());
        v.extend_from_slice(&(self.members.len() as i32).to_be_bytes());
        for m in &self.members {
            put_str(&mut v, &m.member_id);
            put_nullable_str(&mut v, m.instance_id.as_deref());
            put_str(&mut v, &m.client_id);
            put_str(&mut v, &m.client_host);
            v.extend_from_slice(&m.rebalance_timeout_ms.to_be_bytes());
            v.extend_from_slice(&m.session_timeout_ms.to_be_bytes());
            put_bytes(&mut v, &m.subscription);
            put_bytes(&mut v, &m.assignment);
        }
        v
    }

    /// None for a value this broker cannot read (version 4+, or cut short).
    pub fn decode(mut b: &[u8]) -> Option<GroupMetadata> {
        let version = get_i16(&mut b)?;
        if !(0..=3).contains(&version) {
            return None;
        }
        let protocol_type = get_str(&mut b)?.to_string();
        let generation = get_i32(&mut b)?;
        let protocol = get_nullable_str(&mut b)?.map(str::to_string);
        let leader = get_nullable_str(&mut b)?.map(str::to_string);
        let state_ts = if version >= 2 { get_i64(&mut b)? } else { -1 };
        let count = usize::try_from(get_i32(&mut b)?).ok()?;
        let mut members = Vec::with_capacity(count.min(1024));
        for _ in 0..count {
            let member_id = get_str(&mut b)?.to_string();
            let instance_id = if version >= 3 { get_nullable_str(&mut b)?.map(str::to_string) } else { None };
            let client_id = get_str(&mut b)?.to_string();
            let client_host = get_str(&mut b)?.to_string();
            let (rebalance_timeout_ms, session_timeout_ms) = if version == 0 {
                // Version 0 has no rebalance timeout: Kafka takes the session timeout.
                let s = get_i32(&mut b)?;
                (s, s)
            } else {
                (get_i32(&mut b)?, get_i32(&mut b)?)
            };
            let subscription = get_bytes(&mut b)?;
            let assignment = get_bytes(&mut b)?;
            members.push(StoredMember {
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout_ms,
                session_timeout_ms,
                subscription,
                assignment,
            });
        }
        Some(GroupMetadata { protocol_type, generation, protocol, leader, state_ts, members })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stable() -> GroupMetadata {
        GroupMetadata {
            protocol_type: "consumer".into(),
            generation: 7,
            protocol: Some("range".into()),
            leader: Some("m1".into()),
            state_ts: 1_000,
            members: vec![
                StoredMember {
                    member_id: "m1".into(),
                    instance_id: Some("i1".into()),
                    client_id: "c".into(),
                    client_host: "/127.0.0.1".into(),
                    rebalance_timeout_ms: 300_000,
                    session_timeout_ms: 45_000,
                    subscription: Bytes::from_static(b"sub"),
                    assignment: Bytes::from_static(b"as"),
                },
                StoredMember { member_id: "m2".into(), ..Default::default() },
            ],
        }
    }

    #[test]
    fn the_value_is_kafkas_group_metadata_value_v3() {
        let one = GroupMetadata { members: stable().members[..1].to_vec(), ..stable() };
        let mut want = b"\0\x03\0\x08consumer".to_vec();
        want.extend_from_slice(&7i32.to_be_bytes());
        want.extend_from_slice(b"\0\x05range\0\x02m1");
        want.extend_from_slice(&1_000i64.to_be_bytes());
        want.extend_from_slice(&1i32.to_be_bytes());
        want.extend_from_slice(b"\0\x02m1\0\x02i1\0\x01c\0\x0a/127.0.0.1");
        want.extend_from_slice(&300_000i32.to_be_bytes());
        want.extend_from_slice(&45_000i32.to_be_bytes());
        want.extend_from_slice(b"\0\0\0\x03sub\0\0\0\x02as");
        assert_eq!(one.encode(), want);
        assert_eq!(GroupMetadata::decode(&want), Some(one));
    }

    #[test]
    fn values_round_trip_and_an_empty_group_has_no_protocol_or_leader() {
        assert_eq!(GroupMetadata::decode(&stable().encode()), Some(stable()));
        let empty = GroupMetadata { protocol_type: "consumer".into(), generation: 8, ..Default::default() };
        let b = empty.encode();
        assert_eq!(&b[16..20], b"\xff\xff\xff\xff", "null protocol and leader");
        assert_eq!(GroupMetadata::decode(&b), Some(empty));
    }

    #[test]
    fn older_versions_read_and_newer_or_cut_values_do_not() {
        // Version 0: no state timestamp, no instance id, one timeout (the session's).
        let mut v0 = b"\0\0\0\x08consumer".to_vec();
        v0.extend_from_slice(&3i32.to_be_bytes());
        v0.extend_from_slice(b"\0\x05range\0\x02m1");
        v0.extend_from_slice(&1i32.to_be_bytes());
        v0.extend_from_slice(b"\0\x02m1\0\x01c\0\x01h");
        v0.extend_from_slice(&10_000i32.to_be_bytes());
        v0.extend_from_slice(b"\0\0\0\0\0\0\0\x01a");
        let g = GroupMetadata::decode(&v0).expect("a v0 value");
        assert_eq!((g.generation, g.state_ts, g.members.len()), (3, -1, 1));
        let m = &g.members[0];
        assert_eq!((m.rebalance_timeout_ms, m.session_timeout_ms, m.instance_id.as_deref()), (10_000, 10_000, None));
        assert_eq!(m.assignment, Bytes::from_static(b"a"));
        let mut v4 = stable().encode();
        v4[1] = 4;
        assert_eq!(GroupMetadata::decode(&v4), None, "flexible versions are not read");
        let full = stable().encode();
        assert_eq!(GroupMetadata::decode(&full[..full.len() - 1]), None);
    }
}
