//! Kafka's consumer-groups tool (`kafka-consumer-groups.sh`, i.e.
//! `org.apache.kafka.tools.consumer.group.ConsumerGroupCommand` from kafka-tools 4.1, on the
//! classpath of the Java harness in tests/java) against the broker, with librdkafka producing,
//! consuming and committing:
//!
//! - `--list` shows the group;
//! - `--describe --group g` shows, per partition, CURRENT-OFFSET = what was committed,
//!   LOG-END-OFFSET = what was produced, LAG = the difference, and the active member;
//! - `--delete` of a group with an active member fails with NON_EMPTY_GROUP (and so does the
//!   DeleteGroups API from librdkafka's admin client) and leaves the group and its offsets;
//! - `--reset-offsets --to-earliest --execute --topic t` on the group once inactive commits 0
//!   for every partition (OffsetFetch from librdkafka shows it);
//! - `--delete --group g` on the inactive group removes it: `--list` no longer shows it and it
//!   has no committed offsets.

use std::collections::BTreeMap;
use std::process::Output;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};
use support::{java, Broker};

use crate::librdkafka::{block_on, config};

const TOPIC: &str = "tool-t";
const GROUP: &str = "tool-g";
const PARTITIONS: i32 = 3;
const RECORDS: usize = 600;
const WAIT: Duration = Duration::from_secs(30);

/// Runs `kafka-consumer-groups.sh --bootstrap-server B <args>` and returns its output.
fn tool(bootstrap: &str, args: &[&str]) -> Output {
    let args: Vec<&str> = ["--bootstrap-server", bootstrap].into_iter().chain(args.iter().copied()).collect();
    let out = java::tool("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", &args)
        .output()
        .expect("spawn java for ConsumerGroupCommand");
    java::print_output(&format!("kafka-consumer-groups {}", args[2..].join(" ")), &out);
    out
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn all_output(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// The group names `--list` prints.
fn list(bootstrap: &str) -> Vec<String> {
    let out = tool(bootstrap, &["--list"]);
    assert!(out.status.success(), "--list failed ({}):\n{}", out.status, all_output(&out));
    stdout(&out).lines().map(|l| l.trim().to_string()).filter(|l| !l.is_empty()).collect()
}

/// One row of `--describe --group g`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Row {
    current: Option<i64>,
    log_end: i64,
    lag: Option<i64>,
    consumer_id: String,
    client_id: String,
}

/// `--describe --group g`: partition → row (for TOPIC), and the whole output.
fn describe(bootstrap: &str) -> (BTreeMap<i32, Row>, String) {
    let out = tool(bootstrap, &["--describe", "--group", GROUP]);
    let text = all_output(&out);
    assert!(out.status.success(), "--describe failed ({}):\n{text}", out.status);
    let mut rows = BTreeMap::new();
    let mut header: Option<Vec<String>> = None;
    for line in stdout(&out).lines() {
        let cols: Vec<&str> = line.split_whitespace().collect();
        if cols.first() == Some(&"GROUP") {
            header = Some(cols.iter().map(|c| c.to_string()).collect());
            continue;
        }
        let Some(h) = &header else { continue };
        if cols.len() != h.len() || cols[0] != GROUP || cols[1] != TOPIC {
            continue;
        }
        let col = |name: &str| cols[h.iter().position(|c| c == name).unwrap_or_else(|| panic!("no {name} column"))];
        let num = |name: &str| col(name).parse::<i64>().ok();
        rows.insert(
            col("PARTITION").parse().unwrap(),
            Row {
                current: num("CURRENT-OFFSET"),
                log_end: num("LOG-END-OFFSET").unwrap_or_else(|| panic!("LOG-END-OFFSET in {line:?}")),
                lag: num("LAG"),
                consumer_id: col("CONSUMER-ID").to_string(),
                client_id: col("CLIENT-ID").to_string(),
            },
        );
    }
    assert!(header.is_some(), "--describe printed no table:\n{text}");
    (rows, text)
}

/// OffsetFetch of every partition for the group (librdkafka, not a member): partition → offset.
fn committed(bootstrap: &str) -> BTreeMap<i32, Option<i64>> {
    let c: BaseConsumer = config(bootstrap).set("group.id", GROUP).create().expect("offset reader");
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition(TOPIC, p);
    }
    let got = c.committed_offsets(tpl, WAIT).expect("OffsetFetch");
    got.elements()
        .iter()
        .map(|e| (e.partition(), if let Offset::Offset(o) = e.offset() { Some(o) } else { None }))
        .collect()
}

