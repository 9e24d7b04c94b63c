//! The null broker: the ceiling of ringbench plus loopback on this machine. It answers the
//! requests ringbench sends without storing anything: Produce is acknowledged at once, and
//! each partition pretends to hold `records` records, served from one pre-built batch
//! whose base offset is patched per fetch (outside the CRC), so consumers verify real
//! batches. A broker can at best match these figures on the same machine.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use anyhow::{bail, Result};
use bytes::{BufMut, Bytes, BytesMut};
use ringbroker::protocol::batch;
use ringbroker::protocol::header;
use ringbroker::protocol::messages::api_versions_response::ApiVersion;
use ringbroker::protocol::messages::create_topics_response::CreatableTopicResult;
use ringbroker::protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use ringbroker::protocol::messages::list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsTopicResponse};
use ringbroker::protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use ringbroker::protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use ringbroker::protocol::messages::{
    ApiKey, ApiVersionsResponse, BrokerId, CreateTopicsRequest, CreateTopicsResponse, FetchRequest, FetchResponse,
    ListOffsetsRequest, ListOffsetsResponse, MetadataRequest, MetadataResponse, ProduceRequest, ProduceResponse,
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
    (ApiKey::Fetch, 4, 12),
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
    let values: Vec<Vec<u8>> = (0..cfg.batch_records).map(|_| vec![0u8; cfg.record_size]).collect();
    let kvs: Vec<batch::KeyValue> = values.iter().map(|v| (None, Some(v.as_slice()))).collect();
    let template = Bytes::from(batch::build_keyed(0, &kvs));
    for stream in listener.incoming() {
        let stream = stream?;
        let template = template.clone();
        std::thread::spawn(move || {
            let _ = connection(stream, addr, cfg, &template);
        });
    }
    Ok(())
}

fn connection(mut s: TcpStream, addr: SocketAddr, cfg: NullConfig, template: &Bytes) -> Result<()> {
    s.set_nodelay(true)?;
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
                let mut r = FetchResponse::default();
                let mut any = false;
                r.responses = req
                    .topics
                    .into_iter()
                    .map(|t| {
                        let mut o = FetchableTopicResponse::default();
                        o.topic = t.topic;
                        o.partitions = t
                            .partitions
                            .iter()
                            .map(|p| {
                                let mut op = PartitionData::default();
                                op.partition_index = p.partition;
                                op.high_watermark = cfg.records;
                                op.last_stable_offset = cfg.records;
                                op.records = Some(synthetic(template, p.fetch_offset, cfg, p.partition_max_bytes));
                                any |= op.records.as_ref().is_some_and(|r| !r.is_empty());
                                op
                            })
                            .collect();
                        o
                    })
                    .collect();
                if !any {
                    std::thread::sleep(Duration::from_millis(req.max_wait_ms.clamp(0, 100) as u64));
                }
                encode(api, v, pre.correlation_id, &r)?
            }
            _ => bail!("the null broker does not answer {api:?}"),
        };
        s.write_all(&out)?;
    }
}

/// Batches from `offset` while they fit in `max_bytes` and the pretended log lasts.
fn synthetic(template: &Bytes, offset: i64, cfg: NullConfig, max_bytes: i32) -> Bytes {
    let mut out = BytesMut::new();
    let mut next = offset;
    while next < cfg.records && out.len() + template.len() <= max_bytes.max(template.len() as i32) as usize {
        let at = out.len();
        out.extend_from_slice(template);
        batch::patch(&mut out[at..], next, 0);
        next += cfg.batch_records as i64;
    }
    out.freeze()
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
