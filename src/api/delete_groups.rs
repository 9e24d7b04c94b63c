//! DeleteGroups: an empty group and its committed offsets are removed (a tombstone is
//! appended to `__consumer_offsets`); a group with members answers NON_EMPTY_GROUP. Each
//! group needs DELETE.

use proto_kafka::messages::delete_groups_response::DeletableGroupResult;
use proto_kafka::messages::{ApiKey, DeleteGroupsRequest, DeleteGroupsResponse, GroupId};

use super::group_call::{admit, call};
use super::{ApiSpec, Broker, Outcome, Request};
use crate::auth::acl::Operation;
use crate::group::GroupOp;

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::DeleteGroups, 0, 2);

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: DeleteGroupsRequest = req.decode()?;
    let mut resp = DeleteGroupsResponse::default();
    for g in &r.groups_names {
        let result = match admit(broker, &req, g, Operation::Delete) {
            Err(e) => Err(e),
            Ok(()) => call(broker, g.as_str(), |reply| GroupOp::Delete { reply }).await.and_then(|r| r),
        };
        let mut out = DeletableGroupResult::default();
        out.group_id = GroupId(g.0.clone());
        out.error_code = result.err().map_or(0, |e| e.code());
        resp.results.push(out);
    }
    req.respond(resp)
}

#[cfg(test)]
mod tests {
    use proto_kafka::messages::leave_group_request::MemberIdentity;
    use proto_kafka::messages::{LeaveGroupRequest, LeaveGroupResponse, OffsetFetchResponse};

    use super::*;
    use crate::api::fake::Fake;
    use crate::api::join_group::tests::{listed, stable};
    use crate::api::offset_fetch::tests::{commit, request as fetch_request, shown};
    use crate::api::str_bytes;
    use crate::auth::acl::ResourceType;
    use crate::protocol::ErrorCode;

    fn request(groups: &[&str]) -> DeleteGroupsRequest {
        let mut r = DeleteGroupsRequest::default();
        r.groups_names = groups.iter().map(|g| GroupId(str_bytes(*g))).collect();
        r
    }

    fn codes(resp: &DeleteGroupsResponse) -> Vec<(String, i16)> {
        resp.results.iter().map(|r| (r.group_id.to_string(), r.error_code)).collect()
    }

    #[test]
    fn an_empty_group_and_its_offsets_are_deleted_with_a_tombstone() {
        let b = Fake::new();
        b.topic("t", 1);
        commit(&b, "g", "t", &[(0, 5)]);
        let appends = b.offsets_appends();
        let resp: DeleteGroupsResponse = b.call(ApiKey::DeleteGroups, 2, &request(&["g"]));
        assert_eq!(codes(&resp), vec![("g".into(), 0)]);
        assert_eq!(b.offsets_appends(), appends + 1, "a tombstone in __consumer_offsets");
        assert!(listed(&b).is_empty());
        let fetched: OffsetFetchResponse = b.call(ApiKey::OffsetFetch, 7, &fetch_request("g", None));
        assert!(shown(&fetched).is_empty(), "no offsets are left");

        let resp: DeleteGroupsResponse = b.call(ApiKey::DeleteGroups, 0, &request(&["g", ""]));
        let (gone, invalid) = (ErrorCode::GroupIdNotFound.code(), ErrorCode::InvalidGroupId.code());
        assert_eq!(codes(&resp), vec![("g".into(), gone), (String::new(), invalid)]);
    }

    #[test]
    fn a_group_with_members_is_not_deleted_until_they_leave() {
        let b = Fake::new();
        let (m, _) = stable(&b, "g", &["t"]);
        let resp: DeleteGroupsResponse = b.call(ApiKey::DeleteGroups, 2, &request(&["g"]));
        assert_eq!(codes(&resp), vec![("g".into(), ErrorCode::NonEmptyGroup.code())]);
        assert_eq!(listed(&b), vec!["g"]);

        let mut leave = LeaveGroupRequest::default();
        leave.group_id = GroupId(str_bytes("g"));
        let mut who = MemberIdentity::default();
        who.member_id = str_bytes(m);
        leave.members.push(who);
        let left: LeaveGroupResponse = b.call(ApiKey::LeaveGroup, 5, &leave);
        assert_eq!(left.members[0].error_code, 0);
        let resp: DeleteGroupsResponse = b.call(ApiKey::DeleteGroups, 2, &request(&["g"]));
        assert_eq!(codes(&resp), vec![("g".into(), 0)]);
        assert!(listed(&b).is_empty());
    }

    #[test]
    fn a_group_whose_tombstone_cannot_be_appended_remains() {
        let b = Fake::new();
        b.topic("t", 1);
        commit(&b, "g", "t", &[(0, 5)]);
        b.fail_offsets_log(true);
        let resp: DeleteGroupsResponse = b.call(ApiKey::DeleteGroups, 2, &request(&["g"]));
        assert_eq!(codes(&resp), vec![("g".into(), ErrorCode::CoordinatorNotAvailable.code())]);
        b.fail_offsets_log(false);
        assert_eq!(listed(&b), vec!["g"]);
        let fetched: OffsetFetchResponse = b.call(ApiKey::OffsetFetch, 7, &fetch_request("g", None));
        assert_eq!(shown(&fetched).len(), 1, "its offsets too");
    }

    #[test]
    fn each_group_without_delete_is_refused_on_its_own() {
        let b = Fake::with(|c| {
            c.authorizer_enabled = true;
            c.super_users = "User:ANONYMOUS".into();
        });
        b.topic("t", 1);
        commit(&b, "a", "t", &[(0, 1)]);
        commit(&b, "b", "t", &[(0, 1)]);
        b.allow("User:eve", ResourceType::Group, "a", Operation::Delete);
        b.allow("User:eve", ResourceType::Group, "b", Operation::Read);
        let resp: DeleteGroupsResponse =
            b.call_as(Some("User:eve"), ApiKey::DeleteGroups, 2, &request(&["a", "b", "nope"]));
        let refused = ErrorCode::GroupAuthorizationFailed.code();
        assert_eq!(codes(&resp), vec![("a".into(), 0), ("b".into(), refused), ("nope".into(), refused)]);
        assert_eq!(listed(&b), vec!["b"]);
    }
}
