//! The admin CLI (`ringbroker topic|produce|consume|group`) run as a process against a real
//! broker:
//!
//! - topics: create (with a config), list, describe (partitions, offsets, configs), delete,
//!   with JSON output parsed and checked; Kafka errors named with their codes, exit 1; bad
//!   usage exit 2; alter-config sets and deletes topic configs, and a smaller retention takes
//!   effect on the live partitions;
//! - produce from stdin with keys and headers under every codec, then consume -n returns
//!   every key, value and header; the batches on the broker carry the codec;
//! - consume --offset @TIMESTAMP starts at the first record at or after that time;
//! - keyed records land on the partition Kafka's murmur2 partitioner picks;
//! - consumer groups: a second `consume -g` continues after the first one's commit,
//!   `group describe` shows offsets and lag, `reset-offsets` prints a plan without
//!   --execute, refuses a group with an active member, and with --execute makes the group
//!   read from the start again; Ctrl-C ends a group consumer cleanly (commit + leave).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use ringbroker::cli::partitioner::partition_for_key;
use serde_json::Value;
use support::client;
use support::Broker;

use crate::cli_run::{cli, failure, json_of, run, run_with_input, stdout_of};

fn broker() -> Broker {
    Broker::start_args(&["--flush", "os", "--group-initial-rebalance-delay-ms", "0"])
}

/// One JSON document per line (what consume --format json prints).
fn json_lines(out: &Output, what: &str) -> Vec<Value> {
    stdout_of(out, what).lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect()
}

fn create_topic(b: &Broker, name: &str, partitions: usize) {
    let p = partitions.to_string();
    stdout_of(&run(b.addr, &["topic", "create", name, "-p", &p]), "topic create");
}

/// (key, value, headers) of consumed records, as the JSON lines carry them.
type Seen = (Option<String>, Option<String>, Vec<(String, Option<String>)>);

fn seen(r: &Value) -> Seen {
    let s = |v: &Value| v.as_str().map(str::to_string);
    let headers = r["headers"].as_array().unwrap().iter().map(|h| (s(&h["key"]).unwrap(), s(&h["value"]))).collect();
    (s(&r["key"]), s(&r["value"]), headers)
}

