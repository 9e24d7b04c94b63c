//! Cases of APIs the broker is about to serve, with Apache Kafka's semantics: CreatePartitions,
//! DeleteRecords, DescribeLogDirs, AlterConfigs, DescribeClientQuotas, AlterClientQuotas and
//! DescribeProducers. They run once the broker advertises them (the sweep follows its
//! ApiVersions table); until then they only have to compile.

use ringbroker::protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use ringbroker::protocol::messages::create_partitions_request::CreatePartitionsTopic;
use ringbroker::protocol::messages::delete_records_request::{DeleteRecordsPartition, DeleteRecordsTopic};
use ringbroker::protocol::messages::describe_client_quotas_request::ComponentData;
use ringbroker::protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
use ringbroker::protocol::messages::describe_producers_request::TopicRequest;
use ringbroker::protocol::messages::{
    alter_configs_request, AlterClientQuotasRequest, AlterClientQuotasResponse, AlterConfigsRequest,
    AlterConfigsResponse, ApiKey, CreatePartitionsRequest, CreatePartitionsResponse, DeleteRecordsRequest,
    DeleteRecordsResponse, DescribeClientQuotasRequest, DescribeClientQuotasResponse, DescribeLogDirsRequest,
    DescribeLogDirsResponse, DescribeProducersRequest, DescribeProducersResponse, TopicName,
};
use ringbroker::protocol::ErrorCode;
use support::client;

use super::data::EARLIEST;
use super::fixture::{self, sbs, Ctx, RESOURCE_TOPIC, SOURCE_TOPIC};
use super::wire::{expect_code, expect_code_msg, Check, Wire};

// ---- CreatePartitions --------------------------------------------------------------------

/// A topic grows from 1 to 3 partitions and Metadata shows them; shrinking is
/// INVALID_PARTITIONS; an unknown topic UNKNOWN_TOPIC_OR_PARTITION.
pub(crate) fn create_partitions(ctx: &Ctx, v: i16) -> Check {
    let mut w = ctx.plain()?;
    let topic = ctx.name("grow", v);
    ctx.create_topic(&topic, 1, &[])?;
    let grow = |w: &mut Wire, topic: &str, count: i32| {
        let mut t = CreatePartitionsTopic::default();
        t.name = TopicName(sbs(topic));
        t.count = count;
        t.assignments = None;
        let mut req = CreatePartitionsRequest::default();
        req.topics = vec![t];
        req.timeout_ms = 30_000;
        let r: CreatePartitionsResponse = w.call(ApiKey::CreatePartitions, v, &req)?;
        let res = r.results.first().cloned().ok_or("no topic answered")?;
        ensure!(res.name.as_str() == topic, "answered topic {:?}", res.name);
        Ok::<_, String>(res)
    };
    let res = grow(&mut w, &topic, 3)?;
    expect_code_msg("CreatePartitions to 3", res.error_code, 0, &res.error_message)?;
    ctx.eventually(|| {
        let t = fixture::topic_metadata(&mut w, &topic)?;
        ensure!(t.partitions.len() == 3, "Metadata shows {} partitions after growing to 3", t.partitions.len());
        Ok(())
    })?;
    let res = grow(&mut w, &topic, 2)?;
    expect_code("CreatePartitions to fewer", res.error_code, ErrorCode::InvalidPartitions.code())?;
    let res = grow(&mut w, &ctx.name("nowhere", v), 2)?;
    expect_code("CreatePartitions of an unknown topic", res.error_code, ErrorCode::UnknownTopicOrPartition.code())
}

// ---- DeleteRecords -----------------------------------------------------------------------

