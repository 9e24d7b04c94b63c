//! Consumer groups and committed offsets seen by librdkafka (rust-rdkafka `BaseConsumer`,
//! `group.id`, `enable.auto.commit=false`, synchronous commits), and the group APIs' errors on
//! the wire:
//!
//! - committed offsets survive a clean stop (SIGTERM) and a SIGKILL of the broker: a new
//!   consumer in the group resumes exactly at the committed offsets (the first offset it gets
//!   per partition is the committed one, and `committed()` returns them), for a group whose
//!   consumer is gone too (OffsetFetch after the restart), and for a group that only ever
//!   committed outside group membership;
//! - a consumer that outlives a broker restart keeps its membership (stored in
//!   `__consumer_offsets`): no rebalance, and it carries on from its position;
//! - Heartbeat / SyncGroup / LeaveGroup for an unknown group or member, and OffsetCommit from a
//!   stale generation or an unknown member, are refused with Kafka's errors and change nothing.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};
use ringbroker::protocol::messages::join_group_request::JoinGroupRequestProtocol;
use ringbroker::protocol::messages::leave_group_request::MemberIdentity;
use ringbroker::protocol::messages::metadata_request::MetadataRequestTopic;
use ringbroker::protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use ringbroker::protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use ringbroker::protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use ringbroker::protocol::messages::{
    ApiKey, GroupId, HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    LeaveGroupResponse, MetadataRequest, MetadataResponse, OffsetCommitRequest, OffsetCommitResponse,
    OffsetFetchRequest, OffsetFetchResponse, SyncGroupRequest, SyncGroupResponse, TopicName,
};
use ringbroker::protocol::{Decodable, Encodable, ErrorCode};
use support::client::{sb, Client};
use support::{restart, Broker};

use crate::librdkafka::{self, Ctx};

const PARTITIONS: i32 = 3;
/// Upper bound for any one wait.
const WAIT: Duration = Duration::from_secs(30);

// -------------------------------------------------------------------------------------------
// librdkafka plumbing
// -------------------------------------------------------------------------------------------

/// The config every client here starts from: quick reconnects, for the restarts.
fn config(bootstrap: &str) -> ClientConfig {
    let mut cfg = librdkafka::config(bootstrap);
    cfg.set("reconnect.backoff.ms", "100").set("reconnect.backoff.max.ms", "500");
    cfg
}

type Consumed = Vec<(i32, i64, String)>;

/// A group member: `subscribe`, no auto commit, commits synchronously when told.
fn consumer(bootstrap: &str, group: &str, name: &str) -> BaseConsumer<Ctx> {
    let mut cfg = config(bootstrap);
    cfg.set("group.id", group)
        .set("client.id", name)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("enable.partition.eof", "false")
        .set("session.timeout.ms", "6000")
        .set("heartbeat.interval.ms", "500");
    // Group coordination in the log: heartbeat errors, rejoins.
    librdkafka::debug(&mut cfg, "cgrp");
    cfg.create_with_context(Ctx::new(name)).unwrap_or_else(|e| panic!("creating consumer {name}: {e}"))
}

/// Produces keys `k-<from>..k-<to>` (acks=all). Where each landed is learnt by reading the topic
/// back ([`read_all`]).
fn produce(bootstrap: &str, topic: &str, from: usize, to: usize) {
    let mut cfg = config(bootstrap);
    cfg.set("acks", "all").set("enable.idempotence", "true").set("linger.ms", "5");
    let producer: BaseProducer<Ctx> = cfg.create_with_context(Ctx::new("producer")).expect("producer");
    for i in from..to {
        let key = format!("k-{i}");
        let value = format!("v-{i}");
        producer
            .send(BaseRecord::with_opaque_to(topic, i).key(&key).payload(&value))
            .unwrap_or_else(|(e, _)| panic!("send {key}: {e}"));
        producer.poll(Duration::ZERO);
    }
    producer.flush(WAIT).unwrap_or_else(|e| {
        panic!("producing {from}..{to} did not complete: {e}\n{}", producer.context().log_tail(20))
    });
}

