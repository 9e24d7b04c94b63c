//! Metadata: this broker as the only node, leader of every partition (epoch 0), with real
//! topic ids. Unknown topics are created on the fly when the client allows it and
//! `auto_create_topics` is on (Kafka's `auto.create.topics.enable`, default true).
//!
//! Authorization, Kafka's: a principal sees only the topics it may DESCRIBE (the others are
//! left out of an all-topics answer, and named ones answer TOPIC_AUTHORIZATION_FAILED whether
//! or not they exist); auto-creation needs CREATE on the cluster or on the topic. Authorized
//! operations are filled in when asked for (see `authz::operations`).

use proto_kafka::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use proto_kafka::messages::{ApiKey, BrokerId, MetadataRequest, MetadataResponse, TopicName};

use super::{authz, str_bytes, ApiSpec, Broker, Outcome, Request};
use crate::auth::acl::{Operation, ResourceType};
use crate::controller::NewTopic;
use crate::metadata::{check_creatable, check_topic_name, TopicMeta};
use crate::protocol::ErrorCode;
use crate::shard::Tp;

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::Metadata, 0, 13);

/// "Authorized operations were not requested" in Kafka's encoding.
pub const AUTH_OPS_OMITTED: i32 = i32::MIN;

/// This broker as the listener the request came in on advertises it.
pub fn broker_entry(broker: &impl Broker, req: &Request) -> MetadataResponseBroker {
    let mut b = MetadataResponseBroker::default();
    b.node_id = BrokerId(broker.config().node_id);
    b.host = str_bytes(req.conn.listener.advertised.host.clone());
    b.port = req.conn.listener.advertised.port as i32;
    b.rack = broker.config().broker_rack.clone().map(str_bytes);
    b
}

/// Every broker a client may talk to: this one alone, or the cluster's members as they
/// registered, at their address for the listener the request came in on.
pub fn broker_entries(broker: &impl Broker, req: &Request) -> Vec<MetadataResponseBroker> {
    let catalog = broker.catalog();
    if broker.controller_id().is_none() || catalog.brokers.is_empty() {
        return vec![broker_entry(broker, req)];
    }
    let listener = &req.conn.listener.name;
    catalog
        .brokers
        .values()
        .filter_map(|reg| {
            let e = reg.endpoint(listener)?;
            let mut b = MetadataResponseBroker::default();
            b.node_id = BrokerId(reg.node_id);
            b.host = str_bytes(e.host.clone());
            b.port = i32::from(e.port);
            b.rack = reg.rack.clone().map(str_bytes);
            Some(b)
        })
        .collect()
}

/// Who to tell clients the controller is: this broker alone, or the metadata quorum's
/// leader (this broker while it has none: admin requests then get NOT_CONTROLLER, and the
/// client asks again).
pub fn controller_id(broker: &impl Broker) -> i32 {
    match broker.controller_id() {
        Some(id) if id >= 0 => id,
        _ => broker.config().node_id,
    }
}

fn topic_entry(broker: &impl Broker, t: &TopicMeta) -> MetadataResponseTopic {
    let node = BrokerId(broker.config().node_id);
    let mut rt = MetadataResponseTopic::default();
    rt.name = Some(TopicName(str_bytes(t.name.clone())));
    rt.topic_id = t.id;
    rt.is_internal = t.name == crate::group::offsets::TOPIC;
    rt.topic_authorized_operations = AUTH_OPS_OMITTED;
    rt.partitions = (0..t.partitions())
        .map(|i| {
            let mut p = MetadataResponsePartition::default();
            p.partition_index = i;
            if !t.replicated() {
                p.leader_id = node;
                p.leader_epoch = 0;
                p.replica_nodes = vec![node];
                p.isr_nodes = vec![node];
                return p;
            }
            let replicas = t.holders_of(i);
            p.replica_nodes = replicas.iter().map(|r| BrokerId(*r)).collect();
            match broker.leadership(&Tp { topic: t.id, partition: i }) {
                Some(v) if v.leader >= 0 => {
                    p.leader_id = BrokerId(v.leader);
                    p.leader_epoch = v.epoch;
                    p.isr_nodes = v.isr.iter().map(|r| BrokerId(*r)).collect();
                    p.offline_replicas = v.offline.iter().map(|r| BrokerId(*r)).collect();
                }
                Some(v) => {
                    p.error_code = ErrorCode::LeaderNotAvailable.code();
                    p.leader_id = BrokerId(-1);
                    p.leader_epoch = v.epoch;
                    p.isr_nodes = v.isr.iter().map(|r| BrokerId(*r)).collect();
                }
                // A replica here that has not told of itself yet (just created).
                None if replicas.contains(&node.0) => {
                    p.error_code = ErrorCode::LeaderNotAvailable.code();
                    p.leader_id = BrokerId(-1);
                    p.leader_epoch = -1;
                    p.isr_nodes = p.replica_nodes.clone();
                }
                // Held elsewhere: the preferred replica, which redirects if it does not lead.
                None => {
                    p.leader_id = BrokerId(replicas.first().copied().unwrap_or(-1));
                    p.leader_epoch = -1;
                    p.isr_nodes = p.replica_nodes.clone();
                }
            }
            p
        })
        .collect();
    rt
}

