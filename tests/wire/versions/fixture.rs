//! What the cases run against: the brokers (started here, or named by `SWEEP_*` variables
//! to sweep another broker by hand), a topic with known records, and the requests at fixed
//! versions that cases use to set up state and to look at its effects. Only the request
//! under test varies its version; these helpers use versions every client sends.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes};
use ringbroker::auth::scram::Mechanism;
use ringbroker::protocol::messages::create_topics_request::CreatableTopic;
use ringbroker::protocol::messages::describe_configs_request::DescribeConfigsResource;
use ringbroker::protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use ringbroker::protocol::messages::join_group_request::JoinGroupRequestProtocol;
use ringbroker::protocol::messages::leave_group_request::MemberIdentity;
use ringbroker::protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use ringbroker::protocol::messages::metadata_request::MetadataRequestTopic;
use ringbroker::protocol::messages::metadata_response::MetadataResponseTopic;
use ringbroker::protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use ringbroker::protocol::messages::offset_fetch_request::{OffsetFetchRequestGroup, OffsetFetchRequestTopics};
use ringbroker::protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use ringbroker::protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use ringbroker::protocol::messages::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, DescribeConfigsRequest, DescribeConfigsResponse,
    DescribeGroupsRequest, DescribeGroupsResponse, FetchRequest, FetchResponse, FindCoordinatorRequest,
    FindCoordinatorResponse, GroupId, InitProducerIdRequest, InitProducerIdResponse, JoinGroupRequest,
    JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse, ListOffsetsRequest, ListOffsetsResponse, MetadataRequest,
    MetadataResponse, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse,
    ProduceRequest, ProduceResponse, SyncGroupRequest, SyncGroupResponse, TopicName,
};
use ringbroker::protocol::ErrorCode;
use support::Broker;
use support::{client, security};

use super::wire::{expect_code, expect_code_msg, Check, Wire};

/// Kafka's ConfigResource types and ConfigSource values.
pub(crate) const RESOURCE_TOPIC: i8 = 2;
pub(crate) const RESOURCE_BROKER: i8 = 4;
pub(crate) const SOURCE_TOPIC: i8 = 1;

/// "Authorized operations were not requested."
pub(crate) const AUTH_OPS_OMITTED: i32 = i32::MIN;

/// The authorized-operations bits Kafka reports for a principal allowed everything (no
/// authorizer): one bit per operation it defines for the resource type.
pub(crate) fn all_operations(resource: ringbroker::auth::acl::ResourceType) -> i32 {
    use ringbroker::auth::acl::Operation::*;
    use ringbroker::auth::acl::ResourceType;
    let ops: &[ringbroker::auth::acl::Operation] = match resource {
        ResourceType::Topic => &[Read, Write, Create, Delete, Alter, Describe, DescribeConfigs, AlterConfigs],
        ResourceType::Group => &[Read, Describe, Delete, DescribeConfigs, AlterConfigs],
        ResourceType::Cluster => {
            &[Create, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite]
        }
        _ => &[],
    };
    ops.iter().fold(0, |bits, op| bits | 1 << op.code())
}

/// The SASL user the sweep logs in as (`SWEEP_SASL_USER` / `SWEEP_SASL_PASSWORD` for
/// another broker, whose PLAIN users are its own configuration).
pub(crate) struct SaslUser {
    pub addr: SocketAddr,
    pub user: String,
    pub password: String,
}

/// The brokers a sweep runs against.
pub(crate) struct Targets {
    /// A PLAINTEXT listener: every case but the SASL ones.
    pub plain: SocketAddr,
    /// Whether `plain`'s broker enforces ACLs (then the ACL APIs do not answer
    /// SECURITY_DISABLED there).
    pub plain_has_authorizer: bool,
    /// A SASL_PLAINTEXT listener with a PLAIN user.
    pub sasl: Option<SaslUser>,
    /// A PLAINTEXT listener of a broker with an authorizer, whose clients are super users.
    pub authz: Option<SocketAddr>,
    /// The data directory of `plain`'s broker, when it is one started here.
    pub data_dir: Option<PathBuf>,
    /// Another broker, swept by hand: versions without a case are reported, not failed.
    pub external: bool,
    /// How long a change may take to show (Kafka applies metadata changes asynchronously).
    pub settle: Duration,
    _brokers: Vec<Broker>,
}

