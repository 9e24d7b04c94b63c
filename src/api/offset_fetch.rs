//! OffsetFetch: one group (v1–7) or several (v8+), each answered by its home shard; a
//! partition without a committed offset answers -1.
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
        let topics =
            r.topics.as_ref().map(|ts| ts.iter().map(|t| (t.name.to_string(), t.partition_indexes.clone())).collect());
        match fetch(broker, &req, r.group_id.as_str(), topics).await {
            Ok(rows) => resp.topics = topics_out!(rows, OffsetFetchResponseTopic, OffsetFetchResponsePartition),
            Err(e) => resp.error_code = e.code(),
        }
    }
    req.respond(resp)
}
