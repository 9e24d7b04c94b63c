//! A compacted topic on a running broker: 100k records over 1k keys, updates and tombstones,
//! 64 KiB segments. The broker's cleaner (throttled, so that a cleaning takes seconds) is
//! killed with SIGKILL in the middle of a cleaning; after the restart, and after the cleaning
//! it then finishes, every live key's latest value is at its original offset; a consumer
//! reading the whole time sees offsets only grow and, at the end of each pass, each key's
//! latest value; tombstoned keys vanish once `delete.retention.ms` has passed and another
//! cleaning ran. And `__consumer_offsets` under 100k commits stays small.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ringbroker::protocol::batch;
use support::client::{now_ms, wait_until, Client};

const TOPIC: &str = "compacted";
const RECORDS: usize = 100_000;
const KEYS: usize = 1_000;
const PER_BATCH: usize = 100;

fn key(i: usize) -> Vec<u8> {
    format!("key-{:04}", i % KEYS).into_bytes()
}

/// Record `i`'s value: None (a tombstone) for the last write of every tenth key.
fn value(i: usize) -> Option<Vec<u8>> {
    let last_write = i + KEYS >= RECORDS;
    (!(last_write && (i % KEYS).is_multiple_of(10))).then(|| format!("value-{i:06}-{}", "x".repeat(60)).into_bytes())
}

/// Produces records `from..to` (record `j` writes `key(j)`, with `value(j)`); returns
/// (offset, key, value) of each.
fn produce(c: &mut Client, from: usize, to: usize, value: impl Fn(usize) -> Option<Vec<u8>>) -> Vec<Rec> {
    let mut out = Vec::new();
    let mut i = from;
    while i < to {
        let n = PER_BATCH.min(to - i);
        let recs: Vec<(Vec<u8>, Option<Vec<u8>>)> = (i..i + n).map(|j| (key(j), value(j))).collect();
        let kvs: Vec<batch::KeyValue> = recs.iter().map(|(k, v)| (Some(k.as_slice()), v.as_deref())).collect();
        let base = c.produce_ok(TOPIC, 0, batch::build_keyed(now_ms(), &kvs));
        out.extend(recs.into_iter().enumerate().map(|(d, (k, v))| (base + d as i64, k, v)));
        i += n;
    }
    out
}

type Rec = (i64, Vec<u8>, Option<Vec<u8>>);

/// The whole partition as a fetch reads it, checking that offsets only grow.
fn read_all(c: &mut Client) -> Vec<Rec> {
    let records = c.fetch_all(TOPIC, 0, 0);
    let offsets: Vec<i64> = records.iter().map(|r| r.offset).collect();
    assert!(offsets.windows(2).all(|w| w[0] < w[1]), "offsets only grow");
    records.into_iter().map(|r| (r.offset, r.key.unwrap_or_default(), r.value)).collect()
}

/// Checks the latest record of each key is in `got` at its offset (tombstones, unless
/// `tombstones_gone`, in which case those keys must be absent altogether).
fn check(got: &[Rec], produced: &[Rec], tombstones_gone: bool, when: &str) {
    let latest: BTreeMap<&Vec<u8>, &Rec> = produced.iter().map(|r| (&r.1, r)).collect();
    let seen: BTreeMap<&Vec<u8>, &Rec> = got.iter().map(|r| (&r.1, r)).collect();
    for (k, rec) in &latest {
        let key = String::from_utf8_lossy(k);
        match (rec.2.is_none(), seen.get(k)) {
            (true, None) if tombstones_gone => {}
            (true, Some(s)) if tombstones_gone => panic!("{when}: deleted key {key} is still there: {s:?}"),
            (_, Some(s)) => assert_eq!(s, rec, "{when}: the latest record of {key}"),
            (_, None) => panic!("{when}: the latest record of {key} is lost"),
        }
    }
}

fn log_bytes(dir: &std::path::Path) -> u64 {
    support::log_bytes(&dir.join(format!("{TOPIC}-0")))
}

fn cleanings(b: &support::Broker) -> f64 {
    support::metric_sum(
        &support::scrape(b.admin_addr.expect("an admin listener")),
        "ringbroker_cleaner_runs_total",
        &[],
    )
}

