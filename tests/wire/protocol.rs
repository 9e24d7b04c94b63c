//! Wire-protocol tests against the real broker binary, with the tests' client
//! (`support::client`, over the library's `ringbroker::client::Conn`): API versions, framing and hostile input, pipelining, Produce, Fetch
//! (including delayed fetches and KIP-74 sizing), ListOffsets, topic administration,
//! Metadata, DescribeConfigs and DescribeCluster. Each test starts its own broker (one shard
//! per CPU, so partitions of one topic live on different shards).

use std::collections::BTreeSet;
use std::time::Duration;

use bytes::Bytes;
use ringbroker::protocol::messages::delete_topics_request::DeleteTopicState;
use ringbroker::protocol::messages::describe_configs_request::DescribeConfigsResource;
use ringbroker::protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, DeleteTopicsRequest, DeleteTopicsResponse, DescribeClusterRequest,
    DescribeClusterResponse, DescribeConfigsRequest, DescribeConfigsResponse, FetchResponse, ListOffsetsResponse,
    MetadataResponse, ProduceResponse,
};
use ringbroker::protocol::ErrorCode;
use ringbroker::protocol::{Decodable, Encodable};
use support::client;
use support::client::{
    batch, build_batch_with_timestamps, decode_batches, decode_records, fetch_partition, fetch_request,
    fetch_request_by_id, list_offsets_request, metadata_request, new_topic, now_ms, produce_request, sb, single_fetch,
    single_produce, topic_name, value, Client, FETCH_V, LIST_OFFSETS_V, METADATA_V, PRODUCE_V,
};
use support::Broker;

/// How long a test waits for the broker to close a connection it should close.
const CLOSE_LIMIT: Duration = Duration::from_secs(10);

fn values(tag: &str, n: usize, len: usize) -> Vec<Vec<u8>> {
    (0..n).map(|i| value(tag, i, len)).collect()
}

/// The broker answers a fresh connection's ApiVersions: it is alive and serving.
fn assert_serving(b: &Broker) {
    let mut c = Client::connect(b.addr);
    let r = c.api_versions();
    assert_eq!(r.error_code, 0);
    assert!(!r.api_keys.is_empty());
}

/// The names of the topics in a Metadata response, internal ones (`__consumer_offsets`) left out.
fn user_topics(m: &MetadataResponse) -> Vec<String> {
    m.topics
        .iter()
        .filter(|t| !t.is_internal)
        .filter_map(|t| t.name.as_ref().map(|n| n.to_string()))
        .filter(|n| !n.starts_with("__"))
        .collect()
}

/// The home shard of each partition of `topic`, from the metadata the broker persisted: the
/// catalog snapshot, then the metadata log's topic records after it.
fn homes(b: &Broker, topic: &str) -> Vec<u64> {
    let text = std::fs::read_to_string(b.data_dir.join("catalog.json")).expect("catalog.json");
    let v: serde_json::Value = serde_json::from_str(&text).expect("catalog is JSON");
    let mut homes = v["topics"][topic]["homes"].clone();
    let log = std::fs::read_to_string(b.data_dir.join("metadata.log")).unwrap_or_default();
    for entry in log.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).expect("a log entry is JSON")) {
        for r in entry["records"].as_array().into_iter().flatten() {
            if r["record"] == "topic" && r["topic"]["name"] == topic {
                homes = r["topic"]["homes"].clone();
            }
        }
    }
    homes
        .as_array()
        .unwrap_or_else(|| panic!("no homes for {topic} in {text} or {log}"))
        .iter()
        .map(|h| h.as_u64().expect("shard number"))
        .collect()
}

// ---- ApiVersions -----------------------------------------------------------------------

#[test]
fn api_versions_v3_lists_every_served_api() {
    let b = Broker::start();
    let mut c = Client::connect(b.addr);
    let r = c.api_versions();
    assert_eq!(r.error_code, 0);
    let range = |key: ApiKey| {
        let v = r
            .api_keys
            .iter()
            .find(|k| k.api_key == key as i16)
            .unwrap_or_else(|| panic!("{key:?} missing from ApiVersions: {:?}", r.api_keys));
        (v.min_version, v.max_version)
    };
    assert_eq!(range(ApiKey::Produce), (0, 13), "Produce is advertised from v0 as Kafka 4 does");
    assert_eq!(range(ApiKey::Fetch), (4, 18));
    assert_eq!(range(ApiKey::Metadata), (0, 13));
    for key in [
        ApiKey::ListOffsets,
        ApiKey::CreateTopics,
        ApiKey::DeleteTopics,
        ApiKey::DescribeConfigs,
        ApiKey::DescribeCluster,
        ApiKey::FindCoordinator,
        ApiKey::OffsetForLeaderEpoch,
        ApiKey::ApiVersions,
    ] {
        let (min, max) = range(key);
        assert!(min >= 0 && min <= max, "{key:?}: {min}-{max}");
        let codec = key.valid_versions();
        assert!(max <= codec.max, "{key:?} advertised up to v{max}, the protocol has v{}", codec.max);
    }
    let keys: Vec<i16> = r.api_keys.iter().map(|k| k.api_key).collect();
    let distinct: BTreeSet<i16> = keys.iter().copied().collect();
    assert_eq!(keys.len(), distinct.len(), "each API listed once: {keys:?}");
}

#[test]
fn api_versions_with_an_unknown_version_answers_v0_with_unsupported_version() {
    let b = Broker::start();
    let mut c = Client::connect(b.addr);
    let mut body = bytes::BytesMut::new();
    client::api_versions_request().encode(&mut body, 3).expect("encode");
    // Version 99 with the flexible header (as a newer client would send it).
    let frame = Client::raw_frame(ApiKey::ApiVersions as i16, 99, 4242, 2, &body);
    c.write_raw(&frame).expect("send");
    let frame = c.read_frame().expect("read").expect("a response, not a closed connection");
    let mut body = frame;
    assert_eq!(&body[..4], &4242i32.to_be_bytes(), "correlation id");
    let _ = bytes::Buf::get_i32(&mut body);
    // Response header v0 (no tagged fields), body in v0 encoding.
    let r = ApiVersionsResponse::decode(&mut body, 0).expect("a v0 ApiVersions body");
    assert!(body.is_empty(), "{} bytes after the v0 body", body.len());
    assert_eq!(r.error_code, ErrorCode::UnsupportedVersion.code());
    let versions = r.api_keys.iter().find(|k| k.api_key == ApiKey::ApiVersions as i16).expect("ApiVersions listed");
    assert!(versions.max_version >= 3);
    assert!(r.api_keys.iter().any(|k| k.api_key == ApiKey::Produce as i16));
    assert!(r.api_keys.iter().any(|k| k.api_key == ApiKey::Fetch as i16));
    // The connection stays usable: the client can retry with a version it has now learned.
    let r: ApiVersionsResponse = c.call(ApiKey::ApiVersions, 3, &client::api_versions_request());
    assert_eq!(r.error_code, 0);
    // v0 also works.
    let r: ApiVersionsResponse = c.call(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default());
    assert_eq!(r.error_code, 0);
    assert!(!r.api_keys.is_empty());
}

// ---- framing and hostile input ------------------------------------------------------

#[test]
fn an_unknown_api_key_closes_the_connection_only() {
    let b = Broker::start();
    let mut bystander = Client::connect(b.addr);
    assert_eq!(bystander.api_versions().error_code, 0);

    let mut c = Client::connect(b.addr);
    c.write_raw(&Client::raw_frame(9999, 0, 7, 1, &[])).expect("send");
    assert!(c.wait_closed(CLOSE_LIMIT), "the broker kept a connection open after API key 9999");

    // A known API with a version nobody serves closes too (ApiVersions is the exception).
    let mut c = Client::connect(b.addr);
    c.write_raw(&Client::raw_frame(ApiKey::Metadata as i16, 999, 8, 2, &[0])).expect("send");
    assert!(c.wait_closed(CLOSE_LIMIT), "Metadata v999 did not close the connection");

    let mut second = Client::connect(b.addr);
    assert_eq!(second.api_versions().error_code, 0);
    assert_eq!(bystander.api_versions().error_code, 0, "an open connection was disturbed");
}

/// A tiny deterministic generator for garbage.
struct XorShift(u64);
impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

