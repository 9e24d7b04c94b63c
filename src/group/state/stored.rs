//! A group to and from what `__consumer_offsets` stores of it (`metadata::GroupMetadata`):
//! the coordinator stores a group when the state machine asks (`Effect::Store`) and, on
//! taking a group over, restores it as Kafka loads one: `Stable` with its members, each
//! given a full session timeout to heartbeat to its new coordinator, or `Empty` with its
//! generation.

use std::collections::{BTreeMap, HashMap};

use super::{Group, GroupLimits, Member, State};
use crate::group::metadata::{GroupMetadata, StoredMember};

impl Group {
    /// What is stored of the group now; `now_wall_ms` is its state timestamp.
    pub fn to_metadata(&self, now_wall_ms: i64) -> GroupMetadata {
        let members = self
            .members
            .iter()
            .map(|(id, m)| StoredMember {
                member_id: id.clone(),
                instance_id: m.instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                rebalance_timeout_ms: i32::try_from(m.rebalance_timeout_ms).unwrap_or(i32::MAX),
                session_timeout_ms: i32::try_from(m.session_timeout_ms).unwrap_or(i32::MAX),
                subscription: self.protocol.as_ref().and_then(|p| super::metadata_for(m, p)).unwrap_or_default(),
                assignment: m.assignment.clone(),
            })
            .collect();
        GroupMetadata {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation,
            protocol: self.protocol.clone(),
            leader: self.leader.clone(),
            state_ts: now_wall_ms,
            members,
        }
    }

