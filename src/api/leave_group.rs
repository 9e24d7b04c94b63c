//! LeaveGroup: one member (v0–2) or a batch of members by id or instance id (v3+). Needs
//! READ on the group.

use proto_kafka::messages::leave_group_response::MemberResponse;
use proto_kafka::messages::{ApiKey, LeaveGroupRequest, LeaveGroupResponse};

use super::group_call::{admit, call, opt_str};
use super::{ApiSpec, Broker, Outcome, Request};
use crate::auth::acl::Operation;
use crate::group::GroupOp;

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
            call(broker, &group, |reply| GroupOp::Leave { members: m, reply }).await.and_then(|r| r)
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
