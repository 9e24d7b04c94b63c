//! OffsetFetch: one group (v1–7) or several (v8+), each answered by its home shard; a
//! partition without a committed offset answers -1. A group-level error is the response's
//! (v2–7) or the group's (v8+); v1 has no such field, so each partition asked for carries it.
//!
//! Authorization, Kafka's: DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED for the
//! group), and DESCRIBE on each topic: a listed topic the principal may not DESCRIBE answers
//! TOPIC_AUTHORIZATION_FAILED for its partitions; an all-topics fetch leaves such topics out.

use proto_kafka::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions, OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
};
use proto_kafka::messages::{ApiKey, GroupId, OffsetFetchRequest, OffsetFetchResponse, TopicName};

use super::group_call::{admit, call};
use super::{authz, str_bytes, ApiSpec, Broker, Outcome, Request};
use crate::auth::acl::Operation;
use crate::group::{Committed, GroupOp};
use crate::protocol::ErrorCode;

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::OffsetFetch, 1, 9);

/// One partition's answer: its committed offset if any, or why it is not shown.
type Answer = Result<Option<Committed>, ErrorCode>;
type Row = (String, i32, Answer);
/// A topic's partitions with their answers.
type TopicOffsets = (String, Vec<(i32, Answer)>);

/// The offsets of `topics` (None: every topic with one) that the request may see.
async fn fetch(
    broker: &impl Broker,
    req: &Request,
    group: &str,
    topics: Option<Vec<(String, Vec<i32>)>>,
) -> Result<Vec<Row>, ErrorCode> {
    admit(broker, req, group, Operation::Describe)?;
    let may_describe = |topic: &str| authz::topic(broker, req, Operation::Describe, topic);
    let Some(topics) = topics else {
        let rows = call(broker, group, |reply| GroupOp::FetchOffsets { topics: None, reply }).await?;
        return Ok(rows.into_iter().filter(|(t, _, _)| may_describe(t)).map(|(t, p, c)| (t, p, Ok(c))).collect());
    };
    let (allowed, refused): (Vec<_>, Vec<_>) = topics.into_iter().partition(|(t, _)| may_describe(t));
    let rows = call(broker, group, |reply| GroupOp::FetchOffsets { topics: Some(allowed), reply }).await?;
    let refused = refused.into_iter().flat_map(|(t, parts)| {
        parts.into_iter().map(move |p| (t.clone(), p, Err(ErrorCode::TopicAuthorizationFailed)))
    });
    Ok(rows.into_iter().map(|(t, p, c)| (t, p, Ok(c))).chain(refused).collect())
}

/// Groups results by topic, keeping first-seen order.
fn by_topic(rows: Vec<Row>) -> Vec<TopicOffsets> {
    let mut out: Vec<TopicOffsets> = Vec::new();
    for (t, p, c) in rows {
        match out.iter_mut().find(|(name, _)| *name == t) {
            Some((_, v)) => v.push((p, c)),
            None => out.push((t, vec![(p, c)])),
        }
    }
    out
}

/// Builds the response topics from fetched rows. v1–7 and v8+ use different generated
/// types with the same field names, hence a macro rather than a function.
macro_rules! topics_out {
    ($rows:expr, $topic:ident, $partition:ident) => {
        by_topic($rows)
            .into_iter()
            .map(|(t, parts)| {
                let mut ot = $topic::default();
                ot.name = TopicName(str_bytes(t));
                ot.partitions = parts
                    .into_iter()
                    .map(|(p, answer)| {
                        let mut op = $partition::default();
                        op.partition_index = p;
                        let c = answer.unwrap_or_else(|e| {
                            op.error_code = e.code();
                            None
                        });
                        op.committed_offset = c.as_ref().map_or(-1, |c| c.offset);
                        op.committed_leader_epoch = c.as_ref().map_or(-1, |c| c.leader_epoch);
                        op.metadata = Some(str_bytes(c.and_then(|c| c.metadata).unwrap_or_default()));
                        op
                    })
                    .collect();
                ot
            })
            .collect()
    };
}

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: OffsetFetchRequest = req.decode()?;
    let mut resp = OffsetFetchResponse::default();
    if req.version >= 8 {
        for g in &r.groups {
            let topics = g
                .topics
                .as_ref()
                .map(|ts| ts.iter().map(|t| (t.name.to_string(), t.partition_indexes.clone())).collect());
            let mut out = OffsetFetchResponseGroup::default();
            out.group_id = GroupId(g.group_id.0.clone());
            match fetch(broker, &req, g.group_id.as_str(), topics).await {
                Ok(rows) => out.topics = topics_out!(rows, OffsetFetchResponseTopics, OffsetFetchResponsePartitions),
                Err(e) => out.error_code = e.code(),
            }
            resp.groups.push(out);
        }
    } else {
        let topics: Option<Vec<(String, Vec<i32>)>> =
            r.topics.as_ref().map(|ts| ts.iter().map(|t| (t.name.to_string(), t.partition_indexes.clone())).collect());
        // v1 has no request-level error: each partition asked for carries it, as in Kafka.
        let asked = if req.version < 2 { topics.clone().unwrap_or_default() } else { Vec::new() };
        let rows = match fetch(broker, &req, r.group_id.as_str(), topics).await {
            Ok(rows) => rows,
            Err(e) => {
                resp.error_code = e.code();
                let each = |(t, parts): (String, Vec<i32>)| parts.into_iter().map(move |p| (t.clone(), p, Err(e)));
                asked.into_iter().flat_map(each).collect()
            }
        };
        resp.topics = topics_out!(rows, OffsetFetchResponseTopic, OffsetFetchResponsePartition);
    }
    req.respond(resp)
}

