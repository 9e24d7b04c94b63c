//! The classic consumer-group protocol as a pure state machine: requests and the time go
//! in, replies (effects) come out. No I/O, no clocks, no randomness: the driver
//! (`coordinator.rs`) supplies `now` (monotonic milliseconds) and fresh member ids, and
//! routes each effect to the request waiting for it (by token).
//!
//! States, as in Kafka: `Empty` → `PreparingRebalance` (members (re)join) →
//! `CompletingRebalance` (join answered; waiting for the leader's SyncGroup with the
//! assignment) → `Stable`; any membership change goes back to `PreparingRebalance`.
//! `Dead` is a deleted group. The rebalance ends when every member has rejoined or the
//! largest rebalance timeout passes (members that did not rejoin are removed); a group that
//! was empty first waits `initial_rebalance_delay` (extended per joining member, within the
//! rebalance timeout) so that a starting fleet of consumers lands in one generation.

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;

use crate::protocol::ErrorCode;

mod messages;
mod rebalance;
mod stored;

pub use messages::{Effect, JoinRequest, JoinResponse, JoinedMember, MemberView, SyncRequest, SyncResponse, Token};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl State {
    pub fn name(self) -> &'static str {
        match self {
            State::Empty => "Empty",
            State::PreparingRebalance => "PreparingRebalance",
            State::CompletingRebalance => "CompletingRebalance",
            State::Stable => "Stable",
            State::Dead => "Dead",
        }
    }
}

/// Broker-wide group settings (Kafka's names in the comments).
#[derive(Debug, Clone, Copy)]
pub struct GroupLimits {
    /// group.min.session.timeout.ms
    pub min_session_ms: u64,
    /// group.max.session.timeout.ms
    pub max_session_ms: u64,
    /// group.initial.rebalance.delay.ms
    pub initial_rebalance_delay_ms: u64,
    /// group.max.size
    pub max_size: usize,
}

impl Default for GroupLimits {
    fn default() -> Self {
        GroupLimits {
            min_session_ms: 6_000,
            max_session_ms: 1_800_000,
            initial_rebalance_delay_ms: 3_000,
            max_size: usize::MAX,
        }
    }
}

#[derive(Debug, Clone)]
struct Member {
    instance_id: Option<String>,
    client_id: String,
    client_host: String,
    session_timeout_ms: u64,
    rebalance_timeout_ms: u64,
    protocols: Vec<(String, Bytes)>,
    assignment: Bytes,
    heartbeat_deadline: u64,
    join: Option<Token>,
    sync: Option<Token>,
}

#[derive(Debug, Clone)]
pub struct Group {
    pub id: String,
    state: State,
    generation: i32,
    protocol_type: Option<String>,
    protocol: Option<String>,
    leader: Option<String>,
    members: BTreeMap<String, Member>,
    /// Ids handed out with MEMBER_ID_REQUIRED, until they join or expire.
    pending: BTreeMap<String, u64>,
    /// group.instance.id → member id, for static members.
    statics: HashMap<String, String>,
    rebalance_deadline: u64,
    /// Members of this generation that have not sent their SyncGroup yet, and when they are
    /// removed if they have not by then (the longest rebalance timeout after the join
    /// completed, as Kafka's pending-sync expiry): a leader that never syncs would otherwise
    /// leave every member without an assignment for good.
    pending_sync: std::collections::BTreeSet<String>,
    sync_deadline: u64,
    /// While the first rebalance of an empty group waits for more members.
    initial_until: Option<u64>,
    /// When the group last became empty (offset retention counts from here).
    pub empty_since: u64,
    /// For a group taken over from `__consumer_offsets` and empty since: the wall-clock ms
    /// its stored state says it emptied (Kafka's currentStateTimestamp), or -1 when the log
    /// does not say, and retention counts from each offset's commit as Kafka's does then.
    /// `None` once it empties under this coordinator: `empty_since` tells.
    pub stored_empty_since_ms: Option<i64>,
    limits: GroupLimits,
}

impl Group {
    /// The requests of its members still waiting on a rebalance (their Join or Sync).
    pub fn waiting_tokens(&self) -> Vec<Token> {
        self.members.values().flat_map(|m| m.join.into_iter().chain(m.sync)).collect()
    }

    pub fn new(id: &str, now: u64, limits: GroupLimits) -> Group {
        Group {
            id: id.to_string(),
            state: State::Empty,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: BTreeMap::new(),
            pending: BTreeMap::new(),
            statics: HashMap::new(),
            rebalance_deadline: 0,
            pending_sync: Default::default(),
            sync_deadline: 0,
            initial_until: None,
            empty_since: now,
            stored_empty_since_ms: None,
            limits,
        }
    }

