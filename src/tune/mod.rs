//! `ringbroker tune`: checks and fixes the OS settings a thread-per-core io_uring broker
//! depends on, in the manner of Redpanda's `rpk redpanda tune`.
//!
//! Every tuner only *checks*: it reads the machine (through [`fs::Fs`] and
//! [`limits::Rlimits`]) and returns [`Finding`]s, each carrying the [`Fix`]es that would put
//! it right. The three modes are built on that one pass:
//!
//! - `check` reports the findings and changes nothing;
//! - `render` turns the fixes into a shell script and changes nothing;
//! - `apply` performs the fixes, checks again, and reports each setting as ok (untouched),
//!   changed, needs-reboot or failed — a fix counts only if the re-check agrees.
//!
//! Tuners never lower a value that is already better than their target.
//! `tuning/README.md` explains each setting for operators.

mod clock;
mod cmd;
mod cpufreq;
mod disk;
pub mod fs;
pub mod limits;
mod net;
mod report;
mod script;
pub mod sysctl;
#[cfg(test)]
mod testing;
mod thp;

use std::path::{Path, PathBuf};

use serde::Serialize;

pub use cmd::{run, TuneArgs};

/// The state of one setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Already at or better than the target; left alone.
    Ok,
    /// Off target; `apply` would fix it (check and render only).
    NeedsChange,
    /// `apply` fixed it and the re-check agrees.
    Changed,
    /// Fixed for now; a kernel command-line change and a reboot keep it.
    NeedsReboot,
    /// Cannot be read, cannot be fixed by a write, or the fix did not hold.
    Failed,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::NeedsChange => "needs-change",
            Status::Changed => "changed",
            Status::NeedsReboot => "needs-reboot",
            Status::Failed => "failed",
        }
    }
}

/// One change that would put a finding right.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fix {
    /// Write `value` to a `/proc` or `/sys` file (a system path, below the root).
    Write { path: PathBuf, value: String },
}

/// What one tuner found about one setting.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub tuner: &'static str,
    pub setting: String,
    pub status: Status,
    /// One line: the value found and the value wanted, or what went wrong and what to do.
    pub detail: String,
    #[serde(skip)]
    pub fixes: Vec<Fix>,
    /// Said after a successful fix: what the fix does not cover.
    #[serde(skip)]
    pub caveat: Option<String>,
    /// A successful fix still leaves the setting to a reboot (see [`Status::NeedsReboot`]).
    #[serde(skip)]
    pub reboot: bool,
}

impl Finding {
    fn new(tuner: &'static str, setting: impl Into<String>, status: Status, detail: impl Into<String>) -> Finding {
        Finding {
            tuner,
            setting: setting.into(),
            status,
            detail: detail.into(),
            fixes: Vec::new(),
            caveat: None,
            reboot: false,
        }
    }

    pub fn ok(tuner: &'static str, setting: impl Into<String>, detail: impl Into<String>) -> Finding {
        Finding::new(tuner, setting, Status::Ok, detail)
    }

    pub fn failed(tuner: &'static str, setting: impl Into<String>, detail: impl Into<String>) -> Finding {
        Finding::new(tuner, setting, Status::Failed, detail)
    }

    /// Off target, put right by `fixes`.
    pub fn change(
        tuner: &'static str,
        setting: impl Into<String>,
        detail: impl Into<String>,
        fixes: Vec<Fix>,
    ) -> Finding {
        Finding { fixes, ..Finding::new(tuner, setting, Status::NeedsChange, detail) }
    }
}

/// The tuners, named as on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Tuner {
    /// RLIMIT_MEMLOCK and RLIMIT_NOFILE of this process
    Limits,
    /// kernel settings under /proc/sys
    Sysctl,
    /// transparent hugepages
    Thp,
    /// CPU frequency governor of the shard CPUs
    Cpufreq,
    /// NIC IRQ affinity, RPS, RFS and XPS on the shard CPUs
    Net,
    /// I/O scheduler and merges of the data directory's disk
    Disk,
    /// clocksource
    Clock,
}

impl Tuner {
    pub const ALL: [Tuner; 7] =
        [Tuner::Limits, Tuner::Sysctl, Tuner::Thp, Tuner::Cpufreq, Tuner::Net, Tuner::Disk, Tuner::Clock];
}

/// The machine as the tuners see it.
pub struct Machine<'a> {
    pub fs: &'a dyn fs::Fs,
    pub rlimits: &'a dyn limits::Rlimits,
}

/// What to tune for: the broker's shard CPUs and data directory.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Sorted, distinct, non-empty.
    pub cpus: Vec<usize>,
    /// An absolute system path (below the root).
    pub data_dir: PathBuf,
    pub tuners: Vec<Tuner>,
}