#[test]
fn a_compacted_topic_keeps_each_keys_latest_value_through_kill_9_mid_cleaning() {
    let args = ["--flush", "os", "--log-cleaner-backoff-ms", "200", "--log-cleaner-io-max-bytes-per-second", "4000000"];
    // Written with the cleaner off, so that the first cleaning has all of it to do.
    let mut broker = support::Broker::start_args(&["--flush", "os", "--log-cleaner-enable", "false"]);
    let tmp = broker.take_tempdir().unwrap();
    let mut c = Client::connect(broker.addr);
    let configs = [
        ("cleanup.policy", "compact"),
        ("segment.bytes", "65536"),
        ("min.cleanable.dirty.ratio", "0.01"),
        ("delete.retention.ms", "3000"),
    ];
    assert_eq!(c.create_topic(TOPIC, 1, &configs).error_code, 0);
    let mut produced = produce(&mut c, 0, RECORDS, value);
    let full = log_bytes(tmp.path());
    broker.stop();
    let listen = broker.addr.to_string();
    let mut broker = support::restart(tmp.path(), &listen, &args);

    // A consumer reads the partition over and over while the cleaner works.
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (stop, addr, produced) = (stop.clone(), broker.addr, produced.clone());
        std::thread::spawn(move || {
            let mut passes = 0;
            while !stop.load(Ordering::Relaxed) {
                // The broker going away ends the reads; what a read got is checked outside.
                let Ok(records) = std::panic::catch_unwind(|| Client::connect(addr).fetch_all(TOPIC, 0, 0)) else {
                    break;
                };
                let offsets: Vec<i64> = records.iter().map(|r| r.offset).collect();
                assert!(offsets.windows(2).all(|w| w[0] < w[1]), "pass {passes}: offsets only grow");
                let got: Vec<Rec> =
                    records.into_iter().map(|r| (r.offset, r.key.unwrap_or_default(), r.value)).collect();
                check(&got, &produced, false, &format!("reader pass {passes}"));
                passes += 1;
            }
            passes
        })
    };
    // Killed while a cleaning has written part of its new segments.
    let dir = tmp.path().join(format!("{TOPIC}-0"));
    let started = wait_until(Duration::from_secs(60), || dir.join("cleaner.tmp").exists());
    assert!(started, "a cleaning started");
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(cleanings(&broker), 0.0, "killed before the first cleaning finished");
    broker.kill9();
    stop.store(true, Ordering::Relaxed);
    let passes = reader.join().expect("the reader saw a consistent log on every pass");
    println!("reader passes during the cleaning: {passes}");

    let broker = support::restart(tmp.path(), &listen, &args);
    let mut c = Client::connect(broker.addr);
    check(&read_all(&mut c), &produced, false, "after kill -9 during a cleaning");
    let cleaned = wait_until(Duration::from_secs(60), || cleanings(&broker) >= 1.0);
    assert!(cleaned, "the cleaning is done again after the restart");
    let got = read_all(&mut c);
    check(&got, &produced, false, "after the cleaning");
    let now = log_bytes(tmp.path());
    assert!(now < full / 4, "{full} bytes of log became {now}");

    // New writes to keys 0..600 roll the segment holding the tombstones: the next cleaning
    // stamps their delete horizon; past delete.retention.ms, the one after drops them.
    let later = |i: usize| Some(format!("later-{i}-{}", "y".repeat(100)).into_bytes());
    for round in 0..2 {
        if round == 1 {
            std::thread::sleep(Duration::from_millis(3_200));
        }
        let runs = cleanings(&broker);
        let from = RECORDS + round * KEYS; // keys 0..600 both times
        produced.extend(produce(&mut c, from, from + 600, |i| later(i - from)));
        let again = wait_until(Duration::from_secs(60), || cleanings(&broker) > runs);
        assert!(again, "cleaning {round} after the new writes");
    }
    let got = read_all(&mut c);
    check(&got, &produced, true, "after delete.retention.ms");
    let gone = (RECORDS - KEYS..RECORDS).filter(|i| value(*i).is_none() && i % KEYS >= 600).count();
    assert!(gone > 0, "{gone} keys stay deleted");
    drop(broker);
    drop(tmp);
}

