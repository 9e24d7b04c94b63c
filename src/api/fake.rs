//! An in-memory `Broker` for the handlers' unit tests: no socket, no reactor, one shard.
//!
//! What it keeps real: the controller (the same state machine and metadata log, in a
//! temporary directory, so CreateTopics or CreateAcls change what the next request sees),
//! the ACL index and its checks, the group coordinator (its offsets "log" is memory), the
//! metrics probe and the quotas. What it fakes: partitions are a list of batches in one
//! file each (so fetches still answer with file regions); `watch` returns at once, as a
//! partition's does, if a watched high watermark is already past its offset; else it
//! applies the appends a test queued with `arrive`, and returns if one of them moved a
//! watched partition's high watermark past its offset, else sleeps out the wait.
//!
//! Tests drive it with `call`: a request message in, the decoded response out.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::File;
use std::future::Future;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_channel::oneshot;
use proto_kafka::messages::{ApiKey, RequestHeader};
use proto_kafka::protocol::{Decodable, Encodable, HeaderVersion};

use super::{Broker, Outcome};
use crate::auth::acl::{Acls, AuthorizerConfig, Operation, ResourceType as AclResource};
use crate::auth::sasl::ConnSecurity;
use crate::auth::Session;
use crate::config::Config;
use crate::controller::{Context, Controller};
use crate::fetch_session::FetchSessions;
use crate::group::coordinator::Coordinator;
use crate::group::{GroupLimits, GroupListing, GroupOp, OffsetsLog};
use crate::listener::{ListenerSpec, SecurityProtocol};
use crate::log::{Appended, LogConfig, Offsets, ReadOut};
use crate::loggers::Loggers;
use crate::metadata::Catalog;
use crate::metrics::{Probe, Registry};
use crate::producer::ProducerSummary;
use crate::protocol::response::{Chunk, FileRegion, Response};
use crate::protocol::{batch, ErrorCode};
use crate::quota::{QuotaTable, Quotas, ShardQuotas};
use crate::shard::controller::{self, ControllerOp};
use crate::shard::{
    alone_epoch, alone_epoch_end, EpochAsk, FetchAsk, OffsetQuery, PartResult, ProduceAcks, Produced, Share, Tp,
};

#[derive(Clone)]
pub(crate) struct Fake(Rc<Inner>);

pub(crate) struct Inner {
    dir: tempfile::TempDir,
    config: Config,
    log_config: LogConfig,
    sasl_mechanisms: Vec<String>,
    controller: RefCell<Controller>,
    catalog: RefCell<Arc<Catalog>>,
    acls: RefCell<Rc<Acls>>,
    authorizer: Option<AuthorizerConfig>,
    logs: RefCell<HashMap<Tp, Log>>,
    /// Appends `watch` makes happen (a producer arriving while a fetch waits).
    arrivals: RefCell<Vec<(Tp, Bytes)>>,
    /// Read passes of `fetch` so far.
    fetch_passes: std::cell::Cell<usize>,
    /// Producers `producers` reports, set by tests.
    producer_summaries: RefCell<HashMap<Tp, Vec<ProducerSummary>>>,
    groups: Coordinator,
    offsets_log: Rc<MemoryOffsets>,
    probe: Probe,
    quotas: ShardQuotas,
    fetch_sessions: FetchSessions,
    loggers: Loggers,
}

/// One partition: its batches (base offset, file position, length, max timestamp).
struct Log {
    file: Arc<File>,
    batches: Vec<(i64, u64, u32, i64)>,
    log_start: i64,
    end: i64,
    size: u64,
}

impl Log {
    fn offsets(&self) -> Offsets {
        Offsets { log_start: self.log_start, high_watermark: self.end, log_end: self.end, size: self.size }
    }
}

/// The group coordinator's offsets log: every appended batch, kept.
#[derive(Default)]
pub(crate) struct MemoryOffsets {
    batches: RefCell<Vec<Bytes>>,
    /// When set, appends fail (a full disk under `__consumer_offsets`).
    failing: std::cell::Cell<bool>,
}

impl OffsetsLog for MemoryOffsets {
    fn append(&self, batch: Bytes) -> Pin<Box<dyn Future<Output = Result<(), ErrorCode>>>> {
        let r = match self.failing.get() {
            true => Err(ErrorCode::CoordinatorNotAvailable),
            false => {
                self.batches.borrow_mut().push(batch);
                Ok(())
            }
        };
        Box::pin(std::future::ready(r))
    }
}

