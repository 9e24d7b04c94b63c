//! The tests' Kafka client: the library's blocking connection (`ringbroker::client::Conn`)
//! with what tests need on top. Every call panics with a message instead of returning an
//! error; requests may be pipelined (any number sent before a response is read) and their
//! answers read back by correlation id; frames can be written by hand. Also the requests the
//! tests send most, and the records of a fetched record set, decoded with the library's
//! batch code (`ringbroker::protocol::batch`).

use std::collections::VecDeque;
use std::io::{self, Read};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use ringbroker::client::{self, Conn};
use ringbroker::protocol::batch::{self, BatchHeader};
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
    ProduceResponse, TopicName,
};
use ringbroker::protocol::{compression, Decodable, Encodable, StrBytes};

/// Versions the helpers use (all flexible, names rather than topic ids unless stated).
pub const API_VERSIONS_V: i16 = 3;
pub const METADATA_V: i16 = 12;
pub const PRODUCE_V: i16 = 9;
pub const FETCH_V: i16 = 12;
pub const LIST_OFFSETS_V: i16 = 7;
pub const CREATE_TOPICS_V: i16 = 7;

/// The client id of every request unless a test sets another.
pub const CLIENT_ID: &str = "ringbroker-tests";

/// How long any single read or write may block before the test fails instead of hanging.
pub const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// A request sent and not yet answered.
#[derive(Debug, Clone, Copy)]
struct Sent {
    correlation_id: i32,
    api: ApiKey,
    version: i16,
}

/// A response frame with its header stripped.
#[derive(Debug)]
pub struct Response {
    pub correlation_id: i32,
    pub api: ApiKey,
    pub version: i16,
    pub body: Bytes,
}

impl Response {
    pub fn decode<T: Decodable>(&self) -> T {
        let mut body = self.body.clone();
        T::decode(&mut body, self.version)
            .unwrap_or_else(|e| panic!("cannot decode the {:?} v{} response: {e}", self.api, self.version))
    }
}

pub struct Client {
    conn: Conn,
    in_flight: VecDeque<Sent>,
}

/// `s` as the codec's string type.
pub fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

pub fn topic_name(s: &str) -> TopicName {
    TopicName(sb(s))
}

pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("clock after 1970").as_millis() as i64
}

