//! InitProducerId for idempotent producers: every call gets a new producer id (epoch 0)
//! from the controller, as Kafka does for producers without a transactional id. A
//! transactional id is refused with INVALID_REQUEST: this broker has no transactions yet.
//!
//! Authorization, Kafka's: a transactional id needs WRITE on it
//! (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent producer needs IDEMPOTENT_WRITE on
//! the cluster or WRITE on some topic (CLUSTER_AUTHORIZATION_FAILED).

use proto_kafka::messages::{ApiKey, InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use super::{authz, ApiSpec, Broker, Outcome, Request};
use crate::auth::acl::Operation;
use crate::protocol::ErrorCode;

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::InitProducerId, 0, 5);

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: InitProducerIdRequest = req.decode()?;
    let mut resp = InitProducerIdResponse::default();
    resp.producer_id = ProducerId(-1);
    resp.producer_epoch = -1;
    // An empty transactional id is served as none (an idempotent producer), and checked so.
    let transactional_id = r.transactional_id.as_ref().filter(|t| !t.is_empty());
    let refusal = match transactional_id {
        Some(t) if !authz::transactional_id(broker, &req, Operation::Write, t) => {
            Some(ErrorCode::TransactionalIdAuthorizationFailed)
        }
        Some(_) => None,
        None if !authz::cluster(broker, &req, Operation::IdempotentWrite)
            && !authz::any_topic(broker, &req, Operation::Write) =>
        {
            Some(ErrorCode::ClusterAuthorizationFailed)
        }
        None => None,
    };
    if let Some(e) = refusal {
        resp.error_code = e.code();
        return req.respond(resp);
    }
    if transactional_id.is_some() {
        tracing::debug!(client = ?req.client_id, "refusing InitProducerId with a transactional id: no transactions");
        resp.error_code = ErrorCode::InvalidRequest.code();
        return req.respond(resp);
    }
    match broker.allocate_producer_id().await {
        Ok(id) => {
            resp.producer_id = ProducerId(id);
            resp.producer_epoch = 0;
        }
        Err(e) => resp.error_code = e.code(),
    }
    req.respond(resp)
}