#[test]
fn topics_are_created_listed_described_and_deleted() {
    let b = broker();
    let created = json_of(
        &run(b.addr, &["topic", "create", "orders", "-p", "3", "-c", "retention.ms=3600000", "--format", "json"]),
        "topic create",
    );
    assert_eq!(created["topic"], "orders");
    assert_eq!(created["partitions"], 3);
    assert_eq!(created["replication_factor"], 1);

    let again = run(b.addr, &["topic", "create", "orders", "-p", "3"]);
    assert!(failure(&again, 1).contains("TOPIC_ALREADY_EXISTS (36)"));

    // -b on the command line instead of the environment variable.
    let listed = Command::new(env!("CARGO_BIN_EXE_ringbroker"))
        .args(["topic", "list", "-b", &b.bootstrap(), "--format", "json"])
        .output()
        .unwrap();
    let listed = json_of(&listed, "topic list");
    let orders: Vec<&Value> = listed.as_array().unwrap().iter().filter(|t| t["name"] == "orders").collect();
    assert_eq!(orders.len(), 1, "{listed}");
    assert_eq!(orders[0]["partitions"], 3);
    assert_eq!(orders[0]["internal"], false);
    let text = stdout_of(&run(b.addr, &["topic", "list"]), "topic list");
    assert!(text.lines().next().unwrap().starts_with("NAME"), "{text}");
    assert!(text.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["orders", "3", "1"]), "{text}");

    stdout_of(&run_with_input(b.addr, &["produce", "orders", "-p", "1"], b"a\nb\n"), "produce");
    let described = json_of(&run(b.addr, &["topic", "describe", "orders", "--format", "json"]), "topic describe");
    let t = &described[0];
    assert_eq!(t["name"], "orders");
    let parts = t["partitions"].as_array().unwrap();
    assert_eq!(parts.len(), 3);
    for (i, p) in parts.iter().enumerate() {
        assert_eq!(p["partition"], i);
        assert!(p["leader"].as_i64().unwrap() >= 0);
        assert_eq!(p["replicas"].as_array().unwrap().len(), 1);
        assert_eq!(p["isr"], p["replicas"]);
        assert_eq!(p["log_start_offset"], 0);
        assert_eq!(p["high_watermark"], if i == 1 { 2 } else { 0 }, "{p}");
    }
    let retention =
        t["configs"].as_array().unwrap().iter().find(|c| c["name"] == "retention.ms").expect("retention.ms");
    assert_eq!(retention["value"], "3600000");
    assert_eq!(retention["source"], "DYNAMIC_TOPIC_CONFIG");
    let text = stdout_of(&run(b.addr, &["topic", "describe", "orders"]), "topic describe");
    assert!(text.contains("HIGH-WATERMARK") && text.contains("retention.ms"), "{text}");

    // alter-config: SET shows as the topic's own value, DELETE goes back to the default, and
    // an unknown config is refused by name.
    let config_of = |name: &str| {
        let d = json_of(&run(b.addr, &["topic", "describe", "orders", "--format", "json"]), "topic describe");
        d[0]["configs"].as_array().unwrap().iter().find(|c| c["name"] == name).cloned().expect(name)
    };
    stdout_of(&run(b.addr, &["topic", "alter-config", "orders", "--set", "retention.bytes=1000000"]), "alter-config");
    let bytes = config_of("retention.bytes");
    assert_eq!((&bytes["value"], &bytes["source"]), (&Value::from("1000000"), &Value::from("DYNAMIC_TOPIC_CONFIG")));
    stdout_of(&run(b.addr, &["topic", "alter-config", "orders", "--delete", "retention.ms"]), "alter-config");
    let ms = config_of("retention.ms");
    assert_eq!((&ms["value"], &ms["source"]), (&Value::from("604800000"), &Value::from("DEFAULT_CONFIG")));
    let bad = run(b.addr, &["topic", "alter-config", "orders", "--set", "retention.msec=1"]);
    let err = failure(&bad, 1);
    assert!(err.contains("INVALID_CONFIG (40)") && err.contains("retention.msec"), "{err}");

    let deleted = json_of(&run(b.addr, &["topic", "delete", "orders", "--format", "json"]), "topic delete");
    assert_eq!(deleted["deleted"], serde_json::json!(["orders"]));
    let listed = json_of(&run(b.addr, &["topic", "list", "--format", "json"]), "topic list");
    assert!(listed.as_array().unwrap().iter().all(|t| t["name"] != "orders"), "{listed}");
    let gone = run(b.addr, &["topic", "describe", "orders"]);
    assert!(failure(&gone, 1).contains("UNKNOWN_TOPIC_OR_PARTITION (3)"));
    let gone = run(b.addr, &["topic", "delete", "orders"]);
    assert!(failure(&gone, 1).contains("UNKNOWN_TOPIC_OR_PARTITION (3)"));

    // Usage errors are clap's: exit 2.
    failure(&run(b.addr, &["topic", "create"]), 2);
    failure(&run(b.addr, &["consume", "orders", "--offset", "yesterday"]), 2);
}

