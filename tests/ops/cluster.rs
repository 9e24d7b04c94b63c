//! The metadata quorum of a three-broker cluster fails over during a burst of CreateTopics
//! (test 6 of the cluster): the controller is killed with SIGKILL while topics are being
//! created one request at a time, and restarted. Afterwards each topic exists whole (all
//! its partitions, each with its replicas and a leader) on every broker, or on none; every
//! topic whose creation was acknowledged exists.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ringbroker::protocol::ErrorCode;
use support::client::{new_topic, Client};
use support::cluster::Cluster;

const TOPICS: usize = 40;
const PARTITIONS: i32 = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Created,
    /// An earlier attempt whose answer was lost had created it.
    Existed,
    /// Never answered: it may or may not exist.
    Unknown,
}

/// Creates `topic` at whoever Metadata says is the controller, retrying for a while when the
/// controller is unreachable or moved.
fn create(addrs: &[std::net::SocketAddr], topic: &str) -> Outcome {
    let deadline = Instant::now() + Duration::from_secs(40);
    let mut tried = false;
    while Instant::now() < deadline {
        let attempt = catch_unwind(AssertUnwindSafe(|| {
            let any = addrs.iter().find_map(|a| catch_unwind(|| Client::connect(*a)).ok())?;
            let mut any = any;
            let controller = any.metadata(Some(&[]), false).controller_id.0;
            let addr = addrs.get(usize::try_from(controller - 1).ok()?)?;
            let mut c = Client::connect(*addr);
            let r = c.create_topics(vec![new_topic(topic, PARTITIONS, 3, &[])], false);
            Some(r.topics[0].error_code)
        }));
        match attempt {
            Ok(Some(0)) => return Outcome::Created,
            Ok(Some(code)) if code == ErrorCode::TopicAlreadyExists.code() && tried => return Outcome::Existed,
            Ok(Some(code)) if code == ErrorCode::TopicAlreadyExists.code() => {
                panic!("{topic} existed before it was created")
            }
            Ok(Some(code)) => {
                let retriable = [ErrorCode::NotController.code(), ErrorCode::RequestTimedOut.code()];
                assert!(retriable.contains(&code), "creating {topic}: error {code}, which clients do not retry");
            }
            _ => {}
        }
        tried = true;
        std::thread::sleep(Duration::from_millis(200));
    }
    Outcome::Unknown
}

