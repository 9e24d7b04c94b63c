//! The load tool against a real broker: a short fixed-rate run and a consume-from-beginning
//! run, checking the report's counts and files (never its timings).

use std::time::Duration;

use ringbroker::protocol::records::Compression;

fn config(broker: std::net::SocketAddr) -> ringbench::Config {
    ringbench::Config {
        broker,
        topic: "bench".into(),
        partitions: 4,
        producers: 2,
        connections: None,
        consumers: 2,
        rate: 4_000.0,
        record_size: 100,
        key_size: 0,
        key_space: 0,
        compression: Compression::None,
        batch_records: 10,
        acks: -1,
        max_in_flight: 5,
        duration: Duration::from_secs(3),
        records: None,
        warmup: Duration::ZERO,
        from_beginning: false,
        group: None,
        rewind: false,
        consume_records: None,
        progress: false,
        broker_pid: None,
    }
}

#[test]
fn a_fixed_rate_run_accounts_for_every_record_and_writes_its_report() {
    let broker = support::Broker::start_args(&["--flush", "os"]);
    let cfg = ringbench::Config { broker_pid: broker.pid(), ..config(broker.addr) };
    let out = ringbench::run(&cfg).expect("run");
    assert!(out.records_sent > 0);
    assert_eq!(out.records_sent, out.records_acked, "every record acknowledged");
    assert_eq!(out.records_acked, out.records_consumed, "every acknowledged record consumed");
    assert_eq!(out.produce_errors, 0);
    // no warm-up: every acknowledged record is in the publish histogram, every consumed one
    // in the end-to-end histogram, every batch in the publish-delay histogram
    assert_eq!(out.publish_latency.len(), out.records_acked);
    assert_eq!(out.e2e_latency.len(), out.records_consumed);
    assert_eq!(out.publish_delay.len() * cfg.batch_records as u64, out.records_sent);

    let dir = tempfile::tempdir().unwrap();
    let report = ringbench::report::Report::new(&cfg, &out, "ringbench test".into());
    ringbench::report::write(dir.path(), &report, &out).unwrap();
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("report.json")).unwrap()).unwrap();
    assert_eq!(json["records_sent"], out.records_sent);
    assert_eq!(json["records_consumed"], out.records_consumed);
    assert_eq!(json["publish_latency_ms"]["count"], out.records_acked);
    assert!(json["machine"]["cores"].as_u64().unwrap() >= 1);
    assert_eq!(json["compression"], "none");
    assert!(json["consume_rate"].as_f64().unwrap() > 0.0, "records were consumed in the measured window");
    assert!(json["publish_latency_ms"]["p99"].as_f64().unwrap() > 0.0);
    // The broker worked for those records, and that work is put against the bytes moved.
    let cpu = json["broker_cpu_s"].as_f64().expect("the broker's CPU time, given its pid");
    assert!(cpu > 0.0, "the broker spent CPU on the run: {cpu}");
    let moved_gb = (out.records_acked + out.records_consumed) as f64 * cfg.record_size as f64 / 1e9;
    let per_gb = json["broker_cpu_s_per_gb"].as_f64().expect("CPU per GB");
    assert!((per_gb - cpu / moved_gb).abs() <= 1e-6 * per_gb, "{per_gb} = {cpu} / {moved_gb}");
    for f in ["publish-latency.hgrm", "publish-delay.hgrm", "end-to-end-latency.hgrm"] {
        let text = std::fs::read_to_string(dir.path().join(f)).unwrap();
        assert!(text.contains("Total count"), "{f}: {text}");
    }
    assert!(std::fs::read_to_string(dir.path().join("latency.svg")).unwrap().contains("<polyline"));
}

#[test]
fn compressed_keyed_records_are_all_acknowledged_and_consumed() {
    let broker = support::Broker::start_args(&["--flush", "os"]);
    for (topic, compression) in [("zstd", Compression::Zstd), ("lz4", Compression::Lz4), ("gzip", Compression::Gzip)] {
        let cfg = ringbench::Config {
            topic: topic.into(),
            key_size: 12,
            key_space: 0,
            compression,
            duration: Duration::from_secs(2),
            ..config(broker.addr)
        };
        let out = ringbench::run(&cfg).unwrap_or_else(|e| panic!("{topic}: {e:#}"));
        assert!(out.records_sent > 0, "{topic}");
        assert_eq!(out.records_sent, out.records_acked, "{topic}: every record acknowledged");
        assert_eq!(out.records_acked, out.records_consumed, "{topic}: every record decompressed and consumed");
        assert_eq!(out.e2e_latency.len(), out.records_consumed, "{topic}: each value's timestamp survived");
    }
}

