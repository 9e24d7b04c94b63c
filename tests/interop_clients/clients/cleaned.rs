//! kcat (librdkafka 2.0), kafka-python, kafkajs, franz-go and sarama read a replicated compacted topic that
//! its brokers cleaned. Each replica cleans its copy keeping every batch (each is a raft
//! entry, numbered one after another), so most of the batches a consumer fetches from such a
//! topic are empty, some only their header: a client must step over them to the end and
//! read exactly what the leader holds (each key's latest record, a tombstone included, at its
//! offset, and the active segment's records, which are never cleaned).

use std::collections::BTreeMap;
use std::time::Duration;

use ringbroker::protocol::batch;
use support::client::{now_ms, wait_until, Client};
use support::cluster::Cluster;

use super::{installed, Driver, Kcat, Script, SERIAL};

const TOPIC: &str = "cleaned";
/// Records as (offset, key, value), a tombstone's value `None`.
type Stored = Vec<(i64, Vec<u8>, Option<Vec<u8>>)>;
const KEYS: usize = 50;
/// Keys whose latest record is a tombstone (kept: `delete.retention.ms` is a day).
const DELETED: usize = 5;

#[test]
fn every_client_reads_a_cleaned_replicated_compacted_topic_past_its_emptied_batches() {
    installed();
    let drivers: [Box<dyn Driver>; 5] = [
        Box::new(Kcat::find()),
        Box::new(Script::kafka_python()),
        Box::new(Script::kafkajs()),
        Box::new(Script::go("franz")),
        Box::new(Script::go("sarama")),
    ];
    let _one_at_a_time = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cluster = Cluster::start(3, &["--log-cleaner-backoff-ms", "200"]);
    let configs = [("cleanup.policy", "compact"), ("segment.bytes", "16384"), ("min.cleanable.dirty.ratio", "0.01")];
    cluster.create_topic_with(TOPIC, 1, 3, &configs);
    let leader = cluster.leader(TOPIC, 0).expect("a leader");
    let mut c = Client::connect(cluster.addr(leader));

    // 100 batches of 20 records over KEYS keys; the last batch deletes DELETED of them.
    let mut latest: BTreeMap<Vec<u8>, (i64, Option<Vec<u8>>)> = BTreeMap::new();
    for b in 0..100 {
        let recs: Vec<(Vec<u8>, Option<Vec<u8>>)> = (b * 20..b * 20 + 20)
            .map(|i| {
                let deleted = b == 99 && i % 20 < DELETED;
                (format!("key-{}", i % KEYS).into_bytes(), (!deleted).then(|| format!("value-{i:>80}").into_bytes()))
            })
            .collect();
        let kvs: Vec<batch::KeyValue> = recs.iter().map(|(k, v)| (Some(k.as_slice()), v.as_deref())).collect();
        let base = c.produce_ok(TOPIC, 0, batch::build_keyed(now_ms(), &kvs));
        for (d, (k, v)) in recs.into_iter().enumerate() {
            latest.insert(k, (base + d as i64, v));
        }
    }
    let stored = |c: &mut Client| -> Stored {
        let records = c.fetch_all(TOPIC, 0, 0).into_iter().filter(|r| !r.control);
        records.map(|r| (r.offset, r.key.expect("a key"), r.value)).collect()
    };
    // Cleaned, a superseded record remains only in the active segment, which is never
    // cleaned: 16 KiB holds fewer than TAIL of these ~100-byte records.
    const TAIL: i64 = 200;
    let last = latest.values().map(|(o, _)| *o).max().expect("records");
    let cleaned =
        |log: &Stored| log.iter().all(|(o, k, _)| *o > last - TAIL || latest.get(k).is_some_and(|(at, _)| at == o));
    // Settled: cleaned, and the same over three reads 300 ms apart (the cleaner looks every
    // 200 ms), so the clients below all read one log.
    let mut seen: Vec<Stored> = Vec::new();
    let settled = wait_until(Duration::from_secs(60), || {
        std::thread::sleep(Duration::from_millis(250));
        seen.push(stored(&mut c));
        seen.len() >= 3 && seen[seen.len() - 3..].iter().all(|l| cleaned(l) && *l == seen[seen.len() - 1])
    });
    let want = seen.pop().expect("a read");
    assert!(settled, "the leader's log was cleaned and settled: {}", show(&want));
    let last_of_each: BTreeMap<Vec<u8>, (i64, Option<Vec<u8>>)> =
        want.iter().map(|(o, k, v)| (k.clone(), (*o, v.clone()))).collect();
    assert!(last_of_each == latest, "the leader serves each key's latest record at its offset: {}", show(&want));
    for d in &drivers {
        let got = d.read_assigned(&cluster.bootstrap(), TOPIC, want.len(), None);
        let got: Stored = got.into_iter().map(|g| (g.offset, g.rec.key, g.rec.value)).collect();
        assert!(got == want, "[{}] read {}; the leader holds {}", d.name(), show(&got), show(&want));
        assert!(stored(&mut c) == want, "the log did not change while [{}] read it", d.name());
        println!("[{}] read the {} records the cleaning left, in order", d.name(), got.len());
    }
}

/// Offsets and keys, for a failure message.
fn show(records: &Stored) -> String {
    let each: Vec<String> = records
        .iter()
        .map(|(o, k, v)| format!("{o}:{}{}", String::from_utf8_lossy(k), if v.is_none() { "(deleted)" } else { "" }))
        .collect();
    format!("{} records [{}]", records.len(), each.join(" "))
}