/// Deleting below offset 3 of 5 moves the log start there (ListOffsets earliest and Fetch
/// agree); past the high watermark is OFFSET_OUT_OF_RANGE; an unknown topic
/// UNKNOWN_TOPIC_OR_PARTITION.
pub(crate) fn delete_records(ctx: &Ctx, v: i16) -> Check {
    let mut w = ctx.plain()?;
    let topic = ctx.name("trim", v);
    ctx.create_topic(&topic, 1, &[])?;
    let values: Vec<Vec<u8>> = (0..5).map(|i| format!("trim-{i}").into_bytes()).collect();
    fixture::produce(&mut w, &topic, client::batch(client::now_ms(), &values))?;
    let delete = |w: &mut Wire, topic: &str, offset: i64| {
        let mut p = DeleteRecordsPartition::default();
        p.partition_index = 0;
        p.offset = offset;
        let mut t = DeleteRecordsTopic::default();
        t.name = TopicName(sbs(topic));
        t.partitions = vec![p];
        let mut req = DeleteRecordsRequest::default();
        req.topics = vec![t];
        req.timeout_ms = 30_000;
        let r: DeleteRecordsResponse = w.call(ApiKey::DeleteRecords, v, &req)?;
        let t = r.topics.first().ok_or("no topic answered")?;
        ensure!(t.name.as_str() == topic, "answered topic {:?}", t.name);
        t.partitions.first().cloned().ok_or_else(|| "no partition answered".to_string())
    };
    let p = delete(&mut w, &topic, 3)?;
    expect_code("DeleteRecords below 3", p.error_code, 0)?;
    ensure!(p.low_watermark == 3, "low watermark {} after deleting below 3", p.low_watermark);
    ctx.eventually(|| {
        let (earliest, _) = fixture::list_offset(&mut w, &topic, EARLIEST)?;
        ensure!(earliest == 3, "ListOffsets earliest is {earliest} after deleting below 3");
        Ok(())
    })?;
    let first = fixture::fetch_records(&mut w, &topic, 3)?;
    ensure!(first.first().is_some_and(|r| r.offset == 3), "Fetch from 3 after the deletion: {:?}", first.first());
    let p = delete(&mut w, &topic, 100)?;
    expect_code("DeleteRecords past the high watermark", p.error_code, ErrorCode::OffsetOutOfRange.code())?;
    let p = delete(&mut w, &ctx.name("nowhere", v), 1)?;
    expect_code("DeleteRecords of an unknown topic", p.error_code, ErrorCode::UnknownTopicOrPartition.code())
}

// ---- DescribeLogDirs ---------------------------------------------------------------------

/// The data directory is listed with the data topic's partition in it (and its size).
pub(crate) fn describe_log_dirs(ctx: &Ctx, v: i16) -> Check {
    let mut w = ctx.plain()?;
    for named in [true, false] {
        let mut req = DescribeLogDirsRequest::default();
        req.topics = named.then(|| {
            let mut t = DescribableLogDirTopic::default();
            t.topic = TopicName(sbs(&ctx.data));
            t.partitions = vec![0];
            vec![t]
        });
        let r: DescribeLogDirsResponse = w.call(ApiKey::DescribeLogDirs, v, &req)?;
        if v >= 3 {
            expect_code("DescribeLogDirs", r.error_code, 0)?;
        }
        ensure!(r.results.len() == 1, "{} log dirs", r.results.len());
        let d = &r.results[0];
        expect_code("the log dir", d.error_code, 0)?;
        if let Some(dir) = &ctx.t.data_dir {
            let same = std::fs::canonicalize(dir).ok() == std::fs::canonicalize(d.log_dir.as_str()).ok();
            ensure!(same, "log dir {:?}, the broker's data dir is {}", d.log_dir, dir.display());
        } else {
            ensure!(!d.log_dir.is_empty(), "an empty log dir");
        }
        if v >= 4 {
            ensure!(d.total_bytes > 0 && d.usable_bytes > 0, "total {} usable {} bytes", d.total_bytes, d.usable_bytes);
        }
        let t = d
            .topics
            .iter()
            .find(|t| t.name.as_str() == ctx.data)
            .ok_or_else(|| format!("{} not in the log dir (named: {named})", ctx.data))?;
        ensure!(
            t.partitions.len() == 1
                && t.partitions[0].partition_index == 0
                && t.partitions[0].partition_size > 0
                && !t.partitions[0].is_future_key,
            "partitions {:?}",
            t.partitions
        );
    }
    Ok(())
}

// ---- AlterConfigs ------------------------------------------------------------------------

