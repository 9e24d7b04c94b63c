//! What each layer records, per shard: one `ShardMetrics` per shard, written only through
//! that shard's `Probe`.
//!
//! | layer | records |
//! |---|---|
//! | `net` | connections accepted/open/closed (by the client, on an error, idle), connections refused by a limit, bytes received and sent, and per request (when its response has left) the latency phases below |
//! | `server`/`api` | requests refused (decode, unsupported version, unknown API, encode), Produce/Fetch responses carrying an error code, delayed fetches, responses throttled by a client quota and their throttle time |
//! | `shard` | partitions homed here, mesh messages sent/received, sends that found the peer's queue full, appends whose ack had to wait (delayed produce) |
//! | `log` | fdatasync count and latency, bytes held in this shard's logs |
//! | `cluster` | replicated partitions led from this shard, those with a replica out of sync (under-replicated) and those with fewer in sync than `min.insync.replicas`, as of the last raft tick; bytes of appends sent under a replication throttle |
//!
//! Request latency is split as Kafka's RequestMetrics split it: *queue* (frame read →
//! handler start), *local* (the handler on this shard), *remote* (waiting on another shard,
//! a delayed fetch or a durable ack; see `request.rs`), *response_queue* (handler done →
//! the connection starts writing it, i.e. waiting behind earlier responses), *response_send*
//! (writing it) and *total* (frame read → response written).

use std::marker::PhantomData;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::histogram::{Counter, Gauge, Histogram};

/// The phases of a request's latency (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Queue,
    Local,
    Remote,
    ResponseQueue,
    ResponseSend,
    Total,
}

impl Phase {
    pub const ALL: [Phase; 6] =
        [Phase::Queue, Phase::Local, Phase::Remote, Phase::ResponseQueue, Phase::ResponseSend, Phase::Total];

    pub fn label(self) -> &'static str {
        match self {
            Phase::Queue => "queue",
            Phase::Local => "local",
            Phase::Remote => "remote",
            Phase::ResponseQueue => "response_queue",
            Phase::ResponseSend => "response_send",
            Phase::Total => "total",
        }
    }
}

/// Why a request counts as an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// An API key this broker does not serve (the connection is closed).
    UnknownApi,
    /// A version outside the API's range (the connection is closed).
    UnsupportedVersion,
    /// A header or body that does not decode (the connection is closed).
    Decode,
    /// A response that could not be encoded (the connection is closed).
    Encode,
    /// Answered, with a non-zero Kafka error code in the response (Produce and Fetch).
    ErrorCode,
    /// A failed SASL authentication, or a request out of place in the SASL exchange (the
    /// connection is closed after the failed-authentication delay).
    Authentication,
}

impl ErrorKind {
    pub const ALL: [ErrorKind; 6] = [
        ErrorKind::UnknownApi,
        ErrorKind::UnsupportedVersion,
        ErrorKind::Decode,
        ErrorKind::Encode,
        ErrorKind::ErrorCode,
        ErrorKind::Authentication,
    ];

    pub fn label(self) -> &'static str {
        match self {
            ErrorKind::UnknownApi => "unknown_api",
            ErrorKind::UnsupportedVersion => "unsupported_version",
            ErrorKind::Decode => "decode",
            ErrorKind::Encode => "encode",
            ErrorKind::ErrorCode => "error_code",
            ErrorKind::Authentication => "authentication",
        }
    }
}

/// One API's metrics on one shard.
#[derive(Debug)]
pub struct ApiMetrics {
    /// The `api` label: Kafka's request name (`Produce`, `Fetch`, ...) or `unknown`.
    pub name: String,
    pub requests: Counter,
    pub errors: [Counter; ErrorKind::ALL.len()],
    pub latency: [Histogram; Phase::ALL.len()],
    /// Responses that throttled their client (a quota was exceeded), and the throttle time
    /// they gave, µs.
    pub throttled: Counter,
    pub throttle_micros: Counter,
}

