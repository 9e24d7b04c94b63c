//! LeaveGroup: one member (v0–2) or a batch of members by id or instance id (v3+). Needs
//! READ on the group. A group the coordinator does not know answers UNKNOWN_MEMBER_ID for
//! each member, as Kafka's does.

use proto_kafka::messages::leave_group_response::MemberResponse;
use proto_kafka::messages::{ApiKey, LeaveGroupRequest, LeaveGroupResponse};

use super::group_call::{admit, call, opt_str};
use super::{ApiSpec, Broker, Outcome, Request};
use crate::auth::acl::Operation;
use crate::group::GroupOp;
use crate::protocol::ErrorCode;

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::LeaveGroup, 0, 5);

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: LeaveGroupRequest = req.decode()?;
    let group = r.group_id.to_string();
    let members: Vec<(String, Option<String>)> = if req.version >= 3 {
        r.members.iter().map(|m| (m.member_id.to_string(), opt_str(&m.group_instance_id))).collect()
    } else {
        vec![(r.member_id.to_string(), None)]
    };
    let result = match admit(broker, &req, &group, Operation::Read) {
        Err(e) => Err(e),
        Ok(()) => {
            let m = members.clone();
            match call(broker, &group, |reply| GroupOp::Leave { members: m, reply }).await.and_then(|r| r) {
                // An unknown group: each member is unknown, as in Kafka's GroupCoordinatorService.
                Err(ErrorCode::UnknownMemberId) => Ok(vec![Err(ErrorCode::UnknownMemberId); members.len()]),
                other => other,
            }
        }
    };
    let mut resp = LeaveGroupResponse::default();
    match result {
        Ok(per) => {
            if req.version < 3 {
                resp.error_code = per.first().and_then(|r| r.err()).map_or(0, |e| e.code());
            }
            resp.members = members
                .into_iter()
                .zip(per)
                .map(|((id, iid), r)| {
                    let mut m = MemberResponse::default();
                    m.member_id = super::str_bytes(id);
                    m.group_instance_id = iid.map(super::str_bytes);
                    m.error_code = r.err().map_or(0, |e| e.code());
                    m
                })
                .collect();
            if req.version < 3 {
                resp.members.clear();
            }
        }
        Err(e) => resp.error_code = e.code(),
    }
    req.respond(resp)
}

#[cfg(test)]
mod tests {
    use proto_kafka::messages::leave_group_request::MemberIdentity;
    use proto_kafka::messages::{GroupId, JoinGroupResponse};

    use super::*;
    use crate::api::fake::Fake;
    use crate::api::join_group::tests::{describe, join_request, stable};
    use crate::api::str_bytes;
    use crate::auth::acl::ResourceType;

    /// A v3+ request for `members` (member id, instance id).
    fn request(group: &str, members: &[(&str, Option<&str>)]) -> LeaveGroupRequest {
        let mut r = LeaveGroupRequest::default();
        r.group_id = GroupId(str_bytes(group));
        for (id, iid) in members {
            let mut m = MemberIdentity::default();
            m.member_id = str_bytes(*id);
            m.group_instance_id = iid.map(str_bytes);
            r.members.push(m);
        }
        r
    }

    /// A v0–2 request for one member.
    fn request_v0(group: &str, member_id: &str) -> LeaveGroupRequest {
        let mut r = LeaveGroupRequest::default();
        r.group_id = GroupId(str_bytes(group));
        r.member_id = str_bytes(member_id);
        r
    }

    fn answers(resp: &LeaveGroupResponse) -> Vec<(String, Option<String>, i16)> {
        let out = resp.members.iter();
        out.map(|m| (m.member_id.to_string(), m.group_instance_id.as_ref().map(|i| i.to_string()), m.error_code))
            .collect()
    }

