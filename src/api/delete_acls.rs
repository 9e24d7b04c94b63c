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
    let parsed: Vec<Result<AclFilter, _>> = r
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
            (Err(why), _) => failed(ErrorCode::InvalidRequest, why.to_string()),
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

#[cfg(test)]
mod tests {
    use proto_kafka::messages::delete_acls_request::DeleteAclsFilter;

    use super::*;
    use crate::api::fake::Fake;
    use crate::auth::acl::{PatternFilter, ResourceType, CLUSTER_NAME};

    const ANY: i8 = 1;

    fn filter(resource_type: i8, name: Option<&str>, principal: Option<&str>) -> DeleteAclsFilter {
        let mut f = DeleteAclsFilter::default();
        f.resource_type_filter = resource_type;
        f.resource_name_filter = name.map(str_bytes);
        f.pattern_type_filter = PatternFilter::Any.code();
        f.principal_filter = principal.map(str_bytes);
        f.host_filter = None;
        f.operation = ANY;
        f.permission_type = ANY;
        f
    }

    fn delete(b: &Fake, principal: &str, filters: Vec<DeleteAclsFilter>) -> DeleteAclsResponse {
        let mut req = DeleteAclsRequest::default();
        req.filters = filters;
        let resp: DeleteAclsResponse = b.call_as(Some(principal), ApiKey::DeleteAcls, 3, &req);
        assert_eq!(resp.filter_results.len(), req.filters.len());
        resp
    }

    /// Each filter's (error, [(resource name, principal)] deleted).
    fn results(resp: &DeleteAclsResponse) -> Vec<(i16, Vec<(String, String)>)> {
        resp.filter_results
            .iter()
            .map(|r| {
                let acls = r.matching_acls.iter().map(|m| (m.resource_name.to_string(), m.principal.to_string()));
                (r.error_code, acls.collect())
            })
            .collect()
    }

    fn remaining(b: &Fake) -> Vec<(String, String)> {
        b.acls().bindings().iter().map(|a| (a.resource_name.clone(), a.principal.clone())).collect()
    }

    fn broker_with_acls() -> Fake {
        let b = Fake::with(|c| {
            c.authorizer_enabled = true;
            c.super_users = "User:admin".into();
        });
        b.allow("User:eve", ResourceType::Topic, "a", Operation::Read);
        b.allow("User:bob", ResourceType::Topic, "a", Operation::Read);
        b.allow("User:eve", ResourceType::Topic, "b", Operation::Write);
        b.allow("User:eve", ResourceType::Group, "g", Operation::Read);
        b
    }

    fn pair(name: &str, principal: &str) -> (String, String) {
        (name.into(), principal.into())
    }

    #[test]
    fn each_filter_deletes_and_answers_what_it_matches_among_the_acls_before_the_request() {
        let b = broker_with_acls();
        let topic = ResourceType::Topic.code();
        let resp = delete(
            &b,
            "User:admin",
            vec![
                filter(topic, Some("a"), None),
                filter(topic, None, Some("User:eve")),
                filter(topic, Some("zzz"), None),
            ],
        );
        assert_eq!(
            results(&resp),
            vec![
                (0, vec![pair("a", "User:eve"), pair("a", "User:bob")]),
                (0, vec![pair("a", "User:eve"), pair("b", "User:eve")]),
                (0, vec![]),
            ]
        );
        let m = &resp.filter_results[1].matching_acls[1];
        assert_eq!((m.resource_type, m.operation, m.host.as_str()), (topic, Operation::Write.code(), "*"));
        assert_eq!(remaining(&b), vec![pair("g", "User:eve")], "only what no filter matched is left");
    }

    #[test]
    fn an_invalid_filter_fails_alone() {
        let b = broker_with_acls();
        let mut bad = filter(ANY, None, None);
        bad.permission_type = 0;
        let resp = delete(&b, "User:admin", vec![bad, filter(ResourceType::Group.code(), None, None)]);
        assert_eq!(results(&resp), vec![(ErrorCode::InvalidRequest.code(), vec![]), (0, vec![pair("g", "User:eve")])]);
        assert!(resp.filter_results[0].error_message.is_some());
        assert_eq!(remaining(&b).len(), 3);
    }

    #[test]
    fn deleting_acls_needs_alter_on_the_cluster_and_an_authorizer() {
        let b = broker_with_acls();
        let refused = ErrorCode::ClusterAuthorizationFailed.code();
        let resp = delete(&b, "User:eve", vec![filter(ANY, None, None)]);
        assert_eq!(results(&resp), vec![(refused, vec![])]);
        assert_eq!(remaining(&b).len(), 4, "nothing deleted");
        b.allow("User:ops", ResourceType::Cluster, CLUSTER_NAME, Operation::Alter);
        let resp = delete(&b, "User:ops", vec![filter(ResourceType::Group.code(), None, None)]);
        assert_eq!(results(&resp), vec![(0, vec![pair("g", "User:eve")])]);

        let open = Fake::new();
        let resp = delete(&open, "User:admin", vec![filter(ANY, None, None)]);
        assert_eq!(results(&resp), vec![(ErrorCode::SecurityDisabled.code(), vec![])]);
    }
}
