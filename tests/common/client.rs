//! A tiny synchronous Kafka client for the integration tests: std `TcpStream`, the generated
//! codec the crate re-exports, and nothing else. It frames requests (size prefix + request
//! header + body), can send any number of requests before reading a response (pipelining),
//! and reads responses back by correlation id. Also: a record-batch decoder for fetched
//! data and a batch builder with per-record timestamps.
#![allow(dead_code)] // each test binary uses a different subset

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::{Buf, Bytes, BytesMut};
use ringbroker::protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use ringbroker::protocol::messages::create_topics_response::CreatableTopicResult;
use ringbroker::protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use ringbroker::protocol::messages::fetch_response::PartitionData;
use ringbroker::protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use ringbroker::protocol::messages::list_offsets_response::ListOffsetsPartitionResponse;
use ringbroker::protocol::messages::metadata_request::MetadataRequestTopic;
use ringbroker::protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use ringbroker::protocol::messages::produce_response::PartitionProduceResponse;
use ringbroker::protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, CreateTopicsRequest, CreateTopicsResponse, FetchRequest,
    FetchResponse, ListOffsetsRequest, ListOffsetsResponse, MetadataRequest, MetadataResponse, ProduceRequest,
    ProduceResponse, RequestHeader, TopicName,
};
use ringbroker::protocol::{Decodable, Encodable, StrBytes};

/// Versions the helpers use (all flexible, names rather than topic ids unless stated).
pub(crate) const API_VERSIONS_V: i16 = 3;
pub(crate) const METADATA_V: i16 = 12;
pub(crate) const PRODUCE_V: i16 = 9;
pub(crate) const FETCH_V: i16 = 12;
pub(crate) const LIST_OFFSETS_V: i16 = 7;
pub(crate) const CREATE_TOPICS_V: i16 = 7;

/// How long any single read may block before the test fails instead of hanging.
pub(crate) const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// A request sent and not yet answered.
#[derive(Debug, Clone, Copy)]
struct Sent {
    correlation_id: i32,
    api: ApiKey,
    version: i16,
}

/// A response frame with its header stripped.
#[derive(Debug)]
pub(crate) struct Response {
    pub correlation_id: i32,
    pub api: ApiKey,
    pub version: i16,
    pub body: Bytes,
}

impl Response {
    pub(crate) fn decode<T: Decodable>(&self) -> T {
        let mut body = self.body.clone();
        T::decode(&mut body, self.version)
            .unwrap_or_else(|e| panic!("cannot decode the {:?} v{} response: {e}", self.api, self.version))
    }
}

pub(crate) struct Client {
    stream: TcpStream,
    next_correlation: i32,
    in_flight: VecDeque<Sent>,
}

/// `s` as the codec's string type.
pub(crate) fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

pub(crate) fn topic_name(s: &str) -> TopicName {
    TopicName(sb(s))
}

pub(crate) fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("clock after 1970").as_millis() as i64
}

