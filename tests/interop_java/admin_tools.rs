//! Kafka's own admin tools (kafka-tools and kafka_2.13 4.1, on the Java harness's classpath,
//! run as `java -cp … <MainClass>` like Kafka's `bin/*.sh` scripts), the Java Admin client and
//! the legacy AlterConfigs request against the real broker, each checked against what clients
//! and the data directory then show:
//!
//! - `kafka-topics --alter --partitions` grows a topic: `--describe` lists the new partitions,
//!   a producer started before the change writes to them after a metadata refresh, a group
//!   reads them all; a smaller or equal count is INVALID_PARTITIONS;
//! - `kafka-delete-records` moves the log start: `kafka-get-offsets --time -2` answers it, a
//!   consumer (and a raw Fetch) below it gets OFFSET_OUT_OF_RANGE, segment files wholly below it
//!   leave the data directory, and the start survives a restart;
//! - `kafka-log-dirs --describe` reports the data directory and each partition's size, equal to
//!   its `.log` files on disk;
//! - `kafka-configs` on the broker's log levels (`--entity-type broker-loggers`);
//! - `kafka-configs` on topics, on the cluster-wide and this broker's dynamic defaults (which
//!   topics then use, retention included, and which survive a restart), and on client quotas of
//!   users, client-ids and their defaults (a producer's quota throttles it at once, survives a
//!   restart and goes with its deletion), and SCRAM credentials listed with the users;
//! - legacy AlterConfigs (raw requests at v0–v2 and kafka-python's legacy path) replaces a
//!   resource's dynamic configs;
//! - `kafka-transactions describe-producers` lists the idempotent producers of a partition;
//! - the Java Admin client's createPartitions, deleteRecords, describeLogDirs,
//!   incrementalAlterConfigs (SET, DELETE, APPEND, SUBTRACT on topics and brokers),
//!   alterClientQuotas / describeClientQuotas and describeProducers.
//!
//! Where Kafka 4.4 answers differently (messages, configs Ringbroker does not implement) the
//! assertions check Ringbroker's answer and say so.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use ringbroker::protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
use ringbroker::protocol::messages::describe_configs_request::DescribeConfigsResource;
use ringbroker::protocol::messages::{
    AlterConfigsRequest, AlterConfigsResponse, ApiKey, DescribeConfigsRequest, DescribeConfigsResponse,
};
use ringbroker::protocol::ErrorCode;
use support::client::{batch, now_ms, sb, value, Client};
use support::java;
use support::Broker;

use crate::machine;

const TOPICS: &str = "org.apache.kafka.tools.TopicCommand";
const DELETE_RECORDS: &str = "org.apache.kafka.tools.DeleteRecordsCommand";
const GET_OFFSETS: &str = "org.apache.kafka.tools.GetOffsetShell";
const LOG_DIRS: &str = "org.apache.kafka.tools.LogDirsCommand";
const TRANSACTIONS: &str = "org.apache.kafka.tools.TransactionsCommand";
/// `bin/kafka-configs.sh` in Kafka 4.1 (still Scala, in kafka_2.13).
const CONFIGS: &str = "kafka.admin.ConfigCommand";

/// DescribeConfigs / AlterConfigs resource types and config sources.
pub(crate) const TOPIC: i8 = 2;
pub(crate) const BROKER: i8 = 4;
const SOURCE_TOPIC: i8 = 1;
const SOURCE_DEFAULT: i8 = 5;

/// A finished tool run: its exit status and output.
struct Run {
    ok: bool,
    stdout: String,
    all: String,
}

/// Runs Kafka tool `class` with `--bootstrap-server B` and `args`.
fn tool(class: &str, bootstrap: &str, args: &[&str]) -> Run {
    let mut full = vec!["--bootstrap-server", bootstrap];
    full.extend_from_slice(args);
    let out = java::tool(class, &full).output().expect("spawn java");
    let short = class.rsplit('.').next().unwrap_or(class);
    java::print_output(&format!("{short} {}", args.join(" ")), &out);
    run_of(out)
}

fn run_of(out: Output) -> Run {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let all = format!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    Run { ok: out.status.success(), stdout, all }
}

/// Runs a tool that must succeed; its stdout.
fn ok(class: &str, bootstrap: &str, args: &[&str]) -> String {
    let r = tool(class, bootstrap, args);
    assert!(r.ok, "{class} {args:?} failed:\n{}", r.all);
    r.stdout
}

/// Runs a tool that must fail, with output containing each of `wanted`.
fn fails(class: &str, bootstrap: &str, args: &[&str], wanted: &[&str]) {
    let r = tool(class, bootstrap, args);
    assert!(!r.ok, "{class} {args:?} should fail:\n{}", r.all);
    for w in wanted {
        assert!(r.all.contains(w), "{class} {args:?} should say {w:?}:\n{}", r.all);
    }
}

/// A harness subcommand that must succeed; its stdout lines.
fn harness(args: &[&str]) -> Vec<String> {
    let out = java::run(args);
    assert!(out.status.success(), "harness {args:?} failed:\n{}", java::tail(&out, 40));
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect()
}

/// `kafka-configs --describe` lines for one entity, without the header: `key=value` of each
/// config (the rest of the line, sensitivity and synonyms, is dropped).
fn described(bootstrap: &str, entity: &[&str]) -> BTreeMap<String, String> {
    let mut args = vec!["--describe"];
    args.extend_from_slice(entity);
    ok(CONFIGS, bootstrap, &args)
        .lines()
        .filter(|l| l.starts_with("  "))
        .map(|l| {
            let kv = l.trim().split(' ').next().unwrap_or_default();
            let (k, v) = kv.split_once('=').unwrap_or_else(|| panic!("a key=value line: {l:?}"));
            (k.to_string(), v.to_string())
        })
        .collect()
}

/// The line `kafka-configs --describe --all` prints for `key` of a topic: `key=value
/// sensitive=false synonyms={SOURCE:name=value, ...}`.
fn topic_config_line(bootstrap: &str, topic: &str, key: &str) -> String {
    let out = ok(CONFIGS, bootstrap, &["--describe", "--all", "--entity-type", "topics", "--entity-name", topic]);
    let prefix = format!("  {key}=");
    out.lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no {key} in --describe --all of {topic}:\n{out}"))
        .trim()
        .to_string()
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// The `.log` segment files of a partition: (base offset, size), by base offset.
fn segments(data_dir: &Path, topic: &str, partition: i32) -> Vec<(i64, u64)> {
    let dir = data_dir.join(format!("{topic}-{partition}"));
    let mut v: Vec<(i64, u64)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let base = name.strip_suffix(".log")?.parse().ok()?;
            Some((base, e.metadata().ok()?.len()))
        })
        .collect();
    v.sort();
    v
}

fn log_bytes(data_dir: &Path, topic: &str, partition: i32) -> u64 {
    segments(data_dir, topic, partition).iter().map(|s| s.1).sum()
}

/// Writes `batches` batches of 5 records of about 100 bytes each to a partition.
fn fill(c: &mut Client, topic: &str, partition: i32, batches: usize, ts: i64) {
    for i in 0..batches {
        let values: Vec<Vec<u8>> = (0..5).map(|j| value(topic, i * 5 + j, 100)).collect();
        c.produce_ok(topic, partition, batch(ts, &values));
    }
}

