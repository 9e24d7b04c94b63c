//! Broker faults (not Kafka error codes, which are data inside responses). Each variant says
//! what failed and, where it can, what to change.

use std::path::PathBuf;

fn no_space_advice(e: &std::io::Error) -> &'static str {
    if crate::storage::is_no_space(e) {
        " (the data disk is full: free space or add disk; appends resume when it has room)"
    } else {
        ""
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error("storage error at {path}: {source}{}", no_space_advice(source))]
    Storage { path: PathBuf, source: std::io::Error },
    #[error("cannot bind the listener on {addr}: {source}")]
    Bind { addr: String, source: std::io::Error },
    #[error("shard {shard} on CPU {cpu} failed to start: {reason}")]
    ShardSpawn { shard: usize, cpu: usize, reason: String },
    #[error("metadata file {path}: {reason}")]
    Metadata { path: PathBuf, reason: String },
}

impl BrokerError {
    /// Whether this is a storage error that freeing disk space cures.
    pub fn is_no_space(&self) -> bool {
        matches!(self, BrokerError::Storage { source, .. } if crate::storage::is_no_space(source))
    }
}