impl ApiMetrics {
    fn new(name: String) -> ApiMetrics {
        ApiMetrics {
            name,
            requests: Counter::default(),
            errors: Default::default(),
            latency: Default::default(),
            throttled: Counter::default(),
            throttle_micros: Counter::default(),
        }
    }
}

/// Where a connection's end came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// The client closed it.
    Client,
    /// The broker closed it: a bad frame, a refused request, a failed read or write.
    Error,
    /// The broker closed it: no complete request for `connections.max.idle.ms`.
    Idle,
}

/// The connection limit that refused an accepted connection (it was closed at once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionLimit {
    /// `max.connections`: the broker-wide cap.
    MaxConnections,
    /// `max.connections.per.ip` (or the peer's override).
    MaxConnectionsPerIp,
}

impl ConnectionLimit {
    pub const ALL: [ConnectionLimit; 2] = [ConnectionLimit::MaxConnections, ConnectionLimit::MaxConnectionsPerIp];

    pub fn label(self) -> &'static str {
        match self {
            ConnectionLimit::MaxConnections => "max_connections",
            ConnectionLimit::MaxConnectionsPerIp => "max_connections_per_ip",
        }
    }
}

/// Everything one shard records. Read by the scrape; written only through the shard's
/// `Probe`.
#[derive(Debug)]
pub struct ShardMetrics {
    pub shard: usize,
    pub cpu: usize,
    pub numa_node: Option<u32>,
    /// The served APIs, then `unknown` for requests whose API is not known.
    pub apis: Box<[ApiMetrics]>,
    /// API key → index into `apis`.
    slot_of_key: Box<[u8]>,

    pub connections_open: Gauge,
    pub connections_accepted: Counter,
    pub connections_closed_by_client: Counter,
    pub connections_closed_on_error: Counter,
    pub connections_closed_idle: Counter,
    /// Accepted connections closed at once by a limit, indexed by `ConnectionLimit`.
    pub connections_refused: [Counter; ConnectionLimit::ALL.len()],
    pub bytes_received: Counter,
    pub bytes_sent: Counter,

    pub partitions: Gauge,
    pub mesh_sent: Counter,
    pub mesh_received: Counter,
    pub mesh_queue_full: Counter,
    pub delayed_produce: Counter,
    pub delayed_fetch: Counter,
    /// Fetch sessions (KIP-227) in the shard's cache, and their partitions.
    pub fetch_sessions: Gauge,
    pub fetch_session_partitions: Gauge,
    /// Sessions evicted to make room for a new one.
    pub fetch_session_evictions: Counter,
    /// Fetches that named a session and an epoch (incremental fetches) and were served.
    pub incremental_fetches: Counter,

    pub log_bytes: Gauge,
    /// Times a connection stopped reading because a request-memory budget was spent.
    pub memory_waits: Counter,
    /// Accepted connections that waited for max_connection_creation_rate.
    pub creation_throttled: Counter,
    /// Partitions opened after an unclean stop, or a clean one whose log tail did not check
    /// out, whose newest segment was scanned batch by batch.
    pub log_recoveries: Counter,
    /// Append writes refused because the data disk was full (their batches got
    /// KAFKA_STORAGE_ERROR; later appends try again).
    pub log_writes_refused: Counter,
    /// Log cleaning (compacted topics): bytes of old segments cleaned, and what they became.
    pub cleaner_bytes_read: Counter,
    pub cleaner_bytes_written: Counter,
    pub cleaner_runs: Counter,
    /// Time spent cleaning, in µs.
    pub cleaner_micros: Counter,
    /// The dirty share of the dirtiest compacted log, in thousandths, at the last check.
    pub cleaner_max_dirty_permille: Gauge,
    /// Compacted logs due for cleaning at the last check.
    pub cleaner_backlog: Gauge,
    /// SASL authentications that succeeded and that failed.
    pub authentications: Counter,
    pub authentication_failures: Counter,
    /// TLS handshakes that failed or timed out.
    pub tls_handshake_failures: Counter,
    pub fsync: Histogram,
    /// Replicated partitions this shard leads, those with a voter out of sync, and those
    /// with fewer voters in sync than `min.insync.replicas` (Kafka's LeaderCount,
    /// UnderReplicatedPartitions and UnderMinIsrPartitionCount).
    pub leader_partitions: Gauge,
    pub under_replicated_partitions: Gauge,
    pub under_min_isr_partitions: Gauge,
    /// Bytes of appends sent to replicas a replication throttle covers.
    pub replication_throttled_bytes: Counter,
}

