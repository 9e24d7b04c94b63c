//! FindCoordinator, single key (v0–3) and batched (v4+): a broker alone coordinates every
//! group (the group's home shard inside it is `hash(group) % shards`, chosen when group
//! requests arrive); in a cluster the leader of the group's `__consumer_offsets` partition
//! does, and while that has no leader the answer is COORDINATOR_NOT_AVAILABLE (retriable). Transaction and share-group coordinators do not exist yet and are
//! refused with INVALID_REQUEST and a message saying so.

use proto_kafka::messages::find_coordinator_response::Coordinator;
use proto_kafka::messages::{ApiKey, BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};

use super::{authz, metadata, str_bytes, ApiSpec, Broker, Outcome, Request};
use crate::auth::acl::Operation;
use crate::protocol::ErrorCode;
use crate::shard::Tp;

/// The broker that coordinates `group`, as Metadata lists it.
fn group_coordinator(
    broker: &impl Broker,
    req: &Request,
    group: &str,
) -> Option<proto_kafka::messages::metadata_response::MetadataResponseBroker> {
    let catalog = broker.catalog();
    let offsets = catalog.topic(crate::group::offsets::TOPIC);
    let Some(t) = offsets.filter(|t| t.replicated()) else { return Some(metadata::broker_entry(broker, req)) };
    let partition = crate::group::offsets::partition_for(group, t.partitions() as u32);
    let leader = broker.leadership(&Tp { topic: t.id, partition })?.leader;
    metadata::broker_entries(broker, req).into_iter().find(|b| b.node_id.0 == leader)
}

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
        match group_coordinator(broker, req, &c.key) {
            Some(b) => {
                c.node_id = b.node_id;
                c.host = b.host;
                c.port = b.port;
            }
            None => {
                c.node_id = BrokerId(-1);
                c.port = -1;
                c.error_code = ErrorCode::CoordinatorNotAvailable.code();
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::fake::Fake;
    use crate::auth::acl::ResourceType;

    fn single(key: &str, key_type: i8) -> FindCoordinatorRequest {
        let mut r = FindCoordinatorRequest::default();
        r.key = str_bytes(key);
        r.key_type = key_type;
        r
    }

    fn batched(keys: &[&str], key_type: i8) -> FindCoordinatorRequest {
        let mut r = FindCoordinatorRequest::default();
        r.coordinator_keys = keys.iter().map(|k| str_bytes(*k)).collect();
        r.key_type = key_type;
        r
    }

    /// (key, error code, node, host, port) of each coordinator answered.
    fn coordinators(resp: &FindCoordinatorResponse) -> Vec<(&str, i16, i32, &str, i32)> {
        resp.coordinators.iter().map(|c| (c.key.as_str(), c.error_code, c.node_id.0, c.host.as_str(), c.port)).collect()
    }

    #[test]
    fn before_v4_the_one_group_is_coordinated_by_this_broker() {
        let b = Fake::with(|c| c.node_id = 3);
        for version in [0, 3] {
            let resp: FindCoordinatorResponse = b.call(ApiKey::FindCoordinator, version, &single("g", KEY_GROUP));
            let found = (resp.error_code, resp.node_id.0, resp.host.as_str(), resp.port);
            assert_eq!(found, (0, 3, "127.0.0.1", 9092), "v{version}");
            assert!(resp.coordinators.is_empty(), "v{version}");
        }
    }

    #[test]
    fn from_v4_each_key_gets_its_own_answer() {
        let b = Fake::new();
        let resp: FindCoordinatorResponse = b.call(ApiKey::FindCoordinator, 4, &batched(&["g1", "g2"], KEY_GROUP));
        assert_eq!(coordinators(&resp), vec![("g1", 0, 0, "127.0.0.1", 9092), ("g2", 0, 0, "127.0.0.1", 9092)]);
        assert_eq!((resp.error_code, resp.node_id.0, resp.port), (0, 0, 0), "the single-key fields are left out");
    }

    #[test]
    fn transaction_and_share_coordinators_are_invalid_request() {
        let b = Fake::new();
        let invalid = ErrorCode::InvalidRequest.code();
        for key_type in [KEY_TRANSACTION, 2] {
            let resp: FindCoordinatorResponse = b.call(ApiKey::FindCoordinator, 6, &batched(&["k"], key_type));
            assert_eq!(coordinators(&resp), vec![("k", invalid, -1, "", -1)], "key type {key_type}");
            let message = resp.coordinators[0].error_message.as_deref().unwrap_or_default();
            assert!(message.contains("not supported"), "{message}");
        }
        let resp: FindCoordinatorResponse = b.call(ApiKey::FindCoordinator, 3, &single("tx", KEY_TRANSACTION));
        assert_eq!((resp.error_code, resp.node_id.0, resp.port), (invalid, -1, -1));
        assert!(resp.error_message.is_some());
    }

    #[test]
    fn without_describe_the_group_or_transactional_id_is_refused() {
        let b = Fake::with(|c| c.authorizer_enabled = true);
        b.allow("User:eve", ResourceType::Group, "mine", Operation::Describe);
        let resp: FindCoordinatorResponse =
            b.call_as(Some("User:eve"), ApiKey::FindCoordinator, 4, &batched(&["mine", "theirs"], KEY_GROUP));
        let denied = ErrorCode::GroupAuthorizationFailed.code();
        assert_eq!(coordinators(&resp), vec![("mine", 0, 0, "127.0.0.1", 9092), ("theirs", denied, -1, "", -1)]);
        let resp: FindCoordinatorResponse =
            b.call_as(Some("User:eve"), ApiKey::FindCoordinator, 2, &single("theirs", KEY_GROUP));
        assert_eq!((resp.error_code, resp.node_id.0, resp.port), (denied, -1, -1));
        let resp: FindCoordinatorResponse =
            b.call_as(Some("User:eve"), ApiKey::FindCoordinator, 4, &batched(&["tx"], KEY_TRANSACTION));
        let denied = ErrorCode::TransactionalIdAuthorizationFailed.code();
        assert_eq!(coordinators(&resp), vec![("tx", denied, -1, "", -1)], "refused before being unsupported");
    }
}
