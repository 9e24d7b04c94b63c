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
        .or_else(|| filter.as_ref().err().map(|why| (ErrorCode::InvalidRequest, why.clone())));
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