#[test]
fn consumer_groups_tool_lists_describes_resets_and_deletes() {
    let _machine = crate::machine::shared();
    java::classpath(); // build the harness (with kafka-tools) before the broker starts
    let broker =
        Broker::start_args(&["--flush", "os", "--default-partitions", "3", "--group-initial-rebalance-delay-ms", "0"]);
    let bootstrap = broker.bootstrap();

    // Records, spread over the 3 partitions by key.
    let producer: BaseProducer =
        config(&bootstrap).set("acks", "all").set("enable.idempotence", "true").create().expect("producer");
    for i in 0..RECORDS {
        let key = format!("k-{i}");
        producer.send(BaseRecord::to(TOPIC).key(&key).payload("v")).unwrap_or_else(|(e, _)| panic!("send: {e}"));
        producer.poll(Duration::ZERO);
    }
    producer.flush(WAIT).expect("flush");
    drop(producer);

    // A member consumes about half of each partition and commits exactly that.
    let consumer: BaseConsumer = config(&bootstrap)
        .set("group.id", GROUP)
        .set("client.id", "tool-member")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", "10000")
        .create()
        .expect("consumer");
    consumer.subscribe(&[TOPIC]).unwrap();
    let ends: BTreeMap<i32, i64> =
        (0..PARTITIONS).map(|p| (p, consumer.fetch_watermarks(TOPIC, p, WAIT).expect("watermarks").1)).collect();
    assert_eq!(ends.values().sum::<i64>(), RECORDS as i64, "log end offsets {ends:?}");
    let targets: BTreeMap<i32, i64> = ends.iter().map(|(p, e)| (*p, e / 2)).collect();
    let mut next: BTreeMap<i32, i64> = (0..PARTITIONS).map(|p| (p, 0)).collect();
    let deadline = Instant::now() + WAIT;
    while targets.iter().any(|(p, t)| next[p] < *t) {
        assert!(Instant::now() < deadline, "the member did not reach {targets:?} (at {next:?})");
        if let Some(m) = consumer.poll(Duration::from_millis(100)) {
            let m = m.expect("poll");
            next.insert(m.partition(), m.offset() + 1);
        }
    }
    let mut tpl = TopicPartitionList::new();
    for (p, t) in &targets {
        tpl.add_partition_offset(TOPIC, *p, Offset::Offset(*t)).unwrap();
    }
    consumer.commit(&tpl, CommitMode::Sync).expect("commit");
    println!("log ends {ends:?}, committed {targets:?}");

    // --list
    let groups = list(&bootstrap);
    assert!(groups.contains(&GROUP.to_string()), "--list does not show {GROUP}: {groups:?}");

    // --describe: offsets, lag and the active member.
    let (rows, text) = describe(&bootstrap);
    assert_eq!(rows.keys().copied().collect::<Vec<_>>(), (0..PARTITIONS).collect::<Vec<_>>(), "partitions in:\n{text}");
    for (p, row) in &rows {
        let (end, committed) = (ends[p], targets[p]);
        assert_eq!(
            (row.current, row.log_end, row.lag),
            (Some(committed), end, Some(end - committed)),
            "partition {p}: CURRENT-OFFSET, LOG-END-OFFSET, LAG in:\n{text}"
        );
        assert!(
            row.consumer_id.starts_with("tool-member") && row.client_id == "tool-member",
            "partition {p} should show the active member (consumer id tool-member-…, client id tool-member): {row:?}"
        );
    }

    // Deleting a group with an active member fails: through the tool and through the API.
    let out = tool(&bootstrap, &["--delete", "--group", GROUP]);
    let text = all_output(&out);
    assert!(
        text.contains("NON_EMPTY_GROUP") || text.contains("GroupNotEmptyException") || text.contains("is not empty"),
        "--delete of a group with an active member must fail with a non-empty-group error:\n{text}"
    );
    let admin: AdminClient<DefaultClientContext> = config(&bootstrap).create().expect("admin");
    let res = block_on(admin.delete_groups(&[GROUP], &AdminOptions::new()), WAIT)
        .expect("DeleteGroups did not complete")
        .expect("DeleteGroups request");
    assert_eq!(res, vec![Err((GROUP.to_string(), RDKafkaErrorCode::NonEmptyGroup))], "DeleteGroups of an active group");
    assert!(list(&bootstrap).contains(&GROUP.to_string()), "a failed delete must leave the group");
    assert_eq!(
        committed(&bootstrap),
        targets.iter().map(|(p, o)| (*p, Some(*o))).collect(),
        "offsets after the failed delete"
    );

    // The member leaves; reset to earliest while inactive.
    drop(consumer);
    let out = tool(&bootstrap, &["--reset-offsets", "--to-earliest", "--execute", "--topic", TOPIC, "--group", GROUP]);
    let text = all_output(&out);
    assert!(out.status.success(), "--reset-offsets failed ({}):\n{text}", out.status);
    assert!(
        stdout(&out).lines().filter(|l| l.contains(TOPIC)).count() == PARTITIONS as usize,
        "--reset-offsets should list the {PARTITIONS} partitions it reset:\n{text}"
    );
    assert_eq!(
        committed(&bootstrap),
        (0..PARTITIONS).map(|p| (p, Some(0))).collect(),
        "OffsetFetch after --reset-offsets --to-earliest:\n{text}"
    );
    let (rows, text) = describe(&bootstrap);
    for (p, row) in &rows {
        assert_eq!((row.current, row.lag), (Some(0), Some(ends[p])), "partition {p} after the reset, in:\n{text}");
        assert_eq!(row.consumer_id, "-", "no member after the consumer left: {row:?}");
    }

    // Delete the inactive group: gone from --list, no offsets left.
    let out = tool(&bootstrap, &["--delete", "--group", GROUP]);
    let text = all_output(&out);
    assert!(
        out.status.success() && text.contains("successful"),
        "--delete of the inactive group ({}):\n{text}",
        out.status
    );
    let groups = list(&bootstrap);
    assert!(!groups.contains(&GROUP.to_string()), "--list still shows {GROUP} after --delete: {groups:?}");
    assert_eq!(
        committed(&bootstrap),
        (0..PARTITIONS).map(|p| (p, None)).collect(),
        "a deleted group has no committed offsets"
    );
    drop(broker);
}