#[test]
fn group_consumers_share_the_partitions_and_resume_from_their_commits() {
    let broker = support::Broker::start_args(&["--flush", "os"]);
    let fill = ringbench::Config { rate: 0.0, consumers: 0, records: Some(5_000), ..config(broker.addr) };
    assert_eq!(ringbench::run(&fill).expect("fill").records_acked, 5_000);
    let group = Some("bench-group".to_string());
    let read = ringbench::Config {
        producers: 0,
        consumers: 2,
        from_beginning: true,
        group: group.clone(),
        ..config(broker.addr)
    };
    let out = ringbench::run(&read).expect("group consume");
    assert_eq!(out.records_consumed, 5_000, "each record read once by one of the two members");
    // The same group again, while 2,000 more records arrive: it starts at its commits, so it
    // reads the new records and none of the first 5,000.
    let more = ringbench::Config { rate: 0.0, records: Some(2_000), consumers: 2, group, ..config(broker.addr) };
    let out = ringbench::run(&more).expect("produce and group consume");
    assert_eq!((out.records_acked, out.records_consumed), (2_000, 2_000));
}

#[test]
fn a_consume_run_reads_the_whole_log_from_the_beginning() {
    let broker = support::Broker::start_args(&["--flush", "os"]);
    let fill = ringbench::Config { rate: 0.0, consumers: 0, records: Some(20_000), ..config(broker.addr) };
    let produced = ringbench::run(&fill).expect("fill");
    assert_eq!(produced.records_acked, 20_000);
    assert_eq!(produced.measured_acked, 20_000, "no warm-up: the whole run is measured");
    let read = ringbench::Config { producers: 0, consumers: 3, from_beginning: true, ..config(broker.addr) };
    let out = ringbench::run(&read).expect("consume");
    assert_eq!(out.records_consumed, 20_000);
    assert_eq!(out.records_sent, 0);
    // Rewinding consumers read the log again and again for the duration: whole passes of
    // every partition, so more than one pass's records.
    let again = ringbench::Config { rewind: true, duration: Duration::from_secs(2), ..read };
    let out = ringbench::run(&again).expect("rewinding consume");
    assert!(out.records_consumed > 20_000, "read {} records in 2 s of passes", out.records_consumed);
}

#[test]
fn the_null_broker_acknowledges_and_serves_verifiable_batches() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let null =
        ringbench::null_broker::NullConfig { partitions: 3, records: 1_000, record_size: 100, batch_records: 10 };
    std::thread::spawn(move || ringbench::null_broker::serve_on(listener, null));
    let produce = ringbench::Config { consumers: 0, records: Some(5_000), rate: 0.0, ..config(addr) };
    let out = ringbench::run(&produce).expect("produce to the null broker");
    assert_eq!((out.records_sent, out.records_acked), (5_000, 5_000));
    let consume = ringbench::Config { producers: 0, consumers: 2, from_beginning: true, ..config(addr) };
    let out = ringbench::run(&consume).expect("consume from the null broker");
    assert_eq!(out.records_consumed, 3 * 1_000, "every pretended record, each batch checked by offset");
}

#[test]
fn producers_spread_over_more_connections_account_for_every_record() {
    let broker = support::Broker::start_args(&["--flush", "os"]);
    // 2 producer threads over 9 connections (5 and 4), into 7 partitions
    let cfg = ringbench::Config { topic: "spread".into(), partitions: 7, connections: Some(9), ..config(broker.addr) };
    let out = ringbench::run(&cfg).expect("paced run over 9 connections");
    assert_eq!(out.partitions, 7);
    assert!(out.records_sent > 0);
    assert_eq!(out.records_sent, out.records_acked, "every record acknowledged");
    assert_eq!(out.records_acked, out.records_consumed, "every acknowledged record consumed");
    assert_eq!(out.publish_latency.len(), out.records_acked, "a latency for every acknowledged record");
    assert_eq!(out.publish_delay.len() * cfg.batch_records as u64, out.records_sent);
    let fill = ringbench::Config { rate: 0.0, consumers: 0, records: Some(5_003), ..cfg };
    let out = ringbench::run(&fill).expect("unpaced run over 9 connections");
    assert_eq!((out.records_sent, out.records_acked, out.produce_errors), (5_003, 5_003, 0));
    let few = ringbench::Config { connections: Some(1), ..fill };
    assert!(ringbench::run(&few).is_err(), "fewer connections than producers");
}
