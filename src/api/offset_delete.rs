//! OffsetDelete: drops committed offsets of a group for partitions of topics the group no
//! longer subscribes to (GROUP_SUBSCRIBED_TO_TOPIC otherwise).
//!
//! Authorization, Kafka's: DELETE on the group (else the request answers
//! GROUP_AUTHORIZATION_FAILED), READ on each topic (else TOPIC_AUTHORIZATION_FAILED for its
//! partitions, decided before the topic's existence).

use proto_kafka::messages::offset_delete_response::{OffsetDeleteResponsePartition, OffsetDeleteResponseTopic};
use proto_kafka::messages::{ApiKey, OffsetDeleteRequest, OffsetDeleteResponse};

use super::group_call::{admit, call};
use super::{authz, ApiSpec, Broker, Outcome, Request};
use crate::auth::acl::Operation;
use crate::group::GroupOp;
use crate::protocol::ErrorCode;

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::OffsetDelete, 0, 0);

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: OffsetDeleteRequest = req.decode()?;
    let group = r.group_id.to_string();
    let catalog = broker.catalog();
    // (topic, partition, early error)
    let mut slots = Vec::new();
    let mut asked = Vec::new();
    for t in &r.topics {
        let meta = catalog.topic(t.name.as_str());
        let refusal = authz::topic_or_fail(broker, &req, Operation::Read, &t.name).err();
        for p in &t.partitions {
            let known = meta.is_some_and(|m| p.partition_index >= 0 && p.partition_index < m.partitions());
            let early = refusal.or((!known).then_some(ErrorCode::UnknownTopicOrPartition));
            if early.is_none() {
                asked.push((t.name.to_string(), p.partition_index));
            }
            slots.push((t.name.clone(), p.partition_index, early));
        }
    }
    let mut resp = OffsetDeleteResponse::default();
    let result = match admit(broker, &req, &group, Operation::Delete) {
        Err(e) => Err(e),
        Ok(()) => {
            call(broker, &group, |reply| GroupOp::DeleteOffsets { partitions: asked, reply }).await.and_then(|r| r)
        }
    };
    match result {
        Err(e) => resp.error_code = e.code(),
        Ok(per) => {
            let mut per = per.into_iter();
            for (name, partition, early) in slots {
                let code = match early {
                    Some(e) => e.code(),
                    None => per.next().and_then(|r| r.err()).map_or(0, |e| e.code()),
                };
                if resp.topics.last().is_none_or(|t| t.name != name) {
                    let mut t = OffsetDeleteResponseTopic::default();
                    t.name = name.clone();
                    resp.topics.push(t);
                }
                let mut p = OffsetDeleteResponsePartition::default();
                p.partition_index = partition;
                p.error_code = code;
                resp.topics.last_mut().expect("pushed").partitions.push(p);
            }
        }
    }
    req.respond(resp)
}

#[cfg(test)]
mod tests {
    use proto_kafka::messages::offset_delete_request::{OffsetDeleteRequestPartition, OffsetDeleteRequestTopic};
    use proto_kafka::messages::{GroupId, JoinGroupResponse, OffsetFetchResponse, TopicName};

    use super::*;
    use crate::api::fake::Fake;
    use crate::api::join_group::tests::{join_request, stable};
    use crate::api::offset_fetch::tests::{commit, request as fetch_request, shown};
    use crate::api::str_bytes;
    use crate::auth::acl::ResourceType;

    fn request(group: &str, topics: &[(&str, &[i32])]) -> OffsetDeleteRequest {
        let mut r = OffsetDeleteRequest::default();
        r.group_id = GroupId(str_bytes(group));
        for (name, parts) in topics {
            let mut t = OffsetDeleteRequestTopic::default();
            t.name = TopicName(str_bytes(*name));
            for &p in *parts {
                let mut x = OffsetDeleteRequestPartition::default();
                x.partition_index = p;
                t.partitions.push(x);
            }
            r.topics.push(t);
        }
        r
    }

    fn codes(resp: &OffsetDeleteResponse) -> Vec<(String, i32, i16)> {
        let each = |t: &OffsetDeleteResponseTopic| {
            t.partitions.iter().map(|p| (t.name.to_string(), p.partition_index, p.error_code)).collect::<Vec<_>>()
        };
        resp.topics.iter().flat_map(each).collect()
    }

    /// The (topic, partition, offset) `group` has committed.
    fn committed(b: &Fake, group: &str) -> Vec<(String, i32, i64)> {
        let resp: OffsetFetchResponse = b.call(ApiKey::OffsetFetch, 7, &fetch_request(group, None));
        shown(&resp).into_iter().map(|(t, p, o, ..)| (t, p, o)).collect()
    }