#[test]
fn a_retention_lowered_by_alter_config_deletes_old_segments() {
    let b = Broker::start_args(&["--retention-check-interval-ms", "100"]);
    stdout_of(&run(b.addr, &["topic", "create", "shrink", "-p", "1", "-c", "segment.bytes=2048"]), "topic create");
    let lines: String = (0..300).map(|i| format!("record {i:04} {}\n", "x".repeat(80))).collect();
    stdout_of(&run_with_input(b.addr, &["produce", "shrink"], lines.as_bytes()), "produce");
    let log_start = || {
        let d = json_of(&run(b.addr, &["topic", "describe", "shrink", "--format", "json"]), "topic describe");
        d[0]["partitions"][0]["log_start_offset"].as_i64().unwrap()
    };
    assert_eq!(log_start(), 0, "the default retention keeps everything");
    stdout_of(&run(b.addr, &["topic", "alter-config", "shrink", "--set", "retention.bytes=4096"]), "alter-config");
    let mut start = 0;
    for _ in 0..100 {
        start = log_start();
        if start > 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(start > 0, "retention.bytes=4096 never deleted a segment of ~30 KB of records");
    let rest = stdout_of(&run(b.addr, &["consume", "shrink", "-n", "1", "--format", "%v"]), "consume");
    assert_eq!(rest.lines().next(), Some(format!("record {start:04} {}", "x".repeat(80)).as_str()));
}

#[test]
fn every_codec_round_trips_keys_values_and_headers() {
    let b = broker();
    let n = 250;
    let input: String = (0..n).map(|i| format!("key-{i}|value {i} with | a bar\n")).collect();
    for codec in ["none", "gzip", "snappy", "lz4", "zstd"] {
        let topic = format!("codec-{codec}");
        create_topic(&b, &topic, 2);
        let codec_header = format!("codec={codec}");
        let produced = json_of(
            &run_with_input(
                b.addr,
                &[
                    "produce",
                    &topic,
                    "--key-separator",
                    "|",
                    "-H",
                    "app=cli",
                    "-H",
                    &codec_header,
                    "--compression",
                    codec,
                    "--acks",
                    "1",
                    "--format",
                    "json",
                ],
                input.as_bytes(),
            ),
            "produce",
        );
        assert_eq!(produced["acknowledged"], n, "{produced}");
        let per_partition: i64 =
            produced["partitions"].as_array().unwrap().iter().map(|p| p["records"].as_i64().unwrap()).sum();
        assert_eq!(per_partition, n);

        let consumed =
            json_lines(&run(b.addr, &["consume", &topic, "-n", &n.to_string(), "--format", "json"]), "consume");
        assert_eq!(consumed.len(), n as usize);
        let want: BTreeSet<Seen> = (0..n)
            .map(|i| {
                let headers =
                    vec![("app".to_string(), Some("cli".to_string())), ("codec".to_string(), Some(codec.to_string()))];
                (Some(format!("key-{i}")), Some(format!("value {i} with | a bar")), headers)
            })
            .collect();
        let got: BTreeSet<Seen> = consumed.iter().map(seen).collect();
        assert_eq!(got, want, "codec {codec}");
        // Within a partition, records keep the order they were produced in.
        for p in 0..2 {
            let order: Vec<i64> = consumed
                .iter()
                .filter(|r| r["partition"] == p)
                .map(|r| r["key"].as_str().unwrap()["key-".len()..].parse().unwrap())
                .collect();
            assert!(order.windows(2).all(|w| w[0] < w[1]), "partition {p} under {codec}: {order:?}");
        }

        // On the broker, the batches carry the codec and at most 100 records each.
        let mut raw = client::Client::connect(b.addr);
        let mut batches = 0;
        for p in 0..2 {
            let data = raw.fetch(&topic, p, 0, 8 << 20);
            for (info, bytes) in client::decode_batches(data.records.as_deref().unwrap_or(&[])) {
                let attributes = i16::from_be_bytes([bytes[21], bytes[22]]);
                let want = ["none", "gzip", "snappy", "lz4", "zstd"].iter().position(|c| *c == codec).unwrap();
                assert_eq!((attributes & 7) as usize, want, "codec of a batch of {topic}");
                assert!(info.record_count <= 100, "{} records in one batch", info.record_count);
                batches += 1;
            }
        }
        assert!(batches >= 3, "{n} records in {batches} batches");
    }
}

#[test]
fn consume_starts_at_a_timestamp() {
    let b = broker();
    create_topic(&b, "ts", 1);
    stdout_of(&run_with_input(b.addr, &["produce", "ts"], b"old-1\nold-2\nold-3\n"), "produce");
    // Record timestamps are milliseconds: step past the old ones, and past the cut.
    std::thread::sleep(Duration::from_millis(20));
    let cut = client::now_ms();
    std::thread::sleep(Duration::from_millis(20));
    stdout_of(&run_with_input(b.addr, &["produce", "ts"], b"new-1\nnew-2\n"), "produce");

    let out = stdout_of(&run(b.addr, &["consume", "ts", "--offset", &format!("@{cut}"), "-n", "2"]), "consume @ts");
    assert_eq!(out, "new-1\nnew-2\n");
    // Offsets and templates.
    let out =
        stdout_of(&run(b.addr, &["consume", "ts", "--offset", "1", "-n", "2", "--format", "%p:%o %v"]), "consume");
    assert_eq!(out, "0:1 old-2\n0:2 old-3\n");
}

#[test]
fn keyed_records_land_where_murmur2_puts_them() {
    let b = broker();
    let partitions = 4;
    create_topic(&b, "keyed", partitions);
    let keys: Vec<String> = (0..40).map(|i| format!("customer-{i}")).collect();
    let input: String = keys.iter().map(|k| format!("{k}=v\n")).collect();
    let produced = json_of(
        &run_with_input(b.addr, &["produce", "keyed", "--key-separator", "=", "--format", "json"], input.as_bytes()),
        "produce",
    );
    let mut want: BTreeMap<i32, usize> = BTreeMap::new();
    for k in &keys {
        *want.entry(partition_for_key(k.as_bytes(), partitions as i32)).or_default() += 1;
    }
    assert!(want.len() > 1, "40 keys spread over more than one partition");
    let reported: BTreeMap<i32, usize> = produced["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["partition"].as_i64().unwrap() as i32, p["records"].as_u64().unwrap() as usize))
        .collect();
    assert_eq!(reported, want);

    let out = stdout_of(&run(b.addr, &["consume", "keyed", "-n", "40", "--format", "%p %k"]), "consume");
    for line in out.lines() {
        let (p, k) = line.split_once(' ').unwrap();
        assert_eq!(p.parse::<i32>().unwrap(), partition_for_key(k.as_bytes(), partitions as i32), "key {k}");
    }
    assert_eq!(out.lines().count(), 40);
}

/// `group describe --format json` of `group`.
fn describe_group(b: &Broker, group: &str) -> Value {
    json_of(&run(b.addr, &["group", "describe", group, "--format", "json"]), "group describe")
}

fn committed(d: &Value) -> BTreeMap<i64, i64> {
    d["offsets"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|o| Some((o["partition"].as_i64()?, o["current_offset"].as_i64()?)))
        .collect()
}

#[test]
fn a_group_commits_what_it_printed_and_offsets_can_be_reset() {
    let b = broker();
    create_topic(&b, "events", 2);
    let input: String = (0..20).map(|i| format!("e{i}\n")).collect();
    stdout_of(&run_with_input(b.addr, &["produce", "events"], input.as_bytes()), "produce");
    let all: BTreeSet<String> = (0..20).map(|i| format!("e{i}")).collect();

    let first = stdout_of(&run(b.addr, &["consume", "events", "-g", "g1", "-n", "8"]), "consume -g");
    let second = stdout_of(&run(b.addr, &["consume", "events", "-g", "g1", "-n", "12"]), "consume -g again");
    let first: BTreeSet<String> = first.lines().map(str::to_string).collect();
    let second: BTreeSet<String> = second.lines().map(str::to_string).collect();
    assert_eq!(first.len(), 8);
    assert_eq!(second.len(), 12);
    assert!(first.is_disjoint(&second), "the second member continued after the first one's commit");
    assert_eq!(&first | &second, all);

    let d = describe_group(&b, "g1");
    assert_eq!(d["state"], "Empty");
    assert_eq!(d["protocol_type"], "consumer");
    assert_eq!(committed(&d).values().sum::<i64>(), 20);
    for o in d["offsets"].as_array().unwrap() {
        assert_eq!(o["lag"], 0, "{o}");
        assert_eq!(o["current_offset"], o["log_end_offset"]);
    }
    let listed = json_of(&run(b.addr, &["group", "list", "--format", "json"]), "group list");
    assert!(listed.as_array().unwrap().iter().any(|g| g["group"] == "g1" && g["state"] == "Empty"), "{listed}");

    // Without --execute: the plan only.
    let plan = run(b.addr, &["group", "reset-offsets", "g1", "--topic", "events", "--to-earliest", "--format", "json"]);
    let plan = json_of(&plan, "reset-offsets (dry run)");
    assert_eq!(plan["executed"], false);
    let new: Vec<i64> = plan["offsets"].as_array().unwrap().iter().map(|o| o["new_offset"].as_i64().unwrap()).collect();
    assert_eq!(new, [0, 0]);
    assert_eq!(committed(&describe_group(&b, "g1")).values().sum::<i64>(), 20, "a dry run changes nothing");

    let done = run(b.addr, &["group", "reset-offsets", "g1", "--topic", "events", "--to-earliest", "--execute"]);
    let text = stdout_of(&done, "reset-offsets --execute");
    assert!(text.starts_with("GROUP"), "{text}");
    assert_eq!(committed(&describe_group(&b, "g1")), BTreeMap::from([(0, 0), (1, 0)]));
    let again = stdout_of(&run(b.addr, &["consume", "events", "-g", "g1", "-n", "20"]), "consume after reset");
    assert_eq!(again.lines().map(str::to_string).collect::<BTreeSet<_>>(), all);

    // --to-offset clamps into the log, as Kafka's tool does.
    let plan = run(
        b.addr,
        &["group", "reset-offsets", "g1", "--topic", "events:1", "--to-offset", "1000000", "--format", "json"],
    );
    let plan = json_of(&plan, "reset-offsets --to-offset");
    let end = describe_group(&b, "g1")["offsets"].as_array().unwrap().iter().find(|o| o["partition"] == 1).unwrap()
        ["log_end_offset"]
        .clone();
    assert_eq!(plan["offsets"][0]["partition"], 1);
    assert_eq!(plan["offsets"][0]["new_offset"], end);

    let missing = run(b.addr, &["group", "describe", "no-such-group"]);
    assert!(failure(&missing, 1).contains("GROUP_ID_NOT_FOUND (69)"));
}

#[test]
fn an_active_group_refuses_a_reset_and_ctrl_c_leaves_it_cleanly() {
    let b = broker();
    create_topic(&b, "live", 1);
    stdout_of(&run_with_input(b.addr, &["produce", "live"], b"a\nb\nc\n"), "produce");

    let mut consumer = cli(b.addr)
        .args(["consume", "live", "-g", "g2"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(consumer.stdout.take().unwrap()).lines();
    let printed: Vec<String> = (0..3).map(|_| lines.next().unwrap().unwrap()).collect();
    assert_eq!(printed, ["a", "b", "c"]);

    let d = describe_group(&b, "g2");
    assert_eq!(d["state"], "Stable");
    assert_eq!(d["members"].as_array().unwrap().len(), 1);
    assert_eq!(d["members"][0]["assignment"]["live"], serde_json::json!([0]));

    let refused = run(b.addr, &["group", "reset-offsets", "g2", "--topic", "live", "--to-earliest", "--execute"]);
    let err = failure(&refused, 1);
    assert!(
        err.contains("Assignments can only be reset if the group 'g2' is inactive, but the current state is Stable."),
        "{err}"
    );

    let interrupted = Command::new("kill").args(["-INT", &consumer.id().to_string()]).status().unwrap();
    assert!(interrupted.success());
    let out = consumer.wait_with_output().unwrap();
    assert!(out.status.success(), "Ctrl-C is a clean exit: {:?} {}", out.status, String::from_utf8_lossy(&out.stderr));
    let d = describe_group(&b, "g2");
    assert_eq!(d["state"], "Empty", "the member left");
    assert_eq!(committed(&d), BTreeMap::from([(0, 3)]), "what it printed was committed");
}
