//! Broker faults (not Kafka error codes, which are data inside responses). Each variant says
//! what failed and, where it can, what to change.

use std::path::{Path, PathBuf};

fn no_space_advice(e: &std::io::Error) -> &'static str {
    if crate::storage::is_no_space(e) {
        " (the data disk is full: free space or add disk; appends resume when it has room)"
    } else {
        ""
    }
}

/// What to change when an executor cannot start: io_uring's locked memory, or io_uring
/// itself missing or forbidden.
fn spawn_advice(e: &std::io::Error) -> String {
    let lower = e.to_string().to_lowercase();
    if lower.contains("memlock") || lower.contains("cannot allocate memory") || lower.contains("enomem") {
        format!(
            "; io_uring needs locked memory ({} KiB per shard, RLIMIT_MEMLOCK is {}): raise it with `ulimit -l unlimited`, \
             LimitMEMLOCK=infinity in a systemd unit, or run with CAP_IPC_LOCK",
            3 * crate::placement::IO_MEMORY / 1024,
            crate::sys::memlock_limit().map_or("unlimited".into(), |l| format!("{} KiB", l / 1024))
        )
    } else if lower.contains("not implemented")
        || lower.contains("operation not permitted")
        || lower.contains("function not implemented")
    {
        "; io_uring is unavailable: Linux 5.8 or newer is needed, with sysctl kernel.io_uring_disabled=0 \
         and no seccomp profile blocking io_uring_setup (containers)"
            .into()
    } else {
        String::new()
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
    #[error("shard {shard} on CPU {cpu} failed to start: {source}{}", spawn_advice(source))]
    ShardSpawn { shard: usize, cpu: usize, source: std::io::Error },
    /// A step of the broker's start other than a shard's own.
    #[error("cannot {step}: {source}")]
    Startup { step: &'static str, source: std::io::Error },
    #[error("a shard exited during startup")]
    ShardExited,
    #[error("metadata file {path}: {source}")]
    Metadata { path: PathBuf, source: MetadataFault },
}

/// What is wrong with a metadata file (the catalog snapshot, the metadata log).
#[derive(Debug, thiserror::Error)]
pub enum MetadataFault {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("unreadable ({0}); restore it from a backup or move the data directory aside")]
    Unreadable(#[from] serde_json::Error),
    #[error("has no `{0}`; restore it from a backup or move the data directory aside")]
    Missing(&'static str),
}

/// A failed file operation on `path`, as the broker reports it.
pub fn storage(path: &Path, source: std::io::Error) -> BrokerError {
    BrokerError::Storage { path: path.to_path_buf(), source }
}

impl BrokerError {
    /// Shard `shard`'s executor on `cpu` could not start. glommio's error is not `Sync`, so
    /// it is kept as the OS error it wraps where there is one (the advice reads its code),
    /// or as glommio's description.
    pub fn shard_spawn(shard: usize, cpu: usize, e: glommio::GlommioError<()>) -> BrokerError {
        let source = match e {
            glommio::GlommioError::IoError(e) => e,
            other => std::io::Error::other(other.to_string()),
        };
        BrokerError::ShardSpawn { shard, cpu, source }
    }

    /// Whether this is a storage error that freeing disk space cures.
    pub fn is_no_space(&self) -> bool {
        matches!(self, BrokerError::Storage { source, .. } if crate::storage::is_no_space(source))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error;

    #[test]
    fn executor_failures_say_what_to_change_and_keep_the_os_error() {
        let e = BrokerError::shard_spawn(1, 3, std::io::Error::from_raw_os_error(libc::ENOMEM).into());
        let text = e.to_string();
        assert!(text.starts_with("shard 1 on CPU 3 failed to start: "), "{text}");
        assert!(text.contains("ulimit -l unlimited"), "{text}");
        let os = e.source().and_then(|s| s.downcast_ref::<std::io::Error>()).and_then(|e| e.raw_os_error());
        assert_eq!(os, Some(libc::ENOMEM));
        let e = BrokerError::shard_spawn(0, 0, std::io::Error::from_raw_os_error(libc::ENOSYS).into());
        assert!(e.to_string().contains("Linux 5.8 or newer"), "{e}");
        let e = BrokerError::shard_spawn(0, 0, std::io::Error::from_raw_os_error(libc::EBADF).into());
        assert!(!e.to_string().contains("io_uring"), "no advice that does not apply: {e}");
    }

    #[test]
    fn metadata_faults_keep_their_source() {
        let json = serde_json::from_slice::<serde_json::Value>(b"{").unwrap_err();
        let e = BrokerError::Metadata { path: "/d/catalog.json".into(), source: json.into() };
        assert!(e.to_string().contains("/d/catalog.json: unreadable ("), "{e}");
        assert!(e.to_string().contains("restore it from a backup"), "{e}");
        let fault = e.source().expect("a source");
        assert!(fault.source().is_some_and(|s| s.is::<serde_json::Error>()), "the JSON error is kept");
    }
}
