//! The controller as a state machine: what it acknowledges is in the catalog after a
//! reopen, a torn log tail loses only the unanswered change, snapshots shorten the log
//! without changing the state.

use std::collections::BTreeMap;

use super::*;
use crate::auth::acl::{AclBinding, Operation, PatternType, Permission, ResourceType};
use crate::storage::faults::{self, Fault, Op};

fn context(dir: &Path, shards: usize) -> Context {
    Context {
        shards,
        node_id: 0,
        default_partitions: 3,
        static_log: LogConfig::from_config(&crate::config::Config::default()),
        data_dir: dir.to_path_buf(),
        members: Vec::new(),
        default_replication_factor: 1,
    }
}

fn topic(name: &str, partitions: i32) -> NewTopic {
    NewTopic { name: name.into(), partitions, replication_factor: -1, assignments: None, configs: BTreeMap::new() }
}

fn set(target: ConfigTarget, name: &str, value: &str) -> ConfigChange {
    ConfigChange { target, ops: vec![(name.into(), ConfigOp::Set(value.into()))], replace: false }
}

#[test]
fn acknowledged_changes_survive_a_reopen_by_replay() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Controller::open(context(dir.path(), 2)).unwrap();
    let made = c.create_topics(&[topic("orders", 4), topic("orders", 1), topic("bad/name", 1)], false);
    assert!(made[0].is_ok());
    assert_eq!(made[1].as_ref().unwrap_err().0, ErrorCode::TopicAlreadyExists, "a request sees its own earlier asks");
    assert_eq!(made[2].as_ref().unwrap_err().0, ErrorCode::InvalidTopicException);
    let grown = c.create_partitions(&[NewPartitions { topic: "orders".into(), count: 6, assignments: None }], false);
    assert!(grown[0].is_ok());
    assert!(c.alter_configs(&[set(ConfigTarget::Topic("orders".into()), "retention.ms", "1000")], false)[0].is_ok());
    assert!(c.alter_configs(&[set(ConfigTarget::BrokerDefault, "log.retention.ms", "5000")], false)[0].is_ok());
    let ids: Vec<i64> = (0..3).map(|_| c.allocate_producer_id().unwrap()).collect();
    let before = c.catalog().clone();
    let meta = std::fs::metadata(dir.path().join(log::LOG_FILE)).unwrap();
    assert!(meta.len() > 0);
    let mode = std::os::unix::fs::PermissionsExt::mode(&meta.permissions());
    assert_eq!(mode & 0o777, 0o600, "the log holds credentials: owner-only");
    drop(c);

    let mut c = Controller::open(context(dir.path(), 2)).unwrap();
    let t = c.catalog().topic("orders").unwrap();
    assert_eq!(t, before.topic("orders").unwrap(), "same id, homes and configs after replay");
    assert_eq!(t.homes.len(), 6);
    assert_eq!(t.configs.get("retention.ms").map(String::as_str), Some("1000"));
    assert_eq!(c.catalog().broker_defaults, before.broker_defaults);
    assert_eq!(c.catalog().version, before.version, "replay bumps the version as the commits did");
    let next = c.allocate_producer_id().unwrap();
    assert!(ids.iter().all(|&i| i < next), "a producer id is never handed out twice: {ids:?} then {next}");
}

#[test]
fn the_metadata_quorums_log_name_is_no_topic_name() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Controller::open(context(dir.path(), 1)).unwrap();
    let made = c.create_topics(&[topic(crate::metadata::METADATA_TOPIC, 1), topic("__cluster_metadata2", 1)], false);
    let (code, message) = made[0].as_ref().unwrap_err();
    assert_eq!(*code, ErrorCode::InvalidRequest);
    assert!(message.contains("prohibited"), "{message}");
    assert!(made[1].is_ok(), "only the exact name is reserved");
    assert!(c.catalog().topic(crate::metadata::METADATA_TOPIC).is_none());
}

