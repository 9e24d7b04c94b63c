//! RLIMIT_MEMLOCK and RLIMIT_NOFILE. Limits belong to a process, not to a file, so they sit
//! behind [`Rlimits`]: the real one asks the kernel about this process, tests pass a fake.
//!
//! `apply` can only raise the soft limit of the `ringbroker tune` process itself (and what it
//! starts). What the broker gets is set where it is started: `LimitMEMLOCK=`/`LimitNOFILE=` in
//! its systemd unit (`tuning/ringbroker.service`) or `/etc/security/limits.d/` for login
//! sessions (`tuning/limits.d/ringbroker.conf`). So run `check` the way the broker runs.

use std::io;

use super::{Finding, Fix};

/// "No limit" (RLIM_INFINITY).
pub const UNLIMITED: u64 = u64::MAX;

/// Bytes glommio registers per executor for io_uring buffers; each executor pins 3× this
/// (one per ring). Must match `io_memory` in `server.rs`.
const IO_MEMORY_PER_EXECUTOR: u64 = 512 * 1024;

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

/// Reads and raises resource limits ([`UNLIMITED`] for none).
pub trait Rlimits {
    /// (soft, hard)
    fn get(&self, limit: Limit) -> io::Result<(u64, u64)>;
    /// Sets the soft limit, keeping the hard one.
    fn set_soft(&self, limit: Limit, soft: u64) -> io::Result<()>;
}

/// The limits of this process.
pub struct ProcessRlimits;

impl Rlimits for ProcessRlimits {
    fn get(&self, limit: Limit) -> io::Result<(u64, u64)> {
        nix::sys::resource::getrlimit(limit.resource()).map_err(io::Error::from)
    }

    fn set_soft(&self, limit: Limit, soft: u64) -> io::Result<()> {
        let (_, hard) = self.get(limit)?;
        nix::sys::resource::setrlimit(limit.resource(), soft, hard).map_err(io::Error::from)
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
        let detail = format!("soft {} < {}; hard {} allows raising it", s(soft), s(want), s(hard));
        Finding::change("limits", name, detail, vec![Fix::RaiseSoftLimit { limit, to: hard }])
            .with_caveat(format!("raised for this process only: {persist}"))
    } else {
        let detail = format!("soft {}, hard {}, want >= {}: {persist}", s(soft), s(hard), s(want));
        Finding::failed("limits", name, detail)
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use std::cell::RefCell;

    /// Limits held in memory: soft and hard per limit; `set_soft` obeys the kernel's rule
    /// that an unprivileged soft limit may not pass the hard one.
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

        fn set_soft(&self, limit: Limit, soft: u64) -> io::Result<()> {
            let mut all = self.0.borrow_mut();
            if soft > all[limit as usize].1 {
                return Err(io::Error::from_raw_os_error(libc::EPERM));
            }
            all[limit as usize].0 = soft;
            Ok(())
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
    fn a_low_soft_limit_under_a_high_hard_one_is_raised_to_the_hard_one() {
        let r = FakeRlimits::new((64 << 10, UNLIMITED), (1024, 4 * NOFILE_TARGET));
        let f = check(&r, 4);
        assert_eq!(status(&f, "RLIMIT_NOFILE"), super::super::Status::NeedsChange);
        assert!(f[1].fixes.contains(&Fix::RaiseSoftLimit { limit: Limit::Nofile, to: 4 * NOFILE_TARGET }));
        assert!(f[0].fixes.contains(&Fix::RaiseSoftLimit { limit: Limit::Memlock, to: UNLIMITED }));
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