/// Every record of the topic, read by assignment from the beginning (no group).
fn read_all(bootstrap: &str, topic: &str, expect: usize) -> Consumed {
    let mut cfg = config(bootstrap);
    cfg.set("group.id", "groups-rdkafka-reader")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false");
    let c: BaseConsumer<Ctx> = cfg.create_with_context(Ctx::new("reader")).expect("reader");
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition_offset(topic, p, Offset::Beginning).unwrap();
    }
    c.assign(&tpl).unwrap();
    let mut out = Vec::new();
    let deadline = Instant::now() + WAIT;
    while out.len() < expect {
        assert!(Instant::now() < deadline, "read only {} of {expect} records back", out.len());
        if let Some(m) = c.poll(Duration::from_millis(100)) {
            let m = m.expect("reader poll");
            out.push((m.partition(), m.offset(), String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned()));
        }
    }
    out
}

/// Polls `c` until `done(consumed so far)` holds (bounded), returning what it consumed.
fn consume_until(c: &BaseConsumer<Ctx>, what: &str, mut done: impl FnMut(&Consumed) -> bool) -> Consumed {
    let mut got = Vec::new();
    let deadline = Instant::now() + WAIT;
    while !done(&got) {
        assert!(
            Instant::now() < deadline,
            "{what}: not done after {WAIT:?} with {} records; rebalances {:?}\nlog tail:\n{}",
            got.len(),
            c.context().rebalances(),
            c.context().log_tail(30)
        );
        match c.poll(Duration::from_millis(100)) {
            None => {}
            Some(Ok(m)) => {
                got.push((m.partition(), m.offset(), String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned()))
            }
            Some(Err(e)) => println!("{what}: poll error {e}"),
        }
    }
    got
}

/// Polls `c` until it has processed every partition up to `targets` (exclusive), processing only
/// records below the target (those after it are left uncommitted, for the next consumer).
fn consume_to(c: &BaseConsumer<Ctx>, what: &str, from: &BTreeMap<i32, i64>, targets: &BTreeMap<i32, i64>) -> Consumed {
    let mut next: BTreeMap<i32, i64> = (0..PARTITIONS).map(|p| (p, from.get(&p).copied().unwrap_or(0))).collect();
    let got = consume_until(c, what, |g| {
        if let Some((p, o, _)) = g.last() {
            next.insert(*p, o + 1);
        }
        targets.iter().all(|(p, t)| next[p] >= *t)
    });
    got.into_iter().filter(|(p, o, _)| *o < targets[p]).collect()
}

/// The next offset per partition after what was consumed.
fn positions(got: &Consumed) -> BTreeMap<i32, i64> {
    let mut m = BTreeMap::new();
    for (p, o, _) in got {
        let e = m.entry(*p).or_insert(0);
        *e = (*e).max(o + 1);
    }
    m
}

/// The first offset consumed per partition.
fn first_offsets(got: &Consumed) -> BTreeMap<i32, i64> {
    let mut m = BTreeMap::new();
    for (p, o, _) in got {
        m.entry(*p).or_insert(*o);
    }
    m
}

fn commit(c: &BaseConsumer<Ctx>, topic: &str, offsets: &BTreeMap<i32, i64>) {
    let mut tpl = TopicPartitionList::new();
    for (p, o) in offsets {
        tpl.add_partition_offset(topic, *p, Offset::Offset(*o)).unwrap();
    }
    c.commit(&tpl, CommitMode::Sync)
        .unwrap_or_else(|e| panic!("commit {offsets:?} failed: {e}\nlog tail:\n{}", c.context().log_tail(30)));
}

fn tpl_offsets(tpl: &TopicPartitionList) -> BTreeMap<i32, Option<i64>> {
    tpl.elements()
        .iter()
        .map(|e| {
            (
                e.partition(),
                match e.offset() {
                    Offset::Offset(o) => Some(o),
                    _ => None,
                },
            )
        })
        .collect()
}

/// What `committed()` (OffsetFetch for the assignment) returns, as partition → offset.
fn committed(c: &BaseConsumer<Ctx>) -> BTreeMap<i32, Option<i64>> {
    let tpl = c.committed(WAIT).unwrap_or_else(|e| panic!("committed(): {e}\n{}", c.context().log_tail(30)));
    tpl_offsets(&tpl)
}

