//! DescribeCluster: the brokers Metadata lists, and the controller it names. As in Kafka, nobody is refused:
//! the cluster's authorized operations, when asked for, are 0 for a principal that may not
//! DESCRIBE the cluster. From v1 the client says which endpoints it wants: this broker's
//! (1); the controllers' (2) are MISMATCHED_ENDPOINT_TYPE, any other type
//! UNSUPPORTED_ENDPOINT_TYPE, with Kafka's messages.

use proto_kafka::messages::describe_cluster_response::DescribeClusterBroker;
use proto_kafka::messages::{ApiKey, BrokerId, DescribeClusterRequest, DescribeClusterResponse};

use super::metadata::AUTH_OPS_OMITTED;
use super::{authz, metadata, str_bytes, ApiSpec, Broker, Outcome, Request};
use crate::protocol::ErrorCode;

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::DescribeCluster, 0, 2);

// Kafka's EndpointType ids.
const BROKER: i8 = 1;
const CONTROLLER: i8 = 2;

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: DescribeClusterRequest = req.decode()?;
    let mut resp = DescribeClusterResponse::default();
    // v0 has no endpoint type: it decodes as BROKER.
    if r.endpoint_type != BROKER {
        let (code, message) = match r.endpoint_type {
            CONTROLLER => (
                ErrorCode::MismatchedEndpointType,
                "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER"
                    .to_string(),
            ),
            other => (ErrorCode::UnsupportedEndpointType, format!("Unsupported endpoint type {other}")),
        };
        resp.error_code = code.code();
        resp.error_message = Some(str_bytes(message));
        return req.respond(resp);
    }
    resp.endpoint_type = BROKER;
    resp.cluster_id = str_bytes(broker.catalog().cluster_id.clone());
    resp.controller_id = BrokerId(metadata::controller_id(broker));
    resp.cluster_authorized_operations = if r.include_cluster_authorized_operations {
        authz::cluster_operations(broker, &req)
    } else {
        AUTH_OPS_OMITTED
    };
    resp.brokers = metadata::broker_entries(broker, &req)
        .into_iter()
        .map(|m| {
            let mut b = DescribeClusterBroker::default();
            b.broker_id = m.node_id;
            b.host = m.host;
            b.port = m.port;
            b.rack = m.rack;
            b
        })
        .collect();
    req.respond(resp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::fake::Fake;
    use crate::auth::acl::{Operation, ResourceType, CLUSTER_NAME};

    fn request(endpoint_type: i8, include_cluster_authorized_operations: bool) -> DescribeClusterRequest {
        let mut r = DescribeClusterRequest::default();
        r.endpoint_type = endpoint_type;
        r.include_cluster_authorized_operations = include_cluster_authorized_operations;
        r
    }

    fn brokers(resp: &DescribeClusterResponse) -> Vec<(i32, &str, i32)> {
        resp.brokers.iter().map(|b| (b.broker_id.0, b.host.as_str(), b.port)).collect()
    }

    #[test]
    fn this_broker_is_the_whole_cluster_and_its_controller() {
        let b = Fake::with(|c| c.node_id = 4);
        for version in [0, 2] {
            let resp: DescribeClusterResponse = b.call(ApiKey::DescribeCluster, version, &request(1, false));
            assert_eq!(resp.error_code, 0, "v{version}");
            assert_eq!(resp.cluster_id.as_str(), b.catalog().cluster_id, "v{version}");
            assert_eq!(resp.controller_id.0, 4, "v{version}");
            assert_eq!(brokers(&resp), vec![(4, "127.0.0.1", 9092)], "the listener's advertised address");
            assert_eq!(resp.cluster_authorized_operations, AUTH_OPS_OMITTED, "not asked for");
            assert_eq!(resp.endpoint_type, 1, "v{version}");
        }
    }

    #[test]
    fn asking_for_controllers_or_an_unknown_endpoint_type_is_refused() {
        let b = Fake::new();
        let resp: DescribeClusterResponse = b.call(ApiKey::DescribeCluster, 1, &request(2, false));
        assert_eq!(resp.error_code, ErrorCode::MismatchedEndpointType.code());
        assert!(resp.error_message.is_some_and(|m| m.contains("CONTROLLER")));
        assert!(resp.brokers.is_empty(), "no endpoints of the wrong type");
        let resp: DescribeClusterResponse = b.call(ApiKey::DescribeCluster, 2, &request(7, false));
        assert_eq!(resp.error_code, ErrorCode::UnsupportedEndpointType.code());
        assert_eq!(resp.error_message.as_deref(), Some("Unsupported endpoint type 7"));
        assert!(resp.brokers.is_empty());
    }

    #[test]
    fn nobody_is_refused_and_the_authorized_operations_are_what_the_principal_may_do() {
        let all_cluster_ops = [5, 7, 8, 9, 10, 11, 12].iter().fold(0, |bits, code| bits | 1 << code);
        let resp: DescribeClusterResponse = Fake::new().call(ApiKey::DescribeCluster, 1, &request(1, true));
        assert_eq!(resp.cluster_authorized_operations, all_cluster_ops, "no authorizer: everything");

        let b = Fake::with(|c| c.authorizer_enabled = true);
        let resp: DescribeClusterResponse = b.call_as(Some("User:eve"), ApiKey::DescribeCluster, 1, &request(1, true));
        assert_eq!(resp.error_code, 0);
        assert_eq!(brokers(&resp).len(), 1, "the brokers are told anyway");
        assert_eq!(resp.cluster_authorized_operations, 0);
        b.allow("User:eve", ResourceType::Cluster, CLUSTER_NAME, Operation::Describe);
        b.allow("User:eve", ResourceType::Cluster, CLUSTER_NAME, Operation::IdempotentWrite);
        let resp: DescribeClusterResponse = b.call_as(Some("User:eve"), ApiKey::DescribeCluster, 1, &request(1, true));
        assert_eq!(resp.cluster_authorized_operations, 1 << 8 | 1 << 12, "DESCRIBE and IDEMPOTENT_WRITE");
    }
}
