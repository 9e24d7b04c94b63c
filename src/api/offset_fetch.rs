//! OffsetFetch: one group (v1–7) or several (v8+), each answered by its home shard; a
//! partition without a committed offset answers -1.

use std::rc::Rc;

use proto_kafka::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions, OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
};
use proto_kafka::messages::{ApiKey, GroupId, OffsetFetchRequest, OffsetFetchResponse, TopicName};

use super::group_call::call;
use super::{str_bytes, ApiSpec, Outcome, Request};
use crate::group::{Committed, GroupOp};
use crate::protocol::ErrorCode;
use crate::shard::Shard;

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::OffsetFetch, 1, 9);

type Fetched = Result<Vec<(String, i32, Option<Committed>)>, ErrorCode>;
/// A topic's partitions with their committed offsets, if any.
type TopicOffsets = (String, Vec<(i32, Option<Committed>)>);

async fn fetch(shard: &Shard, group: &str, topics: Option<Vec<(String, Vec<i32>)>>) -> Fetched {
    if group.is_empty() {
        return Err(ErrorCode::InvalidGroupId);
    }
    call(shard, group, |reply| GroupOp::FetchOffsets { topics, reply }).await
}

/// Groups results by topic, keeping first-seen order.
fn by_topic(rows: Vec<(String, i32, Option<Committed>)>) -> Vec<TopicOffsets> {
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
                    .map(|(p, c)| {
                        let mut op = $partition::default();
                        op.partition_index = p;
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

pub async fn handle(shard: &Rc<Shard>, req: Request) -> Outcome {
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
            match fetch(shard, g.group_id.as_str(), topics).await {
                Ok(rows) => out.topics = topics_out!(rows, OffsetFetchResponseTopics, OffsetFetchResponsePartitions),
                Err(e) => out.error_code = e.code(),
            }
            resp.groups.push(out);
        }
    } else {
        let topics =
            r.topics.as_ref().map(|ts| ts.iter().map(|t| (t.name.to_string(), t.partition_indexes.clone())).collect());
        match fetch(shard, r.group_id.as_str(), topics).await {
            Ok(rows) => resp.topics = topics_out!(rows, OffsetFetchResponseTopic, OffsetFetchResponsePartition),
            Err(e) => resp.error_code = e.code(),
        }
    }
    req.respond(&resp)
}