/// Polls `cond` every 50 ms until it holds or `limit` passes; returns whether it held.
pub(crate) fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Client {
    pub(crate) fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("cannot connect to the broker at {addr}: {e}"));
        stream.set_read_timeout(Some(IO_TIMEOUT)).expect("read timeout");
        stream.set_write_timeout(Some(IO_TIMEOUT)).expect("write timeout");
        stream.set_nodelay(true).expect("nodelay");
        Client { stream, next_correlation: 1, in_flight: VecDeque::new() }
    }

    pub(crate) fn stream(&self) -> &TcpStream {
        &self.stream
    }

    /// Encodes a whole request frame (size prefix, header, body).
    pub(crate) fn frame<R: Encodable>(api: ApiKey, version: i16, correlation_id: i32, req: &R) -> Vec<u8> {
        let mut header = RequestHeader::default();
        header.request_api_key = api as i16;
        header.request_api_version = version;
        header.correlation_id = correlation_id;
        header.client_id = Some(sb("ringbroker-tests"));
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&[0; 4]);
        header.encode(&mut buf, api.request_header_version(version)).expect("encode request header");
        req.encode(&mut buf, version).unwrap_or_else(|e| panic!("encode {api:?} v{version}: {e}"));
        let size = (buf.len() - 4) as i32;
        buf[..4].copy_from_slice(&size.to_be_bytes());
        buf.to_vec()
    }

    /// A request frame built by hand: a request header of `header_version` (1 or 2) with
    /// these fields, then `body` as is. For versions and bodies the codec would refuse.
    pub(crate) fn raw_frame(
        api_key: i16,
        version: i16,
        correlation_id: i32,
        header_version: i16,
        body: &[u8],
    ) -> Vec<u8> {
        let mut header = RequestHeader::default();
        header.request_api_key = api_key;
        header.request_api_version = version;
        header.correlation_id = correlation_id;
        header.client_id = Some(sb("ringbroker-tests"));
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&[0; 4]);
        header.encode(&mut buf, header_version).expect("encode request header");
        buf.extend_from_slice(body);
        let size = (buf.len() - 4) as i32;
        buf[..4].copy_from_slice(&size.to_be_bytes());
        buf.to_vec()
    }

    /// Sends a request without waiting for its response; returns its correlation id.
    pub(crate) fn send<R: Encodable>(&mut self, api: ApiKey, version: i16, req: &R) -> i32 {
        let id = self.next_correlation;
        self.send_with_id(api, version, id, req);
        id
    }

    /// Sends a request with a chosen correlation id.
    pub(crate) fn send_with_id<R: Encodable>(&mut self, api: ApiKey, version: i16, correlation_id: i32, req: &R) {
        let frame = Client::frame(api, version, correlation_id, req);
        self.stream.write_all(&frame).unwrap_or_else(|e| panic!("sending {api:?} v{version}: {e}"));
        self.next_correlation = self.next_correlation.max(correlation_id) + 1;
        self.in_flight.push_back(Sent { correlation_id, api, version });
    }

    /// Sends a request that gets no response (acks=0 produce): not tracked.
    pub(crate) fn send_no_response<R: Encodable>(&mut self, api: ApiKey, version: i16, req: &R) -> i32 {
        let id = self.next_correlation;
        let frame = Client::frame(api, version, id, req);
        self.stream.write_all(&frame).unwrap_or_else(|e| panic!("sending {api:?} v{version}: {e}"));
        self.next_correlation += 1;
        id
    }

    /// Writes raw bytes (hostile-input tests). Errors are returned: the broker may already
    /// have closed the connection.
    pub(crate) fn write_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)?;
        self.stream.flush()
    }

    /// Stops sending: the broker reads end-of-stream after what was sent.
    pub(crate) fn shutdown_write(&self) {
        let _ = self.stream.shutdown(Shutdown::Write);
    }

    /// Reads one response frame: `None` when the broker closed the connection first.
    pub(crate) fn read_frame(&mut self) -> io::Result<Option<Vec<u8>>> {
        let mut size = [0u8; 4];
        if !read_exact_or_eof(&mut self.stream, &mut size)? {
            return Ok(None);
        }
        let size = i32::from_be_bytes(size);
        assert!(size >= 4, "response frame size {size} is too small for a correlation id");
        let mut frame = vec![0u8; size as usize];
        if !read_exact_or_eof(&mut self.stream, &mut frame)? {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed inside a response frame"));
        }
        Ok(Some(frame))
    }

    /// Reads the next response, whichever request it answers, and strips its header.
    pub(crate) fn recv_any(&mut self) -> Response {
        let frame = match self.read_frame() {
            Ok(Some(f)) => f,
            Ok(None) => panic!("the broker closed the connection; awaiting {:?}", self.in_flight),
            Err(e) => panic!("reading a response (awaiting {:?}): {e}", self.in_flight),
        };
        let mut body = Bytes::from(frame);
        let correlation_id = body.get_i32();
        let at = self
            .in_flight
            .iter()
            .position(|s| s.correlation_id == correlation_id)
            .unwrap_or_else(|| panic!("response with unknown correlation id {correlation_id}"));
        let sent = self.in_flight.remove(at).expect("present");
        // ApiVersions always answers with header v0 (KIP-511).
        let header_version =
            if sent.api == ApiKey::ApiVersions { 0 } else { sent.api.response_header_version(sent.version) };
        if header_version >= 1 {
            skip_tagged_fields(&mut body);
        }
        Response { correlation_id, api: sent.api, version: sent.version, body }
    }

    /// Reads the response to the oldest request in flight, checking it comes next.
    pub(crate) fn recv<T: Decodable>(&mut self) -> T {
        let expected = self.in_flight.front().copied().expect("a request in flight");
        let r = self.recv_any();
        assert_eq!(
            r.correlation_id, expected.correlation_id,
            "responses out of order: expected the answer to {expected:?}"
        );
        r.decode()
    }

    /// Sends a request and reads its response.
    pub(crate) fn call<Req: Encodable, Resp: Decodable>(&mut self, api: ApiKey, version: i16, req: &Req) -> Resp {
        assert!(self.in_flight.is_empty(), "call() with requests still in flight");
        self.send(api, version, req);
        self.recv()
    }

    /// Waits until the broker closes the connection, discarding anything it sends first.
    /// `true` when it closed (EOF or reset), `false` if it was still open after `limit`.
    pub(crate) fn wait_closed(&mut self, limit: Duration) -> bool {
        let end = Instant::now() + limit;
        let mut buf = [0u8; 4096];
        loop {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            self.stream.set_read_timeout(Some(left.min(Duration::from_secs(1)))).expect("read timeout");
            match self.stream.read(&mut buf) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => continue,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return true, // reset: closed too
            }
        }
    }

    // ---- typed helpers -------------------------------------------------------------

    pub(crate) fn api_versions(&mut self) -> ApiVersionsResponse {
        self.call(ApiKey::ApiVersions, API_VERSIONS_V, &api_versions_request())
    }

    /// Metadata v12 for the named topics (`None`: all topics).
    pub(crate) fn metadata(&mut self, topics: Option<&[&str]>, allow_auto_create: bool) -> MetadataResponse {
        self.call(ApiKey::Metadata, METADATA_V, &metadata_request(topics, allow_auto_create))
    }

    pub(crate) fn create_topics(&mut self, topics: Vec<CreatableTopic>, validate_only: bool) -> CreateTopicsResponse {
        let mut req = CreateTopicsRequest::default();
        req.topics = topics;
        req.timeout_ms = 30_000;
        req.validate_only = validate_only;
        self.call(ApiKey::CreateTopics, CREATE_TOPICS_V, &req)
    }

    /// Creates one topic and checks it worked.
    pub(crate) fn create_topic(
        &mut self,
        name: &str,
        partitions: i32,
        configs: &[(&str, &str)],
    ) -> CreatableTopicResult {
        let mut r = self.create_topics(vec![new_topic(name, partitions, 1, configs)], false);
        assert_eq!(r.topics.len(), 1);
        let t = r.topics.remove(0);
        assert_eq!(t.error_code, 0, "creating {name}: {:?}", t.error_message);
        assert_eq!(t.num_partitions, partitions);
        t
    }

    /// Produces one batch with acks=-1 and returns the partition's answer.
    pub(crate) fn produce(&mut self, topic: &str, partition: i32, records: Vec<u8>) -> PartitionProduceResponse {
        self.produce_acks(topic, partition, records, -1)
    }

    pub(crate) fn produce_acks(
        &mut self,
        topic: &str,
        partition: i32,
        records: Vec<u8>,
        acks: i16,
    ) -> PartitionProduceResponse {
        let resp: ProduceResponse =
            self.call(ApiKey::Produce, PRODUCE_V, &produce_request(topic, &[(partition, records)], acks));
        single_produce(resp)
    }

    /// Produces one batch and checks it was accepted; returns its base offset.
    pub(crate) fn produce_ok(&mut self, topic: &str, partition: i32, records: Vec<u8>) -> i64 {
        let p = self.produce(topic, partition, records);
        assert_eq!(p.error_code, 0, "producing to {topic}-{partition}");
        p.base_offset
    }

    /// Fetch v12 (by name) of one partition, no waiting.
    pub(crate) fn fetch(
        &mut self,
        topic: &str,
        partition: i32,
        offset: i64,
        partition_max_bytes: i32,
    ) -> PartitionData {
        let resp: FetchResponse =
            self.call(ApiKey::Fetch, FETCH_V, &fetch_request(topic, partition, offset, partition_max_bytes));
        single_fetch(resp)
    }

    /// Reads a whole partition from `from` up to its high watermark, batch by batch.
    pub(crate) fn fetch_all(&mut self, topic: &str, partition: i32, from: i64) -> Vec<Record> {
        let mut out = Vec::new();
        let mut offset = from;
        loop {
            let p = self.fetch(topic, partition, offset, 1 << 20);
            assert_eq!(p.error_code, 0, "fetch {topic}-{partition} at {offset}");
            let records = decode_records(p.records.as_deref().unwrap_or(&[]));
            let fresh: Vec<Record> = records.into_iter().filter(|r| r.offset >= offset).collect();
            match fresh.last() {
                Some(last) => offset = last.offset + 1,
                None => {
                    assert!(offset >= p.high_watermark, "no records at {offset} below the HWM {}", p.high_watermark);
                    return out;
                }
            }
            out.extend(fresh);
        }
    }

    pub(crate) fn list_offsets(&mut self, topic: &str, partition: i32, timestamp: i64) -> ListOffsetsPartitionResponse {
        let resp: ListOffsetsResponse =
            self.call(ApiKey::ListOffsets, LIST_OFFSETS_V, &list_offsets_request(topic, partition, timestamp));
        assert_eq!(resp.topics.len(), 1);
        let mut t = resp.topics.into_iter().next().expect("one topic");
        assert_eq!(t.partitions.len(), 1);
        t.partitions.remove(0)
    }

    /// ListOffsets latest (the high watermark), checked for errors.
    pub(crate) fn latest(&mut self, topic: &str, partition: i32) -> i64 {
        let p = self.list_offsets(topic, partition, -1);
        assert_eq!(p.error_code, 0, "ListOffsets latest {topic}-{partition}");
        p.offset
    }

    pub(crate) fn earliest(&mut self, topic: &str, partition: i32) -> i64 {
        let p = self.list_offsets(topic, partition, -2);
        assert_eq!(p.error_code, 0, "ListOffsets earliest {topic}-{partition}");
        p.offset
    }
}