impl Fake {
    /// A broker with the default settings.
    pub(crate) fn new() -> Fake {
        Fake::with(|_| {})
    }

    /// A broker with the default settings changed by `set`.
    pub(crate) fn with(set: impl FnOnce(&mut Config)) -> Fake {
        let dir = tempfile::tempdir().expect("temporary directory");
        let mut config =
            Config { data_dir: dir.path().to_path_buf(), group_initial_rebalance_delay_ms: 0, ..Config::default() };
        set(&mut config);
        let log_config = LogConfig::from_config(&config);
        let mut controller = Controller::open(Context {
            shards: 1,
            node_id: config.node_id,
            default_partitions: config.default_partitions,
            static_log: log_config,
            data_dir: dir.path().to_path_buf(),
            members: Vec::new(),
            default_replication_factor: 1,
        })
        .expect("controller in a temporary directory");
        controller.ensure_internal_topic(crate::group::offsets::TOPIC, 1, Default::default()).expect("offsets topic");
        let catalog = Arc::new(controller.catalog().clone());
        let (default, clients) = config.client_quotas().expect("valid quotas");
        let table = QuotaTable::new(default, &clients, &config.user_quotas().expect("valid quotas"), []);
        let limits = GroupLimits {
            min_session_ms: config.group_min_session_timeout_ms,
            max_session_ms: config.group_max_session_timeout_ms,
            initial_rebalance_delay_ms: config.group_initial_rebalance_delay_ms,
            max_size: config.group_max_size as usize,
        };
        let apis = super::APIS.iter().map(|s| (s.key as i16, format!("{:?}", s.key))).collect();
        let fake = Fake(Rc::new(Inner {
            authorizer: config.authorizer_enabled.then(|| AuthorizerConfig {
                super_users: config.super_user_list(),
                allow_everyone_if_no_acl_found: config.allow_everyone_if_no_acl_found,
            }),
            sasl_mechanisms: config.sasl_mechanisms().unwrap_or_default(),
            acls: RefCell::new(Rc::new(Acls::new(catalog.acls.clone()))),
            catalog: RefCell::new(catalog),
            controller: RefCell::new(controller),
            logs: RefCell::new(HashMap::new()),
            arrivals: RefCell::new(Vec::new()),
            fetch_passes: std::cell::Cell::new(0),
            producer_summaries: RefCell::new(HashMap::new()),
            groups: Coordinator::new(limits, 7 * 24 * 3_600_000),
            offsets_log: Rc::new(MemoryOffsets::default()),
            probe: Registry::new(1, apis).register_shard(0, 0, None),
            quotas: ShardQuotas::new(Quotas::new(), table),
            fetch_sessions: FetchSessions::new(
                0,
                1,
                config.max_incremental_fetch_session_cache_slots,
                config.min_incremental_fetch_session_eviction_ms,
                0x5eed,
            ),
            loggers: Loggers::new("info"),
            log_config,
            config,
            dir,
        }));
        fake.publish();
        fake
    }

    /// Installs the controller's catalog: new partitions get an empty log, the ACL index
    /// follows, deleted topics' logs go.
    fn publish(&self) {
        let catalog = Arc::new(self.0.controller.borrow().catalog().clone());
        let mut logs = self.0.logs.borrow_mut();
        logs.retain(|tp, _| catalog.topic_by_id(&tp.topic).is_some());
        for t in catalog.topics.values() {
            for p in 0..t.partitions() {
                let tp = Tp { topic: t.id, partition: p };
                logs.entry(tp).or_insert_with(|| {
                    let path = self.0.dir.path().join(format!("{}-{p}.log", t.id));
                    let file = File::options().create(true).read(true).append(true).open(path).expect("log file");
                    Log { file: Arc::new(file), batches: Vec::new(), log_start: 0, end: 0, size: 0 }
                });
            }
        }
        *self.0.acls.borrow_mut() = Rc::new(Acls::new(catalog.acls.clone()));
        *self.0.catalog.borrow_mut() = catalog;
    }

