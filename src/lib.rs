//! Ringbroker: a Kafka-wire-compatible broker, thread-per-core on glommio (io_uring).
//!
//! Layering, top to bottom: `server` (startup, each shard's serve loop) joins `net`
//! connections to `api` dispatch; `api` works through `shard` (routing to home shards,
//! the mesh, running controller requests); below are `controller` (the metadata state
//! machine over its log), `log`, `group`, `metadata`, `storage`, then `protocol`, `config`
//! and `sys` (the only module with `unsafe`).

pub mod api;
pub mod auth;
pub mod cli;
pub mod client;
pub mod config;
pub mod controller;
pub mod error;
pub mod group;
pub mod listener;
pub mod log;
pub mod metadata;
pub mod metrics;
pub mod net;
pub mod placement;
pub mod producer;
pub mod protocol;
pub mod quota;
pub mod server;
pub mod shard;
pub mod storage;
pub mod sys;
pub mod tune;