impl Targets {
    /// Ringbroker twice: one broker with PLAINTEXT and SASL_PLAINTEXT listeners and no
    /// authorizer, one with an authorizer whose PLAINTEXT clients are super users. Or, with
    /// `SWEEP_BROKER=HOST:PORT` (and optionally `SWEEP_SASL_BROKER`, `SWEEP_AUTHZ_BROKER`),
    /// the brokers named there.
    pub(crate) fn start() -> Targets {
        let addr = |var: &str| {
            std::env::var(var).ok().map(|v| v.parse::<SocketAddr>().unwrap_or_else(|e| panic!("{var}={v}: {e}")))
        };
        let (user, password) = (
            std::env::var("SWEEP_SASL_USER").unwrap_or_else(|_| "sweeper".into()),
            std::env::var("SWEEP_SASL_PASSWORD").unwrap_or_else(|_| "sweeper-pw".into()),
        );
        if let Some(plain) = addr("SWEEP_BROKER") {
            let authz = addr("SWEEP_AUTHZ_BROKER");
            return Targets {
                plain,
                plain_has_authorizer: authz == Some(plain),
                sasl: addr("SWEEP_SASL_BROKER").map(|addr| SaslUser { addr, user, password }),
                authz,
                data_dir: None,
                external: true,
                settle: Duration::from_secs(15),
                _brokers: Vec::new(),
            };
        }
        let quick_groups = ["--group-initial-rebalance-delay-ms", "0"];
        let mut args = vec!["--listeners", "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"];
        args.extend(quick_groups);
        let open = Broker::start_args(&args);
        security::add_user(open.listener("PLAINTEXT"), &user, &password, Mechanism::Sha512);
        let mut args: Vec<&str> = security::secured_args(true).to_vec();
        args.extend(quick_groups);
        let guarded = Broker::start_args(&args);
        Targets {
            plain: open.listener("PLAINTEXT"),
            plain_has_authorizer: false,
            sasl: Some(SaslUser { addr: open.listener("SASL_PLAINTEXT"), user, password }),
            authz: Some(guarded.listener("PLAINTEXT")),
            data_dir: Some(open.data_dir.clone()),
            external: false,
            settle: Duration::from_secs(3),
            _brokers: vec![open, guarded],
        }
    }
}

/// The timestamps of the data topic's records: 0 at `t0`, 1 at `t0 + 2000`, 2 at
/// `t0 + 1000` (so the largest timestamp is not the last offset).
pub(crate) const DATA_TS: [i64; 3] = [0, 2000, 1000];
pub(crate) const DATA_VALUES: [&[u8]; 3] = [b"sweep-0", b"sweep-1", b"sweep-2"];

pub(crate) struct Ctx {
    pub t: Targets,
    /// Makes every name of this run new, so that sweeping one broker twice works.
    pub tag: String,
    pub node_id: i32,
    pub host: String,
    pub port: i32,
    pub cluster_id: String,
    /// One partition holding the three records of `DATA_TS`/`DATA_VALUES`, in a batch of
    /// two and a batch of one, with `max.message.bytes` set on the topic.
    pub data: String,
    pub data_id: uuid::Uuid,
    pub t0: i64,
    /// One partition that Produce cases append to.
    pub scratch: String,
    pub scratch_id: uuid::Uuid,
    serial: Cell<u32>,
}

/// The data topic's own setting, as DescribeConfigs must show it.
pub(crate) const DATA_CONFIG: (&str, &str) = ("max.message.bytes", "1000012");

