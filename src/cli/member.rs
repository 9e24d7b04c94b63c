//! Membership of a classic consumer group, as `consume -g` uses it: JoinGroup (the leader
//! computes the "range" assignment), SyncGroup, Heartbeat every `HEARTBEAT_INTERVAL`,
//! OffsetFetch/OffsetCommit of positions, LeaveGroup. Blocking and single-threaded: the
//! consume loop calls `tick` between fetches, which last at most `fetcher::MAX_WAIT_MS`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::common::{check, group_id, kafka_error, sb, topic_name};
use super::consumer_protocol::{self as cp, Assignment};
use super::partitions;
use crate::client::{describe_error, Cluster};
use crate::protocol::messages::join_group_request::JoinGroupRequestProtocol;
use crate::protocol::messages::leave_group_request::MemberIdentity;
use crate::protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use crate::protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use crate::protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use crate::protocol::messages::{
    ApiKey, HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    LeaveGroupResponse, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse,
    SyncGroupRequest, SyncGroupResponse,
};
use crate::protocol::ErrorCode;

/// The coordinator drops a member it has not heard from for this long.
const SESSION_TIMEOUT_MS: i32 = 30_000;
/// How long the coordinator waits for members to rejoin during a rebalance.
const REBALANCE_TIMEOUT_MS: i32 = 30_000;
/// A third of the session timeout, as Kafka's consumer defaults have it.
const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(3);

/// Versions this client builds. JoinGroup v1 adds the rebalance timeout (Kafka 4 serves
/// v2+); OffsetFetch v8 batches groups; OffsetCommit v10 names topics by id.
const JOIN_GROUP_VERSIONS: (i16, i16) = (1, 9);
const SYNC_GROUP_VERSIONS: (i16, i16) = (0, 5);
const HEARTBEAT_VERSIONS: (i16, i16) = (0, 4);
const LEAVE_GROUP_VERSIONS: (i16, i16) = (0, 5);
pub const OFFSET_COMMIT_VERSIONS: (i16, i16) = (2, 9);
pub const OFFSET_FETCH_VERSIONS: (i16, i16) = (1, 7);

/// What a heartbeat found.
#[derive(Debug, PartialEq, Eq)]
pub enum Tick {
    Steady,
    /// The group is rebalancing (or forgot this member): commit, then `rejoin`.
    Rebalance,
}

pub struct Member {
    pub group: String,
    coordinator: i32,
    member_id: String,
    generation: i32,
    topics: Vec<String>,
    pub assignment: Assignment,
    last_heartbeat: Instant,
}

impl Member {
    /// Joins `group` subscribed to `topics` and waits for this member's assignment.
    pub fn join(cluster: &mut Cluster, group: &str, topics: &[String]) -> Result<Member> {
        let coordinator = cluster.coordinator(group)?;
        let mut m = Member {
            group: group.to_string(),
            coordinator,
            member_id: String::new(),
            generation: -1,
            topics: topics.to_vec(),
            assignment: Assignment::new(),
            last_heartbeat: Instant::now(),
        };
        m.rejoin(cluster)?;
        Ok(m)
    }

    /// JoinGroup then SyncGroup until a generation completes with this member in it.
    pub fn rejoin(&mut self, cluster: &mut Cluster) -> Result<()> {
        for _ in 0..100 {
            let joined = match self.join_once(cluster)? {
                Some(j) => j,
                None => continue,
            };
            if let Some(assignment) = self.sync(cluster, &joined)? {
                self.assignment = assignment;
                self.last_heartbeat = Instant::now();
                return Ok(());
            }
        }
        bail!("group '{}' kept rebalancing through 100 attempts to join; is another member flapping?", self.group)
    }