fn read_exact_or_eof(s: &mut TcpStream, buf: &mut [u8]) -> io::Result<bool> {
    let mut got = 0;
    while got < buf.len() {
        match s.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed mid-frame")),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if got == 0 && e.kind() == io::ErrorKind::ConnectionReset => return Ok(false),
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

fn get_uvarint(b: &mut Bytes) -> u64 {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = b.get_u8();
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return v;
        }
    }
    panic!("varint too long");
}

fn skip_tagged_fields(b: &mut Bytes) {
    let n = get_uvarint(b);
    for _ in 0..n {
        let _tag = get_uvarint(b);
        let len = get_uvarint(b) as usize;
        b.advance(len);
    }
}

// ---- request builders --------------------------------------------------------------

pub(crate) fn api_versions_request() -> ApiVersionsRequest {
    let mut r = ApiVersionsRequest::default();
    r.client_software_name = sb("ringbroker-tests");
    r.client_software_version = sb("0.1.0");
    r
}

pub(crate) fn metadata_request(topics: Option<&[&str]>, allow_auto_create: bool) -> MetadataRequest {
    let mut r = MetadataRequest::default();
    r.topics = topics.map(|ts| {
        ts.iter()
            .map(|n| {
                let mut t = MetadataRequestTopic::default();
                t.name = Some(topic_name(n));
                t
            })
            .collect()
    });
    r.allow_auto_topic_creation = allow_auto_create;
    r
}