fn error_entry(name: Option<String>, id: uuid::Uuid, e: ErrorCode) -> MetadataResponseTopic {
    let mut rt = MetadataResponseTopic::default();
    rt.name = name.map(|n| TopicName(str_bytes(n)));
    rt.topic_id = id;
    rt.error_code = e.code();
    rt.topic_authorized_operations = AUTH_OPS_OMITTED;
    rt
}

/// What a requested topic gets, decided before anything is created.
enum Answer {
    /// Looked up by name once the missing topics allowed to be created exist.
    ByName(String),
    Ready(MetadataResponseTopic),
}

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: MetadataRequest = req.decode()?;
    // v0 has no null: an empty list means all topics there.
    let requested = match r.topics {
        Some(t) if !(req.version == 0 && t.is_empty()) => Some(t),
        _ => None,
    };
    let auto_create = broker.config().auto_create_topics && (req.version < 4 || r.allow_auto_topic_creation);
    let mut resp = MetadataResponse::default();
    resp.brokers = broker_entries(broker, &req);
    resp.controller_id = BrokerId(controller_id(broker));
    // Both flags decode as false outside the versions that carry them (8-10 and 8+).
    resp.cluster_authorized_operations = if r.include_cluster_authorized_operations {
        authz::cluster_operations(broker, &req)
    } else {
        AUTH_OPS_OMITTED
    };
    let described = |meta: &TopicMeta| {
        let mut rt = topic_entry(broker, meta);
        if r.include_topic_authorized_operations {
            rt.topic_authorized_operations = authz::operations(broker, &req, ResourceType::Topic, &meta.name);
        }
        rt
    };
    let may_describe = |name: &str| authz::topic(broker, &req, Operation::Describe, name);
    let catalog = broker.catalog();
    resp.cluster_id = Some(str_bytes(catalog.cluster_id.clone()));
    let Some(requested) = requested else {
        // All topics: those the principal may not DESCRIBE are left out, unmentioned.
        resp.topics = catalog.topics.values().filter(|t| may_describe(&t.name)).map(described).collect();
        return req.respond(resp);
    };

    // Kafka's checks, all before anything is created: DESCRIBE on each topic (refused without
    // looking at whether it exists), and for a topic to be auto-created, CREATE on the cluster
    // or on the topic.
    let may_create_any = auto_create && authz::cluster(broker, &req, Operation::Create);
    let mut missing = Vec::new();
    let answers: Vec<Answer> = requested
        .iter()
        .map(|t| match (&t.name, catalog.topic_by_id(&t.topic_id)) {
            (Some(name), _) if !may_describe(name) => Answer::Ready(error_entry(
                Some(name.to_string()),
                uuid::Uuid::nil(),
                ErrorCode::TopicAuthorizationFailed,
            )),
            (Some(name), _) if catalog.topic(name.as_str()).is_some() || !auto_create => {
                Answer::ByName(name.to_string())
            }
            (Some(name), _) if !may_create_any && !authz::topic(broker, &req, Operation::Create, name) => {
                Answer::Ready(error_entry(
                    Some(name.to_string()),
                    uuid::Uuid::nil(),
                    ErrorCode::TopicAuthorizationFailed,
                ))
            }
            (Some(name), _) => {
                if check_creatable(name.as_str()).is_ok() {
                    missing.push(NewTopic {
                        name: name.to_string(),
                        partitions: -1,
                        replication_factor: -1,
                        assignments: None,
                        configs: Default::default(),
                    });
                }
                Answer::ByName(name.to_string())
            }
            (None, None) => Answer::Ready(error_entry(None, t.topic_id, ErrorCode::UnknownTopicId)),
            // As Kafka: the id is not a secret, the name is.
            (None, Some(meta)) if !may_describe(&meta.name) => {
                Answer::Ready(error_entry(None, t.topic_id, ErrorCode::TopicAuthorizationFailed))
            }
            (None, Some(meta)) => Answer::Ready(described(meta)),
        })
        .collect();

    // Create what is missing (one controller round trip), then answer in order.
    let catalog = if missing.is_empty() {
        catalog
    } else {
        for r in broker.create_topics(missing, false).await {
            if let Err((e, msg)) = r {
                if e != ErrorCode::TopicAlreadyExists {
                    tracing::warn!("auto-creating a topic failed: {msg}");
                }
            }
        }
        broker.catalog()
    };
    resp.topics = answers
        .into_iter()
        .map(|a| match a {
            Answer::Ready(rt) => rt,
            Answer::ByName(name) => match catalog.topic(&name) {
                Some(meta) => described(meta),
                None if check_topic_name(&name).is_err() => {
                    error_entry(Some(name), uuid::Uuid::nil(), ErrorCode::InvalidTopicException)
                }
                None => error_entry(Some(name), uuid::Uuid::nil(), ErrorCode::UnknownTopicOrPartition),
            },
        })
        .collect();
    req.respond(resp)
}