/// OffsetFetch of every partition of `topic` for `group`, from a client that is not a member.
fn fetch_committed(bootstrap: &str, group: &str, topic: &str) -> BTreeMap<i32, Option<i64>> {
    let mut cfg = config(bootstrap);
    cfg.set("group.id", group).set("enable.auto.commit", "false");
    let c: BaseConsumer<Ctx> = cfg.create_with_context(Ctx::new("offset reader")).expect("offset reader");
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition(topic, p);
    }
    let got = c
        .committed_offsets(tpl, WAIT)
        .unwrap_or_else(|e| panic!("OffsetFetch for {group}: {e}\n{}", c.context().log_tail(30)));
    tpl_offsets(&got)
}

fn expect_committed(offsets: &BTreeMap<i32, i64>) -> BTreeMap<i32, Option<i64>> {
    (0..PARTITIONS).map(|p| (p, offsets.get(&p).copied())).collect()
}

/// Each acknowledged record was consumed exactly once across `parts`.
fn check_exactly_once(all: &Consumed, parts: &[&Consumed]) {
    let want: BTreeMap<(i32, i64), &str> = all.iter().map(|(p, o, k)| ((*p, *o), k.as_str())).collect();
    let mut seen: BTreeMap<(i32, i64), usize> = BTreeMap::new();
    for part in parts {
        for (p, o, k) in part.iter() {
            assert_eq!(want.get(&(*p, *o)).copied(), Some(k.as_str()), "record at p{p} o{o}");
            *seen.entry((*p, *o)).or_default() += 1;
        }
    }
    let missing: Vec<_> = want.keys().filter(|k| !seen.contains_key(k)).take(10).collect();
    let dups: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).take(10).collect();
    assert!(missing.is_empty() && dups.is_empty(), "not exactly once: missing {missing:?}, duplicates {dups:?}");
}

// -------------------------------------------------------------------------------------------
// The tests
// -------------------------------------------------------------------------------------------