pub(crate) fn new_topic(
    name: &str,
    partitions: i32,
    replication_factor: i16,
    configs: &[(&str, &str)],
) -> CreatableTopic {
    let mut t = CreatableTopic::default();
    t.name = topic_name(name);
    t.num_partitions = partitions;
    t.replication_factor = replication_factor;
    t.configs = configs
        .iter()
        .map(|(k, v)| {
            let mut c = CreatableTopicConfig::default();
            c.name = sb(k);
            c.value = Some(sb(v));
            c
        })
        .collect();
    t
}

/// A Produce request (names, v3-v12) with one batch per listed partition.
pub(crate) fn produce_request(topic: &str, batches: &[(i32, Vec<u8>)], acks: i16) -> ProduceRequest {
    let mut t = TopicProduceData::default();
    t.name = topic_name(topic);
    t.partition_data = batches
        .iter()
        .map(|(index, records)| {
            let mut p = PartitionProduceData::default();
            p.index = *index;
            p.records = Some(Bytes::from(records.clone()));
            p
        })
        .collect();
    let mut r = ProduceRequest::default();
    r.acks = acks;
    r.timeout_ms = 30_000;
    r.topic_data = vec![t];
    r
}

/// The single partition answer of a one-partition produce.
pub(crate) fn single_produce(resp: ProduceResponse) -> PartitionProduceResponse {
    assert_eq!(resp.responses.len(), 1, "one topic in the produce response");
    let mut t = resp.responses.into_iter().next().expect("one topic");
    assert_eq!(t.partition_responses.len(), 1, "one partition in the produce response");
    t.partition_responses.remove(0)
}

