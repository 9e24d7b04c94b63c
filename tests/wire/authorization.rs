//! Kafka ACLs on the wire, API by API, with the raw test client. Each test starts a broker
//! with two listeners: PLAINTEXT, whose clients are `User:ANONYMOUS`, a super user here and
//! the admin connection; and SASL_PLAINTEXT, where users created with
//! AlterUserScramCredentials log in with PLAIN and get only what the test's ACLs allow.
//! Also: the same broker without an authorizer (everything allowed, ACL APIs refused), and
//! the SASL gate in front of it all.

use std::time::Duration;

use ringbroker::auth::acl::{Operation, PatternType, Permission, ResourceType};
use ringbroker::auth::scram::Mechanism;
use ringbroker::protocol::messages::create_acls_request::AclCreation;
use ringbroker::protocol::messages::delete_topics_request::DeleteTopicState;
use ringbroker::protocol::messages::describe_configs_request::DescribeConfigsResource;
use ringbroker::protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
use ringbroker::protocol::messages::join_group_request::JoinGroupRequestProtocol;
use ringbroker::protocol::messages::leave_group_request::MemberIdentity;
use ringbroker::protocol::messages::metadata_request::MetadataRequestTopic;
use ringbroker::protocol::messages::metadata_response::MetadataResponseTopic;
use ringbroker::protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use ringbroker::protocol::messages::offset_delete_request::{OffsetDeleteRequestPartition, OffsetDeleteRequestTopic};
use ringbroker::protocol::messages::offset_fetch_request::{OffsetFetchRequestGroup, OffsetFetchRequestTopics};
use ringbroker::protocol::messages::offset_fetch_response::OffsetFetchResponseGroup;
use ringbroker::protocol::messages::offset_for_leader_epoch_request::{OffsetForLeaderPartition, OffsetForLeaderTopic};
use ringbroker::protocol::messages::offset_for_leader_epoch_response::EpochEndOffset;
use ringbroker::protocol::messages::{
    ApiKey, CreateAclsRequest, CreateAclsResponse, DeleteGroupsRequest, DeleteGroupsResponse, DeleteTopicsRequest,
    DeleteTopicsResponse, DescribeClusterRequest, DescribeClusterResponse, DescribeConfigsRequest,
    DescribeConfigsResponse, DescribeGroupsRequest, DescribeGroupsResponse, GroupId, HeartbeatRequest,
    HeartbeatResponse, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, InitProducerIdRequest,
    InitProducerIdResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse,
    ListGroupsRequest, ListGroupsResponse, MetadataRequest, MetadataResponse, OffsetCommitRequest,
    OffsetCommitResponse, OffsetDeleteRequest, OffsetDeleteResponse, OffsetFetchRequest, OffsetFetchResponse,
    OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, ProducerId, SaslAuthenticateResponse,
    SaslHandshakeResponse, SyncGroupRequest, SyncGroupResponse, TransactionalId,
};
use ringbroker::protocol::ErrorCode;
use support::client;
use support::client::{
    batch, fetch_request_by_id, metadata_request, new_topic, now_ms, produce_request, sb, single_fetch, single_produce,
    topic_name, Client, METADATA_V, PRODUCE_V,
};
use support::security;
use support::security::acl;
use support::Broker;

/// The users every test broker has, with their passwords.
const USERS: &[(&str, &str)] = &[("alice", "alice-pw"), ("bob", "bob-pw")];

/// The authorized-operations bit of an operation.
fn bit(op: Operation) -> i32 {
    1 << op.code()
}

/// A broker with the two listeners, its users, and the admin connection.
struct Secured {
    broker: Broker,
    admin: Client,
}

impl Secured {
    fn start() -> Secured {
        Secured::with_authorizer(true)
    }

    fn with_authorizer(enabled: bool) -> Secured {
        let broker = Broker::start_args(&security::secured_args(enabled));
        for (user, password) in USERS {
            security::add_user(broker.listener("PLAINTEXT"), user, password, Mechanism::Sha512);
        }
        let admin = Client::connect(broker.listener("PLAINTEXT"));
        Secured { broker, admin }
    }

    /// CreateAcls v3 through the admin listener: the raw answer.
    fn try_create_acls(&self, acls: Vec<AclCreation>) -> CreateAclsResponse {
        security::try_create_acls(self.broker.listener("PLAINTEXT"), acls)
    }

    /// Creates ACLs, checking each was stored (and so is enforced on every shard).
    fn create_acls(&self, acls: Vec<AclCreation>) {
        security::create_acls(self.broker.listener("PLAINTEXT"), acls)
    }

    /// A connection to the SASL listener, logged in as `user`.
    fn login(&self, user: &str) -> Client {
        let password = USERS.iter().find(|(u, _)| *u == user).expect("a test user").1;
        let mut c = Client::connect(self.broker.listener("SASL_PLAINTEXT"));
        let a = sasl_plain(&mut c, user, password);
        assert_eq!(a.error_code, 0, "logging in as {user}: {:?}", a.error_message);
        c
    }

    fn topic_id(&mut self, topic: &str) -> uuid::Uuid {
        let m = self.admin.metadata(Some(&[topic]), false);
        assert_eq!(m.topics[0].error_code, 0, "{topic} exists");
        m.topics[0].topic_id
    }
}

/// SaslHandshake v1 for PLAIN, then SaslAuthenticate v2 with `user`'s password.
fn sasl_plain(c: &mut Client, user: &str, password: &str) -> SaslAuthenticateResponse {
    let h: SaslHandshakeResponse = c.call(ApiKey::SaslHandshake, 1, &security::plain_handshake());
    assert_eq!(h.error_code, 0, "PLAIN is offered: {:?}", h.mechanisms);
    c.call(ApiKey::SaslAuthenticate, 2, &security::plain_authenticate(user, password))
}