    /// One JoinGroup. `None`: retry (a member id was assigned, or the coordinator moved).
    fn join_once(&mut self, cluster: &mut Cluster) -> Result<Option<JoinGroupResponse>> {
        let conn = cluster.node(self.coordinator)?;
        let v = conn.version(ApiKey::JoinGroup, JOIN_GROUP_VERSIONS.0, JOIN_GROUP_VERSIONS.1)?;
        let mut req = JoinGroupRequest::default();
        req.group_id = group_id(&self.group);
        req.session_timeout_ms = SESSION_TIMEOUT_MS;
        req.rebalance_timeout_ms = REBALANCE_TIMEOUT_MS;
        req.member_id = sb(&self.member_id);
        req.protocol_type = sb(cp::PROTOCOL_TYPE);
        let mut p = JoinGroupRequestProtocol::default();
        p.name = sb(cp::RANGE);
        p.metadata = cp::encode_subscription(&self.topics)?;
        req.protocols.push(p);
        let resp: JoinGroupResponse = conn.call(ApiKey::JoinGroup, v, &req)?;
        match ErrorCode::try_from_code(resp.error_code) {
            None => {
                self.member_id = resp.member_id.to_string();
                self.generation = resp.generation_id;
                Ok(Some(resp))
            }
            // KIP-394: the first join only obtains a member id; join again with it.
            Some(ErrorCode::MemberIdRequired) => {
                self.member_id = resp.member_id.to_string();
                Ok(None)
            }
            Some(ErrorCode::UnknownMemberId) => {
                self.member_id.clear();
                Ok(None)
            }
            Some(ErrorCode::RebalanceInProgress) => Ok(None),
            Some(
                ErrorCode::NotCoordinator | ErrorCode::CoordinatorNotAvailable | ErrorCode::CoordinatorLoadInProgress,
            ) => {
                self.find_coordinator(cluster)?;
                Ok(None)
            }
            Some(ErrorCode::InconsistentGroupProtocol) => bail!(
                "{}: group '{}' is used by clients with another protocol than consumer/range; \
                 use another group id",
                describe_error(resp.error_code),
                self.group
            ),
            Some(_) => Err(kafka_error(resp.error_code, None, format_args!("joining group '{}'", self.group))),
        }
    }

    /// SyncGroup (the leader sends everyone's assignment). `None`: the generation ended
    /// before it completed; join again.
    fn sync(&mut self, cluster: &mut Cluster, joined: &JoinGroupResponse) -> Result<Option<Assignment>> {
        let assignments =
            if joined.leader.as_str() == self.member_id { self.assign(cluster, joined)? } else { Vec::new() };
        let conn = cluster.node(self.coordinator)?;
        let v = conn.version(ApiKey::SyncGroup, SYNC_GROUP_VERSIONS.0, SYNC_GROUP_VERSIONS.1)?;
        let mut req = SyncGroupRequest::default();
        req.group_id = group_id(&self.group);
        req.generation_id = self.generation;
        req.member_id = sb(&self.member_id);
        if v >= 5 {
            req.protocol_type = Some(sb(cp::PROTOCOL_TYPE));
            req.protocol_name = Some(sb(cp::RANGE));
        }
        req.assignments = assignments;
        let resp: SyncGroupResponse = conn.call(ApiKey::SyncGroup, v, &req)?;
        match ErrorCode::try_from_code(resp.error_code) {
            None => Ok(Some(cp::decode_assignment(resp.assignment)?)),
            Some(ErrorCode::RebalanceInProgress | ErrorCode::IllegalGeneration) => Ok(None),
            Some(ErrorCode::UnknownMemberId) => {
                self.member_id.clear();
                Ok(None)
            }
            Some(
                ErrorCode::NotCoordinator | ErrorCode::CoordinatorNotAvailable | ErrorCode::CoordinatorLoadInProgress,
            ) => {
                self.find_coordinator(cluster)?;
                Ok(None)
            }
            Some(_) => Err(kafka_error(resp.error_code, None, format_args!("syncing group '{}'", self.group))),
        }
    }