    /// Creates topic `name` with `partitions` partitions, as CreateTopics would.
    pub(crate) fn topic(&self, name: &str, partitions: i32) -> Tp {
        let topic = crate::controller::NewTopic {
            name: name.into(),
            partitions,
            replication_factor: 1,
            assignments: None,
            configs: Default::default(),
        };
        let created = self.0.controller.borrow_mut().create_topics(&[topic], false).remove(0).expect("topic created");
        self.publish();
        Tp { topic: created.id, partition: 0 }
    }

    /// The dynamic configs topic `name` has in the catalog.
    pub(crate) fn topic_configs(&self, name: &str) -> std::collections::BTreeMap<String, String> {
        self.catalog().topic(name).expect("topic exists").configs.clone()
    }

    /// The partition `index` of topic `name`.
    pub(crate) fn tp(&self, name: &str, index: i32) -> Tp {
        Tp { topic: self.catalog().topic(name).expect("topic exists").id, partition: index }
    }

    /// Appends `values` as one batch to `tp`; returns its base offset.
    pub(crate) fn append(&self, tp: Tp, values: &[&[u8]]) -> i64 {
        self.append_batch(tp, Bytes::from(batch::build(crate::sys::unix_now_ms(), values))).expect("appended")
    }

    fn append_batch(&self, tp: Tp, bytes: Bytes) -> Result<i64, ErrorCode> {
        let mut logs = self.0.logs.borrow_mut();
        let log = logs.get_mut(&tp).ok_or(ErrorCode::UnknownTopicOrPartition)?;
        let h = batch::read_header(&bytes).map_err(|e| e.code())?;
        let mut b = BytesMut::from(&bytes[..]);
        batch::patch(&mut b, log.end, 0);
        let pos = log.size;
        (&*log.file).write_all(&b).expect("log write");
        log.batches.push((log.end, pos, b.len() as u32, h.max_timestamp));
        let base = log.end;
        log.end += h.last_offset_delta as i64 + 1;
        log.size += b.len() as u64;
        Ok(base)
    }

    /// The next `watch` appends `values` to `tp` first, as a producer would while a fetch waits.
    pub(crate) fn arrive(&self, tp: Tp, values: &[&[u8]]) {
        let bytes = Bytes::from(batch::build(crate::sys::unix_now_ms(), values));
        self.0.arrivals.borrow_mut().push((tp, bytes));
    }

    /// Read passes of `fetch` so far.
    pub(crate) fn fetch_passes(&self) -> usize {
        self.0.fetch_passes.get()
    }

    pub(crate) fn set_producers(&self, tp: Tp, producers: Vec<ProducerSummary>) {
        self.0.producer_summaries.borrow_mut().insert(tp, producers);
    }

    /// The offsets of `tp` now.
    pub(crate) fn offsets_of(&self, tp: Tp) -> Offsets {
        self.0.logs.borrow()[&tp].offsets()
    }

    /// Batches the group coordinator appended to its offsets log.
    pub(crate) fn offsets_appends(&self) -> usize {
        self.0.offsets_log.batches.borrow().len()
    }

    /// Makes the group coordinator's appends fail (true) or succeed again.
    pub(crate) fn fail_offsets_log(&self, failing: bool) {
        self.0.offsets_log.failing.set(failing);
    }

    /// Sends `msg` as API `api` v`version` from `principal` (None: ANONYMOUS) on a PLAINTEXT
    /// listener, and returns the handler's outcome.
    pub(crate) fn send<M: Encodable>(&self, api: ApiKey, version: i16, msg: &M, principal: Option<&str>) -> Outcome {
        let conn = Rc::new(connection(SecurityProtocol::Plaintext, principal));
        self.send_on(&conn, api, version, msg)
    }

    /// Sends `msg` on `conn` through dispatch (header parsing, the SASL gate, routing).
    pub(crate) fn send_on<M: Encodable>(&self, conn: &Rc<ConnSecurity>, api: ApiKey, version: i16, msg: &M) -> Outcome {
        let frame = frame(api, version, msg);
        futures_lite::future::block_on(super::dispatch(self, frame, conn))
    }

    /// Sends `msg` and decodes the response, which must exist.
    pub(crate) fn call<M: Encodable, R: Decodable + HeaderVersion>(&self, api: ApiKey, version: i16, msg: &M) -> R {
        self.call_as(None, api, version, msg)
    }