#[test]
fn topics_created_while_the_controller_fails_over_exist_whole_or_not_at_all() {
    let mut cluster = Cluster::start(3, &[]);
    let addrs: Vec<_> = (1..=3).map(|n| cluster.addr(n)).collect();
    let outcomes: Arc<Mutex<BTreeMap<String, Outcome>>> = Arc::default();
    let (out, a) = (outcomes.clone(), addrs.clone());
    let creating = std::thread::spawn(move || {
        for i in 0..TOPICS {
            let name = format!("burst-{i}");
            let o = create(&a, &name);
            out.lock().unwrap().insert(name, o);
        }
    });
    while outcomes.lock().unwrap().len() < 10 {
        std::thread::sleep(Duration::from_millis(20));
    }
    let controller = cluster.controller().expect("a controller");
    println!("SIGKILL of node {controller}, the controller");
    cluster.kill9(controller);
    std::thread::sleep(Duration::from_secs(4));
    cluster.restart(controller);
    creating.join().expect("the creating thread");
    let outcomes = outcomes.lock().unwrap().clone();
    println!("outcomes: {outcomes:?}");
    assert!(outcomes.values().filter(|o| **o != Outcome::Unknown).count() > TOPICS / 2, "most were answered");
    // Every broker applies the same committed metadata: wait until all list the same topics.
    let names: Vec<&str> = outcomes.keys().map(String::as_str).collect();
    let listed = |node: i32| -> BTreeMap<String, Vec<(i32, usize, i32)>> {
        let mut c = Client::connect(cluster.addr(node));
        let md = c.metadata(Some(&names), false);
        md.topics
            .iter()
            .filter(|t| t.error_code == 0)
            .map(|t| {
                let parts =
                    t.partitions.iter().map(|p| (p.partition_index, p.replica_nodes.len(), p.leader_id.0)).collect();
                (t.name.as_ref().unwrap().to_string(), parts)
            })
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let views: Vec<_> = (1..=3).map(listed).collect();
        let whole = |v: &BTreeMap<String, Vec<(i32, usize, i32)>>| {
            v.values()
                .all(|parts| parts.len() == PARTITIONS as usize && parts.iter().all(|(_, r, l)| *r == 3 && *l > 0))
        };
        let same_names = views.windows(2).all(|w| w[0].keys().eq(w[1].keys()));
        if same_names && views.iter().all(whole) {
            for (name, o) in &outcomes {
                if *o != Outcome::Unknown {
                    assert!(views[0].contains_key(name), "{name} was acknowledged ({o:?}) but does not exist");
                }
            }
            println!("{} of {TOPICS} topics exist, whole, on every broker", views[0].len());
            break;
        }
        assert!(Instant::now() < deadline, "the brokers do not agree on whole topics: {views:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Three consecutive free ports (none is taken right now).
fn free_ports(n: u16) -> u16 {
    for _ in 0..100 {
        let base = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        if base > 60_000 {
            continue;
        }
        if (0..n).all(|i| std::net::TcpListener::bind(("127.0.0.1", base + i)).is_ok()) {
            return base;
        }
    }
    panic!("no {n} consecutive free ports");
}

/// The README's cluster command: `ringbroker dev-cluster --brokers 3` starts three brokers,
/// prints their bootstrap string, serves a replicated topic, and stops them all on SIGINT.
#[test]
fn dev_cluster_starts_three_brokers_and_stops_them_on_ctrl_c() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    let dir = tempfile::tempdir().unwrap();
    let (port, cluster_port, admin_port) = (free_ports(3), free_ports(3), free_ports(3));
    let mut child = Command::new(env!("CARGO_BIN_EXE_ringbroker"))
        .args(["dev-cluster", "--brokers", "3"])
        .args(["--port", &port.to_string(), "--cluster-port", &cluster_port.to_string()])
        .args(["--admin-port", &admin_port.to_string()])
        .arg("--data-dir")
        .arg(dir.path())
        .args(["--", "--default-replication-factor", "3"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start dev-cluster");
    let (tx, rx) = std::sync::mpsc::channel();
    let out = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if let Some(b) = line.split("bootstrap ").nth(1) {
                let _ = tx.send(b.to_string());
            }
        }
    });
    let bootstrap = rx.recv_timeout(Duration::from_secs(60)).expect("dev-cluster printed its bootstrap string");
    let addrs: Vec<String> = (0..3).map(|i| format!("127.0.0.1:{}", port + i)).collect();
    assert_eq!(bootstrap, addrs.join(","));
    let cli = |args: &[&str], input: &[u8]| {
        use std::io::Write;
        let mut c = Command::new(env!("CARGO_BIN_EXE_ringbroker"))
            .args(args)
            .env("RINGBROKER_BROKERS", &bootstrap)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        c.stdin.take().unwrap().write_all(input).unwrap();
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).to_string()
    };
    let input: String = (1..=50).map(|i| format!("r{i}\n")).collect();
    cli(&["produce", "dev"], input.as_bytes());
    let read = cli(&["consume", "dev", "-n", "50"], b"");
    assert_eq!(read, input, "every record read back, in order");
    let mut md = Client::connect(addrs[2].parse().unwrap()).metadata(Some(&["dev"]), false);
    assert_eq!(md.brokers.len(), 3, "Metadata lists the three brokers");
    let t = md.topics.remove(0);
    assert_eq!(t.partitions[0].replica_nodes.len(), 3, "replicated on all three");
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < deadline, "dev-cluster did not stop within 60 s of SIGINT");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(status.success(), "dev-cluster exited with {status}");
    for a in &addrs {
        assert!(std::net::TcpStream::connect(a).is_err(), "broker at {a} stopped");
    }
}