/// A log whose cleaning fails (a batch corrupted on disk) is passed over for a while, and the
/// shard's other compacted logs are cleaned meanwhile: the failing log, ever the dirtiest,
/// used to be picked again at every check, and no other log was cleaned again.
#[test]
fn a_log_whose_cleaning_fails_is_passed_over_and_the_others_are_cleaned() {
    // One shard: both logs are its cleaner's to choose between.
    let args = ["--cpus", "0", "--pin", "false", "--flush", "os", "--log-cleaner-backoff-ms", "200"];
    let configs = [("cleanup.policy", "compact"), ("segment.bytes", "65536"), ("min.cleanable.dirty.ratio", "0.01")];
    // 10,000 records over 100 keys from record `from` on.
    let fill = |c: &mut Client, topic: &str, from: usize| {
        for i in (from..from + 10_000).step_by(PER_BATCH) {
            let recs: Vec<(Vec<u8>, Vec<u8>)> = (i..i + PER_BATCH)
                .map(|j| (format!("k{}", j % 100).into_bytes(), format!("v{j}-{}", "x".repeat(60)).into_bytes()))
                .collect();
            let kvs: Vec<batch::KeyValue> =
                recs.iter().map(|(k, v)| (Some(k.as_slice()), Some(v.as_slice()))).collect();
            c.produce_ok(topic, 0, batch::build_keyed(now_ms(), &kvs));
        }
    };
    // "good" is cleaned once, then written to again: dirty, but less so than "bad", which
    // no cleaning has touched.
    let mut broker = support::Broker::start_args(&args);
    let tmp = broker.take_tempdir().unwrap();
    let mut c = Client::connect(broker.addr);
    assert_eq!(c.create_topic("good", 1, &configs).error_code, 0);
    fill(&mut c, "good", 0);
    assert!(wait_until(Duration::from_secs(60), || cleanings(&broker) >= 1.0), "good is cleaned once");
    broker.stop();
    let listen = broker.addr.to_string();
    let mut broker =
        support::restart(tmp.path(), &listen, &["--cpus", "0", "--pin", "false", "--log-cleaner-enable", "false"]);
    let mut c = Client::connect(broker.addr);
    assert_eq!(c.create_topic("bad", 1, &configs).error_code, 0);
    fill(&mut c, "bad", 0);
    fill(&mut c, "good", 10_000);
    broker.stop();
    // A byte of a record in bad's first (sealed) segment flipped: its batch's CRC fails.
    let seg = tmp.path().join("bad-0").join(ringbroker::log::segment::file_name(0, "log"));
    let mut bytes = std::fs::read(&seg).unwrap();
    bytes[200] ^= 0xff;
    std::fs::write(&seg, &bytes).unwrap();
    let good = tmp.path().join("good-0");
    let before = support::log_bytes(&good);

    let broker = support::restart(tmp.path(), &listen, &args);
    let cleaned = wait_until(Duration::from_secs(60), || cleanings(&broker) >= 1.0);
    assert!(cleaned, "good is cleaned while bad's cleaning fails");
    let after = support::log_bytes(&good);
    assert!(after < before / 2, "good: {before} bytes of log became {after}");
    let bad = support::log_bytes(&tmp.path().join("bad-0"));
    assert!(bad > after, "bad is not cleaned: {bad} bytes");
    drop(broker);
    drop(tmp);
}

/// Commits offsets of partitions `0..partitions` of topic "committed" for `group`, `rounds`
/// times (round `r` commits `offset(r, p)`), each acknowledged.
fn commit_rounds(c: &mut Client, group: &str, partitions: i32, rounds: i64) {
    use ringbroker::protocol::messages::offset_commit_request::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };
    use ringbroker::protocol::messages::{ApiKey, GroupId, OffsetCommitRequest, OffsetCommitResponse};
    use support::client::{sb, topic_name};
    for round in 0..rounds {
        let mut req = OffsetCommitRequest::default();
        req.group_id = GroupId(sb(group));
        req.generation_id_or_member_epoch = -1;
        req.member_id = sb("");
        let mut t = OffsetCommitRequestTopic::default();
        t.name = topic_name("committed");
        t.partitions = (0..partitions)
            .map(|p| {
                let mut x = OffsetCommitRequestPartition::default();
                x.partition_index = p;
                x.committed_offset = committed_offset(round, p);
                x
            })
            .collect();
        req.topics = vec![t];
        let resp: OffsetCommitResponse = c.call(ApiKey::OffsetCommit, 8, &req);
        assert!(resp.topics[0].partitions.iter().all(|p| p.error_code == 0), "round {round} committed");
    }
}

fn committed_offset(round: i64, partition: i32) -> i64 {
    round * 1_000 + partition as i64
}

