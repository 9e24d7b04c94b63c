//! A minimal blocking Kafka client: one TCP connection per broker, requests encoded with the
//! generated codec, responses read in order. Used by the admin commands (`ringbroker topic
//! ...`) and the load tool (`ringbench`); it is not a general client (it keeps only the
//! broker list, and retries only while a coordinator or partition leader is being chosen).
//!
//! `Conn` is one connection. After `fetch_api_versions` it knows what the broker serves, and
//! `version` picks the highest version both sides speak, so the admin commands work against
//! any Kafka-compatible broker. `Cluster` bootstraps from a list of addresses, learns the
//! brokers from Metadata and opens (lazily) one connection per broker: the partition leader
//! for produce and fetch, the group coordinator found with FindCoordinator.
//!
//! Below `send` and `recv` are the steps they are made of, public for callers that speak
//! the protocol more freely than a client should (the integration tests): a request frame
//! built with `request_frame` (or around any body with `raw_request_frame`) is written with
//! `Conn::write_raw`; `Conn::read_frame` reads one response frame and `response_body`
//! strips its header. Nothing here keeps requests in flight by correlation id: a caller
//! that pipelines reads the answers in order, or matches the ids itself.

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use crate::protocol::messages::metadata_request::MetadataRequestTopic;
use crate::protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, FindCoordinatorRequest, FindCoordinatorResponse, MetadataRequest,
    MetadataResponse, RequestHeader, ResponseHeader, TopicName,
};
use crate::protocol::{Decodable, Encodable, ErrorCode, StrBytes};
use anyhow::{anyhow, bail, Context, Result};
use bytes::{BufMut, Bytes, BytesMut};

pub struct Conn {
    stream: TcpStream,
    next_id: i32,
    client_id: Option<StrBytes>,
    /// (api key, min, max) as the broker announced them; `None` until `fetch_api_versions`.
    versions: Option<Vec<(i16, i16, i16)>>,
}

/// The broker does not serve any version of an API that this client speaks.
#[derive(Debug)]
pub struct Unsupported {
    pub api: ApiKey,
    /// Versions this client can send.
    pub client: (i16, i16),
    /// Versions the broker serves, `None` if it does not serve the API at all.
    pub broker: Option<(i16, i16)>,
    pub peer: String,
}

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (api, peer) = (self.api, &self.peer);
        match self.broker {
            None => write!(f, "the broker at {peer} does not support the {api:?} API (key {})", api as i16),
            Some((lo, hi)) => write!(
                f,
                "the broker at {peer} serves {api:?} v{lo}-v{hi}, this client speaks v{}-v{}; \
                 use a broker or client release with a version in common",
                self.client.0, self.client.1
            ),
        }
    }
}

impl std::error::Error for Unsupported {}

impl Conn {
    pub fn connect(addr: SocketAddr) -> Result<Conn> {
        let stream = TcpStream::connect(addr).with_context(|| format!("connecting to {addr}"))?;
        Conn::from_stream(stream)
    }

    /// Connects to `addr` within `timeout`, and bounds every later read and write by
    /// `io_timeout`, so that a broker that stops answering (or reading) fails the call
    /// instead of hanging it.
    pub fn connect_timeout(addr: SocketAddr, timeout: Duration, io_timeout: Duration) -> Result<Conn> {
        let stream = TcpStream::connect_timeout(&addr, timeout).with_context(|| format!("connecting to {addr}"))?;
        stream.set_read_timeout(Some(io_timeout))?;
        stream.set_write_timeout(Some(io_timeout))?;
        Conn::from_stream(stream)
    }

