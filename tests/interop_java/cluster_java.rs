//! A three-broker cluster under the Java client (tests/java/.../History.java): an idempotent
//! producer (acks=all) over a six-partition, three-replica topic keeps a history of every
//! send while brokers are killed, frozen, restarted or cut off from their peers; after healing, every partition is read back and the
//! history must show nothing lost, duplicated, unexpected or reordered. Replicas are also
//! moved under load with Kafka's own `kafka-reassign-partitions` and `kafka-leader-election`.

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use support::cluster::Cluster;
use support::java;
use support::link::{Fault, Links};

use crate::machine;

const PARTITIONS: i32 = 6;

fn spawn_history(cluster: &Cluster, topic: &str, history: &Path, seconds: u64) -> Child {
    spawn_history_of(cluster, topic, history, seconds, 3)
}

/// `spawn_history` for a topic of `replicas` copies (if the producer creates it).
fn spawn_history_of(cluster: &Cluster, topic: &str, history: &Path, seconds: u64, replicas: i16) -> Child {
    java::command(&[
        "history-produce",
        "--bootstrap",
        &cluster.bootstrap(),
        "--topic",
        topic,
        "--history-file",
        history.to_str().unwrap(),
        "--partitions",
        &PARTITIONS.to_string(),
        "--replicas",
        &replicas.to_string(),
        "--seconds",
        &seconds.to_string(),
    ])
    .stdout(Stdio::inherit())
    .stderr(Stdio::inherit())
    .spawn()
    .expect("start history-produce")
}

