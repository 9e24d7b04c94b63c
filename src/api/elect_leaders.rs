//! ElectLeaders (`kafka-leader-election --election-type PREFERRED`): each partition's
//! preferred replica (the first of its replicas) takes the leadership (`shard::reassign`);
//! the answer comes once it leads, or after the request's timeout with
//! PREFERRED_LEADER_NOT_AVAILABLE. A partition it already leads is ELECTION_NOT_NEEDED, as is
//! every partition of a broker alone. With no partitions listed, every partition is asked
//! and only those not already led by their preferred replica are answered, as in Kafka.
//!
//! UNCLEAN elections are refused (INVALID_REQUEST, with a message): a raft leader is always
//! elected by a majority holding every committed entry, and electing any other replica would
//! lose acknowledged records.
//!
//! Authorization, Kafka's: ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED for the
//! whole request.

use std::time::Duration;

use proto_kafka::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use proto_kafka::messages::{ApiKey, ElectLeadersRequest, ElectLeadersResponse, TopicName};

use super::{authz, str_bytes, ApiSpec, Broker, Outcome, Request};
use crate::auth::acl::Operation;
use crate::controller::Failure;
use crate::protocol::ErrorCode;

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::ElectLeaders, 0, 2);

// Kafka's ElectionType ids (v0 has no field: PREFERRED).
const PREFERRED: i8 = 0;

const UNCLEAN_REFUSED: &str = "unclean leader election is not supported: raft elects a leader that holds every \
committed record, and any other replica would lose acknowledged ones; use PREFERRED";

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: ElectLeadersRequest = req.decode()?;
    let mut resp = ElectLeadersResponse::default();
    if !authz::cluster(broker, &req, Operation::Alter) {
        resp.error_code = ErrorCode::ClusterAuthorizationFailed.code();
        return req.respond(resp);
    }
    let every = r.topic_partitions.is_none();
    let asks: Vec<(String, i32)> = match &r.topic_partitions {
        Some(tps) => tps.iter().flat_map(|t| t.partitions.iter().map(|p| (t.topic.to_string(), *p))).collect(),
        None => {
            broker.catalog().topics.values().flat_map(|t| (0..t.partitions()).map(|p| (t.name.clone(), p))).collect()
        }
    };
    let preferred = req.version == 0 || r.election_type == PREFERRED;
    let cat = broker.catalog();
    let mut results: Vec<Option<Result<(), Failure>>> = asks
        .iter()
        .map(|(topic, p)| match cat.topic(topic).filter(|t| (0..t.partitions()).contains(p)) {
            None => Some(Err((ErrorCode::UnknownTopicOrPartition, format!("{topic}-{p} does not exist")))),
            Some(_) if !preferred => Some(Err((ErrorCode::InvalidRequest, UNCLEAN_REFUSED.to_string()))),
            Some(t) if !t.replicated() => {
                Some(Err((ErrorCode::ElectionNotNeeded, "this broker runs alone and leads every partition".into())))
            }
            Some(_) => None, // an election to hold
        })
        .collect();
    let held: Vec<(String, i32)> =
        asks.iter().zip(&results).filter(|(_, r)| r.is_none()).map(|(a, _)| a.clone()).collect();
    if !held.is_empty() {
        let wait = Duration::from_millis(r.timeout_ms.max(0) as u64);
        let mut elected = broker.elect_preferred(held, wait).await.into_iter();
        for r in results.iter_mut().filter(|r| r.is_none()) {
            *r = elected.next();
        }
    }
    let results =
        results.into_iter().map(|r| r.unwrap_or_else(|| Err((ErrorCode::UnknownServerError, "no answer".into()))));
    for ((topic, partition), result) in asks.into_iter().zip(results) {
        if every && matches!(&result, Err((ErrorCode::ElectionNotNeeded, _))) {
            continue;
        }
        let mut pr = PartitionResult::default();
        pr.partition_id = partition;
        if let Err((code, why)) = result {
            pr.error_code = code.code();
            pr.error_message = Some(str_bytes(why));
        }
        match resp.replica_election_results.iter_mut().find(|t| t.topic.as_str() == topic) {
            Some(t) => t.partition_result.push(pr),
            None => {
                let mut t = ReplicaElectionResult::default();
                t.topic = TopicName(str_bytes(topic));
                t.partition_result.push(pr);
                resp.replica_election_results.push(t);
            }
        }
    }
    req.respond(resp)
}