/// ALLOW `op` on the resource named exactly `name`, for `User:<user>`.
fn allow(user: &str, resource: ResourceType, name: &str, op: Operation) -> AclCreation {
    acl(Permission::Allow, &format!("User:{user}"), resource, PatternType::Literal, name, op)
}

fn deny(user: &str, resource: ResourceType, name: &str, op: Operation) -> AclCreation {
    acl(Permission::Deny, &format!("User:{user}"), resource, PatternType::Literal, name, op)
}

fn records() -> Vec<u8> {
    batch(now_ms(), &[b"payload".to_vec()])
}

/// The names in a Metadata response, error entries included.
fn names(m: &MetadataResponse) -> Vec<String> {
    m.topics.iter().filter_map(|t| t.name.as_ref().map(|n| n.to_string())).collect()
}

fn entry<'a>(m: &'a MetadataResponse, topic: &str) -> &'a MetadataResponseTopic {
    m.topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.as_str() == topic))
        .unwrap_or_else(|| panic!("{topic} missing from {:?}", names(m)))
}

fn topic_error(m: &MetadataResponse, topic: &str) -> i16 {
    entry(m, topic).error_code
}

fn offset_for_leader_epoch(c: &mut Client, topic: &str) -> EpochEndOffset {
    let mut p = OffsetForLeaderPartition::default();
    p.partition = 0;
    p.current_leader_epoch = -1;
    p.leader_epoch = 0;
    let mut t = OffsetForLeaderTopic::default();
    t.topic = topic_name(topic);
    t.partitions = vec![p];
    let mut req = OffsetForLeaderEpochRequest::default();
    req.replica_id = (-1).into();
    req.topics = vec![t];
    let mut resp: OffsetForLeaderEpochResponse = c.call(ApiKey::OffsetForLeaderEpoch, 4, &req);
    resp.topics.remove(0).partitions.remove(0)
}

// ---- topics: Produce, Fetch, ListOffsets, OffsetForLeaderEpoch -----------------------

#[test]
fn data_apis_need_their_topic_acls() {
    let mut s = Secured::start();
    s.admin.create_topic("open", 1, &[]);
    s.admin.create_topic("closed", 1, &[]);
    s.create_acls(vec![
        allow("alice", ResourceType::Topic, "open", Operation::Write),
        allow("alice", ResourceType::Topic, "open", Operation::Read),
    ]);
    let mut alice = s.login("alice");

    assert_eq!(alice.produce("open", 0, records()).error_code, 0);
    assert_eq!(alice.produce("closed", 0, records()).error_code, ErrorCode::TopicAuthorizationFailed.code());
    // Refused before existence: an unknown topic answers the same as a forbidden one.
    assert_eq!(alice.produce("nowhere", 0, records()).error_code, ErrorCode::TopicAuthorizationFailed.code());
    // acks=0: no answer; the refusal closes the connection (as Kafka does, so that the
    // producer hears of it), and nothing is appended (checked below).
    alice.send_no_response(ApiKey::Produce, PRODUCE_V, &produce_request("closed", &[(0, records())], 0));
    assert!(alice.read_frame().expect("the connection ends cleanly").is_none(), "a refused acks=0 produce closes");
    let mut alice = s.login("alice");

    let open = alice.fetch("open", 0, 0, 1 << 20);
    assert_eq!(open.error_code, 0);
    assert_eq!(client::decode_records(open.records.as_deref().unwrap_or_default()).len(), 1);
    assert_eq!(alice.fetch("closed", 0, 0, 1 << 20).error_code, ErrorCode::TopicAuthorizationFailed.code());
    assert_eq!(alice.fetch("nowhere", 0, 0, 1 << 20).error_code, ErrorCode::TopicAuthorizationFailed.code());
    // By topic id: the id is resolved first, so an unknown one stays UNKNOWN_TOPIC_ID.
    let closed_id = s.topic_id("closed");
    let by_id = |c: &mut Client, id| single_fetch(c.call(ApiKey::Fetch, 13, &fetch_request_by_id(id, 0, 0, 1 << 20)));
    assert_eq!(by_id(&mut alice, closed_id).error_code, ErrorCode::TopicAuthorizationFailed.code());
    assert_eq!(by_id(&mut alice, s.topic_id("open")).error_code, 0);
    assert_eq!(by_id(&mut alice, uuid::Uuid::new_v4()).error_code, ErrorCode::UnknownTopicId.code());

    let latest = alice.list_offsets("open", 0, -1);
    assert_eq!((latest.error_code, latest.offset), (0, 1), "READ implies DESCRIBE");
    assert_eq!(alice.list_offsets("closed", 0, -1).error_code, ErrorCode::TopicAuthorizationFailed.code());
    assert_eq!(offset_for_leader_epoch(&mut alice, "open").error_code, 0);
    assert_eq!(offset_for_leader_epoch(&mut alice, "closed").error_code, ErrorCode::TopicAuthorizationFailed.code());

    assert_eq!(s.admin.latest("closed", 0), 0, "a refused produce appended nothing");
    assert_eq!(s.admin.latest("open", 0), 1);
    let m = s.admin.metadata(Some(&["nowhere"]), false);
    assert_eq!(m.topics[0].error_code, ErrorCode::UnknownTopicOrPartition.code(), "nothing was created");
}