    /// Connects to `host:port` (resolving the name), trying each address for up to `timeout`,
    /// and bounds every later read by `read_timeout` so a silent broker cannot hang a command.
    pub fn connect_host(host_port: &str, timeout: Duration, read_timeout: Duration) -> Result<Conn> {
        let addrs: Vec<SocketAddr> = host_port
            .to_socket_addrs()
            .with_context(|| format!("cannot resolve broker address '{host_port}' (expected HOST:PORT)"))?
            .collect();
        let mut last = None;
        for addr in addrs {
            match TcpStream::connect_timeout(&addr, timeout) {
                Ok(stream) => {
                    stream.set_read_timeout(Some(read_timeout))?;
                    return Conn::from_stream(stream);
                }
                Err(e) => last = Some(e),
            }
        }
        match last {
            Some(e) => bail!("cannot connect to {host_port}: {e}"),
            None => bail!("broker address '{host_port}' resolves to no address"),
        }
    }

    fn from_stream(stream: TcpStream) -> Result<Conn> {
        stream.set_nodelay(true)?;
        Ok(Conn { stream, next_id: 1, client_id: Some(StrBytes::from_static_str("ringbroker")), versions: None })
    }

    /// The client id sent in every request header (quotas and broker logs key on it).
    pub fn set_client_id(&mut self, id: &str) {
        self.client_id = Some(StrBytes::from_string(id.to_string()));
    }

    pub fn try_clone(&self) -> Result<Conn> {
        Ok(Conn {
            stream: self.stream.try_clone()?,
            next_id: self.next_id,
            client_id: self.client_id.clone(),
            versions: self.versions.clone(),
        })
    }

    /// The socket: for its timeouts, or to shut one direction down.
    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }

    /// The broker's address, for messages.
    pub fn peer(&self) -> String {
        self.stream.peer_addr().map_or_else(|_| "?".to_string(), |a| a.to_string())
    }

    /// Asks the broker which API versions it serves (ApiVersions v3, which every broker since
    /// Kafka 2.4 answers) and remembers them for `version`.
    pub fn fetch_api_versions(&mut self) -> Result<()> {
        let mut req = ApiVersionsRequest::default();
        req.client_software_name = StrBytes::from_static_str("ringbroker");
        req.client_software_version = StrBytes::from_static_str(env!("CARGO_PKG_VERSION"));
        let resp: ApiVersionsResponse = self.call(ApiKey::ApiVersions, 3, &req)?;
        if resp.error_code != 0 {
            bail!("ApiVersions failed: {}", describe_error(resp.error_code));
        }
        self.versions = Some(resp.api_keys.iter().map(|k| (k.api_key, k.min_version, k.max_version)).collect());
        Ok(())
    }

    /// The versions the broker serves for `api`, if `fetch_api_versions` has run and it serves it.
    pub fn broker_versions(&self, api: ApiKey) -> Option<(i16, i16)> {
        let key = api as i16;
        self.versions.as_ref()?.iter().find(|v| v.0 == key).map(|v| (v.1, v.2))
    }

    /// The highest version of `api` in both `min..=max` (what the caller can build) and what
    /// the broker serves. Without `fetch_api_versions`, `max`.
    pub fn version(&self, api: ApiKey, min: i16, max: i16) -> Result<i16, Unsupported> {
        if self.versions.is_none() {
            return Ok(max);
        }
        let unsupported = |broker| Unsupported { api, client: (min, max), broker, peer: self.peer() };
        let Some((lo, hi)) = self.broker_versions(api) else {
            return Err(unsupported(None));
        };
        let v = hi.min(max);
        if v < lo.max(min) {
            return Err(unsupported(Some((lo, hi))));
        }
        Ok(v)
    }

    /// Encodes and writes a request; returns its correlation id.
    pub fn send<R: Encodable>(&mut self, api: ApiKey, version: i16, req: &R) -> Result<i32> {
        let id = self.next_id;
        self.send_with_id(api, version, id, req)?;
        Ok(id)
    }

    /// Encodes and writes a request under a correlation id the caller chose; later `send`s
    /// number on from the larger of it and their own count.
    pub fn send_with_id<R: Encodable>(
        &mut self,
        api: ApiKey,
        version: i16,
        correlation_id: i32,
        req: &R,
    ) -> Result<()> {
        let frame = request_frame(api, version, correlation_id, self.client_id.as_ref(), req)?;
        self.stream.write_all(&frame)?;
        self.next_id = self.next_id.max(correlation_id).wrapping_add(1);
        Ok(())
    }

    /// Writes `bytes` to the broker as they are: a frame from `request_frame` or
    /// `raw_request_frame`, or anything else a test wants the broker to read.
    pub fn write_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)?;
        self.stream.flush()
    }

    /// Reads the next frame (a response's correlation id, header and body, or a legacy SASL
    /// token, without the size prefix). `None` when the broker closed or reset the connection
    /// before the frame began. A frame cut short is `UnexpectedEof`, a silent broker (past the
    /// read timeout) `WouldBlock` or `TimedOut`, and a size outside 0..256 MiB `InvalidData`.
    pub fn read_frame(&mut self) -> io::Result<Option<Bytes>> {
        let mut len = [0u8; 4];
        if !read_full(&mut self.stream, &mut len)? {
            return Ok(None);
        }
        let len = i32::from_be_bytes(len);
        if !(0..=MAX_RESPONSE).contains(&len) {
            return Err(io::Error::new(io::ErrorKind::InvalidData, format!("a response frame of {len} bytes")));
        }
        let mut frame = vec![0u8; len as usize];
        if !read_full(&mut self.stream, &mut frame)? {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        Ok(Some(Bytes::from(frame)))
    }

    /// Reads the next response frame and decodes it as the answer to `api` at `version`.
    pub fn recv<R: Decodable>(&mut self, api: ApiKey, version: i16) -> Result<(i32, R)> {
        let frame = self.read_frame().map_err(|e| closed_or_timeout(e, api))?;
        let Some(frame) = frame else { return Err(closed_or_timeout(io::ErrorKind::UnexpectedEof.into(), api)) };
        let (id, mut body) = response_body(api, version, frame)?;
        Ok((id, R::decode(&mut body, version)?))
    }

    pub fn call<Q: Encodable, R: Decodable>(&mut self, api: ApiKey, version: i16, req: &Q) -> Result<R> {
        let id = self.send(api, version, req)?;
        let (got, r) = self.recv(api, version)?;
        if got != id {
            bail!("response {got} does not answer request {id}");
        }
        Ok(r)
    }
}

