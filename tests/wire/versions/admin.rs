//! Cases of the topic and cluster administration APIs: CreateTopics, DeleteTopics,
//! DescribeConfigs, IncrementalAlterConfigs, DescribeCluster, and on a broker alone the
//! reassignment and leader-election APIs (the cluster tests move replicas for real).

use ringbroker::auth::acl::ResourceType;
use ringbroker::protocol::messages::alter_partition_reassignments_request::{ReassignablePartition, ReassignableTopic};
use ringbroker::protocol::messages::delete_topics_request::DeleteTopicState;
use ringbroker::protocol::messages::describe_configs_request::DescribeConfigsResource;
use ringbroker::protocol::messages::elect_leaders_request::TopicPartitions as ElectLeadersTopicPartitions;
use ringbroker::protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
use ringbroker::protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
use ringbroker::protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, ApiKey, BrokerId, CreateTopicsRequest,
    CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse, DescribeClusterRequest, DescribeClusterResponse,
    DescribeConfigsRequest, DescribeConfigsResponse, ElectLeadersRequest, ElectLeadersResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse, TopicName,
};
use ringbroker::protocol::ErrorCode;

use super::fixture::{
    self, all_operations, new_topic, sbs, Ctx, AUTH_OPS_OMITTED, DATA_CONFIG, RESOURCE_BROKER, RESOURCE_TOPIC,
    SOURCE_TOPIC,
};
use super::wire::{expect_code, expect_code_msg, Check, Wire};

/// Whether Metadata (v12) shows `name`, and with how many partitions.
fn partitions_of(w: &mut Wire, name: &str) -> Result<Option<usize>, String> {
    let t = fixture::topic_metadata(w, name)?;
    match t.error_code {
        0 => Ok(Some(t.partitions.len())),
        c if c == ErrorCode::UnknownTopicOrPartition.code() => Ok(None),
        c => Err(format!("Metadata of {name}: error {}", super::wire::code_name(c))),
    }
}

// ---- CreateTopics ------------------------------------------------------------------------

/// A topic with two partitions and a config is created (and shows in Metadata); the same
/// name again is TOPIC_ALREADY_EXISTS; validate_only creates nothing.
pub(crate) fn create_topics(ctx: &Ctx, v: i16) -> Check {
    let mut w = ctx.plain()?;
    let name = ctx.name("create", v);
    let config = ("retention.ms", "3600001");
    let call = |w: &mut Wire, name: &str, validate_only: bool| {
        let mut req = CreateTopicsRequest::default();
        req.topics = vec![new_topic(name, 2, &[config])];
        req.timeout_ms = 30_000;
        req.validate_only = validate_only;
        let r: CreateTopicsResponse = w.call(ApiKey::CreateTopics, v, &req)?;
        ensure!(r.topics.len() == 1, "{} topics answered", r.topics.len());
        let t = r.topics[0].clone();
        ensure!(t.name.as_str() == name, "answered topic {:?}", t.name);
        Ok::<_, String>(t)
    };
    let t = call(&mut w, &name, false)?;
    expect_code_msg(&format!("creating {name}"), t.error_code, 0, &t.error_message)?;
    if v >= 5 {
        ensure!(
            t.num_partitions == 2 && t.replication_factor == 1,
            "answered {} partitions, replication factor {}",
            t.num_partitions,
            t.replication_factor
        );
        let shown = t.configs.iter().flatten().find(|c| c.name.as_str() == config.0);
        ensure!(
            shown.is_some_and(|c| c.value.as_ref().is_some_and(|x| x.as_str() == config.1)),
            "the answer shows {}={:?}",
            config.0,
            shown.map(|c| &c.value)
        );
    }
    if v >= 7 {
        ensure!(!t.topic_id.is_nil(), "no topic id");
    }
    ctx.eventually(|| {
        let n = partitions_of(&mut w, &name)?;
        ensure!(n == Some(2), "Metadata shows {name} with {n:?} partitions");
        Ok(())
    })?;
    let again = call(&mut w, &name, false)?;
    expect_code("creating it again", again.error_code, ErrorCode::TopicAlreadyExists.code())?;

    let dry = ctx.name("create-dry", v);
    let t = call(&mut w, &dry, true)?;
    expect_code_msg("validate_only", t.error_code, 0, &t.error_message)?;
    std::thread::sleep(std::time::Duration::from_millis(if ctx.t.external { 500 } else { 50 }));
    ensure!(partitions_of(&mut w, &dry)?.is_none(), "validate_only created {dry}");
    Ok(())
}