#[cfg(test)]
mod tests {
    use proto_kafka::messages::metadata_request::MetadataRequestTopic;

    use super::*;
    use crate::api::fake::Fake;
    use crate::auth::acl::CLUSTER_NAME;

    /// Metadata of the named topics (None: all), auto-creation allowed or not.
    fn request(topics: Option<&[&str]>, allow_auto_topic_creation: bool) -> MetadataRequest {
        let mut r = MetadataRequest::default();
        r.topics = topics.map(|ts| {
            ts.iter()
                .map(|name| {
                    let mut t = MetadataRequestTopic::default();
                    t.name = Some(TopicName(str_bytes(*name)));
                    t
                })
                .collect()
        });
        r.allow_auto_topic_creation = allow_auto_topic_creation;
        r
    }

    fn by_id(ids: &[uuid::Uuid]) -> MetadataRequest {
        let mut r = request(None, false);
        r.topics = Some(
            ids.iter()
                .map(|id| {
                    let mut t = MetadataRequestTopic::default();
                    t.topic_id = *id;
                    t.name = None;
                    t
                })
                .collect(),
        );
        r
    }

    fn name(t: &MetadataResponseTopic) -> Option<&str> {
        t.name.as_ref().map(|n| n.as_str())
    }

    /// (name, error code, partition count) of each topic answered, in order.
    fn topics(resp: &MetadataResponse) -> Vec<(Option<&str>, i16, usize)> {
        resp.topics.iter().map(|t| (name(t), t.error_code, t.partitions.len())).collect()
    }

    #[test]
    fn all_topics_show_this_broker_leading_every_partition() {
        let b = Fake::new();
        let tp = b.topic("t", 2);
        let resp: MetadataResponse = b.call(ApiKey::Metadata, 12, &request(None, false));
        let broker = &resp.brokers[..];
        assert_eq!(broker.len(), 1);
        assert_eq!((broker[0].node_id.0, broker[0].host.as_str(), broker[0].port), (0, "127.0.0.1", 9092));
        assert_eq!(resp.controller_id.0, 0);
        assert_eq!(resp.cluster_id.as_deref(), Some(b.catalog().cluster_id.as_str()));
        assert_eq!(resp.cluster_authorized_operations, AUTH_OPS_OMITTED);
        let t = resp.topics.iter().find(|t| name(t) == Some("t")).expect("t listed");
        assert_eq!((t.error_code, t.topic_id, t.is_internal), (0, tp.topic, false));
        assert_eq!(t.topic_authorized_operations, AUTH_OPS_OMITTED, "not asked for");
        for (i, p) in t.partitions.iter().enumerate() {
            assert_eq!((p.partition_index, p.leader_id.0, p.leader_epoch), (i as i32, 0, 0));
            assert_eq!((p.replica_nodes.clone(), p.isr_nodes.clone()), (vec![BrokerId(0)], vec![BrokerId(0)]));
        }
        assert_eq!(t.partitions.len(), 2);
        let offsets = resp.topics.iter().find(|t| name(t) == Some(crate::group::offsets::TOPIC)).expect("listed");
        assert!(offsets.is_internal, "the offsets topic is internal");
        assert_eq!(resp.topics.len(), 2);
    }