fn wait_exit(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(st) = child.try_wait().expect("wait for the producer") {
            return st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the producer did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// What history-verify counted.
struct Counts {
    acked: u64,
    failed: usize,
}

fn verify(cluster: &Cluster, topic: &str, history: &Path) -> Counts {
    assert!(
        cluster.settled(topic, PARTITIONS, Duration::from_secs(60)),
        "every broker agrees on the leaders and every replica is in sync again"
    );
    let out = java::command(&[
        "history-verify",
        "--bootstrap",
        &cluster.bootstrap(),
        "--topic",
        topic,
        "--history-file",
        history.to_str().unwrap(),
    ])
    .output()
    .expect("run history-verify");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    let line = stdout.lines().find(|l| l.starts_with("history:")).expect("a history line");
    assert!(out.status.success(), "{line}");
    assert!(line.contains("lost 0, duplicated 0, unexpected 0, reordered 0"), "{line}");
    let acked: u64 =
        line.split("acknowledged ").nth(1).and_then(|s| s.split(',').next()).and_then(|n| n.parse().ok()).unwrap();
    assert!(acked > 1000, "the producer got going between the faults: {line}");
    let text = std::fs::read_to_string(history).unwrap();
    Counts { acked, failed: text.lines().filter(|l| l.starts_with("fail ")).count() }
}

/// The bytes of a partition's log on one broker: its segment files in order.
fn log_bytes(dir: &Path, topic: &str, partition: i32) -> Vec<u8> {
    let dir = dir.join(format!("{topic}-{partition}"));
    let mut segments: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    segments.sort();
    segments.iter().flat_map(|p| std::fs::read(p).unwrap()).collect()
}

/// Test 1 of the cluster: every 10 s the leader of a partition, or the controller, is killed
/// with SIGKILL and restarted 5 s later, under an idempotent acks=all producer.
#[test]
fn java_idempotent_producer_loses_nothing_when_leaders_are_killed() {
    let _machine = machine::alone();
    java::classpath();
    let mut cluster = Cluster::start(3, &["--flush", "always"]);
    let work = tempfile::tempdir().unwrap();
    let history = work.path().join("history.txt");
    let topic = "cluster-kill9";
    let mut producer = spawn_history(&cluster, topic, &history, 45);
    std::thread::sleep(Duration::from_secs(8));
    for round in 0..3 {
        let victim = match round % 2 {
            0 => cluster.leader(topic, round).expect("the partition has a leader"),
            _ => cluster.controller().expect("the quorum has a controller"),
        };
        println!("round {round}: SIGKILL of node {victim}");
        cluster.kill9(victim);
        std::thread::sleep(Duration::from_secs(5));
        cluster.restart(victim);
        println!("round {round}: node {victim} is back");
        std::thread::sleep(Duration::from_secs(5));
    }
    let status = wait_exit(&mut producer, Duration::from_secs(150));
    assert!(status.success(), "history-produce failed: {status}");
    verify(&cluster, topic, &history);
}

/// Test 2: the leader of a partition is stopped (SIGSTOP) for longer than the election
/// timeout, twice, then continued: its partitions move, and when it wakes it follows the new
/// leader and drops what it wrote that was not committed.
#[test]
fn java_idempotent_producer_loses_nothing_when_a_leader_is_frozen() {
    let _machine = machine::alone();
    java::classpath();
    let cluster = Cluster::start(3, &["--flush", "always"]);
    let work = tempfile::tempdir().unwrap();
    let history = work.path().join("history.txt");
    let topic = "cluster-sigstop";
    let mut producer = spawn_history(&cluster, topic, &history, 35);
    std::thread::sleep(Duration::from_secs(8));
    for round in 0..2 {
        let victim = cluster.leader(topic, round).expect("the partition has a leader");
        println!("round {round}: SIGSTOP of node {victim}");
        cluster.freeze(victim, true);
        std::thread::sleep(Duration::from_secs(6));
        cluster.freeze(victim, false);
        println!("round {round}: SIGCONT of node {victim}");
        std::thread::sleep(Duration::from_secs(6));
    }
    let status = wait_exit(&mut producer, Duration::from_secs(150));
    assert!(status.success(), "history-produce failed: {status}");
    verify(&cluster, topic, &history);
}

/// Tests 7 and 9: a rolling restart with SIGTERM under load, each broker handing its
/// leaderships over before it stops, shows the producer only retriable errors (none reach
/// the application); after a clean stop of all, every replica's log is byte-identical but
/// for raft's own entries written after the first broker stopped.
#[test]
fn a_rolling_restart_shows_no_errors_and_leaves_identical_replicas() {
    let _machine = machine::alone();
    java::classpath();
    let mut cluster = Cluster::start(3, &["--flush", "always"]);
    let work = tempfile::tempdir().unwrap();
    let history = work.path().join("history.txt");
    let topic = "cluster-rolling";
    let mut producer = spawn_history(&cluster, topic, &history, 40);
    std::thread::sleep(Duration::from_secs(8));
    for node in 1..=3 {
        println!("SIGTERM of node {node}");
        let status = cluster.stop(node).expect("it was running");
        assert!(status.success(), "node {node} stopped cleanly: {status}");
        cluster.restart(node);
        println!("node {node} is back");
        std::thread::sleep(Duration::from_secs(4));
    }
    let status = wait_exit(&mut producer, Duration::from_secs(150));
    assert!(status.success(), "history-produce failed: {status}");
    let counts = verify(&cluster, topic, &history);
    assert_eq!(counts.failed, 0, "of {} sends none failed", counts.acked);
    for node in 1..=3 {
        let status = cluster.stop(node).expect("it was running");
        assert!(status.success(), "node {node} stopped cleanly: {status}");
    }
    for p in 0..PARTITIONS {
        let logs: Vec<Vec<u8>> = (1..=3).map(|n| log_bytes(cluster.data_dir(n), topic, p)).collect();
        assert!(logs[0].len() > 1000, "partition {p} has data");
        // The brokers stopped one after the other: those that stopped later may hold raft's
        // entries of the elections after, control batches only. Everything else is the same.
        let shortest = logs.iter().map(Vec::len).min().unwrap();
        for (i, log) in logs.iter().enumerate() {
            assert!(log[..shortest] == logs[0][..shortest], "partition {p}: node {} differs from node 1", i + 1);
            assert!(only_control_batches(&log[shortest..]), "partition {p}: node {} holds more data", i + 1);
        }
    }
}

/// Whether `bytes` are whole record batches, each a control batch (attributes bit 5).
fn only_control_batches(mut bytes: &[u8]) -> bool {
    while !bytes.is_empty() {
        if bytes.len() < 23 {
            return false;
        }
        let len = 12 + u32::from_be_bytes(bytes[8..12].try_into().unwrap()) as usize;
        let attributes = u16::from_be_bytes(bytes[21..23].try_into().unwrap());
        if attributes & 0x20 == 0 || bytes.len() < len {
            return false;
        }
        bytes = &bytes[len..];
    }
    true
}

/// Test 4: the leader of a partition is cut off from its peers, not from its clients, by
/// the proxies on the broker-to-broker links: first a black hole, then dropped links, then
/// slow ones. The minority side acknowledges nothing that is later missing, and once healed
/// every replica agrees again.
#[test]
fn a_leader_cut_off_from_its_peers_acknowledges_nothing_that_is_lost() {
    let _machine = machine::alone();
    java::classpath();
    let links = Links::default();
    let cluster = Cluster::start_linked(3, &["--flush", "always"], Some(&links));
    let work = tempfile::tempdir().unwrap();
    let history = work.path().join("history.txt");
    let topic = "cluster-partitioned";
    let mut producer = spawn_history(&cluster, topic, &history, 40);
    std::thread::sleep(Duration::from_secs(8));
    let faults = [Fault::BlackHole, Fault::Drop, Fault::Delay(Duration::from_millis(300))];
    for (round, fault) in faults.into_iter().enumerate() {
        let victim = cluster.leader(topic, round as i32).expect("the partition has a leader");
        println!("round {round}: node {victim} cut off from its peers: {fault:?}");
        links.cut(victim, fault);
        std::thread::sleep(Duration::from_secs(6));
        links.heal();
        println!("round {round}: healed");
        std::thread::sleep(Duration::from_secs(4));
    }
    let status = wait_exit(&mut producer, Duration::from_secs(150));
    assert!(status.success(), "history-produce failed: {status}");
    verify(&cluster, topic, &history);
}

const REASSIGN: &str = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand";
const ELECT: &str = "org.apache.kafka.tools.LeaderElectionCommand";

/// Runs Kafka's reassignment tool with a plan of (partition, target replicas) for `topic`:
/// `--execute`, then `--verify` until every move is reported complete.
fn reassign(cluster: &Cluster, topic: &str, plan: &[(i32, Vec<i32>)], dir: &Path) {
    reassign_with(cluster, topic, plan, dir, &[], Duration::from_secs(60));
}

/// `reassign` with `extra` arguments to `--execute`, allowed `limit` to finish; returns what
/// `--execute` and the last `--verify` printed.
fn reassign_with(
    cluster: &Cluster,
    topic: &str,
    plan: &[(i32, Vec<i32>)],
    dir: &Path,
    extra: &[&str],
    limit: Duration,
) -> (String, String) {
    let moves: Vec<String> = plan
        .iter()
        .map(|(p, r)| {
            let replicas: Vec<String> = r.iter().map(i32::to_string).collect();
            format!(r#"{{"topic":"{topic}","partition":{p},"replicas":[{}]}}"#, replicas.join(","))
        })
        .collect();
    let file = dir.join("reassignment.json");
    std::fs::write(&file, format!(r#"{{"version":1,"partitions":[{}]}}"#, moves.join(","))).unwrap();
    let file = file.to_str().unwrap();
    let bootstrap = cluster.bootstrap();
    let run = |action: &str, extra: &[&str]| {
        let mut args = vec!["--bootstrap-server", &bootstrap, "--reassignment-json-file", file, action];
        args.extend_from_slice(extra);
        let out = java::tool(REASSIGN, &args).output().expect("run kafka-reassign-partitions");
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "kafka-reassign-partitions {action}:\n{text}");
        text
    };
    let started = run("--execute", extra);
    assert!(started.contains("Successfully started partition reassignment"), "{started}");
    let deadline = Instant::now() + limit;
    loop {
        let verified = run("--verify", &[]);
        let done =
            plan.iter().all(|(p, _)| verified.contains(&format!("Reassignment of partition {topic}-{p} is completed")));
        if done {
            println!("{verified}");
            return (started, verified);
        }
        assert!(Instant::now() < deadline, "the reassignment did not finish in {limit:?}:\n{verified}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// `kafka-reassign-partitions --throttle`: the tool sets both replication rates on the
/// brokers the move involves and the throttled-replica lists on the topic. The new replica
/// then catches up at the rate: 8 MiB at 512 KiB/s takes some 15 s (a second's worth goes
/// at once), where the same move unthrottled takes well under a second. `--verify` clears
/// the throttle once the move is done, and the rates and lists are gone.
#[test]
fn a_throttled_reassignment_catches_up_at_the_rate_and_verify_clears_the_throttle() {
    use crate::admin_tools::{describe_configs, BROKER, TOPIC};
    use ringbroker::protocol::messages::create_topics_request::CreatableReplicaAssignment;
    use ringbroker::protocol::messages::BrokerId;
    use support::client::{batch, new_topic, value, Client};

    let _machine = machine::alone();
    java::classpath();
    let cluster = Cluster::start(3, &["--flush", "os"]);
    let work = tempfile::tempdir().unwrap();
    let topic = "cluster-throttled";
    let mut c = Client::connect(cluster.addr(1));
    let mut t = new_topic(topic, 1, -1, &[]);
    let mut one = CreatableReplicaAssignment::default();
    one.partition_index = 0;
    one.broker_ids = vec![BrokerId(1)];
    t.assignments = vec![one];
    t.num_partitions = -1;
    let made = c.create_topics(vec![t], false);
    assert_eq!(made.topics[0].error_code, 0, "{:?}", made.topics[0].error_message);
    assert!(cluster.settled(topic, 1, Duration::from_secs(30)), "the topic has its leader");
    let mut leader = Client::connect(cluster.addr(1));
    for i in 0..64 {
        let records: Vec<Vec<u8>> = (0..4).map(|j| value("throttled", i * 4 + j, 32 << 10)).collect();
        leader.produce_ok(topic, 0, batch(support::client::now_ms(), &records));
    }

    let rate = 512 << 10;
    let begun = Instant::now();
    let plan = [(0, vec![1, 2])];
    let throttle = rate.to_string();
    let (started, verified) =
        reassign_with(&cluster, topic, &plan, work.path(), &["--throttle", &throttle], Duration::from_secs(120));
    let took = begun.elapsed();
    println!("8 MiB caught up in {took:?} at a throttle of {rate} B/s");
    assert!(started.contains(&format!("throttle limit was set to {rate} B/s")), "{started}");
    assert!(took >= Duration::from_secs(10), "8 MiB at {rate} B/s cannot catch up in {took:?}");
    assert!(verified.contains("throttles on broker"), "{verified}");
    assert_eq!(placement(&cluster, topic)[0].0, vec![1, 2]);
    // The leader counted what it sent under the throttle: the 8 MiB the new replica took.
    let page = cluster.scrape(1).expect("node 1's metrics");
    let sent = support::broker::metric_sum(&page, "ringbroker_replication_throttled_bytes_total", &[]);
    assert!(sent >= (8 << 20) as f64, "{sent} bytes sent under the throttle");

    // Cleared: the rates are back at Kafka's default, the lists gone from the topic.
    for node in [1, 2] {
        let mut c = Client::connect(cluster.addr(node));
        let shown = describe_configs(&mut c, BROKER, &node.to_string());
        let rate = &shown["leader.replication.throttled.rate"];
        assert_eq!(rate.0, i64::MAX.to_string(), "node {node}: {rate:?}");
        assert_eq!(shown["follower.replication.throttled.rate"].0, i64::MAX.to_string(), "node {node}");
    }
    let shown = describe_configs(&mut c, TOPIC, topic);
    assert_eq!(shown["leader.replication.throttled.replicas"].0, "");
    assert_eq!(shown["follower.replication.throttled.replicas"].0, "");
    // Everything made it across: the new replica's log holds the 8 MiB.
    let dir = cluster.data_dir(2).join(format!("{topic}-0"));
    let held = support::broker::log_bytes(&dir);
    assert!(held >= 8 << 20, "{} holds {held} bytes of log", dir.display());
}

/// Each partition's replicas and leader, as a running broker's Metadata shows them.
fn placement(cluster: &Cluster, topic: &str) -> Vec<(Vec<i32>, i32)> {
    let node = (1..=cluster.len() as i32).find(|n| cluster.is_up(*n)).unwrap();
    let mut c = support::client::Client::connect(cluster.addr(node));
    let md = c.metadata(Some(&[topic]), false);
    let mut parts = md.topics[0].partitions.clone();
    parts.sort_by_key(|p| p.partition_index);
    parts.iter().map(|p| (p.replica_nodes.iter().map(|b| b.0).collect(), p.leader_id.0)).collect()
}

/// Test 8: under an idempotent acks=all producer, Kafka's tools move replicas: partition 0
/// from {1,2} to {2,3}, partition 1 shrunk to one replica and grown back to three, partition
/// 2's preferred leader swapped; then `kafka-leader-election --election-type PREFERRED`
/// puts every partition's leadership on its first replica. Nothing is lost or duplicated.
#[test]
fn reassignments_and_preferred_elections_under_load_lose_nothing() {
    let _machine = machine::alone();
    java::classpath();
    let cluster = Cluster::start(3, &["--flush", "always"]);
    let work = tempfile::tempdir().unwrap();
    let history = work.path().join("history.txt");
    let topic = "cluster-reassign";
    let mut producer = spawn_history_of(&cluster, topic, &history, 45, 2);
    assert!(cluster.settled(topic, PARTITIONS, Duration::from_secs(30)), "the producer created the topic");
    let before = placement(&cluster, topic);
    println!("before: {before:?}");
    std::thread::sleep(Duration::from_secs(5));

    // Moves: partition 0 to {2,3} (whatever it had), partition 1 down to one replica.
    let p1_keep = before[1].0[0];
    reassign(&cluster, topic, &[(0, vec![2, 3]), (1, vec![p1_keep])], work.path());
    let after = placement(&cluster, topic);
    assert_eq!((after[0].0.clone(), after[1].0.clone()), (vec![2, 3], vec![p1_keep]), "{after:?}");

    // Growth back to three copies, and partition 2's preferred leader swapped.
    let others: Vec<i32> = (1..=3).filter(|n| *n != p1_keep).collect();
    let swapped: Vec<i32> = before[2].0.iter().rev().copied().collect();
    reassign(&cluster, topic, &[(1, vec![p1_keep, others[0], others[1]]), (2, swapped.clone())], work.path());
    let after = placement(&cluster, topic);
    assert_eq!(after[1].0.len(), 3, "{after:?}");
    assert_eq!(after[2].0, swapped, "{after:?}");

    let out = java::tool(
        ELECT,
        &["--bootstrap-server", &cluster.bootstrap(), "--election-type", "PREFERRED", "--all-topic-partitions"],
    )
    .output()
    .expect("run kafka-leader-election");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    println!("{text}");
    assert!(out.status.success(), "kafka-leader-election:\n{text}");
    let elected = support::client::wait_until(Duration::from_secs(30), || {
        placement(&cluster, topic).iter().all(|(replicas, leader)| replicas.first() == Some(leader))
    });
    assert!(elected, "every partition is led by its preferred replica: {:?}", placement(&cluster, topic));

    let status = wait_exit(&mut producer, Duration::from_secs(150));
    assert!(status.success(), "history-produce failed: {status}");
    verify(&cluster, topic, &history);
    // The replicas that left were deleted where they were.
    let gone = |node: i32, p: i32| !cluster.data_dir(node).join(format!("{topic}-{p}")).exists();
    assert!(
        before[0].0.iter().filter(|n| !after[0].0.contains(n)).all(|n| gone(*n, 0)),
        "partition 0's old replica is deleted"
    );
}
