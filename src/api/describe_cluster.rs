//! DescribeCluster: one broker, which is also the controller. As in Kafka, nobody is refused:
//! the cluster's authorized operations, when asked for, are 0 for a principal that may not
//! DESCRIBE the cluster.

use proto_kafka::messages::describe_cluster_response::DescribeClusterBroker;
use proto_kafka::messages::{ApiKey, BrokerId, DescribeClusterRequest, DescribeClusterResponse};

use super::metadata::AUTH_OPS_OMITTED;
use super::{authz, str_bytes, ApiSpec, Broker, Outcome, Request};

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::DescribeCluster, 0, 2);

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: DescribeClusterRequest = req.decode()?;
    let mut resp = DescribeClusterResponse::default();
    resp.endpoint_type = if req.version >= 1 { r.endpoint_type } else { 1 };
    resp.cluster_id = str_bytes(broker.catalog().cluster_id.clone());
    resp.controller_id = BrokerId(broker.config().node_id);
    resp.cluster_authorized_operations = if r.include_cluster_authorized_operations {
        authz::cluster_operations(broker, &req)
    } else {
        AUTH_OPS_OMITTED
    };
    let mut b = DescribeClusterBroker::default();
    b.broker_id = BrokerId(broker.config().node_id);
    b.host = str_bytes(req.conn.listener.advertised.host.clone());
    b.port = req.conn.listener.advertised.port as i32;
    resp.brokers = vec![b];
    req.respond(resp)
}
