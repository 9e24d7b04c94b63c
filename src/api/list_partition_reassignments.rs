//! ListPartitionReassignments (`kafka-reassign-partitions --verify` and `--list`): the
//! reassignments under way, from this broker's catalog, each with all its replicas (the
//! target first, then those leaving), those being added and those being removed. The
//! partitions asked for that are not being moved (or do not exist) are left out, as Kafka
//! does; no topics listed means every reassignment.
//!
//! Authorization, Kafka's: DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED.

use proto_kafka::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use proto_kafka::messages::{ApiKey, BrokerId, ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse};

use super::{authz, str_bytes, ApiSpec, Broker, Outcome, Request};
use crate::auth::acl::Operation;
use crate::controller::ongoing;
use crate::metadata::TopicMeta;
use crate::protocol::ErrorCode;

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::ListPartitionReassignments, 0, 0);

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: ListPartitionReassignmentsRequest = req.decode()?;
    let mut resp = ListPartitionReassignmentsResponse::default();
    if !authz::cluster(broker, &req, Operation::Describe) {
        resp.error_code = ErrorCode::ClusterAuthorizationFailed.code();
        resp.error_message = Some(str_bytes(ErrorCode::ClusterAuthorizationFailed.to_string()));
        return req.respond(resp);
    }
    let cat = broker.catalog();
    let asked: Vec<(&TopicMeta, Vec<i32>)> = match &r.topics {
        None => cat.topics.values().map(|t| (t, t.reassigning.keys().copied().collect())).collect(),
        Some(topics) => topics
            .iter()
            .filter_map(|t| cat.topic(t.name.as_str()).map(|meta| (meta, t.partition_indexes.clone())))
            .collect(),
    };
    for (t, partitions) in asked {
        let mut tr = OngoingTopicReassignment::default();
        tr.name = str_bytes(t.name.clone()).into();
        for p in partitions {
            let Some(o) = ongoing(t, p) else { continue };
            let mut pr = OngoingPartitionReassignment::default();
            pr.partition_index = p;
            let ids = |v: Vec<i32>| v.into_iter().map(BrokerId).collect();
            pr.replicas = ids(o.replicas);
            pr.adding_replicas = ids(o.adding);
            pr.removing_replicas = ids(o.removing);
            tr.partitions.push(pr);
        }
        if !tr.partitions.is_empty() {
            resp.topics.push(tr);
        }
    }
    req.respond(resp)
}