/// Every finding of the planned tuners. Changes nothing.
pub fn check(m: &Machine, plan: &Plan) -> Vec<Finding> {
    let mut out = Vec::new();
    for tuner in &plan.tuners {
        out.extend(match tuner {
            Tuner::Limits => limits::check(m.rlimits, plan.cpus.len()),
            Tuner::Sysctl => sysctl::check(m.fs),
            Tuner::Thp => thp::check(m.fs),
            Tuner::Cpufreq => cpufreq::check(m.fs, &plan.cpus),
            Tuner::Net => net::check(m.fs, &plan.cpus),
            Tuner::Disk => disk::check(m.fs, &plan.data_dir),
            Tuner::Clock => clock::check(m.fs),
        });
    }
    out
}

/// Check, fix what needs it, check again. Each returned finding is ok, changed,
/// needs-reboot or failed.
pub fn apply(m: &Machine, plan: &Plan) -> Vec<Finding> {
    let before = check(m, plan);
    let mut errors: Vec<Vec<FixFailed>> = Vec::with_capacity(before.len());
    for finding in &before {
        let mut errs = Vec::new();
        if finding.status == Status::NeedsChange {
            for fix in &finding.fixes {
                if let Err(e) = perform(m, fix) {
                    errs.push(e);
                }
            }
        }
        errors.push(errs);
    }
    let after = check(m, plan);
    before.into_iter().zip(errors).map(|(b, errs)| settle(b, errs, &after)).collect()
}

/// The outcome of one finding after `apply`: its state before, the errors of its fixes, and
/// the re-check.
fn settle(before: Finding, errs: Vec<FixFailed>, after: &[Finding]) -> Finding {
    if before.status != Status::NeedsChange {
        return before;
    }
    let again = after.iter().find(|a| a.tuner == before.tuner && a.setting == before.setting);
    let mut out = Finding { fixes: Vec::new(), ..before.clone() };
    if !errs.is_empty() {
        out.status = Status::Failed;
        let errs: Vec<String> = errs.iter().map(FixFailed::to_string).collect();
        out.detail = format!("{}; fix failed: {}", before.detail, errs.join("; "));
    } else if let Some(again) = again.filter(|a| a.status == Status::Ok) {
        out.status = if before.reboot { Status::NeedsReboot } else { Status::Changed };
        out.detail = format!("was: {}; now: {}", before.detail, again.detail);
        if let Some(caveat) = &before.caveat {
            out.detail = format!("{}; {caveat}", out.detail);
        }
    } else {
        out.status = Status::Failed;
        let now = again.map_or("gone from the re-check".to_string(), |a| a.detail.clone());
        out.detail = format!("was: {}; wrote the fix but the re-check says: {now}", before.detail);
    }
    out
}

/// A fix that could not be made (the error names the file).
#[derive(Debug, thiserror::Error)]
#[error("cannot write {value}: {source}")]
struct FixFailed {
    value: String,
    source: std::io::Error,
}

fn perform(m: &Machine, fix: &Fix) -> Result<(), FixFailed> {
    let Fix::Write { path, value } = fix;
    m.fs.write(path, value).map_err(|source| FixFailed { value: value.clone(), source })
}

/// "0-3,6": the kernel's cpulist format, as `smp_affinity_list` and the config's `cpus` use.
pub fn cpu_list(cpus: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        parts.push(if i == j { cpus[i].to_string() } else { format!("{}-{}", cpus[i], cpus[j]) });
        i = j + 1;
    }
    parts.join(",")
}

/// The system path of a sysfs/procfs file built from parts.
fn sys_path(parts: &[&str]) -> PathBuf {
    let mut p = PathBuf::from("/");
    for part in parts {
        p.push(part);
    }
    p
}

/// True when `p` names the same place as `/`: the live machine, not a fake tree.
pub fn is_live_root(p: &Path) -> bool {
    p.canonicalize().is_ok_and(|c| c == Path::new("/"))
}

#[cfg(test)]
mod tests {
    use super::limits::{tests::FakeRlimits, Limit, Rlimits, UNLIMITED};
    use super::testing::{Faulty, Tree};
    use super::*;

    /// A machine with something off for every tuner but `net`, and one better-than-target value.
    fn untuned() -> Tree {
        let t = Tree::new();
        for (key, _) in sysctl::SYSCTLS {
            t.file(&sysctl::path(key).display().to_string()[1..], "0");
        }
        t.file("proc/sys/vm/swappiness", "60");
        t.file("proc/sys/net/core/somaxconn", "65535");
        t.file("sys/kernel/mm/transparent_hugepage/enabled", "[always] madvise never");
        t.file("sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", "powersave");
        t.file("sys/devices/system/clocksource/clocksource0/current_clocksource", "hpet");
        t.file("sys/devices/system/clocksource/clocksource0/available_clocksource", "tsc hpet");
        t.file("proc/cmdline", "ro quiet");
        disk::tests::nvme_tree(&t, "[mq-deadline] none", "0");
        t.dir("sys/class/net/lo");
        t
    }

