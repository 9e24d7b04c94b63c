//! Kafka Streams against the broker (`streams-wordcount`, tests/java/.../StreamsWordCount.java):
//! a word count whose state store lives in a compacted changelog topic, through a repartition
//! topic. The app counts every word exactly; its local state is then wiped and, with more
//! lines written meanwhile, a new run restores the store from the changelog (which the
//! cleaner compacts) and counts exactly again. Streams creates its internal topics with the
//! configs it asks for, and purges its repartition topic with DeleteRecords.

use std::collections::BTreeMap;
use std::time::Duration;

use support::client::{batch, now_ms, wait_until, Client};
use support::{java, Broker};

use crate::machine;

const APP: &str = "wc";
const INPUT: &str = "lines";
const WORDS: &[&str] = &["kafka", "streams", "ring", "broker", "log", "compaction", "raft", "shard", "fetch", "commit"];

/// Writes `n` lines from line `from` on (line i holds a few words picked by i), to partition
/// i % 3; adds their words to `counts`.
fn write_lines(c: &mut Client, from: usize, n: usize, counts: &mut BTreeMap<String, u64>) {
    for i in from..from + n {
        let words: Vec<&str> = (0..1 + i % 4).map(|j| WORDS[(i * 7 + j * 3) % WORDS.len()]).collect();
        for w in &words {
            *counts.entry(w.to_string()).or_default() += 1;
        }
        let line = words.join(" ").into_bytes();
        c.produce_ok(INPUT, (i % 3) as i32, batch(now_ms(), &[line]));
    }
}

fn expect_file(dir: &std::path::Path, counts: &BTreeMap<String, u64>) -> String {
    let path = dir.join("expected.txt");
    let text: String = counts.iter().map(|(w, n)| format!("{w} {n}\n")).collect();
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// One run of the app until its store holds `counts`; the records it restored at start.
fn count(b: &str, state: &std::path::Path, expect: &str) -> u64 {
    let state = state.display().to_string();
    let out = java::run(&[
        "streams-wordcount",
        "--bootstrap",
        b,
        "--app-id",
        APP,
        "--input",
        INPUT,
        "--state-dir",
        &state,
        "--expect-file",
        expect,
        "--timeout-sec",
        "120",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success() && stdout.contains("COUNTS OK"), "the word counts:\n{}", java::tail(&out, 40));
    let restored = stdout.lines().find_map(|l| l.strip_prefix("RESTORED ")).expect("a RESTORED line");
    restored.trim().parse().unwrap()
}

#[test]
fn kafka_streams_restores_its_counts_from_a_compacted_changelog() {
    let _machine = machine::alone();
    java::classpath();
    // Small segments and a quick cleaner, so that the changelog is compacted while it counts.
    let broker = Broker::start_args(&["--flush", "os", "--segment-bytes", "4096", "--log-cleaner-backoff-ms", "300"]);
    let b = broker.bootstrap();
    let mut c = Client::connect(broker.addr);
    assert_eq!(c.create_topic(INPUT, 3, &[]).error_code, 0);
    let dir = tempfile::tempdir().unwrap();
    let mut counts = BTreeMap::new();
    write_lines(&mut c, 0, 1_500, &mut counts);
    // With no record cache, every word counted is one update in the changelog.
    let updates: u64 = counts.values().sum();
    let first = count(&b, &dir.path().join("state-1"), &expect_file(dir.path(), &counts));
    assert_eq!(first, 0, "a first run has nothing to restore");

    // Streams made its internal topics: the changelog compacted, the repartition topic purged.
    let changelog = format!("{APP}-counts-changelog");
    let repartition = format!("{APP}-counts-repartition");
    let md = c.metadata(Some(&[changelog.as_str(), repartition.as_str()]), false);
    assert!(md.topics.iter().all(|t| t.error_code == 0), "{:?}", md.topics);
    // The app has stopped: it purged while it ran (it runs on for six purge intervals after
    // its counts match), so this only waits for the broker's answer to be visible.
    let purged = wait_until(Duration::from_secs(10), || (0..3).any(|p| c.earliest(&repartition, p) > 0));
    assert!(purged, "Streams deleted the records it had read from {repartition}");

    // Local state gone; more lines meanwhile: the next run restores from the changelog.
    write_lines(&mut c, 1_500, 1_000, &mut counts);
    let restored = count(&b, &dir.path().join("state-2"), &expect_file(dir.path(), &counts));
    assert!(restored > 0, "the store was restored from {changelog}");
    assert!(
        restored * 2 < updates,
        "restored {restored} of the {updates} updates written: the cleaner compacted the changelog"
    );
}