#[test]
fn hostile_input_closes_connections_but_never_the_broker() {
    let b = Broker::start();
    let mut bystander = Client::connect(b.addr);
    assert_eq!(bystander.api_versions().error_code, 0);

    // Metadata v1 whose topic array claims i32::MAX entries in a 4-byte body.
    let mut c = Client::connect(b.addr);
    c.write_raw(&Client::raw_frame(ApiKey::Metadata as i16, 1, 1, 1, &[0x7f, 0xff, 0xff, 0xff])).expect("send");
    assert!(c.wait_closed(CLOSE_LIMIT), "huge array count: connection not closed");
    assert_serving(&b);

    // The same with a flexible version (compact array length near u32::MAX).
    let mut c = Client::connect(b.addr);
    c.write_raw(&Client::raw_frame(ApiKey::Metadata as i16, 12, 1, 2, &[0xff, 0xff, 0xff, 0xff, 0x0f])).expect("send");
    assert!(c.wait_closed(CLOSE_LIMIT), "huge compact array count: connection not closed");

    // Size prefixes: far above socket.request.max.bytes, negative, too short for a header.
    for prefix in [0x7fff_ffffu32, 0x8000_0000, 0xffff_ffff, 3, 0] {
        let mut c = Client::connect(b.addr);
        let mut frame = prefix.to_be_bytes().to_vec();
        frame.extend_from_slice(&[0u8; 16]);
        let _ = c.write_raw(&frame);
        assert!(c.wait_closed(CLOSE_LIMIT), "size prefix {prefix:#x}: connection not closed");
    }
    assert_serving(&b);

    // Random byte streams, then end-of-stream: whatever the broker makes of them, it must
    // end the connection and stay up.
    let mut rng = XorShift(0x5eed_1234_abcd_0001);
    for round in 0..20 {
        let n = 1 + (rng.next() % 3000) as usize;
        let garbage = rng.bytes(n);
        let mut c = Client::connect(b.addr);
        let _ = c.write_raw(&garbage);
        c.shutdown_write();
        assert!(c.wait_closed(CLOSE_LIMIT), "garbage round {round}: connection not closed");
    }

    // Well-formed frames with random payloads after a valid header, for every API the broker
    // serves (at its lowest and highest version): the decoders see hostile bodies.
    let versions: ApiVersionsResponse = Client::connect(b.addr).api_versions();
    let apis = [
        ApiKey::Produce,
        ApiKey::Fetch,
        ApiKey::ListOffsets,
        ApiKey::Metadata,
        ApiKey::OffsetForLeaderEpoch,
        ApiKey::ApiVersions,
        ApiKey::CreateTopics,
        ApiKey::DeleteTopics,
        ApiKey::DescribeConfigs,
        ApiKey::DescribeCluster,
        ApiKey::FindCoordinator,
    ];
    for api in apis {
        let k = versions.api_keys.iter().find(|k| k.api_key == api as i16).expect("advertised");
        for v in [k.min_version, k.max_version] {
            for len in [0usize, 1, 7, 64, 700] {
                let body = rng.bytes(len);
                let mut c = Client::connect(b.addr);
                let _ = c.write_raw(&Client::raw_frame(k.api_key, v, 99, api.request_header_version(v), &body));
                c.shutdown_write();
                assert!(c.wait_closed(CLOSE_LIMIT), "{api:?} v{v} with {len} random bytes: connection not closed");
            }
        }
    }

    // Random frames: a plausible size prefix and random content.
    for round in 0..50 {
        let n = 8 + (rng.next() % 200) as usize;
        let mut frame = (n as u32).to_be_bytes().to_vec();
        frame.extend(rng.bytes(n));
        let mut c = Client::connect(b.addr);
        let _ = c.write_raw(&frame);
        c.shutdown_write();
        assert!(c.wait_closed(CLOSE_LIMIT), "random frame {round}: connection not closed");
    }

    assert_serving(&b);
    assert_eq!(bystander.api_versions().error_code, 0, "a well-behaved connection was disturbed");
    let mut c = Client::connect(b.addr);
    c.create_topic("still-works", 2, &[]);
    assert_eq!(c.produce_ok("still-works", 1, batch(now_ms(), &values("x", 1, 10))), 0);
}

// ---- pipelining ---------------------------------------------------------------------

