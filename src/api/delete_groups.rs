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