/// The committed offsets of `group` for partitions `0..partitions` of "committed".
fn fetch_committed(c: &mut Client, group: &str, partitions: i32) -> Vec<(i32, i64)> {
    use ringbroker::protocol::messages::offset_fetch_request::{OffsetFetchRequestGroup, OffsetFetchRequestTopics};
    use ringbroker::protocol::messages::{ApiKey, GroupId, OffsetFetchRequest, OffsetFetchResponse};
    use support::client::{sb, topic_name};
    let mut g = OffsetFetchRequestGroup::default();
    g.group_id = GroupId(sb(group));
    g.member_epoch = -1;
    let mut t = OffsetFetchRequestTopics::default();
    t.name = topic_name("committed");
    t.partition_indexes = (0..partitions).collect();
    g.topics = Some(vec![t]);
    let mut req = OffsetFetchRequest::default();
    req.groups = vec![g];
    let resp: OffsetFetchResponse = c.call(ApiKey::OffsetFetch, 8, &req);
    let mut got: Vec<(i32, i64)> =
        resp.groups[0].topics[0].partitions.iter().map(|p| (p.partition_index, p.committed_offset)).collect();
    got.sort();
    got
}

/// The bytes of every `__consumer_offsets` partition in a data directory.
fn offsets_topic_bytes(data_dir: &std::path::Path) -> u64 {
    std::fs::read_dir(data_dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("__consumer_offsets-"))
        .map(|e| support::log_bytes(&e.path()))
        .sum::<u64>()
}

/// 100k offset commits to one group (1,000 commits of 100 partitions each): the cleaner keeps
/// `__consumer_offsets` small (only its newest segment of 1 MiB holds more than each
/// partition's latest commit), a restart replays what is left, and the offsets are exact.
#[test]
fn offset_commits_are_compacted_and_replay_exactly_after_a_restart() {
    const PARTITIONS: i32 = 100;
    const ROUNDS: i64 = 1_000;
    let args = ["--log-cleaner-backoff-ms", "200", "--offsets-topic-segment-bytes", "1048576"];
    let mut broker = support::Broker::start_args(&args);
    let tmp = broker.take_tempdir().unwrap();
    let mut c = Client::connect(broker.addr);
    assert_eq!(c.create_topic("committed", PARTITIONS, &[]).error_code, 0);
    commit_rounds(&mut c, "busy", PARTITIONS, ROUNDS);
    let small = wait_until(Duration::from_secs(60), || offsets_topic_bytes(tmp.path()) <= 5 << 20);
    assert!(small, "__consumer_offsets holds {} bytes", offsets_topic_bytes(tmp.path()));
    let want: Vec<(i32, i64)> = (0..PARTITIONS).map(|p| (p, committed_offset(ROUNDS - 1, p))).collect();
    assert_eq!(fetch_committed(&mut c, "busy", PARTITIONS), want);
    broker.stop();
    let listen = broker.addr.to_string();
    let started = std::time::Instant::now();
    let broker = support::restart(tmp.path(), &listen, &args);
    println!(
        "restart with {} bytes of __consumer_offsets: ready in {:?}",
        offsets_topic_bytes(tmp.path()),
        started.elapsed()
    );
    let mut c = Client::connect(broker.addr);
    assert_eq!(fetch_committed(&mut c, "busy", PARTITIONS), want, "the offsets replayed from the compacted log");
    drop(broker);
    drop(tmp);
}