#[test]
fn prefixed_acls_cover_every_topic_with_the_prefix() {
    let mut s = Secured::start();
    for t in ["orders-eu", "orders-us", "order", "xorders-1"] {
        s.admin.create_topic(t, 1, &[]);
    }
    s.create_acls(vec![
        acl(Permission::Allow, "User:alice", ResourceType::Topic, PatternType::Prefixed, "orders-", Operation::Write),
        // A longer prefixed DENY carves a hole in it.
        acl(Permission::Deny, "User:alice", ResourceType::Topic, PatternType::Prefixed, "orders-u", Operation::Write),
    ]);
    let mut alice = s.login("alice");
    assert_eq!(alice.produce("orders-eu", 0, records()).error_code, 0);
    assert_eq!(
        alice.produce("orders-new", 0, records()).error_code,
        ErrorCode::UnknownTopicOrPartition.code(),
        "allowed, absent"
    );
    assert_eq!(alice.produce("orders-us", 0, records()).error_code, ErrorCode::TopicAuthorizationFailed.code());
    assert_eq!(alice.produce("order", 0, records()).error_code, ErrorCode::TopicAuthorizationFailed.code());
    assert_eq!(alice.produce("xorders-1", 0, records()).error_code, ErrorCode::TopicAuthorizationFailed.code());
    // WRITE implies DESCRIBE under the whole prefix; the DENY, of WRITE only, leaves that.
    assert_eq!(names(&alice.metadata(None, false)), ["orders-eu", "orders-us"]);
}

#[test]
fn a_deny_beats_any_allow() {
    let mut s = Secured::start();
    s.admin.create_topic("shared", 1, &[]);
    s.admin.produce_ok("shared", 0, records());
    s.create_acls(vec![
        acl(Permission::Allow, "User:*", ResourceType::Topic, PatternType::Literal, "shared", Operation::Read),
        deny("alice", ResourceType::Topic, "shared", Operation::Read),
    ]);
    let mut alice = s.login("alice");
    let mut bob = s.login("bob");
    let read = bob.fetch("shared", 0, 0, 1 << 20);
    assert_eq!(read.error_code, 0);
    assert_eq!(client::decode_records(read.records.as_deref().unwrap_or_default()).len(), 1);
    assert_eq!(alice.fetch("shared", 0, 0, 1 << 20).error_code, ErrorCode::TopicAuthorizationFailed.code());
    // A DENY names one operation: the DESCRIBE that everyone's READ implies still holds.
    assert_eq!(alice.list_offsets("shared", 0, -1).error_code, 0);
    assert_eq!(names(&alice.metadata(None, false)), ["shared"]);

    s.create_acls(vec![deny("alice", ResourceType::Topic, "shared", Operation::Describe)]);
    assert_eq!(alice.list_offsets("shared", 0, -1).error_code, ErrorCode::TopicAuthorizationFailed.code());
    assert!(names(&alice.metadata(None, false)).is_empty());
    assert_eq!(names(&bob.metadata(None, false)), ["shared"]);
}

// ---- Metadata ------------------------------------------------------------------------

#[test]
fn metadata_shows_only_what_the_principal_may_describe() {
    let mut s = Secured::start();
    s.admin.create_topic("visible", 1, &[]);
    s.admin.create_topic("hidden", 1, &[]);
    s.create_acls(vec![allow("alice", ResourceType::Topic, "visible", Operation::Read)]);
    let mut alice = s.login("alice");

    // All topics: the hidden one is left out, unmentioned.
    assert_eq!(names(&alice.metadata(None, true)), ["visible"]);
    // By name: refused whether or not the topic exists, and nothing auto-created.
    let m = alice.metadata(Some(&["visible", "hidden", "missing"]), true);
    assert_eq!(topic_error(&m, "visible"), 0);
    assert_eq!(topic_error(&m, "hidden"), ErrorCode::TopicAuthorizationFailed.code());
    assert_eq!(topic_error(&m, "missing"), ErrorCode::TopicAuthorizationFailed.code());
    let hidden = entry(&m, "hidden");
    assert!(hidden.topic_id.is_nil() && hidden.partitions.is_empty(), "nothing about it leaks: {hidden:?}");
    assert_eq!(
        s.admin.metadata(Some(&["missing"]), false).topics[0].error_code,
        ErrorCode::UnknownTopicOrPartition.code()
    );

    // DESCRIBE alone does not allow auto-creation; CREATE on the topic does.
    s.create_acls(vec![allow("alice", ResourceType::Topic, "fresh", Operation::Describe)]);
    assert_eq!(
        topic_error(&alice.metadata(Some(&["fresh"]), true), "fresh"),
        ErrorCode::TopicAuthorizationFailed.code()
    );
    assert_eq!(
        s.admin.metadata(Some(&["fresh"]), false).topics[0].error_code,
        ErrorCode::UnknownTopicOrPartition.code()
    );
    s.create_acls(vec![allow("alice", ResourceType::Topic, "fresh", Operation::Create)]);
    let m = alice.metadata(Some(&["fresh"]), true);
    assert_eq!(topic_error(&m, "fresh"), 0);
    assert!(!m.topics[0].partitions.is_empty());

    // By topic id: the id of a hidden topic answers without its name.
    let mut req = MetadataRequest::default();
    let mut t = MetadataRequestTopic::default();
    t.name = None;
    t.topic_id = s.topic_id("hidden");
    req.topics = Some(vec![t]);
    let m: MetadataResponse = alice.call(ApiKey::Metadata, METADATA_V, &req);
    assert_eq!((m.topics[0].error_code, m.topics[0].name.clone()), (ErrorCode::TopicAuthorizationFailed.code(), None));

    // Authorized operations, when asked for: READ and the DESCRIBE it implies; CREATE and
    // DESCRIBE on the topic alice created.
    let mut req = metadata_request(None, false);
    req.include_topic_authorized_operations = true;
    let m: MetadataResponse = alice.call(ApiKey::Metadata, METADATA_V, &req);
    assert_eq!(entry(&m, "visible").topic_authorized_operations, bit(Operation::Read) | bit(Operation::Describe));
    assert_eq!(entry(&m, "fresh").topic_authorized_operations, bit(Operation::Create) | bit(Operation::Describe));
    // Not asked for: omitted.
    assert_eq!(alice.metadata(None, false).topics[0].topic_authorized_operations, i32::MIN);
}

