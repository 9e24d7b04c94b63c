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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::fake::Fake;
    use crate::api::join_group::tests::{join, stable, subscription};
    use crate::api::offset_fetch::tests::commit;

    fn request(groups: &[&str], include_authorized_operations: bool) -> DescribeGroupsRequest {
        let mut r = DescribeGroupsRequest::default();
        r.groups = groups.iter().map(|g| GroupId(str_bytes(*g))).collect();
        r.include_authorized_operations = include_authorized_operations;
        r
    }

    #[test]
    fn a_stable_group_is_described_with_each_members_metadata_and_assignment() {
        let b = Fake::new();
        let (m, _) = stable(&b, "g", &["t"]);
        let resp: DescribeGroupsResponse = b.call(ApiKey::DescribeGroups, 5, &request(&["g"], false));
        let g = &resp.groups[0];
        assert_eq!((g.error_code, g.group_id.as_str(), g.group_state.as_str()), (0, "g", "Stable"));
        assert_eq!((g.protocol_type.as_str(), g.protocol_data.as_str()), ("consumer", "range"));
        assert_eq!(g.authorized_operations, AUTH_OPS_OMITTED, "not asked for");
        let members: Vec<_> = g
            .members
            .iter()
            .map(|x| (x.member_id.to_string(), x.client_id.to_string(), x.client_host.to_string()))
            .collect();
        assert_eq!(members, vec![(m, "unit-test".to_string(), "/127.0.0.1".to_string())]);
        assert_eq!(g.members[0].member_metadata, subscription(&["t"]));
        assert_eq!(&g.members[0].member_assignment[..], b"A");
    }

    #[test]
    fn a_group_in_a_rebalance_shows_no_protocol_yet() {
        let b = Fake::new();
        join(&b, "g", &["t"]);
        let resp: DescribeGroupsResponse = b.call(ApiKey::DescribeGroups, 0, &request(&["g"], false));
        let g = &resp.groups[0];
        assert_eq!((g.group_state.as_str(), g.protocol_data.as_str()), ("CompletingRebalance", ""));
        assert_eq!(g.protocol_type.as_str(), "consumer");
        assert!(g.members[0].member_assignment.is_empty());
    }

    #[test]
    fn an_unknown_group_is_dead_before_v6_and_group_id_not_found_from_v6() {
        let b = Fake::new();
        let resp: DescribeGroupsResponse = b.call(ApiKey::DescribeGroups, 5, &request(&["nope"], false));
        let g = &resp.groups[0];
        assert_eq!((g.error_code, g.group_state.as_str(), g.members.len()), (0, "Dead", 0));
        let resp: DescribeGroupsResponse = b.call(ApiKey::DescribeGroups, 6, &request(&["nope"], true));
        let g = &resp.groups[0];
        assert_eq!((g.error_code, g.group_state.as_str()), (ErrorCode::GroupIdNotFound.code(), "Dead"));
        assert_eq!(g.error_message.as_deref(), Some("group nope not found"));
    }

    #[test]
    fn authorized_operations_are_filled_in_when_asked_for() {
        let b = Fake::with(|c| {
            c.authorizer_enabled = true;
            c.super_users = "User:ANONYMOUS".into();
        });
        b.topic("t", 1);
        commit(&b, "g", "t", &[(0, 1)]);
        b.allow("User:eve", ResourceType::Group, "g", Operation::Read);
        let eve = Some("User:eve");
        let resp: DescribeGroupsResponse = b.call_as(eve, ApiKey::DescribeGroups, 3, &request(&["g"], true));
        let g = &resp.groups[0];
        let read_and_describe = 1 << Operation::Read.code() | 1 << Operation::Describe.code();
        assert_eq!((g.error_code, g.group_state.as_str()), (0, "Empty"));
        assert_eq!(g.authorized_operations, read_and_describe, "READ implies DESCRIBE");
        let resp: DescribeGroupsResponse = b.call_as(eve, ApiKey::DescribeGroups, 3, &request(&["g"], false));
        assert_eq!(resp.groups[0].authorized_operations, AUTH_OPS_OMITTED);
    }

    #[test]
    fn each_group_the_principal_may_not_describe_is_refused_on_its_own() {
        let b = Fake::with(|c| {
            c.authorizer_enabled = true;
            c.super_users = "User:ANONYMOUS".into();
        });
        b.topic("t", 1);
        commit(&b, "a", "t", &[(0, 1)]);
        commit(&b, "b", "t", &[(0, 1)]);
        b.allow("User:eve", ResourceType::Group, "a", Operation::Describe);
        let resp: DescribeGroupsResponse =
            b.call_as(Some("User:eve"), ApiKey::DescribeGroups, 5, &request(&["a", "b", ""], false));
        let answers: Vec<_> =
            resp.groups.iter().map(|g| (g.group_id.to_string(), g.error_code, g.group_state.to_string())).collect();
        let refused = ErrorCode::GroupAuthorizationFailed.code();
        assert_eq!(
            answers,
            vec![
                ("a".into(), 0, "Empty".into()),
                ("b".into(), refused, String::new()),
                (String::new(), refused, String::new())
            ]
        );
    }

    #[test]
    fn an_empty_group_id_is_invalid() {
        let b = Fake::new();
        let resp: DescribeGroupsResponse = b.call(ApiKey::DescribeGroups, 5, &request(&[""], false));
        assert_eq!(resp.groups[0].error_code, ErrorCode::InvalidGroupId.code());
    }
}
