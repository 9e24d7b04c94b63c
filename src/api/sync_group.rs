//! SyncGroup: the leader hands in the assignment; every member gets its own once the
//! leader's has arrived. Needs READ on the group.

use proto_kafka::messages::{ApiKey, SyncGroupRequest, SyncGroupResponse};

use super::group_call::{admit, call, opt_str};
use super::{str_bytes, ApiSpec, Broker, Outcome, Request};
use crate::auth::acl::Operation;
use crate::group::{GroupOp, SyncRequest, SyncResponse};

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::SyncGroup, 0, 5);

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: SyncGroupRequest = req.decode()?;
    let group = r.group_id.to_string();
    let result = if let Err(e) = admit(broker, &req, &group, Operation::Read) {
        SyncResponse { error: Some(e), ..Default::default() }
    } else {
        let sync = SyncRequest {
            token: 0,
            member_id: r.member_id.to_string(),
            instance_id: opt_str(&r.group_instance_id),
            generation: r.generation_id,
            protocol_type: opt_str(&r.protocol_type),
            protocol_name: opt_str(&r.protocol_name),
            assignments: r.assignments.iter().map(|a| (a.member_id.to_string(), a.assignment.clone())).collect(),
        };
        call(broker, &group, |reply| GroupOp::Sync { req: sync, reply })
            .await
            .unwrap_or_else(|e| SyncResponse { error: Some(e), ..Default::default() })
    };
    let mut resp = SyncGroupResponse::default();
    resp.error_code = result.error.map_or(0, |e| e.code());
    resp.protocol_type = result.protocol_type.map(str_bytes);
    resp.protocol_name = result.protocol_name.map(str_bytes);
    resp.assignment = result.assignment;
    req.respond(resp)
}

#[cfg(test)]
mod tests {
    use proto_kafka::messages::{JoinGroupResponse, SyncGroupResponse};

    use super::*;
    use crate::api::fake::Fake;
    use crate::api::join_group::tests::{describe, join, join_request, start, sync_request};
    use crate::auth::acl::ResourceType;
    use crate::protocol::ErrorCode;

    #[test]
    fn the_leaders_assignment_is_handed_back_with_the_protocol_from_v5() {
        let b = Fake::new();
        let joined = join(&b, "g", &["t"]);
        let (m, generation) = (joined.member_id.to_string(), joined.generation_id);
        let resp: SyncGroupResponse = b.call(ApiKey::SyncGroup, 5, &sync_request("g", &m, generation, &[(&m, b"A")]));
        assert_eq!(resp.error_code, 0);
        assert_eq!(&resp.assignment[..], b"A");
        assert_eq!((resp.protocol_type.as_deref(), resp.protocol_name.as_deref()), (Some("consumer"), Some("range")));

        let d = describe(&b, "g");
        assert_eq!(d.group_state.as_str(), "Stable");
        assert_eq!(&d.members[0].member_assignment[..], b"A");
        // A sync in the Stable group answers the member's assignment again; v4 has no protocol.
        let again: SyncGroupResponse = b.call(ApiKey::SyncGroup, 4, &sync_request("g", &m, generation, &[]));
        assert_eq!((again.error_code, &again.assignment[..]), (0, &b"A"[..]));
        assert_eq!((again.protocol_type, again.protocol_name), (None, None));
    }

    #[test]
    fn a_follower_gets_its_assignment_once_the_leader_has_synced() {
        let b = Fake::new();
        let j1 = join(&b, "g", &["t"]);
        let m1 = j1.member_id.to_string();
        let s1: SyncGroupResponse = b.call(ApiKey::SyncGroup, 5, &sync_request("g", &m1, j1.generation_id, &[]));
        assert_eq!(s1.error_code, 0);
        // m2 arrives: the group rebalances, m1 rejoins.
        let first: JoinGroupResponse = b.call(ApiKey::JoinGroup, 9, &join_request("g", "", &["t"]));
        let m2 = first.member_id.to_string();
        let waiting = start(&b, ApiKey::JoinGroup, 9, &join_request("g", &m2, &["t"]));
        let r1: JoinGroupResponse = b.call(ApiKey::JoinGroup, 9, &join_request("g", &m1, &["t"]));
        let generation = r1.generation_id;
        assert_eq!(waiting.answer::<JoinGroupResponse>().generation_id, generation);

        let mut follower = start(&b, ApiKey::SyncGroup, 3, &sync_request("g", &m2, generation, &[]));
        assert!(!follower.is_answered(), "the follower waits for the leader");
        let leader: SyncGroupResponse =
            b.call(ApiKey::SyncGroup, 3, &sync_request("g", &m1, generation, &[(&m1, b"P0"), (&m2, b"P1")]));
        assert_eq!((leader.error_code, &leader.assignment[..]), (0, &b"P0"[..]));
        let follower: SyncGroupResponse = follower.answer();
        assert_eq!((follower.error_code, &follower.assignment[..]), (0, &b"P1"[..]));
    }

    #[test]
    fn stale_generations_unknown_members_and_another_protocol_are_refused() {
        let b = Fake::new();
        let joined = join(&b, "g", &["t"]);
        let (m, generation) = (joined.member_id.to_string(), joined.generation_id);
        let code = |req: &SyncGroupRequest| b.call::<_, SyncGroupResponse>(ApiKey::SyncGroup, 5, req).error_code;

        assert_eq!(code(&sync_request("g", &m, generation + 1, &[])), ErrorCode::IllegalGeneration.code());
        assert_eq!(code(&sync_request("g", "ghost", generation, &[])), ErrorCode::UnknownMemberId.code());
        assert_eq!(code(&sync_request("nope", &m, generation, &[])), ErrorCode::UnknownMemberId.code());
        let mut other = sync_request("g", &m, generation, &[(&m, b"A")]);
        other.protocol_name = Some(str_bytes("roundrobin"));
        assert_eq!(code(&other), ErrorCode::InconsistentGroupProtocol.code());
        assert_eq!(describe(&b, "g").group_state.as_str(), "CompletingRebalance", "no assignment was taken");
        assert_eq!(code(&sync_request("", &m, generation, &[])), ErrorCode::InvalidGroupId.code());
    }

    #[test]
    fn without_read_on_the_group_the_assignment_is_refused() {
        let b = Fake::with(|c| c.authorizer_enabled = true);
        b.allow("User:ANONYMOUS", ResourceType::Group, "g", Operation::Read);
        let joined = join(&b, "g", &["t"]);
        let (m, generation) = (joined.member_id.to_string(), joined.generation_id);
        let req = sync_request("g", &m, generation, &[(&m, b"A")]);
        let resp: SyncGroupResponse = b.call_as(Some("User:eve"), ApiKey::SyncGroup, 5, &req);
        assert_eq!((resp.error_code, resp.assignment.len()), (ErrorCode::GroupAuthorizationFailed.code(), 0));
        assert_eq!(describe(&b, "g").group_state.as_str(), "CompletingRebalance");
    }
}