/// In a cluster each broker cleans its own copy of a replicated compacted log (the raft log
/// starts past the cleaned records, so emptied batches go there as in a standalone log):
/// under 100k offset commits every broker's copy of `__consumer_offsets` (replicated on the
/// three brokers) stays within 5 MiB, and a compacted topic's copies shrink, each key's
/// latest value at its offset. A broker away meanwhile is sent the records in a snapshot,
/// and so is one that lost its partition directories; once the leader and the coordinator are killed the new ones serve the same records and
/// the exact committed offsets.
#[test]
fn every_broker_of_a_cluster_cleans_its_copy_of_a_replicated_compacted_log() {
    const PARTITIONS: i32 = 100;
    const ROUNDS: i64 = 1_000;
    let args = [
        "--log-cleaner-backoff-ms",
        "200",
        "--offsets-topic-segment-bytes",
        "65536",
        "--replica-lag-time-max-ms",
        "2000",
        "--retention-check-interval-ms",
        "500",
    ];
    let mut cluster = support::cluster::Cluster::start(3, &args);
    let configs = [("cleanup.policy", "compact"), ("segment.bytes", "65536"), ("min.cleanable.dirty.ratio", "0.01")];
    cluster.create_topic_with(TOPIC, 1, 3, &configs);
    // Committed to, never written: one copy of each partition is enough.
    cluster.create_topic("committed", PARTITIONS, 1);
    let leader = cluster.leader(TOPIC, 0).expect("a leader");
    let coordinator = cluster.coordinator("busy").expect("a coordinator");
    // One broker is away for most of the writes: by its return the raft logs start past it.
    let away = (1..=3).find(|&n| n != leader && n != coordinator).expect("a third broker");
    let mut c = Client::connect(cluster.addr(leader));
    let value = |i: usize| Some(format!("value-{i:06}-{}", "x".repeat(60)).into_bytes());
    let mut produced = produce(&mut c, 0, 1_000, value);
    commit_rounds(&mut Client::connect(cluster.addr(coordinator)), "busy", PARTITIONS, 10);
    cluster.stop(away);
    produced.extend(produce(&mut c, 1_000, 20_000, value));
    commit_rounds(&mut Client::connect(cluster.addr(coordinator)), "busy", PARTITIONS, ROUNDS);
    // What the two logs would hold uncleaned (the cleaner runs while they are written).
    let topic_before: u64 = (0..20_000 / PER_BATCH)
        .map(|b| {
            let recs: Vec<(Vec<u8>, Vec<u8>)> = (b * PER_BATCH..(b + 1) * PER_BATCH)
                .map(|j| (key(j), format!("value-{j:06}-{}", "x".repeat(60)).into_bytes()))
                .collect();
            let kvs: Vec<batch::KeyValue> =
                recs.iter().map(|(k, v)| (Some(k.as_slice()), Some(v.as_slice()))).collect();
            batch::build_keyed(now_ms(), &kvs).len() as u64
        })
        .sum();
    let one_round: Vec<ringbroker::group::offsets::Record> = (0..PARTITIONS)
        .map(|p| ringbroker::group::offsets::Record::Commit {
            group: "busy".into(),
            topic: "committed".into(),
            partition: p,
            value: ringbroker::group::Committed {
                offset: committed_offset(ROUNDS, p),
                leader_epoch: -1,
                metadata: None,
                commit_ts: now_ms(),
            },
        })
        .collect();
    let offsets_before = ROUNDS as u64 * ringbroker::group::offsets::to_batch(&one_round, now_ms()).len() as u64;
    let dirs: Vec<std::path::PathBuf> = (1..=3).map(|n| cluster.data_dir(n).to_path_buf()).collect();
    let small = |n: i32| {
        let dir = &dirs[n as usize - 1];
        let offsets = offsets_topic_bytes(dir);
        log_bytes(dir) * 4 < topic_before && offsets * 4 < offsets_before && offsets <= 5 << 20
    };
    let sizes = |c: &support::cluster::Cluster| -> Vec<(u64, u64)> {
        (1..=3).map(|n| (log_bytes(c.data_dir(n)), offsets_topic_bytes(c.data_dir(n)))).collect()
    };
    let cleaned = wait_until(Duration::from_secs(90), || (1..=3).filter(|&n| n != away).all(small));
    assert!(cleaned, "the copies shrink from {topic_before} and {offsets_before} bytes: {:?}", sizes(&cluster));
    check(&read_all(&mut c), &produced, false, "at the leader after cleaning");

    // The broker that was away is sent the cleaned records below the raft logs' starts in a
    // snapshot, then the entries after.
    std::thread::sleep(Duration::from_secs(1)); // a retention pass after the last cleaning
    cluster.restart(away);
    let dir = cluster.data_dir(away).join(format!("{TOPIC}-0"));
    let restored = wait_until(Duration::from_secs(60), || latest_ok(&on_disk(&dir), &produced) && small(away));
    assert!(restored, "the returning broker's copies hold each key's latest value, cleaned: {:?}", sizes(&cluster));
    println!(
        "cleaned copies (topic, __consumer_offsets) per broker: {:?}, from {topic_before} and {offsets_before}",
        sizes(&cluster)
    );
    // And again once its copies are lost with their directories.
    cluster.stop(away);
    for e in std::fs::read_dir(cluster.data_dir(away)).unwrap().filter_map(|e| e.ok()) {
        let name = e.file_name().to_string_lossy().into_owned();
        if name == format!("{TOPIC}-0") || name.starts_with("__consumer_offsets-") {
            std::fs::remove_dir_all(e.path()).unwrap();
        }
    }
    cluster.restart(away);
    // Its leaders believe it holds what it acknowledged until the next write to each log
    // shows them otherwise.
    produced.extend(produce(&mut c, 20_000, 20_100, value));
    commit_rounds(&mut Client::connect(cluster.addr(coordinator)), "another", 1, 1);
    let restored = wait_until(Duration::from_secs(60), || {
        latest_ok(&on_disk(&dir), &produced) && offsets_topic_bytes(&dirs[away as usize - 1]) > 0
    });
    assert!(restored, "a broker that lost its copies is sent them again: {:?}", sizes(&cluster));

    cluster.kill9(leader);
    let moved = wait_until(Duration::from_secs(30), || cluster.leader(TOPIC, 0).is_some_and(|l| l != leader));
    assert!(moved, "another broker leads");
    let mut n = Client::connect(cluster.addr(cluster.leader(TOPIC, 0).unwrap()));
    check(&read_all(&mut n), &produced, false, "at the new leader, from its own cleaned copy");
    let want: Vec<(i32, i64)> = (0..PARTITIONS).map(|p| (p, committed_offset(ROUNDS - 1, p))).collect();
    let exact = wait_until(Duration::from_secs(30), || {
        cluster.coordinator("busy").is_some_and(|at| {
            cluster.is_up(at) && fetch_committed(&mut Client::connect(cluster.addr(at)), "busy", PARTITIONS) == want
        })
    });
    assert!(exact, "a live coordinator answers the latest committed offsets");
}