#[test]
fn a_deletion_by_id_spares_a_topic_created_again_under_the_name() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Controller::open(context(dir.path(), 1)).unwrap();
    let old = c.create_topics(&[topic("t", 1)], false)[0].as_ref().unwrap().id;
    assert_eq!(c.delete_topics(&[("t".into(), old)]), [Ok(old)]);
    let new = c.create_topics(&[topic("t", 1)], false)[0].as_ref().unwrap().id;
    // A request by the old id, decided at a broker whose catalog still had it.
    assert_eq!(c.delete_topics(&[("t".into(), old)]), [Err(ErrorCode::UnknownTopicId)]);
    assert_eq!(c.catalog().topic("t").map(|t| t.id), Some(new), "the new topic stays");
    assert_eq!(c.delete_topics(&[("t".into(), uuid::Uuid::nil())]), [Ok(new)], "by name: whichever has it");
    assert_eq!(c.delete_topics(&[("t".into(), new)]), [Err(ErrorCode::UnknownTopicId)]);
}

#[test]
fn validate_only_and_refused_asks_log_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Controller::open(context(dir.path(), 1)).unwrap();
    let v = c.catalog().version;
    assert!(c.create_topics(&[topic("a", 1)], true)[0].is_ok());
    let bad = c.alter_configs(&[set(ConfigTarget::Topic("missing".into()), "retention.ms", "1")], false);
    assert_eq!(bad[0].as_ref().unwrap_err().0, ErrorCode::UnknownTopicOrPartition);
    let bad = c.alter_configs(&[set(ConfigTarget::Broker(1), "log.dirs", "/x")], false);
    assert_eq!(bad[0].as_ref().unwrap_err().0, ErrorCode::InvalidRequest);
    assert_eq!(c.catalog().version, v);
    assert!(c.catalog().topic("a").is_none());
    assert_eq!(std::fs::metadata(dir.path().join(log::LOG_FILE)).unwrap().len(), 0);
}

#[test]
fn a_torn_last_entry_is_cut_and_the_rest_replays() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Controller::open(context(dir.path(), 1)).unwrap();
    c.create_topics(&[topic("kept", 1)], false);
    drop(c);
    let path = dir.path().join(log::LOG_FILE);
    let whole = std::fs::read(&path).unwrap();
    // A second commit torn at every length: the first always survives, the torn one never
    // half-applies.
    let mut c = Controller::open(context(dir.path(), 1)).unwrap();
    c.create_topics(&[topic("torn", 1)], false);
    drop(c);
    let both = std::fs::read(&path).unwrap();
    for cut in whole.len()..both.len() {
        std::fs::write(&path, &both[..cut]).unwrap();
        let c = Controller::open(context(dir.path(), 1)).unwrap();
        assert!(c.catalog().topic("kept").is_some(), "cut at {cut}");
        assert!(c.catalog().topic("torn").is_none(), "cut at {cut}: a torn entry is not applied");
        drop(c);
        assert_eq!(std::fs::read(&path).unwrap(), whole, "cut at {cut}: the torn tail is removed");
    }
}

#[test]
fn a_snapshot_replaces_the_log_without_changing_the_state() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Controller::open(context(dir.path(), 2)).unwrap();
    for i in 0..log::SNAPSHOT_EVERY + 5 {
        let acl = AclBinding {
            resource_type: ResourceType::Topic,
            resource_name: format!("t{i}"),
            pattern: PatternType::Literal,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: Operation::Read,
            permission: Permission::Allow,
        };
        c.create_acls(&[acl]).unwrap();
    }
    assert_eq!(c.logged(), 5, "the log restarted at the snapshot");
    let before = c.catalog().clone();
    drop(c);
    let c = Controller::open(context(dir.path(), 2)).unwrap();
    assert_eq!(c.catalog().acls, before.acls);
    assert_eq!(c.catalog().applied, before.applied);
    assert_eq!(c.catalog().version, before.version);
}