// ---- groups --------------------------------------------------------------------------

fn join_group(c: &mut Client, group: &str) -> JoinGroupResponse {
    let mut p = JoinGroupRequestProtocol::default();
    p.name = sb("range");
    let mut req = JoinGroupRequest::default();
    req.group_id = GroupId(sb(group));
    req.session_timeout_ms = 30_000;
    req.rebalance_timeout_ms = 30_000;
    req.protocol_type = sb("consumer");
    req.protocols = vec![p];
    c.call(ApiKey::JoinGroup, 5, &req)
}

/// A standalone commit (no membership) of partition 0 of each topic; the error per topic.
fn commit(c: &mut Client, group: &str, topics: &[&str], offset: i64) -> Vec<i16> {
    let mut req = OffsetCommitRequest::default();
    req.group_id = GroupId(sb(group));
    req.generation_id_or_member_epoch = -1;
    req.member_id = sb("");
    req.topics = topics
        .iter()
        .map(|t| {
            let mut p = OffsetCommitRequestPartition::default();
            p.partition_index = 0;
            p.committed_offset = offset;
            let mut rt = OffsetCommitRequestTopic::default();
            rt.name = topic_name(t);
            rt.partitions = vec![p];
            rt
        })
        .collect();
    let resp: OffsetCommitResponse = c.call(ApiKey::OffsetCommit, 8, &req);
    resp.topics.iter().map(|t| t.partitions[0].error_code).collect()
}

/// OffsetFetch v8 of one group: partition 0 of `topics`, or every topic with `None`.
fn fetch_offsets(c: &mut Client, group: &str, topics: Option<&[&str]>) -> OffsetFetchResponseGroup {
    let mut g = OffsetFetchRequestGroup::default();
    g.group_id = GroupId(sb(group));
    g.member_epoch = -1;
    g.topics = topics.map(|ts| {
        ts.iter()
            .map(|t| {
                let mut rt = OffsetFetchRequestTopics::default();
                rt.name = topic_name(t);
                rt.partition_indexes = vec![0];
                rt
            })
            .collect()
    });
    let mut req = OffsetFetchRequest::default();
    req.groups = vec![g];
    let mut resp: OffsetFetchResponse = c.call(ApiKey::OffsetFetch, 8, &req);
    resp.groups.remove(0)
}

fn listed_groups(c: &mut Client) -> Vec<String> {
    let resp: ListGroupsResponse = c.call(ApiKey::ListGroups, 4, &ListGroupsRequest::default());
    let mut groups: Vec<String> = resp.groups.iter().map(|g| g.group_id.to_string()).collect();
    groups.sort();
    groups
}