fn wait_for(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < deadline, "{what} within {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

// ---------------------------------------------------------------------------------------------
// kafka-topics --alter --partitions
// ---------------------------------------------------------------------------------------------

#[test]
fn topics_tool_adds_partitions_that_producers_and_groups_then_use() {
    let _machine = machine::shared();
    java::classpath();
    let broker = Broker::start_args(&["--flush", "os", "--group-initial-rebalance-delay-ms", "0"]);
    let b = broker.bootstrap();
    assert!(ok(TOPICS, &b, &["--create", "--topic", "grow", "--partitions", "2"]).contains("Created topic grow."));

    // A producer that knows the topic with 2 partitions writes to them, then waits.
    let mut producer = java::command(&[
        "partition-produce",
        "--bootstrap",
        &b,
        "--topic",
        "grow",
        "--records",
        "20",
        "--gate",
        "--partitions",
        "5",
    ])
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::inherit())
    .spawn()
    .expect("spawn the producer");
    let mut lines = BufReader::new(producer.stdout.take().unwrap()).lines();
    let first = lines.next().expect("the producer's first line").unwrap();
    assert_eq!(first, "WAITING partitions=2");

    let out = ok(TOPICS, &b, &["--alter", "--topic", "grow", "--partitions", "5"]);
    assert!(out.trim().is_empty(), "--alter prints nothing on success: {out}");
    let described = ok(TOPICS, &b, &["--describe", "--topic", "grow"]);
    assert!(described.contains("PartitionCount: 5\tReplicationFactor: 1"), "{described}");
    for p in 0..5 {
        let row = format!("Topic: grow\tPartition: {p}\tLeader: 0\tReplicas: 0\tIsr: 0");
        assert!(described.contains(&row), "--describe should show partition {p} led by broker 0:\n{described}");
    }

    // It finds the new partitions at a metadata refresh and writes to all five.
    producer.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let rest: Vec<String> = lines.map(|l| l.unwrap()).collect();
    assert!(producer.wait().unwrap().success(), "the producer failed: {rest:?}");
    assert_eq!(
        rest,
        [
            "SEES partitions=5",
            "ACKED 0 40 40",
            "ACKED 1 40 40",
            "ACKED 2 20 20",
            "ACKED 3 20 20",
            "ACKED 4 20 20",
            "DONE 140"
        ],
        "records per partition (count, next offset)"
    );

    // A consumer group reads every record of every partition.
    let read = harness(&["group-read", "--bootstrap", &b, "--topic", "grow", "--group", "grow-g", "--records", "140"]);
    assert_eq!(read, ["READ 0 40", "READ 1 40", "READ 2 20", "READ 3 20", "READ 4 20", "TOTAL 140"]);

    // No shrinking, and the same count is no change (Kafka 4.4 words these "The topic grow
    // currently has 5 partition(s); 3 would not be an increase." and "Topic already has 5
    // partition(s).").
    fails(
        TOPICS,
        &b,
        &["--alter", "--topic", "grow", "--partitions", "3"],
        &["InvalidPartitionsException", "higher than the requested 3"],
    );
    fails(
        TOPICS,
        &b,
        &["--alter", "--topic", "grow", "--partitions", "5"],
        &["InvalidPartitionsException", "already has 5 partitions"],
    );
    fails(TOPICS, &b, &["--alter", "--topic", "nope", "--partitions", "5"], &["Topic 'nope' does not exist"]);
    assert!(ok(TOPICS, &b, &["--describe", "--topic", "grow"]).contains("PartitionCount: 5"));
}

// ---------------------------------------------------------------------------------------------
// kafka-delete-records, kafka-get-offsets
// ---------------------------------------------------------------------------------------------

#[test]
fn delete_records_tool_moves_the_log_start_and_drops_whole_segments() {
    let _machine = machine::shared();
    java::classpath();
    let mut broker = Broker::start_args(&["--flush", "os"]);
    let tmp = broker.take_tempdir().unwrap();
    let b = broker.bootstrap();
    let mut c = Client::connect(broker.addr);
    // 1 KiB segments: about two batches each.
    c.create_topic("trim", 2, &[("segment.bytes", "1024")]);
    fill(&mut c, "trim", 0, 60, now_ms());
    fill(&mut c, "trim", 1, 10, now_ms());
    let before = segments(&broker.data_dir, "trim", 0);
    assert!(before.len() > 20, "60 batches in 1 KiB segments: {before:?}");

    let dir = tempfile::tempdir().unwrap();
    let offsets = |p0: i64, p1: i64| {
        let f = dir.path().join(format!("offsets-{p0}-{p1}.json"));
        let json = format!(
            r#"{{"version":1,"partitions":[{{"topic":"trim","partition":0,"offset":{p0}}},{{"topic":"trim","partition":1,"offset":{p1}}}]}}"#
        );
        std::fs::write(&f, json).unwrap();
        f.display().to_string()
    };
    let out = ok(DELETE_RECORDS, &b, &["--offset-json-file", &offsets(150, -1)]);
    assert!(out.contains("partition: trim-0\tlow_watermark: 150"), "{out}");
    // -1: up to the high watermark.
    assert!(out.contains("partition: trim-1\tlow_watermark: 50"), "{out}");

    let earliest = |b: &str| -> BTreeSet<String> {
        ok(GET_OFFSETS, b, &["--topic", "trim", "--time", "-2"]).lines().map(str::to_string).collect()
    };
    let want: BTreeSet<String> = ["trim:0:150".to_string(), "trim:1:50".to_string()].into();
    assert_eq!(earliest(&b), want, "kafka-get-offsets --time -2");
    let latest: BTreeSet<String> =
        ok(GET_OFFSETS, &b, &["--topic", "trim", "--time", "-1"]).lines().map(str::to_string).collect();
    assert_eq!(latest, ["trim:0:300".to_string(), "trim:1:50".to_string()].into(), "the log ends do not move");

    // Below the start: a consumer that may not reset is refused, a raw Fetch too.
    let at = |offset: &str| {
        harness(&["read-at", "--bootstrap", &b, "--topic", "trim", "--partition", "0", "--offset", offset])
    };
    assert_eq!(at("10"), ["OUT_OF_RANGE 10"]);
    assert_eq!(at("150"), ["FIRST 150"]);
    assert_eq!(
        c.fetch("trim", 0, 10, 1 << 20).error_code,
        ErrorCode::OffsetOutOfRange.code(),
        "Fetch below the log start"
    );

    // Segments wholly below offset 150 are gone; the one holding 150 stays.
    let after = segments(&broker.data_dir, "trim", 0);
    assert!(after[0].0 <= 150 && after.get(1).is_none_or(|s| s.0 > 150), "first segments now {after:?}");
    let gone = before.iter().filter(|s| s.0 < after[0].0).count();
    assert_eq!(after.len(), before.len() - gone, "only the segments below the start go: {before:?} → {after:?}");
    assert!(gone >= 10, "{gone} segment files deleted");

    // Past the high watermark: OFFSET_OUT_OF_RANGE for that partition.
    let out = ok(DELETE_RECORDS, &b, &["--offset-json-file", &offsets(1000, 50)]);
    assert!(
        out.contains("partition: trim-0\terror: org.apache.kafka.common.errors.OffsetOutOfRangeException"),
        "{out}"
    );
    assert!(out.contains("partition: trim-1\tlow_watermark: 50"), "{out}");

    // The log start is durable.
    drop(c);
    broker.stop();
    let listen = broker.addr.to_string();
    let broker = support::restart(tmp.path(), &listen, &["--flush", "os"]);
    assert_eq!(earliest(&broker.bootstrap()), want, "kafka-get-offsets --time -2 after a restart");
    let mut c = Client::connect(broker.addr);
    assert_eq!(c.earliest("trim", 0), 150);
    assert_eq!(
        c.fetch("trim", 0, 149, 1 << 20).error_code,
        ErrorCode::OffsetOutOfRange.code(),
        "still out of range after a restart"
    );
}

