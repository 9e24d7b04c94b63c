//! The group coordinator of one shard: the groups homed here, their committed offsets, and
//! the requests waiting on a rebalance. It feeds requests and the clock into the pure
//! `state::Group` and delivers the effects; commits and deletions are appended to the
//! shard's `__consumer_offsets` partition and applied once the flush policy has made them
//! durable, and so is each group's membership whenever a rebalance completes or the group
//! empties (`state::Effect::Store`). At start, or on coming to lead the partition in a
//! cluster, the shard replays it: the committed offsets, and each group as last stored
//! (`Stable` with its members, who carry on heartbeating with their generation, as after a
//! Kafka coordinator move).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Instant;

use bytes::Bytes;
use futures_channel::oneshot;

use super::offsets::{self, OffsetStore, Record};
use super::state::{Effect, Group, GroupLimits, State, Token};
use super::{Committed, GroupDescription, GroupListing, GroupOp, OffsetsLog};
use crate::protocol::ErrorCode;

enum Waiter {
    Join(oneshot::Sender<super::JoinResponse>),
    Sync(oneshot::Sender<super::SyncResponse>),
}

pub struct Coordinator {
    groups: RefCell<HashMap<String, Group>>,
    offsets: RefCell<OffsetStore>,
    waiting: RefCell<HashMap<Token, Waiter>>,
    next_token: Cell<Token>,
    started: Instant,
    limits: GroupLimits,
    retention_ms: i64,
    /// Commits being appended, per group: offset expiry passes such a group by, since the
    /// store does not show the commit until its append completes.
    committing: RefCell<HashMap<String, u32>>,
}

fn wall_ms() -> i64 {
    crate::sys::unix_now_ms()
}

impl Coordinator {
    pub fn new(limits: GroupLimits, retention_ms: i64) -> Coordinator {
        Coordinator {
            groups: RefCell::new(HashMap::new()),
            offsets: RefCell::new(OffsetStore::default()),
            waiting: RefCell::new(HashMap::new()),
            next_token: Cell::new(1),
            started: Instant::now(),
            limits,
            retention_ms,
            committing: RefCell::new(HashMap::new()),
        }
    }