#[test]
fn group_apis_need_their_group_and_topic_acls() {
    let mut s = Secured::start();
    s.admin.create_topic("gt", 1, &[]);
    s.admin.create_topic("gt-closed", 1, &[]);
    s.create_acls(vec![
        allow("alice", ResourceType::Group, "mine", Operation::Read),
        allow("alice", ResourceType::Group, "mine", Operation::Delete),
        allow("alice", ResourceType::Group, "joinable", Operation::Read),
        allow("alice", ResourceType::Topic, "gt", Operation::Read),
    ]);
    // The admin commits first, so that every group exists with offsets alice may not see.
    assert_eq!(commit(&mut s.admin, "mine", &["gt-closed"], 7), [0]);
    assert_eq!(commit(&mut s.admin, "theirs", &["gt"], 3), [0]);
    let mut alice = s.login("alice");

    // Membership APIs: READ on the group.
    assert_eq!(
        join_group(&mut alice, "joinable").error_code,
        ErrorCode::MemberIdRequired.code(),
        "reached the coordinator"
    );
    assert_eq!(join_group(&mut alice, "theirs").error_code, ErrorCode::GroupAuthorizationFailed.code());
    let mut sync = SyncGroupRequest::default();
    sync.group_id = GroupId(sb("theirs"));
    sync.member_id = sb("m");
    sync.generation_id = 1;
    let sync: SyncGroupResponse = alice.call(ApiKey::SyncGroup, 3, &sync);
    assert_eq!(sync.error_code, ErrorCode::GroupAuthorizationFailed.code());
    let mut hb = HeartbeatRequest::default();
    hb.group_id = GroupId(sb("theirs"));
    hb.member_id = sb("m");
    hb.generation_id = 1;
    let hb: HeartbeatResponse = alice.call(ApiKey::Heartbeat, 3, &hb);
    assert_eq!(hb.error_code, ErrorCode::GroupAuthorizationFailed.code());
    let mut leave = LeaveGroupRequest::default();
    leave.group_id = GroupId(sb("theirs"));
    let mut m = MemberIdentity::default();
    m.member_id = sb("m");
    leave.members = vec![m];
    let leave: LeaveGroupResponse = alice.call(ApiKey::LeaveGroup, 3, &leave);
    assert_eq!(leave.error_code, ErrorCode::GroupAuthorizationFailed.code());

    // OffsetCommit: READ on the group, then on each topic.
    assert_eq!(commit(&mut alice, "mine", &["gt", "gt-closed"], 5), [0, ErrorCode::TopicAuthorizationFailed.code()]);
    assert_eq!(commit(&mut alice, "theirs", &["gt", "gt-closed"], 5), [ErrorCode::GroupAuthorizationFailed.code(); 2]);
    let theirs = fetch_offsets(&mut s.admin, "theirs", Some(&["gt"]));
    assert_eq!(theirs.topics[0].partitions[0].committed_offset, 3, "the refused commit changed nothing");

    // OffsetFetch: DESCRIBE on the group (READ implies it); listed topics alice may not
    // DESCRIBE answer TOPIC_AUTHORIZATION_FAILED, and an all-topics fetch leaves them out.
    let mine = fetch_offsets(&mut alice, "mine", Some(&["gt", "gt-closed"]));
    assert_eq!(mine.error_code, 0);
    let part = |g: &OffsetFetchResponseGroup, t: &str| {
        let topic = g.topics.iter().find(|x| x.name.as_str() == t).unwrap_or_else(|| panic!("{t} in {g:?}"));
        (topic.partitions[0].error_code, topic.partitions[0].committed_offset)
    };
    assert_eq!(part(&mine, "gt"), (0, 5));
    assert_eq!(part(&mine, "gt-closed"), (ErrorCode::TopicAuthorizationFailed.code(), -1));
    let all = fetch_offsets(&mut alice, "mine", None);
    assert_eq!(all.error_code, 0);
    let listed: Vec<&str> = all.topics.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(listed, ["gt"]);
    assert_eq!(fetch_offsets(&mut alice, "theirs", None).error_code, ErrorCode::GroupAuthorizationFailed.code());
    // v7: one group, the error at the top.
    let mut v7 = OffsetFetchRequest::default();
    v7.group_id = GroupId(sb("theirs"));
    let v7: OffsetFetchResponse = alice.call(ApiKey::OffsetFetch, 7, &v7);
    assert_eq!(v7.error_code, ErrorCode::GroupAuthorizationFailed.code());

    // DescribeGroups: DESCRIBE per group, authorized operations when asked for.
    let mut req = DescribeGroupsRequest::default();
    req.groups = vec![GroupId(sb("mine")), GroupId(sb("theirs"))];
    req.include_authorized_operations = true;
    let d: DescribeGroupsResponse = alice.call(ApiKey::DescribeGroups, 5, &req);
    assert_eq!(d.groups[0].error_code, 0);
    let expected = bit(Operation::Read) | bit(Operation::Describe) | bit(Operation::Delete);
    assert_eq!(d.groups[0].authorized_operations, expected);
    assert_eq!(d.groups[1].error_code, ErrorCode::GroupAuthorizationFailed.code());

    // ListGroups: without DESCRIBE on the cluster, only the groups alice may DESCRIBE.
    assert!(!listed_groups(&mut alice).contains(&"theirs".to_string()));
    assert!(listed_groups(&mut alice).contains(&"mine".to_string()));
    assert!(listed_groups(&mut s.admin).contains(&"theirs".to_string()));
    s.create_acls(vec![allow("alice", ResourceType::Cluster, "kafka-cluster", Operation::Describe)]);
    assert!(listed_groups(&mut alice).contains(&"theirs".to_string()), "DESCRIBE on the cluster lists all");

    // OffsetDelete: DELETE on the group, READ on each topic.
    let offset_delete = |c: &mut Client, group: &str| {
        let mut req = OffsetDeleteRequest::default();
        req.group_id = GroupId(sb(group));
        req.topics = ["gt", "gt-closed"]
            .iter()
            .map(|t| {
                let mut p = OffsetDeleteRequestPartition::default();
                p.partition_index = 0;
                let mut rt = OffsetDeleteRequestTopic::default();
                rt.name = topic_name(t);
                rt.partitions = vec![p];
                rt
            })
            .collect();
        c.call::<_, OffsetDeleteResponse>(ApiKey::OffsetDelete, 0, &req)
    };
    assert_eq!(offset_delete(&mut alice, "theirs").error_code, ErrorCode::GroupAuthorizationFailed.code());
    let r = offset_delete(&mut alice, "mine");
    assert_eq!(r.error_code, 0);
    let codes: Vec<i16> = r.topics.iter().map(|t| t.partitions[0].error_code).collect();
    assert_eq!(codes, [0, ErrorCode::TopicAuthorizationFailed.code()]);
    assert_eq!(part(&fetch_offsets(&mut s.admin, "mine", Some(&["gt-closed"])), "gt-closed"), (0, 7));

    // DeleteGroups: DELETE per group.
    let mut req = DeleteGroupsRequest::default();
    req.groups_names = vec![GroupId(sb("mine")), GroupId(sb("theirs"))];
    let d: DeleteGroupsResponse = alice.call(ApiKey::DeleteGroups, 2, &req);
    let codes: Vec<(String, i16)> = d.results.iter().map(|r| (r.group_id.to_string(), r.error_code)).collect();
    assert_eq!(codes, [("mine".to_string(), 0), ("theirs".to_string(), ErrorCode::GroupAuthorizationFailed.code())]);
    assert_eq!(listed_groups(&mut s.admin), ["joinable", "theirs"]);
}

// ---- cluster-level APIs --------------------------------------------------------------

fn describe_cluster(c: &mut Client) -> DescribeClusterResponse {
    let mut req = DescribeClusterRequest::default();
    req.include_cluster_authorized_operations = true;
    req.endpoint_type = 1;
    c.call(ApiKey::DescribeCluster, 1, &req)
}

fn describe_configs(c: &mut Client, resource_type: i8, name: &str) -> i16 {
    let mut r = DescribeConfigsResource::default();
    r.resource_type = resource_type;
    r.resource_name = sb(name);
    let mut req = DescribeConfigsRequest::default();
    req.resources = vec![r];
    let resp: DescribeConfigsResponse = c.call(ApiKey::DescribeConfigs, 4, &req);
    resp.results[0].error_code
}

fn alter_configs(c: &mut Client, resource_type: i8, name: &str, key: &str, value: &str) -> i16 {
    let mut op = AlterableConfig::default();
    op.name = sb(key);
    op.config_operation = 0; // SET
    op.value = Some(sb(value));
    let mut r = AlterConfigsResource::default();
    r.resource_type = resource_type;
    r.resource_name = sb(name);
    r.configs = vec![op];
    let mut req = IncrementalAlterConfigsRequest::default();
    req.resources = vec![r];
    let resp: IncrementalAlterConfigsResponse = c.call(ApiKey::IncrementalAlterConfigs, 1, &req);
    resp.responses[0].error_code
}

