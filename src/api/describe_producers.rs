//! DescribeProducers (`kafka-transactions describe-producers`): the idempotent producers
//! each partition remembers, from its home shard (producer id, epoch, last sequence, the
//! maxTimestamp of its last batch). There are no transactions, so the coordinator epoch is
//! -1 and no transaction is open.
//!
//! Authorization, Kafka's: READ on each topic, else TOPIC_AUTHORIZATION_FAILED.

use proto_kafka::messages::describe_producers_response::{PartitionResponse, ProducerState, TopicResponse};
use proto_kafka::messages::{ApiKey, DescribeProducersRequest, DescribeProducersResponse, ProducerId};

use super::{authz, checked, str_bytes, ApiSpec, Broker, Outcome, Request};
use crate::auth::acl::Operation;
use crate::protocol::ErrorCode;
use crate::shard::Tp;

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::DescribeProducers, 0, 0);

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: DescribeProducersRequest = req.decode()?;
    let catalog = broker.catalog();
    let mut checked = Vec::new();
    for t in &r.topics {
        let meta = catalog.topic(t.name.as_str());
        let allowed = authz::topic(broker, &req, Operation::Read, &t.name);
        for &index in &t.partition_indexes {
            checked.push(match meta {
                _ if !allowed => Err(ErrorCode::TopicAuthorizationFailed),
                None => Err(ErrorCode::UnknownTopicOrPartition),
                Some(m) if index < 0 || index >= m.partitions() => Err(ErrorCode::UnknownTopicOrPartition),
                Some(m) => Ok((Tp { topic: m.id, partition: index }, ())),
            });
        }
    }
    let routed = checked::run(checked, |asks| broker.producers(asks.into_iter().map(|(tp, ())| tp).collect()));
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

#[cfg(test)]
mod tests {
    use proto_kafka::messages::describe_producers_request::TopicRequest;
    use proto_kafka::messages::TopicName;

    use super::*;
    use crate::api::fake::Fake;
    use crate::producer::ProducerSummary;

    fn request(topic: &str, partitions: &[i32]) -> DescribeProducersRequest {
        let mut t = TopicRequest::default();
        t.name = TopicName(str_bytes(topic));
        t.partition_indexes = partitions.to_vec();
        let mut r = DescribeProducersRequest::default();
        r.topics.push(t);
        r
    }

    #[test]
    fn lists_each_partitions_producers_with_no_transaction_state() {
        let b = Fake::new();
        b.topic("t", 2);
        let p = ProducerSummary { producer_id: 42, epoch: 3, last_sequence: 9, last_timestamp: 1_000 };
        b.set_producers(b.tp("t", 1), vec![p]);
        let resp: DescribeProducersResponse = b.call(ApiKey::DescribeProducers, 0, &request("t", &[0, 1, 2]));
        let parts = &resp.topics[0].partitions;
        assert_eq!(parts.iter().map(|p| p.error_code).collect::<Vec<_>>(), vec![0, 0, 3]);
        assert!(parts[0].active_producers.is_empty());
        let s = &parts[1].active_producers[0];
        assert_eq!((s.producer_id.0, s.producer_epoch, s.last_sequence, s.last_timestamp), (42, 3, 9, 1_000));
        assert_eq!((s.coordinator_epoch, s.current_txn_start_offset), (-1, -1));
    }

    #[test]
    fn without_read_the_topic_is_refused() {
        let b = Fake::with(|c| c.authorizer_enabled = true);
        b.topic("t", 1);
        let resp: DescribeProducersResponse =
            b.call_as(Some("User:eve"), ApiKey::DescribeProducers, 0, &request("t", &[0]));
        assert_eq!(resp.topics[0].partitions[0].error_code, ErrorCode::TopicAuthorizationFailed.code());
    }
}