    /// `call` from `principal`.
    pub(crate) fn call_as<M: Encodable, R: Decodable + HeaderVersion>(
        &self,
        principal: Option<&str>,
        api: ApiKey,
        version: i16,
        msg: &M,
    ) -> R {
        let response = self.send(api, version, msg, principal).expect("answered").expect("a response");
        decode_response(api, version, &response)
    }

    /// Stores an ALLOW ACL: `principal` may do `op` on the resource named `name` (LITERAL),
    /// from any host; the next request sees it.
    pub(crate) fn allow(&self, principal: &str, resource: AclResource, name: &str, op: Operation) {
        let acl = crate::auth::acl::AclBinding {
            resource_type: resource,
            resource_name: name.into(),
            pattern: crate::auth::acl::PatternType::Literal,
            principal: principal.into(),
            host: "*".into(),
            operation: op,
            permission: crate::auth::acl::Permission::Allow,
        };
        self.0.controller.borrow_mut().create_acls(&[acl]).expect("ACL stored");
        self.publish();
    }
}

/// A connection's security state on a listener of `protocol`, from a fixed client address.
pub(crate) fn connection(protocol: SecurityProtocol, principal: Option<&str>) -> ConnSecurity {
    let addr: std::net::SocketAddr = "127.0.0.1:9092".parse().expect("address");
    let mut listener = ListenerSpec::plaintext(addr, None).bound(addr);
    listener.protocol = protocol;
    let peer = "127.0.0.1:40000".parse().expect("address");
    ConnSecurity::new(Rc::new(listener), peer, principal.map(str::to_string))
}

/// A request frame (no size prefix) as a client sends it: header v1 or v2, then the body.
pub(crate) fn frame<M: Encodable>(api: ApiKey, version: i16, msg: &M) -> Bytes {
    let mut header = RequestHeader::default();
    header.request_api_key = api as i16;
    header.request_api_version = version;
    header.correlation_id = 7;
    header.client_id = Some(super::str_bytes("unit-test"));
    let header_version = api.request_header_version(version);
    let mut buf = BytesMut::new();
    header.encode(&mut buf, header_version).expect("header encodes");
    msg.encode(&mut buf, version).expect("request encodes");
    buf.freeze()
}

/// The bytes of a response frame, file regions read in, size prefix checked and dropped.
pub(crate) fn response_bytes(response: &Response) -> Bytes {
    let mut out = BytesMut::new();
    for chunk in &response.chunks {
        match chunk {
            Chunk::Bytes(b) => out.extend_from_slice(b),
            Chunk::File(FileRegion { file, pos, len }) => {
                let mut buf = vec![0; *len as usize];
                file.read_exact_at(&mut buf, *pos).expect("region readable");
                out.extend_from_slice(&buf);
            }
        }
    }
    let size = i32::from_be_bytes(out[..4].try_into().expect("size prefix"));
    assert_eq!(size as usize, out.len() - 4, "size prefix matches the frame");
    out.freeze().slice(4..)
}

/// Decodes a response frame of `api` v`version`: its correlation id must be the request's.
pub(crate) fn decode_response<R: Decodable + HeaderVersion>(api: ApiKey, version: i16, response: &Response) -> R {
    let mut body = response_bytes(response);
    let correlation = i32::from_be_bytes(body[..4].try_into().expect("correlation id"));
    assert_eq!(correlation, 7, "the response answers the request");
    let header_version = if api == ApiKey::ApiVersions { 0 } else { R::header_version(version) };
    let skip = if header_version >= 1 { 5 } else { 4 };
    let mut rest = body.split_off(skip);
    R::decode(&mut rest, version).expect("response decodes")
}

impl Broker for Fake {
    fn config(&self) -> &Config {
        &self.0.config
    }

    fn log_config(&self) -> &LogConfig {
        &self.0.log_config
    }

    fn sasl_mechanisms(&self) -> &[String] {
        &self.0.sasl_mechanisms
    }

    fn catalog(&self) -> Arc<Catalog> {
        self.0.catalog.borrow().clone()
    }

    fn acls(&self) -> Rc<Acls> {
        self.0.acls.borrow().clone()
    }

    fn authorizer_enabled(&self) -> bool {
        self.0.authorizer.is_some()
    }

