//! DescribeGroups: state, protocol and members (with metadata and assignment) of each group.
//! Each group needs DESCRIBE; its authorized operations are filled in when asked for (v3+).

use proto_kafka::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use proto_kafka::messages::{ApiKey, DescribeGroupsRequest, DescribeGroupsResponse, GroupId};

use super::group_call::{admit, call};
use super::metadata::AUTH_OPS_OMITTED;
use super::{authz, str_bytes, ApiSpec, Broker, Outcome, Request};
use crate::auth::acl::{Operation, ResourceType};
use crate::group::GroupOp;
use crate::protocol::ErrorCode;

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::DescribeGroups, 0, 6);

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: DescribeGroupsRequest = req.decode()?;
    let mut resp = DescribeGroupsResponse::default();
    for g in &r.groups {
        let mut out = DescribedGroup::default();
        out.group_id = GroupId(g.0.clone());
        out.authorized_operations = AUTH_OPS_OMITTED;
        let result = match admit(broker, &req, g, Operation::Describe) {
            Err(e) => Err(e),
            Ok(()) => call(broker, g.as_str(), |reply| GroupOp::Describe { reply }).await,
        };
        match result {
            Ok(d) => {
                out.group_state = str_bytes(d.state);
                out.protocol_type = str_bytes(d.protocol_type);
                out.protocol_data = str_bytes(d.protocol);
                if !d.found && req.version >= 6 {
                    out.error_code = ErrorCode::GroupIdNotFound.code();
                    out.error_message = Some(str_bytes(format!("group {} not found", g.as_str())));
                } else if r.include_authorized_operations {
                    out.authorized_operations = authz::operations(broker, &req, ResourceType::Group, g);
                }
                out.members = d
                    .members
                    .into_iter()
                    .map(|m| {
                        let mut o = DescribedGroupMember::default();
                        o.member_id = str_bytes(m.member_id);
                        o.group_instance_id = m.instance_id.map(str_bytes);
                        o.client_id = str_bytes(m.client_id);
                        o.client_host = str_bytes(m.client_host);
                        o.member_metadata = m.metadata;
                        o.member_assignment = m.assignment;
                        o
                    })
                    .collect();
            }
            Err(e) => out.error_code = e.code(),
        }
        resp.groups.push(out);
    }
    req.respond(resp)
}