impl ShardMetrics {
    pub(crate) fn new(shard: usize, cpu: usize, numa_node: Option<u32>, apis: &[(i16, String)]) -> ShardMetrics {
        let max_key = apis.iter().map(|(k, _)| (*k).max(0) as usize).max().unwrap_or(0);
        let unknown = apis.len() as u8;
        let mut slot_of_key = vec![unknown; max_key + 1].into_boxed_slice();
        for (i, (k, _)) in apis.iter().enumerate() {
            if *k >= 0 {
                slot_of_key[*k as usize] = i as u8;
            }
        }
        let named = apis.iter().map(|(_, n)| ApiMetrics::new(n.clone()));
        ShardMetrics {
            shard,
            cpu,
            numa_node,
            apis: named.chain([ApiMetrics::new("unknown".into())]).collect(),
            slot_of_key,
            connections_open: Gauge::default(),
            connections_accepted: Counter::default(),
            connections_closed_by_client: Counter::default(),
            connections_closed_on_error: Counter::default(),
            connections_closed_idle: Counter::default(),
            connections_refused: Default::default(),
            bytes_received: Counter::default(),
            bytes_sent: Counter::default(),
            partitions: Gauge::default(),
            mesh_sent: Counter::default(),
            mesh_received: Counter::default(),
            mesh_queue_full: Counter::default(),
            delayed_produce: Counter::default(),
            delayed_fetch: Counter::default(),
            fetch_sessions: Gauge::default(),
            fetch_session_partitions: Gauge::default(),
            fetch_session_evictions: Counter::default(),
            incremental_fetches: Counter::default(),
            log_bytes: Gauge::default(),
            memory_waits: Counter::default(),
            creation_throttled: Counter::default(),
            log_recoveries: Counter::default(),
            log_writes_refused: Counter::default(),
            cleaner_bytes_read: Counter::default(),
            cleaner_bytes_written: Counter::default(),
            cleaner_runs: Counter::default(),
            cleaner_micros: Counter::default(),
            cleaner_max_dirty_permille: Gauge::default(),
            cleaner_backlog: Gauge::default(),
            authentications: Counter::default(),
            authentication_failures: Counter::default(),
            tls_handshake_failures: Counter::default(),
            fsync: Histogram::default(),
            leader_partitions: Gauge::default(),
            under_replicated_partitions: Gauge::default(),
            under_min_isr_partitions: Gauge::default(),
            replication_throttled_bytes: Counter::default(),
        }
    }

    fn api(&self, slot: ApiSlot) -> &ApiMetrics {
        &self.apis[slot.0 as usize]
    }
}

/// An API's place in a shard's table, found once per request from its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiSlot(u8);

/// What the net layer needs to know about a request's handler, returned with its response.
#[derive(Debug, Clone, Copy)]
pub struct HandlerTiming {
    pub api: ApiSlot,
    pub started: Instant,
    pub finished: Instant,
    /// Time the handler spent waiting on remote work (never more than `finished - started`).
    pub remote: Duration,
}

/// A shard's handle for recording. It cannot leave the thread it was made on (`Rc` marker),
/// which is what makes the shard the single writer of its `ShardMetrics`.
#[derive(Debug, Clone)]
pub struct Probe {
    m: Arc<ShardMetrics>,
    _one_thread: PhantomData<Rc<()>>,
}

impl Probe {
    pub(crate) fn new(m: Arc<ShardMetrics>) -> Probe {
        Probe { m, _one_thread: PhantomData }
    }

    /// A probe that no registry reads: for unit tests and tools that open logs directly.
    pub fn detached() -> Probe {
        Probe::new(Arc::new(ShardMetrics::new(0, 0, None, &[])))
    }