#[test]
fn fewer_shards_fit_homes_after_replay() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Controller::open(context(dir.path(), 4)).unwrap();
    c.create_topics(&[topic("wide", 8)], false);
    drop(c);
    let c = Controller::open(context(dir.path(), 2)).unwrap();
    assert!(c.catalog().topic("wide").unwrap().homes.iter().all(|&h| h < 2));
}

#[test]
fn a_failed_append_changes_nothing_and_says_storage() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Controller::open(context(dir.path(), 1)).unwrap();
    let v = c.catalog().version;
    faults::inject(dir.path(), Op::Write, Fault::NoSpace, None);
    let r = c.create_topics(&[topic("a", 1), topic("bad/name", 1)], false);
    assert_eq!(r[0].as_ref().unwrap_err().0, ErrorCode::KafkaStorageError);
    assert_eq!(r[1].as_ref().unwrap_err().0, ErrorCode::InvalidTopicException, "a refused ask keeps its own error");
    assert_eq!(c.catalog().version, v);
    assert!(c.catalog().topic("a").is_none());
    faults::clear(dir.path());
    assert!(c.create_topics(&[topic("a", 1)], false)[0].is_ok(), "writes resume once there is space");
    drop(c);
    let c = Controller::open(context(dir.path(), 1)).unwrap();
    assert!(c.catalog().topic("a").is_some());
}

/// A cluster member's controller: decided records wait to be proposed, and only what is
/// committed (applied) changes the catalog.
fn member(dir: &Path) -> Controller {
    let ctx = Context { node_id: 1, members: vec![1, 2, 3], default_replication_factor: 3, ..context(dir, 1) };
    Controller::replicated(ctx)
}

#[test]
fn a_members_decisions_change_nothing_until_committed() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = member(dir.path());
    assert!(c.found_cluster(), "a new cluster gets its identity from its first leader");
    let made = c.create_topics(&[topic("orders", 3)], false);
    assert_eq!(made[0].as_ref().unwrap().replicas, vec![vec![1, 2, 3], vec![2, 3, 1], vec![3, 1, 2]]);
    assert!(c.catalog().topic("orders").is_none(), "decided, not committed");
    let records = c.take_pending();
    assert_eq!(records.len(), 2);
    assert!(c.take_pending().is_empty());
    c.apply_committed(&records);
    let t = c.catalog().topic("orders").expect("applied on commit");
    assert_eq!(t.replicas_of(1), &[2, 3, 1]);
    assert!(!c.catalog().cluster_id.is_empty());
    let id = c.catalog().cluster_id.clone();
    // A second identity (a leader that had not applied the first) changes nothing.
    assert!(!c.found_cluster());
    let other = Catalog::new_cluster();
    c.apply_committed(&[Record::Cluster { cluster_id: other.cluster_id, auth_secret: other.auth_secret }]);
    assert_eq!(c.catalog().cluster_id, id);
}

#[test]
fn replicas_are_checked_against_the_members() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = member(dir.path());
    let too_many = NewTopic { replication_factor: 4, ..topic("a", 1) };
    let stranger = NewTopic { assignments: Some(vec![vec![1, 9]]), ..topic("b", -1) };
    let chosen = NewTopic { assignments: Some(vec![vec![3, 1], vec![2, 3]]), ..topic("c", -1) };
    let made = c.create_topics(&[too_many, stranger, chosen], false);
    assert_eq!(made[0].as_ref().unwrap_err().0, ErrorCode::InvalidReplicationFactor);
    assert_eq!(made[1].as_ref().unwrap_err().0, ErrorCode::InvalidReplicaAssignment);
    assert_eq!(made[2].as_ref().unwrap().replicas, vec![vec![3, 1], vec![2, 3]]);
    let pending = c.take_pending();
    c.apply_committed(&pending);
    let grown = c.create_partitions(&[NewPartitions { topic: "c".into(), count: 3, assignments: None }], false);
    assert!(grown[0].is_ok());
    let pending = c.take_pending();
    c.apply_committed(&pending);
    assert_eq!(c.catalog().topic("c").unwrap().replicas.len(), 3, "new partitions get replicas too");
    let broker = crate::metadata::BrokerRegistration { node_id: 7, endpoints: vec![], rack: None };
    assert_eq!(c.register(broker).unwrap_err().0, ErrorCode::InvalidRequest, "only voters are members");
    let per_broker = c.alter_configs(&[set(ConfigTarget::Broker(1), "log.retention.ms", "1000")], false);
    assert_eq!(per_broker[0].as_ref().unwrap_err().0, ErrorCode::InvalidRequest, "refused, not applied everywhere");
}