const CONFIG_TOPIC: i8 = 2;
const CONFIG_BROKER: i8 = 4;

#[test]
fn cluster_and_admin_apis_need_their_acls() {
    let mut s = Secured::start();
    let mut alice = s.login("alice");

    // DescribeCluster refuses nobody (as Kafka): without DESCRIBE on the cluster its
    // authorized operations are none.
    let d = describe_cluster(&mut alice);
    assert_eq!((d.error_code, d.brokers.len()), (0, 1));
    assert_eq!(d.cluster_authorized_operations, 0);
    let everything = describe_cluster(&mut s.admin).cluster_authorized_operations;
    let cluster_ops = [
        Operation::Create,
        Operation::Alter,
        Operation::Describe,
        Operation::ClusterAction,
        Operation::DescribeConfigs,
        Operation::AlterConfigs,
        Operation::IdempotentWrite,
    ];
    assert_eq!(everything, cluster_ops.iter().fold(0, |bits, op| bits | bit(*op)), "a super user may do all");
    s.create_acls(vec![allow("alice", ResourceType::Cluster, "kafka-cluster", Operation::Describe)]);
    assert_eq!(describe_cluster(&mut alice).cluster_authorized_operations, bit(Operation::Describe));

    // CreateTopics: CREATE on the cluster or on the topic.
    let created = alice.create_topics(vec![new_topic("c-denied", 1, 1, &[])], false);
    assert_eq!(created.topics[0].error_code, ErrorCode::TopicAuthorizationFailed.code());
    assert_eq!(
        s.admin.metadata(Some(&["c-denied"]), false).topics[0].error_code,
        ErrorCode::UnknownTopicOrPartition.code()
    );
    s.create_acls(vec![allow("alice", ResourceType::Topic, "c-mine", Operation::Create)]);
    let created = alice.create_topics(vec![new_topic("c-mine", 2, 1, &[])], false);
    let t = &created.topics[0];
    assert_eq!(t.error_code, 0, "{:?}", t.error_message);
    // Without DESCRIBE_CONFIGS the new topic's configs are not shown.
    assert_eq!(t.topic_config_error_code, ErrorCode::TopicAuthorizationFailed.code());
    assert_eq!((t.num_partitions, t.configs.as_ref().map_or(0, Vec::len)), (-1, 0));
    assert_eq!(s.admin.metadata(Some(&["c-mine"]), false).topics[0].partitions.len(), 2);

    // DescribeConfigs / IncrementalAlterConfigs: the topic's or the cluster's ACLs.
    let node = d.brokers[0].broker_id.0.to_string();
    assert_eq!(describe_configs(&mut alice, CONFIG_BROKER, &node), ErrorCode::ClusterAuthorizationFailed.code());
    assert_eq!(describe_configs(&mut alice, CONFIG_TOPIC, "c-mine"), ErrorCode::TopicAuthorizationFailed.code());
    assert_eq!(
        alter_configs(&mut alice, CONFIG_TOPIC, "c-mine", "retention.ms", "60000"),
        ErrorCode::TopicAuthorizationFailed.code()
    );
    assert_eq!(
        alter_configs(&mut alice, CONFIG_BROKER, &node, "log.retention.ms", "1"),
        ErrorCode::ClusterAuthorizationFailed.code()
    );
    s.create_acls(vec![
        allow("alice", ResourceType::Topic, "c-mine", Operation::AlterConfigs),
        allow("alice", ResourceType::Cluster, "kafka-cluster", Operation::DescribeConfigs),
    ]);
    assert_eq!(describe_configs(&mut alice, CONFIG_BROKER, &node), 0);
    assert_eq!(describe_configs(&mut alice, CONFIG_TOPIC, "c-mine"), 0, "ALTER_CONFIGS implies DESCRIBE_CONFIGS");
    assert_eq!(alter_configs(&mut alice, CONFIG_TOPIC, "c-mine", "retention.ms", "60000"), 0);

    // DeleteTopics: DELETE on the topic; by id, a topic alice may not DESCRIBE has no name.
    let mut req = DeleteTopicsRequest::default();
    let mut by_name = DeleteTopicState::default();
    by_name.name = Some(topic_name("c-mine"));
    let mut by_id = DeleteTopicState::default();
    by_id.topic_id = s.topic_id("c-mine");
    req.topics = vec![by_name, by_id];
    req.timeout_ms = 30_000;
    let r: DeleteTopicsResponse = alice.call(ApiKey::DeleteTopics, 6, &req);
    assert_eq!(r.responses[0].error_code, ErrorCode::TopicAuthorizationFailed.code());
    assert_eq!(
        (r.responses[1].error_code, r.responses[1].name.clone()),
        (ErrorCode::TopicAuthorizationFailed.code(), None)
    );
    assert_eq!(s.admin.metadata(Some(&["c-mine"]), false).topics[0].error_code, 0, "still there");

    // CREATE on the cluster allows any topic.
    s.create_acls(vec![allow("alice", ResourceType::Cluster, "kafka-cluster", Operation::Create)]);
    let created = alice.create_topics(vec![new_topic("c-any", 1, 1, &[])], false);
    assert_eq!(created.topics[0].error_code, 0);
}

fn create_partitions(c: &mut Client, topic: &str, count: i32) -> i16 {
    use ringbroker::protocol::messages::create_partitions_request::CreatePartitionsTopic;
    use ringbroker::protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
    let mut t = CreatePartitionsTopic::default();
    t.name = topic_name(topic);
    t.count = count;
    t.assignments = None;
    let mut req = CreatePartitionsRequest::default();
    req.topics = vec![t];
    req.timeout_ms = 30_000;
    let r: CreatePartitionsResponse = c.call(ApiKey::CreatePartitions, 3, &req);
    r.results[0].error_code
}

