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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::fake::Fake;
    use crate::api::join_group::tests::stable;
    use crate::api::offset_fetch::tests::commit;
    use crate::auth::acl::ResourceType;

    /// A Stable consumer group "live" and an Empty group "idle" (made by a commit).
    fn two_groups(b: &Fake) {
        b.topic("t", 1);
        stable(b, "live", &["t"]);
        commit(b, "idle", "t", &[(0, 1)]);
    }

    /// (group, protocol type, state, type), sorted.
    fn groups(resp: &ListGroupsResponse) -> Vec<(String, String, String, String)> {
        let mut out: Vec<_> = resp
            .groups
            .iter()
            .map(|g| {
                (
                    g.group_id.to_string(),
                    g.protocol_type.to_string(),
                    g.group_state.to_string(),
                    g.group_type.to_string(),
                )
            })
            .collect();
        out.sort();
        out
    }

    fn row(id: &str, protocol_type: &str, state: &str, group_type: &str) -> (String, String, String, String) {
        (id.into(), protocol_type.into(), state.into(), group_type.into())
    }

    fn states(states: &[&str]) -> ListGroupsRequest {
        let mut r = ListGroupsRequest::default();
        r.states_filter = states.iter().map(|s| str_bytes(*s)).collect();
        r
    }

    #[test]
    fn every_group_is_listed_with_its_protocol_type_and_state() {
        let b = Fake::new();
        two_groups(&b);
        let resp: ListGroupsResponse = b.call(ApiKey::ListGroups, 5, &ListGroupsRequest::default());
        assert_eq!(resp.error_code, 0);
        assert_eq!(
            groups(&resp),
            vec![row("idle", "", "Empty", "classic"), row("live", "consumer", "Stable", "classic")]
        );
        let resp: ListGroupsResponse = b.call(ApiKey::ListGroups, 0, &ListGroupsRequest::default());
        assert_eq!(
            groups(&resp),
            vec![row("idle", "", "", ""), row("live", "consumer", "", "")],
            "v0: no state or type"
        );
    }

    #[test]
    fn from_v4_groups_are_filtered_by_state_in_any_case() {
        let b = Fake::new();
        two_groups(&b);
        let resp: ListGroupsResponse = b.call(ApiKey::ListGroups, 4, &states(&["stable"]));
        assert_eq!(groups(&resp), vec![row("live", "consumer", "Stable", "")]);
        let resp: ListGroupsResponse = b.call(ApiKey::ListGroups, 4, &states(&["Empty", "Dead"]));
        assert_eq!(groups(&resp), vec![row("idle", "", "Empty", "")]);
    }

    #[test]
    fn from_v5_only_a_type_filter_naming_classic_lists_the_groups() {
        let b = Fake::new();
        two_groups(&b);
        let mut r = ListGroupsRequest::default();
        r.types_filter = vec![str_bytes("consumer")];
        let resp: ListGroupsResponse = b.call(ApiKey::ListGroups, 5, &r);
        assert!(resp.groups.is_empty(), "no group speaks the new consumer protocol");
        r.types_filter = vec![str_bytes("consumer"), str_bytes("Classic")];
        let resp: ListGroupsResponse = b.call(ApiKey::ListGroups, 5, &r);
        assert_eq!(resp.groups.len(), 2);
    }

    #[test]
    fn without_describe_on_the_cluster_only_the_groups_the_principal_may_describe_are_listed() {
        let b = Fake::with(|c| {
            c.authorizer_enabled = true;
            c.super_users = "User:ANONYMOUS".into();
        });
        two_groups(&b);
        let eve = Some("User:eve");
        let ids = |resp: ListGroupsResponse| groups(&resp).into_iter().map(|g| g.0).collect::<Vec<_>>();
        let resp: ListGroupsResponse = b.call_as(eve, ApiKey::ListGroups, 4, &ListGroupsRequest::default());
        assert_eq!((resp.error_code, ids(resp)), (0, Vec::<String>::new()));
        b.allow("User:eve", ResourceType::Group, "idle", Operation::Describe);
        let resp: ListGroupsResponse = b.call_as(eve, ApiKey::ListGroups, 4, &ListGroupsRequest::default());
        assert_eq!(ids(resp), vec!["idle"]);
        b.allow("User:eve", ResourceType::Cluster, crate::auth::acl::CLUSTER_NAME, Operation::Describe);
        let resp: ListGroupsResponse = b.call_as(eve, ApiKey::ListGroups, 4, &ListGroupsRequest::default());
        assert_eq!(ids(resp), vec!["idle", "live"], "DESCRIBE on the cluster lists every group");
    }
}