impl Ctx {
    pub(crate) fn new(t: Targets) -> Result<Ctx, String> {
        let tag = format!("{:x}", client::now_ms());
        let mut w = Wire::connect(t.plain)?;
        let m: MetadataResponse = w.call(ApiKey::Metadata, 12, &MetadataRequest::default())?;
        let b = m.brokers.first().ok_or("Metadata lists no broker")?;
        let mut ctx = Ctx {
            node_id: b.node_id.0,
            host: b.host.to_string(),
            port: b.port,
            cluster_id: m.cluster_id.as_ref().map(|c| c.to_string()).unwrap_or_default(),
            data: format!("sweep-data-{tag}"),
            data_id: uuid::Uuid::nil(),
            t0: client::now_ms() - 3_600_000,
            scratch: format!("sweep-scratch-{tag}"),
            scratch_id: uuid::Uuid::nil(),
            tag,
            t,
            serial: Cell::new(0),
        };
        ctx.data_id = ctx.create_topic(&ctx.data, 1, &[DATA_CONFIG])?;
        ctx.scratch_id = ctx.create_topic(&ctx.scratch, 1, &[])?;
        let ts = |i: usize| ctx.t0 + DATA_TS[i];
        let first = client::build_batch_with_timestamps(&[(ts(0), DATA_VALUES[0]), (ts(1), DATA_VALUES[1])]);
        let second = client::build_batch_with_timestamps(&[(ts(2), DATA_VALUES[2])]);
        let mut w = Wire::connect(ctx.t.plain)?;
        produce(&mut w, &ctx.data, first)?;
        produce(&mut w, &ctx.data, second)?;
        ctx.coordinators_ready(&mut w)?;
        Ok(ctx)
    }

    /// A freshly started Kafka answers group and producer-id requests with retriable
    /// coordinator errors until it has created (on the first FindCoordinator) and loaded its
    /// internal topics: wait for those here (a first JoinGroup for groups all over
    /// `__consumer_offsets`), so that cases see a broker at work.
    fn coordinators_ready(&self, w: &mut Wire) -> Check {
        let end = Instant::now() + Duration::from_secs(90);
        loop {
            let mut not_ready = None;
            for i in 0..100 {
                let group = format!("sweep-warm-up-{i}-{}", self.tag);
                if let Err(e) = find_coordinator(w, self, &group) {
                    not_ready = Some(e);
                    break;
                }
                let r: JoinGroupResponse = w.call(ApiKey::JoinGroup, 9, &join_request(&group, "", &[]))?;
                if let Err(e) = expect_code("a first JoinGroup v9", r.error_code, ErrorCode::MemberIdRequired.code()) {
                    not_ready = Some(e);
                    break;
                }
            }
            let producer_ids = init_producer_id(w);
            match (not_ready, producer_ids) {
                (None, Ok(_)) => return Ok(()),
                (_, Err(e)) if !self.t.external => return Err(e),
                (Some(e), _) if !self.t.external => return Err(e),
                (e, p) if Instant::now() >= end => {
                    return Err(format!("the coordinators are not ready after 90 s: {e:?} {p:?}"))
                }
                _ => std::thread::sleep(Duration::from_millis(200)),
            }
        }
    }

    /// A name no other case of this run uses: `sweep-<kind>-v<version>-<n>-<tag>`.
    pub(crate) fn name(&self, kind: &str, version: i16) -> String {
        let n = self.serial.get();
        self.serial.set(n + 1);
        format!("sweep-{kind}-v{version}-{n}-{}", self.tag)
    }

    pub(crate) fn plain(&self) -> Result<Wire, String> {
        Wire::connect(self.t.plain)
    }