    /// The group `stored` describes, taken over at `now`.
    pub fn restore(id: &str, stored: &GroupMetadata, now: u64, limits: GroupLimits) -> Group {
        let mut g = Group::new(id, now, limits);
        g.generation = stored.generation;
        g.protocol_type = (!stored.protocol_type.is_empty()).then(|| stored.protocol_type.clone());
        let protocol = stored.protocol.clone().filter(|_| !stored.members.is_empty());
        let mut members = BTreeMap::new();
        let mut statics = HashMap::new();
        for m in &stored.members {
            let session = u64::try_from(m.session_timeout_ms).unwrap_or(0);
            let member = Member {
                instance_id: m.instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                session_timeout_ms: session,
                rebalance_timeout_ms: u64::try_from(m.rebalance_timeout_ms).unwrap_or(0),
                // Only the chosen protocol's metadata is stored (as in Kafka): a member that
                // rejoins offering others triggers a rebalance.
                protocols: protocol.iter().map(|p| (p.clone(), m.subscription.clone())).collect(),
                assignment: m.assignment.clone(),
                heartbeat_deadline: now + session,
                join: None,
                sync: None,
            };
            if let Some(iid) = &m.instance_id {
                statics.insert(iid.clone(), m.member_id.clone());
            }
            members.insert(m.member_id.clone(), member);
        }
        if members.is_empty() {
            g.stored_empty_since_ms = Some(stored.state_ts);
        } else {
            g.state = State::Stable;
            g.protocol = protocol;
            g.leader = stored.leader.clone().filter(|l| members.contains_key(l));
            g.members = members;
            g.statics = statics;
        }
        g
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::super::tests::{join, join_reply, stable_with_one, sync, sync_reply, LIMITS};
    use super::super::{Effect, Group, State};
    use crate::protocol::ErrorCode;

    fn stores(fx: &[Effect]) -> usize {
        fx.iter().filter(|e| matches!(e, Effect::Store)).count()
    }

    #[test]
    fn a_restored_group_keeps_its_generation_members_and_assignments() {
        let g = stable_with_one();
        let stored = g.to_metadata(5);
        assert_eq!(
            (stored.generation, stored.protocol.as_deref(), stored.leader.as_deref()),
            (1, Some("range"), Some("m1"))
        );
        assert_eq!(stored.members[0].subscription, Bytes::from_static(b"md"), "the chosen protocol's metadata");
        let mut back = Group::restore("g", &stored, 100, LIMITS);
        assert_eq!((back.state(), back.generation(), back.leader()), (State::Stable, 1, Some("m1")));
        assert_eq!(back.heartbeat(200, "m1", None, 1), Ok(()), "the member carries on with its generation");
        assert_eq!(back.heartbeat(200, "m1", None, 0), Err(ErrorCode::IllegalGeneration));
        let fx = back.sync(300, sync(9, "m1", 1, &[]));
        assert_eq!(sync_reply(&fx, 9).assignment, Bytes::from_static(b"A1"), "its assignment is kept");
        // A member of the old coordinator's that never comes back is expired as usual.
        let fx = back.tick(300 + 10_000);
        assert_eq!((back.state(), back.generation(), stores(&fx)), (State::Empty, 2, 1), "{fx:?}");
    }

    #[test]
    fn a_new_member_after_a_restore_gets_the_next_generation_never_a_reused_one() {
        let stored = stable_with_one().to_metadata(5);
        let mut back = Group::restore("g", &stored, 0, LIMITS);
        let fx = back.join(1, join(1, "", "m2"));
        assert_eq!(join_reply(&fx, 1).error, Some(ErrorCode::MemberIdRequired));
        back.join(1, join(2, "m2", "x"));
        let fx = back.join(2, join(3, "m1", "x"));
        let r = join_reply(&fx, 3);
        assert_eq!((r.error, r.generation), (None, 2));
    }

    #[test]
    fn an_empty_group_restores_empty_with_its_generation() {
        let mut g = stable_with_one();
        let (_, fx) = g.leave(10, &[("m1".into(), None)]);
        assert_eq!((g.state(), stores(&fx)), (State::Empty, 1), "emptying a group stores it");
        let stored = g.to_metadata(6);
        assert!(stored.members.is_empty() && stored.protocol.is_none() && stored.leader.is_none());
        let mut back = Group::restore("g", &stored, 0, LIMITS);
        assert_eq!((back.state(), back.generation(), back.protocol_type()), (State::Empty, 2, Some("consumer")));
        assert_eq!(back.stored_empty_since_ms, Some(6), "offset retention counts from the stored emptying");
        // Once it empties again under this coordinator, its own clock counts.
        back.join(20, join(1, "", "m9"));
        back.join(20, join(2, "m9", "x"));
        back.tick(20 + 60_000);
        assert_eq!((back.state(), back.stored_empty_since_ms), (State::Empty, None));
    }

    #[test]
    fn static_members_are_restored_and_still_fence_an_old_instance() {
        let mut g = Group::new("g", 0, LIMITS);
        let mut j = join(1, "", "s1");
        j.instance_id = Some("i1".into());
        g.join(0, j);
        let fx = g.sync(1, sync(2, "s1", 1, &[("s1", b"S")]));
        assert_eq!(stores(&fx), 1, "the leader's sync stores the group");
        let fx_store_first = fx.iter().position(|e| matches!(e, Effect::Store));
        let fx_reply = fx.iter().position(|e| matches!(e, Effect::Sync(2, _)));
        assert!(fx_store_first < fx_reply, "the sync replies wait for the store: {fx:?}");
        let mut back = Group::restore("g", &g.to_metadata(0), 0, LIMITS);
        assert_eq!(back.heartbeat(1, "other", Some("i1"), 1), Err(ErrorCode::FencedInstanceId));
        let mut again = join(3, "", "s2");
        again.instance_id = Some("i1".into());
        again.protocols = vec![("range".into(), Bytes::from_static(b"md"))];
        let fx = back.join(2, again);
        let r = join_reply(&fx, 3);
        assert_eq!((r.error, r.member_id.as_str(), r.generation), (None, "s2", 1), "replaced without a rebalance");
        assert_eq!(stores(&fx), 1, "the replacement is stored");
        assert_eq!(back.heartbeat(3, "s1", Some("i1"), 1), Err(ErrorCode::FencedInstanceId));
    }
}
