//! Joining and rebalancing: a member joins (or rejoins, or replaces a static member), the
//! group prepares a rebalance, and the join completes once every member has rejoined or the
//! rebalance timeout has passed, electing a leader and choosing the protocol.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::{Effect, Group, JoinRequest, JoinResponse, Member, State, SyncResponse};
use crate::protocol::ErrorCode;

impl Group {
    pub fn join(&mut self, now: u64, req: JoinRequest) -> Vec<Effect> {
        let mut fx = Vec::new();
        let reply = |fx: &mut Vec<Effect>, e: ErrorCode| {
            fx.push(Effect::Join(req.token, JoinResponse::error(e, &req.member_id)))
        };
        if self.state == State::Dead {
            reply(&mut fx, ErrorCode::CoordinatorNotAvailable);
            return fx;
        }
        if req.session_timeout_ms < self.limits.min_session_ms || req.session_timeout_ms > self.limits.max_session_ms {
            reply(&mut fx, ErrorCode::InvalidSessionTimeout);
            return fx;
        }
        if !self.supports(&req.protocol_type, &req.protocols, &req.member_id) {
            reply(&mut fx, ErrorCode::InconsistentGroupProtocol);
            return fx;
        }
        let iid = req.instance_id.clone();
        if req.member_id.is_empty() {
            if let Some(old) = iid.as_ref().and_then(|i| self.statics.get(i)).cloned() {
                self.replace_static(now, &old, req, &mut fx);
            } else if iid.is_none() && req.require_known_member_id {
                if self.members.len() + self.pending.len() >= self.limits.max_size {
                    reply(&mut fx, ErrorCode::GroupMaxSizeReached);
                    return fx;
                }
                self.pending.insert(req.fresh_member_id.clone(), now + req.session_timeout_ms);
                let mut r = JoinResponse::error(ErrorCode::MemberIdRequired, &req.fresh_member_id);
                r.member_id = req.fresh_member_id.clone();
                fx.push(Effect::Join(req.token, r));
                return fx;
            } else {
                if self.members.len() + self.pending.len() >= self.limits.max_size {
                    reply(&mut fx, ErrorCode::GroupMaxSizeReached);
                    return fx;
                }
                let id = req.fresh_member_id.clone();
                self.add_member(now, id, req, &mut fx);
            }
        } else if self.pending.remove(&req.member_id).is_some() {
            let id = req.member_id.clone();
            self.add_member(now, id, req, &mut fx);
        } else if self.fenced(&req.member_id, iid.as_deref()) {
            reply(&mut fx, ErrorCode::FencedInstanceId);
            return fx;
        } else if !self.members.contains_key(&req.member_id) {
            reply(&mut fx, ErrorCode::UnknownMemberId);
            return fx;
        } else {
            self.rejoin(now, req, &mut fx);
        }
        fx.extend(self.maybe_complete_join(now));
        fx
    }

    fn member_from(now: u64, req: &JoinRequest) -> Member {
        Member {
            instance_id: req.instance_id.clone(),
            client_id: req.client_id.clone(),
            client_host: req.client_host.clone(),
            session_timeout_ms: req.session_timeout_ms,
            rebalance_timeout_ms: req.rebalance_timeout_ms,
            protocols: req.protocols.clone(),
            assignment: Bytes::new(),
            heartbeat_deadline: now + req.session_timeout_ms,
            join: Some(req.token),
            sync: None,
        }
    }

    fn add_member(&mut self, now: u64, id: String, req: JoinRequest, fx: &mut Vec<Effect>) {
        if self.members.is_empty() {
            self.protocol_type = Some(req.protocol_type.clone());
        }
        if let Some(iid) = &req.instance_id {
            self.statics.insert(iid.clone(), id.clone());
        }
        let m = Group::member_from(now, &req);
        self.members.insert(id, m);
        if let Some(until) = self.initial_until.as_mut() {
            // Each new member in the first rebalance buys the others more time to arrive.
            *until = (now + self.limits.initial_rebalance_delay_ms).min(self.rebalance_deadline);
        }
        self.prepare_rebalance(now, fx);
    }