#[test]
fn pipelined_requests_are_answered_in_send_order() {
    let b = Broker::start();
    let mut c = Client::connect(b.addr);
    c.create_topic("pipe", 2, &[]);
    let partition = 1;
    let ts = now_ms();

    // Correlation ids that are neither sequential nor sorted.
    let ids: Vec<i32> = (0..50).map(|i| (i * 7919) % 1009 + 1).collect();
    let mut produced = 0usize;
    for (i, &id) in ids.iter().enumerate() {
        match i % 4 {
            0 => c.send_with_id(ApiKey::Metadata, METADATA_V, id, &metadata_request(Some(&["pipe"]), false)),
            1 => c.send_with_id(ApiKey::ApiVersions, 3, id, &client::api_versions_request()),
            2 => {
                let records = batch(ts, &[value("pipe", produced, 50)]);
                produced += 1;
                c.send_with_id(ApiKey::Produce, PRODUCE_V, id, &produce_request("pipe", &[(partition, records)], -1));
            }
            _ => c.send_with_id(ApiKey::ListOffsets, LIST_OFFSETS_V, id, &list_offsets_request("pipe", partition, -1)),
        }
    }
    let mut next_offset = 0;
    for (i, &id) in ids.iter().enumerate() {
        let r = c.recv_any();
        assert_eq!(r.correlation_id, id, "response {i} answers the wrong request");
        match r.api {
            ApiKey::Metadata => {
                let m: MetadataResponse = r.decode();
                assert_eq!(m.topics.len(), 1);
                assert_eq!(m.topics[0].error_code, 0);
            }
            ApiKey::ApiVersions => assert_eq!(r.decode::<ApiVersionsResponse>().error_code, 0),
            ApiKey::Produce => {
                let p = single_produce(r.decode::<ProduceResponse>());
                assert_eq!(p.error_code, 0);
                assert_eq!(p.base_offset, next_offset, "appends from one connection keep their order");
                next_offset += 1;
            }
            ApiKey::ListOffsets => {
                let l: ListOffsetsResponse = r.decode();
                let p = &l.topics[0].partitions[0];
                assert_eq!(p.error_code, 0);
                assert!((0..=produced as i64).contains(&p.offset), "latest {}", p.offset);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(next_offset, produced as i64);
    assert_eq!(c.latest("pipe", partition), produced as i64);
    let got = c.fetch_all("pipe", partition, 0);
    let want: Vec<Vec<u8>> = (0..produced).map(|i| value("pipe", i, 50)).collect();
    assert_eq!(got.into_iter().map(|r| r.value.expect("value")).collect::<Vec<_>>(), want);
}

// ---- Produce ------------------------------------------------------------------------

#[test]
fn produce_with_acks_0_gets_no_response_but_is_appended() {
    let b = Broker::start();
    let mut c = Client::connect(b.addr);
    c.create_topic("fire", 2, &[]);
    for partition in 0..2 {
        let req = produce_request("fire", &[(partition, batch(now_ms(), &[value("a0", 0, 20)]))], 0);
        c.send_no_response(ApiKey::Produce, PRODUCE_V, &req);
        // The next response on the connection must be this ApiVersions' one.
        let id = c.send(ApiKey::ApiVersions, 3, &client::api_versions_request());
        let r = c.recv_any();
        assert_eq!(r.correlation_id, id, "an acks=0 produce was answered");
        assert_eq!(r.decode::<ApiVersionsResponse>().error_code, 0);

        assert!(
            client::wait_until(Duration::from_secs(20), || c.latest("fire", partition) == 1),
            "the acks=0 record never became visible in partition {partition}"
        );
        // A later produce on the same connection follows it.
        assert_eq!(c.produce_ok("fire", partition, batch(now_ms(), &[value("a1", 1, 20)])), 1);
        let got = c.fetch_all("fire", partition, 0);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].value.as_deref(), Some(&value("a0", 0, 20)[..]));
        assert_eq!(got[1].value.as_deref(), Some(&value("a1", 1, 20)[..]));
    }
}

#[test]
fn produce_errors_carry_kafka_error_codes() {
    let b = Broker::start_args(&["--message-max-bytes", "2000"]);
    let mut c = Client::connect(b.addr);
    c.create_topic("errs", 2, &[]);
    let ts = now_ms();
    for partition in 0..2 {
        let mut corrupt = batch(ts, &values("c", 3, 30));
        let last = corrupt.len() - 1;
        corrupt[last] ^= 0xff;
        assert_eq!(c.produce("errs", partition, corrupt).error_code, ErrorCode::CorruptMessage.code(), "flipped byte");

        let mut bad_crc = batch(ts, &values("c", 3, 30));
        bad_crc[30] ^= 0x01; // inside the CRC-covered header (base timestamp)
        assert_eq!(
            c.produce("errs", partition, bad_crc).error_code,
            ErrorCode::CorruptMessage.code(),
            "flipped header byte"
        );

        let truncated = batch(ts, &values("c", 3, 30));
        let half = truncated[..truncated.len() / 2].to_vec();
        let p = c.produce("errs", partition, half);
        assert_eq!(p.error_code, ErrorCode::InvalidRecord.code(), "truncated batch");
        let why = p.error_message.as_deref().unwrap_or_default();
        assert!(why.contains("truncated"), "the message says why (KIP-467): {why:?}");

        let big = batch(ts, &[vec![7u8; 3000]]);
        assert!(big.len() > 2000);
        let p = c.produce("errs", partition, big);
        assert_eq!(p.error_code, ErrorCode::MessageTooLarge.code(), "batch over --message-max-bytes");
        assert_eq!(p.base_offset, -1);

        let mut old = batch(ts, &values("m", 1, 10));
        old[16] = 1; // magic v1
        assert_eq!(c.produce("errs", partition, old).error_code, ErrorCode::InvalidRecord.code(), "magic 1");

        let p = c.produce_acks("errs", partition, batch(ts, &values("k", 1, 10)), 5);
        assert_eq!(p.error_code, ErrorCode::InvalidRequiredAcks.code(), "acks=5");

        // Records without a key in a compacted topic: the batch is refused and names them.
        if partition == 0 {
            c.create_topic("keyed", 1, &[("cleanup.policy", "compact")]);
            let p = c.produce("keyed", 0, batch(ts, &values("k", 3, 10)));
            assert_eq!(p.error_code, ErrorCode::InvalidRecord.code(), "keyless records in a compacted topic");
            let indexes: Vec<i32> = p.record_errors.iter().map(|r| r.batch_index).collect();
            assert_eq!(indexes, vec![0, 1, 2], "every record of the batch lacks a key");
            let why = p.error_message.as_deref().unwrap_or_default();
            assert!(why.contains("key"), "{why:?}");
            assert_eq!(c.latest("keyed", 0), 0);
        }

        // Nothing refused took an offset.
        assert_eq!(c.latest("errs", partition), 0);
        assert_eq!(c.produce_ok("errs", partition, batch(ts, &values("ok", 2, 10))), 0);
        assert_eq!(c.latest("errs", partition), 2);
    }
    assert_eq!(
        c.produce("no-such-topic", 0, batch(ts, &values("u", 1, 10))).error_code,
        ErrorCode::UnknownTopicOrPartition.code()
    );
    assert_eq!(
        c.produce("errs", 2, batch(ts, &values("u", 1, 10))).error_code,
        ErrorCode::UnknownTopicOrPartition.code()
    );
    assert_eq!(
        c.produce("errs", -1, batch(ts, &values("u", 1, 10))).error_code,
        ErrorCode::UnknownTopicOrPartition.code()
    );
    // Produce does not auto-create.
    let m = c.metadata(Some(&["no-such-topic"]), false);
    assert_eq!(m.topics[0].error_code, ErrorCode::UnknownTopicOrPartition.code());

    // A request mixing good and bad partitions answers each on its own.
    let mut bad = batch(ts, &values("mix", 1, 10));
    bad[40] ^= 0xff;
    let req = produce_request(
        "errs",
        &[(0, batch(ts, &values("mix", 1, 10))), (1, bad), (5, batch(ts, &values("mix", 1, 10)))],
        -1,
    );
    let resp: ProduceResponse = c.call(ApiKey::Produce, PRODUCE_V, &req);
    let parts = &resp.responses[0].partition_responses;
    let got: Vec<(i32, i16, i64)> = parts.iter().map(|p| (p.index, p.error_code, p.base_offset)).collect();
    assert_eq!(
        got,
        vec![(0, 0, 2), (1, ErrorCode::CorruptMessage.code(), -1), (5, ErrorCode::UnknownTopicOrPartition.code(), -1)]
    );
}

#[test]
fn delete_records_is_refused_on_a_topic_whose_policy_keeps_records_by_key() {
    let b = Broker::start();
    let mut c = Client::connect(b.addr);
    c.create_topic("by-key", 1, &[("cleanup.policy", "compact")]);
    c.create_topic("both", 1, &[("cleanup.policy", "compact,delete")]);
    c.produce_ok(
        "both",
        0,
        ringbroker::protocol::batch::build_keyed(now_ms(), &[(Some(b"k"), Some(b"v")), (Some(b"k"), Some(b"w"))]),
    );
    assert_eq!(c.delete_records("by-key", -1), (ErrorCode::PolicyViolation.code(), -1), "as Kafka's");
    assert_eq!(c.delete_records("both", 1), (0, 1));
    assert_eq!(c.earliest("both", 0), 1);
}

#[test]
fn produce_assigns_offsets_per_partition_on_both_shards() {
    let b = Broker::start();
    let mut c = Client::connect(b.addr);
    c.create_topic("four", 4, &[]);
    let h: BTreeSet<u64> = homes(&b, "four").into_iter().collect();
    assert!(h.len() >= 2, "the 4 partitions should be spread over the shards, got homes {h:?}");

    let ts = now_ms();
    for round in 0..3 {
        let batches: Vec<(i32, Vec<u8>)> = (0..4)
            .map(|p| {
                (p, batch(ts, &[value(&format!("p{p}"), 2 * round, 40), value(&format!("p{p}"), 2 * round + 1, 40)]))
            })
            .collect();
        let resp: ProduceResponse = c.call(ApiKey::Produce, PRODUCE_V, &produce_request("four", &batches, -1));
        let parts = &resp.responses[0].partition_responses;
        assert_eq!(parts.len(), 4);
        for (i, p) in parts.iter().enumerate() {
            assert_eq!(p.index, i as i32, "answers in request order");
            assert_eq!(p.error_code, 0);
            assert_eq!(p.base_offset, 2 * round as i64, "partition {i} round {round}");
            assert_eq!(p.log_start_offset, 0);
        }
    }
    for p in 0..4 {
        assert_eq!(c.latest("four", p), 6);
        assert_eq!(c.earliest("four", p), 0);
        let got = c.fetch_all("four", p, 0);
        let want: Vec<(i64, Vec<u8>)> = (0..6).map(|i| (i as i64, value(&format!("p{p}"), i, 40))).collect();
        assert_eq!(got.into_iter().map(|r| (r.offset, r.value.expect("value"))).collect::<Vec<_>>(), want);
    }
}

// ---- Fetch --------------------------------------------------------------------------

#[test]
fn fetch_returns_the_produced_records_by_name_and_by_topic_id() {
    let b = Broker::start();
    let mut c = Client::connect(b.addr);
    let created = c.create_topic("fetched", 2, &[]);
    let id = created.topic_id;
    assert!(!id.is_nil());
    let ts = now_ms() - 10_000;
    for partition in 0..2 {
        let tag = format!("f{partition}");
        for k in 0..5usize {
            let vals: Vec<Vec<u8>> = (0..3).map(|j| value(&tag, 3 * k + j, 100 + 10 * k)).collect();
            assert_eq!(c.produce_ok("fetched", partition, batch(ts + k as i64, &vals)), 3 * k as i64);
        }
        let want: Vec<(i64, i64, Vec<u8>)> =
            (0..15).map(|i| (i as i64, ts + (i / 3) as i64, value(&tag, i, 100 + 10 * (i / 3)))).collect();
        let flat = |records: Vec<client::Record>| -> Vec<(i64, i64, Vec<u8>)> {
            records.into_iter().map(|r| (r.offset, r.timestamp, r.value.expect("value"))).collect()
        };

        // v12: by name.
        let p = c.fetch("fetched", partition, 0, 1 << 20);
        assert_eq!(p.error_code, 0);
        assert_eq!(p.high_watermark, 15);
        assert_eq!(p.log_start_offset, 0);
        let set = p.records.clone().expect("records");
        let batches = decode_batches(&set);
        assert_eq!(batches.iter().map(|(b, _)| b.base_offset).collect::<Vec<_>>(), vec![0, 3, 6, 9, 12]);
        assert_eq!(batches.iter().map(|(b, _)| b.size).sum::<usize>(), set.len(), "only whole batches");
        assert_eq!(flat(decode_records(&set)), want);

        // v16: by topic id.
        for version in [13, 16] {
            let resp: FetchResponse = c.call(ApiKey::Fetch, version, &fetch_request_by_id(id, partition, 0, 1 << 20));
            assert_eq!(resp.responses[0].topic_id, id, "v{version}");
            let p = single_fetch(resp);
            assert_eq!(p.error_code, 0);
            assert_eq!(p.high_watermark, 15);
            assert_eq!(flat(decode_records(p.records.as_deref().expect("records"))), want, "v{version}");
        }

        // From the middle of a batch: the batch holding the offset comes back whole.
        let p = c.fetch("fetched", partition, 7, 1 << 20);
        let records = decode_records(p.records.as_deref().expect("records"));
        assert_eq!(records[0].offset, 6, "fetch at 7 starts with the batch holding 7");
        assert_eq!(flat(records.into_iter().filter(|r| r.offset >= 7).collect()), want[7..].to_vec());

        // Older versions by name work too.
        for version in [4, 11] {
            let resp: FetchResponse = c.call(ApiKey::Fetch, version, &fetch_request("fetched", partition, 0, 1 << 20));
            let p = single_fetch(resp);
            assert_eq!(p.error_code, 0, "v{version}");
            assert_eq!(flat(decode_records(p.records.as_deref().expect("records"))), want, "v{version}");
        }

        // At the high watermark: nothing, no error. Past it: OFFSET_OUT_OF_RANGE.
        let p = c.fetch("fetched", partition, 15, 1 << 20);
        assert_eq!(p.error_code, 0);
        assert_eq!(p.records.as_ref().map_or(0, Bytes::len), 0);
        let p = c.fetch("fetched", partition, 16, 1 << 20);
        assert_eq!(p.error_code, ErrorCode::OffsetOutOfRange.code(), "fetch past the high watermark");
        let p = c.fetch("fetched", partition, 1000, 1 << 20);
        assert_eq!(p.error_code, ErrorCode::OffsetOutOfRange.code());
        let p = c.fetch("fetched", partition, -5, 1 << 20);
        assert_eq!(p.error_code, ErrorCode::OffsetOutOfRange.code(), "negative fetch offset");
    }
    // Unknown topic / partition / topic id.
    assert_eq!(c.fetch("nope", 0, 0, 1000).error_code, ErrorCode::UnknownTopicOrPartition.code());
    assert_eq!(c.fetch("fetched", 2, 0, 1000).error_code, ErrorCode::UnknownTopicOrPartition.code());
    let resp: FetchResponse = c.call(ApiKey::Fetch, 16, &fetch_request_by_id(uuid::Uuid::from_u128(42), 0, 0, 1000));
    assert_eq!(single_fetch(resp).error_code, ErrorCode::UnknownTopicId.code());
}

#[test]
fn fetch_always_returns_the_whole_first_batch() {
    let b = Broker::start();
    let mut c = Client::connect(b.addr);
    c.create_topic("big", 1, &[]);
    let ts = now_ms();
    let first = batch(ts, &[vec![1u8; 5000], vec![2u8; 3000]]);
    let second = batch(ts, &[vec![3u8; 4000]]);
    assert_eq!(c.produce_ok("big", 0, first.clone()), 0);
    assert_eq!(c.produce_ok("big", 0, second.clone()), 2);

    // partition_max_bytes far below the first batch: the first batch, whole, and no more.
    let p = c.fetch("big", 0, 0, 100);
    assert_eq!(p.error_code, 0);
    let set = p.records.expect("records despite the small limit");
    assert_eq!(set.len(), first.len(), "exactly the first batch");
    let records = decode_records(&set);
    assert_eq!(records.len(), 2);
    assert_eq!(records[0].value.as_deref(), Some(&[1u8; 5000][..]));

    // The response-wide max_bytes does not cut the first batch either.
    let mut req = fetch_request("big", 0, 0, 1 << 20);
    req.max_bytes = 10;
    let p = single_fetch(c.call(ApiKey::Fetch, FETCH_V, &req));
    assert_eq!(p.records.as_ref().map_or(0, Bytes::len), first.len());

    // A limit between one and two batches: the first whole, then at most a partial second.
    let p = c.fetch("big", 0, 0, (first.len() + 100) as i32);
    let set = p.records.expect("records");
    assert!(set.len() <= first.len() + 100);
    assert_eq!(decode_batches(&set).len(), 1);

    // Starting at the second batch: it comes whole.
    let p = c.fetch("big", 0, 2, 1);
    assert_eq!(p.records.as_ref().map_or(0, Bytes::len), second.len());
    assert_eq!(decode_records(&p.records.expect("records"))[0].offset, 2);
}

#[test]
fn a_delayed_fetch_is_answered_when_a_record_arrives() {
    let b = Broker::start();
    let mut admin = Client::connect(b.addr);
    admin.create_topic("waiting", 2, &[]);

    let mut consumer = Client::connect(b.addr);
    let mut req = fetch_request("waiting", 0, 0, 1 << 20);
    req.topics[0].partitions.push(fetch_partition(1, 0, 1 << 20));
    req.min_bytes = 1;
    req.max_wait_ms = 5000;
    let id = consumer.send(ApiKey::Fetch, FETCH_V, &req);
    // Give the fetch time to park (not asserted: the content below is what counts).
    std::thread::sleep(Duration::from_millis(300));

    let mut producer = Client::connect(b.addr);
    assert_eq!(producer.produce_ok("waiting", 1, batch(now_ms(), &[b"wake up".to_vec()])), 0);

    let r = consumer.recv_any();
    assert_eq!(r.correlation_id, id);
    let resp: FetchResponse = r.decode();
    assert_eq!(resp.error_code, 0);
    let parts = &resp.responses[0].partitions;
    assert_eq!(parts.len(), 2);
    let p1 = parts.iter().find(|p| p.partition_index == 1).expect("partition 1");
    assert_eq!(p1.error_code, 0);
    assert_eq!(p1.high_watermark, 1);
    let records = decode_records(p1.records.as_deref().expect("the produced record"));
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].offset, 0);
    assert_eq!(records[0].value.as_deref(), Some(&b"wake up"[..]));
    let p0 = parts.iter().find(|p| p.partition_index == 0).expect("partition 0");
    assert_eq!(p0.error_code, 0);
    assert_eq!(p0.records.as_ref().map_or(0, Bytes::len), 0);

    // Nothing to read and a short wait: an empty answer, no error.
    let mut req = fetch_request("waiting", 0, 0, 1 << 20);
    req.min_bytes = 1;
    req.max_wait_ms = 200;
    let p = single_fetch(consumer.call(ApiKey::Fetch, FETCH_V, &req));
    assert_eq!(p.error_code, 0);
    assert_eq!(p.high_watermark, 0);
    assert_eq!(p.records.as_ref().map_or(0, Bytes::len), 0);
}