    /// What has been recorded so far (for tests).
    pub fn metrics(&self) -> &ShardMetrics {
        &self.m
    }

    /// The slot of an API key; unknown keys (and `None`, no header) share the `unknown` slot.
    pub fn api_slot(&self, key: Option<i16>) -> ApiSlot {
        let unknown = (self.m.apis.len() - 1) as u8;
        let slot = key.and_then(|k| usize::try_from(k).ok()).and_then(|k| self.m.slot_of_key.get(k).copied());
        ApiSlot(slot.unwrap_or(unknown))
    }

    // ---- net ----

    pub fn connection_opened(&self) {
        self.m.connections_accepted.inc();
        self.m.connections_open.add(1);
    }

    pub fn connection_closed(&self, how: Closed) {
        match how {
            Closed::Client => self.m.connections_closed_by_client.inc(),
            Closed::Error => self.m.connections_closed_on_error.inc(),
            Closed::Idle => self.m.connections_closed_idle.inc(),
        }
        self.m.connections_open.add(-1);
    }

    /// An accepted connection was closed at once because `limit` was reached; it never
    /// counted as opened.
    pub fn connection_refused(&self, limit: ConnectionLimit) {
        self.m.connections_refused[limit as usize].inc();
    }

    pub fn bytes_received(&self, n: usize) {
        self.m.bytes_received.add(n as u64);
    }

    pub fn bytes_sent(&self, n: usize) {
        self.m.bytes_sent.add(n as u64);
    }

    /// A request is over: its response was written at `written` (or it had none). `sending`
    /// is when the connection started writing it.
    pub fn request_done(&self, h: &HandlerTiming, received: Instant, sending: Instant, written: Instant) {
        let api = self.m.api(h.api);
        let handler = h.finished.saturating_duration_since(h.started);
        let remote = h.remote.min(handler);
        let phases = [
            h.started.saturating_duration_since(received),
            handler - remote,
            remote,
            sending.saturating_duration_since(h.finished),
            written.saturating_duration_since(sending),
            written.saturating_duration_since(received),
        ];
        for (hist, d) in api.latency.iter().zip(phases) {
            hist.observe(d);
        }
        // Last, so a scrape that sees the request counted sees its latencies too.
        api.requests.inc();
    }

    // ---- server / api ----

    pub fn request_error(&self, api: ApiSlot, kind: ErrorKind) {
        self.m.api(api).errors[kind as usize].inc();
    }

    /// A response of `api` throttled its client for `d` (a client quota was exceeded).
    pub fn throttled(&self, api: ApiSlot, d: Duration) {
        let api = self.m.api(api);
        api.throttled.inc();
        api.throttle_micros.add(d.as_micros() as u64);
    }

    /// A delayed fetch: the request found too little data and parked until more arrived or
    /// its wait ran out.
    pub fn delayed_fetch(&self) {
        self.m.delayed_fetch.inc();
    }

    /// The fetch session cache now holds `sessions` sessions of `partitions` partitions.
    pub fn fetch_sessions(&self, sessions: usize, partitions: usize) {
        self.m.fetch_sessions.set(sessions as i64);
        self.m.fetch_session_partitions.set(partitions as i64);
    }

    pub fn fetch_session_evicted(&self) {
        self.m.fetch_session_evictions.inc();
    }

    pub fn incremental_fetch(&self) {
        self.m.incremental_fetches.inc();
    }

    // ---- shard ----

    pub fn partitions(&self, n: usize) {
        self.m.partitions.set(n as i64);
    }

    pub fn mesh_sent(&self) {
        self.m.mesh_sent.inc();
    }

    pub fn mesh_received(&self) {
        self.m.mesh_received.inc();
    }

    /// A send to another shard found its queue full and had to wait (backpressure).
    pub fn mesh_queue_full(&self) {
        self.m.mesh_queue_full.inc();
    }