#[test]
fn producer_id_blocks_belong_to_who_reserved_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut leader = member(dir.path());
    assert_eq!(leader.allocate_producer_id().unwrap(), 0);
    assert_eq!(leader.allocate_producer_id().unwrap(), 1, "from the block reserved with the first");
    let reserved = leader.take_pending();
    assert_eq!(reserved, vec![Record::ProducerIds { reserved_until: PRODUCER_ID_BLOCK }]);
    leader.apply_committed(&reserved);
    // A member asks the leader for a block and hands its ids out itself.
    let (from, until) = leader.reserve_producer_ids().unwrap();
    assert_eq!((from, until), (PRODUCER_ID_BLOCK, 2 * PRODUCER_ID_BLOCK));
    let pending = leader.take_pending();
    leader.apply_committed(&pending);
    let mut other = member(dir.path());
    assert_eq!(other.next_from_block(), None, "no block yet");
    other.use_block(from, until);
    assert_eq!(other.next_from_block(), Some(from));
    // The leader's own block is not the member's: it goes on from its own.
    assert_eq!(leader.allocate_producer_id().unwrap(), 2);
    // A block whose record did not commit is not handed out from.
    let mut lost = member(dir.path());
    lost.allocate_producer_id().unwrap();
    lost.abandon();
    lost.take_pending();
    lost.allocate_producer_id().unwrap();
    assert_eq!(lost.take_pending().len(), 1, "a new block is reserved");
}

fn reassign(topic: &str, partition: i32, target: Option<Vec<i32>>) -> Reassignment {
    Reassignment { topic: topic.into(), partition, target, allow_replication_factor_change: true }
}

/// Commits what a member decided, as the quorum would.
fn committed(c: &mut Controller) {
    let pending = c.take_pending();
    c.apply_committed(&pending);
}

#[test]
fn a_reassignment_is_recorded_then_completed_by_its_leaders_report() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = member(dir.path());
    let chosen = NewTopic { assignments: Some(vec![vec![1, 2], vec![2, 3]]), ..topic("m", -1) };
    c.create_topics(&[chosen], false)[0].as_ref().unwrap();
    committed(&mut c);
    let asks = [
        reassign("m", 0, Some(vec![2, 3])),
        reassign("m", 1, Some(vec![2, 3])), // where it is: nothing to do
        reassign("m", 2, Some(vec![1])),
        reassign("m", 1, None),
        reassign("m", 0, Some(vec![2, 9])),
        reassign("m", 0, Some(vec![2, 2])),
    ];
    let results: Vec<Option<ErrorCode>> =
        c.alter_reassignments(&asks).into_iter().map(|r| r.err().map(|f| f.0)).collect();
    assert_eq!(
        results,
        vec![
            None,
            None,
            Some(ErrorCode::UnknownTopicOrPartition),
            Some(ErrorCode::NoReassignmentInProgress),
            Some(ErrorCode::InvalidReplicaAssignment),
            Some(ErrorCode::InvalidReplicaAssignment),
        ]
    );
    let strict = Reassignment { allow_replication_factor_change: false, ..reassign("m", 1, Some(vec![1, 2, 3])) };
    assert_eq!(c.alter_reassignments(&[strict])[0].as_ref().unwrap_err().0, ErrorCode::InvalidReplicationFactor);
    committed(&mut c);
    let t = c.catalog().topic("m").unwrap();
    assert_eq!(t.replicas_of(0), &[1, 2], "the replicas change when the move is done, not before");
    assert_eq!(t.holders_of(0), vec![2, 3, 1], "the target first, then who leaves");
    assert_eq!(t.first_voters_of(0), &[1, 2]);
    let o = crate::controller::ongoing(t, 0).unwrap();
    assert_eq!((o.adding, o.removing), (vec![3], vec![1]));
    assert!(c.complete_reassignment("m", 0, &[1, 2, 3]).is_err(), "voters that are not the target");
    c.complete_reassignment("m", 0, &[3, 2]).unwrap();
    committed(&mut c);
    let t = c.catalog().topic("m").unwrap();
    assert_eq!(t.replicas_of(0), &[2, 3], "in the target's order");
    assert!(t.reassigning.is_empty());
    assert_eq!(t.first_voters_of(0), &[1, 2], "a replica added later still starts where the group began");
    assert!(c.complete_reassignment("m", 0, &[2, 3]).is_err(), "a second report finds nothing under way");
}

