//! CreateTopics: forwarded to the controller shard, which answers once every shard serves
//! the new topics. Replication factor must be 1 or -1 (one broker).
//!
//! A name given more than once is INVALID_REQUEST for each of its entries, none created (Kafka
//! answers "Duplicate topic name.").
//!
//! Authorization, Kafka's: CREATE on the cluster, or on the topic, else
//! TOPIC_AUTHORIZATION_FAILED. A created topic's configs (and partition count and replication
//! factor) are shown only with DESCRIBE_CONFIGS on it; otherwise its config error is
//! TOPIC_AUTHORIZATION_FAILED.

use proto_kafka::messages::create_topics_response::{CreatableTopicConfigs, CreatableTopicResult};
use proto_kafka::messages::{ApiKey, CreateTopicsRequest, CreateTopicsResponse};

use super::{authz, str_bytes, ApiSpec, Broker, Outcome, Request};
use crate::api::describe_configs;
use crate::auth::acl::Operation;
use crate::controller::{NewTopic, TopicResult};
use crate::protocol::ErrorCode;

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::CreateTopics, 2, 7);

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: CreateTopicsRequest = req.decode()?;
    let mut asks = Vec::with_capacity(r.topics.len());
    let mut early: Vec<Option<(ErrorCode, String)>> = Vec::with_capacity(r.topics.len());
    let cluster_create = authz::cluster(broker, &req, Operation::Create);
    for t in &r.topics {
        let mut err = None;
        if r.topics.iter().filter(|o| o.name == t.name).count() > 1 {
            // Kafka's answer: none of a name's entries is created.
            err = Some((ErrorCode::InvalidRequest, format!("duplicate topic name {:?}", t.name.as_str())));
        } else if !cluster_create && !authz::topic(broker, &req, Operation::Create, &t.name) {
            err = Some((
                ErrorCode::TopicAuthorizationFailed,
                "creating a topic needs CREATE on the cluster or on the topic".into(),
            ));
        }
        // Manual assignment: the controller checks the replicas named (a broker alone
        // accepts only itself) and takes the partition count from them; here only that they
        // number the partitions 0, 1, 2… once each, in any order, as Kafka requires.
        let mut assigned: Vec<_> = t.assignments.iter().collect();
        assigned.sort_by_key(|a| a.partition_index);
        if err.is_none() && assigned.iter().enumerate().any(|(i, a)| a.partition_index != i as i32) {
            let indexes: Vec<i32> = assigned.iter().map(|a| a.partition_index).collect();
            err = Some((
                ErrorCode::InvalidReplicaAssignment,
                format!("partitions {indexes:?} assigned: they must be 0, 1, 2… once each"),
            ));
        }
        let assignments = (!assigned.is_empty())
            .then(|| assigned.iter().map(|a| a.broker_ids.iter().map(|b| b.0).collect()).collect());
        if let Some(c) = t.configs.iter().find(|c| c.value.is_none()).filter(|_| err.is_none()) {
            err = Some((
                ErrorCode::InvalidConfig,
                format!("config {} has no value: a new topic's configs need one", c.name.as_str()),
            ));
        }
        let configs =
            t.configs.iter().filter_map(|c| Some((c.name.to_string(), c.value.as_ref()?.to_string()))).collect();
        asks.push(NewTopic {
            name: t.name.to_string(),
            partitions: t.num_partitions,
            replication_factor: t.replication_factor,
            assignments,
            configs,
        });
        early.push(err);
    }
    let (to_create, idx): (Vec<NewTopic>, Vec<usize>) =
        asks.iter().cloned().enumerate().filter(|(i, _)| early[*i].is_none()).map(|(i, t)| (t, i)).unzip();
    let mut results: Vec<Option<TopicResult>> = early.into_iter().map(|e| e.map(Err)).collect();
    for (r, i) in broker.create_topics(to_create, r.validate_only).await.into_iter().zip(idx) {
        results[i] = Some(r);
    }
    let mut resp = CreateTopicsResponse::default();
    let mut answered = std::collections::HashSet::new();
    for (ask, result) in asks.iter().zip(results) {
        // A name given twice is answered once, as Kafka does.
        if asks.iter().filter(|o| o.name == ask.name).count() > 1 && !answered.insert(ask.name.as_str()) {
            continue;
        }
        let mut tr = CreatableTopicResult::default();
        tr.error_message = None; // Kafka's answer on success (librdkafka prints it otherwise)
        tr.name = proto_kafka::messages::TopicName(str_bytes(ask.name.clone()));
        match result.expect("every topic answered") {
            Ok(meta) if !authz::topic(broker, &req, Operation::DescribeConfigs, &ask.name) => {
                tr.topic_id = meta.id;
                tr.num_partitions = -1;
                tr.replication_factor = -1;
                tr.configs = Some(Vec::new());
                tr.topic_config_error_code = ErrorCode::TopicAuthorizationFailed.code();
            }
            Ok(meta) => {
                tr.topic_id = meta.id;
                tr.num_partitions = meta.partitions();
                tr.replication_factor = meta.replicas.first().map_or(1, |r| r.len() as i16);
                let layers = describe_configs::Layers::of(broker, &broker.catalog());
                tr.configs = Some(
                    describe_configs::topic_configs(&layers, &meta.configs, false)
                        .into_iter()
                        .map(|c| {
                            let mut o = CreatableTopicConfigs::default();
                            o.name = c.name;
                            o.value = c.value;
                            o.read_only = c.read_only;
                            o.config_source = c.config_source;
                            o.is_sensitive = false;
                            o
                        })
                        .collect(),
                );
            }
            Err((e, msg)) => {
                tr.error_code = e.code();
                tr.error_message = Some(str_bytes(msg));
                tr.num_partitions = -1;
                tr.replication_factor = -1;
            }
        }
        resp.topics.push(tr);
    }
    req.respond(resp)
}

