//! Cases of the data-plane APIs: ApiVersions, Metadata, Produce, Fetch, ListOffsets,
//! OffsetForLeaderEpoch and InitProducerId.

use bytes::Bytes;
use ringbroker::auth::acl::ResourceType;
use ringbroker::protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use ringbroker::protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use ringbroker::protocol::messages::metadata_request::MetadataRequestTopic;
use ringbroker::protocol::messages::offset_for_leader_epoch_request::{OffsetForLeaderPartition, OffsetForLeaderTopic};
use ringbroker::protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use ringbroker::protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, FetchRequest, FetchResponse, InitProducerIdRequest,
    InitProducerIdResponse, ListOffsetsRequest, ListOffsetsResponse, MetadataRequest, MetadataResponse,
    OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, ProduceRequest, ProduceResponse, TopicName,
};
use ringbroker::protocol::ErrorCode;
use support::client;

use super::fixture::{self, all_operations, sbs, Ctx, AUTH_OPS_OMITTED, DATA_TS, DATA_VALUES};
use super::wire::{expect_code, expect_code_msg, Check, Wire};

// ---- ApiVersions -------------------------------------------------------------------------

/// The table at every version, the same as the one the sweep read at v3.
pub(crate) fn api_versions(ctx: &Ctx, v: i16) -> Check {
    let mut w = ctx.plain()?;
    let mut req = ApiVersionsRequest::default();
    if v >= 3 {
        req.client_software_name = sbs("ringbroker-sweep");
        req.client_software_version = sbs("1.0");
    }
    let r: ApiVersionsResponse = w.call(ApiKey::ApiVersions, v, &req)?;
    expect_code("ApiVersions", r.error_code, 0)?;
    let reference: ApiVersionsResponse = ctx.plain()?.call(ApiKey::ApiVersions, 3, &super::table_request())?;
    let ranges = |r: &ApiVersionsResponse| -> Vec<(i16, i16, i16)> {
        r.api_keys.iter().map(|k| (k.api_key, k.min_version, k.max_version)).collect()
    };
    ensure!(ranges(&r) == ranges(&reference), "the v{v} table differs from the v3 one: {:?}", ranges(&r));
    Ok(())
}

// ---- Metadata ----------------------------------------------------------------------------