/// A follower refuses a produce with NOT_LEADER_OR_FOLLOWER and, from Produce v10, tells the
/// client where the leader is (KIP-951): its id and epoch, and its address; so does a Fetch
/// at v16+.
#[test]
fn a_follower_refusing_a_produce_or_fetch_names_the_leader() {
    use ringbroker::protocol::messages::{ApiKey, ProduceResponse};
    use support::client::{batch, now_ms, produce_request};

    let cluster = Cluster::start(3, &[]);
    cluster.create_topic("hinted", 1, 3);
    let leader = cluster.leader("hinted", 0).expect("a leader");
    let follower = (1..=3).find(|n| *n != leader).unwrap();
    let mut c = Client::connect(cluster.addr(follower));
    let req = produce_request("hinted", &[(0, batch(now_ms(), &[b"x".to_vec()]))], -1);
    let resp: ProduceResponse = c.call(ApiKey::Produce, 12, &req);
    let p = &resp.responses[0].partition_responses[0];
    assert_eq!(p.error_code, ErrorCode::NotLeaderOrFollower.code());
    assert_eq!(p.current_leader.leader_id.0, leader);
    assert!(p.current_leader.leader_epoch > 0);
    let at = resp.node_endpoints.iter().find(|n| n.node_id.0 == leader).expect("the leader's endpoint");
    assert_eq!(format!("{}:{}", at.host.as_str(), at.port), cluster.addr(leader).to_string());
    let mut l = Client::connect(cluster.addr(leader));
    let ok = support::client::single_produce(l.call(ApiKey::Produce, 12, &req));
    assert_eq!(ok.error_code, 0, "the leader takes it");

    // Fetch v16+ carries the same hints; v15 has no field for them.
    use ringbroker::protocol::messages::FetchResponse;
    let id = c.metadata(Some(&["hinted"]), false).topics[0].topic_id;
    let fetch = support::client::fetch_request_by_id(id, 0, 0, 1 << 20);
    let resp: FetchResponse = c.call(ApiKey::Fetch, 16, &fetch);
    let p = &resp.responses[0].partitions[0];
    assert_eq!(p.error_code, ErrorCode::NotLeaderOrFollower.code());
    assert_eq!((p.current_leader.leader_id.0, p.current_leader.leader_epoch > 0), (leader, true));
    let at = resp.node_endpoints.iter().find(|n| n.node_id.0 == leader).expect("the leader's endpoint in Fetch");
    assert_eq!(format!("{}:{}", at.host.as_str(), at.port), cluster.addr(leader).to_string());
    let resp: FetchResponse = c.call(ApiKey::Fetch, 15, &fetch);
    assert_eq!(resp.responses[0].partitions[0].current_leader.leader_id.0, -1, "no hint before v16");

    // DescribeProducers is answered by any replica, from the producer state it applied
    // from the log, as Kafka's (`kafka-transactions describe-producers --broker-id`).
    use ringbroker::protocol::messages::describe_producers_request::TopicRequest;
    use ringbroker::protocol::messages::{DescribeProducersRequest, DescribeProducersResponse};
    let mut idempotent = batch(now_ms(), &[b"y".to_vec()]);
    ringbroker::protocol::batch::set_producer(&mut idempotent, 4242, 0, 0);
    let ok = support::client::single_produce(l.call(
        ApiKey::Produce,
        12,
        &produce_request("hinted", &[(0, idempotent)], -1),
    ));
    assert_eq!(ok.error_code, 0);
    let mut t = TopicRequest::default();
    t.name = support::client::topic_name("hinted");
    t.partition_indexes = vec![0];
    let mut req = DescribeProducersRequest::default();
    req.topics = vec![t];
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let r: DescribeProducersResponse = c.call(ApiKey::DescribeProducers, 0, &req);
        let p = &r.topics[0].partitions[0];
        assert_eq!(p.error_code, 0, "a follower describes its producers");
        if p.active_producers.iter().any(|s| s.producer_id.0 == 4242 && s.last_sequence == 0) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the follower never applied the producer's batch");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// A broker holding no replica of a partition still names its leader (brokers tell each other
/// what they lead), and a replica whose broker is killed shows as offline and out of sync in
/// Metadata until the broker is back.
#[test]
fn every_broker_names_every_leader_and_a_killed_replica_shows_offline() {
    let mut cluster = Cluster::start(3, &["--replica-lag-time-max-ms", "1000"]);
    cluster.create_topic("single", 3, 1);
    cluster.create_topic("triple", 1, 3);
    let partitions = |cluster: &Cluster, node: i32, topic: &str| {
        let mut c = Client::connect(cluster.addr(node));
        let md = c.metadata(Some(&[topic]), false);
        let mut ps = md.topics[0].partitions.clone();
        ps.sort_by_key(|p| p.partition_index);
        ps
    };
    let named = support::client::wait_until(Duration::from_secs(10), || {
        (1..=3).all(|node| {
            partitions(&cluster, node, "single")
                .iter()
                .all(|p| p.replica_nodes.len() == 1 && p.leader_id == p.replica_nodes[0])
        })
    });
    assert!(
        named,
        "every broker names the one replica as leader: {:?}",
        (1..=3).map(|n| partitions(&cluster, n, "single")).collect::<Vec<_>>()
    );

    let leader = cluster.leader("triple", 0).expect("a leader");
    let victim = (1..=3).find(|n| *n != leader).unwrap();
    cluster.kill9(victim);
    let offline = support::client::wait_until(Duration::from_secs(15), || {
        let p = &partitions(&cluster, leader, "triple")[0];
        p.offline_replicas.iter().map(|b| b.0).collect::<Vec<_>>() == vec![victim]
            && !p.isr_nodes.iter().any(|b| b.0 == victim)
    });
    assert!(offline, "the killed replica is offline and out of sync: {:?}", partitions(&cluster, leader, "triple"));
    // The leader's metrics say so too (Kafka's UnderReplicatedPartitions).
    let under_replicated = |cluster: &Cluster| {
        let page = cluster.scrape(leader).expect("the leader's metrics");
        support::broker::metric_sum(&page, "ringbroker_under_replicated_partitions", &[])
    };
    let counted = support::client::wait_until(Duration::from_secs(5), || under_replicated(&cluster) >= 1.0);
    assert!(counted, "the leader counts the partition under-replicated");
    cluster.restart(victim);
    let back = support::client::wait_until(Duration::from_secs(30), || {
        let p = &partitions(&cluster, leader, "triple")[0];
        p.offline_replicas.is_empty() && p.isr_nodes.len() == 3
    });
    assert!(back, "the replica is back in sync: {:?}", partitions(&cluster, leader, "triple"));
    let cleared = support::client::wait_until(Duration::from_secs(5), || under_replicated(&cluster) == 0.0);
    assert!(cleared, "no partition under-replicated once the replica is back");
}

/// Retention trims a replicated topic, and a broker that was down while the leader's log start
/// moved past its log end is sent a raft snapshot when it is back: it starts its log at the
/// leader's start, holds every record after it byte for byte, and can lead the partition.
#[test]
fn retention_trims_a_replicated_topic_and_a_replica_that_missed_it_gets_a_snapshot() {
    use support::client::{batch, value};
    let mut cluster = Cluster::start(3, &["--retention-check-interval-ms", "300", "--replica-lag-time-max-ms", "1000"]);
    let configs = [("segment.bytes", "4096"), ("retention.bytes", "8192")];
    cluster.create_topic_with("trimmed", 1, 3, &configs);
    let leader = cluster.leader("trimmed", 0).expect("a leader");
    let away = (1..=3).find(|n| *n != leader).unwrap();
    let mut c = Client::connect(cluster.addr(leader));
    let mut produced = Vec::new();
    let send = |c: &mut Client, from: usize, n: usize, produced: &mut Vec<(i64, Vec<u8>)>| {
        for i in from..from + n {
            let v = value("trimmed", i, 200);
            let p = c.produce_acks("trimmed", 0, batch(support::client::now_ms(), std::slice::from_ref(&v)), -1);
            assert_eq!(p.error_code, 0, "record {i} acknowledged");
            produced.push((p.base_offset, v));
        }
    };
    send(&mut c, 0, 20, &mut produced);
    cluster.kill9(away);
    send(&mut c, 20, 400, &mut produced);
    // The leader's retention keeps about retention.bytes; it no longer waits for the killed
    // replica once that is out of sync.
    let trimmed = support::client::wait_until(Duration::from_secs(20), || c.earliest("trimmed", 0) > 100);
    let start = c.earliest("trimmed", 0);
    assert!(trimmed, "the log start moved: {start}");
    cluster.restart(away);
    let caught_up =
        support::client::wait_until(Duration::from_secs(30), || cluster.settled("trimmed", 1, Duration::from_secs(1)));
    assert!(caught_up, "the restarted replica is back in sync");
    // It installed the leader's snapshot: its log now starts past everything it held before
    // (20 records), beside the producer state of that start.
    let dir = cluster.data_dir(away).join("trimmed-0");
    let names: Vec<String> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    let first_segment = names.iter().filter_map(|n| n.strip_suffix(".log")?.parse::<i64>().ok()).min();
    assert!(
        first_segment.is_some_and(|b| b >= start),
        "its first segment starts at {first_segment:?}, the leader's start was {start}"
    );
    assert!(names.iter().any(|n| n.starts_with("raft-start-")), "the start's producer state is kept: {names:?}");
    send(&mut c, 420, 5, &mut produced);
    cluster.stop(leader);
    let moved = support::client::wait_until(Duration::from_secs(30), || {
        cluster.leader("trimmed", 0).is_some_and(|l| l != leader)
    });
    assert!(moved, "another replica leads");
    let new = cluster.leader("trimmed", 0).unwrap();
    let mut r = Client::connect(cluster.addr(new));
    let earliest = r.earliest("trimmed", 0);
    assert!(earliest >= start, "the new leader's log starts at {earliest}, at or past the old leader's {start}");
    let records = r.fetch_all("trimmed", 0, earliest);
    let held: Vec<(i64, Vec<u8>)> = produced.iter().filter(|(o, _)| *o >= earliest).cloned().collect();
    // Each new term starts with raft's no-op, a control batch with an empty record (clients
    // skip control batches); every record produced here has a value.
    let read: Vec<(i64, Vec<u8>)> =
        records.iter().filter_map(|rec| rec.value.clone().filter(|v| !v.is_empty()).map(|v| (rec.offset, v))).collect();
    let offsets = |v: &[(i64, Vec<u8>)]| v.iter().map(|(o, _)| *o).collect::<Vec<_>>();
    assert_eq!(
        offsets(&read),
        offsets(&held),
        "every acknowledged record from the log start {earliest} on, once, in order"
    );
    assert!(read == held, "each at its offset");
}

/// Kafka's automatic preferred-leader election: a broker that was killed gets the leadership
/// of the partition it is the preferred replica of back once it is in sync again.
#[test]
fn a_restarted_broker_gets_its_preferred_leaderships_back() {
    let mut cluster = Cluster::start(3, &["--leader-imbalance-check-interval-seconds", "1"]);
    cluster.create_topic("balanced", 3, 3);
    let preferred = |cluster: &Cluster, p: i32| {
        let mut c = Client::connect(cluster.addr((1..=3).find(|n| cluster.is_up(*n)).unwrap()));
        let md = c.metadata(Some(&["balanced"]), false);
        md.topics[0].partitions.iter().find(|x| x.partition_index == p).unwrap().replica_nodes[0].0
    };
    let first = preferred(&cluster, 0);
    let led = support::client::wait_until(Duration::from_secs(20), || cluster.leader("balanced", 0) == Some(first));
    assert!(led, "partition 0 is led by its preferred replica {first}");
    cluster.kill9(first);
    let moved = support::client::wait_until(Duration::from_secs(20), || {
        cluster.leader("balanced", 0).is_some_and(|l| l != first)
    });
    assert!(moved, "another replica leads while broker {first} is down");
    cluster.restart(first);
    let back = support::client::wait_until(Duration::from_secs(30), || cluster.leader("balanced", 0) == Some(first));
    assert!(back, "broker {first} leads partition 0 again, led by {:?}", cluster.leader("balanced", 0));
}

/// A topic deleted and created again under its name while one of its replicas' brokers was
/// down: that broker comes back with the old topic's replica (files, raft state, a catalog
/// that still names it). It must neither serve nor spread the old topic's records: the new
/// topic's replicas, that broker's included, hold only the new records.
#[test]
fn a_topic_created_again_while_a_replica_was_down_holds_only_its_own_records() {
    use support::client::{batch, now_ms};

    let mut cluster = Cluster::start(3, &["--replica-lag-time-max-ms", "1000"]);
    cluster.create_topic("again", 1, 3);
    let leader = cluster.leader("again", 0).expect("a leader");
    let mut c = Client::connect(cluster.addr(leader));
    for i in 0..30 {
        let p = c.produce_acks("again", 0, batch(now_ms(), &[format!("old-{i}").into_bytes()]), -1);
        assert_eq!(p.error_code, 0, "old record {i}");
    }
    // The old topic's leader goes down with the longest log of the highest term it knew.
    cluster.kill9(leader);
    delete_topic(&cluster, "again");
    let created = support::client::wait_until(Duration::from_secs(30), || {
        let Some(controller) = cluster.controller().filter(|c| *c >= 0 && cluster.is_up(*c)) else { return false };
        let mut a = Client::connect(cluster.addr(controller));
        let r = a.create_topics(vec![new_topic("again", 1, 3, &[])], false);
        r.topics.first().is_some_and(|t| t.error_code == 0)
    });
    assert!(created, "the topic is created again");
    let new_leader = support::client::wait_until(Duration::from_secs(30), || cluster.leader("again", 0).is_some());
    assert!(new_leader, "the new topic has a leader");
    let mut n = Client::connect(cluster.addr(cluster.leader("again", 0).unwrap()));
    for i in 0..10 {
        let p = n.produce_acks("again", 0, batch(now_ms(), &[format!("new-{i}").into_bytes()]), -1);
        assert_eq!(p.error_code, 0, "new record {i}");
    }

    cluster.restart(leader);
    assert!(cluster.settled("again", 1, Duration::from_secs(60)), "every replica of the new topic in sync");
    let mut r = Client::connect(cluster.addr(cluster.leader("again", 0).unwrap()));
    let earliest = r.earliest("again", 0);
    let values: Vec<String> = r
        .fetch_all("again", 0, earliest)
        .into_iter()
        .filter_map(|rec| rec.value.filter(|v| !v.is_empty()))
        .map(|v| String::from_utf8_lossy(&v).into_owned())
        .collect();
    assert_eq!(values, (0..10).map(|i| format!("new-{i}")).collect::<Vec<_>>(), "the new topic's records alone");
    // The broker that was down holds the new topic's replica, with none of the old records.
    let dir = cluster.data_dir(leader).join("again-0");
    let id = r.metadata(Some(&["again"]), false).topics[0].topic_id;
    assert_eq!(std::fs::read_to_string(dir.join("topic-id")).unwrap().trim(), id.to_string());
    let held: Vec<u8> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .flat_map(|p| std::fs::read(p).unwrap())
        .collect();
    assert!(!held.windows(4).any(|w| w == b"old-"), "an old record on the restarted broker");
    assert!(held.windows(4).any(|w| w == b"new-"), "the new records on the restarted broker");
}

/// Deletes `topic` at the controller, retrying while it moves.
fn delete_topic(cluster: &Cluster, topic: &str) {
    use ringbroker::protocol::messages::{ApiKey, DeleteTopicsRequest, DeleteTopicsResponse};
    let deleted = support::client::wait_until(Duration::from_secs(30), || {
        let Some(controller) = cluster.controller().filter(|c| *c >= 0 && cluster.is_up(*c)) else { return false };
        let mut req = DeleteTopicsRequest::default();
        req.topic_names = vec![support::client::topic_name(topic)];
        req.timeout_ms = 30_000;
        let r: DeleteTopicsResponse = Client::connect(cluster.addr(controller)).call(ApiKey::DeleteTopics, 4, &req);
        r.responses
            .first()
            .is_some_and(|t| t.error_code == 0 || t.error_code == ErrorCode::UnknownTopicOrPartition.code())
    });
    assert!(deleted, "{topic} is deleted");
}

/// Brokers of two shards each: raft messages for groups homed on shard 1 arrive on shard 0
/// and are handed over; a topic deleted and created again under its name gets partitions on
/// both shards; a broker stopped with SIGTERM hands its leaderships over and exits cleanly.
#[test]
fn brokers_of_two_shards_replicate_every_partition_and_stop_cleanly() {
    use support::client::{batch, now_ms};
    const PARTITIONS: i32 = 4;
    let mut cluster = Cluster::start(3, &["--cpus", "0-1"]);
    let round = |cluster: &Cluster, tag: &str, n: usize| {
        for p in 0..PARTITIONS {
            let leader = cluster.leader("wide", p).expect("a leader");
            let mut c = Client::connect(cluster.addr(leader));
            for i in 0..n {
                let r = c.produce_acks("wide", p, batch(now_ms(), &[format!("{tag}-{p}-{i}").into_bytes()]), -1);
                assert_eq!(r.error_code, 0, "{tag} record {i} of partition {p}");
            }
            let earliest = c.earliest("wide", p);
            let read: Vec<String> = c
                .fetch_all("wide", p, earliest)
                .into_iter()
                .filter_map(|r| r.value.filter(|v| !v.is_empty()))
                .map(|v| String::from_utf8_lossy(&v).into_owned())
                .filter(|v| v.starts_with(tag))
                .collect();
            assert_eq!(read, (0..n).map(|i| format!("{tag}-{p}-{i}")).collect::<Vec<_>>(), "partition {p}");
        }
    };
    cluster.create_topic("wide", PARTITIONS, 3);
    round(&cluster, "first", 20);
    delete_topic(&cluster, "wide");
    cluster.create_topic("wide", PARTITIONS, 3);
    round(&cluster, "second", 5);
    // Nothing of the first topic is left in the second.
    for p in 0..PARTITIONS {
        let mut c = Client::connect(cluster.addr(cluster.leader("wide", p).unwrap()));
        let earliest = c.earliest("wide", p);
        assert_eq!(
            c.fetch_all("wide", p, earliest)
                .iter()
                .filter(|r| r.value.as_deref().is_some_and(|v| v.starts_with(b"first")))
                .count(),
            0
        );
    }

    let leader = cluster.leader("wide", 0).expect("a leader");
    let status = cluster.stop(leader).expect("the broker was running");
    assert!(status.success(), "a SIGTERM stops the broker cleanly: {status:?}");
    let moved = support::client::wait_until(Duration::from_secs(30), || {
        (0..PARTITIONS).all(|p| cluster.leader("wide", p).is_some_and(|l| l != leader))
    });
    assert!(moved, "every partition is led by a running broker");
    round(&cluster, "third", 3);
}

/// A broker that does not coordinate a group answers its group requests NOT_COORDINATOR, as
/// Kafka's does, so that clients look the coordinator up again (Java consumers before 3.9
/// fail an OffsetFetch answered COORDINATOR_NOT_AVAILABLE instead of retrying it); the
/// coordinator answers them.
#[test]
fn group_requests_to_a_broker_that_does_not_coordinate_the_group_are_answered_not_coordinator() {
    use ringbroker::protocol::messages::{
        ApiKey, GroupId, HeartbeatRequest, HeartbeatResponse, OffsetFetchRequest, OffsetFetchResponse,
    };
    let cluster = Cluster::start(3, &[]);
    let group = "wanderers";
    let coordinator = support::client::wait_until(Duration::from_secs(30), || cluster.coordinator(group).is_some())
        .then(|| cluster.coordinator(group))
        .flatten()
        .expect("a coordinator");
    let fetch = |node: i32| -> i16 {
        let mut req = OffsetFetchRequest::default();
        req.group_id = GroupId(support::client::sb(group));
        req.topics = None;
        let r: OffsetFetchResponse = Client::connect(cluster.addr(node)).call(ApiKey::OffsetFetch, 7, &req);
        r.error_code
    };
    // The coordinator may still be loading the group's partition for a moment.
    let served = support::client::wait_until(Duration::from_secs(30), || fetch(coordinator) == 0);
    assert!(served, "the coordinator answers OffsetFetch");
    for other in (1..=3).filter(|n| *n != coordinator) {
        assert_eq!(fetch(other), ErrorCode::NotCoordinator.code(), "OffsetFetch at broker {other}");
        let mut hb = HeartbeatRequest::default();
        hb.group_id = GroupId(support::client::sb(group));
        hb.member_id = support::client::sb("someone");
        hb.generation_id = 1;
        let r: HeartbeatResponse = Client::connect(cluster.addr(other)).call(ApiKey::Heartbeat, 4, &hb);
        assert_eq!(r.error_code, ErrorCode::NotCoordinator.code(), "Heartbeat at broker {other}");
    }
}

/// A broker that lost its data directory comes back empty, while the leaders (of the
/// metadata quorum and of its partitions) still count it as holding what it acknowledged: it
/// must catch up all the same. Records are acknowledged by all three brokers; one broker's
/// directory is wiped and it is restarted; it must start, catch up and, with another broker
/// stopped, acknowledge new records beside the leader; then the leader is killed, and every
/// acknowledged record is read back at its offset from the two that are left.
#[test]
fn a_broker_that_lost_its_data_directory_catches_up_and_nothing_acknowledged_is_lost() {
    use support::client::{batch, value};
    let mut cluster = Cluster::start(3, &["--replica-lag-time-max-ms", "1000"]);
    cluster.create_topic("kept", 1, 3);
    let a = cluster.leader("kept", 0).expect("a leader");
    let (b, c) = {
        let rest: Vec<i32> = (1..=3).filter(|n| *n != a).collect();
        (rest[0], rest[1])
    };
    let mut acked: Vec<(i64, Vec<u8>)> = Vec::new();
    let mut send = |client: &mut Client, from: usize, n: usize| {
        for i in from..from + n {
            let v = value("kept", i, 100);
            let p = client.produce("kept", 0, batch(support::client::now_ms(), std::slice::from_ref(&v)));
            assert_eq!(p.error_code, 0, "record {i} acknowledged");
            acked.push((p.base_offset, v));
        }
    };
    let mut client = Client::connect(cluster.addr(a));
    send(&mut client, 0, 20);
    println!("A={a} B={b} C={c}: C's data directory is wiped");
    cluster.kill9(c);
    std::fs::remove_dir_all(cluster.data_dir(c)).unwrap();
    std::fs::create_dir_all(cluster.data_dir(c)).unwrap();
    cluster.restart(c);
    assert!(cluster.settled("kept", 1, Duration::from_secs(30)), "C is back in sync");
    // With B stopped, acks=all needs C's copy: C holds the log again and acknowledges.
    cluster.freeze(b, true);
    let mut client = Client::connect(cluster.addr(a));
    send(&mut client, 20, 10);
    drop(client);
    cluster.kill9(a);
    cluster.freeze(b, false);
    let elected =
        support::client::wait_until(Duration::from_secs(30), || cluster.leader("kept", 0).is_some_and(|l| l != a));
    assert!(elected, "B or C leads once A is gone");
    let leader = cluster.leader("kept", 0).unwrap();
    let mut client = Client::connect(cluster.addr(leader));
    let serving =
        support::client::wait_until(Duration::from_secs(20), || client.fetch("kept", 0, 0, 1024).error_code == 0);
    assert!(serving, "node {leader} serves the partition");
    let read = client.fetch_all("kept", 0, 0);
    let values: BTreeMap<i64, Vec<u8>> =
        read.into_iter().filter(|r| !r.control).map(|r| (r.offset, r.value.unwrap_or_default())).collect();
    for (offset, v) in &acked {
        assert_eq!(values.get(offset), Some(v), "acknowledged record at offset {offset}");
    }
    assert_eq!(values.len(), acked.len(), "nothing else was written");
}
