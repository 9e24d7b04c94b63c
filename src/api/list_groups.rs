//! ListGroups: the groups of every shard, filtered by state (v4+) and type (v5+; all
//! groups here are "classic"). As in Kafka, DESCRIBE on the cluster lists every group;
//! otherwise only the groups the principal may DESCRIBE are listed.

use proto_kafka::messages::list_groups_response::ListedGroup;
use proto_kafka::messages::{ApiKey, GroupId, ListGroupsRequest, ListGroupsResponse};

use super::{authz, str_bytes, ApiSpec, Broker, Outcome, Request};
use crate::auth::acl::Operation;

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::ListGroups, 0, 5);

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: ListGroupsRequest = req.decode()?;
    let mut resp = ListGroupsResponse::default();
    let classic_wanted =
        r.types_filter.is_empty() || r.types_filter.iter().any(|t| t.as_str().eq_ignore_ascii_case("classic"));
    if classic_wanted {
        let states = r.states_filter.iter().map(|s| s.to_string()).collect();
        let all = authz::cluster(broker, &req, Operation::Describe);
        resp.groups = broker
            .list_groups(states)
            .await
            .into_iter()
            .filter(|g| all || authz::group(broker, &req, Operation::Describe, &g.group_id))
            .map(|g| {
                let mut l = ListedGroup::default();
                l.group_id = GroupId(str_bytes(g.group_id));
                l.protocol_type = str_bytes(g.protocol_type);
                l.group_state = str_bytes(g.state);
                l.group_type = str_bytes("classic");
                l
            })
            .collect();
    }
    req.respond(resp)
}