/// Larger response frames are refused rather than allocated.
const MAX_RESPONSE: i32 = 256 << 20;

/// A whole request frame: the size prefix, the request header `api` at `version` calls for
/// (with `correlation_id` and `client_id`), and `req` encoded at `version`.
pub fn request_frame<R: Encodable>(
    api: ApiKey,
    version: i16,
    correlation_id: i32,
    client_id: Option<&StrBytes>,
    req: &R,
) -> Result<Vec<u8>> {
    let mut body = BytesMut::new();
    req.encode(&mut body, version).with_context(|| format!("encoding the {api:?} v{version} request"))?;
    let header_version = api.request_header_version(version);
    Ok(raw_request_frame(api as i16, version, correlation_id, header_version, client_id, &body))
}

/// A request frame built by hand: a request header of `header_version` with these fields
/// (any API key and version), then `body` as it is. For requests the codec would refuse to
/// write, and bodies encoded elsewhere.
pub fn raw_request_frame(
    api_key: i16,
    version: i16,
    correlation_id: i32,
    header_version: i16,
    client_id: Option<&StrBytes>,
    body: &[u8],
) -> Vec<u8> {
    let mut header = RequestHeader::default();
    header.request_api_key = api_key;
    header.request_api_version = version;
    header.correlation_id = correlation_id;
    header.client_id = client_id.cloned();
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    header.encode(&mut buf, header_version).expect("a request header of version 0-2 always encodes");
    buf.extend_from_slice(body);
    let len = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&len.to_be_bytes());
    buf.to_vec()
}

