//! Where a topic's partitions live (Metadata: leader, replicas, ISR) and which offsets they
//! hold (ListOffsets to each leader: log start, high watermark, first offset at a time).

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{bail, Result};

use super::common::{check, topic_name, KafkaError};
use crate::client::Cluster;
use crate::protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use crate::protocol::messages::metadata_response::MetadataResponseTopic;
use crate::protocol::messages::{ApiKey, ListOffsetsRequest, ListOffsetsResponse};
use crate::protocol::ErrorCode;

/// ListOffsets timestamp meaning "the log start offset".
pub(super) const EARLIEST: i64 = -2;
/// ListOffsets timestamp meaning "the offset after the last record" (the high watermark).
pub(super) const LATEST: i64 = -1;

/// ListOffsets versions this client builds (v1 is the oldest Kafka 4 serves; v8 and later
/// add timestamp kinds the CLI does not ask for).
const LIST_OFFSETS_VERSIONS: (i16, i16) = (1, 7);

#[derive(Debug, Clone)]
pub(super) struct PartitionInfo {
    pub partition: i32,
    pub error_code: i16,
    pub leader: i32,
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub offline: Vec<i32>,
}

#[derive(Debug, Clone)]
pub(super) struct Topic {
    pub name: String,
    pub topic_id: uuid::Uuid,
    pub internal: bool,
    pub partitions: BTreeMap<i32, PartitionInfo>,
}

impl Topic {
    pub(super) fn from_metadata(t: &MetadataResponseTopic) -> Topic {
        let partitions = t
            .partitions
            .iter()
            .map(|p| {
                let info = PartitionInfo {
                    partition: p.partition_index,
                    error_code: p.error_code,
                    leader: p.leader_id.0,
                    leader_epoch: p.leader_epoch,
                    replicas: p.replica_nodes.iter().map(|b| b.0).collect(),
                    isr: p.isr_nodes.iter().map(|b| b.0).collect(),
                    offline: p.offline_replicas.iter().map(|b| b.0).collect(),
                };
                (p.partition_index, info)
            })
            .collect();
        Topic {
            name: t.name.as_ref().map(|n| n.to_string()).unwrap_or_default(),
            topic_id: t.topic_id,
            internal: t.is_internal,
            partitions,
        }
    }

    pub(super) fn partition_count(&self) -> i32 {
        self.partitions.len() as i32
    }

    /// The replication factor, as Kafka's tools show it: the replica count of a partition.
    pub(super) fn replication_factor(&self) -> usize {
        self.partitions.values().next().map_or(0, |p| p.replicas.len())
    }

    /// `(partition, leader)` of every partition.
    pub(super) fn leaders(&self) -> Vec<(i32, i32)> {
        self.partitions.values().map(|p| (p.partition, p.leader)).collect()
    }
}

/// The layout of one topic. A topic whose leaders are still being elected (just created, or
/// auto-created by this very request) is asked again for a few seconds; a missing topic is
/// UNKNOWN_TOPIC_OR_PARTITION with the command that creates it.
pub(super) fn topic(cluster: &mut Cluster, name: &str, auto_create: bool) -> Result<Topic> {
    let names = [name.to_string()];
    for attempt in 0..50 {
        let md = cluster.metadata(Some(&names), auto_create)?;
        let Some(t) = md.topics.iter().find(|t| t.name.as_ref().is_some_and(|n| n.as_str() == name)) else {
            bail!("the broker's Metadata response left out topic '{name}'");
        };
        let retry = match ErrorCode::try_from_code(t.error_code) {
            None => t.partitions.iter().any(|p| p.error_code != 0 || p.leader_id.0 < 0),
            Some(ErrorCode::LeaderNotAvailable) => true,
            // Auto-creation may take a moment to show; a broker that does not auto-create
            // keeps answering this, so do not wait for it long.
            Some(ErrorCode::UnknownTopicOrPartition) if auto_create && attempt < 10 => true,
            Some(_) => return Err(missing_topic(t.error_code, name)),
        };
        if !retry {
            return Ok(Topic::from_metadata(t));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    bail!("topic '{name}' still has partitions without a leader after 5 s; check the broker's log")
}

/// The error for a topic Metadata did not describe, with a hint when it does not exist.
pub(super) fn missing_topic(code: i16, name: &str) -> anyhow::Error {
    let what = if code == ErrorCode::UnknownTopicOrPartition.code() {
        format!("topic '{name}' does not exist (create it with `ringbroker topic create {name}`)")
    } else {
        format!("topic '{name}'")
    };
    KafkaError { code, what, message: None }.into()
}

/// The offset each partition answers for `timestamp` (`EARLIEST`, `LATEST`, or a time in ms:
/// the first offset whose timestamp is at or after it, -1 if there is none). One request per
/// leader; `parts` are `(partition, leader)`.
pub(super) fn list_offsets(
    cluster: &mut Cluster,
    topic: &str,
    parts: &[(i32, i32)],
    timestamp: i64,
) -> Result<BTreeMap<i32, i64>> {
    let mut by_leader: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    for &(p, leader) in parts {
        by_leader.entry(leader).or_default().push(p);
    }
    let mut out = BTreeMap::new();
    for (leader, partitions) in by_leader {
        let conn = cluster.node(leader)?;
        let v = conn.version(ApiKey::ListOffsets, LIST_OFFSETS_VERSIONS.0, LIST_OFFSETS_VERSIONS.1)?;
        let mut req = ListOffsetsRequest::default();
        req.replica_id = (-1).into();
        let mut t = ListOffsetsTopic::default();
        t.name = topic_name(topic);
        for &p in &partitions {
            let mut lp = ListOffsetsPartition::default();
            lp.partition_index = p;
            lp.timestamp = timestamp;
            t.partitions.push(lp);
        }
        req.topics.push(t);
        let resp: ListOffsetsResponse = conn.call(ApiKey::ListOffsets, v, &req)?;
        for t in &resp.topics {
            for p in &t.partitions {
                check(p.error_code, None, format_args!("offsets of {topic}/{}", p.partition_index))?;
                out.insert(p.partition_index, p.offset);
            }
        }
    }
    for &(p, _) in parts {
        if !out.contains_key(&p) {
            bail!("the broker's ListOffsets response left out {topic}/{p}");
        }
    }
    Ok(out)
}
