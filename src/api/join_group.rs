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

#[cfg(test)]
pub(crate) mod tests {
    //! Besides JoinGroup's own tests, the helpers the other group handlers' tests share:
    //! members that join (Kafka's two-step join from v4), sync, and requests that wait for a
    //! rebalance while others are sent.

    use std::future::Future;
    use std::pin::Pin;
    use std::rc::Rc;

    use bytes::Bytes;
    use futures_lite::future::{block_on, poll_once};
    use proto_kafka::messages::describe_groups_response::DescribedGroup;
    use proto_kafka::messages::join_group_request::JoinGroupRequestProtocol;
    use proto_kafka::messages::sync_group_request::SyncGroupRequestAssignment;
    use proto_kafka::messages::{
        DescribeGroupsRequest, DescribeGroupsResponse, GroupId, HeartbeatRequest, HeartbeatResponse, ListGroupsRequest,
        ListGroupsResponse, SyncGroupRequest, SyncGroupResponse,
    };
    use proto_kafka::protocol::{Decodable, Encodable, HeaderVersion};

    use super::*;
    use crate::api::fake::{self, Fake};
    use crate::auth::acl::ResourceType;
    use crate::listener::SecurityProtocol;
    use crate::protocol::ErrorCode;

    /// A ConsumerProtocolSubscription (v0) of `topics`, as a consumer's member metadata.
    pub(crate) fn subscription(topics: &[&str]) -> Bytes {
        let mut md = vec![0, 0];
        md.extend((topics.len() as i32).to_be_bytes());
        for t in topics {
            md.extend((t.len() as i16).to_be_bytes());
            md.extend(t.as_bytes());
        }
        md.extend((-1i32).to_be_bytes()); // no user data
        Bytes::from(md)
    }

    /// A consumer's JoinGroup: protocol "range" with its subscription to `topics`.
    pub(crate) fn join_request(group: &str, member_id: &str, topics: &[&str]) -> JoinGroupRequest {
        let mut p = JoinGroupRequestProtocol::default();
        p.name = str_bytes("range");
        p.metadata = subscription(topics);
        let mut r = JoinGroupRequest::default();
        r.group_id = GroupId(str_bytes(group));
        r.session_timeout_ms = 10_000;
        r.rebalance_timeout_ms = 30_000;
        r.member_id = str_bytes(member_id);
        r.protocol_type = str_bytes("consumer");
        r.protocols.push(p);
        r
    }

    /// A new member's join, both steps (v9): the completed join of the group's next
    /// generation, which must answer at once (a group with no other member).
    pub(crate) fn join(b: &Fake, group: &str, topics: &[&str]) -> JoinGroupResponse {
        let first: JoinGroupResponse = b.call(ApiKey::JoinGroup, 9, &join_request(group, "", topics));
        assert_eq!(first.error_code, ErrorCode::MemberIdRequired.code());
        let resp: JoinGroupResponse = b.call(ApiKey::JoinGroup, 9, &join_request(group, &first.member_id, topics));
        assert_eq!(resp.error_code, 0, "the join completes");
        resp
    }