    /// The leader's job: the range assignment over every member's subscription.
    fn assign(&self, cluster: &mut Cluster, joined: &JoinGroupResponse) -> Result<Vec<SyncGroupRequestAssignment>> {
        let mut members = Vec::new();
        for m in &joined.members {
            let topics = cp::decode_subscription(m.metadata.clone())
                .with_context(|| format!("the subscription of member {}", m.member_id.as_str()))?;
            members.push((m.member_id.to_string(), topics));
        }
        let mut all_topics: Vec<String> = members.iter().flat_map(|(_, ts)| ts.iter().cloned()).collect();
        all_topics.sort();
        all_topics.dedup();
        let mut counts = BTreeMap::new();
        for t in &all_topics {
            // Another member may subscribe to a topic that does not exist (yet): like Java's
            // assignors, leave it out rather than fail the whole group.
            match partitions::topic(cluster, t, false) {
                Ok(layout) => {
                    counts.insert(t.clone(), layout.partition_count());
                }
                Err(e) => eprintln!("note: not assigning topic '{t}': {e:#}"),
            }
        }
        let mut out = Vec::new();
        for (member, assignment) in cp::range_assign(&members, &counts) {
            let mut a = SyncGroupRequestAssignment::default();
            a.member_id = sb(&member);
            a.assignment = cp::encode_assignment(&assignment)?;
            out.push(a);
        }
        Ok(out)
    }

    fn find_coordinator(&mut self, cluster: &mut Cluster) -> Result<()> {
        cluster.forget(self.coordinator);
        std::thread::sleep(Duration::from_millis(100));
        self.coordinator = cluster.coordinator(&self.group)?;
        Ok(())
    }

    /// Heartbeats when one is due.
    pub fn tick(&mut self, cluster: &mut Cluster) -> Result<Tick> {
        if self.last_heartbeat.elapsed() < HEARTBEAT_INTERVAL {
            return Ok(Tick::Steady);
        }
        let conn = cluster.node(self.coordinator)?;
        let v = conn.version(ApiKey::Heartbeat, HEARTBEAT_VERSIONS.0, HEARTBEAT_VERSIONS.1)?;
        let mut req = HeartbeatRequest::default();
        req.group_id = group_id(&self.group);
        req.generation_id = self.generation;
        req.member_id = sb(&self.member_id);
        let resp: HeartbeatResponse = conn.call(ApiKey::Heartbeat, v, &req)?;
        self.last_heartbeat = Instant::now();
        match ErrorCode::try_from_code(resp.error_code) {
            None => Ok(Tick::Steady),
            Some(ErrorCode::RebalanceInProgress | ErrorCode::IllegalGeneration) => Ok(Tick::Rebalance),
            Some(ErrorCode::UnknownMemberId | ErrorCode::FencedInstanceId) => {
                self.member_id.clear();
                Ok(Tick::Rebalance)
            }
            Some(
                ErrorCode::NotCoordinator | ErrorCode::CoordinatorNotAvailable | ErrorCode::CoordinatorLoadInProgress,
            ) => {
                self.find_coordinator(cluster)?;
                Ok(Tick::Rebalance)
            }
            Some(_) => Err(kafka_error(resp.error_code, None, format_args!("heartbeat in group '{}'", self.group))),
        }
    }

    /// The committed offset of each partition of `topic` (absent: nothing committed).
    pub fn committed(&self, cluster: &mut Cluster, topic: &str, parts: &[i32]) -> Result<BTreeMap<i32, i64>> {
        committed_offsets(cluster, self.coordinator, &self.group, Some((topic, parts)))
            .map(|m| m.into_iter().filter(|((t, _), _)| t == topic).map(|((_, p), o)| (p, o)).collect())
    }

    /// Commits `positions` (the next offset to read of each partition of `topic`).
    pub fn commit(&self, cluster: &mut Cluster, topic: &str, positions: &BTreeMap<i32, i64>) -> Result<()> {
        commit_offsets(cluster, self.coordinator, &self.group, self.generation, &self.member_id, topic, positions)
    }