fn describe_producers(c: &mut Client, topic: &str) -> i16 {
    use ringbroker::protocol::messages::describe_producers_request::TopicRequest;
    use ringbroker::protocol::messages::{DescribeProducersRequest, DescribeProducersResponse};
    let mut t = TopicRequest::default();
    t.name = topic_name(topic);
    t.partition_indexes = vec![0];
    let mut req = DescribeProducersRequest::default();
    req.topics = vec![t];
    let r: DescribeProducersResponse = c.call(ApiKey::DescribeProducers, 0, &req);
    r.topics[0].partitions[0].error_code
}

fn describe_log_dirs(c: &mut Client) -> (i16, usize) {
    use ringbroker::protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse};
    let mut req = DescribeLogDirsRequest::default();
    req.topics = None;
    let r: DescribeLogDirsResponse = c.call(ApiKey::DescribeLogDirs, 4, &req);
    (r.error_code, r.results.len())
}

/// AlterClientQuotas of a client-id's producer rate, then DescribeClientQuotas of it.
fn client_quota(c: &mut Client, client_id: &str) -> (i16, i16) {
    use ringbroker::protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
    use ringbroker::protocol::messages::describe_client_quotas_request::ComponentData;
    use ringbroker::protocol::messages::{
        AlterClientQuotasRequest, AlterClientQuotasResponse, DescribeClientQuotasRequest, DescribeClientQuotasResponse,
    };
    let mut entity = EntityData::default();
    entity.entity_type = sb("client-id");
    entity.entity_name = Some(sb(client_id));
    let mut op = OpData::default();
    op.key = sb("producer_byte_rate");
    op.value = 1_048_576.0;
    let mut e = EntryData::default();
    e.entity = vec![entity];
    e.ops = vec![op];
    let mut req = AlterClientQuotasRequest::default();
    req.entries = vec![e];
    let altered: AlterClientQuotasResponse = c.call(ApiKey::AlterClientQuotas, 1, &req);
    let mut component = ComponentData::default();
    component.entity_type = sb("client-id");
    component.match_type = 2; // any
    component._match = None;
    let mut req = DescribeClientQuotasRequest::default();
    req.components = vec![component];
    let described: DescribeClientQuotasResponse = c.call(ApiKey::DescribeClientQuotas, 1, &req);
    (altered.entries[0].error_code, described.error_code)
}

#[test]
fn the_admin_apis_kafkas_tools_call_need_their_acls() {
    let s = Secured::start();
    let mut admin = Client::connect(s.broker.listener("PLAINTEXT"));
    admin.create_topic("adm", 1, &[]);
    for _ in 0..3 {
        admin.produce_ok("adm", 0, records());
    }
    let mut alice = s.login("alice");

    // CreatePartitions: ALTER on the topic.
    assert_eq!(create_partitions(&mut alice, "adm", 2), ErrorCode::TopicAuthorizationFailed.code());
    assert_eq!(
        create_partitions(&mut alice, "no-such-topic", 2),
        ErrorCode::TopicAuthorizationFailed.code(),
        "before existence"
    );
    s.create_acls(vec![allow("alice", ResourceType::Topic, "adm", Operation::Alter)]);
    assert_eq!(create_partitions(&mut alice, "adm", 2), 0);
    // DeleteRecords: DELETE on the topic.
    assert_eq!(alice.delete_records("adm", 1), (ErrorCode::TopicAuthorizationFailed.code(), -1));
    s.create_acls(vec![allow("alice", ResourceType::Topic, "adm", Operation::Delete)]);
    assert_eq!(alice.delete_records("adm", 1), (0, 1));
    // DescribeProducers: READ on the topic.
    assert_eq!(describe_producers(&mut alice, "adm"), ErrorCode::TopicAuthorizationFailed.code());
    s.create_acls(vec![allow("alice", ResourceType::Topic, "adm", Operation::Read)]);
    assert_eq!(describe_producers(&mut alice, "adm"), 0);
    // DescribeLogDirs: DESCRIBE on the cluster; client quotas: ALTER_CONFIGS / DESCRIBE_CONFIGS.
    assert_eq!(describe_log_dirs(&mut alice), (ErrorCode::ClusterAuthorizationFailed.code(), 0));
    assert_eq!(
        client_quota(&mut alice, "q"),
        (ErrorCode::ClusterAuthorizationFailed.code(), ErrorCode::ClusterAuthorizationFailed.code())
    );
    s.create_acls(vec![
        allow("alice", ResourceType::Cluster, "kafka-cluster", Operation::Describe),
        allow("alice", ResourceType::Cluster, "kafka-cluster", Operation::AlterConfigs),
    ]);
    assert_eq!(describe_log_dirs(&mut alice), (0, 1));
    assert_eq!(client_quota(&mut alice, "q"), (0, 0), "ALTER_CONFIGS implies DESCRIBE_CONFIGS");
}

// ---- producer ids and transactions ---------------------------------------------------

fn init_producer_id(c: &mut Client, transactional_id: Option<&str>) -> InitProducerIdResponse {
    let mut req = InitProducerIdRequest::default();
    req.transactional_id = transactional_id.map(|t| TransactionalId(sb(t)));
    req.transaction_timeout_ms = 60_000;
    req.producer_id = ProducerId(-1);
    req.producer_epoch = -1;
    c.call(ApiKey::InitProducerId, 4, &req)
}