/// Committed offsets survive SIGTERM and SIGKILL of the broker: new consumers in the group
/// resume exactly there, `committed()` and a non-member's OffsetFetch return them.
#[test]
fn committed_offsets_survive_clean_and_unclean_restarts() {
    let _machine = crate::machine::shared();
    let data = tempfile::tempdir().unwrap();
    let args = ["--flush", "always", "--default-partitions", "3", "--group-initial-rebalance-delay-ms", "0"];
    let mut broker = Broker::start_in(data.path(), "127.0.0.1:0", &args);
    let listen = broker.addr.to_string();
    let bootstrap = broker.bootstrap();
    let (topic, group, standalone) = ("rk-offsets", "rk-offsets-g", "rk-offsets-standalone");

    produce(&bootstrap, topic, 0, 3000);
    let all = read_all(&bootstrap, topic, 3000);
    let ends = positions(&all);
    assert_eq!(ends.len(), PARTITIONS as usize, "records on every partition: {ends:?}");

    // 1. c1 consumes part of the topic and commits where it stopped.
    let c1 = consumer(&bootstrap, group, "c1");
    c1.subscribe(&[topic]).unwrap();
    // About a third of every partition.
    let target1: BTreeMap<i32, i64> = ends.iter().map(|(p, e)| (*p, e / 3)).collect();
    let got1 = consume_to(&c1, "c1", &BTreeMap::new(), &target1);
    let commit1 = positions(&got1);
    commit(&c1, topic, &commit1);
    assert_eq!(committed(&c1), expect_committed(&commit1), "c1's committed() right after its commit");
    println!("c1 consumed {} records and committed {commit1:?}", got1.len());
    drop(c1); // close: leaves the group

    // A group that only commits outside group membership (assign(), generation -1).
    let s = {
        let mut cfg = config(&bootstrap);
        cfg.set("group.id", standalone).set("enable.auto.commit", "false");
        cfg.create_with_context::<Ctx, BaseConsumer<Ctx>>(Ctx::new(standalone)).unwrap()
    };
    let standalone_offsets: BTreeMap<i32, i64> = [(0, 7), (1, 8), (2, 9)].into();
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition(topic, p);
    }
    s.assign(&tpl).unwrap();
    commit(&s, topic, &standalone_offsets);
    drop(s);

    // 2. SIGTERM, restart on the same dir and port: c2 resumes exactly at c1's commits.
    let st = broker.stop().expect("broker was running");
    assert!(st.success(), "the broker's clean stop exited with {st}");
    broker = restart(data.path(), &listen, &args);
    let c2 = consumer(&bootstrap, group, "c2");
    c2.subscribe(&[topic]).unwrap();
    let target2: BTreeMap<i32, i64> = ends.iter().map(|(p, e)| (*p, 2 * e / 3)).collect();
    let got2 = consume_to(&c2, "c2", &commit1, &target2);
    // Nothing committed since c1: committed() (OffsetFetch for c2's assignment) is c1's.
    assert_eq!(committed(&c2), expect_committed(&commit1), "c2's committed() after a SIGTERM restart");
    let firsts2 = first_offsets(&got2);
    for p in 0..PARTITIONS {
        assert_eq!(firsts2.get(&p), commit1.get(&p), "c2's first offset on partition {p} after the SIGTERM restart");
    }
    let commit2 = positions(&got2);
    commit(&c2, topic, &commit2);
    assert_eq!(committed(&c2), expect_committed(&commit2), "c2's committed() after its commit");
    println!("c2 started at {firsts2:?}, consumed {} records and committed {commit2:?}", got2.len());
    drop(c2);

    // 3. SIGKILL, restart: the group's consumer is gone; its offsets are not.
    broker.kill9();
    broker = restart(data.path(), &listen, &args);
    assert_eq!(
        fetch_committed(&bootstrap, group, topic),
        expect_committed(&commit2),
        "OffsetFetch for {group} (no member left) after kill -9 and restart"
    );
    assert_eq!(
        fetch_committed(&bootstrap, standalone, topic),
        expect_committed(&standalone_offsets),
        "OffsetFetch for {standalone} (standalone commits) after two restarts"
    );
    let c3 = consumer(&bootstrap, group, "c3");
    c3.subscribe(&[topic]).unwrap();
    let got3 = consume_to(&c3, "c3", &commit2, &ends);
    let firsts3 = first_offsets(&got3);
    for p in 0..PARTITIONS {
        assert_eq!(firsts3.get(&p), commit2.get(&p), "c3's first offset on partition {p} after kill -9");
    }
    assert_eq!(committed(&c3), expect_committed(&commit2), "c3's committed() after kill -9");
    // Nothing more arrives: c1, c2 and c3 together read every record exactly once.
    let extra = consume_until(&c3, "c3 (idle)", {
        let start = Instant::now();
        move |_| start.elapsed() > Duration::from_millis(500)
    });
    assert!(extra.is_empty(), "c3 read past the end: {:?}", &extra[..extra.len().min(5)]);
    check_exactly_once(&all, &[&got1, &got2, &got3]);
    drop(c3);
    drop(broker);
}