/// Polls `cond` every 50 ms until it holds or `limit` passes; returns whether it held.
pub fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
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
    pub fn connect(addr: SocketAddr) -> Client {
        let mut conn = Conn::connect_timeout(addr, Duration::from_secs(10), IO_TIMEOUT)
            .unwrap_or_else(|e| panic!("cannot connect to the broker at {addr}: {e:#}"));
        conn.set_client_id(CLIENT_ID);
        Client { conn, in_flight: VecDeque::new() }
    }

    /// The client id of the requests sent from now on (quotas key on it).
    pub fn set_client_id(&mut self, id: &str) {
        self.conn.set_client_id(id);
    }

    pub fn stream(&self) -> &TcpStream {
        self.conn.stream()
    }

    /// Encodes a whole request frame (size prefix, header, body) with the tests' client id.
    pub fn frame<R: Encodable>(api: ApiKey, version: i16, correlation_id: i32, req: &R) -> Vec<u8> {
        client::request_frame(api, version, correlation_id, Some(&sb(CLIENT_ID)), req)
            .unwrap_or_else(|e| panic!("{e:#}"))
    }

    /// A request frame built by hand: a request header of `header_version` (1 or 2) with
    /// these fields, then `body` as is. For versions and bodies the codec would refuse.
    pub fn raw_frame(api_key: i16, version: i16, correlation_id: i32, header_version: i16, body: &[u8]) -> Vec<u8> {
        client::raw_request_frame(api_key, version, correlation_id, header_version, Some(&sb(CLIENT_ID)), body)
    }

    /// Sends a request without waiting for its response; returns its correlation id.
    pub fn send<R: Encodable>(&mut self, api: ApiKey, version: i16, req: &R) -> i32 {
        let correlation_id = self.conn.send(api, version, req).unwrap_or_else(|e| sending(api, version, e));
        self.in_flight.push_back(Sent { correlation_id, api, version });
        correlation_id
    }

    /// Sends a request with a chosen correlation id.
    pub fn send_with_id<R: Encodable>(&mut self, api: ApiKey, version: i16, correlation_id: i32, req: &R) {
        self.conn.send_with_id(api, version, correlation_id, req).unwrap_or_else(|e| sending(api, version, e));
        self.in_flight.push_back(Sent { correlation_id, api, version });
    }

    /// Sends a request that gets no response (acks=0 produce): not tracked.
    pub fn send_no_response<R: Encodable>(&mut self, api: ApiKey, version: i16, req: &R) -> i32 {
        self.conn.send(api, version, req).unwrap_or_else(|e| sending(api, version, e))
    }

    /// Writes raw bytes (hostile-input tests). Errors are returned: the broker may already
    /// have closed the connection.
    pub fn write_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.conn.write_raw(bytes)
    }

    /// Stops sending: the broker reads end-of-stream after what was sent.
    pub fn shutdown_write(&self) {
        let _ = self.stream().shutdown(Shutdown::Write);
    }

    /// Reads one response frame: `None` when the broker closed the connection first.
    pub fn read_frame(&mut self) -> io::Result<Option<Bytes>> {
        self.conn.read_frame()
    }

    /// Reads the next response, whichever request it answers, and strips its header.
    pub fn recv_any(&mut self) -> Response {
        let frame = match self.read_frame() {
            Ok(Some(f)) => f,
            Ok(None) => panic!("the broker closed the connection; awaiting {:?}", self.in_flight),
            Err(e) => panic!("reading a response (awaiting {:?}): {e}", self.in_flight),
        };
        assert!(frame.len() >= 4, "a response frame of {} bytes is too small for a correlation id", frame.len());
        let correlation_id = i32::from_be_bytes(frame[..4].try_into().expect("4 bytes"));
        let at = self
            .in_flight
            .iter()
            .position(|s| s.correlation_id == correlation_id)
            .unwrap_or_else(|| panic!("response with unknown correlation id {correlation_id}"));
        let sent = self.in_flight.remove(at).expect("present");
        let (_, body) = client::response_body(sent.api, sent.version, frame)
            .unwrap_or_else(|e| panic!("the {:?} v{} response: {e:#}", sent.api, sent.version));
        Response { correlation_id, api: sent.api, version: sent.version, body }
    }

    /// Reads the response to the oldest request in flight, checking it comes next.
    pub fn recv<T: Decodable>(&mut self) -> T {
        let expected = self.in_flight.front().copied().expect("a request in flight");
        let r = self.recv_any();
        assert_eq!(
            r.correlation_id, expected.correlation_id,
            "responses out of order: expected the answer to {expected:?}"
        );
        r.decode()
    }

    /// Sends a request and reads its response.
    pub fn call<Req: Encodable, Resp: Decodable>(&mut self, api: ApiKey, version: i16, req: &Req) -> Resp {
        assert!(self.in_flight.is_empty(), "call() with requests still in flight");
        self.send(api, version, req);
        self.recv()
    }

    /// Waits until the broker closes the connection, discarding anything it sends first.
    /// `true` when it closed (EOF or reset), `false` if it was still open after `limit`.
    pub fn wait_closed(&mut self, limit: Duration) -> bool {
        let end = Instant::now() + limit;
        let mut buf = [0u8; 4096];
        let mut stream = self.stream();
        loop {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            stream.set_read_timeout(Some(left.min(Duration::from_secs(1)))).expect("read timeout");
            match stream.read(&mut buf) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => continue,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return true, // reset: closed too
            }
        }
    }

    // ---- typed helpers -------------------------------------------------------------

    pub fn api_versions(&mut self) -> ApiVersionsResponse {
        self.call(ApiKey::ApiVersions, API_VERSIONS_V, &api_versions_request())
    }

    /// Metadata v12 for the named topics (`None`: all topics).
    pub fn metadata(&mut self, topics: Option<&[&str]>, allow_auto_create: bool) -> MetadataResponse {
        self.call(ApiKey::Metadata, METADATA_V, &metadata_request(topics, allow_auto_create))
    }

    pub fn create_topics(&mut self, topics: Vec<CreatableTopic>, validate_only: bool) -> CreateTopicsResponse {
        let mut req = CreateTopicsRequest::default();
        req.topics = topics;
        req.timeout_ms = 30_000;
        req.validate_only = validate_only;
        self.call(ApiKey::CreateTopics, CREATE_TOPICS_V, &req)
    }

    /// Creates one topic and checks it worked.
    pub fn create_topic(&mut self, name: &str, partitions: i32, configs: &[(&str, &str)]) -> CreatableTopicResult {
        let mut r = self.create_topics(vec![new_topic(name, partitions, 1, configs)], false);
        assert_eq!(r.topics.len(), 1);
        let t = r.topics.remove(0);
        assert_eq!(t.error_code, 0, "creating {name}: {:?}", t.error_message);
        assert_eq!(t.num_partitions, partitions);
        t
    }

    /// Produces one batch with acks=-1 and returns the partition's answer.
    pub fn produce(&mut self, topic: &str, partition: i32, records: Vec<u8>) -> PartitionProduceResponse {
        self.produce_acks(topic, partition, records, -1)
    }

    pub fn produce_acks(
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
    pub fn produce_ok(&mut self, topic: &str, partition: i32, records: Vec<u8>) -> i64 {
        let p = self.produce(topic, partition, records);
        assert_eq!(p.error_code, 0, "producing to {topic}-{partition}");
        p.base_offset
    }

    /// Fetch v12 (by name) of one partition, no waiting.
    pub fn fetch(&mut self, topic: &str, partition: i32, offset: i64, partition_max_bytes: i32) -> PartitionData {
        let resp: FetchResponse =
            self.call(ApiKey::Fetch, FETCH_V, &fetch_request(topic, partition, offset, partition_max_bytes));
        single_fetch(resp)
    }

    /// Reads a whole partition from `from` up to its high watermark, batch by batch.
    pub fn fetch_all(&mut self, topic: &str, partition: i32, from: i64) -> Vec<Record> {
        let mut out = Vec::new();
        let mut offset = from;
        loop {
            let p = self.fetch(topic, partition, offset, 1 << 20);
            assert_eq!(p.error_code, 0, "fetch {topic}-{partition} at {offset}");
            let bytes = p.records.as_deref().unwrap_or(&[]);
            let fresh: Vec<Record> = decode_records(bytes).into_iter().filter(|r| r.offset >= offset).collect();
            // A batch may hold no record (a cleaner keeps some batches emptied): as clients
            // do, the next fetch starts past the last whole batch.
            let next = fresh.last().map(|r| r.offset + 1).into_iter().chain(end_of_batches(bytes)).max();
            match next {
                Some(next) if next > offset => offset = next,
                _ => {
                    assert!(offset >= p.high_watermark, "no records at {offset} below the HWM {}", p.high_watermark);
                    return out;
                }
            }
            out.extend(fresh);
        }
    }

    pub fn list_offsets(&mut self, topic: &str, partition: i32, timestamp: i64) -> ListOffsetsPartitionResponse {
        let resp: ListOffsetsResponse =
            self.call(ApiKey::ListOffsets, LIST_OFFSETS_V, &list_offsets_request(topic, partition, timestamp));
        assert_eq!(resp.topics.len(), 1);
        let mut t = resp.topics.into_iter().next().expect("one topic");
        assert_eq!(t.partitions.len(), 1);
        t.partitions.remove(0)
    }

    /// ListOffsets latest (the high watermark), checked for errors.
    pub fn latest(&mut self, topic: &str, partition: i32) -> i64 {
        let p = self.list_offsets(topic, partition, -1);
        assert_eq!(p.error_code, 0, "ListOffsets latest {topic}-{partition}");
        p.offset
    }

    pub fn earliest(&mut self, topic: &str, partition: i32) -> i64 {
        let p = self.list_offsets(topic, partition, -2);
        assert_eq!(p.error_code, 0, "ListOffsets earliest {topic}-{partition}");
        p.offset
    }

    /// DeleteRecords v2 of partition 0 below `offset`: (error code, low watermark).
    pub fn delete_records(&mut self, topic: &str, offset: i64) -> (i16, i64) {
        use ringbroker::protocol::messages::delete_records_request::{DeleteRecordsPartition, DeleteRecordsTopic};
        use ringbroker::protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};
        let mut p = DeleteRecordsPartition::default();
        p.offset = offset;
        let mut t = DeleteRecordsTopic::default();
        t.name = topic_name(topic);
        t.partitions = vec![p];
        let mut req = DeleteRecordsRequest::default();
        req.topics = vec![t];
        req.timeout_ms = 30_000;
        let r: DeleteRecordsResponse = self.call(ApiKey::DeleteRecords, 2, &req);
        let p = &r.topics[0].partitions[0];
        (p.error_code, p.low_watermark)
    }
}