    fn authorize(&self, session: &Session, op: Operation, resource: AclResource, name: &str) -> bool {
        let Some(cfg) = &self.0.authorizer else { return true };
        self.acls().authorize(cfg, &session.principal, session.host, op, resource, name)
    }

    fn authorize_any(&self, session: &Session, op: Operation, resource: AclResource) -> bool {
        let Some(cfg) = &self.0.authorizer else { return true };
        self.acls().authorize_any(cfg, &session.principal, session.host, op, resource)
    }

    fn probe(&self) -> &Probe {
        &self.0.probe
    }

    fn quotas(&self) -> &ShardQuotas {
        &self.0.quotas
    }

    fn loggers(&self) -> &Loggers {
        &self.0.loggers
    }

    fn fetch_sessions(&self) -> &FetchSessions {
        &self.0.fetch_sessions
    }

    fn leadership(&self, _tp: &Tp) -> Option<crate::shard::cluster::View> {
        None
    }

    fn controller_id(&self) -> Option<i32> {
        None
    }

    async fn produce(&self, batches: Share<Bytes>, _acks: ProduceAcks) -> Vec<Produced> {
        batches
            .into_iter()
            .map(|(tp, bytes)| {
                let base_offset = self.append_batch(tp, bytes)?;
                let log_start_offset = self.offsets_of(tp).log_start;
                Ok(Appended { base_offset, log_start_offset, log_append_time: -1 })
            })
            .collect()
    }

    async fn fetch(&self, asks: Share<FetchAsk>) -> Vec<PartResult<ReadOut>> {
        self.0.fetch_passes.set(self.0.fetch_passes.get() + 1);
        let logs = self.0.logs.borrow();
        let read = |tp: Tp, ask: FetchAsk| -> PartResult<ReadOut> {
            let log = logs.get(&tp).ok_or(ErrorCode::UnknownTopicOrPartition)?;
            alone_epoch(ask.current_leader_epoch)?;
            if ask.offset < log.log_start || ask.offset > log.end {
                return Err(ErrorCode::OffsetOutOfRange);
            }
            let offsets = log.offsets();
            // Whole batches from the one holding `offset`, the first always, then up to max_bytes.
            let from = log.batches.iter().rposition(|b| b.0 <= ask.offset).unwrap_or(0);
            let wanted = log.batches.get(from..).unwrap_or_default();
            let Some(first) = wanted.first().filter(|_| ask.offset < log.end) else {
                return Ok(ReadOut { offsets, records: None, first_batch_len: 0 });
            };
            let mut len = 0u32;
            for b in wanted {
                if len > 0 && len + b.2 > ask.max_bytes {
                    break;
                }
                len += b.2;
            }
            let records = Some(FileRegion { file: log.file.clone(), pos: first.1, len });
            Ok(ReadOut { offsets, records, first_batch_len: first.2 })
        };
        asks.into_iter().map(|(tp, ask)| read(tp, ask)).collect()
    }

    async fn watch(&self, asks: Share<i64>, wait: Duration) {
        if asks.iter().any(|(tp, offset)| self.offsets_of(*tp).high_watermark > *offset) {
            return;
        }
        let arrivals: Vec<_> = self.0.arrivals.borrow_mut().drain(..).collect();
        let mut woken = false;
        for (tp, bytes) in arrivals {
            self.append_batch(tp, bytes).expect("arrival appended");
            woken |=
                asks.iter().any(|(watched, offset)| *watched == tp && self.offsets_of(tp).high_watermark > *offset);
        }
        // An append on a partition the fetch does not watch does not wake it.
        if !woken {
            std::thread::sleep(wait);
        }
    }

    async fn offsets(&self, partitions: Vec<Tp>) -> Vec<PartResult<Offsets>> {
        partitions
            .into_iter()
            .map(|tp| self.0.logs.borrow().get(&tp).map(Log::offsets))
            .map(|o| o.ok_or(ErrorCode::UnknownTopicOrPartition))
            .collect()
    }