// ---- DeleteTopics ------------------------------------------------------------------------

/// Topics are deleted by name (and by id from v6) and leave Metadata; unknown ones are
/// UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID by id).
pub(crate) fn delete_topics(ctx: &Ctx, v: i16) -> Check {
    let mut w = ctx.plain()?;
    let by_name = ctx.name("delete", v);
    ctx.create_topic(&by_name, 1, &[])?;
    let by_id = ctx.name("delete-id", v);
    let id = if v >= 6 { Some(ctx.create_topic(&by_id, 1, &[])?) } else { None };
    let missing = ctx.name("delete-missing", v);
    let mut req = DeleteTopicsRequest::default();
    req.timeout_ms = 30_000;
    if v >= 6 {
        let state = |name: Option<&str>, id: uuid::Uuid| {
            let mut s = DeleteTopicState::default();
            s.name = name.map(|n| TopicName(sbs(n)));
            s.topic_id = id;
            s
        };
        req.topics = vec![
            state(Some(&by_name), uuid::Uuid::nil()),
            state(None, id.expect("created")),
            state(Some(&missing), uuid::Uuid::nil()),
            state(None, uuid::Uuid::new_v4()),
        ];
    } else {
        req.topic_names = vec![TopicName(sbs(&by_name)), TopicName(sbs(&missing))];
    }
    let r: DeleteTopicsResponse = w.call(ApiKey::DeleteTopics, v, &req)?;
    let want = if v >= 6 { 4 } else { 2 };
    ensure!(r.responses.len() == want, "{} results for {want} topics", r.responses.len());
    // Kafka answers in no particular order: results are found by name, or by id.
    let named = |name: &str| {
        r.responses
            .iter()
            .find(|t| t.name.as_ref().is_some_and(|n| n.as_str() == name))
            .ok_or_else(|| format!("no result for {name}: {:?}", r.responses))
    };
    let res = named(&by_name)?;
    expect_code_msg(&format!("deleting {by_name}"), res.error_code, 0, &res.error_message)?;
    expect_code("deleting an unknown topic", named(&missing)?.error_code, ErrorCode::UnknownTopicOrPartition.code())?;
    if let Some(id) = id {
        let res = named(&by_id)?;
        expect_code_msg("deleting by id", res.error_code, 0, &res.error_message)?;
        ensure!(res.topic_id == id, "deleted {by_id} by id {id}: answered id {}", res.topic_id);
        let unknown = r
            .responses
            .iter()
            .find(|t| t.name.is_none())
            .ok_or_else(|| format!("no result for the unknown topic id: {:?}", r.responses))?;
        expect_code("deleting an unknown topic id", unknown.error_code, ErrorCode::UnknownTopicId.code())?;
    }
    ctx.eventually(|| {
        for name in [Some(&by_name), id.map(|_| &by_id)].into_iter().flatten() {
            ensure!(partitions_of(&mut w, name)?.is_none(), "{name} still in Metadata after its deletion");
        }
        Ok(())
    })
}

// ---- DescribeConfigs ---------------------------------------------------------------------

fn describe_request(resources: Vec<(i8, String, Option<Vec<&str>>)>) -> DescribeConfigsRequest {
    let mut req = DescribeConfigsRequest::default();
    req.resources = resources
        .into_iter()
        .map(|(ty, name, keys)| {
            let mut r = DescribeConfigsResource::default();
            r.resource_type = ty;
            r.resource_name = sbs(&name);
            r.configuration_keys = keys.map(|ks| ks.into_iter().map(sbs).collect());
            r
        })
        .collect();
    req
}

