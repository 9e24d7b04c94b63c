//! AlterPartitionReassignments (`kafka-reassign-partitions --execute` and `--cancel`): each
//! partition's target replicas go to the controller, which records them; the partition's
//! leader then moves its raft group there (`shard::reassign`), and ListPartitionReassignments
//! shows the move until it is done. A null target cancels the move under way
//! (NO_REASSIGNMENT_IN_PROGRESS if there is none). Kafka's checks: the partition exists
//! (UNKNOWN_TOPIC_OR_PARTITION), the target names cluster members once each
//! (INVALID_REPLICA_ASSIGNMENT), and from v1 keeps the replica count unless the request
//! allows a change (INVALID_REPLICATION_FACTOR). A broker alone accepts only itself.
//!
//! Authorization, Kafka's: ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED for the
//! whole request.

use proto_kafka::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use proto_kafka::messages::{AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, ApiKey};

use super::{authz, str_bytes, ApiSpec, Broker, Outcome, Request};
use crate::auth::acl::Operation;
use crate::controller::Reassignment;
use crate::protocol::ErrorCode;

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::AlterPartitionReassignments, 0, 1);

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: AlterPartitionReassignmentsRequest = req.decode()?;
    let mut resp = AlterPartitionReassignmentsResponse::default();
    // v0 has no flag: it allows a change, as Kafka's default does.
    resp.allow_replication_factor_change = r.allow_replication_factor_change;
    let allow = req.version == 0 || r.allow_replication_factor_change;
    if !authz::cluster(broker, &req, Operation::Alter) {
        resp.error_code = ErrorCode::ClusterAuthorizationFailed.code();
        resp.error_message = Some(str_bytes(ErrorCode::ClusterAuthorizationFailed.to_string()));
        return req.respond(resp);
    }
    let asks: Vec<Reassignment> = r
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| Reassignment {
                topic: t.name.to_string(),
                partition: p.partition_index,
                target: p.replicas.as_ref().map(|rs| rs.iter().map(|b| b.0).collect()),
                allow_replication_factor_change: allow,
            })
        })
        .collect();
    let mut results = broker.alter_reassignments(asks).await.into_iter();
    for t in &r.topics {
        let mut tr = ReassignableTopicResponse::default();
        tr.name = t.name.clone();
        for p in &t.partitions {
            let mut pr = ReassignablePartitionResponse::default();
            pr.partition_index = p.partition_index;
            match results.next().unwrap_or_else(|| Err((ErrorCode::UnknownServerError, "no answer".into()))) {
                Ok(()) => pr.error_message = None,
                Err((code, why)) => {
                    pr.error_code = code.code();
                    pr.error_message = Some(str_bytes(why));
                }
            }
            tr.partitions.push(pr);
        }
        resp.responses.push(tr);
    }
    req.respond(resp)
}
