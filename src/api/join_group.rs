//! JoinGroup: runs on the group's home shard and answers when the rebalance completes
//! (which may take up to the rebalance timeout). Versions 0–1 are served as Kafka 4 still
//! advertises them (KAFKA-19444). Needs READ on the group.

use proto_kafka::messages::join_group_response::JoinGroupResponseMember;
use proto_kafka::messages::{ApiKey, JoinGroupRequest, JoinGroupResponse};

use super::group_call::{admit, call, fresh_member_id, opt_str};
use super::{str_bytes, ApiSpec, Broker, Outcome, Request};
use crate::auth::acl::Operation;
use crate::group::{GroupOp, JoinRequest, JoinResponse};

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::JoinGroup, 0, 9);

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: JoinGroupRequest = req.decode()?;
    let group = r.group_id.to_string();
    let result = if let Err(e) = admit(broker, &req, &group, Operation::Read) {
        JoinResponse { error: Some(e), generation: -1, ..Default::default() }
    } else {
        let join = JoinRequest {
            token: 0,
            member_id: r.member_id.to_string(),
            instance_id: opt_str(&r.group_instance_id),
            client_id: req.client_id.clone().unwrap_or_default(),
            client_host: format!("/{}", req.peer.ip()),
            session_timeout_ms: r.session_timeout_ms.max(0) as u64,
            rebalance_timeout_ms: if req.version >= 1 { r.rebalance_timeout_ms } else { r.session_timeout_ms }.max(0)
                as u64,
            protocol_type: r.protocol_type.to_string(),
            protocols: r.protocols.iter().map(|p| (p.name.to_string(), p.metadata.clone())).collect(),
            require_known_member_id: req.version >= 4,
            fresh_member_id: fresh_member_id(req.client_id.as_deref()),
            supports_skip_assignment: req.version >= 9,
        };
        let member_id = join.member_id.clone();
        call(broker, &group, |reply| GroupOp::Join { req: join, reply }).await.unwrap_or_else(|e| JoinResponse {
            error: Some(e),
            generation: -1,
            member_id,
            ..Default::default()
        })
    };
    let mut resp = JoinGroupResponse::default();
    resp.error_code = result.error.map_or(0, |e| e.code());
    resp.generation_id = result.generation;
    resp.protocol_type = result.protocol_type.map(str_bytes);
    // Before v7 the protocol name is not nullable.
    resp.protocol_name = match result.protocol_name {
        Some(p) => Some(str_bytes(p)),
        None if req.version < 7 => Some(str_bytes("")),
        None => None,
    };
    resp.leader = str_bytes(result.leader);
    resp.skip_assignment = result.skip_assignment;
    resp.member_id = str_bytes(result.member_id);
    resp.members = result
        .members
        .into_iter()
        .map(|m| {
            let mut o = JoinGroupResponseMember::default();
            o.member_id = str_bytes(m.member_id);
            o.group_instance_id = m.instance_id.map(str_bytes);
            o.metadata = m.metadata;
            o
        })
        .collect();
    req.respond(resp)
}
