//! RLIMIT_MEMLOCK and RLIMIT_NOFILE. Limits belong to a process, not to a file, so they sit
//! behind [`Rlimits`]: the real one asks the kernel about this process, tests pass a fake.
//!
//! The broker raises its own soft limits to the hard ones at start (as the JVM does for
//! Kafka), so what counts is the hard limit, which is set where the broker is started:
//! `LimitMEMLOCK=`/`LimitNOFILE=` in its systemd unit (`tuning/ringbroker.service`) or
//! `/etc/security/limits.d/` for login sessions (`tuning/limits.d/ringbroker.conf`). No
//! process can raise another's limits, so these findings have no fix to apply; run `check`
//! the way the broker runs.

use std::io;

use super::Finding;

/// "No limit" (RLIM_INFINITY).
pub const UNLIMITED: u64 = u64::MAX;

/// Bytes glommio registers per executor for io_uring buffers; each executor pins 3× this
/// (one per ring).
const IO_MEMORY_PER_EXECUTOR: u64 = crate::placement::IO_MEMORY as u64;

/// Room for the rings themselves (submission and completion arrays of 3 rings), which
/// kernels before 5.12 charge to RLIMIT_MEMLOCK too; they take well under this.
const RING_ALLOWANCE: u64 = 512 * 1024;

/// Locked memory wanted per shard (4 MiB): pinned buffers plus rings, doubled because
/// io_uring charges the *user's* locked total against the limit, so a restarting broker
/// overlapping the old one, or a second broker under the same user, must fit too.
pub const MEMLOCK_PER_SHARD: u64 = 2 * (3 * IO_MEMORY_PER_EXECUTOR + RING_ALLOWANCE);

/// Open files wanted: each connection is one descriptor and each log segment holds up to
/// three (log, offset index, time index), so tens of thousands of partitions and clients add
/// up fast. 1,048,576 is what Kafka's and Redpanda's packages set, and the kernel's default
/// `fs.nr_open`: the most setrlimit will grant without raising that sysctl too.
pub const NOFILE_TARGET: u64 = 1 << 20;

/// A process resource limit the broker cares about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    Memlock,
    Nofile,
}

impl Limit {
    pub fn name(self) -> &'static str {
        match self {
            Limit::Memlock => "RLIMIT_MEMLOCK",
            Limit::Nofile => "RLIMIT_NOFILE",
        }
    }

    /// Unit of the limit, for showing values.
    pub fn unit(self) -> &'static str {
        match self {
            Limit::Memlock => "bytes",
            Limit::Nofile => "files",
        }
    }

    /// Where to raise it for good. Memlock has no value that fits every shard count, so the
    /// advice is no cap; open files get the fixed target.
    fn persist(self) -> String {
        let (unit, conf) = match self {
            Limit::Memlock => ("LimitMEMLOCK=infinity".to_string(), "memlock unlimited".to_string()),
            Limit::Nofile => (format!("LimitNOFILE={NOFILE_TARGET}"), format!("nofile {NOFILE_TARGET}")),
        };
        format!(
            "set {unit} in the broker's systemd unit, or `<user> - {conf}` in /etc/security/limits.d/ (see tuning/)"
        )
    }

    fn resource(self) -> nix::sys::resource::Resource {
        match self {
            Limit::Memlock => nix::sys::resource::Resource::RLIMIT_MEMLOCK,
            Limit::Nofile => nix::sys::resource::Resource::RLIMIT_NOFILE,
        }
    }
}

/// The limits wanted for `shards` shards.
pub fn targets(shards: usize) -> [(Limit, u64); 2] {
    [(Limit::Memlock, MEMLOCK_PER_SHARD * shards.max(1) as u64), (Limit::Nofile, NOFILE_TARGET)]
}

/// Reads resource limits ([`UNLIMITED`] for none).
pub trait Rlimits {
    /// (soft, hard)
    fn get(&self, limit: Limit) -> io::Result<(u64, u64)>;
}

/// The limits of this process.
pub struct ProcessRlimits;

impl Rlimits for ProcessRlimits {
    fn get(&self, limit: Limit) -> io::Result<(u64, u64)> {
        nix::sys::resource::getrlimit(limit.resource()).map_err(io::Error::from)
    }
}

/// "unlimited", "8 MiB" or "1024 files".
pub fn show(v: u64, unit: &str) -> String {
    match (v, unit) {
        (UNLIMITED, _) => "unlimited".into(),
        (v, "bytes") if v % (1 << 20) == 0 => format!("{} MiB", v >> 20),
        (v, "bytes") if v % 1024 == 0 => format!("{} KiB", v >> 10),
        (v, unit) => format!("{v} {unit}"),
    }
}

