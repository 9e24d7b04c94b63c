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
    let parsed: Vec<Result<AclBinding, String>> = r
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
            (Err(why), _) => failed(ErrorCode::InvalidRequest, why),
            (Ok(_), Err((code, why))) => failed(*code, why.clone()),
            (Ok(_), Ok(())) => AclCreationResult::default(),
        })
        .collect();
    req.respond(resp)
}