/// The same tool on a three-broker cluster, the topic replicated three times: the admin client
/// sends each partition's deletion to its leader, every replica's log start moves (a new
/// leader answers the same start), and each broker deletes the segments below it.
#[test]
fn delete_records_tool_moves_the_log_start_of_every_replica() {
    let _machine = machine::alone();
    java::classpath();
    let mut cluster = support::cluster::Cluster::start(3, &["--retention-check-interval-ms", "300"]);
    cluster.create_topic_with("trim3", 2, 3, &[("segment.bytes", "1024")]);
    let b = cluster.bootstrap();
    let leader = cluster.leader("trim3", 0).expect("a leader");
    let mut c = Client::connect(cluster.addr(leader));
    fill(&mut c, "trim3", 0, 60, now_ms());
    let end = c.latest("trim3", 0);
    let target = end / 2;
    let other = cluster.leader("trim3", 1).expect("a leader");
    let mut c1 = Client::connect(cluster.addr(other));
    fill(&mut c1, "trim3", 1, 10, now_ms());
    let end1 = c1.latest("trim3", 1);

    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("offsets.json");
    let json = format!(
        r#"{{"version":1,"partitions":[{{"topic":"trim3","partition":0,"offset":{target}}},{{"topic":"trim3","partition":1,"offset":-1}}]}}"#
    );
    std::fs::write(&f, json).unwrap();
    let out = ok(DELETE_RECORDS, &b, &["--offset-json-file", &f.display().to_string()]);
    assert!(out.contains(&format!("partition: trim3-0\tlow_watermark: {target}")), "{out}");
    assert!(out.contains(&format!("partition: trim3-1\tlow_watermark: {end1}")), "{out}");
    let earliest = |b: &str| -> BTreeSet<String> {
        ok(GET_OFFSETS, b, &["--topic", "trim3", "--time", "-2"]).lines().map(str::to_string).collect()
    };
    let want: BTreeSet<String> = [format!("trim3:0:{target}"), format!("trim3:1:{end1}")].into();
    assert_eq!(earliest(&b), want, "kafka-get-offsets --time -2");

    // Every broker drops its segments wholly below the start (the one holding it stays).
    for node in 1..=3 {
        wait_for(&format!("broker {node} deleting segments below {target}"), Duration::from_secs(20), || {
            let segs = segments(cluster.data_dir(node), "trim3", 0);
            segs[0].0 > 0 && segs[0].0 <= target && segs.get(1).is_none_or(|s| s.0 > target)
        });
    }
    // The leader goes: the next one answers the same start and refuses a fetch below it.
    cluster.kill9(leader);
    wait_for("another leader of trim3-0", Duration::from_secs(30), || {
        cluster.leader("trim3", 0).is_some_and(|l| l != leader)
    });
    let next = cluster.leader("trim3", 0).unwrap();
    let mut n = Client::connect(cluster.addr(next));
    assert_eq!(n.earliest("trim3", 0), target, "the new leader's log start");
    assert_eq!(n.fetch("trim3", 0, target - 1, 1 << 20).error_code, ErrorCode::OffsetOutOfRange.code());
    let at = harness(&["read-at", "--bootstrap", &b, "--topic", "trim3", "--partition", "0", "--offset", "1"]);
    assert_eq!(at, ["OUT_OF_RANGE 1"]);
    cluster.restart(leader);
    assert!(cluster.settled("trim3", 2, Duration::from_secs(30)), "the restarted broker is back in sync");
    let mut back = Client::connect(cluster.addr(next));
    assert_eq!(back.earliest("trim3", 0), target);
}

/// `__consumer_offsets` holds Kafka's own records: Kafka's console consumer with its
/// OffsetsMessageFormatter reads the commits `kafka-consumer-groups` made, and the deletion of
/// an offset as a tombstone of that offset's key; its GroupMetadataMessageFormatter reads a
/// group's stored membership.
#[test]
fn consumer_offsets_hold_kafkas_records_and_its_formatter_reads_them() {
    const GROUPS: &str = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand";
    const CONSOLE: &str = "org.apache.kafka.tools.consumer.ConsoleConsumer";
    let _machine = machine::shared();
    java::classpath();
    let broker = Broker::start_args(&["--flush", "os"]);
    let b = broker.bootstrap();
    let mut c = Client::connect(broker.addr);
    c.create_topic("fmt", 2, &[]);
    fill(&mut c, "fmt", 0, 10, now_ms());
    fill(&mut c, "fmt", 1, 10, now_ms());
    for (partition, offset) in [("fmt:0", "42"), ("fmt:1", "7")] {
        ok(
            GROUPS,
            &b,
            &["--reset-offsets", "--group", "fmtg", "--topic", partition, "--to-offset", offset, "--execute"],
        );
    }
    ok(GROUPS, &b, &["--delete-offsets", "--group", "fmtg", "--topic", "fmt:1"]);
    let formatter = "org.apache.kafka.tools.consumer.OffsetsMessageFormatter";
    let args = ["--topic", "__consumer_offsets", "--from-beginning", "--formatter", formatter, "--timeout-ms", "6000"];
    let run = tool(CONSOLE, &b, &args);
    let lines: Vec<&str> = run.stdout.lines().filter(|l| l.contains("\"group\":\"fmtg\"")).collect();
    assert!(
        lines.iter().any(|l| l.contains("\"partition\":0") && l.contains("\"offset\":42")),
        "the commit of fmt-0 at 42, as Kafka's formatter reads it:\n{}",
        run.all
    );
    assert!(lines.iter().any(|l| l.contains("\"partition\":1") && l.contains("\"offset\":7")), "{}", run.all);
    assert!(
        lines.iter().any(|l| l.contains("\"partition\":1") && l.contains("\"value\":null")),
        "the deletion of fmt-1's offset is a tombstone of its key:\n{}",
        run.all
    );

    // A console consumer in a group joins, reads, commits and leaves: the group's membership
    // as Kafka's GroupMetadataMessageFormatter reads it, first with the member, then empty.
    let read =
        ["--topic", "fmt", "--group", "fmtm", "--from-beginning", "--max-messages", "5", "--timeout-ms", "30000"];
    ok(CONSOLE, &b, &read);
    let formatter = "org.apache.kafka.tools.consumer.GroupMetadataMessageFormatter";
    let args = ["--topic", "__consumer_offsets", "--from-beginning", "--formatter", formatter, "--timeout-ms", "6000"];
    let run = tool(CONSOLE, &b, &args);
    // One JSON object per record; this formatter writes no line separator between them.
    let stored: Vec<&str> = run.stdout.split("{\"key\":").filter(|r| r.contains("\"group\":\"fmtm\"")).collect();
    assert!(
        stored.iter().any(|l| l.contains("\"protocolType\":\"consumer\"") && l.contains("\"memberId\"")),
        "the group with its member after the rebalance:\n{}",
        run.all
    );
    assert!(
        stored.last().is_some_and(|l| l.contains("\"members\":[]") && !l.contains("\"memberId\"")),
        "the group empty after the member left:\n{}",
        run.all
    );
}

// ---------------------------------------------------------------------------------------------
// kafka-log-dirs
// ---------------------------------------------------------------------------------------------