/// The legacy AlterConfigs replaces a topic's whole set of configs: the given ones show as
/// topic configs, one set before and not given is back to its default.
pub(crate) fn alter_configs(ctx: &Ctx, v: i16) -> Check {
    let mut w = ctx.plain()?;
    let topic = ctx.name("alter", v);
    ctx.create_topic(&topic, 1, &[("max.message.bytes", "500000")])?;
    let alter = |w: &mut Wire, topic: &str, configs: &[(&str, &str)]| {
        let mut res = alter_configs_request::AlterConfigsResource::default();
        res.resource_type = RESOURCE_TOPIC;
        res.resource_name = sbs(topic);
        res.configs = configs
            .iter()
            .map(|(k, val)| {
                let mut c = alter_configs_request::AlterableConfig::default();
                c.name = sbs(k);
                c.value = Some(sbs(val));
                c
            })
            .collect();
        let mut req = AlterConfigsRequest::default();
        req.resources = vec![res];
        let r: AlterConfigsResponse = w.call(ApiKey::AlterConfigs, v, &req)?;
        let res = r.responses.first().cloned().ok_or("no resource answered")?;
        ensure!(res.resource_name.as_str() == topic, "answered resource {:?}", res.resource_name);
        Ok::<_, String>(res)
    };
    let set = [("retention.ms", "7200000"), ("segment.ms", "3600000")];
    let res = alter(&mut w, &topic, &set)?;
    expect_code_msg("AlterConfigs", res.error_code, 0, &res.error_message)?;
    ctx.eventually(|| {
        let c = fixture::topic_configs(&mut w, &topic)?;
        for (k, val) in set {
            let got = c.get(k);
            ensure!(got == Some(&(Some(val.to_string()), SOURCE_TOPIC)), "after AlterConfigs {k} is {got:?}");
        }
        let old = c.get("max.message.bytes");
        ensure!(
            old.is_some_and(|(_, source)| *source != SOURCE_TOPIC),
            "max.message.bytes is still the topic's own ({old:?}) after an AlterConfigs without it"
        );
        Ok(())
    })?;
    let res = alter(&mut w, &ctx.name("nowhere", v), &set)?;
    expect_code("AlterConfigs of an unknown topic", res.error_code, ErrorCode::UnknownTopicOrPartition.code())
}

// ---- client quotas -----------------------------------------------------------------------

const QUOTA_KEY: &str = "producer_byte_rate";
const QUOTA: f64 = 1_048_576.0;

fn alter_quota(w: &mut Wire, v: i16, client_id: &str, remove: bool) -> Check {
    let mut e = EntityData::default();
    e.entity_type = sbs("client-id");
    e.entity_name = Some(sbs(client_id));
    let mut op = OpData::default();
    op.key = sbs(QUOTA_KEY);
    op.value = QUOTA;
    op.remove = remove;
    let mut entry = EntryData::default();
    entry.entity = vec![e];
    entry.ops = vec![op];
    let mut req = AlterClientQuotasRequest::default();
    req.entries = vec![entry];
    let r: AlterClientQuotasResponse = w.call(ApiKey::AlterClientQuotas, v, &req)?;
    ensure!(r.entries.len() == 1, "{} entries answered", r.entries.len());
    let e = &r.entries[0];
    expect_code_msg("AlterClientQuotas", e.error_code, 0, &e.error_message)?;
    ensure!(
        e.entity.len() == 1
            && e.entity[0].entity_type.as_str() == "client-id"
            && e.entity[0].entity_name.as_ref().is_some_and(|n| n.as_str() == client_id),
        "answered entity {:?}",
        e.entity
    );
    Ok(())
}

/// The quotas DescribeClientQuotas `v` shows for exactly `client_id`.
fn quotas_of(w: &mut Wire, v: i16, client_id: &str) -> Result<Vec<(String, f64)>, String> {
    let mut c = ComponentData::default();
    c.entity_type = sbs("client-id");
    c.match_type = 0; // exact
    c._match = Some(sbs(client_id));
    let mut req = DescribeClientQuotasRequest::default();
    req.components = vec![c];
    req.strict = false;
    let r: DescribeClientQuotasResponse = w.call(ApiKey::DescribeClientQuotas, v, &req)?;
    expect_code_msg("DescribeClientQuotas", r.error_code, 0, &r.error_message)?;
    let mut out = Vec::new();
    for e in r.entries.iter().flatten() {
        let names_it = e.entity.iter().any(|x| {
            x.entity_type.as_str() == "client-id" && x.entity_name.as_ref().is_some_and(|n| n.as_str() == client_id)
        });
        ensure!(names_it, "an entry for another entity: {:?}", e.entity);
        out.extend(e.values.iter().map(|q| (q.key.to_string(), q.value)));
    }
    Ok(out)
}