pub(crate) fn metadata(ctx: &Ctx, v: i16) -> Check {
    let mut w = ctx.plain()?;
    let named = |name: &str| {
        let mut t = MetadataRequestTopic::default();
        t.name = Some(TopicName(sbs(name)));
        t
    };
    // A named topic.
    let mut req = MetadataRequest::default();
    req.topics = Some(vec![named(&ctx.data)]);
    let r: MetadataResponse = w.call(ApiKey::Metadata, v, &req)?;
    check_brokers(ctx, v, &r)?;
    ensure!(r.topics.len() == 1, "{} topics answered for one", r.topics.len());
    check_data_topic(ctx, v, &r.topics[0])?;

    // All topics: null from v1, an empty list at v0.
    let mut req = MetadataRequest::default();
    req.topics = if v == 0 { Some(Vec::new()) } else { None };
    let r: MetadataResponse = w.call(ApiKey::Metadata, v, &req)?;
    check_brokers(ctx, v, &r)?;
    let t = r
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.as_str() == ctx.data))
        .ok_or_else(|| format!("all-topics Metadata does not list {}", ctx.data))?;
    check_data_topic(ctx, v, t)?;

    // Authorized operations, when asked for (v8+; the cluster's only up to v10).
    if v >= 8 {
        let mut req = MetadataRequest::default();
        req.topics = Some(vec![named(&ctx.data)]);
        req.include_topic_authorized_operations = true;
        req.include_cluster_authorized_operations = v <= 10;
        let r: MetadataResponse = w.call(ApiKey::Metadata, v, &req)?;
        let t = r.topics.first().ok_or("no topic answered")?;
        let want = all_operations(ResourceType::Topic);
        ensure!(
            t.topic_authorized_operations == want,
            "topic operations {:#x}, expected {want:#x}",
            t.topic_authorized_operations
        );
        if v <= 10 {
            let want = all_operations(ResourceType::Cluster);
            ensure!(
                r.cluster_authorized_operations == want,
                "cluster operations {:#x}, expected {want:#x}",
                r.cluster_authorized_operations
            );
        }
    }

    // A new topic is created for the asking (implied before v4, asked for from v4). Kafka
    // answers UNKNOWN_TOPIC_OR_PARTITION (older brokers LEADER_NOT_AVAILABLE) until it
    // exists, which clients retry; then it is there with the broker's default partitions.
    let fresh = ctx.name("auto", v);
    let mut req = MetadataRequest::default();
    req.topics = Some(vec![named(&fresh)]);
    req.allow_auto_topic_creation = true;
    let created = |w: &mut Wire| {
        let r: MetadataResponse = w.call(ApiKey::Metadata, v, &req)?;
        let t = r.topics.first().ok_or("no topic answered")?;
        ensure!(
            t.partitions.iter().all(|p| p.leader_id.0 == ctx.node_id),
            "the auto-created topic has partitions {:?}",
            t.partitions
        );
        Ok::<_, String>((t.error_code, t.partitions.len()))
    };
    let (code, _) = created(&mut w)?;
    if code != ErrorCode::LeaderNotAvailable.code() && code != ErrorCode::UnknownTopicOrPartition.code() {
        expect_code("Metadata asking for a new topic", code, 0)?;
    }
    ctx.eventually(|| {
        let (code, partitions) = created(&mut w)?;
        expect_code("Metadata of the auto-created topic", code, 0)?;
        ensure!(partitions > 0, "the auto-created topic has no partitions");
        Ok(())
    })?;

    // An unknown topic, where the client can forbid auto-creation (v4+).
    if v >= 4 {
        let missing = ctx.name("missing", v);
        let mut req = MetadataRequest::default();
        req.topics = Some(vec![named(&missing)]);
        req.allow_auto_topic_creation = false;
        let r: MetadataResponse = w.call(ApiKey::Metadata, v, &req)?;
        let t = r.topics.first().ok_or("no topic answered for an unknown one")?;
        expect_code("Metadata of an unknown topic", t.error_code, ErrorCode::UnknownTopicOrPartition.code())?;
    }
    Ok(())
}

fn check_brokers(ctx: &Ctx, v: i16, r: &MetadataResponse) -> Check {
    if v >= 13 {
        expect_code("Metadata top-level", r.error_code, 0)?;
    }
    let b = r.brokers.iter().find(|b| b.node_id.0 == ctx.node_id).ok_or("Metadata does not list the broker")?;
    ensure!(
        b.host.as_str() == ctx.host && b.port == ctx.port,
        "the broker is at {}:{}, not {}:{}",
        b.host.as_str(),
        b.port,
        ctx.host,
        ctx.port
    );
    if v >= 1 {
        ensure!(r.controller_id.0 == ctx.node_id, "controller {} is not the broker {}", r.controller_id.0, ctx.node_id);
    }
    if v >= 2 {
        ensure!(
            r.cluster_id.as_ref().is_some_and(|c| c.as_str() == ctx.cluster_id),
            "cluster id {:?}, v12 said {}",
            r.cluster_id,
            ctx.cluster_id
        );
    }
    if (8..=10).contains(&v) {
        ensure!(
            r.cluster_authorized_operations == AUTH_OPS_OMITTED,
            "cluster operations {}",
            r.cluster_authorized_operations
        );
    }
    Ok(())
}

