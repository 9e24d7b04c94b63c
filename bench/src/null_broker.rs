//! The null broker: the ceiling of ringbench plus loopback on this machine. It answers the
//! requests ringbench sends without storing anything: Produce is acknowledged at once, and
//! each partition pretends to hold `records` records: copies of one pre-built batch, each
//! with its own base offset (outside the CRC), so consumers verify real batches. A broker can at best match these figures on the same machine.
//!
//! Fetched records go out the way a broker's best path sends them: sendfile(2) from a file
//! in memory. One memfd holds a partition's whole pretended log (every partition's log is
//! the same bytes: a batch does not name its partition), built once at start and never
//! written again, so serving a fetch costs no copy in user space and no page-cache misses
//! of a real log. An earlier version wrote the records from a heap buffer with write(2); on
//! loopback that costs one copy more than sendfile (the sender's copy into the socket
//! buffer), which is why a broker's sendfile could read faster than that "ceiling".
//!
//! Each connection's send buffer is fixed at Kafka's default `socket.send.buffer.bytes`
//! (SEND_BUFFER): with the kernel's autotuned buffers of megabytes sendfile moved half as
//! much on loopback here (4.4M against 9.5M records/s, 2 consumers, 1 KiB records).

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use bytes::{BufMut, Bytes, BytesMut};
use nix::sys::memfd::{memfd_create, MemFdCreateFlag};
use nix::sys::sendfile::sendfile64;
use nix::sys::socket::{send, setsockopt, sockopt, MsgFlags};
use ringbroker::protocol::batch;
use ringbroker::protocol::header;
use ringbroker::protocol::messages::api_versions_response::ApiVersion;
use ringbroker::protocol::messages::create_topics_response::CreatableTopicResult;
use ringbroker::protocol::messages::list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsTopicResponse};
use ringbroker::protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use ringbroker::protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use ringbroker::protocol::messages::{
    ApiKey, ApiVersionsResponse, BrokerId, CreateTopicsRequest, CreateTopicsResponse, FetchRequest, ListOffsetsRequest,
    ListOffsetsResponse, MetadataRequest, MetadataResponse, ProduceRequest, ProduceResponse,
};
use ringbroker::protocol::{Decodable, Encodable, StrBytes};

#[derive(Debug, Clone, Copy)]
pub struct NullConfig {
    pub partitions: i32,
    /// Records each partition pretends to hold (for consume runs).
    pub records: i64,
    pub record_size: usize,
    pub batch_records: usize,
}

/// The versions answered: those ringbench uses.
const VERSIONS: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 9),
    (ApiKey::Fetch, 12, 12),
    (ApiKey::ListOffsets, 1, 7),
    (ApiKey::Metadata, 1, 12),
    (ApiKey::ApiVersions, 0, 3),
    (ApiKey::CreateTopics, 2, 7),
];

pub fn serve(listen: SocketAddr, cfg: NullConfig) -> Result<()> {
    let listener = TcpListener::bind(listen)?;
    println!("null broker listening on {}", listener.local_addr()?);
    serve_on(listener, cfg)
}

/// Serves connections on `listener` until it fails (one thread per connection).
pub fn serve_on(listener: TcpListener, cfg: NullConfig) -> Result<()> {
    let addr = listener.local_addr()?;
    let log = Arc::new(Log::new(cfg)?);
    for stream in listener.incoming() {
        let stream = stream?;
        let log = log.clone();
        std::thread::spawn(move || {
            let _ = connection(stream, addr, cfg, &log);
        });
    }
    Ok(())
}