    fn rejoin(&mut self, now: u64, req: JoinRequest, fx: &mut Vec<Effect>) {
        let id = req.member_id.clone();
        let is_leader = self.leader.as_deref() == Some(id.as_str());
        let m = self.members.get_mut(&id).expect("checked by caller");
        let same = m.protocols == req.protocols;
        m.heartbeat_deadline = now + req.session_timeout_ms;
        match self.state {
            State::CompletingRebalance | State::Stable if same && !(is_leader && self.state == State::Stable) => {
                fx.push(Effect::Join(req.token, self.current_join(&id)));
            }
            _ => {
                let m = self.members.get_mut(&id).expect("member");
                m.protocols = req.protocols;
                m.session_timeout_ms = req.session_timeout_ms;
                m.rebalance_timeout_ms = req.rebalance_timeout_ms;
                if let Some(old) = m.join.replace(req.token) {
                    fx.push(Effect::Join(old, JoinResponse::error(ErrorCode::RebalanceInProgress, &id)));
                }
                self.prepare_rebalance(now, fx);
            }
        }
    }

    /// A static member came back with a new process (empty member id): it takes over the old
    /// member's place under a new id, and the old one is fenced.
    fn replace_static(&mut self, now: u64, old: &str, req: JoinRequest, fx: &mut Vec<Effect>) {
        let new_id = req.fresh_member_id.clone();
        let mut m = self.members.remove(old).expect("static member is a member");
        if let Some(t) = m.join.take() {
            fx.push(Effect::Join(t, JoinResponse::error(ErrorCode::FencedInstanceId, old)));
        }
        if let Some(t) = m.sync.take() {
            fx.push(Effect::Sync(t, SyncResponse::error(ErrorCode::FencedInstanceId)));
        }
        m.protocols = req.protocols.clone();
        m.client_id = req.client_id.clone();
        m.client_host = req.client_host.clone();
        m.session_timeout_ms = req.session_timeout_ms;
        m.rebalance_timeout_ms = req.rebalance_timeout_ms;
        m.heartbeat_deadline = now + req.session_timeout_ms;
        let was_leader = self.leader.as_deref() == Some(old);
        if was_leader {
            self.leader = Some(new_id.clone());
        }
        if self.pending_sync.remove(old) {
            self.pending_sync.insert(new_id.clone());
        }
        self.statics.insert(req.instance_id.clone().expect("static"), new_id.clone());
        self.members.insert(new_id.clone(), m);
        // Kafka's test: a rebalance is needed only if the protocol the group would now select
        // differs. (Member metadata itself changes on every restart: it lists the partitions
        // the consumer owns, none in a fresh process.)
        let same_protocol = self.select_protocol() == self.protocol;
        let keep = self.state == State::Stable && same_protocol;
        if keep {
            // No rebalance (KIP-345): the member keeps its assignment. A returning leader
            // gets the members but is told not to assign (KIP-814); one whose JoinGroup is
            // older than v9 cannot be told that, so it is named a follower instead (the old
            // leader id, no members), as Kafka answers, and syncs its assignment as one.
            let mut resp = self.current_join(&new_id);
            resp.skip_assignment = was_leader && req.supports_skip_assignment;
            if was_leader && !req.supports_skip_assignment {
                resp.leader = old.to_string();
                resp.members = Vec::new();
            }
            fx.push(Effect::Store);
            fx.push(Effect::Join(req.token, resp));
        } else {
            self.members.get_mut(&new_id).expect("just inserted").join = Some(req.token);
            self.prepare_rebalance(now, fx);
        }
    }

    fn prepare_rebalance(&mut self, now: u64, fx: &mut Vec<Effect>) {
        if self.state == State::PreparingRebalance {
            return;
        }
        for m in self.members.values_mut() {
            if let Some(t) = m.sync.take() {
                fx.push(Effect::Sync(t, SyncResponse::error(ErrorCode::RebalanceInProgress)));
            }
        }
        self.pending_sync.clear();
        let longest = self.members.values().map(|m| m.rebalance_timeout_ms).max().unwrap_or(0);
        self.rebalance_deadline = now + longest;
        self.initial_until = (self.state == State::Empty && self.limits.initial_rebalance_delay_ms > 0)
            .then(|| (now + self.limits.initial_rebalance_delay_ms).min(self.rebalance_deadline));
        self.state = State::PreparingRebalance;
    }

    pub(super) fn maybe_complete_join(&mut self, now: u64) -> Vec<Effect> {
        if self.state != State::PreparingRebalance {
            return Vec::new();
        }
        if self.initial_until.is_some_and(|t| now < t) {
            return Vec::new();
        }
        let all_joined = self.pending.is_empty() && self.members.values().all(|m| m.join.is_some());
        if all_joined || now >= self.rebalance_deadline {
            return self.complete_join(now);
        }
        Vec::new()
    }