    /// An append whose acknowledgement was not ready at once: it parked until the log writer
    /// had written (and, under `flush = always`, synced) it.
    /// An accepted connection waited for max_connection_creation_rate.
    /// A SASL exchange ended: authenticated, or failed.
    pub fn authenticated(&self, ok: bool) {
        match ok {
            true => self.m.authentications.inc(),
            false => self.m.authentication_failures.inc(),
        }
    }

    pub fn tls_handshake_failed(&self) {
        self.m.tls_handshake_failures.inc();
    }

    pub fn creation_throttled(&self) {
        self.m.creation_throttled.inc();
    }

    /// A connection found a request-memory budget spent and stopped reading for a while.
    pub fn memory_wait(&self) {
        self.m.memory_waits.inc();
    }

    pub fn delayed_produce(&self) {
        self.m.delayed_produce.inc();
    }

    // ---- log ----

    pub fn fsync(&self, took: Duration) {
        self.m.fsync.observe(took);
    }

    pub fn log_bytes(&self, delta: i64) {
        self.m.log_bytes.add(delta);
    }

    /// A partition opened without its clean-shutdown marker, or with one its log tail did not
    /// bear out: its newest segment was scanned.
    pub fn log_recovery(&self) {
        self.m.log_recoveries.inc();
    }

    // ---- cluster ----

    /// What the last raft tick found of the partitions led from this shard.
    pub fn replication(&self, leaders: usize, under_replicated: usize, under_min_isr: usize) {
        self.m.leader_partitions.set(leaders as i64);
        self.m.under_replicated_partitions.set(under_replicated as i64);
        self.m.under_min_isr_partitions.set(under_min_isr as i64);
    }

    /// An append of `bytes` sent under a replication throttle.
    pub fn replication_throttled(&self, bytes: u64) {
        self.m.replication_throttled_bytes.add(bytes);
    }

    /// One cleaning done: the bytes it read and wrote, and how long it took.
    pub fn cleaned(&self, read: u64, written: u64, took: Duration) {
        self.m.cleaner_runs.inc();
        self.m.cleaner_bytes_read.add(read);
        self.m.cleaner_bytes_written.add(written);
        self.m.cleaner_micros.add(took.as_micros() as u64);
    }

    /// What the cleaner's last look at the shard's compacted logs found.
    pub fn cleaner_backlog(&self, due: usize, max_dirty_ratio: f64) {
        self.m.cleaner_backlog.set(due as i64);
        self.m.cleaner_max_dirty_permille.set((max_dirty_ratio * 1000.0).round() as i64);
    }

    /// An append write found the data disk full.
    pub fn log_write_refused(&self) {
        self.m.log_writes_refused.inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_keys_find_their_slot_and_strangers_share_unknown() {
        let m = Arc::new(ShardMetrics::new(0, 0, None, &[(0, "Produce".into()), (1, "Fetch".into())]));
        let p = Probe::new(m.clone());
        assert_eq!(m.apis[p.api_slot(Some(1)).0 as usize].name, "Fetch");
        assert_eq!(m.apis[p.api_slot(Some(0)).0 as usize].name, "Produce");
        for stranger in [None, Some(-1), Some(2), Some(999)] {
            assert_eq!(m.apis[p.api_slot(stranger).0 as usize].name, "unknown", "{stranger:?}");
        }
    }

    #[test]
    fn a_request_is_split_into_phases_that_add_up() {
        let p = Probe::new(Arc::new(ShardMetrics::new(0, 0, None, &[(0, "Produce".into())])));
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let h = HandlerTiming { api: p.api_slot(Some(0)), started: t0 + ms(1), finished: t0 + ms(11), remote: ms(8) };
        p.request_done(&h, t0, t0 + ms(12), t0 + ms(15));
        let api = &p.metrics().apis[0];
        assert_eq!(api.requests.get(), 1);
        let sums: Vec<f64> = api.latency.iter().map(|h| h.snapshot().sum_seconds).collect();
        let want = [0.001, 0.002, 0.008, 0.001, 0.003, 0.015];
        for ((got, want), phase) in sums.iter().zip(want).zip(Phase::ALL) {
            assert!((got - want).abs() < 1e-9, "{}: {got} != {want}", phase.label());
        }
    }
}