#[test]
fn log_dirs_tool_reports_each_partition_with_its_size_on_disk() {
    let _machine = machine::shared();
    java::classpath();
    let broker = Broker::start_args(&["--flush", "os"]);
    let b = broker.bootstrap();
    let mut c = Client::connect(broker.addr);
    c.create_topic("dirs", 3, &[("segment.bytes", "1024")]);
    c.create_topic("other", 1, &[]);
    fill(&mut c, "dirs", 0, 12, now_ms());
    fill(&mut c, "dirs", 1, 2, now_ms());
    fill(&mut c, "other", 0, 1, now_ms());
    assert!(segments(&broker.data_dir, "dirs", 0).len() > 3, "dirs-0 spans several segments");

    let describe = |args: &[&str]| -> serde_json::Value {
        let mut full = vec!["--describe"];
        full.extend_from_slice(args);
        let out = ok(LOG_DIRS, &b, &full);
        let json = out.lines().find(|l| l.starts_with('{')).unwrap_or_else(|| panic!("no JSON in:\n{out}"));
        serde_json::from_str(json).expect("kafka-log-dirs prints JSON")
    };
    let v = describe(&["--topic-list", "dirs"]);
    let brokers = v["brokers"].as_array().expect("brokers");
    assert_eq!(brokers.len(), 1, "{v}");
    assert_eq!(brokers[0]["broker"], 0);
    let dirs = brokers[0]["logDirs"].as_array().expect("logDirs");
    assert_eq!(dirs.len(), 1, "one log directory: {v}");
    assert_eq!(dirs[0]["logDir"].as_str(), Some(broker.data_dir.to_str().unwrap()));
    assert!(dirs[0]["error"].is_null(), "{v}");
    let mut sizes = BTreeMap::new();
    for p in dirs[0]["partitions"].as_array().expect("partitions") {
        assert_eq!((&p["offsetLag"], &p["isFuture"]), (&serde_json::json!(0), &serde_json::json!(false)), "{p}");
        sizes.insert(p["partition"].as_str().unwrap().to_string(), p["size"].as_u64().unwrap());
    }
    let on_disk: BTreeMap<String, u64> =
        (0..3).map(|p| (format!("dirs-{p}"), log_bytes(&broker.data_dir, "dirs", p))).collect();
    assert_eq!(sizes, on_disk, "sizes reported vs the .log files on disk");
    assert!(on_disk["dirs-0"] > on_disk["dirs-1"] && on_disk["dirs-1"] > 0 && on_disk["dirs-2"] == 0, "{on_disk:?}");

    // Without --topic-list: every topic.
    let v = describe(&[]);
    let names: BTreeSet<&str> = v["brokers"][0]["logDirs"][0]["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["partition"].as_str().unwrap())
        .collect();
    assert!(["dirs-0", "dirs-1", "dirs-2", "other-0"].iter().all(|p| names.contains(p)), "{names:?}");
}

// ---------------------------------------------------------------------------------------------
// kafka-configs: topics
// ---------------------------------------------------------------------------------------------

#[test]
fn configs_tool_alters_and_describes_topic_configs() {
    let _machine = machine::shared();
    java::classpath();
    let broker = Broker::start_args(&["--flush", "os"]);
    let b = broker.bootstrap();
    ok(TOPICS, &b, &["--create", "--topic", "tcfg", "--partitions", "1"]);
    let topic = ["--entity-type", "topics", "--entity-name", "tcfg"];
    let alter = |extra: &[&str]| -> Run {
        let mut args = vec!["--alter"];
        args.extend_from_slice(&topic);
        args.extend_from_slice(extra);
        tool(CONFIGS, &b, &args)
    };

    let r = alter(&["--add-config", "retention.ms=86400000,cleanup.policy=[compact,delete],max.message.bytes=2000000"]);
    assert!(r.ok && r.stdout.contains("Completed updating config for topic tcfg."), "{}", r.all);
    assert_eq!(
        described(&b, &topic),
        map(&[("cleanup.policy", "compact,delete"), ("max.message.bytes", "2000000"), ("retention.ms", "86400000")])
    );
    let line = topic_config_line(&b, "tcfg", "retention.ms");
    assert!(line.starts_with("retention.ms=86400000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=86400000, DEFAULT_CONFIG:log.retention.ms=604800000}"), "{line}");
    let topics_view = ok(TOPICS, &b, &["--describe", "--topic", "tcfg"]);
    let configs =
        topics_view.lines().next().and_then(|l| l.split_once("Configs: ")).map(|(_, c)| c).unwrap_or_default();
    for c in ["cleanup.policy=compact,delete", "max.message.bytes=2000000", "retention.ms=86400000"] {
        assert!(configs.contains(c), "kafka-topics --describe shows {c}:\n{topics_view}");
    }

    let r = alter(&["--delete-config", "retention.ms,max.message.bytes"]);
    assert!(r.ok, "{}", r.all);
    assert_eq!(described(&b, &topic), map(&[("cleanup.policy", "compact,delete")]));
    let line = topic_config_line(&b, "tcfg", "retention.ms");
    assert!(
        line.starts_with("retention.ms=604800000 sensitive=false synonyms={DEFAULT_CONFIG:log.retention.ms=604800000}"),
        "{line}"
    );

    // The tool itself refuses to delete what is not set (as against Kafka).
    let r = alter(&["--delete-config", "retention.bytes"]);
    assert!(!r.ok && r.all.contains("Invalid config(s): retention.bytes"), "{}", r.all);
    // Configs Ringbroker does not implement are refused, saying why (Kafka 4.4 accepts
    // file.delete.delay.ms).
    let r = alter(&["--add-config", "file.delete.delay.ms=1000"]);
    assert!(
        !r.ok
            && r.all.contains(
                "InvalidConfigurationException: file.delete.delay.ms is not supported: Ringbroker deletes segment files at once"
            ),
        "{}",
        r.all
    );
    // Bad values and unknown names are INVALID_CONFIG, as in Kafka (whose words differ:
    // "Invalid value abc for configuration retention.ms: Not a number of type LONG",
    // "Unknown topic config name: no.such.config").
    let r = alter(&["--add-config", "retention.ms=abc"]);
    assert!(
        !r.ok && r.all.contains("InvalidConfigurationException: invalid value \"abc\" for retention.ms"),
        "{}",
        r.all
    );
    let r = alter(&["--add-config", "no.such.config=1"]);
    assert!(!r.ok && r.all.contains("InvalidConfigurationException: unknown config \"no.such.config\""), "{}", r.all);
    assert_eq!(described(&b, &topic), map(&[("cleanup.policy", "compact,delete")]), "refused changes change nothing");
    let r = tool(
        CONFIGS,
        &b,
        &["--alter", "--entity-type", "topics", "--entity-name", "missing", "--add-config", "retention.ms=1"],
    );
    assert!(!r.ok && r.all.contains("UnknownTopicOrPartitionException"), "{}", r.all);

    // kafka-configs has no list append/subtract (not in 4.1, nor 4.4): `--add-config` with
    // brackets sets the whole list.
    let r = alter(&["--add-config", "cleanup.policy=[delete]"]);
    assert!(r.ok, "{}", r.all);
    assert_eq!(described(&b, &topic), map(&[("cleanup.policy", "delete")]));
}

// ---------------------------------------------------------------------------------------------
// kafka-configs: brokers
// ---------------------------------------------------------------------------------------------

#[test]
fn configs_tool_sets_broker_defaults_that_topics_use_and_that_survive_a_restart() {
    let _machine = machine::shared();
    java::classpath();
    let args = ["--flush", "os", "--retention-check-interval-ms", "200"];
    let mut broker = Broker::start_args(&args);
    let tmp = broker.take_tempdir().unwrap();
    let b = broker.bootstrap();
    let mut c = Client::connect(broker.addr);
    // Records an hour old, in small segments, and a topic with its own retention.
    c.create_topic("aged", 1, &[("segment.bytes", "1024")]);
    c.create_topic("own", 1, &[("retention.ms", "86400000")]);
    fill(&mut c, "aged", 0, 20, now_ms() - 3_600_000);
    let before = segments(&broker.data_dir, "aged", 0).len();

    let default = ["--entity-type", "brokers", "--entity-default"];
    let me = ["--entity-type", "brokers", "--entity-name", "0"];
    let alter = |b: &str, entity: &[&str], extra: &[&str]| -> Run {
        let mut args = vec!["--alter"];
        args.extend_from_slice(entity);
        args.extend_from_slice(extra);
        tool(CONFIGS, b, &args)
    };
    let r = alter(&b, &default, &["--add-config", "log.retention.ms=600000,message.max.bytes=2000000"]);
    assert!(r.ok && r.stdout.contains("Completed updating default config for brokers in the cluster."), "{}", r.all);
    let r = alter(&b, &me, &["--add-config", "log.retention.bytes=1073741824"]);
    assert!(r.ok && r.stdout.contains("Completed updating config for broker 0."), "{}", r.all);

    let defaults = map(&[("log.retention.ms", "600000"), ("message.max.bytes", "2000000")]);
    let mine = map(&[("log.retention.bytes", "1073741824")]);
    assert_eq!(described(&b, &default), defaults);
    assert_eq!(described(&b, &me), mine, "--entity-name 0 lists the configs set on broker 0 itself");
    let all = ok(CONFIGS, &b, &["--describe", "--entity-type", "brokers"]);
    assert!(
        all.contains("Dynamic configs for broker 0 are:")
            && all.contains("Default configs for brokers in the cluster are:"),
        "{all}"
    );

    // Topics without their own value use the defaults.
    let line = topic_config_line(&b, "aged", "retention.ms");
    assert!(
        line.starts_with("retention.ms=600000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=600000, DEFAULT_CONFIG:log.retention.ms=604800000}"),
        "{line}"
    );
    let line = topic_config_line(&b, "aged", "retention.bytes");
    assert!(
        line.starts_with(
            "retention.bytes=1073741824 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.bytes=1073741824"
        ),
        "{line}"
    );
    let line = topic_config_line(&b, "own", "retention.ms");
    assert!(line.starts_with("retention.ms=86400000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=86400000, DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=600000"), "{line}");
    // ... and retention deletes the hour-old segments, the active one too once it is rolled.
    wait_for("retention under the new default", Duration::from_secs(15), || c.earliest("aged", 0) == 100);
    let after = segments(&broker.data_dir, "aged", 0).len();
    assert!(after < before, "segment files {before} → {after}");
    assert!(c.earliest("own", 0) == 0);

    // This broker's value beats the cluster-wide one; deleting it brings the default back.
    let r = alter(&b, &me, &["--add-config", "log.retention.ms=1200000"]);
    assert!(r.ok, "{}", r.all);
    let line = topic_config_line(&b, "aged", "retention.ms");
    assert!(line.starts_with("retention.ms=1200000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.ms=1200000, DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=600000"), "{line}");
    assert!(alter(&b, &me, &["--delete-config", "log.retention.ms"]).ok);
    assert!(topic_config_line(&b, "aged", "retention.ms").starts_with("retention.ms=600000 "));

    // Static settings and bad values are refused with INVALID_REQUEST, as Kafka answers a bad
    // broker value (Kafka 4.4 also changes num.io.threads at run time; Ringbroker has no such
    // setting to change).
    let r = alter(&b, &default, &["--add-config", "num.io.threads=4"]);
    assert!(
        !r.ok && r.all.contains("InvalidRequestException: num.io.threads cannot be changed at run time"),
        "{}",
        r.all
    );
    let r = alter(&b, &default, &["--add-config", "log.retention.ms=abc"]);
    assert!(
        !r.ok && r.all.contains("InvalidRequestException: invalid value \"abc\" for log.retention.ms"),
        "{}",
        r.all
    );
    let r = alter(&b, &me, &["--add-config", "log.segment.bytes=10"]);
    assert!(!r.ok && r.all.contains("must be at least 1024"), "{}", r.all);
    assert_eq!(described(&b, &default), defaults, "refused changes change nothing");

    // They are in the catalog: a restart keeps them.
    drop(c);
    broker.stop();
    let listen = broker.addr.to_string();
    let broker = support::restart(tmp.path(), &listen, &args);
    let b = broker.bootstrap();
    assert_eq!(described(&b, &default), defaults, "cluster-wide defaults after a restart");
    assert_eq!(described(&b, &me), mine, "broker 0's configs after a restart");
    assert!(topic_config_line(&b, "aged", "retention.ms").starts_with("retention.ms=600000 "));

    assert!(alter(&b, &default, &["--delete-config", "log.retention.ms,message.max.bytes"]).ok);
    assert!(alter(&b, &me, &["--delete-config", "log.retention.bytes"]).ok);
    assert_eq!(described(&b, &default), BTreeMap::new());
    assert_eq!(described(&b, &me), BTreeMap::new());
    assert!(topic_config_line(&b, "aged", "retention.ms").starts_with("retention.ms=604800000 "));
}

#[test]
fn configs_tool_reads_and_changes_the_running_brokers_log_levels() {
    let _machine = machine::shared();
    java::classpath();
    // The test brokers' filter is RUST_LOG=info.
    let broker = Broker::start_args(&["--flush", "os"]);
    let b = broker.bootstrap();
    let loggers = ["--entity-type", "broker-loggers", "--entity-name", "0"];
    let alter = |extra: &[&str]| -> Run {
        let mut args = vec!["--alter"];
        args.extend_from_slice(&loggers);
        args.extend_from_slice(extra);
        tool(CONFIGS, &b, &args)
    };
    let level = |logger: &str| described(&b, &loggers).get(logger).cloned().unwrap_or_default();
    let before = described(&b, &loggers);
    assert_eq!(before.get("root").map(String::as_str), Some("INFO"));
    assert!(before.contains_key("ringbroker.cluster") && before.contains_key("raft"), "{before:?}");
    assert!(before.values().all(|l| l == "INFO"), "every logger follows the root: {before:?}");
    let r = alter(&["--add-config", "ringbroker.cluster=DEBUG,ringbroker.net=ERROR,root=WARN"]);
    assert!(r.ok && r.stdout.contains("Completed updating config for broker-logger 0."), "{}", r.all);
    let set = described(&b, &loggers);
    let of = |l: &str| set.get(l).map(String::as_str);
    assert_eq!(
        (of("root"), of("ringbroker.cluster"), of("ringbroker.net")),
        (Some("WARN"), Some("DEBUG"), Some("ERROR"))
    );
    assert_eq!(of("ringbroker.log"), Some("WARN"), "the others follow the root");
    let r = alter(&["--add-config", "ringbroker.cluster=LOUD"]);
    assert!(!r.ok && r.all.contains("valid levels are"), "{}", r.all);
    let r = alter(&["--delete-config", "root"]);
    assert!(!r.ok && r.all.contains("cannot be removed"), "{}", r.all);
    assert_eq!(described(&b, &loggers), set, "refused changes change nothing");
    assert!(alter(&["--delete-config", "ringbroker.cluster,ringbroker.net"]).ok);
    assert_eq!((level("ringbroker.cluster"), level("ringbroker.net")), ("WARN".into(), "WARN".into()));
}

// ---------------------------------------------------------------------------------------------
// kafka-configs: client quotas and SCRAM credentials
// ---------------------------------------------------------------------------------------------

/// `kafka-configs --describe` lines for an entity (all of them, headers included).
fn describe_lines(bootstrap: &str, entity: &[&str]) -> Vec<String> {
    let mut args = vec!["--describe"];
    args.extend_from_slice(entity);
    ok(CONFIGS, bootstrap, &args).lines().map(str::to_string).collect()
}

/// The producer's throttle metrics after sending 200 KiB as `client_id` (logged in with the
/// settings of `props`, if any): (avg, max) ms.
fn throttle(bootstrap: &str, client_id: &str, props: Option<&Path>) -> (f64, f64) {
    let mut args = vec!["quota-produce", "--bootstrap", bootstrap, "--topic", "quota-t", "--client-id", client_id];
    args.extend(["--bytes", "204800"]);
    if let Some(p) = props {
        args.extend(["--props", p.to_str().unwrap()]);
    }
    let out = harness(&args);
    let line = out.iter().find(|l| l.starts_with("THROTTLE ")).unwrap_or_else(|| panic!("{out:?}"));
    let field = |name: &str| -> f64 {
        let v = line.split(' ').find_map(|f| f.strip_prefix(name)).unwrap_or_else(|| panic!("{line}"));
        v.parse().unwrap_or_else(|_| panic!("{line}"))
    };
    (field("avg="), field("max="))
}

#[test]
fn configs_tool_manages_client_quotas_and_scram_credentials() {
    let _machine = machine::shared();
    java::classpath();
    let args = ["--flush", "os", "--listeners", "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"];
    let mut broker = Broker::start_args(&args);
    let tmp = broker.take_tempdir().unwrap();
    let b = broker.listener("PLAINTEXT").to_string();
    Client::connect(broker.listener("PLAINTEXT")).create_topic("quota-t", 1, &[]);

    let alter = |b: &str, entity: &[&str], extra: &[&str]| -> Run {
        let mut args = vec!["--alter"];
        args.extend_from_slice(entity);
        args.extend_from_slice(extra);
        tool(CONFIGS, b, &args)
    };
    let c1 = ["--entity-type", "clients", "--entity-name", "c1"];
    let alice = ["--entity-type", "users", "--entity-name", "alice"];
    let alice_c1 =
        ["--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-name", "c1"];
    let users_default = ["--entity-type", "users", "--entity-default"];
    let clients_default = ["--entity-type", "clients", "--entity-default"];
    for (entity, config, done) in [
        (&c1[..], "producer_byte_rate=16384", "Completed updating config for client c1."),
        (&alice[..], "request_percentage=50", "Completed updating config for user alice."),
        (
            &alice_c1[..],
            "producer_byte_rate=8192,consumer_byte_rate=65536",
            "Completed updating config for user alice.",
        ),
        (
            &users_default[..],
            "consumer_byte_rate=1048576",
            "Completed updating default config for users in the cluster.",
        ),
        (
            &clients_default[..],
            "consumer_byte_rate=104857600",
            "Completed updating default config for clients in the cluster.",
        ),
    ] {
        let r = alter(&b, entity, &["--add-config", config]);
        assert!(r.ok && r.stdout.contains(done), "{entity:?} {config}:\n{}", r.all);
    }
    let r = alter(&b, &alice, &["--add-config", "SCRAM-SHA-512=[iterations=4096,password=alice-secret]"]);
    assert!(r.ok, "{}", r.all);

    // Each entity shows exactly what was set (the tool prints the values as doubles).
    let expected = |b: &str| {
        assert_eq!(describe_lines(b, &c1), ["Quota configs for client-id 'c1' are producer_byte_rate=16384.0"]);
        assert_eq!(
            describe_lines(b, &alice),
            [
                "Quota configs for user-principal 'alice' are request_percentage=50.0",
                "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-512=iterations=4096"
            ]
        );
        assert_eq!(
            describe_lines(b, &alice_c1),
            ["Quota configs for user-principal 'alice', client-id 'c1' are consumer_byte_rate=65536.0, producer_byte_rate=8192.0"]
        );
        assert_eq!(
            describe_lines(b, &users_default),
            ["Quota configs for the default user-principal are consumer_byte_rate=1048576.0"]
        );
        assert_eq!(
            describe_lines(b, &clients_default),
            ["Quota configs for the default client-id are consumer_byte_rate=1.048576E8"]
        );
        assert_eq!(
            describe_lines(b, &["--entity-type", "users"]),
            [
                "Quota configs for the default user-principal are consumer_byte_rate=1048576.0",
                "Quota configs for user-principal 'alice' are request_percentage=50.0",
                "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-512=iterations=4096"
            ]
        );
        assert_eq!(
            describe_lines(b, &["--entity-type", "clients"]),
            [
                "Quota configs for the default client-id are consumer_byte_rate=1.048576E8",
                "Quota configs for client-id 'c1' are producer_byte_rate=16384.0"
            ]
        );
    };
    expected(&b);

    // The credential the tool made logs alice in.
    let dir = tempfile::tempdir().unwrap();
    let jaas = "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"alice\" password=\"alice-secret\";";
    let sasl = broker.listener("SASL_PLAINTEXT").to_string();
    let props = java::write_props(
        &dir.path().join("alice.properties"),
        &[("security.protocol", "SASL_PLAINTEXT"), ("sasl.mechanism", "SCRAM-SHA-512"), ("sasl.jaas.config", jaas)],
    );
    let out = harness(&[
        "secure-roundtrip",
        "--bootstrap",
        &sasl,
        "--props",
        props.to_str().unwrap(),
        "--topic",
        "alice-t",
        "--records",
        "50",
    ]);
    assert_eq!(out, ["OK produced=50 consumed=50"]);

    // The quota of c1 applies at once: its producer is throttled, another client-id's is not.
    // 200 KiB in a moment is 20 KiB/s over the 10 s the rate is measured on.
    let (avg, max) = throttle(&b, "c1", None);
    assert!(avg > 0.0 && max > 0.0, "c1 over 16 KiB/s must be throttled: avg {avg} max {max}");
    assert_eq!(throttle(&b, "c2", None), (0.0, 0.0), "c2 has no quota");
    // alice's c1 has its own, smaller one; alice's other clients have none.
    let sasl = broker.listener("SASL_PLAINTEXT").to_string();
    let (avg, _) = throttle(&sasl, "c1", Some(&props));
    assert!(avg > 0.0, "alice's c1 over 8 KiB/s must be throttled: avg {avg}");
    assert_eq!(throttle(&sasl, "c2", Some(&props)), (0.0, 0.0), "alice's c2 has no producer quota");

    // Bad values are refused by the broker (Kafka 4.4: "Quota producer_byte_rate must be
    // greater than 0", "producer_byte_rate cannot be a fractional value.").
    let r = alter(&b, &c1, &["--add-config", "producer_byte_rate=-5"]);
    assert!(!r.ok && r.all.contains("InvalidRequestException: producer_byte_rate must be a whole number"), "{}", r.all);
    let r = alter(&b, &c1, &["--add-config", "producer_byte_rate=1.5"]);
    assert!(!r.ok && r.all.contains("InvalidRequestException"), "{}", r.all);

    // Quotas and credentials are in the catalog: a restart keeps them, and the throttle.
    broker.stop();
    let listen = broker.addr.to_string();
    let broker = support::restart(tmp.path(), &listen, &args);
    let b = broker.listener("PLAINTEXT").to_string();
    expected(&b);
    let (avg, _) = throttle(&b, "c1", None);
    assert!(avg > 0.0, "c1 is throttled after a restart: avg {avg}");

    // Deleting the quota lifts the throttle.
    assert!(alter(&b, &c1, &["--delete-config", "producer_byte_rate"]).ok);
    assert!(describe_lines(&b, &c1).is_empty());
    assert_eq!(throttle(&b, "c1", None), (0.0, 0.0), "c1 without a quota");
    for (entity, keys) in [
        (&alice[..], "request_percentage"),
        (&alice_c1[..], "producer_byte_rate,consumer_byte_rate"),
        (&users_default[..], "consumer_byte_rate"),
        (&clients_default[..], "consumer_byte_rate"),
    ] {
        assert!(alter(&b, entity, &["--delete-config", keys]).ok, "{entity:?}");
    }
    assert!(alter(&b, &alice, &["--delete-config", "SCRAM-SHA-512"]).ok);
    assert!(describe_lines(&b, &["--entity-type", "users"]).is_empty());
    assert!(describe_lines(&b, &["--entity-type", "clients"]).is_empty());
}

// ---------------------------------------------------------------------------------------------
// Legacy AlterConfigs
// ---------------------------------------------------------------------------------------------

fn legacy_alter(
    c: &mut Client,
    version: i16,
    resource_type: i8,
    name: &str,
    configs: &[(&str, &str)],
) -> (i16, String) {
    let mut res = AlterConfigsResource::default();
    res.resource_type = resource_type;
    res.resource_name = sb(name);
    res.configs = configs
        .iter()
        .map(|(k, v)| {
            let mut a = AlterableConfig::default();
            a.name = sb(k);
            a.value = Some(sb(v));
            a
        })
        .collect();
    let mut req = AlterConfigsRequest::default();
    req.resources = vec![res];
    let resp: AlterConfigsResponse = c.call(ApiKey::AlterConfigs, version, &req);
    let r = &resp.responses[0];
    (r.error_code, r.error_message.as_ref().map(|m| m.to_string()).unwrap_or_default())
}

/// DescribeConfigs of one resource: name → (value, source).
pub(crate) fn describe_configs(c: &mut Client, resource_type: i8, name: &str) -> BTreeMap<String, (String, i8)> {
    let mut res = DescribeConfigsResource::default();
    res.resource_type = resource_type;
    res.resource_name = sb(name);
    res.configuration_keys = None;
    let mut req = DescribeConfigsRequest::default();
    req.resources = vec![res];
    let resp: DescribeConfigsResponse = c.call(ApiKey::DescribeConfigs, 4, &req);
    assert_eq!(resp.results[0].error_code, 0, "{:?}", resp.results[0].error_message);
    resp.results[0]
        .configs
        .iter()
        .map(|e| (e.name.to_string(), (e.value.as_ref().map(|v| v.to_string()).unwrap_or_default(), e.config_source)))
        .collect()
}

#[test]
fn legacy_alter_configs_replaces_the_dynamic_configs() {
    let _machine = machine::shared();
    java::classpath();
    let broker = Broker::start_args(&["--flush", "os"]);
    let b = broker.bootstrap();
    let mut c = Client::connect(broker.addr);
    for version in 0..=2i16 {
        let name = format!("legacy-v{version}");
        let topic = ["--entity-type", "topics", "--entity-name", &name];
        c.create_topic(&name, 1, &[("retention.ms", "1000"), ("segment.bytes", "1048576")]);
        assert_eq!(legacy_alter(&mut c, version, TOPIC, &name, &[("cleanup.policy", "compact")]), (0, String::new()));
        let got = describe_configs(&mut c, TOPIC, &name);
        assert_eq!(got["cleanup.policy"], ("compact".into(), SOURCE_TOPIC), "v{version}");
        assert_eq!(
            got["retention.ms"],
            ("604800000".into(), SOURCE_DEFAULT),
            "v{version}: not listed, so back to the default"
        );
        assert_eq!(got["segment.bytes"], ("1073741824".into(), SOURCE_DEFAULT), "v{version}");
        assert_eq!(described(&b, &topic), map(&[("cleanup.policy", "compact")]), "v{version}");

        // A refused change leaves the configs as they were.
        let (code, msg) = legacy_alter(&mut c, version, TOPIC, &name, &[("retention.ms", "soon")]);
        assert_eq!(code, ErrorCode::InvalidConfig.code(), "{msg}");
        let (code, msg) = legacy_alter(&mut c, version, TOPIC, &name, &[("file.delete.delay.ms", "1000")]);
        assert_eq!(code, ErrorCode::InvalidConfig.code(), "{msg}");
        assert!(msg.contains("not supported"), "{msg}");
        assert_eq!(described(&b, &topic), map(&[("cleanup.policy", "compact")]), "v{version}");
        assert_eq!(
            legacy_alter(&mut c, version, TOPIC, "nope", &[("retention.ms", "1")]).0,
            3,
            "UNKNOWN_TOPIC_OR_PARTITION"
        );

        // Nothing listed: no dynamic configs left.
        assert_eq!(legacy_alter(&mut c, version, TOPIC, &name, &[]).0, 0);
        assert_eq!(described(&b, &topic), BTreeMap::new(), "v{version}");

        // The BROKER resource, cluster-wide and this broker's.
        for name in ["", "0"] {
            let both = [("log.retention.ms", "3600000"), ("message.max.bytes", "2000000")];
            assert_eq!(legacy_alter(&mut c, version, BROKER, name, &both).0, 0);
            assert_eq!(legacy_alter(&mut c, version, BROKER, name, &[("log.retention.ms", "7200000")]).0, 0);
            let entity: &[&str] = if name.is_empty() {
                &["--entity-type", "brokers", "--entity-default"]
            } else {
                &["--entity-type", "brokers", "--entity-name", "0"]
            };
            assert_eq!(described(&b, entity), map(&[("log.retention.ms", "7200000")]), "v{version} broker {name:?}");
            assert_eq!(legacy_alter(&mut c, version, BROKER, name, &[]).0, 0);
            assert_eq!(described(&b, entity), BTreeMap::new(), "v{version} broker {name:?}");
        }
    }

    // kafka-python's legacy path (AlterConfigs, not the incremental API): it sends every
    // dynamic config the resource has with the new one, so nothing else changes.
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/.venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run .ci/run, which makes tests/clients/.venv with kafka-python (tests/clients/requirements.txt)",
        python.display()
    );
    c.create_topic("legacy-py", 1, &[("retention.ms", "1000")]);
    let script = r#"
import sys
from kafka.admin import KafkaAdminClient, ConfigResource, ConfigResourceType
admin = KafkaAdminClient(bootstrap_servers=sys.argv[1], client_id="legacy-alter", request_timeout_ms=15000)
for kind, name, key, value in [(ConfigResourceType.TOPIC, "legacy-py", "cleanup.policy", "compact"),
                               (ConfigResourceType.BROKER, "0", "log.retention.ms", "5400000")]:
    print(admin.alter_configs([ConfigResource(kind, name, configs={key: value})],
                              raise_on_unknown=False, incremental=False))
admin.close()
"#;
    let out = Command::new(&python).args(["-c", script, &b]).output().expect("run kafka-python");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{text}");
    assert_eq!(
        text.lines().collect::<Vec<_>>(),
        ["{'topic': {'legacy-py': 'OK'}}", "{'broker': {'0': 'OK'}}"],
        "kafka-python's answers"
    );
    assert_eq!(
        described(&b, &["--entity-type", "topics", "--entity-name", "legacy-py"]),
        map(&[("cleanup.policy", "compact"), ("retention.ms", "1000")])
    );
    assert_eq!(
        described(&b, &["--entity-type", "brokers", "--entity-name", "0"]),
        map(&[("log.retention.ms", "5400000")])
    );
}

