//! Kernel settings under `/proc/sys`. The table below is the one source of the targets:
//! `tuning/sysctl.d/60-ringbroker.conf` repeats it for boot time, and a test keeps the two equal.

use std::path::PathBuf;

use super::fs::{missing, Fs};
use super::{Finding, Fix};

/// Which way is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    AtLeast(u64),
    AtMost(u64),
}

impl Want {
    pub fn target(self) -> u64 {
        match self {
            Want::AtLeast(v) | Want::AtMost(v) => v,
        }
    }

    fn met_by(self, v: u64) -> bool {
        match self {
            Want::AtLeast(t) => v >= t,
            Want::AtMost(t) => v <= t,
        }
    }
}

impl std::fmt::Display for Want {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Want::AtLeast(v) => write!(f, ">= {v}"),
            Want::AtMost(v) => write!(f, "<= {v}"),
        }
    }
}

/// (key, target). Why each:
pub const SYSCTLS: &[(&str, Want)] = &[
    // io_uring takes no aio contexts, but Seastar software (Redpanda, ScyllaDB) sharing the
    // host does, and fails to start when the pool runs out; rpk's aio_events tuner sets this
    // value. It is a cap, not a reservation, so raising it costs nothing.
    ("fs.aio-max-nr", Want::AtLeast(1_048_576)),
    // System-wide open files: the broker alone may hold RLIMIT_NOFILE (1,048,576) of them.
    ("fs.file-max", Want::AtLeast(2_097_152)),
    // Caps every listen backlog. glommio asks for 1024 per shard listener; kernels before
    // 5.4 default to 128 and cut that silently, dropping SYNs when all clients reconnect
    // after a restart. 4096 is the 5.4+ default and Redpanda's value.
    ("net.core.somaxconn", Want::AtLeast(4096)),
    // Half-open connections kept per listener during the same reconnect storms.
    ("net.ipv4.tcp_max_syn_backlog", Want::AtLeast(4096)),
    // A shard is one thread on one core: if any of its memory is swapped out, every
    // connection and partition on that core stalls on the fault. 1 swaps only to avoid the
    // OOM killer (Kafka's and Redpanda's advice); the page cache, which serves fetches,
    // is reclaimed first.
    ("vm.swappiness", Want::AtMost(1)),
    // RFS's global flow table (the `net` tuner sets each queue's share): a connection's
    // packets are processed on the CPU of the shard that reads it. 32768 is the kernel
    // documentation's suggestion for a moderately loaded server.
    ("net.core.rps_sock_flow_entries", Want::AtLeast(32_768)),
];

/// `/proc/sys/net/core/somaxconn` for `net.core.somaxconn`.
pub fn path(key: &str) -> PathBuf {
    PathBuf::from("/proc/sys").join(key.replace('.', "/"))
}

/// The target of a key in [`SYSCTLS`].
pub fn want(key: &str) -> Want {
    SYSCTLS.iter().find(|(k, _)| *k == key).map(|(_, w)| *w).expect("key is in SYSCTLS")
}

pub fn check(fs: &dyn Fs) -> Vec<Finding> {
    SYSCTLS.iter().map(|&(key, want)| check_one(fs, key, want)).collect()
}

fn check_one(fs: &dyn Fs, key: &str, want: Want) -> Finding {
    let path = path(key);
    let text = match fs.read(&path) {
        Ok(t) => t,
        Err(e) if missing(&e) => {
            return Finding::failed("sysctl", key, format!("{e}: this kernel lacks the setting (module not loaded?)"))
        }
        Err(e) => return Finding::failed("sysctl", key, e.to_string()),
    };
    let Ok(value) = text.parse::<u64>() else {
        return Finding::failed("sysctl", key, format!("{}: `{text}` is not a number", fs.shown(&path).display()));
    };
    if want.met_by(value) {
        Finding::ok("sysctl", key, format!("is {value} (want {want})"))
    } else {
        let fix = Fix::Write { path, value: want.target().to_string() };
        Finding::change("sysctl", key, format!("is {value}, want {want}"), vec![fix])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tune::testing::Tree;
    use crate::tune::Status;

    #[test]
    fn values_off_target_are_found_and_better_ones_left_alone() {
        let t = Tree::new();
        t.file("proc/sys/vm/swappiness", "60");
        t.file("proc/sys/net/core/somaxconn", "65535"); // better than 4096: keep
        t.file("proc/sys/fs/aio-max-nr", "65536");
        t.file("proc/sys/fs/file-max", "9223372036854775807");
        t.file("proc/sys/net/ipv4/tcp_max_syn_backlog", "4096");
        t.file("proc/sys/net/core/rps_sock_flow_entries", "0");
        let f = check(&t.fs());
        let by = |k: &str| f.iter().find(|x| x.setting == k).unwrap();
        assert_eq!(by("vm.swappiness").status, Status::NeedsChange);
        assert_eq!(by("vm.swappiness").detail, "is 60, want <= 1");
        assert_eq!(by("vm.swappiness").fixes, vec![Fix::Write { path: path("vm.swappiness"), value: "1".into() }]);
        assert_eq!(by("net.core.somaxconn").status, Status::Ok);
        assert_eq!(by("fs.file-max").status, Status::Ok);
        assert_eq!(by("net.ipv4.tcp_max_syn_backlog").status, Status::Ok);
        assert_eq!(by("fs.aio-max-nr").status, Status::NeedsChange);
        assert_eq!(by("net.core.rps_sock_flow_entries").status, Status::NeedsChange);
    }

    #[test]
    fn a_missing_sysctl_fails_naming_its_file() {
        let t = Tree::new();
        let f = check(&t.fs());
        let aio = f.iter().find(|x| x.setting == "fs.aio-max-nr").unwrap();
        assert_eq!(aio.status, Status::Failed);
        assert!(aio.detail.contains(&t.shown("proc/sys/fs/aio-max-nr")), "{}", aio.detail);
    }

    /// The drop-in file operators install must set exactly the tuner's targets.
    #[test]
    fn the_sysctl_d_file_matches_the_table() {
        let conf = concat!(env!("CARGO_MANIFEST_DIR"), "/tuning/sysctl.d/60-ringbroker.conf");
        let text = std::fs::read_to_string(conf).unwrap();
        let mut seen: Vec<(String, u64)> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(|l| {
                let (k, v) = l.split_once('=').unwrap_or_else(|| panic!("`{l}` is not key = value"));
                (k.trim().to_string(), v.trim().parse().unwrap())
            })
            .collect();
        let mut table: Vec<(String, u64)> = SYSCTLS.iter().map(|(k, w)| (k.to_string(), w.target())).collect();
        seen.sort();
        table.sort();
        assert_eq!(seen, table);
    }
}