    fn plan() -> Plan {
        Plan { cpus: vec![0], data_dir: "/data".into(), tuners: Tuner::ALL.to_vec() }
    }

    fn find<'a>(f: &'a [Finding], setting: &str) -> &'a Finding {
        f.iter().find(|x| x.setting == setting).unwrap_or_else(|| panic!("no {setting} in {f:?}"))
    }

    #[test]
    fn apply_fixes_what_is_off_rechecks_and_leaves_better_values_alone() {
        let t = untuned();
        let fs = t.fs();
        let limits = FakeRlimits::new((8 << 20, UNLIMITED), (1024, 1 << 20));
        let m = Machine { fs: &fs, rlimits: &limits };
        assert!(check(&m, &plan()).iter().all(|f| f.status != Status::Failed), "{:?}", check(&m, &plan()));
        let f = apply(&m, &plan());
        assert_eq!(find(&f, "vm.swappiness").status, Status::Changed);
        assert_eq!(find(&f, "vm.swappiness").detail, "was: is 60, want <= 1; now: is 1 (want <= 1)");
        assert_eq!(t.read("proc/sys/vm/swappiness"), "1");
        assert_eq!(find(&f, "net.core.somaxconn").status, Status::Ok);
        assert_eq!(t.read("proc/sys/net/core/somaxconn"), "65535");
        assert_eq!(t.read("sys/kernel/mm/transparent_hugepage/enabled"), "madvise");
        assert_eq!(t.read("sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"), "performance");
        assert_eq!(find(&f, "clocksource").status, Status::NeedsReboot);
        assert!(find(&f, "clocksource").detail.contains("clocksource=tsc"));
        assert_eq!(find(&f, "nvme0n1 scheduler").status, Status::Changed);
        // A low soft limit under a high hard one is the broker's to raise, not the tuner's.
        assert_eq!(find(&f, "RLIMIT_NOFILE").status, Status::Ok);
        assert_eq!(limits.get(Limit::Nofile).unwrap(), (1024, 1 << 20));
        // Applying again finds nothing left to do.
        let again = apply(&m, &plan());
        assert!(again.iter().all(|f| f.status == Status::Ok), "{again:?}");
    }

    #[test]
    fn a_refused_write_fails_naming_the_file_and_the_rest_still_apply() {
        let t = untuned();
        let swappiness = sysctl::path("vm.swappiness");
        let fs = Faulty { inner: t.fs(), refuse: vec![swappiness], ignore: vec![] };
        let limits = FakeRlimits::new((UNLIMITED, UNLIMITED), (1 << 20, 1 << 20));
        let m = Machine { fs: &fs, rlimits: &limits };
        let f = apply(&m, &plan());
        let s = find(&f, "vm.swappiness");
        assert_eq!(s.status, Status::Failed);
        assert!(s.detail.contains(&t.shown("proc/sys/vm/swappiness")), "{}", s.detail);
        assert_eq!(t.read("proc/sys/vm/swappiness"), "60");
        assert_eq!(find(&f, "fs.aio-max-nr").status, Status::Changed);
    }

    #[test]
    fn a_write_the_kernel_ignores_fails_on_the_recheck() {
        let t = untuned();
        let thp = PathBuf::from("/sys/kernel/mm/transparent_hugepage/enabled");
        let fs = Faulty { inner: t.fs(), refuse: vec![], ignore: vec![thp] };
        let limits = FakeRlimits::new((UNLIMITED, UNLIMITED), (1 << 20, 1 << 20));
        let m = Machine { fs: &fs, rlimits: &limits };
        let f = apply(&m, &plan());
        let thp = find(&f, "transparent_hugepage");
        assert_eq!(thp.status, Status::Failed);
        assert!(thp.detail.contains("re-check says: is always"), "{}", thp.detail);
    }

    #[test]
    fn check_changes_nothing() {
        let t = untuned();
        let before = t.snapshot();
        let fs = t.fs();
        let limits = FakeRlimits::new((8 << 20, UNLIMITED), (1024, 1 << 20));
        let m = Machine { fs: &fs, rlimits: &limits };
        assert!(check(&m, &plan()).iter().any(|f| f.status == Status::NeedsChange));
        assert_eq!(t.snapshot(), before);
        assert_eq!(limits.get(Limit::Nofile).unwrap(), (1024, 1 << 20));
    }

    #[test]
    fn cpu_lists_compress_ranges() {
        assert_eq!(cpu_list(&[0, 1, 2, 3, 6]), "0-3,6");
        assert_eq!(cpu_list(&[5]), "5");
        assert_eq!(cpu_list(&[1, 3]), "1,3");
        assert_eq!(crate::config::parse_cpu_list(&cpu_list(&[0, 2, 3, 4, 9])).unwrap(), vec![0, 2, 3, 4, 9]);
    }
}