    pub fn state(&self) -> State {
        self.state
    }
    pub fn generation(&self) -> i32 {
        self.generation
    }
    pub fn protocol_type(&self) -> Option<&str> {
        self.protocol_type.as_deref()
    }
    pub fn protocol(&self) -> Option<&str> {
        self.protocol.as_deref()
    }
    pub fn leader(&self) -> Option<&str> {
        self.leader.as_deref()
    }
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }
    pub fn member_ids(&self) -> impl Iterator<Item = &str> {
        self.members.keys().map(String::as_str)
    }

    pub fn members(&self) -> Vec<MemberView> {
        self.members
            .iter()
            .map(|(id, m)| MemberView {
                member_id: id.clone(),
                instance_id: m.instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                metadata: self.protocol.as_ref().and_then(|p| metadata_for(m, p)).unwrap_or_default(),
                assignment: m.assignment.clone(),
            })
            .collect()
    }

    /// The members as DescribeGroups shows them: outside Stable without metadata or
    /// assignment (mid-rebalance those are the last generation's), as Kafka describes them.
    pub fn described_members(&self) -> Vec<MemberView> {
        let mut members = self.members();
        if self.state != State::Stable {
            for m in &mut members {
                m.metadata = Default::default();
                m.assignment = Default::default();
            }
        }
        members
    }

    /// Marks the group deleted: every later request sees COORDINATOR_NOT_AVAILABLE or
    /// GROUP_ID_NOT_FOUND, as the driver decides.
    pub fn mark_dead(&mut self) {
        self.state = State::Dead;
    }

    /// Back to Empty after a deletion that failed (only an empty group is deleted).
    pub fn revive(&mut self) {
        if self.state == State::Dead {
            self.state = State::Empty;
        }
    }

    fn fenced(&self, member_id: &str, instance_id: Option<&str>) -> bool {
        instance_id.is_some_and(|iid| self.statics.get(iid).is_some_and(|m| m != member_id))
    }

    /// Why a request from this member is refused, if it is (the checks every API shares).
    fn check_member(&self, member_id: &str, instance_id: Option<&str>) -> Result<(), ErrorCode> {
        if self.state == State::Dead {
            return Err(ErrorCode::CoordinatorNotAvailable);
        }
        if self.fenced(member_id, instance_id) {
            return Err(ErrorCode::FencedInstanceId);
        }
        if !self.members.contains_key(member_id) {
            return Err(ErrorCode::UnknownMemberId);
        }
        Ok(())
    }

    fn supports(&self, protocol_type: &str, protocols: &[(String, Bytes)], except: &str) -> bool {
        if protocol_type.is_empty() || protocols.is_empty() {
            return false;
        }
        let others: Vec<&Member> =
            self.members.iter().filter(|(id, _)| id.as_str() != except).map(|(_, m)| m).collect();
        if others.is_empty() {
            return true;
        }
        if self.protocol_type.as_deref().is_some_and(|t| t != protocol_type) {
            return false;
        }
        protocols.iter().any(|(name, _)| others.iter().all(|m| m.protocols.iter().any(|(n, _)| n == name)))
    }

    fn current_join(&self, member_id: &str) -> JoinResponse {
        let leader = self.leader.clone().unwrap_or_default();
        let members = if leader == member_id { self.joined_members() } else { Vec::new() };
        JoinResponse {
            error: None,
            generation: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol.clone(),
            leader,
            member_id: member_id.to_string(),
            members,
            skip_assignment: false,
        }
    }

    fn joined_members(&self) -> Vec<JoinedMember> {
        let Some(p) = &self.protocol else { return Vec::new() };
        self.members
            .iter()
            .map(|(id, m)| JoinedMember {
                member_id: id.clone(),
                instance_id: m.instance_id.clone(),
                metadata: metadata_for(m, p).unwrap_or_default(),
            })
            .collect()
    }

    pub fn sync(&mut self, now: u64, req: SyncRequest) -> Vec<Effect> {
        let mut fx = Vec::new();
        let err = |e| vec![Effect::Sync(req.token, SyncResponse::error(e))];
        if let Err(e) = self.check_member(&req.member_id, req.instance_id.as_deref()) {
            return err(e);
        }
        if req.generation != self.generation {
            return err(ErrorCode::IllegalGeneration);
        }
        if req.protocol_type.as_ref().is_some_and(|t| Some(t) != self.protocol_type.as_ref())
            || req.protocol_name.as_ref().is_some_and(|p| Some(p) != self.protocol.as_ref())
        {
            return err(ErrorCode::InconsistentGroupProtocol);
        }
        let reply = |g: &Group, a: Bytes| SyncResponse {
            error: None,
            protocol_type: g.protocol_type.clone(),
            protocol_name: g.protocol.clone(),
            assignment: a,
        };
        if matches!(self.state, State::Stable | State::CompletingRebalance) {
            self.pending_sync.remove(&req.member_id);
        }
        match self.state {
            State::PreparingRebalance => return err(ErrorCode::RebalanceInProgress),
            State::Stable => {
                let m = self.members.get_mut(&req.member_id).expect("checked");
                m.heartbeat_deadline = now + m.session_timeout_ms;
                let a = m.assignment.clone();
                fx.push(Effect::Sync(req.token, reply(self, a)));
            }
            State::CompletingRebalance => {
                let m = self.members.get_mut(&req.member_id).expect("checked");
                m.heartbeat_deadline = now + m.session_timeout_ms;
                if let Some(old) = m.sync.replace(req.token) {
                    fx.push(Effect::Sync(old, SyncResponse::error(ErrorCode::RebalanceInProgress)));
                }
                if self.leader.as_deref() == Some(req.member_id.as_str()) {
                    let given: HashMap<&str, &Bytes> = req.assignments.iter().map(|(id, a)| (id.as_str(), a)).collect();
                    for (id, m) in self.members.iter_mut() {
                        m.assignment = given.get(id.as_str()).map(|a| (*a).clone()).unwrap_or_default();
                    }
                    self.state = State::Stable;
                    fx.push(Effect::Store);
                    let waiting: Vec<(Token, Bytes)> = self
                        .members
                        .values_mut()
                        .filter_map(|m| m.sync.take().map(|t| (t, m.assignment.clone())))
                        .collect();
                    for (t, a) in waiting {
                        fx.push(Effect::Sync(t, reply(self, a)));
                    }
                }
            }
            State::Empty | State::Dead => return err(ErrorCode::UnknownMemberId),
        }
        fx
    }

    pub fn heartbeat(
        &mut self,
        now: u64,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
    ) -> Result<(), ErrorCode> {
        self.check_member(member_id, instance_id)?;
        if generation != self.generation {
            return Err(ErrorCode::IllegalGeneration);
        }
        let m = self.members.get_mut(member_id).expect("checked");
        m.heartbeat_deadline = now + m.session_timeout_ms;
        match self.state {
            State::PreparingRebalance => Err(ErrorCode::RebalanceInProgress),
            State::CompletingRebalance | State::Stable => Ok(()),
            State::Empty | State::Dead => Err(ErrorCode::UnknownMemberId),
        }
    }

    /// LeaveGroup for each (member id, instance id); one result per entry.
    pub fn leave(
        &mut self,
        now: u64,
        leaving: &[(String, Option<String>)],
    ) -> (Vec<Result<(), ErrorCode>>, Vec<Effect>) {
        let mut fx = Vec::new();
        let mut results = Vec::with_capacity(leaving.len());
        let mut removed = false;
        for (member_id, iid) in leaving {
            if self.state == State::Dead {
                results.push(Err(ErrorCode::CoordinatorNotAvailable));
                continue;
            }
            let target = match iid {
                Some(i) => match self.statics.get(i) {
                    Some(m) if member_id.is_empty() || m == member_id => Some(m.clone()),
                    Some(_) => {
                        results.push(Err(ErrorCode::FencedInstanceId));
                        continue;
                    }
                    None => None,
                },
                None => Some(member_id.clone()),
            };
            match target {
                Some(id) if self.members.contains_key(&id) => {
                    self.remove_member(&id, &mut fx);
                    removed = true;
                    results.push(Ok(()));
                }
                Some(id) if self.pending.remove(&id).is_some() => {
                    removed = true;
                    results.push(Ok(()));
                }
                _ => results.push(Err(ErrorCode::UnknownMemberId)),
            }
        }
        if removed {
            self.on_members_removed(now, &mut fx);
        }
        (results, fx)
    }

    /// Expires members whose session ran out (those waiting for a join or sync answer are
    /// kept alive), members that did not send their SyncGroup within the rebalance timeout,
    /// pending ids nobody used, and ends a rebalance whose time is up.
    pub fn tick(&mut self, now: u64) -> Vec<Effect> {
        let mut fx = Vec::new();
        self.pending.retain(|_, deadline| *deadline > now);
        let expired: Vec<String> = self
            .members
            .iter()
            .filter(|(_, m)| m.join.is_none() && m.sync.is_none() && m.heartbeat_deadline <= now)
            .map(|(id, _)| id.clone())
            .collect();
        let mut expired = expired;
        if matches!(self.state, State::CompletingRebalance | State::Stable)
            && !self.pending_sync.is_empty()
            && now >= self.sync_deadline
        {
            expired.extend(std::mem::take(&mut self.pending_sync));
        }
        for id in &expired {
            self.remove_member(id, &mut fx);
        }
        if !expired.is_empty() {
            self.on_members_removed(now, &mut fx);
        } else {
            fx.extend(self.maybe_complete_join(now));
        }
        fx
    }

    /// Whether an OffsetCommit from this member may be applied (Kafka's rules for classic
    /// groups: a commit outside any generation is only for an empty group).
    pub fn validate_commit(
        &mut self,
        now: u64,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
    ) -> Result<(), ErrorCode> {
        if self.state == State::Dead {
            return Err(ErrorCode::CoordinatorNotAvailable);
        }
        if generation < 0 && self.state == State::Empty {
            return Ok(());
        }
        // Kafka's order: the member, then its generation, then the group's state.
        self.check_member(member_id, instance_id)?;
        if generation != self.generation {
            return Err(ErrorCode::IllegalGeneration);
        }
        if self.state == State::CompletingRebalance {
            return Err(ErrorCode::RebalanceInProgress);
        }
        let m = self.members.get_mut(member_id).expect("checked");
        m.heartbeat_deadline = now + m.session_timeout_ms;
        Ok(())
    }

    /// The topics the members subscribe to, for the "consumer" protocol (OffsetDelete may
    /// not drop offsets of a topic the group still consumes).
    pub fn subscribed_topics(&self) -> Option<Vec<String>> {
        if self.protocol_type.as_deref() != Some("consumer") || self.members.is_empty() {
            return None;
        }
        let p = self.protocol.as_ref()?;
        let mut topics = Vec::new();
        for m in self.members.values() {
            topics.extend(consumer_subscription(&metadata_for(m, p)?)?);
        }
        topics.sort();
        topics.dedup();
        Some(topics)
    }
}

