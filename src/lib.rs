//! Ringbroker: a Kafka-wire-compatible broker, thread-per-core on glommio (io_uring).
//!
//! Layering, top to bottom: a module imports only from modules on lower lines, never from
//! its own line or above (tests/ops/layers.rs reads this list and checks every import).
//! - `main`: the binary.
//! - `cli`: the admin commands, speaking Kafka through `client`.
//! - `tune`: OS checks and tuning for the broker's CPUs and data directory.
//! - `server`: startup, the accept loop, the request glue (a frame in, `api` dispatch, the
//!   response out) and the timers.
//! - `api`: one module per Kafka API; a handler sees the broker only through `api::Broker`.
//! - `shard`: what `api::Broker` runs on: routing to home shards over the mesh, this shard's
//!   copy of the catalog, group calls to coordinators and requests to the controller.
//! - `cluster`: replication with raft-rs (DESIGN §9): raft entries as the partition log's
//!   batches, one replica per group driven over its log, the broker-to-broker transport, and
//!   the deterministic simulation replicas are tested in.
//! - `controller`: the metadata state machine over its log.
//! - `log`, `group`, `fetch_session`: partitions; consumer-group coordinators, which append
//!   through `group::OffsetsLog` (`shard` implements it with partitions); a shard's cache of
//!   fetch sessions (KIP-227).
//! - `metadata`: the catalog.
//! - `net`, `auth`: frames and connections (`net` knows a `Session` trait, nothing of
//!   `auth` or `api`); principals, SASL and ACLs.
//! - `metrics`, `client`, `producer`: the probe and its exposition; a Kafka client; idempotent
//!   producer state.
//! - `error`: the broker's startup errors (a memlock failure names `placement`'s pinned memory).
//! - `placement`: shards to CPUs and NUMA nodes.
//! - `storage`: every file operation of the broker, one seam for injected faults.
//! - `config`: the settings.
//! - `quota`, `listener`: client quotas; listener specs.
//! - `loggers`: log levels read and changed at run time (Kafka's BROKER_LOGGER resource).
//! - `protocol`: the wire format.
//! - `rng`: splitmix64, the one small pseudo-random generator (fetch-session ids, the Raft
//!   simulation).
//! - `sys`: the only module with `unsafe`.

pub mod api;
pub mod auth;
pub mod cli;
pub mod client;
pub mod cluster;
pub mod config;
pub mod controller;
pub mod error;
pub mod fetch_session;
pub mod group;
pub mod listener;
pub mod log;
pub mod loggers;
pub mod metadata;
pub mod metrics;
pub mod net;
pub mod placement;
pub mod producer;
pub mod protocol;
pub mod quota;
pub mod rng;
pub mod server;
pub mod shard;
pub mod storage;
pub mod sys;
pub mod tune;
