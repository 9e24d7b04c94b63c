//! Interop with the Apache Kafka Java client (kafka-clients 4.x, tests/java): for each
//! compression codec, create a 3-partition topic with AdminClient, produce 10,000 keyed records
//! with headers (acks=all), and read them all back by assignment, checking every key, value,
//! header, timestamp and acknowledged offset (see tests/java/.../Roundtrip.java). Then the
//! same with the broker recompressing into a topic's codec at a topic's level.

use support::java;
use support::Broker;

use crate::machine;

const RECORDS: &str = "10000";

fn roundtrip(codec: &str) {
    roundtrip_with(codec, "");
}

/// A roundtrip whose topic is created with `topic_configs` (`K=V,...`).
fn roundtrip_with(codec: &str, topic_configs: &str) {
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
        "--topic-config",
        topic_configs,
    ];
    let out = java::run(&args);
    assert!(
        out.status.success(),
        "Java roundtrip with compression={codec}, topic configs {topic_configs:?} failed ({}):\n{}",
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

/// The broker recompresses the producer's batches for the topic's codec at the topic's level
/// (lz4 at its default, the fast compressor, and at a high-compression level; zstd at a
/// strong level); the Java consumer reads them back.
#[test]
fn java_reads_batches_the_broker_recompressed_at_a_topic_level() {
    roundtrip_with("none", "compression.type=lz4");
    roundtrip_with("none", "compression.type=lz4,compression.lz4.level=12");
    roundtrip_with("gzip", "compression.type=zstd,compression.zstd.level=19");
}