/// The data topic shows its own setting as a topic config, the broker its configs, and an
/// unknown topic is UNKNOWN_TOPIC_OR_PARTITION.
pub(crate) fn describe_configs(ctx: &Ctx, v: i16) -> Check {
    let mut w = ctx.plain()?;
    let req = describe_request(vec![
        (RESOURCE_TOPIC, ctx.data.clone(), None),
        (RESOURCE_BROKER, ctx.node_id.to_string(), Some(vec!["num.partitions"])),
        (RESOURCE_TOPIC, ctx.name("nowhere", v), None),
    ]);
    let r: DescribeConfigsResponse = w.call(ApiKey::DescribeConfigs, v, &req)?;
    ensure!(r.results.len() == 3, "{} results for 3 resources", r.results.len());
    let topic = &r.results[0];
    expect_code_msg("DescribeConfigs of the data topic", topic.error_code, 0, &topic.error_message)?;
    ensure!(
        topic.resource_type == RESOURCE_TOPIC && topic.resource_name.as_str() == ctx.data,
        "answered resource {} {:?}",
        topic.resource_type,
        topic.resource_name
    );
    let own = topic.configs.iter().find(|c| c.name.as_str() == DATA_CONFIG.0);
    ensure!(
        own.is_some_and(|c| c.value.as_ref().is_some_and(|x| x.as_str() == DATA_CONFIG.1)
            && c.config_source == SOURCE_TOPIC
            && !c.read_only),
        "{} is {:?}, expected {} set on the topic",
        DATA_CONFIG.0,
        own.map(|c| (&c.value, c.config_source, c.read_only)),
        DATA_CONFIG.1
    );
    ensure!(
        topic.configs.iter().any(|c| c.name.as_str() == "retention.ms"),
        "no retention.ms among the topic's configs"
    );
    let broker = &r.results[1];
    expect_code_msg("DescribeConfigs of the broker", broker.error_code, 0, &broker.error_message)?;
    ensure!(
        broker.configs.len() == 1
            && broker.configs[0].name.as_str() == "num.partitions"
            && broker.configs[0].value.as_ref().is_some_and(|x| x.as_str().parse::<i32>().is_ok()),
        "the broker's num.partitions: {:?}",
        broker.configs
    );
    expect_code(
        "DescribeConfigs of an unknown topic",
        r.results[2].error_code,
        ErrorCode::UnknownTopicOrPartition.code(),
    )
}

// ---- IncrementalAlterConfigs -------------------------------------------------------------

fn alter_request(topic: &str, ops: &[(&str, i8, Option<&str>)]) -> IncrementalAlterConfigsRequest {
    let mut res = AlterConfigsResource::default();
    res.resource_type = RESOURCE_TOPIC;
    res.resource_name = sbs(topic);
    res.configs = ops
        .iter()
        .map(|(name, op, value)| {
            let mut c = AlterableConfig::default();
            c.name = sbs(name);
            c.config_operation = *op;
            c.value = value.map(sbs);
            c
        })
        .collect();
    let mut req = IncrementalAlterConfigsRequest::default();
    req.resources = vec![res];
    req
}

const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;

/// SET shows in DescribeConfigs as a topic config, DELETE brings the default back; an
/// unknown topic is UNKNOWN_TOPIC_OR_PARTITION.
pub(crate) fn incremental_alter_configs(ctx: &Ctx, v: i16) -> Check {
    let mut w = ctx.plain()?;
    let topic = ctx.name("alter-inc", v);
    ctx.create_topic(&topic, 1, &[])?;
    let value = "123456789";
    let alter = |w: &mut Wire, topic: &str, ops: &[(&str, i8, Option<&str>)]| {
        let r: IncrementalAlterConfigsResponse =
            w.call(ApiKey::IncrementalAlterConfigs, v, &alter_request(topic, ops))?;
        let res = r.responses.first().cloned().ok_or("no resource answered")?;
        ensure!(res.resource_name.as_str() == topic, "answered resource {:?}", res.resource_name);
        Ok::<_, String>(res)
    };
    let res = alter(&mut w, &topic, &[("retention.ms", OP_SET, Some(value))])?;
    expect_code_msg("SET retention.ms", res.error_code, 0, &res.error_message)?;
    ctx.eventually(|| {
        let c = fixture::topic_configs(&mut w, &topic)?;
        let got = c.get("retention.ms");
        ensure!(got == Some(&(Some(value.to_string()), SOURCE_TOPIC)), "after SET, retention.ms is {got:?}");
        Ok(())
    })?;
    let res = alter(&mut w, &topic, &[("retention.ms", OP_DELETE, None)])?;
    expect_code_msg("DELETE retention.ms", res.error_code, 0, &res.error_message)?;
    ctx.eventually(|| {
        let c = fixture::topic_configs(&mut w, &topic)?;
        let got = c.get("retention.ms");
        ensure!(
            got.is_some_and(|(val, source)| *source != SOURCE_TOPIC && val.as_deref() != Some(value)),
            "after DELETE, retention.ms is {got:?}"
        );
        Ok(())
    })?;
    let res = alter(&mut w, &ctx.name("nowhere", v), &[("retention.ms", OP_SET, Some(value))])?;
    expect_code("altering an unknown topic", res.error_code, ErrorCode::UnknownTopicOrPartition.code())
}

