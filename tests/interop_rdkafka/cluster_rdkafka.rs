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

/// librdkafka reads a replicated compacted topic that its brokers cleaned. A replicated log is
/// cleaned keeping every batch (each is a raft entry), so most batches the consumer fetches
/// are empty: it must step over them to the end and see each key's latest value at its offset.
#[test]
fn rdkafka_reads_a_cleaned_replicated_compacted_topic_past_its_emptied_batches() {
    use std::collections::BTreeMap;

    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::{Message, Offset, TopicPartitionList};
    use ringbroker::protocol::batch;
    use support::client::{now_ms, wait_until, Client};

    use crate::librdkafka::{self, Ctx};

    let _machine = crate::machine::shared();
    const TOPIC: &str = "cleaned-rk";
    let cluster = Cluster::start(3, &["--log-cleaner-backoff-ms", "200"]);
    let configs = [("cleanup.policy", "compact"), ("segment.bytes", "16384"), ("min.cleanable.dirty.ratio", "0.01")];
    cluster.create_topic_with(TOPIC, 1, 3, &configs);
    let leader = cluster.leader(TOPIC, 0).expect("a leader");
    let mut c = Client::connect(cluster.addr(leader));
    let mut latest: BTreeMap<Vec<u8>, (i64, Vec<u8>)> = BTreeMap::new();
    for b in 0..100 {
        let recs: Vec<(Vec<u8>, Vec<u8>)> = (b * 20..b * 20 + 20)
            .map(|i| (format!("key-{}", i % 50).into_bytes(), format!("value-{i:>80}").into_bytes()))
            .collect();
        let kvs: Vec<batch::KeyValue> = recs.iter().map(|(k, v)| (Some(k.as_slice()), Some(v.as_slice()))).collect();
        let base = c.produce_ok(TOPIC, 0, batch::build_keyed(now_ms(), &kvs));
        for (d, (k, v)) in recs.into_iter().enumerate() {
            latest.insert(k, (base + d as i64, v));
        }
    }
    let log_bytes = || support::log_bytes(&cluster.data_dir(leader).join(format!("{TOPIC}-0")));
    // 2,000 records of ~100 bytes: cleaned, the log is its emptied batches, each key's
    // latest record and the active segment.
    assert!(wait_until(Duration::from_secs(60), || log_bytes() < 60_000), "cleaned: {} bytes", log_bytes());

    let consumer: BaseConsumer<Ctx> = librdkafka::config(&cluster.bootstrap())
        .set("group.id", "cleaned-rk")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .set("check.crcs", "true")
        .create_with_context(Ctx::new("consumer"))
        .expect("create the consumer");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(TOPIC, 0, Offset::Beginning).unwrap();
    consumer.assign(&tpl).expect("assign");
    let last = latest.values().map(|(o, _)| *o).max().unwrap();
    let mut got: Vec<(i64, Vec<u8>, Vec<u8>)> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while got.last().is_none_or(|r| r.0 < last) && Instant::now() < deadline {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
            got.push((m.offset(), m.key().unwrap_or_default().to_vec(), m.payload().unwrap_or_default().to_vec()));
        }
    }
    assert_eq!(got.last().map(|r| r.0), Some(last), "librdkafka reached the last record; got {} records", got.len());
    assert!(got.windows(2).all(|w| w[0].0 < w[1].0), "offsets only grow");
    let seen: BTreeMap<Vec<u8>, (i64, Vec<u8>)> = got.iter().map(|(o, k, v)| (k.clone(), (*o, v.clone()))).collect();
    assert_eq!(seen, latest, "each key's latest value at its offset");
    assert!(got.len() < 2_000, "superseded records were cleaned away: {} read", got.len());
}