fn check_data_topic(
    ctx: &Ctx,
    v: i16,
    t: &ringbroker::protocol::messages::metadata_response::MetadataResponseTopic,
) -> Check {
    expect_code(&format!("Metadata of {}", ctx.data), t.error_code, 0)?;
    ensure!(t.name.as_ref().is_some_and(|n| n.as_str() == ctx.data), "topic name {:?}", t.name);
    if v >= 10 {
        ensure!(t.topic_id == ctx.data_id, "topic id {} where CreateTopics said {}", t.topic_id, ctx.data_id);
    }
    ensure!(!t.is_internal, "{} is said to be internal", ctx.data);
    if v >= 8 {
        ensure!(
            t.topic_authorized_operations == AUTH_OPS_OMITTED,
            "topic operations {}",
            t.topic_authorized_operations
        );
    }
    ensure!(t.partitions.len() == 1, "{} partitions, created with 1", t.partitions.len());
    let p = &t.partitions[0];
    expect_code("partition 0", p.error_code, 0)?;
    let node = ctx.node_id;
    ensure!(
        p.partition_index == 0
            && p.leader_id.0 == node
            && p.replica_nodes.iter().map(|b| b.0).eq([node])
            && p.isr_nodes.iter().map(|b| b.0).eq([node]),
        "partition {} leader {} replicas {:?} isr {:?}",
        p.partition_index,
        p.leader_id.0,
        p.replica_nodes,
        p.isr_nodes
    );
    if v >= 7 {
        ensure!(p.leader_epoch >= 0, "leader epoch {}", p.leader_epoch);
    }
    Ok(())
}

// ---- Produce -----------------------------------------------------------------------------

/// A batch is appended and can be read back; an unknown topic is refused.
pub(crate) fn produce(ctx: &Ctx, v: i16) -> Check {
    let mut w = ctx.plain()?;
    let value = format!("produced-v{v}-{}", ctx.tag);
    let request = |name: &str, id: uuid::Uuid, records: Vec<u8>| {
        let mut p = PartitionProduceData::default();
        p.index = 0;
        p.records = Some(Bytes::from(records));
        let mut t = TopicProduceData::default();
        if v >= 13 {
            t.topic_id = id;
        } else {
            t.name = TopicName(sbs(name));
        }
        t.partition_data = vec![p];
        let mut req = ProduceRequest::default();
        req.acks = -1;
        req.timeout_ms = 30_000;
        req.topic_data = vec![t];
        req
    };
    let batch = client::batch(client::now_ms(), &[value.clone().into_bytes()]);
    let r: ProduceResponse = w.call(ApiKey::Produce, v, &request(&ctx.scratch, ctx.scratch_id, batch.clone()))?;
    let t = r.responses.first().ok_or("Produce answered no topic")?;
    if v >= 13 {
        ensure!(t.topic_id == ctx.scratch_id, "answered topic id {}", t.topic_id);
    } else {
        ensure!(t.name.as_str() == ctx.scratch, "answered topic {:?}", t.name);
    }
    let p = t.partition_responses.first().ok_or("Produce answered no partition")?;
    expect_code_msg("Produce partition 0", p.error_code, 0, &p.error_message)?;
    ensure!(p.index == 0 && p.base_offset >= 0, "partition {} base offset {}", p.index, p.base_offset);
    ensure!(p.log_append_time_ms == -1, "log append time {} with CreateTime", p.log_append_time_ms);
    if v >= 5 {
        ensure!(p.log_start_offset == 0, "log start offset {}", p.log_start_offset);
    }
    let back = fixture::fetch_records(&mut w, &ctx.scratch, p.base_offset)?;
    ensure!(
        back.first().is_some_and(|r| r.offset == p.base_offset && r.value.as_deref() == Some(value.as_bytes())),
        "read back at {}: {:?}",
        p.base_offset,
        back.first()
    );

    // An unknown topic (by name, or by id from v13).
    let r: ProduceResponse =
        w.call(ApiKey::Produce, v, &request(&ctx.name("nowhere", v), uuid::Uuid::new_v4(), batch))?;
    let p = r.responses.first().and_then(|t| t.partition_responses.first()).ok_or("no partition answered")?;
    let want = if v >= 13 { ErrorCode::UnknownTopicId.code() } else { ErrorCode::UnknownTopicOrPartition.code() };
    expect_code("Produce to an unknown topic", p.error_code, want)
}

