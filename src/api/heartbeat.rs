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