#[test]
fn init_producer_id_needs_idempotent_write_or_write_on_some_topic() {
    let s = Secured::start();
    let mut alice = s.login("alice");
    let mut bob = s.login("bob");
    assert_eq!(init_producer_id(&mut alice, None).error_code, ErrorCode::ClusterAuthorizationFailed.code());
    assert_eq!(init_producer_id(&mut bob, None).error_code, ErrorCode::ClusterAuthorizationFailed.code());

    s.create_acls(vec![
        allow("alice", ResourceType::Topic, "some-topic", Operation::Write),
        allow("bob", ResourceType::Cluster, "kafka-cluster", Operation::IdempotentWrite),
    ]);
    for c in [&mut alice, &mut bob] {
        let r = init_producer_id(c, None);
        assert_eq!(r.error_code, 0);
        assert!(r.producer_id.0 >= 0, "{r:?}");
    }

    // A transactional id needs WRITE on it; past that, this broker has no transactions.
    assert_eq!(
        init_producer_id(&mut alice, Some("tx-a")).error_code,
        ErrorCode::TransactionalIdAuthorizationFailed.code()
    );
    s.create_acls(vec![allow("alice", ResourceType::TransactionalId, "tx-a", Operation::Write)]);
    assert_eq!(init_producer_id(&mut alice, Some("tx-a")).error_code, ErrorCode::InvalidRequest.code());
}

/// `records` with the transactional attribute set (and the CRC fixed up).
fn transactional(mut records: Vec<u8>) -> Vec<u8> {
    records[22] |= 0x10;
    let crc = crc32c::crc32c(&records[21..]);
    records[17..21].copy_from_slice(&crc.to_be_bytes());
    records
}

#[test]
fn transactional_batches_need_write_on_the_transactional_id() {
    let mut s = Secured::start();
    s.admin.create_topic("tx-topic", 1, &[]);
    s.create_acls(vec![allow("alice", ResourceType::Topic, "tx-topic", Operation::Write)]);
    let mut alice = s.login("alice");
    let produce = |c: &mut Client, transactional_id: Option<&str>| {
        let mut req = produce_request("tx-topic", &[(0, transactional(records()))], -1);
        req.transactional_id = transactional_id.map(|t| TransactionalId(sb(t)));
        single_produce(c.call(ApiKey::Produce, PRODUCE_V, &req)).error_code
    };
    assert_eq!(produce(&mut alice, None), ErrorCode::TransactionalIdAuthorizationFailed.code());
    assert_eq!(produce(&mut alice, Some("tx-a")), ErrorCode::TransactionalIdAuthorizationFailed.code());
    s.create_acls(vec![allow("alice", ResourceType::TransactionalId, "tx-a", Operation::Write)]);
    assert_eq!(
        produce(&mut alice, Some("tx-a")),
        ErrorCode::InvalidTxnState.code(),
        "authorized, then refused: no transactions"
    );
    // Plain batches do not ask about the transactional id.
    assert_eq!(alice.produce("tx-topic", 0, records()).error_code, 0);
}

// ---- without an authorizer -----------------------------------------------------------

#[test]
fn without_an_authorizer_everything_is_allowed_and_acls_are_refused() {
    let s = Secured::with_authorizer(false);
    let mut alice = s.login("alice");
    alice.create_topic("free", 1, &[]);
    let offset = alice.produce_ok("free", 0, records());
    assert_eq!(alice.fetch_all("free", 0, offset).len(), 1);
    let user_topics: Vec<String> =
        names(&alice.metadata(None, false)).into_iter().filter(|n| !n.starts_with("__")).collect();
    assert_eq!(user_topics, ["free"]);
    assert_eq!(commit(&mut alice, "any-group", &["free"], 1), [0]);
    assert_eq!(fetch_offsets(&mut alice, "any-group", None).topics.len(), 1);
    assert_eq!(init_producer_id(&mut alice, None).error_code, 0);
    assert_eq!(describe_configs(&mut alice, CONFIG_TOPIC, "free"), 0);
    assert_ne!(describe_cluster(&mut alice).cluster_authorized_operations, 0);

    let refused = s.try_create_acls(vec![allow("alice", ResourceType::Topic, "free", Operation::Read)]);
    assert_eq!(refused.results[0].error_code, ErrorCode::SecurityDisabled.code());
    let mut req = CreateAclsRequest::default();
    req.creations = vec![allow("bob", ResourceType::Topic, "free", Operation::Read)];
    let refused: CreateAclsResponse = alice.call(ApiKey::CreateAcls, 3, &req);
    assert_eq!(refused.results[0].error_code, ErrorCode::SecurityDisabled.code());
}

// ---- the SASL gate -------------------------------------------------------------------

#[test]
fn the_sasl_listener_serves_nothing_before_authentication() {
    let s = Secured::start();
    let sasl = s.broker.listener("SASL_PLAINTEXT");

    let mut c = Client::connect(sasl);
    assert_eq!(c.api_versions().error_code, 0, "ApiVersions is always answered");
    c.send(ApiKey::Metadata, METADATA_V, &metadata_request(None, false));
    assert!(c.wait_closed(Duration::from_secs(10)), "a Metadata request before authentication closes the connection");

    let mut messages = Vec::new();
    for (user, password) in [("alice", "not-her-password"), ("mallory", "not-a-user")] {
        let mut c = Client::connect(sasl);
        let a = sasl_plain(&mut c, user, password);
        assert_eq!(a.error_code, ErrorCode::SaslAuthenticationFailed.code(), "{user}");
        messages.push(a.error_message.map(|m| m.to_string()));
        assert!(c.wait_closed(Duration::from_secs(10)), "a failed login closes the connection");
    }
    assert_eq!(messages[0], messages[1], "a wrong password and an unknown user answer alike");

    // And with the right password the same requests are served.
    let mut alice = s.login("alice");
    assert_eq!(alice.metadata(None, false).brokers.len(), 1);
}