/// Produce v0-v2 are advertised but not served, as by Kafka 4 (KAFKA-18659: advertised so
/// that librdkafka before 2.11.1 keeps compression): a request with a legacy message set
/// (magic 0 at v0, 1 at v1-v2) closes the connection without an answer, and the broker
/// keeps serving others.
pub(crate) fn produce_unserved(ctx: &Ctx, v: i16) -> Check {
    let magic = if v == 0 { 0 } else { 1 };
    let set = legacy_message_set(magic, client::now_ms(), b"legacy");
    // The v0-v2 body is the v3 one without its leading (null) transactional id.
    let mut p = PartitionProduceData::default();
    p.records = Some(Bytes::from(set));
    let mut t = TopicProduceData::default();
    t.name = TopicName(sbs(&ctx.scratch));
    t.partition_data = vec![p];
    let mut req = ProduceRequest::default();
    req.acks = -1;
    req.timeout_ms = 30_000;
    req.topic_data = vec![t];
    let v3 = Wire::body(ApiKey::Produce, 3, &req)?;
    assert_eq!(&v3[..2], &[0xff, 0xff], "a v3 body starts with a null transactional id");
    let mut w = ctx.plain()?;
    w.send_raw_body(ApiKey::Produce, v, 1, &v3[2..])?;
    w.expect_closed(&format!("Produce v{v}"))?;
    let r: ApiVersionsResponse = ctx.plain()?.call(ApiKey::ApiVersions, 3, &super::table_request())?;
    expect_code("ApiVersions after the closed connection", r.error_code, 0)
}

/// One message of the pre-v2 formats (magic 0 or 1), at offset 0, value only.
fn legacy_message_set(magic: u8, ts: i64, value: &[u8]) -> Vec<u8> {
    let mut msg = vec![magic, 0];
    if magic == 1 {
        msg.extend_from_slice(&ts.to_be_bytes());
    }
    msg.extend_from_slice(&(-1i32).to_be_bytes());
    msg.extend_from_slice(&(value.len() as i32).to_be_bytes());
    msg.extend_from_slice(value);
    let mut set = Vec::new();
    set.extend_from_slice(&0i64.to_be_bytes());
    set.extend_from_slice(&((4 + msg.len()) as i32).to_be_bytes());
    set.extend_from_slice(&crc32(&msg).to_be_bytes());
    set.extend_from_slice(&msg);
    set
}

/// CRC-32 (IEEE), the checksum of the legacy message formats.
fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0xedb8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

// ---- Fetch -------------------------------------------------------------------------------

fn fetch_request(v: i16, topic: &str, id: uuid::Uuid, offset: i64, wait_ms: i32) -> FetchRequest {
    let mut p = FetchPartition::default();
    p.partition = 0;
    p.fetch_offset = offset;
    p.partition_max_bytes = 1 << 20;
    let mut t = FetchTopic::default();
    if v >= 13 {
        t.topic_id = id;
    } else {
        t.topic = TopicName(sbs(topic));
    }
    t.partitions = vec![p];
    let mut req = FetchRequest::default();
    req.max_wait_ms = wait_ms;
    req.min_bytes = if wait_ms > 0 { 1 } else { 0 };
    req.max_bytes = 1 << 20;
    req.topics = vec![t];
    req
}