/// A consumer that outlives a broker restart keeps its membership: the restarted broker
/// replays the group as it was stored at the last rebalance (its generation, members and
/// assignments), so the consumer's heartbeats go on being answered, no rebalance happens and
/// it carries on from its own position with what is produced after the restart.
#[test]
fn a_member_outlives_a_broker_restart_without_a_rebalance() {
    let _machine = crate::machine::shared();
    let data = tempfile::tempdir().unwrap();
    let args = ["--flush", "os", "--default-partitions", "3", "--group-initial-rebalance-delay-ms", "0"];
    let mut broker = Broker::start_in(data.path(), "127.0.0.1:0", &args);
    let listen = broker.addr.to_string();
    let bootstrap = broker.bootstrap();
    let (topic, group) = ("rk-rejoin", "rk-rejoin-g");

    produce(&bootstrap, topic, 0, 600);
    let c = consumer(&bootstrap, group, "survivor");
    c.subscribe(&[topic]).unwrap();
    let got1 = consume_until(&c, "before the restart", |g| g.len() >= 600);
    commit(&c, topic, &positions(&got1));
    let rebalances_before = c.context().rebalances().len();
    let log_before = c.context().logs().len();

    let st = broker.stop().expect("running");
    assert!(st.success(), "clean stop: {st}");
    broker = restart(data.path(), &listen, &args);
    produce(&bootstrap, topic, 600, 1200);
    let all = read_all(&bootstrap, topic, 1200);
    let got2 = consume_until(&c, "after the restart", |g| g.len() >= 600);
    check_exactly_once(&all, &[&got1, &got2]);
    for (p, first) in first_offsets(&got2) {
        assert_eq!(first, positions(&got1)[&p], "first offset on partition {p} after the restart");
    }
    let rebalances: Vec<String> = c.context().rebalances()[rebalances_before..].to_vec();
    assert!(rebalances.is_empty(), "no rebalance after the restart: {rebalances:?}");
    let logs: Vec<String> = c.context().logs()[log_before..].to_vec();
    let unknown: Vec<&String> =
        logs.iter().filter(|l| l.contains("UNKNOWN_MEMBER_ID") || l.contains("Unknown member")).collect();
    assert!(unknown.is_empty(), "the member was forgotten: {unknown:?}; log tail:\n{}", c.context().log_tail(60));
    drop(c);
    drop(broker);
}

// -------------------------------------------------------------------------------------------
// The group APIs on the wire
// -------------------------------------------------------------------------------------------

/// The group requests, one at a time, with the test client.
struct Wire {
    c: Client,
}

impl Wire {
    fn connect(addr: SocketAddr) -> Wire {
        let mut c = Client::connect(addr);
        c.set_client_id("groups-rdkafka-wire");
        Wire { c }
    }

    fn call<Req: Encodable, Resp: Decodable>(&mut self, api: ApiKey, version: i16, req: &Req) -> Resp {
        self.c.call(api, version, req)
    }

    fn join(&mut self, group: &str, member: &str, session_ms: i32) -> JoinGroupResponse {
        let mut p = JoinGroupRequestProtocol::default();
        p.name = sb("range");
        // ConsumerProtocolSubscription v0: the topic "wire-t", no user data.
        p.metadata =
            Bytes::from_static(&[0, 0, 0, 0, 0, 1, 0, 6, b'w', b'i', b'r', b'e', b'-', b't', 0xff, 0xff, 0xff, 0xff]);
        let mut r = JoinGroupRequest::default();
        r.group_id = GroupId(sb(group));
        r.session_timeout_ms = session_ms;
        r.rebalance_timeout_ms = 10_000;
        r.member_id = sb(member);
        r.protocol_type = sb("consumer");
        r.protocols = vec![p];
        self.call(ApiKey::JoinGroup, 9, &r)
    }

    fn sync(&mut self, group: &str, member: &str, generation: i32, assign: bool) -> SyncGroupResponse {
        let mut r = SyncGroupRequest::default();
        r.group_id = GroupId(sb(group));
        r.generation_id = generation;
        r.member_id = sb(member);
        r.protocol_type = Some(sb("consumer"));
        r.protocol_name = Some(sb("range"));
        if assign {
            let mut a = SyncGroupRequestAssignment::default();
            a.member_id = sb(member);
            a.assignment = Bytes::from_static(b"\0\0\0\0\0\0\0\0\0\0");
            r.assignments = vec![a];
        }
        self.call(ApiKey::SyncGroup, 5, &r)
    }

    fn heartbeat(&mut self, group: &str, member: &str, generation: i32) -> i16 {
        let mut r = HeartbeatRequest::default();
        r.group_id = GroupId(sb(group));
        r.generation_id = generation;
        r.member_id = sb(member);
        let resp: HeartbeatResponse = self.call(ApiKey::Heartbeat, 4, &r);
        resp.error_code
    }

    fn leave(&mut self, group: &str, member: &str) -> (i16, Vec<i16>) {
        let mut m = MemberIdentity::default();
        m.member_id = sb(member);
        let mut r = LeaveGroupRequest::default();
        r.group_id = GroupId(sb(group));
        r.members = vec![m];
        let resp: LeaveGroupResponse = self.call(ApiKey::LeaveGroup, 5, &r);
        (resp.error_code, resp.members.iter().map(|m| m.error_code).collect())
    }

