//! Stopping under load: SIGTERM while producers are sending with acks=all ends the broker with
//! success, every acknowledged record is in the log after a restart, and that restart opens
//! the logs without scanning them (the clean-shutdown markers did their job). A kill -9 of the
//! same broker afterwards does make the next start scan, which shows the check can fail.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use support::client::{batch, now_ms, value, wait_until, Client};
use support::{restart, Broker};

const TOPIC: &str = "busy";
const PARTITIONS: i32 = 3;

/// Produces one-record batches to `partition` with acks=all, one at a time, until the broker
/// stops answering; returns the acknowledged (offset, value) pairs.
fn produce_until_refused(addr: SocketAddr, partition: i32, sent: Arc<AtomicUsize>) -> Vec<(i64, Vec<u8>)> {
    let mut c = Client::connect(addr);
    let mut acked = Vec::new();
    for i in 0.. {
        let v = value(&format!("p{partition}"), i, 200);
        // The test client panics when the connection drops mid-request: that is the end of
        // this producer, not a failure of the test.
        let answer = std::panic::catch_unwind(AssertUnwindSafe(|| {
            c.produce(TOPIC, partition, batch(now_ms(), std::slice::from_ref(&v)))
        }));
        match answer {
            Ok(p) if p.error_code == 0 => {
                acked.push((p.base_offset, v));
                sent.fetch_add(1, Ordering::Relaxed);
            }
            // Refused while shutting down (or closed): nothing more will be acknowledged.
            Ok(_) | Err(_) => break,
        }
    }
    acked
}

/// The broker's total of `ringbroker_log_recoveries_total` over its shards.
fn recoveries(b: &Broker) -> f64 {
    let text = support::scrape(b.admin_addr.expect("test brokers run an admin listener"));
    support::metric_sum(&text, "ringbroker_log_recoveries_total", &[])
}

#[test]
fn sigterm_under_load_keeps_every_acked_record_and_the_restart_skips_recovery() {
    let mut b = Broker::start_args(&["--flush", "always"]);
    let dir = b.take_tempdir().expect("the broker's data dir");
    let listen = b.addr.to_string();
    Client::connect(b.addr).create_topic(TOPIC, PARTITIONS, &[]);

    let sent = Arc::new(AtomicUsize::new(0));
    let producers: Vec<_> = (0..PARTITIONS)
        .map(|p| {
            let (addr, sent) = (b.addr, sent.clone());
            std::thread::spawn(move || produce_until_refused(addr, p, sent))
        })
        .collect();
    // Stop once the producers are well under way, while requests are in flight.
    assert!(wait_until(Duration::from_secs(30), || sent.load(Ordering::Relaxed) >= 300), "producers never got going");
    let status = b.stop().expect("the broker exits after SIGTERM");
    assert!(status.success(), "SIGTERM under load should end the broker with success, got {status:?}");
    let acked: BTreeMap<i32, Vec<(i64, Vec<u8>)>> =
        producers.into_iter().enumerate().map(|(p, t)| (p as i32, t.join().expect("producer thread"))).collect();
    for p in 0..PARTITIONS {
        let marker = dir.path().join(format!("{TOPIC}-{p}")).join(".clean-shutdown");
        assert!(marker.exists(), "{TOPIC}-{p} was not marked clean");
    }

    let b = restart(dir.path(), &listen, &["--flush", "always"]);
    assert_eq!(recoveries(&b), 0.0, "a start after a clean stop scans no log");
    let mut c = Client::connect(b.addr);
    for (p, records) in &acked {
        assert!(!records.is_empty(), "partition {p} had acknowledged records");
        let log: BTreeMap<i64, Vec<u8>> =
            c.fetch_all(TOPIC, *p, 0).into_iter().map(|r| (r.offset, r.value.unwrap_or_default())).collect();
        for (offset, v) in records {
            assert_eq!(log.get(offset), Some(v), "{TOPIC}-{p}: acknowledged record at {offset} is missing or changed");
        }
    }
    // New appends continue after the acknowledged ones.
    let next = c.produce_ok(TOPIC, 0, batch(now_ms(), &[b"after".to_vec()]));
    assert!(next > acked[&0].last().unwrap().0, "offsets continue after a clean restart");

    // An unclean stop, for contrast: the next start has to scan (at least the partition just
    // written), and says so.
    let mut b = b;
    b.kill9();
    let b = restart(dir.path(), &listen, &["--flush", "always"]);
    assert!(recoveries(&b) >= 1.0, "a start after kill -9 scans the unclean logs");
}
