//! InitProducerId for idempotent producers: every call gets a new producer id (epoch 0)
//! from the controller, as Kafka does for producers without a transactional id. A
//! transactional id is refused with INVALID_REQUEST: this broker has no transactions yet.

use std::rc::Rc;

use proto_kafka::messages::{ApiKey, InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use super::{ApiSpec, Outcome, Request};
use crate::protocol::ErrorCode;
use crate::shard::Shard;

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::InitProducerId, 0, 5);

pub async fn handle(shard: &Rc<Shard>, req: Request) -> Outcome {
    let r: InitProducerIdRequest = req.decode()?;
    let mut resp = InitProducerIdResponse::default();
    resp.producer_id = ProducerId(-1);
    resp.producer_epoch = -1;
    if r.transactional_id.as_ref().is_some_and(|t| !t.is_empty()) {
        tracing::debug!(client = ?req.client_id, "refusing InitProducerId with a transactional id: no transactions");
        resp.error_code = ErrorCode::InvalidRequest.code();
        return req.respond(&resp);
    }
    match shard.allocate_producer_id().await {
        Ok(id) => {
            resp.producer_id = ProducerId(id);
            resp.producer_epoch = 0;
        }
        Err(e) => resp.error_code = e.code(),
    }
    req.respond(&resp)
}