fn connection(mut s: TcpStream, addr: SocketAddr, cfg: NullConfig, log: &Log) -> Result<()> {
    s.set_nodelay(true)?;
    setsockopt(&s.as_fd(), sockopt::SndBuf, &SEND_BUFFER)?;
    loop {
        let mut len = [0u8; 4];
        if s.read_exact(&mut len).is_err() {
            return Ok(());
        }
        let len = i32::from_be_bytes(len);
        if !(8..=100 << 20).contains(&len) {
            bail!("frame of {len} bytes");
        }
        let mut frame = vec![0u8; len as usize];
        s.read_exact(&mut frame)?;
        let pre = header::preamble(&frame).expect("8 bytes");
        let api = ApiKey::try_from(pre.api_key).map_err(|_| anyhow::anyhow!("unknown api {}", pre.api_key))?;
        let v = pre.api_version;
        let (_, mut body) = header::parse(api, v, Bytes::from(frame))?;
        let out = match api {
            ApiKey::ApiVersions => {
                let mut r = ApiVersionsResponse::default();
                r.api_keys = VERSIONS
                    .iter()
                    .map(|(k, min, max)| {
                        let mut a = ApiVersion::default();
                        a.api_key = *k as i16;
                        a.min_version = *min;
                        a.max_version = *max;
                        a
                    })
                    .collect();
                encode(api, v.min(3), pre.correlation_id, &r)?
            }
            ApiKey::Metadata => {
                let req = MetadataRequest::decode(&mut body, v)?;
                let mut r = MetadataResponse::default();
                let mut b = MetadataResponseBroker::default();
                b.node_id = BrokerId(0);
                b.host = StrBytes::from_string(addr.ip().to_string());
                b.port = addr.port() as i32;
                r.brokers = vec![b];
                r.topics = req
                    .topics
                    .unwrap_or_default()
                    .into_iter()
                    .map(|t| {
                        let mut mt = MetadataResponseTopic::default();
                        mt.name = t.name;
                        mt.partitions = (0..cfg.partitions)
                            .map(|i| {
                                let mut p = MetadataResponsePartition::default();
                                p.partition_index = i;
                                p.replica_nodes = vec![BrokerId(0)];
                                p.isr_nodes = vec![BrokerId(0)];
                                p
                            })
                            .collect();
                        mt
                    })
                    .collect();
                encode(api, v, pre.correlation_id, &r)?
            }
            ApiKey::CreateTopics => {
                let req = CreateTopicsRequest::decode(&mut body, v)?;
                let mut r = CreateTopicsResponse::default();
                r.topics = req
                    .topics
                    .into_iter()
                    .map(|t| {
                        let mut o = CreatableTopicResult::default();
                        o.name = t.name;
                        o.num_partitions = cfg.partitions;
                        o.replication_factor = 1;
                        o
                    })
                    .collect();
                encode(api, v, pre.correlation_id, &r)?
            }
            ApiKey::ListOffsets => {
                let req = ListOffsetsRequest::decode(&mut body, v)?;
                let mut r = ListOffsetsResponse::default();
                r.topics = req
                    .topics
                    .into_iter()
                    .map(|t| {
                        let mut o = ListOffsetsTopicResponse::default();
                        o.name = t.name;
                        o.partitions = t
                            .partitions
                            .iter()
                            .map(|p| {
                                let mut op = ListOffsetsPartitionResponse::default();
                                op.partition_index = p.partition_index;
                                op.offset = if p.timestamp == -2 { 0 } else { cfg.records };
                                op.timestamp = -1;
                                op
                            })
                            .collect();
                        o
                    })
                    .collect();
                encode(api, v, pre.correlation_id, &r)?
            }
            ApiKey::Produce => {
                let req = ProduceRequest::decode(&mut body, v)?;
                if req.acks == 0 {
                    continue;
                }
                let mut r = ProduceResponse::default();
                r.responses = req
                    .topic_data
                    .into_iter()
                    .map(|t| {
                        let mut o = TopicProduceResponse::default();
                        o.name = t.name;
                        o.partition_responses = t
                            .partition_data
                            .iter()
                            .map(|p| {
                                let mut op = PartitionProduceResponse::default();
                                op.index = p.index;
                                op.log_append_time_ms = -1;
                                op
                            })
                            .collect();
                        o
                    })
                    .collect();
                encode(api, v, pre.correlation_id, &r)?
            }
            ApiKey::Fetch => {
                let req = FetchRequest::decode(&mut body, v)?;
                if req.topics.iter().flat_map(|t| &t.partitions).all(|p| p.fetch_offset >= cfg.records) {
                    // Nothing to serve: wait as a broker would for min_bytes, up to 100 ms.
                    std::thread::sleep(Duration::from_millis(req.max_wait_ms.clamp(0, 100) as u64));
                }
                let pieces = log.fetch_response(&req, pre.correlation_id);
                log.write(&s, &pieces)?;
                continue;
            }
            _ => bail!("the null broker does not answer {api:?}"),
        };
        s.write_all(&out)?;
    }
}

/// The pretended log every partition holds: `records` records in whole copies of one
/// template batch with their base offsets set, in a memfd (see the module comment).
pub struct Log {
    cfg: NullConfig,
    file: File,
    /// Bytes of one batch.
    batch_len: usize,
    batches: i64,
}

/// A piece of a Fetch response: encoded bytes, or `len` bytes of the log from `at`.
enum Piece {
    Bytes(BytesMut),
    Records { at: u64, len: usize },
}

/// SO_SNDBUF of each connection (the kernel doubles it): Kafka's default.
const SEND_BUFFER: usize = 102_400;

/// The largest log built in memory (records × record size, about).
const MAX_LOG_BYTES: u64 = 8 << 30;

impl Log {
    pub fn new(cfg: NullConfig) -> Result<Log> {
        let batch_records = cfg.batch_records.max(1);
        let values: Vec<Vec<u8>> = (0..batch_records).map(|_| vec![0u8; cfg.record_size]).collect();
        let kvs: Vec<batch::KeyValue> = values.iter().map(|v| (None, Some(v.as_slice()))).collect();
        let mut template = batch::build_keyed(0, &kvs);
        let batches = (cfg.records.max(0) + batch_records as i64 - 1) / batch_records as i64;
        if batches as u64 * template.len() as u64 > MAX_LOG_BYTES {
            bail!(
                "the null broker's log would take {} MiB of memory: ask for fewer --null-records",
                (batches as u64 * template.len() as u64) >> 20
            );
        }
        let fd = memfd_create(c"null-broker-log", MemFdCreateFlag::MFD_CLOEXEC).context("memfd_create")?;
        let mut out = BufWriter::with_capacity(1 << 20, File::from(fd));
        for i in 0..batches {
            batch::patch(&mut template, i * batch_records as i64, 0);
            out.write_all(&template)?;
        }
        let file = out.into_inner().map_err(|e| e.into_error())?;
        Ok(Log { cfg: NullConfig { batch_records, ..cfg }, file, batch_len: template.len(), batches })
    }