    /// Commits `offset` for partition 0 of `topic`; returns the partition's error code.
    fn commit(&mut self, group: &str, member: &str, generation: i32, topic: &str, offset: i64) -> i16 {
        let mut p = OffsetCommitRequestPartition::default();
        p.partition_index = 0;
        p.committed_offset = offset;
        p.committed_leader_epoch = -1;
        let mut t = OffsetCommitRequestTopic::default();
        t.name = TopicName(sb(topic));
        t.partitions = vec![p];
        let mut r = OffsetCommitRequest::default();
        r.group_id = GroupId(sb(group));
        r.generation_id_or_member_epoch = generation;
        r.member_id = sb(member);
        r.topics = vec![t];
        let resp: OffsetCommitResponse = self.call(ApiKey::OffsetCommit, 8, &r);
        resp.topics[0].partitions[0].error_code
    }

    /// The committed offset of partition 0 of `topic` (-1: none).
    fn fetch(&mut self, group: &str, topic: &str) -> i64 {
        let mut t = OffsetFetchRequestTopic::default();
        t.name = TopicName(sb(topic));
        t.partition_indexes = vec![0];
        let mut r = OffsetFetchRequest::default();
        r.group_id = GroupId(sb(group));
        r.topics = Some(vec![t]);
        let resp: OffsetFetchResponse = self.call(ApiKey::OffsetFetch, 7, &r);
        assert_eq!(resp.error_code, 0, "OffsetFetch for {group}");
        resp.topics[0].partitions[0].committed_offset
    }
}