#[test]
fn a_cancelled_reassignment_targets_the_replicas_it_started_from() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = member(dir.path());
    let chosen = NewTopic { assignments: Some(vec![vec![1]]), ..topic("g", -1) };
    c.create_topics(&[chosen], false)[0].as_ref().unwrap();
    committed(&mut c);
    c.alter_reassignments(&[reassign("g", 0, Some(vec![1, 2, 3]))])[0].as_ref().unwrap();
    committed(&mut c);
    c.alter_reassignments(&[reassign("g", 0, None)])[0].as_ref().unwrap();
    committed(&mut c);
    let t = c.catalog().topic("g").unwrap();
    assert_eq!(t.reassigning.get(&0), Some(&vec![1]));
    // The group may already have moved to 2 and 3: they keep their replicas until it ends.
    assert_eq!(t.holders_of(0), [1, 2, 3]);
    c.complete_reassignment("g", 0, &[1]).unwrap();
    committed(&mut c);
    let t = c.catalog().topic("g").unwrap();
    assert_eq!(t.replicas_of(0), &[1]);
    assert_eq!(t.holders_of(0), [1], "the cancelled target's brokers go once the group is back");
}

#[test]
fn a_replaced_target_keeps_its_brokers_holding_until_the_reassignment_completes() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = member(dir.path());
    let chosen = NewTopic { assignments: Some(vec![vec![1]]), ..topic("g", -1) };
    c.create_topics(&[chosen], false)[0].as_ref().unwrap();
    committed(&mut c);
    c.alter_reassignments(&[reassign("g", 0, Some(vec![2]))])[0].as_ref().unwrap();
    committed(&mut c);
    c.alter_reassignments(&[reassign("g", 0, Some(vec![3]))])[0].as_ref().unwrap();
    committed(&mut c);
    assert_eq!(c.catalog().topic("g").unwrap().holders_of(0), [3, 1, 2]);
    c.complete_reassignment("g", 0, &[3]).unwrap();
    committed(&mut c);
    assert_eq!(c.catalog().topic("g").unwrap().holders_of(0), [3]);
}

#[test]
fn a_reassignment_record_reads_back_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = member(dir.path());
    let chosen = NewTopic { assignments: Some(vec![vec![1, 2]]), ..topic("r", -1) };
    c.create_topics(&[chosen], false)[0].as_ref().unwrap();
    committed(&mut c);
    c.alter_reassignments(&[reassign("r", 0, Some(vec![2, 3]))])[0].as_ref().unwrap();
    let records = c.take_pending();
    // The quorum carries records as JSON: partition-keyed maps must survive the round trip.
    let json = serde_json::to_vec(&records).unwrap();
    let back: Vec<Record> = serde_json::from_slice(&json).expect("the records decode");
    assert_eq!(back, records);
}