    /// Retries `check` until it passes or `settle` has gone by; the last failure otherwise.
    pub(crate) fn eventually(&self, mut check: impl FnMut() -> Check) -> Check {
        let end = Instant::now() + self.t.settle;
        loop {
            match check() {
                Ok(()) => return Ok(()),
                Err(e) if Instant::now() >= end => return Err(e),
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    /// CreateTopics v7 (replication factor 1), then waits until Metadata shows the topic with
    /// a leader for every partition; returns its id.
    pub(crate) fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        configs: &[(&str, &str)],
    ) -> Result<uuid::Uuid, String> {
        let mut w = self.plain()?;
        let mut req = CreateTopicsRequest::default();
        req.topics = vec![new_topic(name, partitions, configs)];
        req.timeout_ms = 30_000;
        let r: CreateTopicsResponse = w.call(ApiKey::CreateTopics, 7, &req)?;
        let t = r.topics.first().ok_or("CreateTopics answered no topic")?;
        expect_code_msg(&format!("creating {name}"), t.error_code, 0, &t.error_message)?;
        self.eventually(|| {
            let t = topic_metadata(&mut w, name)?;
            expect_code(&format!("Metadata of {name}"), t.error_code, 0)?;
            ensure!(
                t.partitions.len() == partitions as usize && t.partitions.iter().all(|p| p.leader_id.0 >= 0),
                "{name} has {} partitions with leaders {:?}",
                t.partitions.len(),
                t.partitions.iter().map(|p| p.leader_id.0).collect::<Vec<_>>()
            );
            Ok(())
        })?;
        Ok(t.topic_id)
    }
}

pub(crate) use support::client::sb as sbs;

/// A topic of `partitions` (replication factor 1) with `configs`, for CreateTopics.
pub(crate) fn new_topic(name: &str, partitions: i32, configs: &[(&str, &str)]) -> CreatableTopic {
    client::new_topic(name, partitions, 1, configs)
}

/// Metadata v12 of one topic, without creating it.
pub(crate) fn topic_metadata(w: &mut Wire, name: &str) -> Result<MetadataResponseTopic, String> {
    let mut t = MetadataRequestTopic::default();
    t.name = Some(TopicName(sbs(name)));
    let mut req = MetadataRequest::default();
    req.topics = Some(vec![t]);
    req.allow_auto_topic_creation = false;
    let r: MetadataResponse = w.call(ApiKey::Metadata, 12, &req)?;
    r.topics.into_iter().next().ok_or_else(|| format!("Metadata answered no topic for {name}"))
}

/// Produce v9, acks=-1, to partition 0; returns the base offset.
pub(crate) fn produce(w: &mut Wire, topic: &str, batch: Vec<u8>) -> Result<i64, String> {
    let mut p = PartitionProduceData::default();
    p.index = 0;
    p.records = Some(Bytes::from(batch));
    let mut t = TopicProduceData::default();
    t.name = TopicName(sbs(topic));
    t.partition_data = vec![p];
    let mut req = ProduceRequest::default();
    req.acks = -1;
    req.timeout_ms = 30_000;
    req.topic_data = vec![t];
    let r: ProduceResponse = w.call(ApiKey::Produce, 9, &req)?;
    let p = r.responses.first().and_then(|t| t.partition_responses.first()).ok_or("Produce answered no partition")?;
    expect_code_msg(&format!("producing to {topic}"), p.error_code, 0, &p.error_message)?;
    Ok(p.base_offset)
}

/// The records of partition 0 from `offset` (Fetch v12, one read).
pub(crate) fn fetch_records(w: &mut Wire, topic: &str, offset: i64) -> Result<Vec<client::Record>, String> {
    let mut p = FetchPartition::default();
    p.partition = 0;
    p.fetch_offset = offset;
    p.partition_max_bytes = 1 << 20;
    let mut t = FetchTopic::default();
    t.topic = TopicName(sbs(topic));
    t.partitions = vec![p];
    let mut req = FetchRequest::default();
    req.max_bytes = 1 << 20;
    req.topics = vec![t];
    let r: FetchResponse = w.call(ApiKey::Fetch, 12, &req)?;
    let p = r.responses.first().and_then(|t| t.partitions.first()).ok_or("Fetch answered no partition")?;
    expect_code(&format!("fetching {topic}"), p.error_code, 0)?;
    let records = client::decode_records(p.records.as_deref().unwrap_or(&[]));
    Ok(records.into_iter().filter(|r| r.offset >= offset).collect())
}

/// ListOffsets v7 of partition 0: (offset, timestamp).
pub(crate) fn list_offset(w: &mut Wire, topic: &str, timestamp: i64) -> Result<(i64, i64), String> {
    let mut p = ListOffsetsPartition::default();
    p.partition_index = 0;
    p.timestamp = timestamp;
    let mut t = ListOffsetsTopic::default();
    t.name = TopicName(sbs(topic));
    t.partitions = vec![p];
    let mut req = ListOffsetsRequest::default();
    req.replica_id = (-1).into();
    req.topics = vec![t];
    let r: ListOffsetsResponse = w.call(ApiKey::ListOffsets, 7, &req)?;
    let p = r.topics.first().and_then(|t| t.partitions.first()).ok_or("ListOffsets answered no partition")?;
    expect_code(&format!("ListOffsets {timestamp} of {topic}"), p.error_code, 0)?;
    Ok((p.offset, p.timestamp))
}

/// A topic's configs by DescribeConfigs v4: name → (value, source).
pub(crate) fn topic_configs(w: &mut Wire, topic: &str) -> Result<BTreeMap<String, (Option<String>, i8)>, String> {
    let mut res = DescribeConfigsResource::default();
    res.resource_type = RESOURCE_TOPIC;
    res.resource_name = sbs(topic);
    res.configuration_keys = None;
    let mut req = DescribeConfigsRequest::default();
    req.resources = vec![res];
    let r: DescribeConfigsResponse = w.call(ApiKey::DescribeConfigs, 4, &req)?;
    let res = r.results.first().ok_or("DescribeConfigs answered no resource")?;
    expect_code_msg(&format!("DescribeConfigs of {topic}"), res.error_code, 0, &res.error_message)?;
    Ok(res
        .configs
        .iter()
        .map(|c| (c.name.to_string(), (c.value.as_ref().map(|v| v.to_string()), c.config_source)))
        .collect())
}

/// InitProducerId v4 for an idempotent producer: (id, epoch).
pub(crate) fn init_producer_id(w: &mut Wire) -> Result<(i64, i16), String> {
    let mut req = InitProducerIdRequest::default();
    req.transactional_id = None;
    req.transaction_timeout_ms = 60_000;
    let r: InitProducerIdResponse = w.call(ApiKey::InitProducerId, 4, &req)?;
    expect_code("InitProducerId", r.error_code, 0)?;
    Ok((r.producer_id.0, r.producer_epoch))
}

/// A batch of `values` (all at `ts`) from an idempotent producer, starting at `sequence`.
pub(crate) fn idempotent_batch(producer_id: i64, epoch: i16, sequence: i32, ts: i64, values: &[&[u8]]) -> Vec<u8> {
    let mut b = ringbroker::protocol::batch::build(ts, values);
    b[43..51].copy_from_slice(&producer_id.to_be_bytes());
    b[51..53].copy_from_slice(&epoch.to_be_bytes());
    b[53..57].copy_from_slice(&sequence.to_be_bytes());
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

// ---- consumer groups -------------------------------------------------------------------

pub(crate) const PROTOCOL_TYPE: &str = "consumer";
pub(crate) const PROTOCOL: &str = "range";
pub(crate) const SESSION_TIMEOUT_MS: i32 = 30_000;

fn put_str(b: &mut Vec<u8>, s: &str) {
    b.put_i16(s.len() as i16);
    b.put_slice(s.as_bytes());
}

/// A ConsumerProtocolSubscription v0 for `topics`.
pub(crate) fn subscription(topics: &[&str]) -> Bytes {
    let mut b = Vec::new();
    b.put_i16(0);
    b.put_i32(topics.len() as i32);
    for t in topics {
        put_str(&mut b, t);
    }
    b.put_i32(-1); // no user data
    Bytes::from(b)
}

/// A ConsumerProtocolAssignment v0 giving partition 0 of each topic.
pub(crate) fn assignment(topics: &[&str]) -> Bytes {
    let mut b = Vec::new();
    b.put_i16(0);
    b.put_i32(topics.len() as i32);
    for t in topics {
        put_str(&mut b, t);
        b.put_i32(1);
        b.put_i32(0);
    }
    b.put_i32(-1);
    Bytes::from(b)
}

pub(crate) fn join_request(group: &str, member_id: &str, topics: &[&str]) -> JoinGroupRequest {
    let mut p = JoinGroupRequestProtocol::default();
    p.name = sbs(PROTOCOL);
    p.metadata = subscription(topics);
    let mut req = JoinGroupRequest::default();
    req.group_id = GroupId(sbs(group));
    req.session_timeout_ms = SESSION_TIMEOUT_MS;
    req.rebalance_timeout_ms = SESSION_TIMEOUT_MS;
    req.member_id = sbs(member_id);
    req.protocol_type = sbs(PROTOCOL_TYPE);
    req.protocols = vec![p];
    req
}

/// The only member of a group, on its own connection.
pub(crate) struct Member {
    pub w: Wire,
    pub group: String,
    pub id: String,
    pub generation: i32,
    pub topics: Vec<String>,
}

impl Member {
    fn topic_refs(&self) -> Vec<&str> {
        self.topics.iter().map(String::as_str).collect()
    }

    /// SyncGroup v5 as the leader, assigning itself partition 0 of its topics.
    pub(crate) fn sync(&mut self) -> Check {
        let mut a = SyncGroupRequestAssignment::default();
        a.member_id = sbs(&self.id);
        a.assignment = assignment(&self.topic_refs());
        let mut req = SyncGroupRequest::default();
        req.group_id = GroupId(sbs(&self.group));
        req.generation_id = self.generation;
        req.member_id = sbs(&self.id);
        req.protocol_type = Some(sbs(PROTOCOL_TYPE));
        req.protocol_name = Some(sbs(PROTOCOL));
        req.assignments = vec![a];
        let r: SyncGroupResponse = self.w.call(ApiKey::SyncGroup, 5, &req)?;
        expect_code(&format!("SyncGroup v5 of {}", self.group), r.error_code, 0)
    }

    /// LeaveGroup v5.
    pub(crate) fn leave(&mut self) -> Check {
        let mut m = MemberIdentity::default();
        m.member_id = sbs(&self.id);
        let mut req = LeaveGroupRequest::default();
        req.group_id = GroupId(sbs(&self.group));
        req.members = vec![m];
        let r: LeaveGroupResponse = self.w.call(ApiKey::LeaveGroup, 5, &req)?;
        expect_code(&format!("LeaveGroup v5 of {}", self.group), r.error_code, 0)?;
        expect_code("LeaveGroup v5 member", r.members.first().map_or(-1, |m| m.error_code), 0)
    }
}

/// FindCoordinator v4 of one group: it must be the broker itself.
pub(crate) fn find_coordinator(w: &mut Wire, ctx: &Ctx, group: &str) -> Check {
    let mut req = FindCoordinatorRequest::default();
    req.coordinator_keys = vec![sbs(group)];
    let r: FindCoordinatorResponse = w.call(ApiKey::FindCoordinator, 4, &req)?;
    let c = r.coordinators.first().ok_or("FindCoordinator answered no coordinator")?;
    expect_code_msg(&format!("FindCoordinator v4 of {group}"), c.error_code, 0, &c.error_message)?;
    ensure!(c.node_id.0 == ctx.node_id, "the coordinator of {group} is node {}", c.node_id.0);
    Ok(())
}

/// FindCoordinator, then JoinGroup v9 as a new member (asked for a member id first, then
/// joining with it), subscribed to `topics`.
pub(crate) fn join(ctx: &Ctx, group: &str, topics: &[&str]) -> Result<Member, String> {
    let mut w = ctx.plain()?;
    find_coordinator(&mut w, ctx, group)?;
    let first: JoinGroupResponse = w.call(ApiKey::JoinGroup, 9, &join_request(group, "", topics))?;
    expect_code(&format!("first JoinGroup v9 of {group}"), first.error_code, ErrorCode::MemberIdRequired.code())?;
    let r: JoinGroupResponse = w.call(ApiKey::JoinGroup, 9, &join_request(group, first.member_id.as_str(), topics))?;
    expect_code(&format!("JoinGroup v9 of {group}"), r.error_code, 0)?;
    Ok(Member {
        w,
        group: group.to_string(),
        id: r.member_id.to_string(),
        generation: r.generation_id,
        topics: topics.iter().map(|t| t.to_string()).collect(),
    })
}

/// A group whose one member has joined and synced (Stable), subscribed to the data topic.
pub(crate) fn stable_member(ctx: &Ctx, group: &str) -> Result<Member, String> {
    let mut m = join(ctx, group, &[&ctx.data])?;
    m.sync()?;
    Ok(m)
}

/// OffsetCommit v8 of `offsets` (topic, partition, offset) with metadata "sweep": as a
/// member, or with generation -1 and no member id for a group without members.
pub(crate) fn commit(w: &mut Wire, group: &str, member: Option<(&str, i32)>, offsets: &[(&str, i64)]) -> Check {
    let mut req = OffsetCommitRequest::default();
    req.group_id = GroupId(sbs(group));
    let (id, generation) = member.unwrap_or(("", -1));
    req.member_id = sbs(id);
    req.generation_id_or_member_epoch = generation;
    req.topics = offsets
        .iter()
        .map(|(topic, offset)| {
            let mut p = OffsetCommitRequestPartition::default();
            p.partition_index = 0;
            p.committed_offset = *offset;
            p.committed_leader_epoch = 0;
            p.committed_metadata = Some(sbs("sweep"));
            let mut t = OffsetCommitRequestTopic::default();
            t.name = TopicName(sbs(topic));
            t.partitions = vec![p];
            t
        })
        .collect();
    let r: OffsetCommitResponse = w.call(ApiKey::OffsetCommit, 8, &req)?;
    for t in &r.topics {
        for p in &t.partitions {
            expect_code(
                &format!("OffsetCommit v8 of {group} {}-{}", t.name.as_str(), p.partition_index),
                p.error_code,
                0,
            )?;
        }
    }
    Ok(())
}

/// The committed offset of partition 0 of `topic` for `group` (OffsetFetch v8; -1: none).
pub(crate) fn committed(w: &mut Wire, group: &str, topic: &str) -> Result<i64, String> {
    let mut t = OffsetFetchRequestTopics::default();
    t.name = TopicName(sbs(topic));
    t.partition_indexes = vec![0];
    let mut g = OffsetFetchRequestGroup::default();
    g.group_id = GroupId(sbs(group));
    g.topics = Some(vec![t]);
    let mut req = OffsetFetchRequest::default();
    req.groups = vec![g];
    let r: OffsetFetchResponse = w.call(ApiKey::OffsetFetch, 8, &req)?;
    let g = r.groups.first().ok_or("OffsetFetch answered no group")?;
    expect_code(&format!("OffsetFetch v8 of {group}"), g.error_code, 0)?;
    let p = g.topics.first().and_then(|t| t.partitions.first()).ok_or("OffsetFetch answered no partition")?;
    expect_code(&format!("OffsetFetch v8 of {group} {topic}-0"), p.error_code, 0)?;
    Ok(p.committed_offset)
}

/// A group's state by DescribeGroups v5.
pub(crate) fn group_state(w: &mut Wire, group: &str) -> Result<String, String> {
    let mut req = DescribeGroupsRequest::default();
    req.groups = vec![GroupId(sbs(group))];
    let r: DescribeGroupsResponse = w.call(ApiKey::DescribeGroups, 5, &req)?;
    let g = r.groups.first().ok_or("DescribeGroups answered no group")?;
    expect_code(&format!("DescribeGroups v5 of {group}"), g.error_code, 0)?;
    Ok(g.group_state.to_string())
}