    fn now(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    fn token(&self) -> Token {
        let t = self.next_token.get();
        self.next_token.set(t + 1);
        t
    }

    /// Sends replies; a `Store` among them is the caller's (`settle`, `tick`).
    fn deliver(&self, fx: Vec<Effect>) {
        let mut waiting = self.waiting.borrow_mut();
        for e in fx {
            match e {
                Effect::Join(t, r) => {
                    if let Some(Waiter::Join(tx)) = waiting.remove(&t) {
                        let _ = tx.send(r);
                    }
                }
                Effect::Sync(t, r) => {
                    if let Some(Waiter::Sync(tx)) = waiting.remove(&t) {
                        let _ = tx.send(r);
                    }
                }
                Effect::Store => {}
            }
        }
    }

    /// Delivers the effects of an operation on `group`: those after a `Store` once the group
    /// is stored, or, if that fails, as that error (the members find the coordinator again
    /// and rejoin), so that no member acts on a generation a new coordinator would not know.
    async fn settle(&self, group: &str, mut fx: Vec<Effect>, log: Option<Rc<dyn OffsetsLog>>) {
        let Some(at) = fx.iter().position(|e| matches!(e, Effect::Store)) else { return self.deliver(fx) };
        let after = fx.split_off(at);
        self.deliver(fx);
        let after = match self.store(group, log).await {
            Ok(()) => after,
            Err(e) => after
                .into_iter()
                .map(|fx| match fx {
                    Effect::Join(t, r) => Effect::Join(t, super::JoinResponse::error(e, &r.member_id)),
                    Effect::Sync(t, _) => Effect::Sync(t, super::SyncResponse::error(e)),
                    Effect::Store => Effect::Store,
                })
                .collect(),
        };
        self.deliver(after);
    }

    /// Appends `group` as it is now (Kafka's GroupMetadataValue) to its offsets log.
    pub async fn store(&self, group: &str, log: Option<Rc<dyn OffsetsLog>>) -> Result<(), ErrorCode> {
        let record = match self.groups.borrow().get(group) {
            Some(g) if g.state() != State::Dead => {
                Record::Group { group: group.to_string(), value: g.to_metadata(wall_ms()) }
            }
            _ => return Ok(()),
        };
        self.append(&[record], log).await
    }

    /// Rebuilds committed offsets from this shard's `__consumer_offsets` records.
    pub fn replay(&self, records: impl IntoIterator<Item = Record>) {
        let mut store = self.offsets.borrow_mut();
        let mut n = 0usize;
        for r in records {
            store.apply(r);
            n += 1;
        }
        let now = self.now();
        let mut groups = self.groups.borrow_mut();
        for (id, stored) in store.take_stored() {
            groups.entry(id.clone()).or_insert_with(|| Group::restore(&id, &stored, now, self.limits));
        }
        for g in store.groups() {
            groups.entry(g.clone()).or_insert_with(|| {
                // Offsets without a stored membership: when the group emptied is unknown.
                let mut group = Group::new(g, now, self.limits);
                group.stored_empty_since_ms = Some(-1);
                group
            });
        }
        if n > 0 {
            tracing::info!(records = n, groups = groups.len(), "replayed committed offsets");
        }
    }

    /// Drops the groups `which` picks, their offsets and the requests waiting on them (which
    /// then fail, and their clients look for the coordinator again): in a cluster, this
    /// broker no longer leads their `__consumer_offsets` partition.
    pub fn forget(&self, which: impl Fn(&str) -> bool) {
        let gone: Vec<Group> = self.groups.borrow_mut().extract_if(|id, _| which(id)).map(|(_, g)| g).collect();
        let mut waiting = self.waiting.borrow_mut();
        for g in &gone {
            for t in g.waiting_tokens() {
                waiting.remove(&t);
            }
        }
        drop(waiting);
        self.offsets.borrow_mut().forget(&which);
        if !gone.is_empty() {
            tracing::info!(groups = gone.len(), "no longer coordinating groups (their offsets partition moved)");
        }
    }

    /// Runs one group operation. `log` is this shard's `__consumer_offsets` partition for
    /// the group.
    pub async fn handle(&self, group: String, op: GroupOp, log: Option<Rc<dyn OffsetsLog>>) {
        let now = self.now();
        match op {
            GroupOp::Join { mut req, reply } => {
                let token = self.token();
                req.token = token;
                self.waiting.borrow_mut().insert(token, Waiter::Join(reply));
                let known = self.groups.borrow().contains_key(&group);
                let fx = if !known && !req.member_id.is_empty() {
                    vec![Effect::Join(
                        token,
                        super::JoinResponse {
                            error: Some(ErrorCode::UnknownMemberId),
                            generation: -1,
                            member_id: req.member_id.clone(),
                            ..Default::default()
                        },
                    )]
                } else {
                    let mut groups = self.groups.borrow_mut();
                    let g = groups.entry(group.clone()).or_insert_with(|| Group::new(&group, now, self.limits));
                    g.join(now, req)
                };
                self.settle(&group, fx, log).await;
            }
            GroupOp::Sync { mut req, reply } => {
                let token = self.token();
                req.token = token;
                self.waiting.borrow_mut().insert(token, Waiter::Sync(reply));
                let fx = match self.groups.borrow_mut().get_mut(&group) {
                    Some(g) => g.sync(now, req),
                    None => vec![Effect::Sync(
                        token,
                        super::SyncResponse { error: Some(ErrorCode::UnknownMemberId), ..Default::default() },
                    )],
                };
                self.settle(&group, fx, log).await;
            }
            GroupOp::Heartbeat { member_id, instance_id, generation, reply } => {
                let r = match self.groups.borrow_mut().get_mut(&group) {
                    Some(g) => g.heartbeat(now, &member_id, instance_id.as_deref(), generation),
                    None => Err(ErrorCode::UnknownMemberId),
                };
                let _ = reply.send(r);
            }
            GroupOp::Leave { members, reply } => {
                let out = match self.groups.borrow_mut().get_mut(&group) {
                    Some(g) => Ok(g.leave(now, &members)),
                    None => Err(ErrorCode::UnknownMemberId),
                };
                let r = match out {
                    Ok((results, fx)) => {
                        self.settle(&group, fx, log).await;
                        Ok(results)
                    }
                    Err(e) => Err(e),
                };
                let _ = reply.send(r);
            }
            GroupOp::Commit { member_id, instance_id, generation, entries, reply } => {
                let _ = reply
                    .send(self.commit(now, &group, &member_id, instance_id.as_deref(), generation, entries, log).await);
            }
            GroupOp::FetchOffsets { topics, reply } => {
                let store = self.offsets.borrow();
                let out = match topics {
                    Some(topics) => topics
                        .into_iter()
                        .flat_map(|(t, parts)| parts.into_iter().map(move |p| (t.clone(), p)))
                        .map(|(t, p)| {
                            let c = store.get(&group, &t, p).cloned();
                            (t, p, c)
                        })
                        .collect(),
                    None => store
                        .group(&group)
                        .map(|m| m.iter().map(|((t, p), c)| (t.clone(), *p, Some(c.clone()))).collect())
                        .unwrap_or_default(),
                };
                let _ = reply.send(out);
            }
            GroupOp::Describe { reply } => {
                let d = match self.groups.borrow().get(&group) {
                    Some(g) => GroupDescription {
                        found: true,
                        state: g.state().name().to_string(),
                        protocol_type: g.protocol_type().unwrap_or_default().to_string(),
                        protocol: if g.state() == State::Stable {
                            g.protocol().unwrap_or_default().to_string()
                        } else {
                            String::new()
                        },
                        members: g.described_members(),
                    },
                    None => {
                        GroupDescription { found: false, state: State::Dead.name().to_string(), ..Default::default() }
                    }
                };
                let _ = reply.send(d);
            }
            GroupOp::Delete { reply } => {
                let _ = reply.send(self.delete_group(&group, log).await);
            }
            GroupOp::DeleteOffsets { partitions, reply } => {
                let _ = reply.send(self.delete_offsets(&group, partitions, log).await);
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn commit(
        &self,
        now: u64,
        group: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        entries: Vec<super::CommitEntry>,
        log: Option<Rc<dyn OffsetsLog>>,
    ) -> Result<(), ErrorCode> {
        {
            let mut groups = self.groups.borrow_mut();
            match groups.get_mut(group) {
                Some(g) => g.validate_commit(now, member_id, instance_id, generation)?,
                // A commit outside any group membership (standalone consumers, admin tools)
                // creates the group, empty.
                None if generation < 0 => {
                    groups.insert(group.to_string(), Group::new(group, now, self.limits));
                }
                // A member's commit to a group this coordinator does not have (its offsets
                // expired, or it was deleted): OffsetCommit answers this by version.
                None => return Err(ErrorCode::GroupIdNotFound),
            }
        }
        let ts = wall_ms();
        let records: Vec<Record> = entries
            .into_iter()
            .map(|e| Record::Commit {
                group: group.to_string(),
                topic: e.topic,
                partition: e.partition,
                value: Committed {
                    offset: e.offset,
                    leader_epoch: e.leader_epoch,
                    metadata: e.metadata,
                    commit_ts: ts,
                },
            })
            .collect();
        *self.committing.borrow_mut().entry(group.to_string()).or_default() += 1;
        let appended = self.append(&records, log).await;
        let mut committing = self.committing.borrow_mut();
        if let Some(n) = committing.get_mut(group) {
            *n -= 1;
            if *n == 0 {
                committing.remove(group);
            }
        }
        drop(committing);
        appended?;
        let mut store = self.offsets.borrow_mut();
        for r in records {
            store.apply(r);
        }
        Ok(())
    }

    async fn append(&self, records: &[Record], log: Option<Rc<dyn OffsetsLog>>) -> Result<(), ErrorCode> {
        if records.is_empty() {
            return Ok(());
        }
        let log = log.ok_or(ErrorCode::CoordinatorNotAvailable)?;
        let batch = Bytes::from(offsets::to_batch(records, wall_ms()));
        log.append(batch).await
    }

    async fn delete_group(&self, group: &str, log: Option<Rc<dyn OffsetsLog>>) -> Result<(), ErrorCode> {
        let exists = self.groups.borrow().contains_key(group) || self.offsets.borrow().group(group).is_some();
        if !exists {
            return Err(ErrorCode::GroupIdNotFound);
        }
        if self.groups.borrow().get(group).is_some_and(|g| !g.is_empty()) {
            return Err(ErrorCode::NonEmptyGroup);
        }
        // A tombstone of each offset, then of the group: compaction then drops them all.
        let mut records: Vec<Record> = match self.offsets.borrow().group(group) {
            Some(offsets) => offsets
                .keys()
                .map(|(topic, partition)| Record::DeleteOffset {
                    group: group.to_string(),
                    topic: topic.clone(),
                    partition: *partition,
                })
                .collect(),
            None => Vec::new(),
        };
        records.push(Record::DeleteGroup { group: group.to_string() });
        // Dead while its tombstones are appended, as in Kafka: a join or commit arriving
        // meanwhile is told to retry (COORDINATOR_NOT_AVAILABLE) instead of joining a group
        // about to be removed, where nothing would ever answer it.
        let existed = self.groups.borrow().contains_key(group);
        self.groups
            .borrow_mut()
            .entry(group.to_string())
            .or_insert_with(|| Group::new(group, self.now(), self.limits))
            .mark_dead();
        if let Err(e) = self.append(&records, log).await {
            let mut groups = self.groups.borrow_mut();
            match groups.get_mut(group) {
                Some(g) if existed => g.revive(),
                Some(_) => drop(groups.remove(group)),
                None => {}
            }
            return Err(e);
        }
        let mut store = self.offsets.borrow_mut();
        for r in records {
            store.apply(r);
        }
        drop(store);
        self.groups.borrow_mut().remove(group);
        Ok(())
    }

    async fn delete_offsets(
        &self,
        group: &str,
        partitions: Vec<(String, i32)>,
        log: Option<Rc<dyn OffsetsLog>>,
    ) -> Result<super::PerEntry, ErrorCode> {
        let subscribed = {
            let groups = self.groups.borrow();
            let Some(g) = groups.get(group) else {
                return Err(ErrorCode::GroupIdNotFound);
            };
            if !g.is_empty() && g.protocol_type() != Some("consumer") {
                return Err(ErrorCode::NonEmptyGroup);
            }
            // A group with members whose subscriptions are not known yet (mid-rebalance,
            // the protocol not chosen) counts as subscribed to every topic, as in Kafka:
            // deleting an offset its members are about to fetch would reset them.
            match g.subscribed_topics() {
                Some(topics) => Some(topics),
                None if g.is_empty() => Some(Default::default()),
                None => None,
            }
        };
        let mut results = Vec::with_capacity(partitions.len());
        let mut records = Vec::new();
        for (t, p) in partitions {
            if subscribed.as_ref().is_none_or(|s| s.contains(&t)) {
                results.push(Err(ErrorCode::GroupSubscribedToTopic));
            } else {
                records.push(Record::DeleteOffset { group: group.to_string(), topic: t, partition: p });
                results.push(Ok(()));
            }
        }
        self.append(&records, log).await?;
        let mut store = self.offsets.borrow_mut();
        for r in records {
            store.apply(r);
        }
        Ok(results)
    }

    /// Session and rebalance timers; call often (every ~100 ms). Returns the groups to
    /// store (`store`): a group a timer emptied. (A timer never completes a SyncGroup, so no
    /// reply here waits for a store.)
    pub fn tick(&self) -> Vec<String> {
        let now = self.now();
        let mut fx = Vec::new();
        let mut to_store = Vec::new();
        for (id, g) in self.groups.borrow_mut().iter_mut() {
            let ticked = g.tick(now);
            if ticked.iter().any(|e| matches!(e, Effect::Store)) {
                to_store.push(id.clone());
            }
            fx.extend(ticked);
        }
        self.deliver(fx);
        to_store
    }

    /// Offset retention (Kafka's offsets.retention.minutes): for empty groups, counted from
    /// their emptying; for stable consumer groups, the offsets of topics no member
    /// subscribes to any longer, counted from their commit (KIP-496). Empty groups left with
    /// no offsets are removed. Returns the tombstones to append.
    pub fn expire_offsets(&self) -> Vec<(String, Vec<Record>)> {
        let now = self.now();
        let wall = wall_ms();
        let store = self.offsets.borrow();
        let mut out = Vec::new();
        let mut groups = self.groups.borrow_mut();
        groups.retain(|id, g| {
            if g.state() != State::Empty {
                if let Some(subscribed) = unsubscribed_expiry(g) {
                    let expired = store.expired(id, wall, i64::MIN, self.retention_ms);
                    let recs: Vec<Record> = expired
                        .into_iter()
                        .filter(|(topic, _)| !subscribed.contains(topic))
                        .map(|(topic, partition)| Record::DeleteOffset { group: id.clone(), topic, partition })
                        .collect();
                    if !recs.is_empty() {
                        out.push((id.clone(), recs));
                    }
                }
                return true;
            }
            let empty_since_wall =
                g.stored_empty_since_ms.unwrap_or_else(|| wall - (now.saturating_sub(g.empty_since)) as i64);
            let expired = store.expired(id, wall, empty_since_wall, self.retention_ms);
            let remaining = store.group(id).map_or(0, |m| m.len()) - expired.len();
            let mut recs: Vec<Record> = expired
                .into_iter()
                .map(|(topic, partition)| Record::DeleteOffset { group: id.clone(), topic, partition })
                .collect();
            if remaining == 0 {
                // The group goes: a tombstone of its stored membership, so that compaction
                // drops that too and a restart does not bring the group back.
                recs.push(Record::DeleteGroup { group: id.clone() });
            }
            out.push((id.clone(), recs));
            remaining > 0
        });
        out
    }

    pub async fn apply_expiry(&self, group: &str, mut records: Vec<Record>, log: Option<Rc<dyn OffsetsLog>>) {
        // Checked again right before the append (nothing awaited in between): the passes
        // of earlier groups were awaited since `expire_offsets`, and a commit answered in
        // that time, or still being appended, must not be followed by a tombstone.
        if self.committing.borrow().contains_key(group) {
            return;
        }
        match self.groups.borrow().get(group) {
            // Still empty, or gone.
            None => {}
            Some(g) if g.state() == State::Empty => {
                // A member or a commit brought the group back since `expire_offsets`.
                records.retain(|r| !matches!(r, Record::DeleteGroup { .. }));
            }
            // Members: only offsets of topics none of them subscribes to now.
            Some(g) => {
                let Some(subscribed) = unsubscribed_expiry(g) else { return };
                records.retain(|r| match r {
                    Record::DeleteOffset { topic, .. } => !subscribed.contains(topic),
                    _ => false,
                });
            }
        }
        // An offset expired only if its commit is older than the retention; a later commit
        // of the same partition is not.
        let before = wall_ms() - self.retention_ms;
        {
            let store = self.offsets.borrow();
            records.retain(|r| match r {
                Record::DeleteOffset { group, topic, partition } => {
                    store.get(group, topic, *partition).is_some_and(|c| c.commit_ts < before)
                }
                _ => true,
            });
        }
        if records.is_empty() {
            return;
        }
        let expired = records.iter().filter(|r| matches!(r, Record::DeleteOffset { .. })).count();
        if self.append(&records, log).await.is_ok() {
            let mut store = self.offsets.borrow_mut();
            for r in records {
                store.apply(r);
            }
            if expired > 0 {
                tracing::info!(group, offsets = expired, "expired committed offsets past offsets.retention.minutes");
            }
        }
    }

    pub fn list(&self, states: &[String]) -> Vec<GroupListing> {
        self.groups
            .borrow()
            .iter()
            .filter(|(_, g)| states.is_empty() || states.iter().any(|s| s.eq_ignore_ascii_case(g.state().name())))
            .map(|(id, g)| GroupListing {
                group_id: id.clone(),
                protocol_type: g.protocol_type().unwrap_or_default().to_string(),
                state: g.state().name().to_string(),
            })
            .collect()
    }
}

/// The topics a group with members still subscribes to, when offsets of the others may
/// expire: a stable group of the "consumer" protocol whose members' subscriptions are all
/// known, as Kafka (KIP-496); any other group with members keeps every offset.
fn unsubscribed_expiry(g: &Group) -> Option<Vec<String>> {
    if g.state() != State::Stable {
        return None;
    }
    g.subscribed_topics()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::metadata::GroupMetadata;
    use crate::group::{CommitEntry, JoinRequest};

    const DAY_MS: i64 = 86_400_000;

    fn commit(group: &str, commit_ts: i64) -> Record {
        let value = Committed { offset: 7, leader_epoch: -1, metadata: None, commit_ts };
        Record::Commit { group: group.into(), topic: "t".into(), partition: 0, value }
    }

    fn emptied(group: &str, state_ts: i64) -> Record {
        let value = GroupMetadata {
            protocol_type: "consumer".into(),
            generation: 4,
            protocol: None,
            leader: None,
            state_ts,
            members: vec![],
        };
        Record::Group { group: group.into(), value }
    }

    fn expiring(c: &Coordinator) -> Vec<String> {
        let mut ids: Vec<String> =
            c.expire_offsets().into_iter().filter(|(_, r)| !r.is_empty()).map(|(g, _)| g).collect();
        ids.sort();
        ids
    }

    /// An offsets log whose appends complete only when `release`d, in order; it keeps every
    /// batch appended.
    #[derive(Default)]
    struct HeldLog {
        batches: RefCell<Vec<Bytes>>,
        gates: RefCell<std::collections::VecDeque<oneshot::Sender<()>>>,
    }

    impl OffsetsLog for HeldLog {
        fn append(&self, batch: Bytes) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), ErrorCode>>>> {
            self.batches.borrow_mut().push(batch);
            let (tx, rx) = oneshot::channel();
            self.gates.borrow_mut().push_back(tx);
            Box::pin(async move { rx.await.map_err(|_| ErrorCode::CoordinatorNotAvailable) })
        }
    }

    impl HeldLog {
        fn release(&self) {
            let _ = self.gates.borrow_mut().pop_front().expect("an append waits").send(());
        }

        fn records(&self) -> Vec<Record> {
            self.batches.borrow().iter().flat_map(|b| offsets::from_batch(b)).collect()
        }
    }

    fn standalone_commit(offset: i64, reply: oneshot::Sender<Result<(), ErrorCode>>) -> GroupOp {
        let entry = CommitEntry { topic: "t".into(), partition: 0, offset, leader_epoch: -1, metadata: None };
        GroupOp::Commit { member_id: String::new(), instance_id: None, generation: -1, entries: vec![entry], reply }
    }

    fn committed(c: &Coordinator, group: &str) -> Option<i64> {
        c.offsets.borrow().get(group, "t", 0).map(|v| v.offset)
    }

    #[test]
    fn a_stable_groups_offsets_expire_only_for_topics_no_member_subscribes_to() {
        use futures_lite::future::block_on;
        let c = Coordinator::new(GroupLimits::default(), 7 * DAY_MS);
        let wall = wall_ms();
        let at = |topic: &str, commit_ts| {
            let value = Committed { offset: 7, leader_epoch: -1, metadata: None, commit_ts };
            Record::Commit { group: "g".into(), topic: topic.into(), partition: 0, value }
        };
        // One member subscribed to "a" (ConsumerProtocolSubscription v1: topics ["a"]).
        let member = crate::group::metadata::StoredMember {
            member_id: "m-1".into(),
            instance_id: None,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            rebalance_timeout_ms: 60_000,
            session_timeout_ms: 45_000,
            subscription: Bytes::from_static(&[0, 1, 0, 0, 0, 1, 0, 1, b'a', 0xff, 0xff, 0xff, 0xff]),
            assignment: Bytes::new(),
        };
        let stable = GroupMetadata {
            protocol_type: "consumer".into(),
            generation: 4,
            protocol: Some("range".into()),
            leader: Some("m-1".into()),
            state_ts: wall,
            members: vec![member],
        };
        let old = wall - 30 * DAY_MS;
        c.replay([at("a", old), at("t", old), at("u", wall), Record::Group { group: "g".into(), value: stable }]);
        assert_eq!(c.groups.borrow()["g"].state(), State::Stable);
        let expiry = c.expire_offsets();
        let expected = vec![Record::DeleteOffset { group: "g".into(), topic: "t".into(), partition: 0 }];
        assert_eq!(expiry, vec![("g".to_string(), expected)], "neither the subscribed nor a recent commit");
        let log = Rc::new(HeldLog::default());
        for (group, records) in expiry {
            let apply = c.apply_expiry(&group, records, Some(log.clone() as Rc<dyn OffsetsLog>));
            let mut apply = Box::pin(apply);
            assert!(futures_lite::future::block_on(futures_lite::future::poll_once(&mut apply)).is_none());
            log.release();
            block_on(apply);
        }
        let kept = |topic: &str| c.offsets.borrow().get("g", topic, 0).is_some();
        assert_eq!((kept("a"), kept("t"), kept("u")), (true, false, true));
        assert_eq!(c.groups.borrow()["g"].state(), State::Stable, "the group stays");
    }

    #[test]
    fn an_expiry_never_tombstones_a_commit_made_after_it_was_computed() {
        use futures_lite::future::{block_on, poll_once};
        let c = Coordinator::new(GroupLimits::default(), 7 * DAY_MS);
        let wall = wall_ms();
        c.replay([commit("in-flight", wall - 30 * DAY_MS), commit("answered", wall - 30 * DAY_MS)]);
        let held = Rc::new(HeldLog::default());
        let log = || Some(held.clone() as Rc<dyn OffsetsLog>);

        // A commit of "in-flight" is being appended when the expiry pass reads the store;
        // one of "answered" is appended and answered between the pass and its append.
        let (tx, mut in_flight) = oneshot::channel();
        let mut first = Box::pin(c.handle("in-flight".into(), standalone_commit(9, tx), log()));
        assert!(block_on(poll_once(&mut first)).is_none(), "the commit waits for its append");
        let expiry = c.expire_offsets();
        assert_eq!(expiry.iter().filter(|(_, r)| !r.is_empty()).count(), 2, "both stored offsets are past retention");
        let (tx, answered) = oneshot::channel();
        let mut second = Box::pin(c.handle("answered".into(), standalone_commit(11, tx), log()));
        assert!(block_on(poll_once(&mut second)).is_none());
        held.release(); // "in-flight"'s append
        held.release(); // "answered"'s append
        block_on(second);
        assert_eq!(block_on(answered).unwrap(), Ok(()));

        for (group, records) in expiry {
            let mut apply = Box::pin(c.apply_expiry(&group, records, log()));
            if block_on(poll_once(&mut apply)).is_none() {
                held.release();
                block_on(apply);
            }
        }
        block_on(first);
        assert_eq!(in_flight.try_recv().unwrap(), Some(Ok(())));

        let tombstones: Vec<Record> = held
            .records()
            .into_iter()
            .filter(|r| matches!(r, Record::DeleteOffset { .. } | Record::DeleteGroup { .. }))
            .collect();
        assert_eq!(tombstones, [], "no tombstone follows an answered commit");
        assert_eq!((committed(&c, "in-flight"), committed(&c, "answered")), (Some(9), Some(11)));
        // A replay of the log gives the same offsets.
        let replayed = Coordinator::new(GroupLimits::default(), 7 * DAY_MS);
        replayed.replay(held.records());
        assert_eq!((committed(&replayed, "in-flight"), committed(&replayed, "answered")), (Some(9), Some(11)));
    }

    #[test]
    fn a_join_while_a_group_is_being_deleted_is_told_to_retry_and_not_left_waiting() {
        use futures_lite::future::{block_on, poll_once};
        let c = Coordinator::new(GroupLimits::default(), 7 * DAY_MS);
        c.replay([commit("g", wall_ms())]);
        let held = Rc::new(HeldLog::default());
        let log = || Some(held.clone() as Rc<dyn OffsetsLog>);

        let (tx, deleted) = oneshot::channel();
        let mut delete = Box::pin(c.handle("g".into(), GroupOp::Delete { reply: tx }, log()));
        assert!(block_on(poll_once(&mut delete)).is_none(), "the deletion waits for its tombstones' append");
        let (tx, mut joined) = oneshot::channel();
        let req = JoinRequest {
            token: 0,
            member_id: String::new(),
            instance_id: None,
            client_id: "c".into(),
            client_host: "h".into(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 10_000,
            protocol_type: "consumer".into(),
            protocols: vec![("range".into(), Bytes::new())],
            require_known_member_id: false,
            fresh_member_id: "m-1".into(),
            supports_skip_assignment: false,
        };
        block_on(c.handle("g".into(), GroupOp::Join { req, reply: tx }, log()));
        let answer = joined.try_recv().unwrap().expect("the join is answered at once");
        assert_eq!(answer.error, Some(ErrorCode::CoordinatorNotAvailable));

        held.release();
        block_on(delete);
        assert_eq!(block_on(deleted).unwrap(), Ok(()));
        assert!(!c.groups.borrow().contains_key("g"));
        assert!(c.waiting.borrow().is_empty(), "nothing waits on the deleted group");
    }

    #[test]
    fn a_failed_deletion_leaves_the_group_usable() {
        use futures_lite::future::{block_on, poll_once};
        let c = Coordinator::new(GroupLimits::default(), 7 * DAY_MS);
        c.replay([commit("g", wall_ms())]);
        let held = Rc::new(HeldLog::default());
        let log = || Some(held.clone() as Rc<dyn OffsetsLog>);
        let (tx, deleted) = oneshot::channel();
        let mut delete = Box::pin(c.handle("g".into(), GroupOp::Delete { reply: tx }, log()));
        assert!(block_on(poll_once(&mut delete)).is_none());
        drop(held.gates.borrow_mut().pop_front()); // the append fails
        block_on(delete);
        assert_eq!(block_on(deleted).unwrap(), Err(ErrorCode::CoordinatorNotAvailable));
        let (tx, done) = oneshot::channel();
        let mut again = Box::pin(c.handle("g".into(), standalone_commit(12, tx), log()));
        assert!(block_on(poll_once(&mut again)).is_none());
        held.release();
        block_on(again);
        assert_eq!(block_on(done).unwrap(), Ok(()));
        assert_eq!(committed(&c, "g"), Some(12));
    }

    #[test]
    fn retention_of_a_taken_over_empty_group_counts_from_its_stored_emptying_not_from_the_takeover() {
        let c = Coordinator::new(GroupLimits::default(), 7 * DAY_MS);
        let wall = wall_ms();
        c.replay([
            // Committed long ago, emptied 8 days ago: past retention although just taken over.
            commit("old", wall - 30 * DAY_MS),
            emptied("old", wall - 8 * DAY_MS),
            // Committed long ago, emptied 6 days ago: one more day to go.
            commit("recent", wall - 30 * DAY_MS),
            emptied("recent", wall - 6 * DAY_MS),
            // No stored membership (a log of offsets only): each commit's time counts.
            commit("bare", wall - 8 * DAY_MS),
            commit("fresh", wall - DAY_MS),
        ]);
        assert_eq!(expiring(&c), ["bare", "old"]);
    }
}
