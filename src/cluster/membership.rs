//! The steps that move a raft group's membership to a reassignment's target, decided at the
//! leader from its applied configuration: new replicas join as learners (they receive the
//! log without counting towards commits), and once every one of them holds what is committed,
//! one joint configuration change (raft's §6: old and new majorities both needed until it is
//! left, which raft-rs does on its own) makes them voters and removes the replicas that leave.
//! A leader that is leaving hands its leadership to a staying voter first, so clients are
//! not left waiting for an election.
//!
//! The decision is pure (`next_step`), so that every path is unit-tested without a group.

use raft::prelude::{ConfChangeSingle, ConfChangeTransition, ConfChangeType, ConfChangeV2};

/// What the leader does next for a reassignment.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// A change is in flight (proposed, or a joint configuration not yet left).
    Wait,
    /// Propose this change (learners added, or the joint change that ends the move).
    Change(ConfChangeV2),
    /// Learners are still catching up.
    CatchUp,
    /// This leader leaves: hand the leadership to that staying voter first.
    HandOver(u64),
    /// The voters are the target and no learner is left.
    Done,
}

/// A leader's view of its group's membership.
pub struct Membership {
    pub me: u64,
    pub voters: Vec<u64>,
    pub learners: Vec<u64>,
    /// A change proposed and not yet applied, or a joint configuration.
    pub changing: bool,
}

/// The next step towards `target`; `caught_up(id)`: the replica holds everything committed.
pub fn next_step(m: &Membership, target: &[u64], caught_up: impl Fn(u64) -> bool) -> Step {
    if m.changing {
        return Step::Wait;
    }
    let missing: Vec<u64> =
        target.iter().copied().filter(|id| !m.voters.contains(id) && !m.learners.contains(id)).collect();
    if !missing.is_empty() {
        return Step::Change(change(missing.iter().map(|id| (ConfChangeType::AddLearnerNode, *id))));
    }
    let promote: Vec<u64> = m.learners.iter().copied().filter(|id| target.contains(id)).collect();
    let leave: Vec<u64> = m.voters.iter().chain(&m.learners).copied().filter(|id| !target.contains(id)).collect();
    if promote.is_empty() && leave.is_empty() {
        return Step::Done;
    }
    if promote.iter().any(|id| !caught_up(*id)) {
        return Step::CatchUp;
    }
    if leave.contains(&m.me) {
        // Raft lets a leader remove itself, but then the partition waits out an election.
        if let Some(to) = m.voters.iter().copied().find(|id| target.contains(id) && caught_up(*id)) {
            return Step::HandOver(to);
        }
    }
    let adds = promote.into_iter().map(|id| (ConfChangeType::AddNode, id));
    Step::Change(change(adds.chain(leave.into_iter().map(|id| (ConfChangeType::RemoveNode, id)))))
}

/// One configuration change of several single changes, joint if it needs to be and left by
/// raft-rs as soon as it is applied.
fn change(singles: impl Iterator<Item = (ConfChangeType, u64)>) -> ConfChangeV2 {
    let mut cc = ConfChangeV2::default();
    cc.set_transition(ConfChangeTransition::Auto);
    for (kind, id) in singles {
        let mut s = ConfChangeSingle::default();
        s.set_change_type(kind);
        s.node_id = id;
        cc.changes.push(s);
    }
    cc
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(step: &Step) -> Vec<(ConfChangeType, u64)> {
        match step {
            Step::Change(cc) => cc.changes.iter().map(|c| (c.get_change_type(), c.node_id)).collect(),
            other => panic!("expected a change, got {other:?}"),
        }
    }

    fn at(me: u64, voters: &[u64], learners: &[u64]) -> Membership {
        Membership { me, voters: voters.to_vec(), learners: learners.to_vec(), changing: false }
    }

    use ConfChangeType::{AddLearnerNode, AddNode, RemoveNode};

    #[test]
    fn a_move_adds_learners_waits_for_them_then_swaps_in_one_change() {
        let target = [2, 3];
        let step = next_step(&at(2, &[1, 2], &[]), &target, |_| true);
        assert_eq!(kinds(&step), vec![(AddLearnerNode, 3)]);
        assert_eq!(next_step(&at(2, &[1, 2], &[3]), &target, |id| id != 3), Step::CatchUp);
        let step = next_step(&at(2, &[1, 2], &[3]), &target, |_| true);
        assert_eq!(kinds(&step), vec![(AddNode, 3), (RemoveNode, 1)]);
        assert_eq!(next_step(&at(2, &[2, 3], &[]), &target, |_| true), Step::Done);
    }

    #[test]
    fn nothing_is_proposed_while_a_change_is_in_flight() {
        let m = Membership { changing: true, ..at(1, &[1], &[]) };
        assert_eq!(next_step(&m, &[1, 2, 3], |_| true), Step::Wait);
    }

    #[test]
    fn growing_one_replica_to_three_adds_both_then_promotes_both() {
        let target = [1, 2, 3];
        assert_eq!(
            kinds(&next_step(&at(1, &[1], &[]), &target, |_| true)),
            vec![(AddLearnerNode, 2), (AddLearnerNode, 3)]
        );
        assert_eq!(kinds(&next_step(&at(1, &[1], &[2, 3]), &target, |_| true)), vec![(AddNode, 2), (AddNode, 3)]);
    }

    #[test]
    fn a_leaving_leader_hands_over_to_a_caught_up_staying_voter_first() {
        let target = [2, 3];
        assert_eq!(next_step(&at(1, &[1, 2], &[3]), &target, |_| true), Step::HandOver(2));
        // No staying voter to hand to (a move to new brokers only): the change removes it.
        let step = next_step(&at(1, &[1], &[2, 3]), &target, |_| true);
        assert_eq!(kinds(&step), vec![(AddNode, 2), (AddNode, 3), (RemoveNode, 1)]);
    }

    #[test]
    fn a_cancelled_move_removes_the_learners_it_added() {
        let step = next_step(&at(1, &[1, 2], &[3]), &[1, 2], |_| false);
        assert_eq!(kinds(&step), vec![(RemoveNode, 3)]);
    }

    #[test]
    fn a_reordered_target_is_done_at_once() {
        assert_eq!(next_step(&at(1, &[1, 2, 3], &[]), &[3, 1, 2], |_| false), Step::Done);
    }
}