/// Requests for unknown groups and members, stale generations and bad settings are refused
/// with Kafka's error codes, and refused commits change nothing.
#[test]
fn group_requests_with_unknown_members_or_stale_generations_are_refused() {
    let _machine = crate::machine::shared();
    let broker = Broker::start_args(&["--flush", "os", "--group-initial-rebalance-delay-ms", "0"]);
    let mut w = Wire::connect(broker.addr);
    let topic = "wire-t";
    let mut md = MetadataRequest::default();
    let mut mt = MetadataRequestTopic::default();
    mt.name = Some(TopicName(sb(topic)));
    md.topics = Some(vec![mt]);
    md.allow_auto_topic_creation = true;
    let resp: MetadataResponse = w.call(ApiKey::Metadata, 12, &md);
    assert_eq!(resp.topics[0].error_code, 0, "auto-creating {topic}");

    // Unknown group: the member is unknown (a client then rejoins from scratch).
    assert_eq!(w.heartbeat("no-such-group", "m-1", 1), ErrorCode::UnknownMemberId.code(), "Heartbeat, unknown group");
    let s = w.sync("no-such-group", "m-1", 1, false);
    assert_eq!(s.error_code, ErrorCode::UnknownMemberId.code(), "SyncGroup, unknown group");
    let (top, per) = w.leave("no-such-group", "m-1");
    assert!(
        top == ErrorCode::UnknownMemberId.code() || per == [ErrorCode::UnknownMemberId.code()],
        "LeaveGroup, unknown group: top-level {top}, per member {per:?}"
    );
    assert_eq!(w.fetch("no-such-group", topic), -1, "OffsetFetch, unknown group");

    // Bad JoinGroups.
    assert_eq!(w.join("", "", 10_000).error_code, ErrorCode::InvalidGroupId.code(), "JoinGroup with an empty group id");
    assert_eq!(
        w.join("g-wire", "", 10).error_code,
        ErrorCode::InvalidSessionTimeout.code(),
        "JoinGroup, session timeout 10 ms"
    );
    assert_eq!(
        w.join("g-wire", "ghost", 10_000).error_code,
        ErrorCode::UnknownMemberId.code(),
        "JoinGroup with an unknown member id"
    );

    // A member joins (KIP-394: first MEMBER_ID_REQUIRED) and syncs: generation 1, Stable.
    let j = w.join("g-wire", "", 10_000);
    assert_eq!(j.error_code, ErrorCode::MemberIdRequired.code());
    let member = j.member_id.to_string();
    let j = w.join("g-wire", &member, 10_000);
    assert_eq!((j.error_code, j.leader.as_str()), (0, member.as_str()), "second JoinGroup");
    let gen1 = j.generation_id;
    assert_eq!(w.sync("g-wire", &member, gen1, true).error_code, 0, "leader's SyncGroup");
    assert_eq!(w.heartbeat("g-wire", &member, gen1), 0, "Heartbeat in the current generation");
    assert_eq!(w.commit("g-wire", &member, gen1, topic, 5), 0, "OffsetCommit in the current generation");
    assert_eq!(w.fetch("g-wire", topic), 5);

    // Known group, wrong member or generation.
    assert_eq!(w.heartbeat("g-wire", "ghost", gen1), ErrorCode::UnknownMemberId.code(), "Heartbeat, unknown member");
    assert_eq!(
        w.sync("g-wire", "ghost", gen1, false).error_code,
        ErrorCode::UnknownMemberId.code(),
        "SyncGroup, unknown member"
    );
    assert_eq!(
        w.heartbeat("g-wire", &member, gen1 + 7),
        ErrorCode::IllegalGeneration.code(),
        "Heartbeat, wrong generation"
    );
    assert_eq!(
        w.commit("g-wire", "ghost", gen1, topic, 6),
        ErrorCode::UnknownMemberId.code(),
        "OffsetCommit, unknown member"
    );
    assert_eq!(
        w.commit("g-wire", "", -1, topic, 6),
        ErrorCode::UnknownMemberId.code(),
        "OffsetCommit without membership, group not empty"
    );

    // The leader rejoins: generation 2 starts (CompletingRebalance until its SyncGroup).
    let j = w.join("g-wire", &member, 10_000);
    let gen2 = j.generation_id;
    assert_eq!((j.error_code, gen2), (0, gen1 + 1), "the leader's rejoin starts a new generation");
    // Kafka checks the generation before the state: a commit from generation 1 is
    // ILLEGAL_GENERATION even while generation 2 awaits its assignment.
    let stale_during_sync = w.commit("g-wire", &member, gen1, topic, 7);
    let current_during_sync = w.commit("g-wire", &member, gen2, topic, 7);
    assert_eq!(w.sync("g-wire", &member, gen2, true).error_code, 0, "SyncGroup of generation 2");
    let stale_when_stable = w.commit("g-wire", &member, gen1, topic, 8);
    let committed = w.fetch("g-wire", topic);
    assert_eq!(
        (stale_when_stable, committed),
        (ErrorCode::IllegalGeneration.code(), 5),
        "OffsetCommit from generation {gen1} once the group is Stable in {gen2}, and the committed offset after it"
    );
    assert_eq!(
        current_during_sync,
        ErrorCode::RebalanceInProgress.code(),
        "OffsetCommit of generation {gen2} before its SyncGroup"
    );
    assert_eq!(w.commit("g-wire", &member, gen2, topic, 9), 0, "OffsetCommit in generation {gen2}");
    assert_eq!(w.fetch("g-wire", topic), 9);

    // The member leaves; the group is empty and takes commits outside membership again.
    let (top, per) = w.leave("g-wire", &member);
    assert_eq!((top, per), (0, vec![0]), "LeaveGroup");
    assert_eq!(w.heartbeat("g-wire", &member, gen2), ErrorCode::UnknownMemberId.code(), "Heartbeat after leaving");
    assert_eq!(w.commit("g-wire", "", -1, topic, 11), 0, "OffsetCommit without membership, empty group");
    assert_eq!(w.fetch("g-wire", topic), 11);

    // Checked last, so that everything above is checked whatever this answers.
    assert_eq!(
        stale_during_sync,
        ErrorCode::IllegalGeneration.code(),
        "OffsetCommit from generation {gen1} while generation {gen2} awaits SyncGroup (Kafka checks the \
         generation before the state: ILLEGAL_GENERATION; REBALANCE_IN_PROGRESS is for the current generation)"
    );
    drop(broker);
}