#[cfg(test)]
pub(crate) mod tests {
    use proto_kafka::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
    use proto_kafka::messages::offset_fetch_request::{
        OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
    };
    use proto_kafka::messages::{OffsetCommitRequest, OffsetCommitResponse};

    use super::*;
    use crate::api::fake::Fake;
    use crate::auth::acl::ResourceType;

    /// Commits `offsets` (partition, offset) of `topic` for `group` outside any generation,
    /// with leader epoch 3 and metadata "m<offset>"; as ANONYMOUS.
    pub(crate) fn commit(b: &Fake, group: &str, topic: &str, offsets: &[(i32, i64)]) {
        let mut t = OffsetCommitRequestTopic::default();
        t.name = TopicName(str_bytes(topic));
        for &(p, o) in offsets {
            let mut x = OffsetCommitRequestPartition::default();
            x.partition_index = p;
            x.committed_offset = o;
            x.committed_leader_epoch = 3;
            x.committed_metadata = Some(str_bytes(format!("m{o}")));
            t.partitions.push(x);
        }
        let mut r = OffsetCommitRequest::default();
        r.group_id = GroupId(str_bytes(group));
        r.generation_id_or_member_epoch = -1;
        r.topics.push(t);
        let resp: OffsetCommitResponse = b.call(ApiKey::OffsetCommit, 8, &r);
        assert!(resp.topics[0].partitions.iter().all(|p| p.error_code == 0), "committed: {resp:?}");
    }

    /// A v1–7 request; `None`: every committed offset.
    pub(crate) fn request(group: &str, topics: Option<&[(&str, &[i32])]>) -> OffsetFetchRequest {
        let mut r = OffsetFetchRequest::default();
        r.group_id = GroupId(str_bytes(group));
        r.topics = topics.map(|ts| {
            let topic = |(name, parts): &(&str, &[i32])| {
                let mut t = OffsetFetchRequestTopic::default();
                t.name = TopicName(str_bytes(*name));
                t.partition_indexes = parts.to_vec();
                t
            };
            ts.iter().map(topic).collect()
        });
        r
    }

    /// (topic, partition, offset, leader epoch, metadata, error), sorted.
    type Shown = (String, i32, i64, i32, String, i16);

