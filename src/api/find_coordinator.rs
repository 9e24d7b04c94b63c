//! FindCoordinator, single key (v0–3) and batched (v4+): every group is coordinated by this
//! broker (the group's home shard inside it is `hash(group) % shards`, chosen when group
//! requests arrive). Transaction and share-group coordinators do not exist yet and are
//! refused with INVALID_REQUEST and a message saying so.

use proto_kafka::messages::find_coordinator_response::Coordinator;
use proto_kafka::messages::{ApiKey, BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};

use super::{authz, str_bytes, ApiSpec, Broker, Outcome, Request};
use crate::auth::acl::Operation;
use crate::protocol::ErrorCode;

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::FindCoordinator, 0, 6);

const KEY_GROUP: i8 = 0;

const KEY_TRANSACTION: i8 = 1;

fn coordinator(broker: &impl Broker, req: &Request, key: proto_kafka::protocol::StrBytes, key_type: i8) -> Coordinator {
    let mut c = Coordinator::default();
    // Kafka's checks: DESCRIBE on the group, or on the transactional id.
    let denied = match key_type {
        KEY_GROUP => {
            (!authz::group(broker, req, Operation::Describe, &key)).then_some(ErrorCode::GroupAuthorizationFailed)
        }
        KEY_TRANSACTION => (!authz::transactional_id(broker, req, Operation::Describe, &key))
            .then_some(ErrorCode::TransactionalIdAuthorizationFailed),
        _ => None,
    };
    c.key = key;
    if let Some(code) = denied {
        c.node_id = BrokerId(-1);
        c.port = -1;
        c.error_code = code.code();
    } else if key_type == KEY_GROUP {
        c.node_id = BrokerId(broker.config().node_id);
        c.host = str_bytes(req.conn.listener.advertised.host.clone());
        c.port = req.conn.listener.advertised.port as i32;
    } else {
        c.node_id = BrokerId(-1);
        c.port = -1;
        c.error_code = ErrorCode::InvalidRequest.code();
        c.error_message = Some(str_bytes(format!(
            "coordinator key type {key_type} is not supported: this broker has no transactions or share groups yet"
        )));
    }
    c
}

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: FindCoordinatorRequest = req.decode()?;
    let mut resp = FindCoordinatorResponse::default();
    if req.version >= 4 {
        resp.coordinators = r.coordinator_keys.into_iter().map(|k| coordinator(broker, &req, k, r.key_type)).collect();
    } else {
        let c = coordinator(broker, &req, r.key, r.key_type);
        resp.error_code = c.error_code;
        resp.error_message = c.error_message;
        resp.node_id = c.node_id;
        resp.host = c.host;
        resp.port = c.port;
    }
    req.respond(resp)
}