    #[test]
    fn from_v3_each_leaving_member_has_its_own_answer() {
        let b = Fake::new();
        let (m, _) = stable(&b, "g", &["t"]);
        let resp: LeaveGroupResponse = b.call(ApiKey::LeaveGroup, 5, &request("g", &[(&m, None), ("ghost", None)]));
        assert_eq!(resp.error_code, 0);
        let unknown = ErrorCode::UnknownMemberId.code();
        assert_eq!(answers(&resp), vec![(m, None, 0), ("ghost".into(), None, unknown)]);
        let d = describe(&b, "g");
        assert_eq!((d.group_state.as_str(), d.members.len()), ("Empty", 0), "the last member left");
    }

    #[test]
    fn before_v3_the_members_error_is_the_requests() {
        let b = Fake::new();
        let (m, _) = stable(&b, "g", &["t"]);
        let resp: LeaveGroupResponse = b.call(ApiKey::LeaveGroup, 1, &request_v0("g", "ghost"));
        assert_eq!((resp.error_code, resp.members.len()), (ErrorCode::UnknownMemberId.code(), 0));
        assert_eq!(describe(&b, "g").members.len(), 1);
        let resp: LeaveGroupResponse = b.call(ApiKey::LeaveGroup, 2, &request_v0("g", &m));
        assert_eq!((resp.error_code, resp.members.len()), (0, 0));
        assert_eq!(describe(&b, "g").group_state.as_str(), "Empty");
    }

    #[test]
    fn a_static_member_leaves_by_its_instance_id() {
        let b = Fake::new();
        let mut req = join_request("g", "", &["t"]);
        req.group_instance_id = Some(str_bytes("host-a"));
        let joined: JoinGroupResponse = b.call(ApiKey::JoinGroup, 9, &req);
        assert_eq!(joined.error_code, 0);
        let resp: LeaveGroupResponse =
            b.call(ApiKey::LeaveGroup, 4, &request("g", &[("", Some("host-a")), ("", Some("host-b"))]));
        let unknown = ErrorCode::UnknownMemberId.code();
        assert_eq!(
            answers(&resp),
            vec![(String::new(), Some("host-a".into()), 0), (String::new(), Some("host-b".into()), unknown)]
        );
        assert!(describe(&b, "g").members.is_empty());
    }

    /// Kafka (GroupCoordinatorService.leaveGroup): a group it does not know answers
    /// UNKNOWN_MEMBER_ID for each member, the request itself succeeding; before v3 the one
    /// member's error is the request's.
    #[test]
    fn leaving_an_unknown_group_answers_unknown_member_id_for_each_member() {
        let b = Fake::new();
        let unknown = ErrorCode::UnknownMemberId.code();
        let resp: LeaveGroupResponse = b.call(ApiKey::LeaveGroup, 3, &request("nope", &[("m", None)]));
        assert_eq!((resp.error_code, answers(&resp)), (0, vec![("m".into(), None, unknown)]));
        let resp: LeaveGroupResponse = b.call(ApiKey::LeaveGroup, 0, &request_v0("nope", "m"));
        assert_eq!(resp.error_code, unknown);
    }

    #[test]
    fn an_empty_group_id_is_invalid() {
        let b = Fake::new();
        let resp: LeaveGroupResponse = b.call(ApiKey::LeaveGroup, 5, &request("", &[("m", None)]));
        assert_eq!((resp.error_code, resp.members.len()), (ErrorCode::InvalidGroupId.code(), 0));
    }

    #[test]
    fn without_read_on_the_group_nobody_leaves() {
        let b = Fake::with(|c| c.authorizer_enabled = true);
        b.allow("User:ANONYMOUS", ResourceType::Group, "g", Operation::Read);
        let (m, _) = stable(&b, "g", &["t"]);
        let resp: LeaveGroupResponse = b.call_as(Some("User:eve"), ApiKey::LeaveGroup, 5, &request("g", &[(&m, None)]));
        assert_eq!((resp.error_code, resp.members.len()), (ErrorCode::GroupAuthorizationFailed.code(), 0));
        assert_eq!(describe(&b, "g").members.len(), 1, "the member is still there");
    }
}