    /// LeaveGroup, so the others rebalance now instead of after the session timeout.
    pub fn leave(&self, cluster: &mut Cluster) -> Result<()> {
        let conn = cluster.node(self.coordinator)?;
        let v = conn.version(ApiKey::LeaveGroup, LEAVE_GROUP_VERSIONS.0, LEAVE_GROUP_VERSIONS.1)?;
        let mut req = LeaveGroupRequest::default();
        req.group_id = group_id(&self.group);
        // v3 leaves by a list of members (KIP-345 batch leave).
        if v >= 3 {
            let mut m = MemberIdentity::default();
            m.member_id = sb(&self.member_id);
            if v >= 5 {
                m.reason = Some(sb("the consumer is closing"));
            }
            req.members.push(m);
        } else {
            req.member_id = sb(&self.member_id);
        }
        let resp: LeaveGroupResponse = conn.call(ApiKey::LeaveGroup, v, &req)?;
        check(resp.error_code, None, format_args!("leaving group '{}'", self.group))?;
        for m in &resp.members {
            check(m.error_code, None, format_args!("leaving group '{}'", self.group))?;
        }
        Ok(())
    }
}

/// Committed offsets of `group` (OffsetFetch to its coordinator `coordinator`), keyed by
/// (topic, partition); `only`: one topic's partitions, else every committed partition.
pub fn committed_offsets(
    cluster: &mut Cluster,
    coordinator: i32,
    group: &str,
    only: Option<(&str, &[i32])>,
) -> Result<BTreeMap<(String, i32), i64>> {
    let conn = cluster.node(coordinator)?;
    let v = conn.version(ApiKey::OffsetFetch, OFFSET_FETCH_VERSIONS.0, OFFSET_FETCH_VERSIONS.1)?;
    let mut req = OffsetFetchRequest::default();
    req.group_id = group_id(group);
    req.topics = match only {
        Some((topic, parts)) => {
            let mut t = OffsetFetchRequestTopic::default();
            t.name = topic_name(topic);
            t.partition_indexes = parts.to_vec();
            Some(vec![t])
        }
        // A null topic list ("all committed") exists from v2.
        None if v >= 2 => None,
        None => bail!("the broker's OffsetFetch v{v} cannot list all of a group's offsets; it needs v2 or later"),
    };
    let resp: OffsetFetchResponse = conn.call(ApiKey::OffsetFetch, v, &req)?;
    if v >= 2 {
        check(resp.error_code, None, format_args!("offsets of group '{group}'"))?;
    }
    let mut out = BTreeMap::new();
    for t in &resp.topics {
        for p in &t.partitions {
            check(p.error_code, None, format_args!("committed offset of {}/{}", t.name.as_str(), p.partition_index))?;
            if p.committed_offset >= 0 {
                out.insert((t.name.to_string(), p.partition_index), p.committed_offset);
            }
        }
    }
    Ok(out)
}

/// OffsetCommit of `positions` for `topic`. Generation -1 with an empty member id is a
/// commit from outside the group, which a coordinator takes only for a group without
/// members (what `group reset-offsets` does).
pub fn commit_offsets(
    cluster: &mut Cluster,
    coordinator: i32,
    group: &str,
    generation: i32,
    member_id: &str,
    topic: &str,
    positions: &BTreeMap<i32, i64>,
) -> Result<()> {
    if positions.is_empty() {
        return Ok(());
    }
    let conn = cluster.node(coordinator)?;
    let v = conn.version(ApiKey::OffsetCommit, OFFSET_COMMIT_VERSIONS.0, OFFSET_COMMIT_VERSIONS.1)?;
    let mut req = OffsetCommitRequest::default();
    req.group_id = group_id(group);
    req.generation_id_or_member_epoch = generation;
    req.member_id = sb(member_id);
    let mut t = OffsetCommitRequestTopic::default();
    t.name = topic_name(topic);
    for (&p, &offset) in positions {
        let mut cp = OffsetCommitRequestPartition::default();
        cp.partition_index = p;
        cp.committed_offset = offset;
        cp.committed_metadata = Some(sb(""));
        t.partitions.push(cp);
    }
    req.topics.push(t);
    let resp: OffsetCommitResponse = conn.call(ApiKey::OffsetCommit, v, &req)?;
    for t in &resp.topics {
        for p in &t.partitions {
            check(
                p.error_code,
                None,
                format_args!("committing the offset of {}/{} for group '{group}'", t.name.as_str(), p.partition_index),
            )?;
        }
    }
    Ok(())
}