pub fn check(rlimits: &dyn Rlimits, shards: usize) -> Vec<Finding> {
    targets(shards).into_iter().map(|(limit, want)| check_one(rlimits, limit, want)).collect()
}

fn check_one(rlimits: &dyn Rlimits, limit: Limit, want: u64) -> Finding {
    let name = limit.name();
    let (soft, hard) = match rlimits.get(limit) {
        Ok(v) => v,
        Err(e) => return Finding::failed("limits", name, format!("getrlimit: {e}")),
    };
    let s = |v| show(v, limit.unit());
    let persist = limit.persist();
    if soft >= want {
        Finding::ok("limits", name, format!("soft {}, hard {} (want >= {})", s(soft), s(hard), s(want)))
    } else if hard >= want {
        let detail = format!(
            "soft {} < {}, but the broker raises its soft limit to the hard {} at start",
            s(soft),
            s(want),
            s(hard)
        );
        Finding::ok("limits", name, detail)
    } else {
        let detail = format!("soft {}, hard {}, want >= {}: {persist}", s(soft), s(hard), s(want));
        Finding::failed("limits", name, detail)
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use std::cell::RefCell;

    /// Limits held in memory: soft and hard per limit.
    pub struct FakeRlimits(pub RefCell<[(u64, u64); 2]>);

    impl FakeRlimits {
        pub fn new(memlock: (u64, u64), nofile: (u64, u64)) -> FakeRlimits {
            FakeRlimits(RefCell::new([memlock, nofile]))
        }
    }

    impl Rlimits for FakeRlimits {
        fn get(&self, limit: Limit) -> io::Result<(u64, u64)> {
            Ok(self.0.borrow()[limit as usize])
        }
    }

    fn status(f: &[Finding], name: &str) -> super::super::Status {
        f.iter().find(|x| x.setting == name).unwrap().status
    }

    #[test]
    fn a_limit_already_high_enough_is_ok() {
        let r = FakeRlimits::new((UNLIMITED, UNLIMITED), (NOFILE_TARGET * 2, NOFILE_TARGET * 2));
        let f = check(&r, 8);
        assert!(f.iter().all(|x| x.status == super::super::Status::Ok), "{f:?}");
    }

    #[test]
    fn a_low_soft_limit_under_a_high_enough_hard_one_is_ok_as_the_broker_raises_it() {
        let r = FakeRlimits::new((64 << 10, UNLIMITED), (1024, 4 * NOFILE_TARGET));
        let f = check(&r, 4);
        for name in ["RLIMIT_NOFILE", "RLIMIT_MEMLOCK"] {
            assert_eq!(status(&f, name), super::super::Status::Ok, "{f:?}");
        }
        assert!(f.iter().all(|x| x.fixes.is_empty() && x.detail.contains("raises its soft limit")), "{f:?}");
    }

    /// The files operators install must grant what the tuner wants.
    #[test]
    fn the_shipped_limits_files_meet_the_targets() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tuning");
        let conf = std::fs::read_to_string(format!("{dir}/limits.d/ringbroker.conf")).unwrap();
        let item = |name: &str| -> String {
            let line = conf.lines().find(|l| !l.starts_with('#') && l.split_whitespace().nth(2) == Some(name));
            line.unwrap_or_else(|| panic!("no {name} line")).split_whitespace().nth(3).unwrap().to_string()
        };
        assert_eq!(item("nofile"), NOFILE_TARGET.to_string());
        assert_eq!(item("memlock"), "unlimited", "memlock grows with the shard count: no number fits all");
        let unit = std::fs::read_to_string(format!("{dir}/ringbroker.service")).unwrap();
        assert!(unit.lines().any(|l| l == format!("LimitNOFILE={NOFILE_TARGET}")), "{unit}");
        assert!(unit.lines().any(|l| l == "LimitMEMLOCK=infinity"), "{unit}");
    }

    #[test]
    fn a_low_hard_limit_fails_with_where_to_raise_it() {
        let r = FakeRlimits::new((8 << 20, 8 << 20), (1024, 4096));
        let f = check(&r, 4);
        assert_eq!(status(&f, "RLIMIT_MEMLOCK"), super::super::Status::Failed);
        assert!(f[0].detail.contains("LimitMEMLOCK=infinity"), "{}", f[0].detail);
        assert!(f[1].detail.contains("LimitNOFILE=1048576") && f[1].detail.contains("limits.d"), "{}", f[1].detail);
        assert!(f[0].detail.contains("want >= 16 MiB"), "memlock scales with shards: {}", f[0].detail);
    }
}