// ---- ListOffsets --------------------------------------------------------------------

#[test]
fn list_offsets_earliest_latest_and_by_timestamp() {
    let b = Broker::start();
    let mut c = Client::connect(b.addr);
    c.create_topic("times", 2, &[]);
    let t0 = now_ms() - 60_000;
    for partition in 0..2 {
        assert_eq!(c.earliest("times", partition), 0);
        assert_eq!(c.latest("times", partition), 0);
        let empty = c.list_offsets("times", partition, t0);
        assert_eq!((empty.error_code, empty.offset), (0, -1), "by timestamp on an empty log");

        // offsets 0-1 @t0 | 2-4 @t0+1000 | 5 @t0+2000, 6 @t0+2500, 7 @t0+3000 | 8 @t0+500
        assert_eq!(c.produce_ok("times", partition, batch(t0, &values("a", 2, 10))), 0);
        assert_eq!(c.produce_ok("times", partition, batch(t0 + 1000, &values("b", 3, 10))), 2);
        let mixed = build_batch_with_timestamps(&[(t0 + 2000, b"f"), (t0 + 2500, b"g"), (t0 + 3000, b"h")]);
        assert_eq!(c.produce_ok("times", partition, mixed), 5);
        assert_eq!(c.produce_ok("times", partition, batch(t0 + 500, &values("i", 1, 10))), 8);

        assert_eq!(c.earliest("times", partition), 0);
        assert_eq!(c.latest("times", partition), 9);
        for (target, offset, ts) in [
            (t0 - 1, 0, t0),
            (t0, 0, t0),
            (t0 + 1, 2, t0 + 1000),
            (t0 + 400, 2, t0 + 1000),
            (t0 + 1000, 2, t0 + 1000),
            (t0 + 1001, 5, t0 + 2000),
            (t0 + 2200, 6, t0 + 2500),
            (t0 + 2500, 6, t0 + 2500),
            (t0 + 2999, 7, t0 + 3000),
            (t0 + 3000, 7, t0 + 3000),
        ] {
            let r = c.list_offsets("times", partition, target);
            assert_eq!(r.error_code, 0);
            assert_eq!((r.offset, r.timestamp), (offset, ts), "first record with timestamp >= t0{:+}", target - t0);
        }
        let r = c.list_offsets("times", partition, t0 + 3001);
        assert_eq!((r.error_code, r.offset, r.timestamp), (0, -1, -1), "no record that late");

        // Max timestamp (v7+): the record carrying t0+3000.
        let r = c.list_offsets("times", partition, -3);
        assert_eq!(r.error_code, 0);
        assert_eq!((r.offset, r.timestamp), (7, t0 + 3000), "max timestamp");
    }
    assert_eq!(c.list_offsets("nope", 0, -1).error_code, ErrorCode::UnknownTopicOrPartition.code());
    assert_eq!(c.list_offsets("times", 9, -1).error_code, ErrorCode::UnknownTopicOrPartition.code());
}