    #[test]
    fn offsets_of_an_empty_group_are_deleted_partition_by_partition() {
        let b = Fake::new();
        b.topic("t", 2);
        commit(&b, "g", "t", &[(0, 5), (1, 6)]);
        let appends = b.offsets_appends();
        let resp: OffsetDeleteResponse = b.call(ApiKey::OffsetDelete, 0, &request("g", &[("t", &[0])]));
        assert_eq!((resp.error_code, codes(&resp)), (0, vec![("t".into(), 0, 0)]));
        assert_eq!(b.offsets_appends(), appends + 1, "a tombstone in __consumer_offsets");
        assert_eq!(committed(&b, "g"), vec![("t".into(), 1, 6)]);
    }

    #[test]
    fn a_topic_the_group_still_consumes_keeps_its_offsets() {
        let b = Fake::new();
        b.topic("t", 1);
        b.topic("u", 1);
        commit(&b, "g", "t", &[(0, 5)]);
        commit(&b, "g", "u", &[(0, 6)]);
        stable(&b, "g", &["t"]);
        let resp: OffsetDeleteResponse = b.call(ApiKey::OffsetDelete, 0, &request("g", &[("t", &[0]), ("u", &[0])]));
        let subscribed = ErrorCode::GroupSubscribedToTopic.code();
        assert_eq!((resp.error_code, codes(&resp)), (0, vec![("t".into(), 0, subscribed), ("u".into(), 0, 0)]));
        assert_eq!(committed(&b, "g"), vec![("t".into(), 0, 5)]);
    }

    #[test]
    fn a_group_with_members_of_another_protocol_type_is_non_empty() {
        let b = Fake::new();
        b.topic("t", 1);
        commit(&b, "g", "t", &[(0, 5)]);
        let mut connect = join_request("g", "", &[]);
        connect.protocol_type = str_bytes("connect");
        let joined: JoinGroupResponse = b.call(ApiKey::JoinGroup, 3, &connect);
        assert_eq!(joined.error_code, 0);
        let resp: OffsetDeleteResponse = b.call(ApiKey::OffsetDelete, 0, &request("g", &[("t", &[0])]));
        assert_eq!((resp.error_code, resp.topics.len()), (ErrorCode::NonEmptyGroup.code(), 0));
        assert_eq!(committed(&b, "g"), vec![("t".into(), 0, 5)]);
    }

    #[test]
    fn unknown_partitions_fail_alone_and_an_unknown_group_fails_the_request() {
        let b = Fake::new();
        b.topic("t", 1);
        commit(&b, "g", "t", &[(0, 5)]);
        let req = request("g", &[("t", &[0, 3]), ("nope", &[0])]);
        let resp: OffsetDeleteResponse = b.call(ApiKey::OffsetDelete, 0, &req);
        let unknown = ErrorCode::UnknownTopicOrPartition.code();
        assert_eq!(resp.error_code, 0);
        assert_eq!(codes(&resp), vec![("t".into(), 0, 0), ("t".into(), 3, unknown), ("nope".into(), 0, unknown)]);

        let resp: OffsetDeleteResponse = b.call(ApiKey::OffsetDelete, 0, &request("other", &[("t", &[0])]));
        assert_eq!((resp.error_code, resp.topics.len()), (ErrorCode::GroupIdNotFound.code(), 0));
        let resp: OffsetDeleteResponse = b.call(ApiKey::OffsetDelete, 0, &request("", &[("t", &[0])]));
        assert_eq!(resp.error_code, ErrorCode::InvalidGroupId.code());
    }

    #[test]
    fn without_delete_on_the_group_the_request_is_refused() {
        let b = Fake::with(|c| {
            c.authorizer_enabled = true;
            c.super_users = "User:ANONYMOUS".into();
        });
        b.topic("t", 1);
        commit(&b, "g", "t", &[(0, 5)]);
        b.allow("User:eve", ResourceType::Group, "g", Operation::Read);
        b.allow("User:eve", ResourceType::Topic, "t", Operation::Read);
        let resp: OffsetDeleteResponse =
            b.call_as(Some("User:eve"), ApiKey::OffsetDelete, 0, &request("g", &[("t", &[0])]));
        assert_eq!((resp.error_code, resp.topics.len()), (ErrorCode::GroupAuthorizationFailed.code(), 0));
        assert_eq!(committed(&b, "g"), vec![("t".into(), 0, 5)]);
    }

    #[test]
    fn without_read_on_a_topic_its_partitions_are_refused_before_its_existence_is_told() {
        let b = Fake::with(|c| {
            c.authorizer_enabled = true;
            c.super_users = "User:ANONYMOUS".into();
        });
        b.topic("t", 1);
        commit(&b, "g", "t", &[(0, 5)]);
        b.allow("User:eve", ResourceType::Group, "g", Operation::Delete);
        let req = request("g", &[("t", &[0]), ("nope", &[0])]);
        let resp: OffsetDeleteResponse = b.call_as(Some("User:eve"), ApiKey::OffsetDelete, 0, &req);
        let refused = ErrorCode::TopicAuthorizationFailed.code();
        assert_eq!((resp.error_code, codes(&resp)), (0, vec![("t".into(), 0, refused), ("nope".into(), 0, refused)]));
        assert_eq!(committed(&b, "g"), vec![("t".into(), 0, 5)]);
    }
}
