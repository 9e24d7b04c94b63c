//! Broker faults (not Kafka error codes, which are data inside responses). Each variant says
//! what failed and, where it can, what to change.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error("storage error at {path}: {reason}")]
    Storage { path: PathBuf, reason: String },
    #[error("cannot bind the listener on {addr}: {source}")]
    Bind { addr: String, source: std::io::Error },
    #[error("shard {shard} on CPU {cpu} failed to start: {reason}")]
    ShardSpawn { shard: usize, cpu: usize, reason: String },
    #[error("metadata file {path}: {reason}")]
    Metadata { path: PathBuf, reason: String },
}
