//! Interop with the Apache Kafka Java client (kafka-clients 4.x, tests/java): for each
//! compression codec, create a 3-partition topic with AdminClient, produce 10,000 keyed records
//! with headers (acks=all), and read them all back by assignment, checking every key, value,
//! header, timestamp and acknowledged offset (see tests/java/.../Roundtrip.java).

use support::java;
use support::Broker;

use crate::machine;

const RECORDS: &str = "10000";

fn roundtrip(codec: &str) {
    // Build the harness before the broker starts, so Maven's time is not the broker's.
    java::classpath();
    // One roundtrip at a time: a JVM plus a thread-per-core broker per test would oversubscribe a
    // small machine and turn the client's timeouts into flakes.
    let _alone = machine::alone();
    let broker = Broker::start_args(&["--flush", "os"]);
    let bootstrap = broker.bootstrap();
    let topic = format!("java-roundtrip-{codec}");
    let args = [
        "roundtrip",
        "--bootstrap",
        &bootstrap,
        "--topic",
        &topic,
        "--partitions",
        "3",
        "--records",
        RECORDS,
        "--compression",
        codec,
        "--timeout-sec",
        "60",
    ];
    let out = java::run(&args);
    assert!(
        out.status.success(),
        "Java roundtrip with compression={codec} failed ({}):\n{}",
        out.status,
        java::tail(&out, 40)
    );
}

#[test]
fn java_roundtrip_none() {
    roundtrip("none");
}

#[test]
fn java_roundtrip_gzip() {
    roundtrip("gzip");
}

#[test]
fn java_roundtrip_snappy() {
    roundtrip("snappy");
}

#[test]
fn java_roundtrip_lz4() {
    roundtrip("lz4");
}

#[test]
fn java_roundtrip_zstd() {
    roundtrip("zstd");
}