// ---- DescribeCluster ---------------------------------------------------------------------

/// The one broker, also the controller, as Metadata shows it; the cluster's authorized
/// operations when asked for.
pub(crate) fn describe_cluster(ctx: &Ctx, v: i16) -> Check {
    let mut w = ctx.plain()?;
    for with_operations in [false, true] {
        let mut req = DescribeClusterRequest::default();
        if v >= 1 {
            req.endpoint_type = 1;
        }
        req.include_cluster_authorized_operations = with_operations;
        let r: DescribeClusterResponse = w.call(ApiKey::DescribeCluster, v, &req)?;
        expect_code_msg("DescribeCluster", r.error_code, 0, &r.error_message)?;
        ensure!(
            r.cluster_id.as_str() == ctx.cluster_id,
            "cluster id {:?}, Metadata said {}",
            r.cluster_id,
            ctx.cluster_id
        );
        ensure!(r.controller_id.0 == ctx.node_id, "controller {}", r.controller_id.0);
        if v >= 1 {
            ensure!(r.endpoint_type == 1, "endpoint type {}", r.endpoint_type);
        }
        let want = if with_operations { all_operations(ResourceType::Cluster) } else { AUTH_OPS_OMITTED };
        ensure!(
            r.cluster_authorized_operations == want,
            "cluster operations {:#x}, expected {want:#x}",
            r.cluster_authorized_operations
        );
        ensure!(
            r.brokers.len() == 1
                && r.brokers[0].broker_id.0 == ctx.node_id
                && r.brokers[0].host.as_str() == ctx.host
                && r.brokers[0].port == ctx.port,
            "brokers {:?}",
            r.brokers
        );
    }
    Ok(())
}

// ---- AlterPartitionReassignments, ListPartitionReassignments, ElectLeaders ----------------

fn reassign(
    w: &mut Wire,
    v: i16,
    moves: &[(&str, i32, Option<Vec<i32>>)],
) -> Result<Vec<(i16, Option<String>)>, String> {
    let mut req = AlterPartitionReassignmentsRequest::default();
    req.timeout_ms = 30_000;
    req.allow_replication_factor_change = true;
    for (topic, partition, target) in moves {
        let mut p = ReassignablePartition::default();
        p.partition_index = *partition;
        p.replicas = target.as_ref().map(|t| t.iter().map(|id| BrokerId(*id)).collect());
        let mut t = ReassignableTopic::default();
        t.name = TopicName(sbs(topic));
        t.partitions = vec![p];
        req.topics.push(t);
    }
    let r: AlterPartitionReassignmentsResponse = w.call(ApiKey::AlterPartitionReassignments, v, &req)?;
    expect_code_msg("AlterPartitionReassignments", r.error_code, 0, &r.error_message)?;
    ensure!(r.responses.len() == moves.len(), "{} topics answered for {}", r.responses.len(), moves.len());
    Ok(r.responses
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (p.error_code, p.error_message.as_ref().map(|m| m.to_string()))))
        .collect())
}

/// A broker alone: a partition "moved" to its own replicas is accepted (nothing to do); one
/// moved to a broker that does not exist is INVALID_REPLICA_ASSIGNMENT, an unknown topic
/// UNKNOWN_TOPIC_OR_PARTITION, a cancel with nothing under way NO_REASSIGNMENT_IN_PROGRESS;
/// ListPartitionReassignments then shows nothing under way.
pub(crate) fn alter_partition_reassignments(ctx: &Ctx, v: i16) -> Check {
    let mut w = ctx.plain()?;
    let topic = ctx.name("move", v);
    ctx.create_topic(&topic, 1, &[])?;
    let me = ctx.node_id;
    let nowhere = ctx.name("move-nowhere", v);
    let got = reassign(
        &mut w,
        v,
        &[
            (&topic, 0, Some(vec![me])),
            (&topic, 0, Some(vec![me + 100])),
            (&nowhere, 0, Some(vec![me])),
            (&topic, 0, None),
        ],
    )?;
    let want = [
        0,
        ErrorCode::InvalidReplicaAssignment.code(),
        ErrorCode::UnknownTopicOrPartition.code(),
        ErrorCode::NoReassignmentInProgress.code(),
    ];
    for (i, ((code, msg), want)) in got.iter().zip(want).enumerate() {
        expect_code_msg(&format!("reassignment {i}"), *code, want, &msg.as_deref().map(sbs))?;
    }
    ensure!(got[1].1.is_some(), "a refused target comes with a message");
    let listed = list_reassignments(&mut w, 0, Some(&topic))?;
    ensure!(listed.topics.is_empty(), "reassignments listed after a no-op: {:?}", listed.topics);
    Ok(())
}