/// A client-id quota set by AlterClientQuotas at `v` shows in DescribeClientQuotas, and
/// is gone once removed.
pub(crate) fn alter_client_quotas(ctx: &Ctx, v: i16) -> Check {
    let mut w = ctx.plain()?;
    let client_id = ctx.name("quota-alter", v);
    alter_quota(&mut w, v, &client_id, false)?;
    ctx.eventually(|| {
        let q = quotas_of(&mut w, 1, &client_id)?;
        ensure!(q == [(QUOTA_KEY.to_string(), QUOTA)], "DescribeClientQuotas v1 shows {q:?}");
        Ok(())
    })?;
    alter_quota(&mut w, v, &client_id, true)?;
    ctx.eventually(|| {
        let q = quotas_of(&mut w, 1, &client_id)?;
        ensure!(q.is_empty(), "DescribeClientQuotas v1 still shows {q:?} after the removal");
        Ok(())
    })
}

/// A client-id quota shows at `v`; a client-id without one shows nothing.
pub(crate) fn describe_client_quotas(ctx: &Ctx, v: i16) -> Check {
    let mut w = ctx.plain()?;
    let client_id = ctx.name("quota-describe", v);
    alter_quota(&mut w, 1, &client_id, false)?;
    ctx.eventually(|| {
        let q = quotas_of(&mut w, v, &client_id)?;
        ensure!(q == [(QUOTA_KEY.to_string(), QUOTA)], "DescribeClientQuotas shows {q:?}");
        Ok(())
    })?;
    let q = quotas_of(&mut w, v, &ctx.name("quota-none", v))?;
    ensure!(q.is_empty(), "a client-id without quotas shows {q:?}");
    alter_quota(&mut w, 1, &client_id, true)
}

// ---- DescribeProducers -------------------------------------------------------------------

/// The idempotent producer that wrote a partition is listed with its epoch and last
/// sequence; an unknown topic is UNKNOWN_TOPIC_OR_PARTITION.
pub(crate) fn describe_producers(ctx: &Ctx, v: i16) -> Check {
    let mut w = ctx.plain()?;
    let topic = ctx.name("producers", v);
    ctx.create_topic(&topic, 1, &[])?;
    let (pid, epoch) = fixture::init_producer_id(&mut w)?;
    let ts = client::now_ms();
    let batch = fixture::idempotent_batch(pid, epoch, 0, ts, &[b"p0", b"p1", b"p2"]);
    fixture::produce(&mut w, &topic, batch)?;
    let describe = |w: &mut Wire, topic: &str| {
        let mut t = TopicRequest::default();
        t.name = TopicName(sbs(topic));
        t.partition_indexes = vec![0];
        let mut req = DescribeProducersRequest::default();
        req.topics = vec![t];
        let r: DescribeProducersResponse = w.call(ApiKey::DescribeProducers, v, &req)?;
        let t = r.topics.first().ok_or("no topic answered")?;
        ensure!(t.name.as_str() == topic, "answered topic {:?}", t.name);
        t.partitions.first().cloned().ok_or_else(|| "no partition answered".to_string())
    };
    let p = describe(&mut w, &topic)?;
    expect_code_msg("DescribeProducers", p.error_code, 0, &p.error_message)?;
    ensure!(p.partition_index == 0, "answered partition {}", p.partition_index);
    let mine: Vec<_> = p.active_producers.iter().filter(|s| s.producer_id.0 == pid).collect();
    ensure!(
        mine.len() == 1
            && mine[0].producer_epoch == i32::from(epoch)
            && mine[0].last_sequence == 2
            && mine[0].last_timestamp == ts
            && mine[0].current_txn_start_offset == -1,
        "producer {pid} epoch {epoch} wrote sequences 0-2 at {ts}; listed: {:?}",
        p.active_producers
    );
    let p = describe(&mut w, &ctx.name("nowhere", v))?;
    expect_code("DescribeProducers of an unknown topic", p.error_code, ErrorCode::UnknownTopicOrPartition.code())
}