pub(crate) fn fetch_partition(partition: i32, offset: i64, partition_max_bytes: i32) -> FetchPartition {
    let mut p = FetchPartition::default();
    p.partition = partition;
    p.fetch_offset = offset;
    p.partition_max_bytes = partition_max_bytes;
    p
}

/// A Fetch request by name (v4-v12) for one partition: no waiting, no session.
pub(crate) fn fetch_request(topic: &str, partition: i32, offset: i64, partition_max_bytes: i32) -> FetchRequest {
    let mut t = FetchTopic::default();
    t.topic = topic_name(topic);
    t.partitions = vec![fetch_partition(partition, offset, partition_max_bytes)];
    let mut r = FetchRequest::default();
    r.replica_id = (-1).into();
    r.max_wait_ms = 0;
    r.min_bytes = 0;
    r.max_bytes = 50 << 20;
    r.session_id = 0;
    r.session_epoch = -1;
    r.topics = vec![t];
    r
}

/// A Fetch request by topic id (v13+) for one partition.
pub(crate) fn fetch_request_by_id(
    topic_id: uuid::Uuid,
    partition: i32,
    offset: i64,
    partition_max_bytes: i32,
) -> FetchRequest {
    let mut r = fetch_request("", partition, offset, partition_max_bytes);
    r.topics[0].topic = topic_name("");
    r.topics[0].topic_id = topic_id;
    r
}

/// The single partition of a one-partition fetch response.
pub(crate) fn single_fetch(resp: FetchResponse) -> PartitionData {
    assert_eq!(resp.error_code, 0, "fetch top-level error");
    assert_eq!(resp.responses.len(), 1, "one topic in the fetch response");
    let mut t = resp.responses.into_iter().next().expect("one topic");
    assert_eq!(t.partitions.len(), 1, "one partition in the fetch response");
    t.partitions.remove(0)
}

pub(crate) fn list_offsets_request(topic: &str, partition: i32, timestamp: i64) -> ListOffsetsRequest {
    let mut p = ListOffsetsPartition::default();
    p.partition_index = partition;
    p.timestamp = timestamp;
    let mut t = ListOffsetsTopic::default();
    t.name = topic_name(topic);
    t.partitions = vec![p];
    let mut r = ListOffsetsRequest::default();
    r.replica_id = (-1).into();
    r.topics = vec![t];
    r.timeout_ms = 30_000;
    r
}

// ---- record batches ------------------------------------------------------------------

/// One record of a fetched batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
}

/// A fetched batch's header fields and where it sits in the record set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BatchInfo {
    pub base_offset: i64,
    pub size: usize,
    pub record_count: i32,
}

fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn be_i64(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// The whole batches at the front of a record set; a partial trailing batch (allowed at the
/// end of a fetch response) is left out. Every whole batch must have a valid CRC.
pub(crate) fn decode_batches(mut set: &[u8]) -> Vec<(BatchInfo, &[u8])> {
    let mut out = Vec::new();
    while set.len() >= 12 {
        let len = be_i32(set, 8);
        assert!(len >= 49, "batch length {len} in a fetched record set");
        let size = 12 + len as usize;
        if set.len() < size {
            break; // partial batch at the end
        }
        let b = &set[..size];
        assert_eq!(b[16], 2, "magic");
        let crc = be_i32(b, 17) as u32;
        assert_eq!(crc, crc32c::crc32c(&b[21..]), "CRC of the fetched batch at offset {}", be_i64(b, 0));
        out.push((BatchInfo { base_offset: be_i64(b, 0), size, record_count: be_i32(b, 57) }, b));
        set = &set[size..];
    }
    out
}

fn get_varint(b: &[u8], pos: &mut usize) -> i64 {
    let mut z = 0u64;
    for shift in (0..70).step_by(7) {
        let byte = b[*pos];
        *pos += 1;
        z |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return ((z >> 1) as i64) ^ -((z & 1) as i64);
        }
    }
    panic!("varint too long");
}