/// The data topic's records come back whole; the log end answers no records; past it,
/// OFFSET_OUT_OF_RANGE; an unknown topic UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID by id).
pub(crate) fn fetch(ctx: &Ctx, v: i16) -> Check {
    let mut w = ctx.plain()?;
    let one = |w: &mut Wire, topic: &str, id: uuid::Uuid, offset: i64, wait_ms: i32| {
        let r: FetchResponse = w.call(ApiKey::Fetch, v, &fetch_request(v, topic, id, offset, wait_ms))?;
        if v >= 7 {
            expect_code("Fetch top-level", r.error_code, 0)?;
            ensure!(r.session_id == 0, "session id {} for a sessionless fetch", r.session_id);
        }
        ensure!(r.responses.len() == 1, "{} topics answered", r.responses.len());
        let t = &r.responses[0];
        if v >= 13 {
            ensure!(t.topic_id == id, "answered topic id {}", t.topic_id);
        } else {
            ensure!(t.topic.as_str() == topic, "answered topic {:?}", t.topic);
        }
        ensure!(t.partitions.len() == 1, "{} partitions answered", t.partitions.len());
        Ok::<_, String>(t.partitions[0].clone())
    };
    let p = one(&mut w, &ctx.data, ctx.data_id, 0, 1000)?;
    expect_code("Fetch of the data topic", p.error_code, 0)?;
    ensure!(
        p.partition_index == 0 && p.high_watermark == 3 && p.last_stable_offset == 3,
        "partition {} high watermark {} last stable offset {}",
        p.partition_index,
        p.high_watermark,
        p.last_stable_offset
    );
    if v >= 5 {
        ensure!(p.log_start_offset == 0, "log start offset {}", p.log_start_offset);
    }
    if v >= 11 {
        ensure!(p.preferred_read_replica.0 == -1, "preferred read replica {}", p.preferred_read_replica.0);
    }
    let records = client::decode_records(p.records.as_deref().unwrap_or(&[]));
    let got: Vec<(i64, i64, Option<&[u8]>)> =
        records.iter().map(|r| (r.offset, r.timestamp, r.value.as_deref())).collect();
    let want: Vec<(i64, i64, Option<&[u8]>)> =
        (0..3).map(|i| (i as i64, ctx.t0 + DATA_TS[i], Some(DATA_VALUES[i]))).collect();
    ensure!(got == want, "fetched {got:?}, produced {want:?}");

    let p = one(&mut w, &ctx.data, ctx.data_id, 3, 0)?;
    expect_code("Fetch at the log end", p.error_code, 0)?;
    ensure!(p.records.as_ref().is_none_or(|r| r.is_empty()), "records past the log end");

    let p = one(&mut w, &ctx.data, ctx.data_id, 1000, 0)?;
    expect_code("Fetch past the log end", p.error_code, ErrorCode::OffsetOutOfRange.code())?;

    let p = one(&mut w, &ctx.name("nowhere", v), uuid::Uuid::new_v4(), 0, 0)?;
    let want = if v >= 13 { ErrorCode::UnknownTopicId.code() } else { ErrorCode::UnknownTopicOrPartition.code() };
    expect_code("Fetch of an unknown topic", p.error_code, want)
}

// ---- ListOffsets -------------------------------------------------------------------------

pub(crate) const LATEST: i64 = -1;
pub(crate) const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
const LATEST_TIERED: i64 = -5;

fn list_offsets_at(w: &mut Wire, v: i16, topic: &str, timestamp: i64) -> Result<(i16, i64, i64, i32), String> {
    let mut p = ListOffsetsPartition::default();
    p.partition_index = 0;
    p.timestamp = timestamp;
    let mut t = ListOffsetsTopic::default();
    t.name = TopicName(sbs(topic));
    t.partitions = vec![p];
    let mut req = ListOffsetsRequest::default();
    req.replica_id = (-1).into();
    req.topics = vec![t];
    req.timeout_ms = 30_000;
    let r: ListOffsetsResponse = w.call(ApiKey::ListOffsets, v, &req)?;
    ensure!(r.topics.len() == 1 && r.topics[0].name.as_str() == topic, "answered topics {:?}", r.topics);
    ensure!(r.topics[0].partitions.len() == 1, "{} partitions answered", r.topics[0].partitions.len());
    let p = &r.topics[0].partitions[0];
    ensure!(p.partition_index == 0, "answered partition {}", p.partition_index);
    Ok((p.error_code, p.offset, p.timestamp, p.leader_epoch))
}