/// KIP-734 / KAFKA-16310: MAX_TIMESTAMP answers the offset of the (first) record carrying
/// the largest timestamp, not the end of its batch.
#[test]
fn list_offsets_max_timestamp_points_at_the_record() {
    let b = Broker::start();
    let mut c = Client::connect(b.addr);
    c.create_topic("maxts", 1, &[]);
    let t0 = now_ms() - 60_000;
    assert_eq!(c.produce_ok("maxts", 0, batch(t0, &values("a", 1, 10))), 0);
    // Three records sharing the largest timestamp, at offsets 1-3.
    assert_eq!(c.produce_ok("maxts", 0, batch(t0 + 5000, &values("b", 3, 10))), 1);
    assert_eq!(c.produce_ok("maxts", 0, batch(t0 + 1000, &values("c", 1, 10))), 4);
    let r = c.list_offsets("maxts", 0, -3);
    assert_eq!(r.error_code, 0);
    assert_eq!(r.timestamp, t0 + 5000);
    assert_eq!(r.offset, 1, "Kafka answers the first record with the max timestamp (offset 1)");
}

// ---- CreateTopics / DeleteTopics ----------------------------------------------------

#[test]
fn create_topics_validates_each_topic() {
    let b = Broker::start();
    let mut c = Client::connect(b.addr);
    c.create_topic("dup", 2, &[]);
    let r = c.create_topics(
        vec![
            new_topic("dup", 2, 1, &[]),
            new_topic("a/b", 1, 1, &[]),
            new_topic("rf3", 1, 3, &[]),
            new_topic("zero", 0, 1, &[]),
            new_topic("fine", 3, -1, &[]),
        ],
        false,
    );
    let got: Vec<(String, i16)> = r.topics.iter().map(|t| (t.name.to_string(), t.error_code)).collect();
    assert_eq!(
        got,
        vec![
            ("dup".to_string(), ErrorCode::TopicAlreadyExists.code()),
            ("a/b".to_string(), ErrorCode::InvalidTopicException.code()),
            ("rf3".to_string(), ErrorCode::InvalidReplicationFactor.code()),
            ("zero".to_string(), ErrorCode::InvalidPartitions.code()),
            ("fine".to_string(), 0),
        ]
    );
    assert_eq!(r.topics[4].num_partitions, 3);
    assert_eq!(r.topics[4].replication_factor, 1);
    assert!(!r.topics[4].topic_id.is_nil());

    // The refused topics do not exist.
    let m = c.metadata(None, false);
    let names: BTreeSet<String> = user_topics(&m).into_iter().collect();
    assert_eq!(names, ["dup", "fine"].iter().map(|s| s.to_string()).collect());

    // validate_only answers as a creation would, but creates nothing.
    let r = c.create_topics(vec![new_topic("dry", 4, 1, &[("retention.ms", "1000")])], true);
    assert_eq!(r.topics[0].error_code, 0);
    assert_eq!(r.topics[0].num_partitions, 4);
    let m = c.metadata(Some(&["dry"]), false);
    assert_eq!(m.topics[0].error_code, ErrorCode::UnknownTopicOrPartition.code(), "validate_only created the topic");
    assert!(!b.data_dir.join("dry-0").exists());
    let r = c.create_topics(vec![new_topic("dry", 4, 1, &[("retention.ms", "1000")])], true);
    assert_eq!(r.topics[0].error_code, 0, "a second validate_only is no duplicate");
    c.create_topic("dry", 4, &[]);
    let r = c.create_topics(vec![new_topic("dry", 4, 1, &[])], true);
    assert_eq!(r.topics[0].error_code, ErrorCode::TopicAlreadyExists.code());
}

#[test]
fn delete_topics_by_name_and_by_id_removes_them_everywhere() {
    let b = Broker::start();
    let mut c = Client::connect(b.addr);
    let a = c.create_topic("del-a", 2, &[]);
    let bt = c.create_topic("del-b", 2, &[]);
    c.create_topic("keep", 1, &[]);
    for t in ["del-a", "del-b", "keep"] {
        let parts = if t == "keep" { 1 } else { 2 };
        for p in 0..parts {
            c.produce_ok(t, p, batch(now_ms(), &values(t, 3, 10)));
            assert!(b.data_dir.join(format!("{t}-{p}")).is_dir());
        }
    }

    // By name (v5).
    let mut req = DeleteTopicsRequest::default();
    req.topic_names = vec![topic_name("del-a")];
    req.timeout_ms = 30_000;
    let r: DeleteTopicsResponse = c.call(ApiKey::DeleteTopics, 5, &req);
    assert_eq!(r.responses.len(), 1);
    assert_eq!(r.responses[0].error_code, 0);
    assert_eq!(r.responses[0].name.as_ref().map(|n| n.to_string()).as_deref(), Some("del-a"));

    // By topic id (v6).
    let mut state = DeleteTopicState::default();
    state.topic_id = bt.topic_id;
    let mut req = DeleteTopicsRequest::default();
    req.topics = vec![state];
    req.timeout_ms = 30_000;
    let r: DeleteTopicsResponse = c.call(ApiKey::DeleteTopics, 6, &req);
    assert_eq!(r.responses[0].error_code, 0);
    assert_eq!(r.responses[0].topic_id, bt.topic_id);
    assert_eq!(r.responses[0].name.as_ref().map(|n| n.to_string()).as_deref(), Some("del-b"));

    // Gone from Metadata (from any shard), and from disk.
    for _ in 0..4 {
        let mut fresh = Client::connect(b.addr);
        let m = fresh.metadata(None, false);
        let names = user_topics(&m);
        assert_eq!(names, vec!["keep".to_string()]);
        let m = fresh.metadata(Some(&["del-a", "del-b"]), false);
        assert!(m.topics.iter().all(|t| t.error_code == ErrorCode::UnknownTopicOrPartition.code()), "{:?}", m.topics);
    }
    for p in 0..2 {
        assert!(!b.data_dir.join(format!("del-a-{p}")).exists(), "del-a-{p} still on disk");
        assert!(!b.data_dir.join(format!("del-b-{p}")).exists(), "del-b-{p} still on disk");
    }
    assert!(b.data_dir.join("keep-0").is_dir());
    assert_eq!(
        c.produce("del-a", 0, batch(now_ms(), &values("x", 1, 5))).error_code,
        ErrorCode::UnknownTopicOrPartition.code()
    );
    assert_eq!(c.fetch("del-b", 0, 0, 1000).error_code, ErrorCode::UnknownTopicOrPartition.code());

    // Deleting again: unknown.
    let mut req = DeleteTopicsRequest::default();
    req.topic_names = vec![topic_name("del-a")];
    let r: DeleteTopicsResponse = c.call(ApiKey::DeleteTopics, 5, &req);
    assert_eq!(r.responses[0].error_code, ErrorCode::UnknownTopicOrPartition.code());
    let mut state = DeleteTopicState::default();
    state.topic_id = bt.topic_id;
    let mut req = DeleteTopicsRequest::default();
    req.topics = vec![state];
    let r: DeleteTopicsResponse = c.call(ApiKey::DeleteTopics, 6, &req);
    assert_eq!(r.responses[0].error_code, ErrorCode::UnknownTopicId.code());

    // Re-created under the same name: a new id and an empty log.
    let again = c.create_topic("del-a", 2, &[]);
    assert_ne!(again.topic_id, a.topic_id);
    for p in 0..2 {
        assert_eq!(c.latest("del-a", p), 0);
        assert_eq!(c.produce_ok("del-a", p, batch(now_ms(), &values("new", 1, 5))), 0);
    }
    assert_eq!(c.latest("keep", 0), 3);
}

