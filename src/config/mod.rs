//! Typed broker configuration: embedded defaults, overlaid by a TOML file (`--config`), then
//! by `RINGBROKER_*` environment variables and command-line flags (clap merges those two, a
//! flag winning over its variable).
//!
//! - here: the one table of settings (`settings!`), from which `Config`, `Flags` and
//!   `Config::NAMES` are generated, and the loading of those sources in order;
//! - `validate`: refuses a bad setting with its name and the fix;
//! - `parse`: the structured values written inside string settings (addresses, listeners,
//!   per-IP caps, quotas, SASL mechanisms, super users);
//! - `cpu_list`: the kernel's CPU list notation (`0-3,6`);
//! - `cluster`: the cluster settings parsed and checked together (`Config::cluster`).
//!
//! This module does no I/O except reading the config file; which CPUs the shards get is
//! `placement`'s.

mod cluster;
mod cpu_list;
mod parse;
mod validate;

use std::path::{Path, PathBuf};

use serde::Deserialize;

pub use cluster::ClusterSettings;
pub use cpu_list::{format_cpu_list, parse_cpu_list, CpuListError};

/// How appended data is made durable before it counts toward the high watermark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum FlushPolicy {
    /// fdatasync before the ack; appends that arrive during one fdatasync share the next.
    Always,
    /// fdatasync every `flush_interval_ms` or `flush_interval_bytes`, whichever comes first.
    Interval,
    /// Never fdatasync: the OS writes back when it likes (Kafka's default).
    Os,
}

/// How log lines are written to stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line, for log shippers.
    Json,
}

impl std::fmt::Display for FlushPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FlushPolicy::Always => "always",
            FlushPolicy::Interval => "interval",
            FlushPolicy::Os => "os",
        })
    }
}

/// Whether an SSL listener asks connecting clients for a certificate (Kafka's `ssl.client.auth`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum ClientAuth {
    /// No client certificate: SSL clients are `User:ANONYMOUS` (SASL_SSL ones are their SASL user).
    None,
    /// Ask for one; a client without a certificate is still accepted.
    Requested,
    /// Refuse clients without a certificate signed by `ssl_ca_file`.
    Required,
}

/// How a setting is given on the command line: the flag's value type, and how a flag's
/// value overrides the setting (an optional setting becomes set).
pub trait Setting {
    type Flag: Clone;
    fn set(&mut self, v: &Self::Flag);
}

macro_rules! plain_settings {
    ($($t:ty),*) => {$(
        impl Setting for $t {
            type Flag = $t;
            fn set(&mut self, v: &$t) {
                *self = v.clone();
            }
        }
    )*};
}
plain_settings!(String, PathBuf, bool, u32, u64, i32, i64, usize, f64, FlushPolicy, LogFormat, ClientAuth);

macro_rules! optional_settings {
    ($($t:ty),*) => {$(
        impl Setting for Option<$t> {
            type Flag = $t;
            fn set(&mut self, v: &$t) {
                *self = Some(v.clone());
            }
        }
    )*};
}
optional_settings!(String, PathBuf, u32);

