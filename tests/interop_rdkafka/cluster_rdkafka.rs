//! librdkafka's idempotent producer against a three-broker cluster (test 3 of the cluster):
//! the leader of a partition is killed with SIGKILL while 100,000 records are sent and
//! restarted a few seconds later; every record must be acknowledged, and read back exactly
//! once, in send order per partition, at its acknowledged offset.

use std::time::{Duration, Instant};

use support::cluster::Cluster;

use crate::idempotence_rdkafka::{consume, produce, verify, PARTITIONS};

#[test]
fn rdkafka_idempotent_producer_loses_nothing_when_a_leader_is_killed() {
    let _machine = crate::machine::alone();
    const TOPIC: &str = "cluster-rdkafka";
    let mut cluster = Cluster::start(3, &["--flush", "always"]);
    cluster.create_topic(TOPIC, PARTITIONS, 3);
    let victim = cluster.leader(TOPIC, 0).expect("partition 0 has a leader");
    let bootstrap = cluster.bootstrap();
    let started = Instant::now();
    let producing = std::thread::spawn(move || produce(&bootstrap, TOPIC));
    std::thread::sleep(Duration::from_millis(500));
    assert!(!producing.is_finished(), "the producer was still sending when the leader was killed");
    println!("SIGKILL of node {victim}, the leader of partition 0");
    cluster.kill9(victim);
    std::thread::sleep(Duration::from_secs(4));
    cluster.restart(victim);
    println!("node {victim} is back");
    let (acks, retries) = producing.join().expect("the producer thread");
    println!("produced in {:?}; partitions drained for a retry {retries} times", started.elapsed());
    assert!(cluster.settled(TOPIC, PARTITIONS, Duration::from_secs(60)), "the cluster healed");
    let got = consume(&cluster.bootstrap(), TOPIC);
    verify(&got, &acks, false);
}
