//! DescribeLogDirs (`kafka-log-dirs --describe`): the broker's one log directory (its
//! `data_dir`), with each partition's size in bytes, read from the home shards; from v4 the
//! directory's total and usable bytes (statvfs). `topics` null describes every partition,
//! the offsets topic included, as Kafka does. The offset lag is Kafka's, max(0, high
//! watermark − log end): how far a log being moved trails its partition, so 0 for a
//! partition's own log (records not yet made durable by the flush policy do not count).
//!
//! Authorization, Kafka's: DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED (the
//! top-level error from v3; no directories before).

use proto_kafka::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use proto_kafka::messages::{ApiKey, DescribeLogDirsRequest, DescribeLogDirsResponse, TopicName};

use super::{authz, str_bytes, ApiSpec, Broker, Outcome, Request};
use crate::auth::acl::Operation;
use crate::protocol::ErrorCode;
use crate::shard::Tp;

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::DescribeLogDirs, 1, 4);

/// (total, usable) bytes of the file system holding `dir`; -1 when it cannot be read.
fn disk_space(dir: &std::path::Path) -> (i64, i64) {
    match nix::sys::statvfs::statvfs(dir) {
        Ok(s) => {
            let block = s.fragment_size() as i64;
            (s.blocks() as i64 * block, s.blocks_available() as i64 * block)
        }
        Err(_) => (-1, -1),
    }
}

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: DescribeLogDirsRequest = req.decode()?;
    let mut resp = DescribeLogDirsResponse::default();
    if !authz::cluster(broker, &req, Operation::Describe) {
        resp.error_code = ErrorCode::ClusterAuthorizationFailed.code();
        return req.respond(resp);
    }
    let catalog = broker.catalog();
    // (topic, partitions asked for) — everything when `topics` is null.
    let wanted: Vec<(String, Vec<i32>)> = match &r.topics {
        None => catalog.topics.values().map(|t| (t.name.clone(), (0..t.partitions()).collect())).collect(),
        Some(ts) => ts.iter().map(|t| (t.topic.to_string(), t.partitions.clone())).collect(),
    };
    let mut dir = DescribeLogDirsResult::default();
    dir.log_dir = str_bytes(broker.config().data_dir.display().to_string());
    (dir.total_bytes, dir.usable_bytes) = disk_space(&broker.config().data_dir);
    // Topics and partitions the broker does not have are left out, as in Kafka.
    let known: Vec<(&crate::metadata::TopicMeta, Vec<i32>)> = wanted
        .into_iter()
        .filter_map(|(name, partitions)| {
            let meta = catalog.topic(&name)?;
            Some((meta, partitions.into_iter().filter(|p| (0..meta.partitions()).contains(p)).collect()))
        })
        .collect();
    let asks = known.iter().flat_map(|(m, ps)| ps.iter().map(|&partition| Tp { topic: m.id, partition })).collect();
    let mut offsets = broker.offsets(asks).await.into_iter();
    for (meta, partitions) in known {
        let mut tr = DescribeLogDirsTopic::default();
        tr.name = TopicName(str_bytes(meta.name.clone()));
        for index in partitions {
            let Some(Ok(o)) = offsets.next() else { continue };
            let mut pr = DescribeLogDirsPartition::default();
            pr.partition_index = index;
            pr.partition_size = o.size as i64;
            pr.offset_lag = (o.high_watermark - o.log_end).max(0);
            tr.partitions.push(pr);
        }
        dir.topics.push(tr);
    }
    resp.results.push(dir);
    req.respond(resp)
}