/// The offset after the last whole batch of fetched bytes.
fn end_of_batches(bytes: &[u8]) -> Option<i64> {
    use ringbroker::protocol::batch;
    let (mut at, mut end) = (0, None);
    while let Some(Ok(size)) = batch::batch_size(&bytes[at..]) {
        if at + size > bytes.len() {
            break;
        }
        end = batch::read_header(&bytes[at..]).ok().map(|h| h.last_offset() + 1);
        at += size;
    }
    end
}

fn sending(api: ApiKey, version: i16, e: anyhow::Error) -> ! {
    panic!("sending {api:?} v{version}: {e:#}")
}

// ---- request builders --------------------------------------------------------------

pub fn api_versions_request() -> ApiVersionsRequest {
    let mut r = ApiVersionsRequest::default();
    r.client_software_name = sb("ringbroker-tests");
    r.client_software_version = sb("0.1.0");
    r
}

pub fn metadata_request(topics: Option<&[&str]>, allow_auto_create: bool) -> MetadataRequest {
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

pub fn new_topic(name: &str, partitions: i32, replication_factor: i16, configs: &[(&str, &str)]) -> CreatableTopic {
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
pub fn produce_request(topic: &str, batches: &[(i32, Vec<u8>)], acks: i16) -> ProduceRequest {
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
pub fn single_produce(resp: ProduceResponse) -> PartitionProduceResponse {
    assert_eq!(resp.responses.len(), 1, "one topic in the produce response");
    let mut t = resp.responses.into_iter().next().expect("one topic");
    assert_eq!(t.partition_responses.len(), 1, "one partition in the produce response");
    t.partition_responses.remove(0)
}

pub fn fetch_partition(partition: i32, offset: i64, partition_max_bytes: i32) -> FetchPartition {
    let mut p = FetchPartition::default();
    p.partition = partition;
    p.fetch_offset = offset;
    p.partition_max_bytes = partition_max_bytes;
    p
}

/// A Fetch request by name (v4-v12) for one partition: no waiting, no session.
pub fn fetch_request(topic: &str, partition: i32, offset: i64, partition_max_bytes: i32) -> FetchRequest {
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
pub fn fetch_request_by_id(
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
pub fn single_fetch(resp: FetchResponse) -> PartitionData {
    assert_eq!(resp.error_code, 0, "fetch top-level error");
    assert_eq!(resp.responses.len(), 1, "one topic in the fetch response");
    let mut t = resp.responses.into_iter().next().expect("one topic");
    assert_eq!(t.partitions.len(), 1, "one partition in the fetch response");
    t.partitions.remove(0)
}

pub fn list_offsets_request(topic: &str, partition: i32, timestamp: i64) -> ListOffsetsRequest {
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
pub struct Record {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    /// A control batch's record (a transaction marker, or in a cluster raft's own entries),
    /// which clients do not hand to the application.
    pub control: bool,
}

/// The whole batches at the front of a record set, each with its header; a partial trailing
/// batch (allowed at the end of a fetch response) is left out. Every whole batch must pass
/// the broker's own check (`batch::check_batch`: magic v2, CRC, record count).
pub fn decode_batches(mut set: &[u8]) -> Vec<(BatchHeader, &[u8])> {
    let mut out = Vec::new();
    while let Some(size) = batch::batch_size(set) {
        let size = size.unwrap_or_else(|e| panic!("a fetched record set: {e}"));
        if set.len() < size {
            break; // partial batch at the end
        }
        let (b, rest) = set.split_at(size);
        let header = batch::check_batch(b).unwrap_or_else(|e| {
            let base_offset = i64::from_be_bytes(b[..8].try_into().expect("8 bytes"));
            panic!("the fetched batch at offset {base_offset}: {e}")
        });
        out.push((header, b));
        set = rest;
    }
    out
}

/// Every record of the whole, uncompressed batches in a fetched record set.
pub fn decode_records(set: &[u8]) -> Vec<Record> {
    let mut out = Vec::new();
    for (header, b) in decode_batches(set) {
        assert_eq!(header.codec(), compression::NONE, "the tests only produce uncompressed batches");
        let records: Vec<Record> = batch::records(b)
            .map(|r| Record {
                offset: header.base_offset + i64::from(r.offset_delta),
                timestamp: r.timestamp,
                key: r.key.map(<[u8]>::to_vec),
                value: r.value.map(<[u8]>::to_vec),
                control: header.is_control(),
            })
            .collect();
        assert_eq!(records.len(), header.record_count as usize, "records fill the batch at {}", header.base_offset);
        out.extend(records);
    }
    out
}

/// `ringbroker::protocol::batch::build_timed` with unkeyed records: a valid uncompressed batch
/// whose records carry their own timestamps (the first record's is the base timestamp; the
/// batch's max timestamp is the largest).
pub fn build_batch_with_timestamps(records: &[(i64, &[u8])]) -> Vec<u8> {
    assert!(!records.is_empty());
    let timed: Vec<(i64, batch::KeyValue)> = records.iter().map(|(ts, v)| (*ts, (None, Some(*v)))).collect();
    batch::build_timed(&timed)
}

/// `ringbroker::protocol::batch::build` over owned values.
pub fn batch(ts: i64, values: &[Vec<u8>]) -> Vec<u8> {
    let refs: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
    batch::build(ts, &refs)
}

/// A deterministic value for record `i` of a test: `<tag>-<i>` padded to `len` bytes.
pub fn value(tag: &str, i: usize, len: usize) -> Vec<u8> {
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