    #[test]
    fn an_empty_list_is_all_topics_at_v0_and_none_after() {
        let b = Fake::new();
        b.topic("t", 1);
        let resp: MetadataResponse = b.call(ApiKey::Metadata, 0, &request(Some(&[]), true));
        assert_eq!(resp.topics.len(), 2, "t and the offsets topic");
        let resp: MetadataResponse = b.call(ApiKey::Metadata, 1, &request(Some(&[]), true));
        assert!(resp.topics.is_empty());
    }

    #[test]
    fn an_unknown_topic_is_created_with_the_default_partitions_when_the_client_allows_it() {
        let b = Fake::with(|c| c.default_partitions = 3);
        let resp: MetadataResponse = b.call(ApiKey::Metadata, 12, &request(Some(&["new"]), true));
        assert_eq!(topics(&resp), vec![(Some("new"), 0, 3)]);
        assert_eq!(resp.topics[0].topic_id, b.catalog().topic("new").expect("created").id);
        let resp: MetadataResponse = b.call(ApiKey::Metadata, 12, &request(Some(&["kept-out"]), false));
        assert_eq!(topics(&resp), vec![(Some("kept-out"), ErrorCode::UnknownTopicOrPartition.code(), 0)]);
        assert!(b.catalog().topic("kept-out").is_none(), "the client said no");
        let resp: MetadataResponse = b.call(ApiKey::Metadata, 3, &request(Some(&["old"]), true));
        assert_eq!(topics(&resp), vec![(Some("old"), 0, 3)], "before v4 (no flag) clients always allow it");
    }

    #[test]
    fn with_auto_creation_off_unknown_topics_stay_unknown() {
        let b = Fake::with(|c| c.auto_create_topics = false);
        let resp: MetadataResponse = b.call(ApiKey::Metadata, 12, &request(Some(&["new"]), true));
        assert_eq!(topics(&resp), vec![(Some("new"), ErrorCode::UnknownTopicOrPartition.code(), 0)]);
        assert!(b.catalog().topic("new").is_none());
    }

    #[test]
    fn the_metadata_quorums_log_is_never_created_by_a_metadata_request() {
        let b = Fake::new();
        let name = crate::metadata::METADATA_TOPIC;
        let resp: MetadataResponse = b.call(ApiKey::Metadata, 12, &request(Some(&[name]), true));
        assert_eq!(topics(&resp), vec![(Some(name), ErrorCode::UnknownTopicOrPartition.code(), 0)]);
        assert!(b.catalog().topic(name).is_none());
    }

    #[test]
    fn an_invalid_name_is_invalid_topic_exception_and_nothing_is_created() {
        let b = Fake::new();
        let invalid = ErrorCode::InvalidTopicException.code();
        for allow_auto_creation in [true, false] {
            let resp: MetadataResponse =
                b.call(ApiKey::Metadata, 12, &request(Some(&["no/slash"]), allow_auto_creation));
            assert_eq!(topics(&resp), vec![(Some("no/slash"), invalid, 0)], "auto-creation {allow_auto_creation}");
        }
        assert_eq!(b.catalog().topics.len(), 1, "only the offsets topic");
    }

    #[test]
    fn from_v12_topics_are_found_by_id() {
        let b = Fake::new();
        let tp = b.topic("t", 2);
        let unknown = uuid::Uuid::from_u128(7);
        let resp: MetadataResponse = b.call(ApiKey::Metadata, 12, &by_id(&[tp.topic, unknown]));
        assert_eq!(topics(&resp), vec![(Some("t"), 0, 2), (None, ErrorCode::UnknownTopicId.code(), 0)]);
        assert_eq!((resp.topics[0].topic_id, resp.topics[1].topic_id), (tp.topic, unknown));
    }