// ---- Metadata -----------------------------------------------------------------------

#[test]
fn metadata_auto_creates_unknown_topics_with_the_default_partitions() {
    let b = Broker::start_args(&["--default-partitions", "3"]);
    let mut c = Client::connect(b.addr);
    let m = c.metadata(Some(&["auto-1"]), true);
    assert_eq!(m.topics.len(), 1);
    let t = &m.topics[0];
    assert_eq!(t.error_code, 0);
    assert_eq!(t.name.as_ref().map(|n| n.to_string()).as_deref(), Some("auto-1"));
    assert_eq!(t.partitions.len(), 3);
    assert!(!t.topic_id.is_nil(), "topic id must not be zero");
    for (i, p) in t.partitions.iter().enumerate() {
        assert_eq!(p.partition_index, i as i32);
        assert_eq!(p.error_code, 0);
        assert_eq!(p.leader_id.0, 0);
    }
    assert_eq!(m.brokers.len(), 1);
    assert_eq!(m.brokers[0].port, b.addr.port() as i32);
    assert_eq!(m.brokers[0].host.to_string(), b.addr.ip().to_string());
    let id = t.topic_id;

    // Stable across calls and connections (whichever shard answers).
    for _ in 0..6 {
        let mut fresh = Client::connect(b.addr);
        let m = fresh.metadata(Some(&["auto-1"]), true);
        assert_eq!(m.topics[0].topic_id, id);
        let all = fresh.metadata(None, false);
        assert_eq!(
            all.topics.iter().find(|t| t.topic_id == id).and_then(|t| t.name.clone()).map(|n| n.to_string()).as_deref(),
            Some("auto-1")
        );
    }
    // Usable at once, on every partition.
    for p in 0..3 {
        assert_eq!(c.produce_ok("auto-1", p, batch(now_ms(), &values("auto", 1, 5))), 0);
    }

    // Not when the client does not allow it.
    let m = c.metadata(Some(&["auto-2"]), false);
    assert_eq!(m.topics[0].error_code, ErrorCode::UnknownTopicOrPartition.code());
    let all = c.metadata(None, false);
    assert!(all.topics.iter().all(|t| t.name.as_ref().map(|n| n.to_string()).as_deref() != Some("auto-2")));

    // Invalid names are refused, not created.
    let m = c.metadata(Some(&["bad/name"]), true);
    assert_eq!(m.topics[0].error_code, ErrorCode::InvalidTopicException.code());

    // Created topics have ids that Metadata repeats.
    let created = c.create_topic("explicit", 2, &[]);
    let m = c.metadata(Some(&["explicit"]), false);
    assert_eq!(m.topics[0].topic_id, created.topic_id);
}

#[test]
fn metadata_does_not_auto_create_when_the_broker_forbids_it() {
    let b = Broker::start_args(&["--auto-create-topics", "false"]);
    let mut c = Client::connect(b.addr);
    let m = c.metadata(Some(&["auto-3"]), true);
    assert_eq!(m.topics.len(), 1);
    assert_eq!(m.topics[0].error_code, ErrorCode::UnknownTopicOrPartition.code());
    let m = c.metadata(None, false);
    assert!(user_topics(&m).is_empty(), "{:?}", m.topics);
    // Older Metadata versions (which always allowed auto-creation) obey the broker too.
    let m: MetadataResponse = c.call(ApiKey::Metadata, 1, &metadata_request(Some(&["auto-4"]), true));
    assert_eq!(m.topics[0].error_code, ErrorCode::UnknownTopicOrPartition.code());
    assert!(!b.data_dir.join("auto-3-0").exists());
}

// ---- DescribeConfigs / DescribeCluster ------------------------------------------------

#[test]
fn describe_configs_shows_topic_overrides_and_defaults() {
    let b = Broker::start();
    let mut c = Client::connect(b.addr);
    c.create_topic("configured", 1, &[("retention.ms", "12345")]);
    c.create_topic("plain", 1, &[]);

    fn describe(c: &mut Client, topic: &str, keys: Option<&[&str]>) -> DescribeConfigsResponse {
        let mut res = DescribeConfigsResource::default();
        res.resource_type = 2; // topic
        res.resource_name = sb(topic);
        res.configuration_keys = keys.map(|k| k.iter().map(|s| sb(s)).collect());
        let mut req = DescribeConfigsRequest::default();
        req.resources = vec![res];
        c.call(ApiKey::DescribeConfigs, 4, &req)
    }
    let r = describe(&mut c, "configured", None);
    assert_eq!(r.results.len(), 1);
    let res = &r.results[0];
    assert_eq!(res.error_code, 0);
    assert_eq!(res.resource_name.to_string(), "configured");
    let get = |name: &str| {
        res.configs
            .iter()
            .find(|e| e.name.to_string() == name)
            .map(|e| (e.value.as_ref().map(|v| v.to_string()), e.config_source))
            .unwrap_or_else(|| panic!("{name} missing from {:?}", res.configs))
    };
    assert_eq!(get("retention.ms"), (Some("12345".to_string()), 1), "the topic's own value (TOPIC_CONFIG)");
    assert_eq!(get("segment.bytes"), (Some((1u64 << 30).to_string()), 5), "a default (DEFAULT_CONFIG)");
    assert_eq!(get("retention.bytes"), (Some("-1".to_string()), 5));
    assert_eq!(get("cleanup.policy"), (Some("delete".to_string()), 5));

    let r = describe(&mut c, "plain", None);
    let plain = &r.results[0].configs;
    let retention = plain.iter().find(|e| e.name.to_string() == "retention.ms").expect("retention.ms");
    assert_eq!(retention.value.as_ref().map(|v| v.to_string()), Some((7i64 * 24 * 3600 * 1000).to_string()));
    assert_eq!(retention.config_source, 5);

    let r = describe(&mut c, "configured", Some(&["retention.ms"]));
    let names: Vec<String> = r.results[0].configs.iter().map(|e| e.name.to_string()).collect();
    assert_eq!(names, vec!["retention.ms".to_string()]);

    let r = describe(&mut c, "missing", None);
    assert_eq!(r.results[0].error_code, ErrorCode::UnknownTopicOrPartition.code());
}

#[test]
fn describe_cluster_lists_this_broker() {
    let b = Broker::start();
    let mut c = Client::connect(b.addr);
    for version in [0i16, 1] {
        let mut req = DescribeClusterRequest::default();
        if version >= 1 {
            req.endpoint_type = 1;
        }
        let r: DescribeClusterResponse = c.call(ApiKey::DescribeCluster, version, &req);
        assert_eq!(r.error_code, 0);
        assert_eq!(r.brokers.len(), 1);
        assert_eq!(r.brokers[0].broker_id.0, 0);
        assert_eq!(r.brokers[0].port, b.addr.port() as i32);
        assert_eq!(r.brokers[0].host.to_string(), b.addr.ip().to_string());
        assert_eq!(r.controller_id.0, 0);
        let m = c.metadata(None, false);
        assert_eq!(Some(r.cluster_id.to_string()), m.cluster_id.map(|s| s.to_string()));
        assert!(!r.cluster_id.is_empty());
    }
}

