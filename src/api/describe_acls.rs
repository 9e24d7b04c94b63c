//! DescribeAcls: needs DESCRIBE on the cluster; answers the ACLs a filter matches, grouped by
//! resource pattern as Kafka does.

use std::collections::BTreeMap;

use proto_kafka::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use proto_kafka::messages::{ApiKey, DescribeAclsRequest, DescribeAclsResponse};

use super::{authz, str_bytes, ApiSpec, Broker, Outcome, Request};
use crate::auth::acl::{AclFilter, Operation};
use crate::protocol::ErrorCode;

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::DescribeAcls, 1, 3);

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: DescribeAclsRequest = req.decode()?;
    let mut resp = DescribeAclsResponse::default();
    let filter = AclFilter::from_wire(
        r.resource_type_filter,
        r.resource_name_filter.as_deref(),
        r.pattern_type_filter,
        r.principal_filter.as_deref(),
        r.host_filter.as_deref(),
        r.operation,
        r.permission_type,
    );
    let refusal = authz::acl_request_refusal(broker, &req, Operation::Describe, "describing ACLs")
        .or_else(|| filter.as_ref().err().map(|why| (ErrorCode::InvalidRequest, why.to_string())));
    if let Some((code, why)) = refusal {
        resp.error_code = code.code();
        resp.error_message = Some(str_bytes(why));
        return req.respond(resp);
    }
    let filter = filter.expect("checked above");
    let mut by_resource: BTreeMap<(i8, String, i8), Vec<AclDescription>> = BTreeMap::new();
    for b in broker.acls().matching(&filter) {
        let mut d = AclDescription::default();
        d.principal = str_bytes(b.principal.clone());
        d.host = str_bytes(b.host.clone());
        d.operation = b.operation.code();
        d.permission_type = b.permission.code();
        by_resource.entry((b.resource_type.code(), b.resource_name.clone(), b.pattern.code())).or_default().push(d);
    }
    resp.resources = by_resource
        .into_iter()
        .map(|((resource_type, name, pattern), acls)| {
            let mut res = DescribeAclsResource::default();
            res.resource_type = resource_type;
            res.resource_name = str_bytes(name);
            res.pattern_type = pattern;
            res.acls = acls;
            res
        })
        .collect();
    req.respond(resp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::fake::Fake;
    use crate::auth::acl::{PatternFilter, PatternType, Permission, ResourceType, CLUSTER_NAME};

    const ANY: i8 = 1;

    fn filter(resource_type: i8, name: Option<&str>, pattern: PatternFilter) -> DescribeAclsRequest {
        let mut r = DescribeAclsRequest::default();
        r.resource_type_filter = resource_type;
        r.resource_name_filter = name.map(str_bytes);
        r.pattern_type_filter = pattern.code();
        r.principal_filter = None;
        r.host_filter = None;
        r.operation = ANY;
        r.permission_type = ANY;
        r
    }

    fn describe(b: &Fake, principal: &str, req: &DescribeAclsRequest) -> DescribeAclsResponse {
        b.call_as(Some(principal), ApiKey::DescribeAcls, 3, req)
    }

    /// One resource answered: (resource type, name, pattern, [(principal, operation)]).
    type Listed = (i8, String, i8, Vec<(String, i8)>);

    fn listed(resp: &DescribeAclsResponse) -> Vec<Listed> {
        resp.resources
            .iter()
            .map(|r| {
                let acls = r.acls.iter().map(|a| (a.principal.to_string(), a.operation)).collect();
                (r.resource_type, r.resource_name.to_string(), r.pattern_type, acls)
            })
            .collect()
    }

    fn broker_with_acls() -> Fake {
        let b = Fake::with(|c| {
            c.authorizer_enabled = true;
            c.super_users = "User:admin".into();
        });
        b.allow("User:eve", ResourceType::Topic, "orders", Operation::Read);
        b.allow("User:bob", ResourceType::Topic, "orders", Operation::Write);
        b.allow("User:eve", ResourceType::Topic, "*", Operation::Describe);
        b.allow("User:eve", ResourceType::Group, "g", Operation::Read);
        b
    }

    #[test]
    fn any_filter_lists_every_acl_grouped_by_resource() {
        let b = broker_with_acls();
        let resp = describe(&b, "User:admin", &filter(ANY, None, PatternFilter::Any));
        assert_eq!(resp.error_code, 0);
        let (topic, group, literal) =
            (ResourceType::Topic.code(), ResourceType::Group.code(), PatternType::Literal.code());
        let (read, write, describe_op) = (Operation::Read.code(), Operation::Write.code(), Operation::Describe.code());
        assert_eq!(
            listed(&resp),
            vec![
                (topic, "*".into(), literal, vec![("User:eve".into(), describe_op)]),
                (topic, "orders".into(), literal, vec![("User:eve".into(), read), ("User:bob".into(), write)]),
                (group, "g".into(), literal, vec![("User:eve".into(), read)]),
            ]
        );
        let a = &resp.resources[1].acls[0];
        assert_eq!((a.host.as_str(), a.permission_type), ("*", Permission::Allow.code()));
    }

    #[test]
    fn a_literal_filter_finds_the_name_and_match_also_finds_the_wildcard() {
        let b = broker_with_acls();
        let topic = ResourceType::Topic.code();
        let literal = describe(&b, "User:admin", &filter(topic, Some("orders"), PatternFilter::Literal));
        let names: Vec<String> = listed(&literal).into_iter().map(|r| r.1).collect();
        assert_eq!(names, vec!["orders".to_string()]);
        let matched = describe(&b, "User:admin", &filter(topic, Some("orders"), PatternFilter::Match));
        let names: Vec<String> = listed(&matched).into_iter().map(|r| r.1).collect();
        assert_eq!(names, vec!["*".to_string(), "orders".to_string()]);
        let mut eve_only = filter(topic, Some("orders"), PatternFilter::Literal);
        eve_only.principal_filter = Some(str_bytes("User:bob"));
        let resp = describe(&b, "User:admin", &eve_only);
        assert_eq!(listed(&resp)[0].3, vec![("User:bob".to_string(), Operation::Write.code())]);
    }

    #[test]
    fn a_filter_with_unknown_codes_is_invalid_request() {
        let b = broker_with_acls();
        let mut unknown_op = filter(ANY, None, PatternFilter::Any);
        unknown_op.operation = 0;
        let mut unknown_pattern = filter(ANY, None, PatternFilter::Any);
        unknown_pattern.pattern_type_filter = 0;
        for req in [unknown_op, unknown_pattern] {
            let resp = describe(&b, "User:admin", &req);
            assert_eq!(resp.error_code, ErrorCode::InvalidRequest.code());
            assert!(resp.error_message.is_some() && resp.resources.is_empty());
        }
    }

    #[test]
    fn describing_acls_needs_describe_on_the_cluster_and_an_authorizer() {
        let b = broker_with_acls();
        let resp = describe(&b, "User:eve", &filter(ANY, None, PatternFilter::Any));
        assert_eq!(resp.error_code, ErrorCode::ClusterAuthorizationFailed.code());
        assert!(resp.resources.is_empty(), "nothing is told");
        b.allow("User:ops", ResourceType::Cluster, CLUSTER_NAME, Operation::Describe);
        let resp = describe(&b, "User:ops", &filter(ResourceType::Group.code(), None, PatternFilter::Any));
        assert_eq!((resp.error_code, resp.resources.len()), (0, 1));

        let open = Fake::new();
        let resp = describe(&open, "User:admin", &filter(ANY, None, PatternFilter::Any));
        assert_eq!(resp.error_code, ErrorCode::SecurityDisabled.code());
    }
}