/// The data records of a partition's segment files in `dir`, as written there.
fn on_disk(dir: &std::path::Path) -> Vec<Rec> {
    let mut logs: Vec<std::path::PathBuf> =
        std::fs::read_dir(dir).map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect()).unwrap_or_default();
    logs.retain(|p| p.extension().is_some_and(|x| x == "log"));
    logs.sort();
    let mut out = Vec::new();
    for bytes in logs.iter().filter_map(|p| std::fs::read(p).ok()) {
        let mut at = 0;
        while let Some(Ok(size)) = batch::batch_size(&bytes[at..]) {
            let Some(b) = bytes.get(at..at + size) else { break };
            let h = batch::read_header(b).unwrap();
            if !h.is_control() {
                for r in batch::records(b) {
                    let (k, v) = (r.key.unwrap_or_default().to_vec(), r.value.map(<[u8]>::to_vec));
                    out.push((h.base_offset + i64::from(r.offset_delta), k, v));
                }
            }
            at += size;
        }
    }
    out
}

/// Whether the latest record of each key `produced` wrote is the last one `got` holds for it.
fn latest_ok(got: &[Rec], produced: &[Rec]) -> bool {
    let latest: BTreeMap<&Vec<u8>, &Rec> = produced.iter().map(|r| (&r.1, r)).collect();
    let seen: BTreeMap<&Vec<u8>, &Rec> = got.iter().map(|r| (&r.1, r)).collect();
    latest == seen
}