    pub(crate) fn shown(resp: &OffsetFetchResponse) -> Vec<Shown> {
        let mut out: Vec<Shown> = resp
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(move |p| (t, p)))
            .map(|(t, p)| {
                let md = p.metadata.as_ref().map(|m| m.to_string()).unwrap_or_default();
                (t.name.to_string(), p.partition_index, p.committed_offset, p.committed_leader_epoch, md, p.error_code)
            })
            .collect();
        out.sort();
        out
    }

    fn shown_group(g: &OffsetFetchResponseGroup) -> Vec<Shown> {
        let mut out: Vec<Shown> = g
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(move |p| (t, p)))
            .map(|(t, p)| {
                let md = p.metadata.as_ref().map(|m| m.to_string()).unwrap_or_default();
                (t.name.to_string(), p.partition_index, p.committed_offset, p.committed_leader_epoch, md, p.error_code)
            })
            .collect();
        out.sort();
        out
    }

    fn row(t: &str, p: i32, offset: i64, epoch: i32, md: &str, error: i16) -> Shown {
        (t.into(), p, offset, epoch, md.into(), error)
    }

    #[test]
    fn committed_offsets_are_returned_and_a_partition_without_one_answers_minus_one() {
        let b = Fake::new();
        b.topic("t", 2);
        commit(&b, "g", "t", &[(0, 5)]);
        let resp: OffsetFetchResponse = b.call(ApiKey::OffsetFetch, 7, &request("g", Some(&[("t", &[0, 1])])));
        assert_eq!(resp.error_code, 0);
        assert_eq!(shown(&resp), vec![row("t", 0, 5, 3, "m5", 0), row("t", 1, -1, -1, "", 0)]);
        let resp: OffsetFetchResponse = b.call(ApiKey::OffsetFetch, 4, &request("g", Some(&[("t", &[0])])));
        assert_eq!(shown(&resp), vec![row("t", 0, 5, -1, "m5", 0)], "v4 has no leader epoch");
    }

    #[test]
    fn a_null_topic_list_fetches_every_committed_offset_of_the_group() {
        let b = Fake::new();
        b.topic("a", 2);
        b.topic("b", 1);
        commit(&b, "g", "a", &[(0, 1), (1, 2)]);
        commit(&b, "g", "b", &[(0, 3)]);
        commit(&b, "other", "b", &[(0, 9)]);
        let resp: OffsetFetchResponse = b.call(ApiKey::OffsetFetch, 2, &request("g", None));
        let epoch = -1; // not in v2
        assert_eq!(
            shown(&resp),
            vec![row("a", 0, 1, epoch, "m1", 0), row("a", 1, 2, epoch, "m2", 0), row("b", 0, 3, epoch, "m3", 0)]
        );
        let resp: OffsetFetchResponse = b.call(ApiKey::OffsetFetch, 7, &request("nobody", None));
        assert_eq!((resp.error_code, resp.topics.len()), (0, 0), "an unknown group has no offsets");
    }

    #[test]
    fn from_v8_each_group_is_answered_on_its_own() {
        let b = Fake::new();
        b.topic("t", 1);
        commit(&b, "g1", "t", &[(0, 7)]);
        let mut r = OffsetFetchRequest::default();
        for (id, listed) in [("g1", true), ("g2", true), ("g1", false), ("", true)] {
            let mut g = OffsetFetchRequestGroup::default();
            g.group_id = GroupId(str_bytes(id));
            g.topics = listed.then(|| {
                let mut t = OffsetFetchRequestTopics::default();
                t.name = TopicName(str_bytes("t"));
                t.partition_indexes = vec![0];
                vec![t]
            });
            r.groups.push(g);
        }
        let resp: OffsetFetchResponse = b.call(ApiKey::OffsetFetch, 8, &r);
        let ids: Vec<&str> = resp.groups.iter().map(|g| g.group_id.as_str()).collect();
        assert_eq!(ids, vec!["g1", "g2", "g1", ""]);
        assert_eq!(shown_group(&resp.groups[0]), vec![row("t", 0, 7, 3, "m7", 0)]);
        assert_eq!(shown_group(&resp.groups[1]), vec![row("t", 0, -1, -1, "", 0)]);
        assert_eq!(shown_group(&resp.groups[2]), vec![row("t", 0, 7, 3, "m7", 0)], "all topics");
        assert_eq!(resp.groups[3].error_code, ErrorCode::InvalidGroupId.code());
    }

    #[test]
    fn without_describe_on_the_group_the_group_is_refused_in_each_versions_way() {
        let b = Fake::with(|c| {
            c.authorizer_enabled = true;
            c.super_users = "User:ANONYMOUS".into();
        });
        b.topic("t", 1);
        commit(&b, "g", "t", &[(0, 7)]);
        let eve = Some("User:eve");
        let refused = ErrorCode::GroupAuthorizationFailed.code();

        let mut r = OffsetFetchRequest::default();
        let mut g = OffsetFetchRequestGroup::default();
        g.group_id = GroupId(str_bytes("g"));
        r.groups.push(g);
        let resp: OffsetFetchResponse = b.call_as(eve, ApiKey::OffsetFetch, 8, &r);
        assert_eq!((resp.groups[0].error_code, resp.groups[0].topics.len()), (refused, 0));

        let req = request("g", Some(&[("t", &[0])]));
        let resp: OffsetFetchResponse = b.call_as(eve, ApiKey::OffsetFetch, 7, &req);
        assert_eq!((resp.error_code, resp.topics.len()), (refused, 0));
        // v1 has no response-level error code: the partitions asked for carry it.
        let resp: OffsetFetchResponse = b.call_as(eve, ApiKey::OffsetFetch, 1, &req);
        assert_eq!(shown(&resp), vec![row("t", 0, -1, -1, "", refused)]);
    }

    #[test]
    fn topics_the_principal_may_not_describe_are_refused_when_listed_and_left_out_otherwise() {
        let b = Fake::with(|c| {
            c.authorizer_enabled = true;
            c.super_users = "User:ANONYMOUS".into();
        });
        b.topic("a", 1);
        b.topic("b", 1);
        commit(&b, "g", "a", &[(0, 1)]);
        commit(&b, "g", "b", &[(0, 2)]);
        b.allow("User:eve", ResourceType::Group, "g", Operation::Describe);
        b.allow("User:eve", ResourceType::Topic, "a", Operation::Describe);
        let eve = Some("User:eve");

        let req = request("g", Some(&[("a", &[0]), ("b", &[0])]));
        let resp: OffsetFetchResponse = b.call_as(eve, ApiKey::OffsetFetch, 7, &req);
        let refused = ErrorCode::TopicAuthorizationFailed.code();
        assert_eq!(resp.error_code, 0);
        assert_eq!(shown(&resp), vec![row("a", 0, 1, 3, "m1", 0), row("b", 0, -1, -1, "", refused)]);
        let resp: OffsetFetchResponse = b.call_as(eve, ApiKey::OffsetFetch, 7, &request("g", None));
        assert_eq!(shown(&resp), vec![row("a", 0, 1, 3, "m1", 0)], "b is left out");
    }
}