    fn complete_join(&mut self, now: u64) -> Vec<Effect> {
        let mut fx = Vec::new();
        // Dynamic members that did not rejoin are gone; a static one stays in the generation
        // (KIP-345: its partitions wait for it) until its session or its sync times out.
        let gone: Vec<String> = self
            .members
            .iter()
            .filter(|(_, m)| m.join.is_none() && m.instance_id.is_none())
            .map(|(id, _)| id.clone())
            .collect();
        for id in gone {
            self.remove_member(&id, &mut fx);
        }
        if !self.members.is_empty() && self.members.values().all(|m| m.join.is_none()) {
            // Only static members, none of them back: as Kafka, the join waits another
            // rebalance timeout (their sessions remove those that stay away).
            self.rebalance_deadline = now + self.members.values().map(|m| m.rebalance_timeout_ms).max().unwrap_or(0);
            return fx;
        }
        self.pending.clear();
        self.initial_until = None;
        self.generation += 1;
        if self.members.is_empty() {
            self.state = State::Empty;
            self.protocol = None;
            self.leader = None;
            self.empty_since = now;
            self.stored_empty_since_ms = None;
            fx.push(Effect::Store);
            return fx;
        }
        self.state = State::CompletingRebalance;
        self.protocol = self.select_protocol();
        // The leader must be a member that rejoined: an absent static leader would leave the
        // generation without an assignment (Kafka's maybeElectNewJoinedLeader).
        if self.leader.as_ref().and_then(|l| self.members.get(l)).is_none_or(|m| m.join.is_none()) {
            self.leader = self.members.iter().find(|(_, m)| m.join.is_some()).map(|(id, _)| id.clone());
        }
        let ids: Vec<String> = self.members.keys().cloned().collect();
        self.pending_sync = ids.iter().cloned().collect();
        self.sync_deadline = now + self.members.values().map(|m| m.rebalance_timeout_ms).max().unwrap_or(0);
        for id in ids {
            let resp = self.current_join(&id);
            let m = self.members.get_mut(&id).expect("member");
            m.heartbeat_deadline = now + m.session_timeout_ms;
            m.assignment = Bytes::new();
            if let Some(t) = m.join.take() {
                fx.push(Effect::Join(t, resp));
            }
        }
        fx
    }

    /// The protocol every member supports that most members prefer (Kafka's vote).
    fn select_protocol(&self) -> Option<String> {
        let first = self.members.values().next()?;
        let candidates: Vec<&String> = first
            .protocols
            .iter()
            .map(|(n, _)| n)
            .filter(|n| self.members.values().all(|m| m.protocols.iter().any(|(p, _)| p == *n)))
            .collect();
        let mut votes: BTreeMap<&String, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some((n, _)) = m.protocols.iter().find(|(n, _)| candidates.contains(&n)) {
                *votes.entry(n).or_default() += 1;
            }
        }
        // Most votes; ties go to the first member's preference order.
        candidates
            .iter()
            .max_by_key(|c| {
                (votes.get(**c).copied().unwrap_or(0), std::cmp::Reverse(candidates.iter().position(|x| x == *c)))
            })
            .map(|c| (*c).clone())
    }

    pub(super) fn remove_member(&mut self, id: &str, fx: &mut Vec<Effect>) {
        self.pending_sync.remove(id);
        if let Some(m) = self.members.remove(id) {
            if let Some(t) = m.join {
                fx.push(Effect::Join(t, JoinResponse::error(ErrorCode::UnknownMemberId, id)));
            }
            if let Some(t) = m.sync {
                fx.push(Effect::Sync(t, SyncResponse::error(ErrorCode::UnknownMemberId)));
            }
            if let Some(iid) = m.instance_id {
                if self.statics.get(&iid).is_some_and(|x| x == id) {
                    self.statics.remove(&iid);
                }
            }
        }
    }

    pub(super) fn on_members_removed(&mut self, now: u64, fx: &mut Vec<Effect>) {
        match self.state {
            State::Stable | State::CompletingRebalance => self.prepare_rebalance(now, fx),
            _ => {}
        }
        fx.extend(self.maybe_complete_join(now));
    }
}