fn get_bytes(b: &[u8], pos: &mut usize) -> Option<Vec<u8>> {
    let len = get_varint(b, pos);
    if len < 0 {
        return None;
    }
    let v = b[*pos..*pos + len as usize].to_vec();
    *pos += len as usize;
    Some(v)
}

/// Every record of the whole, uncompressed batches in a fetched record set.
pub(crate) fn decode_records(set: &[u8]) -> Vec<Record> {
    let mut out = Vec::new();
    for (info, b) in decode_batches(set) {
        let attributes = i16::from_be_bytes([b[21], b[22]]);
        assert_eq!(attributes & 0x7, 0, "the tests only produce uncompressed batches");
        let base_ts = be_i64(b, 27);
        let mut pos = 61;
        for _ in 0..info.record_count {
            let len = get_varint(b, &mut pos) as usize;
            let end = pos + len;
            pos += 1; // attributes
            let ts_delta = get_varint(b, &mut pos);
            let offset_delta = get_varint(b, &mut pos);
            let key = get_bytes(b, &mut pos);
            let value = get_bytes(b, &mut pos);
            out.push(Record { offset: info.base_offset + offset_delta, timestamp: base_ts + ts_delta, key, value });
            pos = end;
        }
        assert_eq!(pos, b.len(), "records fill the batch at {}", info.base_offset);
    }
    out
}

fn put_varint(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// A valid uncompressed batch whose records carry their own timestamps (the first
/// record's is the base timestamp; the batch's max timestamp is the largest).
pub(crate) fn build_batch_with_timestamps(records: &[(i64, &[u8])]) -> Vec<u8> {
    assert!(!records.is_empty());
    let base_ts = records[0].0;
    let max_ts = records.iter().map(|r| r.0).max().expect("a record");
    let mut body = Vec::new();
    for (i, (ts, v)) in records.iter().enumerate() {
        let mut r = vec![0u8]; // attributes
        put_varint(&mut r, ts - base_ts);
        put_varint(&mut r, i as i64);
        put_varint(&mut r, -1); // null key
        put_varint(&mut r, v.len() as i64);
        r.extend_from_slice(v);
        put_varint(&mut r, 0); // no headers
        put_varint(&mut body, r.len() as i64);
        body.extend_from_slice(&r);
    }
    let mut b = vec![0u8; 61];
    b.extend_from_slice(&body);
    let len = (b.len() - 12) as i32;
    b[8..12].copy_from_slice(&len.to_be_bytes());
    b[16] = 2;
    b[23..27].copy_from_slice(&(records.len() as i32 - 1).to_be_bytes());
    b[27..35].copy_from_slice(&base_ts.to_be_bytes());
    b[35..43].copy_from_slice(&max_ts.to_be_bytes());
    b[43..51].copy_from_slice(&(-1i64).to_be_bytes());
    b[51..53].copy_from_slice(&(-1i16).to_be_bytes());
    b[53..57].copy_from_slice(&(-1i32).to_be_bytes());
    b[57..61].copy_from_slice(&(records.len() as i32).to_be_bytes());
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

/// `ringbroker::protocol::batch::build` over owned values.
pub(crate) fn batch(ts: i64, values: &[Vec<u8>]) -> Vec<u8> {
    let refs: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
    ringbroker::protocol::batch::build(ts, &refs)
}

/// A deterministic value for record `i` of a test: `<tag>-<i>` padded to `len` bytes.
pub(crate) fn value(tag: &str, i: usize, len: usize) -> Vec<u8> {
    let mut v = format!("{tag}-{i}").into_bytes();
    let mut x = i as u32 ^ 0x9e37_79b9;
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        v.push(b'a' + (x % 26) as u8);
    }
    v
}