// ---------------------------------------------------------------------------------------------
// kafka-transactions describe-producers
// ---------------------------------------------------------------------------------------------

#[test]
fn transactions_tool_lists_the_idempotent_producers_of_a_partition() {
    let _machine = machine::shared();
    java::classpath();
    let broker = Broker::start_args(&["--flush", "os"]);
    let b = broker.bootstrap();
    ok(TOPICS, &b, &["--create", "--topic", "idem", "--partitions", "2"]);
    // Two idempotent producers, one after the other: 25 records on each partition each.
    for round in 1..=2 {
        let out = harness(&["partition-produce", "--bootstrap", &b, "--topic", "idem", "--records", "25"]);
        let next = 25 * round;
        assert_eq!(out, [format!("ACKED 0 25 {next}"), format!("ACKED 1 25 {next}"), "DONE 50".to_string()]);
    }
    let mut ids = Vec::new();
    for p in ["0", "1"] {
        let out = ok(TRANSACTIONS, &b, &["describe-producers", "--topic", "idem", "--partition", p]);
        let rows: Vec<Vec<&str>> = out.lines().map(|l| l.split_whitespace().collect()).collect();
        assert_eq!(
            rows[0],
            [
                "ProducerId",
                "ProducerEpoch",
                "LatestCoordinatorEpoch",
                "LastSequence",
                "LastTimestamp",
                "CurrentTransactionStartOffset"
            ],
            "{out}"
        );
        assert_eq!(rows.len(), 3, "one row per producer:\n{out}");
        let mut here = Vec::new();
        for r in &rows[1..] {
            let id: i64 = r[0].parse().unwrap();
            assert_eq!(&r[1..4], ["0", "-1", "24"], "epoch, coordinator epoch, last sequence:\n{out}");
            let ts: i64 = r[4].parse().unwrap();
            assert!((now_ms() - ts).abs() < 600_000, "last timestamp {ts} is recent");
            assert_eq!(r[5], "None", "no open transaction");
            here.push(id);
        }
        here.sort();
        assert_ne!(here[0], here[1], "two producers, two ids:\n{out}");
        ids.push(here);
    }
    assert_eq!(ids[0], ids[1], "both partitions know the same two producers");

    // A partition no producer wrote to: the header alone.
    ok(TOPICS, &b, &["--create", "--topic", "quiet", "--partitions", "1"]);
    let out = ok(TRANSACTIONS, &b, &["describe-producers", "--topic", "quiet", "--partition", "0"]);
    assert_eq!(out.lines().count(), 1, "{out}");
}