#[test]
fn replication_rates_are_each_brokers_own_and_clearing_them_leaves_other_configs() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = member(dir.path());
    let rate = |node| ConfigTarget::Broker(node);
    // kafka-reassign-partitions --throttle sets both rates on every broker a move involves.
    for node in [1, 2] {
        let both = ConfigChange {
            target: rate(node),
            ops: vec![
                ("leader.replication.throttled.rate".into(), ConfigOp::Set("1000".into())),
                ("follower.replication.throttled.rate".into(), ConfigOp::Set(format!("{node}000"))),
            ],
            replace: false,
        };
        assert!(c.alter_configs(&[both], false)[0].is_ok(), "a member's own rates are accepted in a cluster");
    }
    assert!(c.alter_configs(&[set(ConfigTarget::BrokerDefault, "follower.replication.throttled.rate", "9")], false)[0]
        .is_ok());
    committed(&mut c);
    let cat = c.catalog().clone();
    assert_eq!(cat.replication_rate(2, "follower.replication.throttled.rate"), Some(2000));
    assert_eq!(cat.replication_rate(1, "follower.replication.throttled.rate"), Some(1000));
    assert_eq!(cat.replication_rate(3, "follower.replication.throttled.rate"), Some(9), "the cluster-wide one");
    assert_eq!(cat.replication_rate(3, "leader.replication.throttled.rate"), None);
    assert!(cat.broker_configs.is_empty(), "rates are not the configs every member applies");
    // The legacy AlterConfigs replaces a resource's configs: naming only rates is fine.
    let legacy = ConfigChange { replace: true, ..set(rate(3), "leader.replication.throttled.rate", "7") };
    assert!(c.alter_configs(&[legacy], false)[0].is_ok());
    committed(&mut c);
    assert_eq!(c.catalog().replication_rate(3, "leader.replication.throttled.rate"), Some(7));

    let bad = set(rate(1), "leader.replication.throttled.rate", "-5");
    assert_eq!(c.alter_configs(&[bad], false)[0].as_ref().unwrap_err().0, ErrorCode::InvalidRequest);
    let on_topic = set(ConfigTarget::Topic("none".into()), "leader.replication.throttled.rate", "5");
    assert!(c.alter_configs(&[on_topic], false)[0].is_err(), "a rate is no topic config");
    let dirs = set(rate(1), "replica.alter.log.dirs.io.max.bytes.per.second", "5");
    assert_eq!(c.alter_configs(&[dirs], false)[0].as_ref().unwrap_err().0, ErrorCode::InvalidConfig);

    // --verify clears them all, the log-dirs one included, on every broker.
    let clear = ConfigChange {
        target: rate(1),
        ops: [
            "leader.replication.throttled.rate",
            "follower.replication.throttled.rate",
            "replica.alter.log.dirs.io.max.bytes.per.second",
        ]
        .iter()
        .map(|n| (n.to_string(), ConfigOp::Delete))
        .collect(),
        replace: false,
    };
    assert!(c.alter_configs(&[clear], false)[0].is_ok());
    committed(&mut c);
    assert_eq!(c.catalog().replication_rate(1, "leader.replication.throttled.rate"), None);
    assert_eq!(c.catalog().replication_rate(1, "follower.replication.throttled.rate"), Some(9));
    assert_eq!(
        c.catalog().replication_rate(2, "leader.replication.throttled.rate"),
        Some(1000),
        "another broker's stay"
    );
}

#[test]
fn a_topics_throttled_replica_lists_are_checked_and_stored() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = member(dir.path());
    c.create_topics(&[topic("t", 2)], false)[0].as_ref().unwrap();
    committed(&mut c);
    let name = || ConfigTarget::Topic("t".into());
    let good = set(name(), "leader.replication.throttled.replicas", "0:1,1:2");
    assert!(c.alter_configs(&[good], false)[0].is_ok());
    let bad = set(name(), "follower.replication.throttled.replicas", "0:one");
    assert_eq!(c.alter_configs(&[bad], false)[0].as_ref().unwrap_err().0, ErrorCode::InvalidConfig);
    committed(&mut c);
    let t = c.catalog().topic("t").unwrap();
    assert_eq!(t.configs.get("leader.replication.throttled.replicas").map(String::as_str), Some("0:1,1:2"));
}