#[cfg(test)]
mod tests {
    use proto_kafka::messages::create_topics_request::{
        CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
    };
    use proto_kafka::messages::{BrokerId, TopicName};

    use super::*;
    use crate::api::fake::Fake;
    use crate::auth::acl::ResourceType;

    fn creatable(name: &str, partitions: i32, rf: i16) -> CreatableTopic {
        let mut t = CreatableTopic::default();
        t.name = TopicName(str_bytes(name));
        t.num_partitions = partitions;
        t.replication_factor = rf;
        t
    }

    fn request(topics: Vec<CreatableTopic>, validate_only: bool) -> CreateTopicsRequest {
        let mut r = CreateTopicsRequest::default();
        r.topics = topics;
        r.timeout_ms = 30_000;
        r.validate_only = validate_only;
        r
    }

    fn codes(resp: &CreateTopicsResponse) -> Vec<(String, i16)> {
        resp.topics.iter().map(|t| (t.name.to_string(), t.error_code)).collect()
    }

    fn config<'a>(t: &'a CreatableTopicResult, name: &str) -> &'a CreatableTopicConfigs {
        let configs = t.configs.as_ref().expect("configs shown");
        configs.iter().find(|c| c.name.as_str() == name).expect("config listed")
    }

    #[test]
    fn a_created_topic_is_in_the_catalog_with_its_partitions_and_configs() {
        let b = Fake::new();
        let mut t = creatable("orders", 3, -1);
        let mut c = CreatableTopicConfig::default();
        c.name = str_bytes("retention.ms");
        c.value = Some(str_bytes("60000"));
        t.configs.push(c);
        let resp: CreateTopicsResponse = b.call(ApiKey::CreateTopics, 7, &request(vec![t], false));
        let r = &resp.topics[0];
        assert_eq!((r.error_code, r.error_message.as_ref()), (0, None));
        assert_eq!((r.num_partitions, r.replication_factor, r.topic_config_error_code), (3, 1, 0));
        let meta = b.catalog().topic("orders").cloned().expect("topic in the catalog");
        assert_eq!(r.topic_id, meta.id);
        assert_eq!(meta.partitions(), 3);
        let retention = config(r, "retention.ms");
        assert_eq!(retention.value.as_deref(), Some("60000"));
        assert_eq!(retention.config_source, describe_configs::Source::Topic as i8);
        let segment = config(r, "segment.bytes");
        assert_eq!(segment.config_source, describe_configs::Source::Default as i8);
    }

    #[test]
    fn default_partitions_come_from_the_broker_setting() {
        let b = Fake::with(|c| c.default_partitions = 5);
        let resp: CreateTopicsResponse = b.call(ApiKey::CreateTopics, 7, &request(vec![creatable("t", -1, -1)], false));
        assert_eq!(resp.topics[0].num_partitions, 5);
        assert_eq!(b.catalog().topic("t").map(|t| t.partitions()), Some(5));
    }

    #[test]
    fn a_topic_that_exists_is_refused_with_topic_already_exists() {
        let b = Fake::new();
        let id = b.topic("t", 1).topic;
        // Replication factor 3 on a broker alone would be refused too: that the topic exists
        // is what a tool creating it "if not exists" needs to hear.
        let resp: CreateTopicsResponse = b.call(ApiKey::CreateTopics, 7, &request(vec![creatable("t", 4, 3)], false));
        assert_eq!(codes(&resp), vec![("t".into(), ErrorCode::TopicAlreadyExists.code())]);
        assert_eq!((resp.topics[0].num_partitions, resp.topics[0].replication_factor), (-1, -1));
        let meta = b.catalog().topic("t").cloned().expect("still there");
        assert_eq!((meta.id, meta.partitions()), (id, 1), "the existing topic is untouched");
    }

    #[test]
    fn invalid_asks_fail_alone_with_kafkas_codes() {
        let b = Fake::new();
        let mut bad_config = creatable("bad-config", 1, 1);
        let mut c = CreatableTopicConfig::default();
        c.name = str_bytes("retention.ms");
        c.value = Some(str_bytes("soon"));
        bad_config.configs.push(c);
        let mut misassigned = creatable("misassigned", -1, -1);
        let mut a = CreatableReplicaAssignment::default();
        a.broker_ids = vec![BrokerId(b.config().node_id + 1)];
        misassigned.assignments.push(a);
        let mut gap = creatable("gap", -1, -1);
        for partition_index in [0, 2] {
            let mut a = CreatableReplicaAssignment::default();
            a.partition_index = partition_index;
            a.broker_ids = vec![BrokerId(b.config().node_id)];
            gap.assignments.push(a);
        }
        let mut counted = gap.clone();
        counted.name = TopicName(str_bytes("counted"));
        counted.num_partitions = 2;
        counted.assignments[1].partition_index = 1;
        let mut null_config = creatable("null-config", 1, 1);
        let mut c = CreatableTopicConfig::default();
        c.name = str_bytes("retention.ms");
        null_config.configs.push(c);
        b.topic("dotted.name", 1);
        let topics = vec![
            creatable("ok", 1, 1),
            creatable("rf3", 1, 3),
            creatable("zero", 0, 1),
            creatable("bad/name", 1, 1),
            bad_config,
            misassigned,
            gap,
            counted,
            null_config,
            creatable("dotted_name", 1, 1),
        ];
        let resp: CreateTopicsResponse = b.call(ApiKey::CreateTopics, 7, &request(topics, false));
        assert_eq!(
            codes(&resp),
            vec![
                ("ok".into(), 0),
                ("rf3".into(), ErrorCode::InvalidReplicationFactor.code()),
                ("zero".into(), ErrorCode::InvalidPartitions.code()),
                ("bad/name".into(), ErrorCode::InvalidTopicException.code()),
                ("bad-config".into(), ErrorCode::InvalidConfig.code()),
                ("misassigned".into(), ErrorCode::InvalidReplicaAssignment.code()),
                ("gap".into(), ErrorCode::InvalidReplicaAssignment.code()),
                ("counted".into(), ErrorCode::InvalidRequest.code()),
                ("null-config".into(), ErrorCode::InvalidConfig.code()),
                ("dotted_name".into(), ErrorCode::InvalidTopicException.code()),
            ]
        );
        assert!(resp.topics[1..].iter().all(|t| t.error_message.is_some()), "each refusal says why");
        let catalog = b.catalog();
        let created: Vec<&str> = catalog.topics.keys().map(String::as_str).filter(|n| !n.starts_with("__")).collect();
        assert_eq!(created, vec!["dotted.name", "ok"]);
    }

    #[test]
    fn a_manual_assignment_naming_this_broker_sets_the_partition_count() {
        let b = Fake::new();
        let mut t = creatable("manual", -1, -1);
        for i in 0..2 {
            let mut a = CreatableReplicaAssignment::default();
            a.partition_index = i;
            a.broker_ids = vec![BrokerId(b.config().node_id)];
            t.assignments.push(a);
        }
        let resp: CreateTopicsResponse = b.call(ApiKey::CreateTopics, 7, &request(vec![t], false));
        assert_eq!((resp.topics[0].error_code, resp.topics[0].num_partitions), (0, 2));
        assert_eq!(b.catalog().topic("manual").map(|t| t.partitions()), Some(2));
    }

    #[test]
    fn validate_only_answers_as_a_creation_would_but_creates_nothing() {
        let b = Fake::new();
        b.topic("exists", 1);
        let topics = vec![creatable("new", 2, 1), creatable("exists", 1, 1)];
        let resp: CreateTopicsResponse = b.call(ApiKey::CreateTopics, 7, &request(topics, true));
        assert_eq!(codes(&resp), vec![("new".into(), 0), ("exists".into(), ErrorCode::TopicAlreadyExists.code())]);
        assert_eq!(resp.topics[0].num_partitions, 2);
        assert!(b.catalog().topic("new").is_none(), "validate_only leaves no topic");
    }

    #[test]
    fn duplicate_names_in_one_request_are_invalid_request() {
        let b = Fake::new();
        let topics = vec![creatable("twice", 1, 1), creatable("twice", 2, 1)];
        let resp: CreateTopicsResponse = b.call(ApiKey::CreateTopics, 7, &request(topics, false));
        let invalid = ErrorCode::InvalidRequest.code();
        assert_eq!(codes(&resp), vec![("twice".into(), invalid)], "one answer for the name");
        assert!(b.catalog().topic("twice").is_none());
    }

    #[test]
    fn without_create_the_topic_is_refused_and_not_created() {
        let b = Fake::with(|c| c.authorizer_enabled = true);
        let resp: CreateTopicsResponse =
            b.call_as(Some("User:eve"), ApiKey::CreateTopics, 7, &request(vec![creatable("t", 1, 1)], false));
        assert_eq!(codes(&resp), vec![("t".into(), ErrorCode::TopicAuthorizationFailed.code())]);
        assert!(b.catalog().topic("t").is_none());
    }

    #[test]
    fn create_on_the_topic_without_describe_configs_hides_its_configs() {
        let b = Fake::with(|c| c.authorizer_enabled = true);
        b.allow("User:eve", ResourceType::Topic, "t", Operation::Create);
        let resp: CreateTopicsResponse =
            b.call_as(Some("User:eve"), ApiKey::CreateTopics, 7, &request(vec![creatable("t", 2, 1)], false));
        let r = &resp.topics[0];
        assert_eq!(r.error_code, 0);
        assert_eq!(r.topic_config_error_code, ErrorCode::TopicAuthorizationFailed.code());
        assert_eq!((r.num_partitions, r.replication_factor), (-1, -1));
        assert_eq!(r.configs.as_ref().map(Vec::len), Some(0));
        assert_eq!(b.catalog().topic("t").map(|t| t.partitions()), Some(2), "created all the same");
    }

    #[test]
    fn create_on_the_cluster_allows_any_topic() {
        let b = Fake::with(|c| c.authorizer_enabled = true);
        b.allow("User:ops", ResourceType::Cluster, crate::auth::acl::CLUSTER_NAME, Operation::Create);
        b.allow("User:ops", ResourceType::Topic, "t", Operation::DescribeConfigs);
        let resp: CreateTopicsResponse =
            b.call_as(Some("User:ops"), ApiKey::CreateTopics, 7, &request(vec![creatable("t", 1, 1)], false));
        let r = &resp.topics[0];
        assert_eq!((r.error_code, r.topic_config_error_code, r.num_partitions), (0, 0, 1));
        assert!(b.catalog().topic("t").is_some());
    }
}
