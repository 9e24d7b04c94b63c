//! Fetch sessions (KIP-227) with the Java consumer: it keeps one once the broker hands it a
//! session id, and from then on sends incremental fetches. The roundtrip harness consumes a
//! topic of many partitions by assignment, 16 KiB per partition and fetch (so each partition
//! takes several fetches), and checks that every acknowledged record arrives
//! exactly once, in order; the broker's metrics then show the incremental fetches it served,
//! and that the consumer's close (a fetch with epoch -1) left no session behind.

use std::time::{Duration, Instant};

use support::java;
use support::{metric_sum, scrape, Broker};

use crate::machine;

#[test]
fn java_consumer_fetches_many_partitions_incrementally_and_gets_every_record_once() {
    java::classpath();
    let _alone = machine::alone();
    let broker = Broker::start_args(&["--flush", "os"]);
    let admin = broker.admin_addr.expect("the test broker runs an admin listener");
    let bootstrap = broker.bootstrap();
    let args = [
        "roundtrip",
        "--bootstrap",
        &bootstrap,
        "--topic",
        "java-fetch-sessions",
        "--partitions",
        "48",
        "--records",
        "12000",
        "--max-partition-fetch-bytes",
        "16384",
        "--timeout-sec",
        "90",
    ];
    let out = java::run(&args);
    assert!(
        out.status.success(),
        "Java roundtrip over 48 partitions failed ({}):\n{}",
        out.status,
        java::tail(&out, 40)
    );

    let page = scrape(admin);
    let incremental = metric_sum(&page, "ringbroker_incremental_fetches_total", &[]);
    assert!(incremental >= 1.0, "the consumer never sent an incremental fetch:\n{page}");
    println!("incremental fetches served: {incremental}");
    assert_eq!(metric_sum(&page, "ringbroker_fetch_session_evictions_total", &[]), 0.0);
    let errors: Vec<&str> = page
        .lines()
        .filter(|l| l.starts_with("ringbroker_request_errors_total") && l.contains("api=\"Fetch\""))
        .collect();
    assert_eq!(
        metric_sum(&page, "ringbroker_request_errors_total", &["api=\"Fetch\""]),
        0.0,
        "no fetch answered a session error or a partition error: {errors:?}"
    );
    // The consumer closes its session on close; the close fetch may still be in flight.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let page = scrape(admin);
        let left = metric_sum(&page, "ringbroker_fetch_sessions", &[]);
        if left == 0.0 {
            break;
        }
        assert!(Instant::now() < deadline, "{left} fetch sessions left after the consumer closed:\n{page}");
        std::thread::sleep(Duration::from_millis(100));
    }
}
