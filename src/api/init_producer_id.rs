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
    // v3+ (KIP-360): a producer id and its epoch come together or not at all, as Kafka checks.
    if (r.producer_id.0 == -1) != (r.producer_epoch == -1) {
        resp.error_code = ErrorCode::InvalidRequest.code();
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

#[cfg(test)]
mod tests {
    use proto_kafka::messages::TransactionalId;

    use super::*;
    use crate::api::fake::Fake;
    use crate::api::str_bytes;
    use crate::auth::acl::{ResourceType, CLUSTER_NAME};

    fn request(transactional_id: Option<&str>) -> InitProducerIdRequest {
        let mut r = InitProducerIdRequest::default();
        r.transactional_id = transactional_id.map(|t| TransactionalId(str_bytes(t)));
        r.transaction_timeout_ms = 60_000;
        r.producer_id = ProducerId(-1);
        r.producer_epoch = -1;
        r
    }

    /// (error code, producer id, epoch) InitProducerId v4 answers `principal`.
    fn init(b: &Fake, principal: Option<&str>, transactional_id: Option<&str>) -> (i16, i64, i16) {
        let resp: InitProducerIdResponse = b.call_as(principal, ApiKey::InitProducerId, 4, &request(transactional_id));
        (resp.error_code, resp.producer_id.0, resp.producer_epoch)
    }

    #[test]
    fn each_idempotent_producer_gets_a_new_id_at_epoch_zero() {
        let b = Fake::new();
        let (code, first, epoch) = init(&b, None, None);
        assert_eq!((code, epoch), (0, 0));
        assert!(first >= 0, "a real id: {first}");
        assert_eq!(init(&b, None, None), (0, first + 1, 0), "never the same id twice");
        assert_eq!(init(&b, None, Some("")), (0, first + 2, 0), "an empty transactional id is none");
        let resp: InitProducerIdResponse = b.call(ApiKey::InitProducerId, 0, &request(None));
        assert_eq!((resp.error_code, resp.producer_id.0, resp.producer_epoch), (0, first + 3, 0), "v0 alike");
    }

    #[test]
    fn a_producer_id_without_its_epoch_or_an_epoch_without_its_id_is_invalid_request() {
        let b = Fake::new();
        let (_, first, _) = init(&b, None, None);
        for (id, epoch) in [(first, -1), (-1, 0)] {
            let mut r = request(None);
            (r.producer_id, r.producer_epoch) = (ProducerId(id), epoch);
            let resp: InitProducerIdResponse = b.call(ApiKey::InitProducerId, 4, &r);
            assert_eq!((resp.error_code, resp.producer_id.0), (ErrorCode::InvalidRequest.code(), -1));
        }
        let mut r = request(None);
        (r.producer_id, r.producer_epoch) = (ProducerId(first), 0);
        let resp: InitProducerIdResponse = b.call(ApiKey::InitProducerId, 4, &r);
        assert_eq!((resp.error_code, resp.producer_id.0), (0, first + 1), "both given: a new id, as Kafka's");
    }

    #[test]
    fn a_transactional_id_is_refused_with_invalid_request_and_takes_no_id() {
        let b = Fake::new();
        let (_, first, _) = init(&b, None, None);
        assert_eq!(init(&b, None, Some("tx")), (ErrorCode::InvalidRequest.code(), -1, -1));
        assert_eq!(init(&b, None, None).1, first + 1, "the refusal allocated nothing");
    }

    #[test]
    fn an_idempotent_producer_needs_idempotent_write_on_the_cluster_or_write_on_a_topic() {
        let b = Fake::with(|c| c.authorizer_enabled = true);
        b.topic("t", 1);
        let denied = (ErrorCode::ClusterAuthorizationFailed.code(), -1, -1);
        assert_eq!(init(&b, Some("User:eve"), None), denied);
        b.allow("User:eve", ResourceType::Topic, "t", Operation::Read);
        assert_eq!(init(&b, Some("User:eve"), None), denied, "READ on a topic is not enough");
        b.allow("User:eve", ResourceType::Topic, "t", Operation::Write);
        assert_eq!(init(&b, Some("User:eve"), None).0, 0);
        b.allow("User:ann", ResourceType::Cluster, CLUSTER_NAME, Operation::IdempotentWrite);
        assert_eq!(init(&b, Some("User:ann"), None).0, 0);
    }

    #[test]
    fn a_transactional_id_needs_write_on_it_before_it_is_refused_for_having_no_transactions() {
        let b = Fake::with(|c| c.authorizer_enabled = true);
        b.allow("User:eve", ResourceType::Cluster, CLUSTER_NAME, Operation::IdempotentWrite);
        let denied = (ErrorCode::TransactionalIdAuthorizationFailed.code(), -1, -1);
        assert_eq!(init(&b, Some("User:eve"), Some("tx")), denied);
        b.allow("User:eve", ResourceType::TransactionalId, "tx", Operation::Write);
        assert_eq!(init(&b, Some("User:eve"), Some("tx")), (ErrorCode::InvalidRequest.code(), -1, -1));
    }
}
