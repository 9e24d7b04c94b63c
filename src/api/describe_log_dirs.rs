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

#[cfg(test)]
mod tests {
    use proto_kafka::messages::describe_log_dirs_request::DescribableLogDirTopic;

    use super::*;
    use crate::api::fake::Fake;
    use crate::auth::acl::{ResourceType, CLUSTER_NAME};
    use crate::protocol::batch;

    fn request(topics: Option<&[(&str, &[i32])]>) -> DescribeLogDirsRequest {
        let mut r = DescribeLogDirsRequest::default();
        r.topics = topics.map(|ts| {
            ts.iter()
                .map(|(name, partitions)| {
                    let mut t = DescribableLogDirTopic::default();
                    t.topic = TopicName(str_bytes(*name));
                    t.partitions = partitions.to_vec();
                    t
                })
                .collect()
        });
        r
    }

    /// (partition, size, offset lag) of each partition of `topic` in the one directory.
    fn partitions(resp: &DescribeLogDirsResponse, topic: &str) -> Option<Vec<(i32, i64, i64)>> {
        let t = resp.results[0].topics.iter().find(|t| t.name.as_str() == topic)?;
        Some(t.partitions.iter().map(|p| (p.partition_index, p.partition_size, p.offset_lag)).collect())
    }

    #[test]
    fn null_topics_describe_every_partition_with_its_size_and_the_disk() {
        let b = Fake::new();
        b.topic("t", 2);
        b.append(b.tp("t", 1), &[b"hello"]);
        let resp: DescribeLogDirsResponse = b.call(ApiKey::DescribeLogDirs, 4, &request(None));
        assert_eq!(resp.error_code, 0);
        assert_eq!(resp.results.len(), 1, "one log directory");
        let dir = &resp.results[0];
        assert_eq!(dir.log_dir.as_str(), b.config().data_dir.display().to_string());
        let size = batch::build(0, &[b"hello"]).len() as i64;
        assert_eq!(partitions(&resp, "t"), Some(vec![(0, 0, 0), (1, size, 0)]));
        assert_eq!(partitions(&resp, crate::group::offsets::TOPIC), Some(vec![(0, 0, 0)]), "the offsets topic too");
        assert!(dir.total_bytes > 0 && (0..=dir.total_bytes).contains(&dir.usable_bytes), "{dir:?}");
    }

    #[test]
    fn only_asked_partitions_of_known_topics_are_described() {
        let b = Fake::new();
        b.topic("t", 2);
        b.append(b.tp("t", 0), &[b"x"]);
        let req = request(Some(&[("t", &[1, 5, -1]), ("missing", &[0])]));
        let resp: DescribeLogDirsResponse = b.call(ApiKey::DescribeLogDirs, 2, &req);
        let names: Vec<&str> = resp.results[0].topics.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, vec!["t"], "unknown topics are left out");
        assert_eq!(partitions(&resp, "t"), Some(vec![(1, 0, 0)]), "unknown partitions are left out");
    }

    #[test]
    fn before_v4_the_disk_space_is_not_told() {
        let b = Fake::new();
        let resp: DescribeLogDirsResponse = b.call(ApiKey::DescribeLogDirs, 3, &request(None));
        assert_eq!((resp.results[0].total_bytes, resp.results[0].usable_bytes), (-1, -1));
    }

    #[test]
    fn without_describe_on_the_cluster_no_directory_is_told() {
        let b = Fake::with(|c| c.authorizer_enabled = true);
        b.topic("t", 1);
        let resp: DescribeLogDirsResponse = b.call_as(Some("User:eve"), ApiKey::DescribeLogDirs, 3, &request(None));
        assert_eq!(resp.error_code, ErrorCode::ClusterAuthorizationFailed.code());
        assert!(resp.results.is_empty());
        let resp: DescribeLogDirsResponse = b.call_as(Some("User:eve"), ApiKey::DescribeLogDirs, 1, &request(None));
        assert_eq!((resp.error_code, resp.results.len()), (0, 0), "v1-2 have no top-level error: no directories");
        b.allow("User:eve", ResourceType::Cluster, CLUSTER_NAME, Operation::Describe);
        let resp: DescribeLogDirsResponse = b.call_as(Some("User:eve"), ApiKey::DescribeLogDirs, 3, &request(None));
        assert_eq!(resp.error_code, 0);
        assert_eq!(partitions(&resp, "t"), Some(vec![(0, 0, 0)]));
    }
}