/// Splits a response frame (from `Conn::read_frame`) into its correlation id and its body,
/// past the response header that `api` at `version` answers with (v0 for ApiVersions, as
/// KIP-511 has it; tagged fields of a flexible header are skipped).
pub fn response_body(api: ApiKey, version: i16, mut frame: Bytes) -> Result<(i32, Bytes)> {
    let header_version = api.response_header_version(version);
    let header = ResponseHeader::decode(&mut frame, header_version)
        .with_context(|| format!("reading the header (v{header_version}) of the {api:?} v{version} response"))?;
    Ok((header.correlation_id, frame))
}

/// Fills `buf`; `false` when the stream ended (or was reset) before its first byte.
fn read_full(s: &mut TcpStream, buf: &mut [u8]) -> io::Result<bool> {
    let mut got = 0;
    while got < buf.len() {
        match s.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if got == 0
                    && matches!(e.kind(), io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted) =>
            {
                return Ok(false)
            }
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

fn closed_or_timeout(e: io::Error, api: ApiKey) -> anyhow::Error {
    match e.kind() {
        io::ErrorKind::UnexpectedEof => {
            anyhow!("the broker closed the connection instead of answering {api:?} (see its log for why)")
        }
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
            anyhow!("no answer to {api:?} within the read timeout; is the broker overloaded or stuck?")
        }
        _ => anyhow!(e).context(format!("reading the {api:?} response")),
    }
}

/// How long connecting to one address may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest wait for any response. Above the JoinGroup rebalance timeout the consumer uses,
/// since the coordinator holds a JoinGroup until the rebalance completes.
const READ_TIMEOUT: Duration = Duration::from_secs(120);
/// Metadata versions this client builds: v4 adds `allow_auto_topic_creation`; v13 only adds
/// a top-level error code.
const METADATA_VERSIONS: (i16, i16) = (4, 12);

/// The brokers of a cluster, with one lazily opened connection per broker.
pub struct Cluster {
    bootstrap: Conn,
    bootstrap_addr: String,
    conns: HashMap<i32, Conn>,
    brokers: BTreeMap<i32, String>,
    controller: i32,
    client_id: String,
}

impl Cluster {
    /// Connects to the first reachable address of a comma-separated `HOST:PORT` list and
    /// learns the cluster's brokers.
    pub fn connect(bootstrap: &str, client_id: &str) -> Result<Cluster> {
        let mut errors = Vec::new();
        for addr in bootstrap.split(',').map(str::trim).filter(|a| !a.is_empty()) {
            match Cluster::open(addr, client_id) {
                Ok(bootstrap) => {
                    let mut c = Cluster {
                        bootstrap,
                        bootstrap_addr: addr.to_string(),
                        conns: HashMap::new(),
                        brokers: BTreeMap::new(),
                        controller: -1,
                        client_id: client_id.to_string(),
                    };
                    c.metadata(Some(&[]), false)?;
                    return Ok(c);
                }
                Err(e) => errors.push(format!("{e:#}")),
            }
        }
        if errors.is_empty() {
            bail!("no broker address given; pass -b HOST:PORT or set RINGBROKER_BROKERS");
        }
        bail!(
            "{}; is a broker running there? Pass its address with -b HOST:PORT or RINGBROKER_BROKERS",
            errors.join("; ")
        )
    }

    fn open(addr: &str, client_id: &str) -> Result<Conn> {
        let mut c = Conn::connect_host(addr, CONNECT_TIMEOUT, READ_TIMEOUT)?;
        c.set_client_id(client_id);
        c.fetch_api_versions().with_context(|| format!("asking {addr} for its API versions"))?;
        Ok(c)
    }

    /// The connection the cluster was bootstrapped through (for requests any broker answers).
    pub fn any(&mut self) -> &mut Conn {
        &mut self.bootstrap
    }

    pub fn bootstrap_addr(&self) -> &str {
        &self.bootstrap_addr
    }

    /// Broker ids and their `host:port`, from the last Metadata.
    pub fn brokers(&self) -> &BTreeMap<i32, String> {
        &self.brokers
    }

    /// The connection to broker `id`, opened on first use.
    pub fn node(&mut self, id: i32) -> Result<&mut Conn> {
        if !self.conns.contains_key(&id) {
            let Some(addr) = self.brokers.get(&id).cloned() else {
                bail!("broker {id} is not in the cluster metadata (known: {:?})", self.brokers.keys());
            };
            let conn = Cluster::open(&addr, &self.client_id).with_context(|| format!("broker {id}"))?;
            self.conns.insert(id, conn);
        }
        Ok(self.conns.get_mut(&id).expect("inserted above"))
    }

    /// The controller, which topic changes go to (Kafka with ZooKeeper answers NOT_CONTROLLER
    /// elsewhere; KRaft brokers forward, so any broker would do there).
    pub fn controller(&mut self) -> Result<&mut Conn> {
        if self.controller >= 0 && self.brokers.contains_key(&self.controller) {
            let id = self.controller;
            return self.node(id);
        }
        Ok(&mut self.bootstrap)
    }

    /// Drops the connection to broker `id` (after an I/O error), so the next use reconnects.
    pub fn forget(&mut self, id: i32) {
        self.conns.remove(&id);
    }

    /// Metadata of `topics` (`None`: all topics; an empty slice: brokers only); refreshes the
    /// broker list. `auto_create` lets the broker create a missing topic if it is set up to.
    pub fn metadata(&mut self, topics: Option<&[String]>, auto_create: bool) -> Result<MetadataResponse> {
        let conn = &mut self.bootstrap;
        let v = conn.version(ApiKey::Metadata, METADATA_VERSIONS.0, METADATA_VERSIONS.1)?;
        let mut req = MetadataRequest::default();
        req.topics = topics.map(|ts| {
            ts.iter()
                .map(|t| {
                    let mut rt = MetadataRequestTopic::default();
                    rt.name = Some(TopicName(StrBytes::from_string(t.clone())));
                    rt
                })
                .collect()
        });
        req.allow_auto_topic_creation = auto_create;
        let resp: MetadataResponse = conn.call(ApiKey::Metadata, v, &req)?;
        self.brokers = resp.brokers.iter().map(|b| (b.node_id.0, format!("{}:{}", b.host.as_str(), b.port))).collect();
        self.controller = resp.controller_id.0;
        Ok(resp)
    }

    /// The node id of the coordinator of `group`, retrying while the coordinator is loading.
    pub fn coordinator(&mut self, group: &str) -> Result<i32> {
        let conn = &mut self.bootstrap;
        let v = conn.version(ApiKey::FindCoordinator, 1, 6)?;
        for _ in 0..50 {
            let mut req = FindCoordinatorRequest::default();
            req.key_type = 0;
            if v >= 4 {
                req.coordinator_keys = vec![StrBytes::from_string(group.to_string())];
            } else {
                req.key = StrBytes::from_string(group.to_string());
            }
            let resp: FindCoordinatorResponse = conn.call(ApiKey::FindCoordinator, v, &req)?;
            let (code, msg, node, host, port) = if v >= 4 {
                let c = resp.coordinators.first().context("FindCoordinator answered no coordinator")?;
                (c.error_code, c.error_message.clone(), c.node_id.0, c.host.to_string(), c.port)
            } else {
                (resp.error_code, resp.error_message.clone(), resp.node_id.0, resp.host.to_string(), resp.port)
            };
            match ErrorCode::try_from_code(code) {
                None => {
                    self.brokers.entry(node).or_insert_with(|| format!("{host}:{port}"));
                    return Ok(node);
                }
                Some(ErrorCode::CoordinatorNotAvailable | ErrorCode::CoordinatorLoadInProgress) => {
                    std::thread::sleep(Duration::from_millis(100));
                }
                Some(_) => {
                    let msg = msg.map(|m| format!(": {}", m.as_str())).unwrap_or_default();
                    bail!("finding the coordinator of group '{group}': {}{msg}", describe_error(code));
                }
            }
        }
        bail!("the coordinator of group '{group}' stayed unavailable for 5 s; check the broker's log")
    }
}

/// An error code as Kafka's tools print it: `TOPIC_ALREADY_EXISTS (36)`.
pub fn describe_error(code: i16) -> String {
    match ErrorCode::try_from_code(code) {
        None => "NONE (0)".to_string(),
        Some(e) => format!("{} ({code})", error_name(e)),
    }
}

/// Kafka's name of an error code, as its docs and tools print it: `TOPIC_ALREADY_EXISTS`.
pub fn error_name(e: ErrorCode) -> String {
    if let ErrorCode::Unknown(code) = e {
        return format!("UNKNOWN_ERROR_CODE_{code}");
    }
    // The codec names its variants after Kafka's enum in CamelCase; Kafka's own names are
    // the same words in SCREAMING_SNAKE_CASE.
    let camel = format!("{e:?}");
    let mut out = String::with_capacity(camel.len() + 8);
    for (i, ch) in camel.chars().enumerate() {
        if ch.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(ch.to_ascii_uppercase());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::header;

    #[test]
    fn a_request_frame_is_what_the_broker_parses() {
        let mut req = MetadataRequest::default();
        req.allow_auto_topic_creation = true;
        let frame = request_frame(ApiKey::Metadata, 12, 77, Some(&StrBytes::from_static_str("me")), &req).unwrap();
        let size = i32::from_be_bytes(frame[..4].try_into().unwrap());
        assert_eq!(size as usize, frame.len() - 4);
        let (h, mut body) = header::parse(ApiKey::Metadata, 12, Bytes::from(frame[4..].to_vec())).unwrap();
        assert_eq!((h.request_api_key, h.request_api_version, h.correlation_id), (3, 12, 77));
        assert_eq!(h.client_id.as_deref(), Some("me"));
        assert_eq!(MetadataRequest::decode(&mut body, 12).unwrap(), req);
    }

    #[test]
    fn response_headers_are_stripped_by_version_tagged_fields_and_all() {
        // Metadata v12 answers with header v1: the correlation id, then tagged fields (here
        // one field, tag 5, of 2 bytes).
        let frame = Bytes::from_static(&[0, 0, 0, 9, 1, 5, 2, 0xaa, 0xbb, 0x42]);
        let (id, body) = response_body(ApiKey::Metadata, 12, frame).unwrap();
        assert_eq!((id, &body[..]), (9, &[0x42][..]));
        // ApiVersions always answers with header v0 (KIP-511): no tagged fields to skip.
        let frame = Bytes::from_static(&[0, 0, 0, 3, 0, 0]);
        let (id, body) = response_body(ApiKey::ApiVersions, 3, frame).unwrap();
        assert_eq!((id, &body[..]), (3, &[0, 0][..]));
    }

    #[test]
    fn error_names_are_kafkas() {
        assert_eq!(error_name(ErrorCode::TopicAlreadyExists), "TOPIC_ALREADY_EXISTS");
        assert_eq!(error_name(ErrorCode::UnknownTopicOrPartition), "UNKNOWN_TOPIC_OR_PARTITION");
        assert_eq!(error_name(ErrorCode::InvalidTopicException), "INVALID_TOPIC_EXCEPTION");
        assert_eq!(error_name(ErrorCode::UnknownServerError), "UNKNOWN_SERVER_ERROR");
        assert_eq!(error_name(ErrorCode::Unknown(999)), "UNKNOWN_ERROR_CODE_999");
    }
}
