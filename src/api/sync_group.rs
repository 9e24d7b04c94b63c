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