    pub(crate) fn sync_request(
        group: &str,
        member_id: &str,
        generation: i32,
        assignments: &[(&str, &'static [u8])],
    ) -> SyncGroupRequest {
        let mut r = SyncGroupRequest::default();
        r.group_id = GroupId(str_bytes(group));
        r.member_id = str_bytes(member_id);
        r.generation_id = generation;
        for (m, a) in assignments {
            let mut x = SyncGroupRequestAssignment::default();
            x.member_id = str_bytes(*m);
            x.assignment = Bytes::from_static(a);
            r.assignments.push(x);
        }
        r
    }

    /// One consumer of `topics` joins `group` and, as leader, assigns itself `b"A"`: the
    /// group is Stable. Returns the member id and the generation.
    pub(crate) fn stable(b: &Fake, group: &str, topics: &[&str]) -> (String, i32) {
        let joined = join(b, group, topics);
        let member = joined.member_id.to_string();
        let req = sync_request(group, &member, joined.generation_id, &[(&member, b"A")]);
        let synced: SyncGroupResponse = b.call(ApiKey::SyncGroup, 5, &req);
        assert_eq!(synced.error_code, 0, "the leader's sync completes");
        (member, joined.generation_id)
    }

    pub(crate) fn heartbeat(b: &Fake, group: &str, member_id: &str, generation: i32) -> i16 {
        let mut r = HeartbeatRequest::default();
        r.group_id = GroupId(str_bytes(group));
        r.member_id = str_bytes(member_id);
        r.generation_id = generation;
        let resp: HeartbeatResponse = b.call(ApiKey::Heartbeat, 4, &r);
        resp.error_code
    }

    /// The group as DescribeGroups (v5) shows it.
    pub(crate) fn describe(b: &Fake, group: &str) -> DescribedGroup {
        let mut r = DescribeGroupsRequest::default();
        r.groups.push(GroupId(str_bytes(group)));
        let mut resp: DescribeGroupsResponse = b.call(ApiKey::DescribeGroups, 5, &r);
        resp.groups.remove(0)
    }

    /// The ids of the groups ListGroups (v4) shows, sorted.
    pub(crate) fn listed(b: &Fake) -> Vec<String> {
        let resp: ListGroupsResponse = b.call(ApiKey::ListGroups, 4, &ListGroupsRequest::default());
        let mut ids: Vec<String> = resp.groups.iter().map(|g| g.group_id.to_string()).collect();
        ids.sort();
        ids
    }

    /// A request the coordinator holds (a join or sync waiting for the rest of the group):
    /// sent and run until it waits; `answer` waits for its response.
    pub(crate) struct Waiting {
        api: ApiKey,
        version: i16,
        answer: Pin<Box<dyn Future<Output = Outcome>>>,
    }

    pub(crate) fn start<M: Encodable>(b: &Fake, api: ApiKey, version: i16, msg: &M) -> Waiting {
        let frame = fake::frame(api, version, msg);
        let b = b.clone();
        let mut answer: Pin<Box<dyn Future<Output = Outcome>>> = Box::pin(async move {
            let conn = Rc::new(fake::connection(SecurityProtocol::Plaintext, None));
            crate::api::dispatch(&b, frame, &conn).await
        });
        assert!(block_on(poll_once(&mut answer)).is_none(), "the request waits for the group");
        Waiting { api, version, answer }
    }

    impl Waiting {
        /// Whether the answer has come, without waiting for it.
        pub(crate) fn is_answered(&mut self) -> bool {
            block_on(poll_once(&mut self.answer)).is_some()
        }

        pub(crate) fn answer<R: Decodable + HeaderVersion>(self) -> R {
            let response = block_on(self.answer).expect("answered").expect("a response");
            fake::decode_response(self.api, self.version, &response)
        }
    }

    #[test]
    fn a_new_member_is_given_an_id_then_joins_with_it_as_the_leader() {
        let b = Fake::new();
        let first: JoinGroupResponse = b.call(ApiKey::JoinGroup, 7, &join_request("g", "", &["t"]));
        assert_eq!((first.error_code, first.generation_id), (ErrorCode::MemberIdRequired.code(), -1));
        let id = first.member_id.to_string();
        assert!(id.starts_with("unit-test-"), "<client id>-<uuid>: {id}");

        let resp: JoinGroupResponse = b.call(ApiKey::JoinGroup, 7, &join_request("g", &id, &["t"]));
        assert_eq!((resp.error_code, resp.generation_id), (0, 1));
        assert_eq!((resp.member_id.as_str(), resp.leader.as_str()), (id.as_str(), id.as_str()));
        assert_eq!(resp.protocol_type.as_deref(), Some("consumer"));
        assert_eq!(resp.protocol_name.as_deref(), Some("range"));
        let members: Vec<_> = resp.members.iter().map(|m| (m.member_id.to_string(), m.metadata.clone())).collect();
        assert_eq!(members, vec![(id.clone(), subscription(&["t"]))], "the leader gets every member's metadata");

        let d = describe(&b, "g");
        assert_eq!(d.group_state.as_str(), "CompletingRebalance", "waiting for the leader's assignment");
        let m = &d.members[0];
        assert_eq!(
            (m.member_id.as_str(), m.client_id.as_str(), m.client_host.as_str()),
            (&*id, "unit-test", "/127.0.0.1")
        );
    }

    #[test]
    fn before_v4_a_new_member_joins_at_once() {
        for version in [0, 3] {
            let b = Fake::new();
            let resp: JoinGroupResponse = b.call(ApiKey::JoinGroup, version, &join_request("g", "", &["t"]));
            assert_eq!((resp.error_code, resp.generation_id), (0, 1), "v{version}");
            assert!(resp.member_id.starts_with("unit-test-"), "v{version}: an id is given with the join");
            assert_eq!(resp.leader, resp.member_id);
            assert_eq!(resp.protocol_type, None, "v{version} has no protocol type");
        }
    }

    #[test]
    fn a_static_member_joins_at_once_and_is_listed_with_its_instance_id() {
        let b = Fake::new();
        let mut req = join_request("g", "", &["t"]);
        req.group_instance_id = Some(str_bytes("host-a"));
        let resp: JoinGroupResponse = b.call(ApiKey::JoinGroup, 5, &req);
        assert_eq!((resp.error_code, resp.generation_id), (0, 1), "no MEMBER_ID_REQUIRED for static members");
        assert_eq!(resp.members[0].group_instance_id.as_deref(), Some("host-a"));
        assert_eq!(describe(&b, "g").members[0].group_instance_id.as_deref(), Some("host-a"));
    }

    #[test]
    fn a_restarted_static_leader_keeps_the_generation_and_is_told_to_skip_the_assignment() {
        let b = Fake::new();
        let mut req = join_request("g", "", &["t"]);
        req.group_instance_id = Some(str_bytes("host-a"));
        let joined: JoinGroupResponse = b.call(ApiKey::JoinGroup, 9, &req);
        let (old, generation) = (joined.member_id.to_string(), joined.generation_id);
        let synced: SyncGroupResponse =
            b.call(ApiKey::SyncGroup, 5, &sync_request("g", &old, generation, &[(&old, b"A")]));
        assert_eq!(synced.error_code, 0);

        let back: JoinGroupResponse = b.call(ApiKey::JoinGroup, 9, &req);
        assert_eq!((back.error_code, back.generation_id, back.skip_assignment), (0, generation, true));
        assert_ne!(back.member_id.as_str(), old, "a new member id for the new process");
        assert_eq!(back.leader, back.member_id, "it stays the leader");
        assert_eq!(back.members.len(), 1);
        assert_eq!(describe(&b, "g").group_state.as_str(), "Stable", "no rebalance");
    }

    #[test]
    fn a_failed_joins_protocol_name_is_empty_before_v7_and_null_from_v7() {
        let b = Fake::new();
        let old: JoinGroupResponse = b.call(ApiKey::JoinGroup, 6, &join_request("g", "ghost", &["t"]));
        assert_eq!((old.error_code, old.generation_id), (ErrorCode::UnknownMemberId.code(), -1));
        assert_eq!(old.protocol_name.as_deref(), Some(""));
        assert_eq!(old.member_id.as_str(), "ghost");
        let new: JoinGroupResponse = b.call(ApiKey::JoinGroup, 7, &join_request("g", "ghost", &["t"]));
        assert_eq!(new.error_code, ErrorCode::UnknownMemberId.code());
        assert_eq!(new.protocol_name, None);
        assert!(listed(&b).is_empty(), "an unknown member makes no group");
    }

    #[test]
    fn bad_session_timeouts_and_protocols_the_group_cannot_share_are_refused() {
        let b = Fake::new();
        let mut short = join_request("g", "", &["t"]);
        short.session_timeout_ms = 5_999; // group_min_session_timeout_ms is 6000
        let resp: JoinGroupResponse = b.call(ApiKey::JoinGroup, 9, &short);
        assert_eq!(resp.error_code, ErrorCode::InvalidSessionTimeout.code());

        let mut none = join_request("g", "", &["t"]);
        none.protocols.clear();
        let resp: JoinGroupResponse = b.call(ApiKey::JoinGroup, 9, &none);
        assert_eq!(resp.error_code, ErrorCode::InconsistentGroupProtocol.code());

        stable(&b, "g", &["t"]);
        let mut connect = join_request("g", "", &["t"]);
        connect.protocol_type = str_bytes("connect");
        let resp: JoinGroupResponse = b.call(ApiKey::JoinGroup, 3, &connect);
        assert_eq!(resp.error_code, ErrorCode::InconsistentGroupProtocol.code(), "another protocol type");
    }

    #[test]
    fn a_full_group_refuses_a_new_member() {
        let b = Fake::with(|c| c.group_max_size = 1);
        stable(&b, "g", &["t"]);
        for version in [3, 9] {
            let resp: JoinGroupResponse = b.call(ApiKey::JoinGroup, version, &join_request("g", "", &["t"]));
            assert_eq!(
                (resp.error_code, resp.generation_id),
                (ErrorCode::GroupMaxSizeReached.code(), -1),
                "v{version}"
            );
        }
        assert_eq!(describe(&b, "g").members.len(), 1);
    }

    #[test]
    fn a_second_member_waits_until_the_first_has_rejoined() {
        let b = Fake::new();
        let (m1, generation) = stable(&b, "g", &["t"]);
        let first: JoinGroupResponse = b.call(ApiKey::JoinGroup, 9, &join_request("g", "", &["t"]));
        let m2 = first.member_id.to_string();
        let mut waiting = start(&b, ApiKey::JoinGroup, 9, &join_request("g", &m2, &["t"]));
        assert_eq!(heartbeat(&b, "g", &m1, generation), ErrorCode::RebalanceInProgress.code());
        assert!(!waiting.is_answered());

        let r1: JoinGroupResponse = b.call(ApiKey::JoinGroup, 9, &join_request("g", &m1, &["t"]));
        let r2: JoinGroupResponse = waiting.answer();
        assert_eq!((r1.error_code, r2.error_code), (0, 0));
        assert_eq!((r1.generation_id, r2.generation_id), (generation + 1, generation + 1));
        assert_eq!((r1.leader.as_str(), r2.leader.as_str()), (m1.as_str(), m1.as_str()), "the leader stays");
        assert_eq!((r1.members.len(), r2.members.len()), (2, 0), "only the leader gets the members");
        assert_eq!(r2.member_id.as_str(), m2);
    }

    #[test]
    fn without_read_on_the_group_the_join_is_refused_before_the_group_id_is_looked_at() {
        let b = Fake::with(|c| c.authorizer_enabled = true);
        for group in ["g", ""] {
            let resp: JoinGroupResponse =
                b.call_as(Some("User:eve"), ApiKey::JoinGroup, 9, &join_request(group, "", &["t"]));
            assert_eq!((resp.error_code, resp.generation_id), (ErrorCode::GroupAuthorizationFailed.code(), -1));
        }
        b.allow("User:eve", ResourceType::Group, "g", Operation::Read);
        let resp: JoinGroupResponse = b.call_as(Some("User:eve"), ApiKey::JoinGroup, 9, &join_request("g", "", &["t"]));
        assert_eq!(resp.error_code, ErrorCode::MemberIdRequired.code(), "READ on the group is enough");
    }

    #[test]
    fn an_empty_group_id_is_invalid() {
        let b = Fake::new();
        let resp: JoinGroupResponse = b.call(ApiKey::JoinGroup, 9, &join_request("", "", &["t"]));
        assert_eq!((resp.error_code, resp.generation_id), (ErrorCode::InvalidGroupId.code(), -1));
        assert!(listed(&b).is_empty());
    }
}