/// The one declaration of every broker setting: its doc, type and default, its environment
/// variable, and its flag's help (`--name-with-dashes`). The `Config` fields and defaults,
/// the `Flags` clap reads, the overlay of flags on the file, and `Config::NAMES` (against
/// which a test checks the README's tables) are all generated from it.
macro_rules! settings {
    ($($(#[$meta:meta])* $name:ident : $ty:ty = $default:expr, $env:literal, $help:literal $(, $arg:ident)* ;)*) => {
        /// The broker's settings after every source has been merged.
        #[derive(Debug, Clone, Deserialize)]
        #[serde(default, deny_unknown_fields)]
        pub struct Config {
            $($(#[$meta])* pub $name: $ty,)*
        }

        impl Default for Config {
            fn default() -> Self {
                Config { $($name: $default,)* }
            }
        }

        /// The broker's command-line flags (the binary's parser, `cli::Cli`, takes them beside
        /// its subcommands); each can also come from the environment variable named beside it.
        #[derive(Debug, Default, clap::Args)]
        pub struct Flags {
            /// TOML file with settings (keys as in the README's table).
            #[arg(long, env = "RINGBROKER_CONFIG")]
            pub config: Option<PathBuf>,
            $(
                #[doc = $help]
                #[arg(long, env = $env $(, $arg = true)*)]
                pub $name: Option<<$ty as Setting>::Flag>,
            )*
        }

        impl Config {
            /// Every setting's name (its TOML key), in declaration order.
            pub const NAMES: &'static [&'static str] = &[$(stringify!($name)),*];

            fn overlay(&mut self, flags: &Flags) {
                $(if let Some(v) = &flags.$name {
                    Setting::set(&mut self.$name, v);
                })*
            }
        }
    };
}

settings! {
    /// Address every shard's listener binds (SO_REUSEPORT spreads connections).
    listen: String = "127.0.0.1:9092".into(), "RINGBROKER_LISTEN", "Address to listen on, HOST:PORT (port 0 picks a free port) [default: 127.0.0.1:9092]";
    /// Address given to clients in Metadata; defaults to the bound listen address.
    advertise: Option<String> = None, "RINGBROKER_ADVERTISE", "Address advertised to clients in Metadata, HOST:PORT [default: the listen address]";
    /// Named listeners, `NAME://HOST:PORT` separated by commas (see `listener`); when set, it
    /// replaces `listen` and `advertise`.
    listeners: String = String::new(), "RINGBROKER_LISTENERS", "Named listeners, e.g. PLAINTEXT://127.0.0.1:9092,SASL_SSL://0.0.0.0:9093 (replaces --listen) [default: none]";
    /// `NAME://HOST:PORT` for listeners whose clients must be told another address.
    advertised_listeners: String = String::new(), "RINGBROKER_ADVERTISED_LISTENERS", "Addresses told to clients per listener, e.g. SASL_SSL://broker.example:9093 [default: the bound ones]";
    /// `NAME:PROTOCOL` for listeners not named after their protocol.
    listener_security_protocol_map: String = String::new(), "RINGBROKER_LISTENER_SECURITY_PROTOCOL_MAP", "NAME:PROTOCOL for listeners not named after their protocol, e.g. INTERNAL:PLAINTEXT [default: none]";
    /// Certificate chain (PEM) of SSL and SASL_SSL listeners.
    ssl_certificate_file: Option<PathBuf> = None, "RINGBROKER_SSL_CERTIFICATE_FILE", "TLS certificate chain, PEM, for SSL and SASL_SSL listeners";
    /// The certificate's private key (PEM: PKCS#8, PKCS#1 or SEC1).
    ssl_key_file: Option<PathBuf> = None, "RINGBROKER_SSL_KEY_FILE", "TLS private key, PEM";
    /// CA certificates (PEM) that client certificates must chain to.
    ssl_ca_file: Option<PathBuf> = None, "RINGBROKER_SSL_CA_FILE", "CA certificates, PEM, that client certificates must chain to";
    /// `ssl.client.auth`: none, requested or required.
    ssl_client_auth: ClientAuth = ClientAuth::None, "RINGBROKER_SSL_CLIENT_AUTH", "Client certificates on TLS listeners: none, requested, required [default: none]";
    /// SASL mechanisms offered on SASL listeners (`sasl.enabled.mechanisms`).
    sasl_enabled_mechanisms: String = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512".into(), "RINGBROKER_SASL_ENABLED_MECHANISMS", "SASL mechanisms offered [default: PLAIN,SCRAM-SHA-256,SCRAM-SHA-512]";
    /// `sasl.server.max.receive.size`: the largest frame read before a client authenticates.
    sasl_server_max_receive_size: u32 = 524_288, "RINGBROKER_SASL_SERVER_MAX_RECEIVE_SIZE", "Largest frame accepted before a client authenticates, bytes [default: 524288]";
    /// `connection.failed.authentication.delay.ms`: how long a failed authentication waits
    /// before the connection closes (slows password guessing).
    connection_failed_authentication_delay_ms: u64 = 100, "RINGBROKER_CONNECTION_FAILED_AUTHENTICATION_DELAY_MS", "Delay before closing a connection whose authentication failed, ms [default: 100]";
    /// `connections.max.reauth.ms`: SASL sessions last this long, then the client must
    /// re-authenticate on the same connection or be disconnected; 0 = forever.
    connections_max_reauth_ms: u64 = 0, "RINGBROKER_CONNECTIONS_MAX_REAUTH_MS", "SASL session lifetime; clients re-authenticate before it ends, 0 = forever, ms [default: 0]";
    /// Enforce ACLs on every request (Kafka's `authorizer.class.name` set).
    authorizer_enabled: bool = false, "RINGBROKER_AUTHORIZER_ENABLED", "Enforce ACLs on every request [default: false]";
    /// `super.users`: principals allowed everything, separated by `;` (`User:admin;User:ops`).
    super_users: String = String::new(), "RINGBROKER_SUPER_USERS", "Principals allowed everything, e.g. \"User:admin;User:ops\" [default: none]";
    /// `allow.everyone.if.no.acl.found`
    allow_everyone_if_no_acl_found: bool = false, "RINGBROKER_ALLOW_EVERYONE_IF_NO_ACL_FOUND", "Allow an action on a resource no ACL names [default: false]";
    data_dir: PathBuf = PathBuf::from("./ringbroker-data"), "RINGBROKER_DATA_DIR", "Data directory [default: ./ringbroker-data]";
    /// CPU list such as "0-3,6"; one shard per CPU. Default: every CPU the process may use.
    cpus: Option<String> = None, "RINGBROKER_CPUS", "CPUs to run shards on, e.g. 0-3,6 [default: all CPUs the process may use]";
    /// Use the CPUs of this NUMA node (those the process may use).
    numa_node: Option<u32> = None, "RINGBROKER_NUMA_NODE", "Run shards on the CPUs of this NUMA node";
    /// Pin each shard's thread to its CPU. Off (Redpanda's overprovisioned mode): the threads
    /// may run on any of the shards' CPUs, for machines whose cores other processes share.
    pin: bool = true, "RINGBROKER_PIN", "Pin each shard's thread to its CPU (false: threads float over the shards' CPUs, for cores shared with other processes) [default: true]";
    node_id: i32 = 0, "RINGBROKER_NODE_ID", "This broker's node id [default: 0]";
    /// Broker-to-broker listener (raft messages and controller calls), HOST:PORT. Set with
    /// `controller_quorum_voters` to run as a member of a cluster; unset, the broker runs alone.
    cluster_listen: Option<String> = None, "RINGBROKER_CLUSTER_LISTEN", "Broker-to-broker listener, HOST:PORT (cluster mode, with --controller-quorum-voters) [default: none: the broker runs alone]";
    /// `controller.quorum.voters`: the metadata quorum, `ID@HOST:PORT,...`, each HOST:PORT a
    /// voter's `cluster_listen` address. Every broker of the cluster is listed here.
    controller_quorum_voters: String = String::new(), "RINGBROKER_CONTROLLER_QUORUM_VOTERS", "The metadata quorum's voters, ID@HOST:PORT,... (their cluster listeners) [default: none: the broker runs alone]";
    /// `default.replication.factor`: replicas of a topic created without a count (and of
    /// auto-created topics), at most the number of brokers.
    default_replication_factor: u32 = 1, "RINGBROKER_DEFAULT_REPLICATION_FACTOR", "Replicas of a topic created without a count, cluster mode [default: 1]";
    /// `min.insync.replicas`: copies an acks=all produce needs, a topic's own config over it.
    min_insync_replicas: u32 = 1, "RINGBROKER_MIN_INSYNC_REPLICAS", "Copies an acks=all produce needs, cluster mode (min.insync.replicas) [default: 1]";
    /// The raft clock of every replicated partition and of the metadata quorum: one tick.
    raft_tick_ms: u64 = 100, "RINGBROKER_RAFT_TICK_MS", "Raft's clock tick, cluster mode, ms [default: 100]";
    /// Ticks without a leader's heartbeat before a follower stands for election (randomised
    /// up to twice this); a leader heartbeats every tick.
    raft_election_ticks: u32 = 10, "RINGBROKER_RAFT_ELECTION_TICKS", "Ticks without a leader before an election, cluster mode (election timeout = ticks × raft_tick_ms, randomised up to twice) [default: 10]";
    /// `replica.lag.time.max.ms`: a follower not heard from for this long leaves the ISR.
    replica_lag_time_max_ms: u64 = 30_000, "RINGBROKER_REPLICA_LAG_TIME_MAX_MS", "A follower silent this long is out of sync, cluster mode (replica.lag.time.max.ms) [default: 30000]";
    /// `auto.leader.rebalance.enable`: a partition led by another replica than its preferred
    /// one (the first of its replicas) hands the leadership back once that is caught up.
    auto_leader_rebalance_enable: bool = true, "RINGBROKER_AUTO_LEADER_REBALANCE_ENABLE", "Hand each partition's leadership back to its preferred replica once that is in sync, cluster mode (auto.leader.rebalance.enable) [default: true]";
    /// `leader.imbalance.check.interval.seconds`: how often that is checked.
    leader_imbalance_check_interval_seconds: u64 = 300, "RINGBROKER_LEADER_IMBALANCE_CHECK_INTERVAL_SECONDS", "How often leaderships go back to preferred replicas, cluster mode, s (leader.imbalance.check.interval.seconds) [default: 300]";
    /// `broker.rack`: this broker's rack, told to clients and used to spread replicas.
    broker_rack: Option<String> = None, "RINGBROKER_BROKER_RACK", "This broker's rack, told to clients in Metadata and used to spread replicas [default: none]";
    flush: FlushPolicy = FlushPolicy::Always, "RINGBROKER_FLUSH", "Durability: always (fdatasync before ack), interval, os (never fsync) [default: always]";
    flush_interval_ms: u64 = 1000, "RINGBROKER_FLUSH_INTERVAL_MS", "With --flush interval: longest time between two fdatasyncs, ms [default: 1000]";
    flush_interval_bytes: u64 = 64 * 1024 * 1024, "RINGBROKER_FLUSH_INTERVAL_BYTES", "With --flush interval: most bytes written before an fdatasync [default: 64 MiB]";
    /// `log.segment.bytes`
    segment_bytes: u64 = 1 << 30, "RINGBROKER_SEGMENT_BYTES", "Roll a segment once it holds this many bytes [default: 1 GiB]";
    /// `log.roll.ms`
    segment_ms: u64 = 7 * 24 * 3600 * 1000, "RINGBROKER_SEGMENT_MS", "Roll a segment once its first record is this old, ms [default: 7 days]";
    /// `log.retention.bytes`; -1 keeps everything.
    retention_bytes: i64 = -1, "RINGBROKER_RETENTION_BYTES", "Delete old segments past this many bytes per partition, -1 = no limit [default: -1]", allow_hyphen_values;
    /// `log.retention.ms`; -1 keeps everything.
    retention_ms: i64 = 7 * 24 * 3600 * 1000, "RINGBROKER_RETENTION_MS", "Delete segments whose newest record is older than this, ms, -1 = forever [default: 7 days]", allow_hyphen_values;
    /// `log.retention.check.interval.ms`
    retention_check_interval_ms: u64 = 300_000, "RINGBROKER_RETENTION_CHECK_INTERVAL_MS", "How often retention runs, ms [default: 300000]";
    /// `log.cleaner.enable`: whether compacted topics are cleaned.
    log_cleaner_enable: bool = true, "RINGBROKER_LOG_CLEANER_ENABLE", "Clean compacted topics (log.cleaner.enable) [default: true]";
    /// `log.cleaner.backoff.ms`: how long a shard's cleaner sleeps when no log is due.
    log_cleaner_backoff_ms: u64 = 15_000, "RINGBROKER_LOG_CLEANER_BACKOFF_MS", "How often a shard's cleaner looks for a compacted log due for cleaning, ms [default: 15000]";
    /// `log.cleaner.dedupe.buffer.size`: memory for the cleaners' key maps, all shards together.
    log_cleaner_dedupe_buffer_size: u64 = 128 << 20, "RINGBROKER_LOG_CLEANER_DEDUPE_BUFFER_SIZE", "Memory for the cleaners' key maps, all shards together, bytes [default: 134217728]";
    /// `log.cleaner.io.max.bytes.per.second`: each shard's cleaner reads and writes at most
    /// this much; 0 sets no limit. Kafka sets none by default: its cleaner threads have cores
    /// of their own to run on, where a shard's cleaner shares its shard's core. Unlimited, a
    /// cleaning (200–400 MB/s) cost the p99 publish latency of the shard's other partitions
    /// 1.3–2.4× in medians of runs on two VMs; held to 100 MB/s, 0.88×, 0.98×, 1.12×, 1.31×
    /// (`bench/run.sh compaction`; bench/results/2026-12-06-cleaner-scheduling.md,
    /// 2026-12-07-cleaner-default-limit.md).
    log_cleaner_io_max_bytes_per_second: u64 = 100_000_000, "RINGBROKER_LOG_CLEANER_IO_MAX_BYTES_PER_SECOND", "Bytes a shard's cleaner reads and writes per second at most, 0 = no limit [default: 100000000]";
    /// `log.cleaner.min.cleanable.ratio`: the default `min.cleanable.dirty.ratio`.
    log_cleaner_min_cleanable_ratio: f64 = 0.5, "RINGBROKER_LOG_CLEANER_MIN_CLEANABLE_RATIO", "Dirty share of a compacted log that makes it due for cleaning, 0 to 1 [default: 0.5]";
    /// `log.cleaner.min.compaction.lag.ms`: the default `min.compaction.lag.ms`.
    log_cleaner_min_compaction_lag_ms: u64 = 0, "RINGBROKER_LOG_CLEANER_MIN_COMPACTION_LAG_MS", "Records newer than this are not compacted yet, ms [default: 0]";
    /// `log.cleaner.max.compaction.lag.ms`: the default `max.compaction.lag.ms`.
    log_cleaner_max_compaction_lag_ms: u64 = i64::MAX as u64, "RINGBROKER_LOG_CLEANER_MAX_COMPACTION_LAG_MS", "A dirty record older than this makes its log due for cleaning, ms [default: 9223372036854775807]";
    /// `log.cleaner.delete.retention.ms`: the default `delete.retention.ms`.
    log_cleaner_delete_retention_ms: u64 = 86_400_000, "RINGBROKER_LOG_CLEANER_DELETE_RETENTION_MS", "Tombstones stay this long after the cleaning that kept them, ms [default: 86400000]";
    /// `log.index.interval.bytes`: bytes of log between two sparse index entries.
    index_interval_bytes: u32 = 4096, "RINGBROKER_INDEX_INTERVAL_BYTES", "Log bytes between two sparse index entries [default: 4096]";
    /// `socket.request.max.bytes`: largest request frame accepted.
    max_request_bytes: u32 = 100 * 1024 * 1024, "RINGBROKER_MAX_REQUEST_BYTES", "Largest request frame accepted, bytes [default: 104857600]";
    /// `message.max.bytes`: largest record batch accepted.
    message_max_bytes: u32 = 1_048_588, "RINGBROKER_MESSAGE_MAX_BYTES", "Largest record batch accepted, bytes [default: 1048588]";
    /// `auto.create.topics.enable`
    auto_create_topics: bool = true, "RINGBROKER_AUTO_CREATE_TOPICS", "Create unknown topics on Metadata/Produce [default: true]";
    /// `num.partitions`: partitions of an auto-created topic.
    default_partitions: u32 = 1, "RINGBROKER_DEFAULT_PARTITIONS", "Partitions of an auto-created topic [default: 1]";
    /// Requests one connection may have in flight before the broker stops reading it.
    max_in_flight_per_connection: usize = 64, "RINGBROKER_MAX_IN_FLIGHT_PER_CONNECTION", "Pipelined requests one connection may have in flight before its reading pauses [default: 64]";
    /// `max.connections`: client connections open at once, broker-wide (all shards together).
    max_connections: u32 = i32::MAX as u32, "RINGBROKER_MAX_CONNECTIONS", "Client connections open at once, all shards together [default: 2147483647]";
    /// `max.connections.per.ip`: client connections open at once from one IP address,
    /// broker-wide. 0 refuses every IP not named in the overrides.
    max_connections_per_ip: u32 = i32::MAX as u32, "RINGBROKER_MAX_CONNECTIONS_PER_IP", "Client connections open at once from one IP address [default: 2147483647]";
    /// `max.connections.per.ip.overrides`: `IP:COUNT,IP:COUNT` caps replacing
    /// `max_connections_per_ip` for those addresses (IP addresses only, no host names).
    max_connections_per_ip_overrides: String = String::new(), "RINGBROKER_MAX_CONNECTIONS_PER_IP_OVERRIDES", "Per-IP caps replacing --max-connections-per-ip, e.g. 10.0.0.5:100,::1:20 [default: none]";
    /// `connections.max.idle.ms`: a connection that completes no request (and has none in
    /// flight) for this long is closed. Bytes that never make up a whole request do not count.
    /// `socket.send.buffer.bytes`: SO_SNDBUF of each client connection, Kafka's default;
    /// -1 leaves the kernel's autotuning. Measured on loopback (bench/results, null broker
    /// and fetch): autotuned send buffers of megabytes halve what sendfile moves, because a
    /// deep queue of page references per socket costs more than it saves.
    socket_send_buffer_bytes: i32 = 102_400, "RINGBROKER_SOCKET_SEND_BUFFER_BYTES", "SO_SNDBUF of client connections, bytes; -1 = the kernel's autotuning (socket.send.buffer.bytes) [default: 102400]";
    /// `socket.receive.buffer.bytes`: SO_RCVBUF of each client connection; -1 (the default
    /// here, where Kafka's is 102400) leaves the kernel's autotuning, which measured faster for
    /// produce.
    socket_receive_buffer_bytes: i32 = -1, "RINGBROKER_SOCKET_RECEIVE_BUFFER_BYTES", "SO_RCVBUF of client connections, bytes; -1 = the kernel's autotuning (socket.receive.buffer.bytes) [default: -1]";
    connections_max_idle_ms: u64 = 600_000, "RINGBROKER_CONNECTIONS_MAX_IDLE_MS", "Close a connection that completes no request for this long, ms [default: 600000]";
    /// `max.connection.creation.rate`: new connections a second, broker-wide; faster ones wait.
    max_connection_creation_rate: u64 = i32::MAX as u64, "RINGBROKER_MAX_CONNECTION_CREATION_RATE", "New connections a second, all shards together; faster ones wait [default: 2147483647]";
    /// `request_percentage` (Kafka's default client quota): percent of one shard's time
    /// that one client-id's requests may keep handlers busy, over all its connections.
    quota_request_percentage: u64 = crate::quota::UNLIMITED, "RINGBROKER_QUOTA_REQUEST_PERCENTAGE", "Percent of one shard's time a client-id's requests may take, all its connections (request_percentage) [default: unlimited]";
    // Kafka leaves this unbounded (-1); a bound is the point here. Room for five
    // requests of the largest size at once.
    /// `queued.max.request.bytes`: request bytes read and not yet answered, all connections
    /// together; past it connections stop reading (see `net::memory`).
    queued_max_request_bytes: u64 = 512 << 20, "RINGBROKER_QUEUED_MAX_REQUEST_BYTES", "Request bytes read and not yet answered, all connections together (queued.max.request.bytes) [default: 536870912]";
    /// Request bytes one connection may hold read and not yet answered.
    connection_max_request_bytes: u64 = 128 << 20, "RINGBROKER_CONNECTION_MAX_REQUEST_BYTES", "Request bytes one connection may hold read and not yet answered [default: 134217728]";
    /// `producer_byte_rate` (Kafka's default client quota): record bytes per second that
    /// one client-id may produce, over all its connections; 9223372036854775807 means none.
    quota_producer_byte_rate: u64 = crate::quota::UNLIMITED, "RINGBROKER_QUOTA_PRODUCER_BYTE_RATE", "Record bytes/s one client-id may produce, broker-wide [default: 9223372036854775807 = no quota]";
    /// `consumer_byte_rate`: record bytes per second that one client-id may fetch, likewise.
    quota_consumer_byte_rate: u64 = crate::quota::UNLIMITED, "RINGBROKER_QUOTA_CONSUMER_BYTE_RATE", "Record bytes/s one client-id may fetch, broker-wide [default: 9223372036854775807 = no quota]";
    /// Per-client-id quotas replacing the two above: `CLIENT_ID:producer=BYTES` or
    /// `CLIENT_ID:consumer=BYTES`, separated by commas (a client-id may appear twice).
    quota_client_overrides: String = String::new(), "RINGBROKER_QUOTA_CLIENT_OVERRIDES", "Per-client quotas, e.g. client-a:producer=1048576,client-b:consumer=2097152 [default: none]";
    /// Per-user quotas (KIP-55): `USER:producer=BYTES`, `USER:consumer=BYTES` or
    /// `USER:request=PERCENT`, separated by commas; they take precedence over client-id quotas.
    quota_user_overrides: String = String::new(), "RINGBROKER_QUOTA_USER_OVERRIDES", "Per-user quotas (KIP-55), e.g. alice:producer=1048576,bob:request=50 [default: none]";
    /// Send fetched records file→socket with sendfile. `false` reads them into memory and
    /// writes them, as a broker without zero-copy would (kept for measuring the difference).
    zero_copy_fetch: bool = true, "RINGBROKER_ZERO_COPY_FETCH", "Send fetched records with sendfile (false: read and write them, for comparison) [default: true]";
    /// `group.min.session.timeout.ms`
    group_min_session_timeout_ms: u64 = 6_000, "RINGBROKER_GROUP_MIN_SESSION_TIMEOUT_MS", "Smallest session timeout a group member may ask for, ms [default: 6000]";
    /// `group.max.session.timeout.ms`
    group_max_session_timeout_ms: u64 = 1_800_000, "RINGBROKER_GROUP_MAX_SESSION_TIMEOUT_MS", "Largest session timeout a group member may ask for, ms [default: 1800000]";
    /// `group.initial.rebalance.delay.ms`: how long the first rebalance of an empty group
    /// waits for more members.
    group_initial_rebalance_delay_ms: u64 = 3_000, "RINGBROKER_GROUP_INITIAL_REBALANCE_DELAY_MS", "How long the first rebalance of a new group waits for more members, ms [default: 3000]";
    /// `group.max.size`
    group_max_size: u32 = i32::MAX as u32, "RINGBROKER_GROUP_MAX_SIZE", "Most members one consumer group may have [default: 2147483647]";
    /// `offsets.retention.minutes`: committed offsets of an empty group are kept this long.
    offsets_retention_minutes: u64 = 7 * 24 * 60, "RINGBROKER_OFFSETS_RETENTION_MINUTES", "Keep committed offsets of an empty group this long, minutes [default: 10080]";
    /// `offsets.topic.segment.bytes`: `__consumer_offsets` rolls its segments at this size.
    offsets_topic_segment_bytes: u64 = 100 << 20, "RINGBROKER_OFFSETS_TOPIC_SEGMENT_BYTES", "Segment size of __consumer_offsets, bytes (its active segment is never compacted) [default: 104857600]";
    /// `offsets.retention.check.interval.ms`
    offsets_retention_check_interval_ms: u64 = 600_000, "RINGBROKER_OFFSETS_RETENTION_CHECK_INTERVAL_MS", "How often expired committed offsets are removed, ms [default: 600000]";
    /// `producer.id.expiration.ms`: idempotence state of a producer idle this long is dropped.
    producer_id_expiration_ms: i64 = 86_400_000, "RINGBROKER_PRODUCER_ID_EXPIRATION_MS", "Forget the idempotence state of a producer idle this long, ms [default: 86400000]";
    /// `max.incremental.fetch.session.cache.slots`: fetch sessions (KIP-227) the broker keeps,
    /// divided between the shards (see `fetch_session`); 0 turns sessions off.
    max_incremental_fetch_session_cache_slots: u32 = 1000, "RINGBROKER_MAX_INCREMENTAL_FETCH_SESSION_CACHE_SLOTS", "Fetch sessions kept, all shards together (max.incremental.fetch.session.cache.slots; 0: none) [default: 1000]";
    /// `min.incremental.fetch.session.eviction.ms`: a fetch session unused for longer is
    /// stale, and one used when older than this may give way to one with more partitions.
    min_incremental_fetch_session_eviction_ms: u64 = 120_000, "RINGBROKER_MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS", "Fetch sessions unused this long may be evicted, ms (min.incremental.fetch.session.eviction.ms) [default: 120000]";
    /// Admin HTTP listener serving Prometheus metrics at `/metrics`, HOST:PORT; "" or "off"
    /// disables it (Redpanda's admin API uses the same default port).
    admin_listen: String = "127.0.0.1:9644".into(), "RINGBROKER_ADMIN_LISTEN", "Admin HTTP listener for Prometheus metrics at /metrics, HOST:PORT (port 0 picks a free port), or \"off\" [default: 127.0.0.1:9644]";
    /// Log line format on stderr.
    log_format: LogFormat = LogFormat::Text, "RINGBROKER_LOG_FORMAT", "Log format on stderr: text or json [default: text]";
    /// Log filter directives, e.g. `info,ringbroker::net=debug`; `RUST_LOG` wins when set.
    log_level: String = "info".into(), "RINGBROKER_LOG_LEVEL", "Log filter, e.g. info,ringbroker::net=debug (RUST_LOG wins when set) [default: info]";
}

/// A setting that cannot be used, named as in the config file.
#[derive(Debug, thiserror::Error)]
#[error("invalid setting `{setting}`: {problem}")]
pub struct ConfigError {
    pub setting: &'static str,
    pub problem: String,
    /// What failed underneath, when something did: the file that could not be read, the
    /// TOML parser, the address lookup.
    pub source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl From<crate::listener::ListenerError> for ConfigError {
    fn from(e: crate::listener::ListenerError) -> ConfigError {
        let source = e.source.map(|s| Box::new(s) as Box<dyn std::error::Error + Send + Sync>);
        ConfigError { setting: e.setting, problem: e.problem, source }
    }
}

/// A setting refused for what it says.
pub(crate) fn bad(setting: &'static str, problem: impl Into<String>) -> ConfigError {
    ConfigError { setting, problem: problem.into(), source: None }
}

/// A setting refused because of `source`; `problem` says what was being done with it.
pub(crate) fn bad_because(
    setting: &'static str,
    problem: impl Into<String>,
    source: impl std::error::Error + Send + Sync + 'static,
) -> ConfigError {
    ConfigError { setting, problem: problem.into(), source: Some(Box::new(source)) }
}

impl Config {
    /// Defaults, then the file named by `--config`, then environment and flags.
    pub fn load(cli: &Flags) -> Result<Config, ConfigError> {
        let mut cfg = match &cli.config {
            Some(path) => Config::from_file(path)?,
            None => Config::default(),
        };
        cfg.overlay(cli);
        cfg.validate()?;
        Ok(cfg)
    }

    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| bad_because("config", format!("cannot read {}: {e}", path.display()), e))?;
        Config::from_toml(&text)
    }

    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        toml::from_str(text).map_err(|e| bad_because("config", format!("not valid TOML for ringbroker: {e}"), e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// README's settings tables and the declarations agree: every setting is in README, every
    /// key a table row names is a setting, and a row's flags are the settings' own.
    #[test]
    fn the_readme_documents_exactly_the_declared_settings() {
        let readme = include_str!("../../README.md");
        for name in Config::NAMES {
            assert!(readme.contains(&format!("`{name}`")), "setting {name} is not in README.md");
        }
        for line in readme.lines().filter(|l| l.starts_with("| `")) {
            let cells: Vec<&str> = line.split('|').collect();
            let keys: Vec<&str> = cells[1].split('`').skip(1).step_by(2).collect();
            let is_setting = |k: &str| k.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
            if !keys.iter().all(|k| is_setting(k)) {
                continue; // topic configs, the layout: other tables
            }
            for key in &keys {
                assert!(Config::NAMES.contains(key), "README.md's table names `{key}`, which is not a setting");
            }
            let flags: Vec<String> =
                cells[2].split('`').skip(1).step_by(2).filter(|f| f.starts_with("--")).map(str::to_string).collect();
            let expected: Vec<String> = keys.iter().map(|k| format!("--{}", k.replace('_', "-"))).collect();
            assert_eq!(flags, expected, "README.md's flags for {keys:?}");
        }
    }

    #[test]
    fn config_file_errors_keep_their_cause() {
        use std::error::Error;
        let e = Config::from_file(Path::new("/nonexistent/ringbroker.toml")).unwrap_err();
        assert_eq!(e.setting, "config");
        assert!(e.problem.contains("cannot read /nonexistent/ringbroker.toml"), "{e}");
        let io = e.source().and_then(|s| s.downcast_ref::<std::io::Error>());
        assert_eq!(io.map(std::io::Error::kind), Some(std::io::ErrorKind::NotFound));
        let e = Config::from_toml("flush = 3").unwrap_err();
        assert!(e.source().is_some_and(|s| s.is::<toml::de::Error>()), "{e}");
    }

    #[test]
    fn toml_overrides_defaults_and_unknown_keys_are_refused() {
        let c = Config::from_toml("flush = \"os\"\nsegment_bytes = 2048\n").unwrap();
        assert_eq!(c.flush, FlushPolicy::Os);
        assert_eq!(c.segment_bytes, 2048);
        assert_eq!(c.listen, "127.0.0.1:9092");
        let e = Config::from_toml("segmnt_bytes = 1").unwrap_err();
        assert!(e.to_string().contains("segmnt_bytes"), "{e}");
    }
}