/// A group's membership is stored in `__consumer_offsets` (Kafka's GroupMetadataValue) when a
/// rebalance completes and when the group empties: after kill -9 the restarted coordinator
/// knows the member, its generation and its assignment, so the member carries on without a
/// rebalance; and an emptied group keeps counting generations, never handing out one a stale
/// member of an earlier coordinator could still hold.
#[test]
fn a_groups_membership_survives_kill_9_and_its_generation_is_never_reused() {
    use ringbroker::protocol::messages::join_group_request::JoinGroupRequestProtocol;
    use ringbroker::protocol::messages::leave_group_request::MemberIdentity;
    use ringbroker::protocol::messages::sync_group_request::SyncGroupRequestAssignment;
    use ringbroker::protocol::messages::{
        ApiKey, DescribeGroupsRequest, DescribeGroupsResponse, GroupId, HeartbeatRequest, HeartbeatResponse,
        JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse, SyncGroupRequest,
        SyncGroupResponse,
    };
    use support::client::sb;
    const GROUP: &str = "kept";
    const ASSIGNMENT: &[u8] = b"\0\0\0\0\0\x01\0\x04kept\0\0\0\x01\0\0\0\0\xff\xff\xff\xff";

    let join = |c: &mut Client| -> (String, i32) {
        let mut p = JoinGroupRequestProtocol::default();
        p.name = sb("range");
        p.metadata = bytes::Bytes::from_static(b"\0\0\0\0\0\x01\0\x04kept\xff\xff\xff\xff");
        let mut req = JoinGroupRequest::default();
        req.group_id = GroupId(sb(GROUP));
        req.session_timeout_ms = 30_000;
        req.rebalance_timeout_ms = 30_000;
        req.member_id = sb("");
        req.protocol_type = sb("consumer");
        req.protocols = vec![p];
        let first: JoinGroupResponse = c.call(ApiKey::JoinGroup, 9, &req);
        assert_eq!(first.error_code, 79, "MEMBER_ID_REQUIRED");
        req.member_id = first.member_id;
        let r: JoinGroupResponse = c.call(ApiKey::JoinGroup, 9, &req);
        assert_eq!(r.error_code, 0, "joined");
        (r.member_id.to_string(), r.generation_id)
    };
    let heartbeat = |c: &mut Client, member: &str, generation: i32| -> i16 {
        let mut req = HeartbeatRequest::default();
        req.group_id = GroupId(sb(GROUP));
        req.member_id = sb(member);
        req.generation_id = generation;
        let r: HeartbeatResponse = c.call(ApiKey::Heartbeat, 4, &req);
        r.error_code
    };
    let describe = |c: &mut Client| -> (String, Vec<(String, Vec<u8>)>) {
        let mut req = DescribeGroupsRequest::default();
        req.groups = vec![GroupId(sb(GROUP))];
        let r: DescribeGroupsResponse = c.call(ApiKey::DescribeGroups, 5, &req);
        let g = &r.groups[0];
        let members = g.members.iter().map(|m| (m.member_id.to_string(), m.member_assignment.to_vec())).collect();
        (g.group_state.to_string(), members)
    };

    let args = ["--group-initial-rebalance-delay-ms", "0"];
    let mut broker = support::Broker::start_args(&args);
    let tmp = broker.take_tempdir().unwrap();
    let listen = broker.addr.to_string();
    let mut c = Client::connect(broker.addr);
    assert_eq!(c.create_topic(GROUP, 1, &[]).error_code, 0);
    let (member, generation) = join(&mut c);
    let mut a = SyncGroupRequestAssignment::default();
    a.member_id = sb(&member);
    a.assignment = bytes::Bytes::from_static(ASSIGNMENT);
    let mut req = SyncGroupRequest::default();
    req.group_id = GroupId(sb(GROUP));
    req.generation_id = generation;
    req.member_id = sb(&member);
    req.assignments = vec![a];
    let r: SyncGroupResponse = c.call(ApiKey::SyncGroup, 5, &req);
    assert_eq!((r.error_code, &r.assignment[..]), (0, ASSIGNMENT));

    broker.kill9();
    let broker = support::restart(tmp.path(), &listen, &args);
    let mut c = Client::connect(broker.addr);
    assert_eq!(heartbeat(&mut c, &member, generation), 0, "the member carries on with its generation");
    assert_eq!(heartbeat(&mut c, &member, generation - 1), 22, "ILLEGAL_GENERATION for an older one");
    assert_eq!(describe(&mut c), ("Stable".to_string(), vec![(member.clone(), ASSIGNMENT.to_vec())]));

    let mut m = MemberIdentity::default();
    m.member_id = sb(&member);
    let mut req = LeaveGroupRequest::default();
    req.group_id = GroupId(sb(GROUP));
    req.members = vec![m];
    let r: LeaveGroupResponse = c.call(ApiKey::LeaveGroup, 5, &req);
    assert_eq!(r.error_code, 0);
    assert_eq!(describe(&mut c).0, "Empty");
    let mut broker = broker;
    broker.kill9();
    let broker = support::restart(tmp.path(), &listen, &args);
    let mut c = Client::connect(broker.addr);
    assert_eq!(describe(&mut c).0, "Empty", "the emptied group is known after the restart");
    let (_, next) = join(&mut c);
    assert_eq!(next, generation + 2, "generations go on from the emptied group's, never back to 1");
    drop(broker);
    drop(tmp);
}