// ---------------------------------------------------------------------------------------------
// The Java Admin client
// ---------------------------------------------------------------------------------------------

#[test]
fn java_admin_client_drives_the_admin_apis() {
    let _machine = machine::shared();
    java::classpath();
    let broker = Broker::start_args(&["--flush", "os"]);
    let b = broker.bootstrap();
    let out = harness(&["admin-apis", "--bootstrap", &b, "--topic", "apis"]);
    let documented = format!("documented TOPIC 'apis' {n} of {n}", n = ringbroker::log::config::TOPIC_CONFIGS.len());
    let data_dir = broker.data_dir.display().to_string();
    let size = |p: i32| log_bytes(&broker.data_dir, "apis", p);

    // The producer id and the partition sizes are the broker's to choose: read them back.
    let pid = out
        .iter()
        .find_map(|l| l.strip_prefix("producer 0 id="))
        .and_then(|r| r.split(' ').next())
        .unwrap_or_else(|| panic!("no producer line: {out:#?}"))
        .to_string();
    let producer = |p: i32| {
        format!("producer {p} id={pid} epoch=0 lastSequence=9 coordinatorEpoch=none txnStart=none recent=true")
    };
    let expected: Vec<String> = [
        "createPartitions 3 OK",
        "partitions 3",
        "createPartitions 5 validateOnly OK",
        "partitions 3",
        "createPartitions 2 InvalidPartitionsException",
        "createPartitions 3 InvalidPartitionsException",
        "produced 0 10",
        "produced 1 10",
        "produced 2 10",
        "deleteRecords 0 lowWatermark=4",
        "deleteRecords 1 OffsetOutOfRangeException",
        "earliest 0 4",
        "earliest 1 0",
        &format!("logDir {data_dir} error=none total=yes usable=yes"),
        &format!("replica 0 size={} offsetLag=0 future=false", size(0)),
        &format!("replica 1 size={} offsetLag=0 future=false", size(1)),
        &format!("replica 2 size={} offsetLag=0 future=false", size(2)),
        "incrementalAlterConfigs topic validateOnly OK",
        "config TOPIC 'apis' retention.ms=604800000 DEFAULT_CONFIG",
        "incrementalAlterConfigs topic set OK",
        "config TOPIC 'apis' retention.ms=3600000 DYNAMIC_TOPIC_CONFIG",
        // The value as set: items in the order they were appended, as Kafka 4.4 shows them.
        "config TOPIC 'apis' cleanup.policy=delete,compact DYNAMIC_TOPIC_CONFIG",
        "incrementalAlterConfigs topic subtract OK",
        "config TOPIC 'apis' cleanup.policy=compact DYNAMIC_TOPIC_CONFIG",
        "incrementalAlterConfigs topic append non-list InvalidConfigurationException",
        // Kafka 4.4 accepts it (Ringbroker deletes segment files at once).
        "incrementalAlterConfigs topic unsupported InvalidConfigurationException",
        "incrementalAlterConfigs topic delete OK",
        "config TOPIC 'apis' retention.ms=604800000 DEFAULT_CONFIG",
        "config TOPIC 'apis' cleanup.policy=delete DEFAULT_CONFIG",
        "incrementalAlterConfigs broker default set OK",
        "incrementalAlterConfigs broker set OK",
        "config BROKER '' log.retention.ms=7200000 DYNAMIC_DEFAULT_BROKER_CONFIG",
        "config BROKER '' log.cleanup.policy=delete,compact DYNAMIC_DEFAULT_BROKER_CONFIG",
        "config BROKER '0' log.retention.ms=7200000 DYNAMIC_DEFAULT_BROKER_CONFIG",
        "config BROKER '0' log.retention.bytes=1048576 DYNAMIC_BROKER_CONFIG",
        "config BROKER '0' log.cleanup.policy=delete,compact DYNAMIC_DEFAULT_BROKER_CONFIG",
        "config TOPIC 'apis' retention.ms=7200000 DYNAMIC_DEFAULT_BROKER_CONFIG",
        "config TOPIC 'apis' retention.bytes=1048576 DYNAMIC_BROKER_CONFIG",
        "config TOPIC 'apis' cleanup.policy=delete,compact DYNAMIC_DEFAULT_BROKER_CONFIG",
        "incrementalAlterConfigs broker default subtract OK",
        "config BROKER '' log.cleanup.policy=delete DYNAMIC_DEFAULT_BROKER_CONFIG",
        // Kafka 4.4 changes num.io.threads at run time.
        "incrementalAlterConfigs broker static InvalidRequestException",
        "incrementalAlterConfigs broker delete OK",
        "incrementalAlterConfigs broker default delete OK",
        "config TOPIC 'apis' retention.ms=604800000 DEFAULT_CONFIG",
        "config TOPIC 'apis' retention.bytes=-1 DEFAULT_CONFIG",
        "config TOPIC 'apis' cleanup.policy=delete DEFAULT_CONFIG",
        &documented,
        "alterClientQuotas validateOnly OK",
        "quota none",
        "alterClientQuotas OK",
        "quota client-id=<default> {consumer_byte_rate=8192.0}",
        "quota client-id=c9 {producer_byte_rate=1024.0}",
        "quota user=<default> {producer_byte_rate=4096.0}",
        "quota user=alice {consumer_byte_rate=2048.0}",
        "quota user=alice,client-id=c9 {request_percentage=25.0}",
        "alterClientQuotas bad InvalidRequestException",
        "alterClientQuotas remove OK",
        "quota none",
        &producer(0),
        &producer(1),
        &producer(2),
        // Metadata never lists partition 7, so the client gives up (as against Kafka 4.4).
        "describeProducers 7 TimeoutException",
        "END",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(out, expected);
    assert!(size(0) > 0 && size(2) > 0);
}
