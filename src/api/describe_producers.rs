//! DescribeProducers (`kafka-transactions describe-producers`): the idempotent producers
//! each partition remembers, from its home shard (producer id, epoch, last sequence, the
//! maxTimestamp of its last batch). There are no transactions, so the coordinator epoch is
//! -1 and no transaction is open.
//!
//! Authorization, Kafka's: READ on each topic, else TOPIC_AUTHORIZATION_FAILED.

use std::rc::Rc;

use proto_kafka::messages::describe_producers_response::{PartitionResponse, ProducerState, TopicResponse};
use proto_kafka::messages::{ApiKey, DescribeProducersRequest, DescribeProducersResponse, ProducerId};

use super::{authz, checked, str_bytes, ApiSpec, Outcome, Request};
use crate::auth::acl::Operation;
use crate::protocol::ErrorCode;
use crate::shard::{Shard, Tp};

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::DescribeProducers, 0, 0);

pub async fn handle(shard: &Rc<Shard>, req: Request) -> Outcome {
    let r: DescribeProducersRequest = req.decode()?;
    let catalog = shard.catalog();
    let mut checked = Vec::new();
    for t in &r.topics {
        let meta = catalog.topic(t.name.as_str());
        let allowed = authz::topic(shard, &req, Operation::Read, &t.name);
        for &index in &t.partition_indexes {
            checked.push(match meta {
                _ if !allowed => Err(ErrorCode::TopicAuthorizationFailed),
                None => Err(ErrorCode::UnknownTopicOrPartition),
                Some(m) if index < 0 || index >= m.partitions() => Err(ErrorCode::UnknownTopicOrPartition),
                Some(m) => Ok((Tp { topic: m.id, partition: index }, ())),
            });
        }
    }
    let routed = checked::run(checked, |asks| shard.producers(asks.into_iter().map(|(tp, ())| tp).collect()));
    let mut results = routed.await.into_iter();
    let mut resp = DescribeProducersResponse::default();
    for t in r.topics {
        let mut tr = TopicResponse::default();
        for &index in &t.partition_indexes {
            let mut pr = PartitionResponse::default();
            pr.partition_index = index;
            pr.error_message = None;
            match results.next().expect("one result per partition") {
                Ok(producers) => {
                    pr.active_producers = producers
                        .into_iter()
                        .map(|p| {
                            let mut s = ProducerState::default();
                            s.producer_id = ProducerId(p.producer_id);
                            s.producer_epoch = p.epoch.into();
                            s.last_sequence = p.last_sequence;
                            s.last_timestamp = p.last_timestamp;
                            s.coordinator_epoch = -1;
                            s.current_txn_start_offset = -1;
                            s
                        })
                        .collect();
                }
                Err(e) => {
                    pr.error_code = e.code();
                    pr.error_message = Some(str_bytes(e.to_string()));
                }
            }
            tr.partitions.push(pr);
        }
        tr.name = t.name;
        resp.topics.push(tr);
    }
    req.respond(resp)
}
