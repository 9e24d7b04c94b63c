//! Which brokers hold each partition of a replicated topic. Kafka's rule, rack-aware as its
//! `StripedReplicaPlacer` is: the members are ordered so that consecutive ones alternate
//! racks, and partition `p`'s replicas are the `rf` members after position `start + p` in
//! that order; the first replica is the preferred leader, so leaders spread over brokers.

use std::collections::BTreeMap;

use super::requests::Failure;
use crate::protocol::ErrorCode;

/// A broker replicas can go to: its node id and rack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub node_id: i32,
    pub rack: Option<String>,
}

/// The members in the order replicas are dealt: by node id within each rack, racks taken in
/// turn (brokers without a rack form one more).
fn striped(members: &[Member]) -> Vec<i32> {
    let mut racks: BTreeMap<Option<&str>, Vec<i32>> = BTreeMap::new();
    for m in members {
        racks.entry(m.rack.as_deref()).or_default().push(m.node_id);
    }
    for ids in racks.values_mut() {
        ids.sort_unstable();
    }
    let mut order = Vec::with_capacity(members.len());
    for i in 0.. {
        let before = order.len();
        order.extend(racks.values().filter_map(|ids| ids.get(i)));
        if order.len() == before {
            break;
        }
    }
    order
}

/// Replicas for `partitions` new partitions of `rf` copies each, dealt from `start`.
pub(super) fn assign(members: &[Member], partitions: u32, rf: usize, start: usize) -> Result<Vec<Vec<i32>>, Failure> {
    if rf == 0 || rf > members.len() {
        return Err((
            ErrorCode::InvalidReplicationFactor,
            format!("replication factor {rf} must be between 1 and the {} brokers of the cluster", members.len()),
        ));
    }
    let order = striped(members);
    let n = order.len();
    Ok((0..partitions as usize).map(|p| (0..rf).map(|i| order[(start + p + i) % n]).collect()).collect())
}

/// Checks replicas asked for explicitly (CreateTopics' and CreatePartitions'
/// `assignments`): each partition names distinct members, all partitions as many.
pub(super) fn check(members: &[Member], assignments: &[Vec<i32>]) -> Result<(), Failure> {
    let bad = |why: String| Err((ErrorCode::InvalidReplicaAssignment, why));
    let rf = assignments.first().map_or(0, Vec::len);
    for (p, replicas) in assignments.iter().enumerate() {
        if replicas.is_empty() || replicas.len() != rf {
            return bad(format!("partition {p} has {} replicas where the others have {rf}", replicas.len()));
        }
        if let Some(unknown) = replicas.iter().find(|id| !members.iter().any(|m| m.node_id == **id)) {
            return bad(format!("partition {p} names broker {unknown}, which is not a member of the cluster"));
        }
        let mut sorted = replicas.clone();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() != replicas.len() {
            return bad(format!("partition {p} names a broker twice: {replicas:?}"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(racks: &[(i32, Option<&str>)]) -> Vec<Member> {
        racks.iter().map(|(id, r)| Member { node_id: *id, rack: r.map(String::from) }).collect()
    }

    #[test]
    fn replicas_rotate_so_leaders_spread() {
        let m = members(&[(1, None), (2, None), (3, None)]);
        assert_eq!(assign(&m, 3, 3, 0).unwrap(), vec![vec![1, 2, 3], vec![2, 3, 1], vec![3, 1, 2]]);
        assert_eq!(assign(&m, 2, 1, 1).unwrap(), vec![vec![2], vec![3]]);
        assert_eq!(assign(&m, 1, 4, 0).unwrap_err().0, ErrorCode::InvalidReplicationFactor);
    }

    #[test]
    fn consecutive_replicas_are_on_different_racks() {
        let m = members(&[(1, Some("a")), (2, Some("a")), (3, Some("b")), (4, Some("b"))]);
        for replicas in assign(&m, 4, 2, 0).unwrap() {
            let racks: Vec<_> = replicas.iter().map(|id| if *id <= 2 { "a" } else { "b" }).collect();
            assert_ne!(racks[0], racks[1], "{replicas:?}");
        }
    }

    #[test]
    fn explicit_assignments_are_checked() {
        let m = members(&[(1, None), (2, None)]);
        check(&m, &[vec![1, 2], vec![2, 1]]).unwrap();
        for bad in [vec![vec![1, 1]], vec![vec![1, 3]], vec![vec![1], vec![1, 2]], vec![vec![]]] {
            assert_eq!(check(&m, &bad).unwrap_err().0, ErrorCode::InvalidReplicaAssignment, "{bad:?}");
        }
    }
}