/// Every special timestamp the version knows, and real timestamps, on the data topic.
pub(crate) fn list_offsets(ctx: &Ctx, v: i16) -> Check {
    let mut w = ctx.plain()?;
    let t0 = ctx.t0;
    // (what, timestamp, offset, timestamp answered)
    let mut asks: Vec<(&str, i64, i64, i64)> = vec![
        ("latest (-1)", LATEST, 3, -1),
        ("earliest (-2)", EARLIEST, 0, -1),
        ("the first record at or after t0+500", t0 + 500, 1, t0 + DATA_TS[1]),
        ("t0 exactly", t0, 0, t0),
        ("a timestamp after every record", t0 + 10_000_000, -1, -1),
    ];
    if v >= 7 {
        asks.push(("max timestamp (-3)", MAX_TIMESTAMP, 1, t0 + DATA_TS[1]));
    }
    if v >= 8 {
        asks.push(("earliest local (-4)", EARLIEST_LOCAL, 0, -1));
    }
    if v >= 9 {
        asks.push(("latest tiered (-5)", LATEST_TIERED, -1, -1));
    }
    for (what, ts, offset, timestamp) in asks {
        let (code, got_offset, got_ts, epoch) = list_offsets_at(&mut w, v, &ctx.data, ts)?;
        expect_code(&format!("ListOffsets {what}"), code, 0)?;
        ensure!(
            (got_offset, got_ts) == (offset, timestamp),
            "ListOffsets {what}: offset {got_offset} timestamp {got_ts}, expected {offset} and {timestamp}"
        );
        if v >= 4 {
            let want = if offset >= 0 { 0 } else { -1 };
            ensure!(epoch == want, "ListOffsets {what}: leader epoch {epoch}, expected {want}");
        }
    }
    let (code, ..) = list_offsets_at(&mut w, v, &ctx.name("nowhere", v), LATEST)?;
    expect_code("ListOffsets of an unknown topic", code, ErrorCode::UnknownTopicOrPartition.code())
}

// ---- OffsetForLeaderEpoch ----------------------------------------------------------------

/// The end offset of epoch 0 is the log end of the data topic.
pub(crate) fn offset_for_leader_epoch(ctx: &Ctx, v: i16) -> Check {
    let mut w = ctx.plain()?;
    let ask = |w: &mut Wire, topic: &str| {
        let mut p = OffsetForLeaderPartition::default();
        p.partition = 0;
        p.current_leader_epoch = -1;
        p.leader_epoch = 0;
        let mut t = OffsetForLeaderTopic::default();
        t.topic = TopicName(sbs(topic));
        t.partitions = vec![p];
        let mut req = OffsetForLeaderEpochRequest::default();
        req.replica_id = (-1).into();
        req.topics = vec![t];
        let r: OffsetForLeaderEpochResponse = w.call(ApiKey::OffsetForLeaderEpoch, v, &req)?;
        let t = r.topics.first().ok_or("no topic answered")?;
        ensure!(t.topic.as_str() == topic, "answered topic {:?}", t.topic);
        t.partitions.first().cloned().ok_or_else(|| "no partition answered".to_string())
    };
    let p = ask(&mut w, &ctx.data)?;
    expect_code("OffsetForLeaderEpoch of the data topic", p.error_code, 0)?;
    ensure!(
        p.partition == 0 && p.leader_epoch == 0 && p.end_offset == 3,
        "partition {} epoch {} end offset {}, expected epoch 0 ending at 3",
        p.partition,
        p.leader_epoch,
        p.end_offset
    );
    let p = ask(&mut w, &ctx.name("nowhere", v))?;
    expect_code("OffsetForLeaderEpoch of an unknown topic", p.error_code, ErrorCode::UnknownTopicOrPartition.code())
}

// ---- InitProducerId ----------------------------------------------------------------------

/// An idempotent producer gets an id and epoch 0, and its first batch is accepted.
pub(crate) fn init_producer_id(ctx: &Ctx, v: i16) -> Check {
    let mut w = ctx.plain()?;
    let mut req = InitProducerIdRequest::default();
    req.transactional_id = None;
    req.transaction_timeout_ms = 60_000;
    let r: InitProducerIdResponse = w.call(ApiKey::InitProducerId, v, &req)?;
    expect_code("InitProducerId", r.error_code, 0)?;
    ensure!(
        r.producer_id.0 >= 0 && r.producer_epoch == 0,
        "producer id {} epoch {}",
        r.producer_id.0,
        r.producer_epoch
    );
    let batch = fixture::idempotent_batch(r.producer_id.0, r.producer_epoch, 0, client::now_ms(), &[b"idempotent"]);
    fixture::produce(&mut w, &ctx.scratch, batch)?;
    Ok(())
}