fn metadata_for(m: &Member, protocol: &str) -> Option<Bytes> {
    m.protocols.iter().find(|(n, _)| n == protocol).map(|(_, md)| md.clone())
}

/// Topics of a ConsumerProtocolSubscription (version i16, then an array of strings; the
/// rest does not matter here).
pub fn consumer_subscription(md: &[u8]) -> Option<Vec<String>> {
    let n = i32::from_be_bytes(md.get(2..6)?.try_into().ok()?);
    if n < 0 || n as usize > md.len() {
        return None;
    }
    let mut at = 6;
    let mut out = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let len = i16::from_be_bytes(md.get(at..at + 2)?.try_into().ok()?);
        if len < 0 {
            return None;
        }
        at += 2;
        out.push(String::from_utf8(md.get(at..at + len as usize)?.to_vec()).ok()?);
        at += len as usize;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) const LIMITS: GroupLimits =
        GroupLimits { min_session_ms: 1_000, max_session_ms: 60_000, initial_rebalance_delay_ms: 0, max_size: 100 };

    pub(super) fn join(token: Token, member: &str, fresh: &str) -> JoinRequest {
        JoinRequest {
            token,
            member_id: member.into(),
            instance_id: None,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 30_000,
            protocol_type: "consumer".into(),
            protocols: vec![("range".into(), Bytes::from_static(b"md")), ("roundrobin".into(), Bytes::new())],
            require_known_member_id: true,
            fresh_member_id: fresh.into(),
            supports_skip_assignment: true,
        }
    }

    pub(super) fn sync(
        token: Token,
        member: &str,
        generation: i32,
        assignments: &[(&str, &'static [u8])],
    ) -> SyncRequest {
        SyncRequest {
            token,
            member_id: member.into(),
            instance_id: None,
            generation,
            protocol_type: None,
            protocol_name: None,
            assignments: assignments.iter().map(|(m, a)| (m.to_string(), Bytes::from_static(a))).collect(),
        }
    }

    pub(super) fn join_reply(fx: &[Effect], token: Token) -> JoinResponse {
        fx.iter()
            .find_map(|e| match e {
                Effect::Join(t, r) if *t == token => Some(r.clone()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no join reply for token {token} in {fx:?}"))
    }

    pub(super) fn sync_reply(fx: &[Effect], token: Token) -> SyncResponse {
        fx.iter()
            .find_map(|e| match e {
                Effect::Sync(t, r) if *t == token => Some(r.clone()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no sync reply for token {token} in {fx:?}"))
    }

    /// One member joins (two-step, KIP-394) and syncs: the group is Stable at generation 1.
    pub(super) fn stable_with_one() -> Group {
        let mut g = Group::new("g", 0, LIMITS);
        let fx = g.join(0, join(1, "", "m1"));
        let r = join_reply(&fx, 1);
        assert_eq!(r.error, Some(ErrorCode::MemberIdRequired));
        assert_eq!(r.member_id, "m1");
        let fx = g.join(1, join(2, "m1", "unused"));
        let r = join_reply(&fx, 2);
        assert_eq!((r.error, r.generation, r.leader.as_str()), (None, 1, "m1"));
        assert_eq!(r.protocol_name.as_deref(), Some("range"));
        assert_eq!(r.members.len(), 1, "the leader sees the members");
        let fx = g.sync(2, sync(3, "m1", 1, &[("m1", b"A1")]));
        assert_eq!(sync_reply(&fx, 3).assignment, Bytes::from_static(b"A1"));
        assert_eq!(g.state(), State::Stable);
        g
    }

    #[test]
    fn a_member_joins_and_syncs_to_a_stable_group() {
        stable_with_one();
    }

    #[test]
    fn a_second_member_triggers_a_rebalance_that_everyone_rejoins() {
        let mut g = stable_with_one();
        let fx = g.join(10, join(4, "", "m2"));
        assert_eq!(join_reply(&fx, 4).error, Some(ErrorCode::MemberIdRequired));
        let fx = g.join(11, join(5, "m2", ""));
        assert!(fx.is_empty(), "m2 waits for m1 to rejoin");
        assert_eq!(g.state(), State::PreparingRebalance);
        assert_eq!(g.heartbeat(12, "m1", None, 1), Err(ErrorCode::RebalanceInProgress));
        let fx = g.join(13, join(6, "m1", ""));
        let (r1, r2) = (join_reply(&fx, 6), join_reply(&fx, 5));
        assert_eq!((r1.generation, r2.generation), (2, 2));
        assert_eq!(r1.leader, "m1", "the leader stays");
        assert_eq!((r1.members.len(), r2.members.len()), (2, 0));
        // follower syncs first and waits for the leader
        let fx = g.sync(14, sync(7, "m2", 2, &[]));
        assert!(fx.is_empty());
        let fx = g.sync(15, sync(8, "m1", 2, &[("m1", b"A"), ("m2", b"B")]));
        assert_eq!(sync_reply(&fx, 7).assignment, Bytes::from_static(b"B"));
        assert_eq!(sync_reply(&fx, 8).assignment, Bytes::from_static(b"A"));
        assert_eq!(g.state(), State::Stable);
        assert_eq!(g.heartbeat(16, "m2", None, 2), Ok(()));
    }

    #[test]
    fn stale_generations_and_unknown_members_are_fenced() {
        let mut g = stable_with_one();
        assert_eq!(g.heartbeat(5, "m1", None, 0), Err(ErrorCode::IllegalGeneration));
        assert_eq!(g.heartbeat(5, "nobody", None, 1), Err(ErrorCode::UnknownMemberId));
        assert_eq!(sync_reply(&g.sync(5, sync(9, "m1", 7, &[])), 9).error, Some(ErrorCode::IllegalGeneration));
        assert_eq!(g.validate_commit(5, "m1", None, 0), Err(ErrorCode::IllegalGeneration));
        assert_eq!(g.validate_commit(5, "nobody", None, 1), Err(ErrorCode::UnknownMemberId));
        assert_eq!(g.validate_commit(5, "", None, -1), Err(ErrorCode::UnknownMemberId), "group has members");
        assert_eq!(g.validate_commit(5, "m1", None, 1), Ok(()));
        assert_eq!(join_reply(&g.join(5, join(9, "ghost", "")), 9).error, Some(ErrorCode::UnknownMemberId));
    }

    #[test]
    fn an_expired_session_removes_the_member_and_rebalances() {
        let mut g = stable_with_one();
        g.join(10, join(4, "", "m2"));
        g.join(10, join(5, "m2", ""));
        let fx = g.join(10, join(6, "m1", ""));
        join_reply(&fx, 6);
        g.sync(11, sync(7, "m1", 2, &[("m1", b"A"), ("m2", b"B")]));
        g.sync(11, sync(8, "m2", 2, &[]));
        assert_eq!(g.state(), State::Stable);
        // m2 keeps heartbeating, m1 goes silent
        for t in (1_000..=10_000).step_by(1_000) {
            assert_eq!(g.heartbeat(t, "m2", None, 2), Ok(()));
            assert!(g.tick(t).is_empty());
        }
        let fx = g.tick(10_012);
        assert!(fx.is_empty());
        assert_eq!(g.state(), State::PreparingRebalance, "m1's session ended");
        assert_eq!(g.member_ids().collect::<Vec<_>>(), vec!["m2"]);
        let fx = g.join(10_020, join(9, "m2", ""));
        let r = join_reply(&fx, 9);
        assert_eq!((r.generation, r.leader.as_str()), (3, "m2"), "a new leader is chosen");
    }

    #[test]
    fn members_that_do_not_rejoin_are_dropped_at_the_rebalance_timeout() {
        let mut g = stable_with_one();
        g.join(100, join(4, "", "m2"));
        g.join(100, join(5, "m2", ""));
        // m1 heartbeats (told to rejoin) but never rejoins; only the rebalance timeout applies
        for t in [9_000, 18_000, 27_000] {
            assert_eq!(g.heartbeat(t, "m1", None, 1), Err(ErrorCode::RebalanceInProgress));
            assert!(g.tick(t).is_empty(), "m1 still has time (rebalance timeout 30 s)");
        }
        let fx = g.tick(30_100);
        let r = join_reply(&fx, 5);
        assert_eq!((r.error, r.generation, r.leader.as_str()), (None, 2, "m2"));
        assert_eq!(g.member_ids().collect::<Vec<_>>(), vec!["m2"]);
    }

    #[test]
    fn leaving_rebalances_and_the_last_leave_empties_the_group() {
        let mut g = stable_with_one();
        let (res, _) = g.leave(5, &[("m1".into(), None), ("zzz".into(), None)]);
        assert_eq!(res, vec![Ok(()), Err(ErrorCode::UnknownMemberId)]);
        assert_eq!(g.state(), State::Empty);
        assert_eq!(g.generation(), 2, "emptying completes a (memberless) generation");
        assert_eq!(g.validate_commit(6, "", None, -1), Ok(()), "an empty group takes standalone commits");
    }

    #[test]
    fn static_members_rejoin_without_a_rebalance_and_fence_the_old_instance() {
        let mut g = Group::new("g", 0, LIMITS);
        let mut a = join(1, "", "a1");
        a.instance_id = Some("host-a".into());
        let r = join_reply(&g.join(0, a.clone()), 1);
        assert_eq!((r.error, r.member_id.as_str()), (None, "a1"), "static members need no second join");
        let mut b = join(2, "", "b1");
        b.instance_id = Some("host-b".into());
        g.join(1, b.clone());
        let fx = g.join(2, JoinRequest { token: 3, member_id: "a1".into(), ..a.clone() });
        let gen = join_reply(&fx, 3).generation;
        g.sync(3, sync(4, "a1", gen, &[("a1", b"A"), ("b1", b"B")]));
        assert_eq!(g.state(), State::Stable);

        // host-b restarts: new member id, same instance id, same protocols
        let fx = g.join(4, JoinRequest { token: 5, fresh_member_id: "b2".into(), ..b.clone() });
        let r = join_reply(&fx, 5);
        assert_eq!((r.error, r.member_id.as_str(), r.generation), (None, "b2", gen));
        assert_eq!(g.state(), State::Stable, "no rebalance");
        let fx = g.sync(5, SyncRequest { instance_id: Some("host-b".into()), ..sync(6, "b2", gen, &[]) });
        assert_eq!(sync_reply(&fx, 6).assignment, Bytes::from_static(b"B"), "keeps its assignment");
        assert_eq!(g.heartbeat(6, "b1", Some("host-b"), gen), Err(ErrorCode::FencedInstanceId));
        assert_eq!(g.validate_commit(6, "b1", Some("host-b"), gen), Err(ErrorCode::FencedInstanceId));
        let (res, _) = g.leave(7, &[("b1".into(), Some("host-b".into()))]);
        assert_eq!(res, vec![Err(ErrorCode::FencedInstanceId)]);

        // the leader (host-a) restarts too: no rebalance; it gets the members and must not assign
        let fx = g.join(8, JoinRequest { token: 7, fresh_member_id: "a2".into(), ..a.clone() });
        let r = join_reply(&fx, 7);
        assert_eq!((r.error, r.generation, r.leader.as_str(), r.skip_assignment), (None, gen, "a2", true));
        assert_eq!(r.members.len(), 2);
        assert_eq!(g.state(), State::Stable);
        // an old client (JoinGroup < v9) cannot be told to skip the assignment: as Kafka, it
        // is answered as a follower (the old leader's id, no members) and syncs as one
        let fx =
            g.join(9, JoinRequest { token: 8, fresh_member_id: "a3".into(), supports_skip_assignment: false, ..a });
        let r = join_reply(&fx, 8);
        assert_eq!((r.error, r.generation, r.leader.as_str(), r.skip_assignment), (None, gen, "a2", false));
        assert!(r.members.is_empty(), "a follower gets no members");
        assert_eq!(g.state(), State::Stable, "no rebalance");
        let fx = g.sync(10, SyncRequest { instance_id: Some("host-a".into()), ..sync(9, "a3", gen, &[]) });
        assert_eq!(sync_reply(&fx, 9).assignment, Bytes::from_static(b"A"), "keeps its assignment");
        assert_eq!(g.state(), State::Stable);
    }

    /// A Stable group of two static members, host-a (a1, the leader) and host-b (b1), each
    /// with a rebalance timeout (5 s) shorter than its session (10 s): the two join
    /// requests and the generation.
    fn stable_static_pair() -> (Group, JoinRequest, JoinRequest, i32) {
        let mut g = Group::new("g", 0, LIMITS);
        let mut a = join(1, "", "a1");
        a.instance_id = Some("host-a".into());
        a.rebalance_timeout_ms = 5_000;
        g.join(0, a.clone());
        let mut b = join(2, "", "b1");
        b.instance_id = Some("host-b".into());
        b.rebalance_timeout_ms = 5_000;
        g.join(1, b.clone());
        let fx = g.join(2, JoinRequest { token: 3, member_id: "a1".into(), ..a.clone() });
        let r = join_reply(&fx, 3);
        assert_eq!(r.leader, "a1");
        g.sync(3, sync(4, "a1", r.generation, &[("a1", b"A"), ("b1", b"B")]));
        g.sync(3, SyncRequest { instance_id: Some("host-b".into()), ..sync(5, "b1", r.generation, &[]) });
        assert_eq!(g.state(), State::Stable);
        (g, a, b, r.generation)
    }

    #[test]
    fn a_static_member_that_has_not_rejoined_keeps_its_place_in_the_next_generation() {
        // host-b is away past the rebalance timeout, not past its session.
        let (mut g, a, b, gen) = stable_static_pair();
        // A dynamic member joins; host-b is restarting and does not rejoin in time.
        let mut c = join(6, "", "c1");
        c.require_known_member_id = false;
        c.rebalance_timeout_ms = 5_000;
        g.join(10, c);
        g.join(11, JoinRequest { token: 7, member_id: "a1".into(), ..a.clone() });
        let fx = g.tick(10 + a.rebalance_timeout_ms);
        let r = join_reply(&fx, 7);
        assert!(r.members.iter().any(|m| m.member_id == "b1"), "the leader assigns to host-b too: {:?}", r.members);
        assert_eq!(r.generation, gen + 1);
        g.sync(10 + a.rebalance_timeout_ms, sync(8, "a1", gen + 1, &[("a1", b"A"), ("b1", b"B2"), ("c1", b"C")]));
        assert_eq!(g.state(), State::Stable);
        // host-b comes back and takes its place without another rebalance.
        let now = 20 + a.rebalance_timeout_ms;
        let fx = g.join(now, JoinRequest { token: 9, fresh_member_id: "b2".into(), ..b.clone() });
        assert_eq!(join_reply(&fx, 9).generation, gen + 1, "the same generation");
        let fx = g.sync(now, SyncRequest { instance_id: Some("host-b".into()), ..sync(10, "b2", gen + 1, &[]) });
        assert_eq!(sync_reply(&fx, 10).assignment, Bytes::from_static(b"B2"));
        assert_eq!(g.state(), State::Stable);
    }

    #[test]
    fn an_absent_static_leader_hands_the_lead_to_a_member_that_rejoined() {
        let (mut g, _, b, _) = stable_static_pair();
        // A dynamic member joins; host-b rejoins; host-a, the leader, is away.
        let mut c = join(6, "", "c1");
        c.require_known_member_id = false;
        c.rebalance_timeout_ms = 5_000;
        g.join(10, c);
        g.join(11, JoinRequest { token: 7, member_id: "b1".into(), ..b.clone() });
        let fx = g.tick(10 + 5_000);
        let leader = join_reply(&fx, 7).leader;
        assert!(leader == "b1" || leader == "c1", "a member that rejoined leads, not {leader}");
        let led = join_reply(&fx, if leader == "b1" { 7 } else { 6 });
        assert!(led.members.iter().any(|m| m.member_id == "a1"), "host-a keeps its place");
    }

    #[test]
    fn members_that_do_not_sync_within_the_rebalance_timeout_are_removed_and_the_group_rebalances() {
        let mut g = Group::new("g", 0, LIMITS);
        let mut a = join(1, "", "a");
        a.require_known_member_id = false;
        let fx = g.join(0, a.clone());
        let gen = join_reply(&fx, 1).generation;
        g.sync(0, sync(2, "a", gen, &[("a", b"A")]));
        let mut b = join(3, "", "b");
        b.require_known_member_id = false;
        g.join(1, b);
        let fx = g.join(2, JoinRequest { token: 4, member_id: "a".into(), ..a.clone() });
        let r = join_reply(&fx, 4);
        assert_eq!((r.leader.as_str(), g.state()), ("a", State::CompletingRebalance));
        // The follower syncs and waits; the leader only heartbeats.
        assert!(g.sync(3, sync(5, "b", r.generation, &[])).is_empty(), "waits for the leader's assignment");
        let t = a.rebalance_timeout_ms;
        for now in (5_000..t).step_by(5_000) {
            assert_eq!(g.heartbeat(now, "a", None, r.generation), Ok(()));
            assert!(g.tick(now).is_empty());
        }
        assert!(g.tick(t + 1).is_empty(), "within the rebalance timeout");
        assert_eq!(g.state(), State::CompletingRebalance);
        let fx = g.tick(t + 2);
        assert_eq!(sync_reply(&fx, 5).error, Some(ErrorCode::RebalanceInProgress), "the follower rejoins");
        assert_eq!(g.state(), State::PreparingRebalance);
        assert_eq!(g.heartbeat(t + 3, "a", None, r.generation), Err(ErrorCode::UnknownMemberId), "the leader is gone");
    }

    #[test]
    fn members_are_described_without_metadata_or_assignment_outside_stable() {
        let mut g = stable_with_one();
        let described = g.described_members();
        assert_eq!((described[0].metadata.as_ref(), described[0].assignment.as_ref()), (&b"md"[..], &b"A1"[..]));
        let mut other = join(9, "", "m2");
        other.require_known_member_id = false;
        g.join(3, other);
        assert_eq!(g.state(), State::PreparingRebalance);
        let described = g.described_members();
        assert_eq!(described.len(), 2);
        assert!(described.iter().all(|m| m.metadata.is_empty() && m.assignment.is_empty()), "{described:?}");
    }

    #[test]
    fn incompatible_protocols_and_bad_timeouts_are_refused() {
        let mut g = stable_with_one();
        let mut other = join(9, "", "x");
        other.protocols = vec![("sticky".into(), Bytes::new())];
        other.require_known_member_id = false;
        assert_eq!(join_reply(&g.join(1, other.clone()), 9).error, Some(ErrorCode::InconsistentGroupProtocol));
        other.protocol_type = "connect".into();
        other.protocols = vec![("range".into(), Bytes::new())];
        assert_eq!(join_reply(&g.join(1, other), 9).error, Some(ErrorCode::InconsistentGroupProtocol));
        let mut slow = join(10, "", "y");
        slow.session_timeout_ms = 999_999;
        assert_eq!(join_reply(&g.join(1, slow), 10).error, Some(ErrorCode::InvalidSessionTimeout));
    }

    #[test]
    fn the_first_rebalance_waits_for_more_members() {
        let limits = GroupLimits { initial_rebalance_delay_ms: 3_000, ..LIMITS };
        let mut g = Group::new("g", 0, limits);
        let mut a = join(1, "", "a");
        a.require_known_member_id = false;
        assert!(g.join(0, a.clone()).is_empty(), "waits for the initial delay");
        let mut b = join(2, "", "b");
        b.require_known_member_id = false;
        assert!(g.join(2_000, b).is_empty(), "a new member extends the wait");
        assert!(g.tick(3_500).is_empty());
        let fx = g.tick(5_000);
        assert_eq!(join_reply(&fx, 1).generation, 1);
        assert_eq!(join_reply(&fx, 2).generation, 1, "both land in the first generation");
    }

    #[test]
    fn a_rebalance_during_sync_tells_waiting_members_to_rejoin() {
        let mut g = stable_with_one();
        g.join(10, join(4, "", "m2"));
        g.join(10, join(5, "m2", ""));
        let fx = g.join(11, join(6, "m1", ""));
        let gen = join_reply(&fx, 6).generation;
        assert!(g.sync(12, sync(7, "m2", gen, &[])).is_empty());
        assert_eq!(g.validate_commit(12, "m2", None, gen), Err(ErrorCode::RebalanceInProgress));
        assert_eq!(g.validate_commit(12, "m2", None, gen - 1), Err(ErrorCode::IllegalGeneration), "generation first");
        // a third member arrives before the leader syncs
        let mut c = join(8, "", "m3");
        c.require_known_member_id = false;
        let fx = g.join(13, c);
        assert_eq!(sync_reply(&fx, 7).error, Some(ErrorCode::RebalanceInProgress));
    }

    #[test]
    fn consumer_subscriptions_are_read_from_member_metadata() {
        // version 1, topics ["a", "bc"], then user data we ignore
        let md = [0u8, 1, 0, 0, 0, 2, 0, 1, b'a', 0, 2, b'b', b'c', 0xff, 0xff, 0xff, 0xff];
        assert_eq!(consumer_subscription(&md), Some(vec!["a".to_string(), "bc".to_string()]));
        assert_eq!(consumer_subscription(&[0, 1, 0x7f, 0xff, 0xff, 0xff]), None, "hostile count");
    }
}
