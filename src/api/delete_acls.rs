//! DeleteAcls: needs ALTER on the cluster; each filter deletes the ACLs it matches and
//! answers them.

use proto_kafka::messages::delete_acls_response::{DeleteAclsFilterResult, DeleteAclsMatchingAcl};
use proto_kafka::messages::{ApiKey, DeleteAclsRequest, DeleteAclsResponse};

use super::{authz, str_bytes, ApiSpec, Broker, Outcome, Request};
use crate::auth::acl::{AclBinding, AclFilter, Operation};
use crate::protocol::ErrorCode;

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::DeleteAcls, 1, 3);

fn failed(code: ErrorCode, message: impl Into<String>) -> DeleteAclsFilterResult {
    let mut r = DeleteAclsFilterResult::default();
    r.error_code = code.code();
    r.error_message = Some(str_bytes(message.into()));
    r
}

fn matched(b: &AclBinding) -> DeleteAclsMatchingAcl {
    let mut m = DeleteAclsMatchingAcl::default();
    m.resource_type = b.resource_type.code();
    m.resource_name = str_bytes(b.resource_name.clone());
    m.pattern_type = b.pattern.code();
    m.principal = str_bytes(b.principal.clone());
    m.host = str_bytes(b.host.clone());
    m.operation = b.operation.code();
    m.permission_type = b.permission.code();
    m
}

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: DeleteAclsRequest = req.decode()?;
    let mut resp = DeleteAclsResponse::default();
    let refusal = authz::acl_request_refusal(broker, &req, Operation::Alter, "deleting ACLs");
    if let Some((code, why)) = refusal {
        resp.filter_results = r.filters.iter().map(|_| failed(code, why.clone())).collect();
        return req.respond(resp);
    }
    let parsed: Vec<Result<AclFilter, String>> = r
        .filters
        .iter()
        .map(|f| {
            AclFilter::from_wire(
                f.resource_type_filter,
                f.resource_name_filter.as_deref(),
                f.pattern_type_filter,
                f.principal_filter.as_deref(),
                f.host_filter.as_deref(),
                f.operation,
                f.permission_type,
            )
        })
        .collect();
    let valid: Vec<AclFilter> = parsed.iter().filter_map(|p| p.as_ref().ok().cloned()).collect();
    let deleted = if valid.is_empty() { Ok(Vec::new()) } else { broker.delete_acls(valid).await };
    let mut deleted_iter = match &deleted {
        Ok(d) => d.clone().into_iter(),
        Err(_) => Vec::new().into_iter(),
    };
    resp.filter_results = parsed
        .into_iter()
        .map(|p| match (p, &deleted) {
            (Err(why), _) => failed(ErrorCode::InvalidRequest, why),
            (Ok(_), Err((code, why))) => failed(*code, why.clone()),
            (Ok(_), Ok(_)) => {
                let mut res = DeleteAclsFilterResult::default();
                res.error_message = None; // Kafka's answer on success
                res.matching_acls = deleted_iter.next().unwrap_or_default().iter().map(matched).collect();
                res
            }
        })
        .collect();
    req.respond(resp)
}