    async fn delete_records(&self, asks: Share<i64>, _timeout: Duration) -> Vec<PartResult<i64>> {
        let mut logs = self.0.logs.borrow_mut();
        let mut delete = |tp: Tp, offset: i64| -> PartResult<i64> {
            let log = logs.get_mut(&tp).ok_or(ErrorCode::UnknownTopicOrPartition)?;
            let to = if offset == -1 { log.end } else { offset };
            if to < 0 || to > log.end {
                return Err(ErrorCode::OffsetOutOfRange);
            }
            log.log_start = log.log_start.max(to);
            Ok(log.log_start)
        };
        asks.into_iter().map(|(tp, offset)| delete(tp, offset)).collect()
    }

    async fn producers(&self, partitions: Vec<Tp>) -> Vec<PartResult<Vec<ProducerSummary>>> {
        let logs = self.0.logs.borrow();
        let summaries = self.0.producer_summaries.borrow();
        let of = |tp: Tp| match logs.contains_key(&tp) {
            true => Ok(summaries.get(&tp).cloned().unwrap_or_default()),
            false => Err(ErrorCode::UnknownTopicOrPartition),
        };
        partitions.into_iter().map(of).collect()
    }

    async fn list_offsets(&self, asks: Share<(OffsetQuery, i32)>) -> Vec<PartResult<(i64, i64, i32)>> {
        let logs = self.0.logs.borrow();
        let find = |tp: Tp, (query, current): (OffsetQuery, i32)| -> PartResult<(i64, i64, i32)> {
            let log = logs.get(&tp).ok_or(ErrorCode::UnknownTopicOrPartition)?;
            let epoch = alone_epoch(current)?;
            let live = log.batches.iter().filter(|b| b.0 >= log.log_start);
            let (offset, ts) = match query {
                OffsetQuery::Latest => (log.end, -1),
                OffsetQuery::Earliest => (log.log_start, -1),
                OffsetQuery::LatestTiered => (-1, -1),
                OffsetQuery::MaxTimestamp => live.max_by_key(|b| b.3).map_or((-1, -1), |b| (b.0, b.3)),
                OffsetQuery::AtTime(ts) => live.into_iter().find(|b| b.3 >= ts).map_or((-1, -1), |b| (b.0, b.3)),
            };
            Ok((offset, ts, if offset >= 0 { epoch } else { -1 }))
        };
        asks.into_iter().map(|(tp, ask)| find(tp, ask)).collect()
    }

    async fn epoch_end_offsets(&self, asks: Share<EpochAsk>) -> Vec<PartResult<(i32, i64)>> {
        let logs = self.0.logs.borrow();
        let end = |tp: Tp, a: EpochAsk| -> PartResult<(i32, i64)> {
            let log = logs.get(&tp).ok_or(ErrorCode::UnknownTopicOrPartition)?;
            alone_epoch(a.current)?;
            Ok(alone_epoch_end(a.epoch, log.end))
        };
        asks.into_iter().map(|(tp, a)| end(tp, a)).collect()
    }

    async fn group_op<T: Send + 'static>(
        &self,
        group: String,
        make: impl FnOnce(oneshot::Sender<T>) -> GroupOp + Send + 'static,
    ) -> Result<T, ErrorCode> {
        let (tx, rx) = oneshot::channel();
        let log: Rc<dyn OffsetsLog> = self.0.offsets_log.clone();
        self.0.groups.handle(group, make(tx), Some(log)).await;
        rx.await.map_err(|_| ErrorCode::CoordinatorNotAvailable)
    }

    async fn list_groups(&self, states: Vec<String>) -> Vec<GroupListing> {
        self.0.groups.list(&states)
    }

    async fn controller<T: Send + 'static>(
        &self,
        make: impl FnOnce(oneshot::Sender<T>) -> ControllerOp + Send + 'static,
    ) -> Result<T, ErrorCode> {
        let (tx, rx) = oneshot::channel();
        let answer = controller::decide(&mut self.0.controller.borrow_mut(), make(tx));
        self.publish();
        answer(None);
        rx.await.map_err(|_| ErrorCode::NotController)
    }

    async fn elect_preferred(
        &self,
        asks: Vec<(String, i32)>,
        _wait: std::time::Duration,
    ) -> Vec<Result<(), crate::controller::Failure>> {
        // The fake is a broker alone: it has no replicated topic to hold elections for.
        asks.iter().map(|_| Err((ErrorCode::PreferredLeaderNotAvailable, "the fake has no cluster".into()))).collect()
    }
}