fn describe_topic(c: &mut Client, resource_type: i8, name: &str) -> Vec<(String, String, i8)> {
    let mut res = DescribeConfigsResource::default();
    res.resource_type = resource_type;
    res.resource_name = sb(name);
    res.configuration_keys = None; // all of them
    let mut req = DescribeConfigsRequest::default();
    req.resources = vec![res];
    let r: DescribeConfigsResponse = c.call(ApiKey::DescribeConfigs, 4, &req);
    assert_eq!(r.results[0].error_code, 0, "{:?}", r.results[0].error_message);
    r.results[0]
        .configs
        .iter()
        .map(|e| (e.name.to_string(), e.value.as_ref().map(|v| v.to_string()).unwrap_or_default(), e.config_source))
        .collect()
}

fn config_of(configs: &[(String, String, i8)], name: &str) -> (String, i8) {
    let (_, v, s) = configs.iter().find(|(n, ..)| n == name).unwrap_or_else(|| panic!("{name} missing: {configs:?}"));
    (v.clone(), *s)
}

/// IncrementalAlterConfigs of one resource: (name, op, value); the (error code, message).
fn alter(c: &mut Client, resource_type: i8, name: &str, ops: &[(&str, i8, Option<&str>)]) -> (i16, String) {
    use ringbroker::protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
    use ringbroker::protocol::messages::{IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse};
    let mut res = AlterConfigsResource::default();
    res.resource_type = resource_type;
    res.resource_name = sb(name);
    res.configs = ops
        .iter()
        .map(|(k, op, v)| {
            let mut a = AlterableConfig::default();
            a.name = sb(k);
            a.config_operation = *op;
            a.value = v.map(sb);
            a
        })
        .collect();
    let mut req = IncrementalAlterConfigsRequest::default();
    req.resources = vec![res];
    let r: IncrementalAlterConfigsResponse = c.call(ApiKey::IncrementalAlterConfigs, 1, &req);
    let o = &r.responses[0];
    (o.error_code, o.error_message.as_ref().map(|m| m.to_string()).unwrap_or_default())
}

#[test]
fn topic_configs_take_effect_or_are_refused() {
    let b = Broker::start();
    let mut c = Client::connect(b.addr);

    // LogAppendTime: the broker's clock in the batch and in the produce response.
    assert_eq!(c.create_topic("stamped", 1, &[("message.timestamp.type", "LogAppendTime")]).error_code, 0);
    let before = now_ms();
    let r = c.produce("stamped", 0, batch(1_000, &values("s", 3, 10)));
    assert_eq!(r.error_code, 0);
    assert!(r.log_append_time_ms >= before && r.log_append_time_ms <= now_ms(), "{}", r.log_append_time_ms);
    let p = c.fetch("stamped", 0, 0, 1 << 20);
    let records = p.records.expect("records");
    let (_, raw) = decode_batches(&records)[0];
    assert_eq!(i16::from_be_bytes([raw[21], raw[22]]) & 0x8, 0x8, "timestamp type attribute");
    assert_eq!(i64::from_be_bytes(raw[35..43].try_into().unwrap()), r.log_append_time_ms, "maxTimestamp");
    let r = c.produce("plain-time", 0, batch(1_000, &values("s", 1, 10)));
    assert_eq!(r.log_append_time_ms, -1, "CreateTime topics answer -1");

    // compression.type: stored in the topic's codec whatever the producer sent.
    assert_eq!(c.create_topic("packed", 1, &[("compression.type", "lz4")]).error_code, 0);
    let sent = values("p", 20, 100);
    assert_eq!(c.produce("packed", 0, batch(1_000, &sent)).error_code, 0);
    let records = c.fetch("packed", 0, 0, 1 << 20).records.expect("records");
    let (_, raw) = decode_batches(&records)[0];
    assert_eq!(raw[22] & 0x7, 3, "lz4 on disk and on the wire");
    let back = ringbroker::protocol::batch::recompress(raw, 0, 1 << 20).expect("decompresses");
    assert_eq!(decode_records(&back).iter().map(|r| r.value.clone().unwrap()).collect::<Vec<_>>(), sent);

    // compression.<codec>.level (KIP-390): a recompressed batch is packed at the topic's level.
    let words = ["offset", "leader", "epoch", "batch", "replica", "log", "fetch", "ack"];
    let mut x = 7u32;
    let prose: Vec<Vec<u8>> = (0..300)
        .map(|_| {
            let w: Vec<&str> = (0..30)
                .map(|_| {
                    x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                    words[(x >> 16) as usize % 8]
                })
                .collect();
            w.join(" ").into_bytes()
        })
        .collect();
    for (codec, bits, config, low, high) in
        [("gzip", 1, "compression.gzip.level", "1", "9"), ("zstd", 4, "compression.zstd.level", "-5", "19")]
    {
        let mut sizes = Vec::new();
        for level in [low, high] {
            let topic = format!("{codec}-at-{level}");
            let made = c.create_topic(&topic, 1, &[("compression.type", codec), (config, level)]);
            assert_eq!(made.error_code, 0, "{topic}");
            assert_eq!(c.produce(&topic, 0, batch(1_000, &prose)).error_code, 0, "{topic}");
            let records = c.fetch(&topic, 0, 0, 1 << 20).records.expect("records");
            let (_, raw) = decode_batches(&records)[0];
            assert_eq!(raw[22] & 0x7, bits, "{topic}: stored in the topic's codec");
            let back = ringbroker::protocol::batch::recompress(raw, 0, 1 << 20).expect("decompresses");
            assert_eq!(decode_records(&back).iter().map(|r| r.value.clone().unwrap()).collect::<Vec<_>>(), prose);
            sizes.push(raw.len());
        }
        assert!(sizes[1] < sizes[0], "{codec}: level {high} stored {} bytes, level {low} {}", sizes[1], sizes[0]);
    }

    // min.insync.replicas above the one replica there is: Kafka 4 waits for at most as many
    // replicas as the partition has (KIP-966), so acks=all succeeds, as against Kafka 4.4.
    assert_eq!(c.create_topic("two-isr", 1, &[("min.insync.replicas", "2")]).error_code, 0);
    assert_eq!(c.produce("two-isr", 0, batch(1_000, &values("i", 1, 10))).error_code, 0);

    // Accepted configs do something; the rest are refused with the reason.
    for (config, value, says) in [
        ("compression.zstd.level", "23", "from -131072 to 22"),
        ("preallocate", "true", "not preallocated"),
        ("retention.ms", "soon", "whole number"),
        ("no.such.config", "1", "unknown config"),
    ] {
        let name = format!("refused-{}", config.replace('.', "-"));
        let r = c.create_topics(vec![new_topic(&name, 1, 1, &[(config, value)])], false).topics.remove(0);
        assert_eq!(r.error_code, ErrorCode::InvalidConfig.code(), "{config}={value}");
        let msg = r.error_message.map(|m| m.to_string()).unwrap_or_default();
        assert!(msg.contains(says), "{config}={value}: {msg}");
    }
    let (code, msg) = alter(&mut c, 2, "packed", &[("flush.ms", 0, Some("-5"))]);
    assert_eq!((code, msg.contains("at least 0")), (ErrorCode::InvalidConfig.code(), true), "{msg}");
}