fn list_reassignments(w: &mut Wire, v: i16, topic: Option<&str>) -> Result<ListPartitionReassignmentsResponse, String> {
    let mut req = ListPartitionReassignmentsRequest::default();
    req.timeout_ms = 30_000;
    req.topics = topic.map(|t| {
        let mut lt = ListPartitionReassignmentsTopics::default();
        lt.name = TopicName(sbs(t));
        lt.partition_indexes = vec![0];
        vec![lt]
    });
    let r: ListPartitionReassignmentsResponse = w.call(ApiKey::ListPartitionReassignments, v, &req)?;
    expect_code_msg("ListPartitionReassignments", r.error_code, 0, &r.error_message)?;
    Ok(r)
}

/// Nothing is being moved on a broker alone: asked for one topic or all, nothing is listed.
pub(crate) fn list_partition_reassignments(ctx: &Ctx, v: i16) -> Check {
    let mut w = ctx.plain()?;
    let topic = ctx.name("listmoves", v);
    ctx.create_topic(&topic, 1, &[])?;
    for asked in [Some(topic.as_str()), None] {
        let r = list_reassignments(&mut w, v, asked)?;
        ensure!(r.topics.is_empty(), "reassignments listed ({asked:?}): {:?}", r.topics);
    }
    Ok(())
}

/// A broker alone leads every partition: PREFERRED is ELECTION_NOT_NEEDED for a partition
/// asked for, an unknown topic UNKNOWN_TOPIC_OR_PARTITION; from v1 UNCLEAN is refused with a
/// message (INVALID_REQUEST); asking for every partition answers none of them.
pub(crate) fn elect_leaders(ctx: &Ctx, v: i16) -> Check {
    let mut w = ctx.plain()?;
    let topic = ctx.name("elect", v);
    ctx.create_topic(&topic, 1, &[])?;
    let nowhere = ctx.name("elect-nowhere", v);
    let elect = |w: &mut Wire, election_type: i8, topics: Option<&[&str]>| {
        let mut req = ElectLeadersRequest::default();
        req.election_type = election_type;
        req.timeout_ms = 30_000;
        req.topic_partitions = topics.map(|ts| {
            ts.iter()
                .map(|t| {
                    let mut tp = ElectLeadersTopicPartitions::default();
                    tp.topic = TopicName(sbs(t));
                    tp.partitions = vec![0];
                    tp
                })
                .collect()
        });
        let r: ElectLeadersResponse = w.call(ApiKey::ElectLeaders, v, &req)?;
        expect_code("ElectLeaders", r.error_code, 0)?;
        let codes: Vec<(String, i16, bool)> = r
            .replica_election_results
            .iter()
            .flat_map(|t| {
                t.partition_result.iter().map(|p| (t.topic.to_string(), p.error_code, p.error_message.is_some()))
            })
            .collect();
        Ok::<_, String>(codes)
    };
    let got = elect(&mut w, 0, Some(&[&topic, &nowhere]))?;
    let want = vec![
        (topic.clone(), ErrorCode::ElectionNotNeeded.code(), true),
        (nowhere.clone(), ErrorCode::UnknownTopicOrPartition.code(), true),
    ];
    ensure!(got == want, "PREFERRED answered {got:?}, expected {want:?}");
    if v >= 1 {
        let got = elect(&mut w, 1, Some(&[&topic]))?;
        ensure!(got == vec![(topic.clone(), ErrorCode::InvalidRequest.code(), true)], "UNCLEAN answered {got:?}");
    }
    let got = elect(&mut w, 0, None)?;
    ensure!(got.is_empty(), "every partition asked: answered {got:?}");
    Ok(())
}
