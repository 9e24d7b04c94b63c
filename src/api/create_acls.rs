//! CreateAcls: needs ALTER on the cluster. Each creation is checked on its own (a bad one
//! is INVALID_REQUEST, the others still apply); the valid ones are stored together and are
//! enforced on every shard when the response leaves.

use proto_kafka::messages::create_acls_response::AclCreationResult;
use proto_kafka::messages::{ApiKey, CreateAclsRequest, CreateAclsResponse};

use super::{authz, str_bytes, ApiSpec, Broker, Outcome, Request};
use crate::auth::acl::{AclBinding, Operation};
use crate::protocol::ErrorCode;

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::CreateAcls, 1, 3);

fn failed(code: ErrorCode, message: impl Into<String>) -> AclCreationResult {
    let mut r = AclCreationResult::default();
    r.error_code = code.code();
    r.error_message = Some(str_bytes(message.into()));
    r
}

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: CreateAclsRequest = req.decode()?;
    let mut resp = CreateAclsResponse::default();
    let refusal = authz::acl_request_refusal(broker, &req, Operation::Alter, "creating ACLs");
    if let Some((code, why)) = refusal {
        resp.results = r.creations.iter().map(|_| failed(code, why.clone())).collect();
        return req.respond(resp);
    }
    let parsed: Vec<Result<AclBinding, _>> = r
        .creations
        .iter()
        .map(|c| {
            AclBinding::from_wire(
                c.resource_type,
                &c.resource_name,
                c.resource_pattern_type,
                &c.principal,
                &c.host,
                c.operation,
                c.permission_type,
            )
        })
        .collect();
    let valid: Vec<AclBinding> = parsed.iter().filter_map(|p| p.as_ref().ok().cloned()).collect();
    let stored = if valid.is_empty() { Ok(()) } else { broker.create_acls(valid).await };
    resp.results = parsed
        .into_iter()
        .map(|p| match (p, &stored) {
            (Err(why), _) => failed(ErrorCode::InvalidRequest, why.to_string()),
            (Ok(_), Err((code, why))) => failed(*code, why.clone()),
            (Ok(_), Ok(())) => AclCreationResult::default(),
        })
        .collect();
    req.respond(resp)
}

#[cfg(test)]
mod tests {
    use proto_kafka::messages::create_acls_request::AclCreation;

    use super::*;
    use crate::api::fake::Fake;
    use crate::auth::acl::{PatternType, Permission, ResourceType, CLUSTER_NAME};

    fn creation(resource_type: i8, name: &str, principal: &str, host: &str, operation: i8) -> AclCreation {
        let mut c = AclCreation::default();
        c.resource_type = resource_type;
        c.resource_name = str_bytes(name);
        c.resource_pattern_type = PatternType::Literal.code();
        c.principal = str_bytes(principal);
        c.host = str_bytes(host);
        c.operation = operation;
        c.permission_type = Permission::Allow.code();
        c
    }

    fn read_topic(principal: &str, topic: &str) -> AclCreation {
        creation(ResourceType::Topic.code(), topic, principal, "*", Operation::Read.code())
    }

    fn create(b: &Fake, principal: &str, creations: Vec<AclCreation>) -> Vec<i16> {
        let mut req = CreateAclsRequest::default();
        req.creations = creations;
        let resp: CreateAclsResponse = b.call_as(Some(principal), ApiKey::CreateAcls, 3, &req);
        assert_eq!(resp.results.len(), req.creations.len());
        assert!(
            resp.results.iter().filter(|r| r.error_code != 0).all(|r| r.error_message.is_some()),
            "refusals say why"
        );
        resp.results.iter().map(|r| r.error_code).collect()
    }

    fn admin_broker() -> Fake {
        Fake::with(|c| {
            c.authorizer_enabled = true;
            c.super_users = "User:admin".into();
        })
    }

    #[test]
    fn a_created_acl_is_stored_and_enforced() {
        let b = admin_broker();
        assert_eq!(create(&b, "User:admin", vec![read_topic("User:eve", "t")]), vec![0]);
        let expected = AclBinding {
            resource_type: ResourceType::Topic,
            resource_name: "t".into(),
            pattern: PatternType::Literal,
            principal: "User:eve".into(),
            host: "*".into(),
            operation: Operation::Read,
            permission: Permission::Allow,
        };
        assert_eq!(b.acls().bindings(), &[expected]);
        let eve = crate::auth::Session { principal: "User:eve".into(), host: "127.0.0.1".parse().unwrap() };
        assert!(b.authorize(&eve, Operation::Read, ResourceType::Topic, "t"));
        assert!(!b.authorize(&eve, Operation::Write, ResourceType::Topic, "t"));
    }

    #[test]
    fn each_invalid_creation_is_refused_alone_and_the_valid_ones_are_stored() {
        let b = admin_broker();
        let topic = ResourceType::Topic.code();
        let read = Operation::Read.code();
        let mut unknown_pattern = read_topic("User:eve", "t");
        unknown_pattern.resource_pattern_type = 1; // ANY: a filter value, not a pattern
        let creations = vec![
            creation(0, "t", "User:eve", "*", read),
            creation(topic, "", "User:eve", "*", read),
            creation(ResourceType::Cluster.code(), "other", "User:eve", "*", Operation::Alter.code()),
            creation(topic, "t", "eve", "*", read),
            creation(topic, "t", "User:eve", "client.example.com", read),
            creation(topic, "t", "User:eve", "*", 1),
            unknown_pattern,
            creation(topic, "t", "User:eve", "10.0.0.5", read),
        ];
        let invalid = ErrorCode::InvalidRequest.code();
        assert_eq!(
            create(&b, "User:admin", creations),
            vec![invalid, invalid, invalid, invalid, invalid, invalid, invalid, 0]
        );
        let acls = b.acls();
        let stored: Vec<(&str, &str)> =
            acls.bindings().iter().map(|a| (a.principal.as_str(), a.host.as_str())).collect();
        assert_eq!(stored, vec![("User:eve", "10.0.0.5")]);
    }

    #[test]
    fn without_an_authorizer_creations_are_security_disabled() {
        let b = Fake::new();
        let disabled = ErrorCode::SecurityDisabled.code();
        assert_eq!(
            create(&b, "User:admin", vec![read_topic("User:eve", "t"), read_topic("User:bob", "t")]),
            vec![disabled, disabled]
        );
        assert!(b.acls().bindings().is_empty());
    }

    #[test]
    fn creating_acls_needs_alter_on_the_cluster() {
        let b = admin_broker();
        let refused = ErrorCode::ClusterAuthorizationFailed.code();
        assert_eq!(create(&b, "User:eve", vec![read_topic("User:eve", "t")]), vec![refused]);
        assert!(b.acls().bindings().is_empty());
        b.allow("User:ops", ResourceType::Cluster, CLUSTER_NAME, Operation::Alter);
        assert_eq!(create(&b, "User:ops", vec![read_topic("User:eve", "t")]), vec![0]);
        assert_eq!(b.acls().bindings().len(), 2);
    }
}