#[test]
fn configs_are_altered_incrementally_for_topics_and_broker_defaults_and_survive_a_restart() {
    const SET: i8 = 0;
    const DELETE: i8 = 1;
    const APPEND: i8 = 2;
    const SUBTRACT: i8 = 3;
    let mut b = Broker::start();
    let dir = b.take_tempdir().expect("temp dir");
    let mut c = Client::connect(b.addr);
    c.create_topic("listed", 1, &[]);

    assert_eq!(alter(&mut c, 2, "listed", &[("cleanup.policy", APPEND, Some("compact"))]).0, 0);
    assert_eq!(config_of(&describe_topic(&mut c, 2, "listed"), "cleanup.policy"), ("delete,compact".into(), 1));
    assert_eq!(alter(&mut c, 2, "listed", &[("cleanup.policy", SUBTRACT, Some("delete"))]).0, 0);
    assert_eq!(config_of(&describe_topic(&mut c, 2, "listed"), "cleanup.policy").0, "compact");
    let (code, msg) = alter(&mut c, 2, "listed", &[("retention.ms", APPEND, Some("5"))]);
    assert_eq!(code, ErrorCode::InvalidConfig.code(), "APPEND on a non-list config: {msg}");
    assert_eq!(alter(&mut c, 2, "listed", &[("cleanup.policy", SUBTRACT, Some("compact"))]).0, 0);
    assert_eq!(config_of(&describe_topic(&mut c, 2, "listed"), "cleanup.policy"), ("".into(), 1), "empty, as Kafka 4");
    // APPEND starts from the built-in default, not a dynamic broker default (Kafka's rule).
    c.create_topic("appended", 1, &[]);
    assert_eq!(alter(&mut c, 4, "", &[("log.cleanup.policy", SET, Some("compact"))]).0, 0);
    assert_eq!(config_of(&describe_topic(&mut c, 2, "appended"), "cleanup.policy"), ("compact".into(), 3));
    assert_eq!(alter(&mut c, 2, "appended", &[("cleanup.policy", APPEND, Some("delete"))]).0, 0);
    assert_eq!(config_of(&describe_topic(&mut c, 2, "appended"), "cleanup.policy"), ("delete".into(), 1));
    assert_eq!(alter(&mut c, 4, "", &[("log.cleanup.policy", DELETE, None)]).0, 0);
    assert_eq!(alter(&mut c, 2, "listed", &[("cleanup.policy", SET, Some("compact"))]).0, 0);

    // A broker-wide default applies to every topic that does not set its own.
    assert_eq!(alter(&mut c, 4, "", &[("log.retention.ms", SET, Some("123456"))]).0, 0);
    assert_eq!(config_of(&describe_topic(&mut c, 2, "listed"), "retention.ms"), ("123456".into(), 3));
    assert_eq!(alter(&mut c, 4, "0", &[("log.retention.ms", SET, Some("654321"))]).0, 0);
    assert_eq!(
        config_of(&describe_topic(&mut c, 2, "listed"), "retention.ms"),
        ("654321".into(), 2),
        "this broker's own"
    );
    assert_eq!(config_of(&describe_topic(&mut c, 4, ""), "log.retention.ms"), ("123456".into(), 3));
    let (code, msg) = alter(&mut c, 4, "", &[("num.partitions", SET, Some("3"))]);
    assert_eq!(code, ErrorCode::InvalidRequest.code(), "a static setting: {msg}");
    assert!(msg.contains("config file"), "{msg}");

    b.stop();
    let b = support::restart(dir.path(), "127.0.0.1:0", &[]);
    let mut c = Client::connect(b.addr);
    assert_eq!(config_of(&describe_topic(&mut c, 2, "listed"), "retention.ms"), ("654321".into(), 2));
    assert_eq!(config_of(&describe_topic(&mut c, 2, "listed"), "cleanup.policy").0, "compact");
    assert_eq!(alter(&mut c, 4, "0", &[("log.retention.ms", DELETE, None)]).0, 0);
    assert_eq!(config_of(&describe_topic(&mut c, 2, "listed"), "retention.ms"), ("123456".into(), 3));
}

#[test]
fn list_offsets_by_timestamp_finds_the_record_inside_a_compressed_batch() {
    use ringbroker::protocol::batch::{build_timed, recompress, KeyValue};
    let b = Broker::start();
    let mut c = Client::connect(b.addr);
    c.create_topic("timed", 1, &[]);
    let base = now_ms() - 60_000;
    for codec in [1u8, 2, 3, 4] {
        let timed: Vec<(i64, KeyValue)> =
            (0..10).map(|i| (base + codec as i64 * 1000 + i * 10, (None, Some(&b"v"[..])))).collect();
        let packed = recompress(&build_timed(&timed), codec, 1 << 20).unwrap();
        assert_eq!(c.produce("timed", 0, packed).error_code, 0);
    }
    for (codec, i) in [(1i64, 3i64), (2, 0), (3, 9), (4, 5)] {
        let ts = base + codec * 1000 + i * 10;
        let p = c.list_offsets("timed", 0, ts - 5);
        assert_eq!(p.error_code, 0);
        assert_eq!((p.offset, p.timestamp), ((codec - 1) * 10 + i, ts), "codec {codec}, record {i}");
    }
}

/// Only the classic group protocol is served: the KIP-848 consumer protocol's APIs are not
/// advertised, so clients configured for it refuse to start (see the Java test in
/// groups_java.rs), and one that sends ConsumerGroupHeartbeat anyway is disconnected.
#[test]
fn the_kip_848_group_protocol_is_not_served() {
    use ringbroker::protocol::messages::ConsumerGroupHeartbeatRequest;
    let b = Broker::start();
    let mut c = Client::connect(b.addr);
    let keys: Vec<i16> = c.api_versions().api_keys.iter().map(|k| k.api_key).collect();
    for unserved in [ApiKey::ConsumerGroupHeartbeat, ApiKey::ConsumerGroupDescribe] {
        assert!(!keys.contains(&(unserved as i16)), "{unserved:?} is advertised");
    }
    assert!(keys.contains(&(ApiKey::JoinGroup as i16)), "the classic protocol is");
    let mut req = ConsumerGroupHeartbeatRequest::default();
    req.group_id = ringbroker::protocol::messages::GroupId(sb("g848"));
    req.member_epoch = 0;
    c.send(ApiKey::ConsumerGroupHeartbeat, 0, &req);
    assert!(c.wait_closed(CLOSE_LIMIT), "ConsumerGroupHeartbeat was not refused");
}

/// BROKER_LOGGER (`kafka-configs --entity-type broker-loggers --entity-name 0`): the running
/// broker's log levels are listed and changed, as its own log shows. Each change logs a line
/// at INFO under `ringbroker::loggers` once it applies, so that line appears only while
/// that logger's level lets it through.
#[test]
fn broker_loggers_change_what_the_running_broker_logs() {
    use std::io::{BufRead, BufReader};
    const LOGGER: i8 = 8;
    const SET: i8 = 0;
    const DELETE: i8 = 1;
    let data = tempfile::tempdir().expect("temp dir");
    let mut child = crate::metrics::logging_broker(data.path(), &["--admin-listen", "off", "--log-level", "warn"]);
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let addr = stdout
        .lines()
        .map_while(Result::ok)
        .find_map(|l| l.strip_prefix("ringbroker listening on ").map(|a| a.trim().parse().expect("an address")))
        .expect("the broker reports its address");
    let (tx, lines) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut c = Client::connect(addr);
    // Every logger listed with the level it logs at (`ringbroker.loggers`: the root's).
    let level = |c: &mut Client, logger: &str| {
        let all = describe_topic(c, LOGGER, "0");
        all.iter().find(|(n, ..)| n == logger).unwrap_or_else(|| panic!("{logger} not in {all:?}")).1.clone()
    };
    assert_eq!((level(&mut c, "root"), level(&mut c, "ringbroker.loggers")), ("WARN".into(), "WARN".into()));

    assert_eq!(alter(&mut c, LOGGER, "0", &[("ringbroker::loggers", SET, Some("INFO"))]).0, 0);
    assert_eq!(level(&mut c, "ringbroker.loggers"), "INFO");
    assert_eq!(alter(&mut c, LOGGER, "0", &[("ringbroker::loggers", DELETE, None)]).0, 0);
    assert_eq!(level(&mut c, "ringbroker.loggers"), "WARN", "the logger follows the root again");
    assert_eq!(alter(&mut c, LOGGER, "0", &[("ringbroker.loggers", SET, Some("DEBUG"))]).0, 0);
    assert_eq!(level(&mut c, "ringbroker.loggers"), "DEBUG");
    let (code, msg) = alter(&mut c, LOGGER, "0", &[("ringbroker::loggers", SET, Some("LOUD"))]);
    assert_eq!(code, ErrorCode::InvalidConfig.code(), "{msg}");
    assert!(msg.contains("valid levels are"), "{msg}");

    // The first change's line and the third's, not the second's (WARN hides it).
    let mut changes = Vec::new();
    while changes.len() < 2 {
        let line = lines.recv_timeout(Duration::from_secs(30)).expect("the broker logs each change it lets through");
        if line.contains("log levels changed") {
            changes.push(line);
        }
    }
    assert!(changes[0].ends_with("filter=warn,ringbroker::loggers=info"), "{changes:?}");
    assert!(changes[1].ends_with("filter=warn,ringbroker::loggers=debug"), "{changes:?}");
    let _ = child.kill();
    let _ = child.wait();
}