    #[test]
    fn a_principal_sees_only_the_topics_it_may_describe() {
        let b = Fake::with(|c| c.authorizer_enabled = true);
        let t = b.topic("t", 1);
        b.topic("u", 1);
        b.allow("User:eve", ResourceType::Topic, "u", Operation::Describe);
        let resp: MetadataResponse = b.call_as(Some("User:eve"), ApiKey::Metadata, 12, &request(None, true));
        assert_eq!(topics(&resp), vec![(Some("u"), 0, 1)], "the others are left out");
        let named = request(Some(&["t", "missing", "u"]), true);
        let resp: MetadataResponse = b.call_as(Some("User:eve"), ApiKey::Metadata, 12, &named);
        let denied = ErrorCode::TopicAuthorizationFailed.code();
        assert_eq!(topics(&resp), vec![(Some("t"), denied, 0), (Some("missing"), denied, 0), (Some("u"), 0, 1)]);
        assert_eq!(resp.topics[0].topic_id, uuid::Uuid::nil(), "a refused topic's id is not told");
        assert!(b.catalog().topic("missing").is_none(), "not created");
        let resp: MetadataResponse = b.call_as(Some("User:eve"), ApiKey::Metadata, 12, &by_id(&[t.topic]));
        assert_eq!(topics(&resp), vec![(None, denied, 0)], "by id, the name is not told");
    }

    #[test]
    fn auto_creation_needs_create_on_the_cluster_or_on_the_topic() {
        let b = Fake::with(|c| c.authorizer_enabled = true);
        for topic in ["a", "b", "c"] {
            b.allow("User:eve", ResourceType::Topic, topic, Operation::Describe);
        }
        b.allow("User:eve", ResourceType::Topic, "b", Operation::Create);
        let resp: MetadataResponse =
            b.call_as(Some("User:eve"), ApiKey::Metadata, 12, &request(Some(&["a", "b"]), true));
        assert_eq!(topics(&resp), vec![(Some("a"), ErrorCode::TopicAuthorizationFailed.code(), 0), (Some("b"), 0, 1)]);
        assert!(b.catalog().topic("a").is_none() && b.catalog().topic("b").is_some());
        b.allow("User:eve", ResourceType::Cluster, CLUSTER_NAME, Operation::Create);
        let resp: MetadataResponse = b.call_as(Some("User:eve"), ApiKey::Metadata, 12, &request(Some(&["c"]), true));
        assert_eq!(topics(&resp), vec![(Some("c"), 0, 1)], "CREATE on the cluster covers every topic");
    }

    #[test]
    fn authorized_operations_are_told_when_asked() {
        let all_topic_ops = [3, 4, 5, 6, 7, 8, 10, 11].iter().fold(0, |bits, code| bits | 1 << code);
        let all_cluster_ops = [5, 7, 8, 9, 10, 11, 12].iter().fold(0, |bits, code| bits | 1 << code);
        let mut req = request(Some(&["t"]), false);
        req.include_cluster_authorized_operations = true;
        req.include_topic_authorized_operations = true;
        let b = Fake::new();
        b.topic("t", 1);
        let resp: MetadataResponse = b.call(ApiKey::Metadata, 10, &req);
        assert_eq!(resp.cluster_authorized_operations, all_cluster_ops, "no authorizer: everything");
        assert_eq!(resp.topics[0].topic_authorized_operations, all_topic_ops);

        let b = Fake::with(|c| c.authorizer_enabled = true);
        b.topic("t", 1);
        b.allow("User:eve", ResourceType::Topic, "t", Operation::Read);
        let resp: MetadataResponse = b.call_as(Some("User:eve"), ApiKey::Metadata, 10, &req);
        assert_eq!(resp.cluster_authorized_operations, 0, "no DESCRIBE on the cluster: nothing");
        assert_eq!(resp.topics[0].topic_authorized_operations, 1 << 3 | 1 << 8, "READ, which implies DESCRIBE");
    }
}
