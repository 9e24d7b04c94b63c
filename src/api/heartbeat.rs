//! Heartbeat: keeps a member's session alive and tells it when to rejoin. Needs READ on the
//! group.

use proto_kafka::messages::{ApiKey, HeartbeatRequest, HeartbeatResponse};

use super::group_call::{admit, call, opt_str};
use super::{ApiSpec, Broker, Outcome, Request};
use crate::auth::acl::Operation;
use crate::group::GroupOp;

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::Heartbeat, 0, 4);

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: HeartbeatRequest = req.decode()?;
    let group = r.group_id.to_string();
    let result = match admit(broker, &req, &group, Operation::Read) {
        Err(e) => Err(e),
        Ok(()) => {
            let (member_id, instance_id, generation) =
                (r.member_id.to_string(), opt_str(&r.group_instance_id), r.generation_id);
            call(broker, &group, move |reply| GroupOp::Heartbeat { member_id, instance_id, generation, reply })
                .await
                .and_then(|r| r)
        }
    };
    let mut resp = HeartbeatResponse::default();
    resp.error_code = result.err().map_or(0, |e| e.code());
    req.respond(resp)
}

#[cfg(test)]
mod tests {
    use proto_kafka::messages::{GroupId, JoinGroupResponse, SyncGroupResponse};

    use super::*;
    use crate::api::fake::Fake;
    use crate::api::join_group::tests::{join, join_request, stable, start, sync_request};
    use crate::api::str_bytes;
    use crate::auth::acl::ResourceType;
    use crate::protocol::ErrorCode;

    fn request(group: &str, member_id: &str, generation: i32, instance_id: Option<&str>) -> HeartbeatRequest {
        let mut r = HeartbeatRequest::default();
        r.group_id = GroupId(str_bytes(group));
        r.member_id = str_bytes(member_id);
        r.generation_id = generation;
        r.group_instance_id = instance_id.map(str_bytes);
        r
    }

    fn beat(b: &Fake, version: i16, req: &HeartbeatRequest) -> i16 {
        b.call::<_, HeartbeatResponse>(ApiKey::Heartbeat, version, req).error_code
    }

    #[test]
    fn a_member_of_the_current_generation_is_kept_alive() {
        let b = Fake::new();
        let joined = join(&b, "g", &["t"]);
        let (m, generation) = (joined.member_id.to_string(), joined.generation_id);
        assert_eq!(beat(&b, 0, &request("g", &m, generation, None)), 0, "while the leader assigns");
        let synced: SyncGroupResponse = b.call(ApiKey::SyncGroup, 5, &sync_request("g", &m, generation, &[]));
        assert_eq!(synced.error_code, 0);
        assert_eq!(beat(&b, 4, &request("g", &m, generation, None)), 0, "in the Stable group");
    }

    #[test]
    fn stale_generations_and_unknown_members_or_groups_are_refused() {
        let b = Fake::new();
        let (m, generation) = stable(&b, "g", &["t"]);
        assert_eq!(beat(&b, 4, &request("g", &m, generation - 1, None)), ErrorCode::IllegalGeneration.code());
        assert_eq!(beat(&b, 4, &request("g", "ghost", generation, None)), ErrorCode::UnknownMemberId.code());
        assert_eq!(beat(&b, 4, &request("nope", &m, generation, None)), ErrorCode::UnknownMemberId.code());
        assert_eq!(beat(&b, 4, &request("", &m, generation, None)), ErrorCode::InvalidGroupId.code());
    }

    #[test]
    fn during_a_rebalance_the_member_is_told_to_rejoin() {
        let b = Fake::new();
        let (m1, generation) = stable(&b, "g", &["t"]);
        let first: JoinGroupResponse = b.call(ApiKey::JoinGroup, 9, &join_request("g", "", &["t"]));
        let _m2 = start(&b, ApiKey::JoinGroup, 9, &join_request("g", &first.member_id, &["t"]));
        assert_eq!(beat(&b, 4, &request("g", &m1, generation, None)), ErrorCode::RebalanceInProgress.code());
    }

    #[test]
    fn a_static_member_replaced_by_a_new_instance_is_fenced_from_v3() {
        let b = Fake::new();
        let mut req = join_request("g", "", &["t"]);
        req.group_instance_id = Some(str_bytes("host-a"));
        let joined: JoinGroupResponse = b.call(ApiKey::JoinGroup, 9, &req);
        let (old, generation) = (joined.member_id.to_string(), joined.generation_id);
        let synced: SyncGroupResponse =
            b.call(ApiKey::SyncGroup, 5, &sync_request("g", &old, generation, &[(&old, b"A")]));
        assert_eq!(synced.error_code, 0);
        let replaced: JoinGroupResponse = b.call(ApiKey::JoinGroup, 9, &req);
        let new = replaced.member_id.to_string();

        assert_eq!(beat(&b, 3, &request("g", &old, generation, Some("host-a"))), ErrorCode::FencedInstanceId.code());
        assert_eq!(beat(&b, 3, &request("g", &new, generation, Some("host-a"))), 0);
    }

    #[test]
    fn without_read_on_the_group_the_heartbeat_is_refused() {
        let b = Fake::with(|c| c.authorizer_enabled = true);
        b.allow("User:ANONYMOUS", ResourceType::Group, "g", Operation::Read);
        let (m, generation) = stable(&b, "g", &["t"]);
        let resp: HeartbeatResponse =
            b.call_as(Some("User:eve"), ApiKey::Heartbeat, 4, &request("g", &m, generation, None));
        assert_eq!(resp.error_code, ErrorCode::GroupAuthorizationFailed.code());
        let resp: HeartbeatResponse =
            b.call_as(Some("User:eve"), ApiKey::Heartbeat, 4, &request("", &m, generation, None));
        assert_eq!(resp.error_code, ErrorCode::GroupAuthorizationFailed.code(), "refused before the id is checked");
    }
}