    /// Where the batches from `offset` start in the log, and how many bytes to serve.
    fn serve(&self, offset: i64, max_bytes: i32) -> (u64, usize) {
        if offset >= self.cfg.records || offset < 0 {
            return (0, 0);
        }
        let first = offset / self.cfg.batch_records as i64;
        let left = (self.batches - first) as usize;
        // At least one batch even past max_bytes, as KIP-74 has brokers do.
        let n = (max_bytes.max(0) as usize / self.batch_len).max(1).min(left);
        (first as u64 * self.batch_len as u64, n * self.batch_len)
    }

    /// A Fetch v12 response (the version ringbench sends; the only one this broker offers),
    /// encoded by hand around ranges of the log.
    fn fetch_response(&self, req: &FetchRequest, correlation_id: i32) -> Vec<Piece> {
        let mut pieces = Vec::new();
        let mut buf = BytesMut::new();
        buf.put_i32(0); // frame size, set below
        buf.put_i32(correlation_id);
        buf.put_u8(0); // header tags
        buf.put_i32(0); // throttle_time_ms
        buf.put_i16(0); // error_code
        buf.put_i32(0); // session_id
        put_uvarint(&mut buf, req.topics.len() + 1);
        for t in &req.topics {
            put_uvarint(&mut buf, t.topic.len() + 1);
            buf.put_slice(t.topic.as_bytes());
            put_uvarint(&mut buf, t.partitions.len() + 1);
            for p in &t.partitions {
                buf.put_i32(p.partition);
                buf.put_i16(0);
                buf.put_i64(self.cfg.records); // high watermark
                buf.put_i64(self.cfg.records); // last stable offset
                buf.put_i64(0); // log start offset
                put_uvarint(&mut buf, 0); // aborted transactions: null
                buf.put_i32(-1); // preferred read replica
                let (at, len) = self.serve(p.fetch_offset, p.partition_max_bytes);
                put_uvarint(&mut buf, len + 1);
                pieces.push(Piece::Bytes(buf.split()));
                pieces.push(Piece::Records { at, len });
                buf.put_u8(0); // partition tags
            }
            buf.put_u8(0); // topic tags
        }
        buf.put_u8(0); // response tags
        pieces.push(Piece::Bytes(buf));
        let size: usize = pieces
            .iter()
            .map(|p| match p {
                Piece::Bytes(b) => b.len(),
                Piece::Records { len, .. } => *len,
            })
            .sum();
        if let Some(Piece::Bytes(first)) = pieces.first_mut() {
            first[..4].copy_from_slice(&((size - 4) as i32).to_be_bytes());
        }
        pieces
    }

    /// Writes a response: framing with send(2) flagged MSG_MORE (so it rides in full
    /// segments with the records after it, except for the last piece), records with
    /// sendfile(2) from the memfd.
    fn write(&self, s: &TcpStream, pieces: &[Piece]) -> Result<()> {
        for (i, p) in pieces.iter().enumerate() {
            match p {
                Piece::Bytes(b) => {
                    // nix 0.29's MsgFlags has no name for MSG_MORE.
                    let more = MsgFlags::from_bits_retain(nix::libc::MSG_MORE);
                    let flags = if i + 1 < pieces.len() { more } else { MsgFlags::empty() };
                    let mut done = 0;
                    while done < b.len() {
                        done += send(s.as_raw_fd(), &b[done..], flags)?;
                    }
                }
                Piece::Records { at, len } => {
                    let mut pos = *at as i64;
                    let end = pos + *len as i64;
                    while pos < end {
                        let want = (end - pos) as usize;
                        if sendfile64(s.as_fd(), self.file.as_fd(), Some(&mut pos), want)? == 0 {
                            bail!("sendfile sent nothing at {pos} of the null broker's log");
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

fn put_uvarint(buf: &mut BytesMut, mut v: usize) {
    while v >= 0x80 {
        buf.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    buf.put_u8(v as u8);
}

fn encode<M: Encodable>(api: ApiKey, version: i16, correlation_id: i32, msg: &M) -> Result<Vec<u8>> {
    let flexible_header = api != ApiKey::ApiVersions && api.response_header_version(version) >= 1;
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    buf.put_i32(correlation_id);
    if flexible_header {
        buf.put_u8(0);
    }
    msg.encode(&mut buf, version)?;
    let len = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&len.to_be_bytes());
    Ok(buf.to_vec())
}
