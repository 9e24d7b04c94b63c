//! The `ringbroker tune` command line: which machine, which CPUs and data directory (found as
//! the broker finds them), which mode; and the exit code (0 all ok, 1 not, 2 bad usage).

use std::path::{Path, PathBuf};

use super::fs::RootFs;
use super::limits::ProcessRlimits;
use super::report::{self, Report};
use super::{apply, check, cpu_list, is_live_root, script, Finding, Machine, Plan, Status, Tuner};
use crate::config::{parse_cpu_list, Config, ConfigError, CpuListError};
use crate::placement::resolve_cpus;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Report each setting; change nothing. Exit 1 if any is not ok.
    Check,
    /// Fix what is off, check again, report what changed (needs root). Exit 1 if any failed.
    Apply,
    /// Print a shell script that would make the fixes; change nothing.
    Render,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
}

/// Check, fix (as root) or script the OS settings the broker runs best with.
#[derive(Debug, clap::Args)]
pub struct TuneArgs {
    #[arg(value_enum)]
    pub mode: Mode,
    /// Tuners to run [default: all]
    #[arg(value_enum)]
    pub tuners: Vec<Tuner>,
    /// Shard CPUs, e.g. 0-3,6 [default: as the broker picks them: the config file's `cpus` or
    /// `numa_node`, else every CPU the process may use]
    #[arg(long, env = "RINGBROKER_CPUS")]
    pub cpus: Option<String>,
    /// Use the CPUs of this NUMA node (as the broker's --numa-node)
    #[arg(long, env = "RINGBROKER_NUMA_NODE")]
    pub numa_node: Option<u32>,
    /// The broker's data directory, whose disk is tuned [default: the config file's, else ./ringbroker-data]
    #[arg(long, env = "RINGBROKER_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// The broker's TOML config file, for its `cpus`, `numa_node` and `data_dir`
    #[arg(long, env = "RINGBROKER_CONFIG")]
    pub config: Option<PathBuf>,
    /// Treat DIR as `/`: tune a copy or fake of /proc and /sys (the data directory is looked up below it too)
    #[arg(long, value_name = "DIR", default_value = "/")]
    pub root: PathBuf,
    /// A table for people, or JSON for scripts
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// Runs `ringbroker tune` and returns the exit code.
pub fn run(args: TuneArgs) -> i32 {
    match run_inner(&args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("ringbroker tune: {e}");
            2
        }
    }
}

/// Why `ringbroker tune` cannot tell which machine, CPUs or data directory to tune: bad usage.
#[derive(Debug, thiserror::Error)]
enum Usage {
    /// The root directory (the error names it).
    #[error(transparent)]
    Root(std::io::Error),
    /// The broker's config file, or its CPUs resolved against the machine.
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("cannot read this process's CPU affinity: {0}")]
    Affinity(std::io::Error),
    #[error("cannot read the current directory: {0}")]
    CurrentDir(std::io::Error),
    /// The fake root's list of online CPUs.
    #[error("{}: {source}", path.display())]
    OnlineCpus { path: PathBuf, source: CpuListError },
    #[error("{}: {source}: pass --cpus for a root without it", path.display())]
    NoOnlineCpus { path: PathBuf, source: std::io::Error },
    #[error("invalid setting `cpus`: {0}")]
    Cpus(CpuListError),
}

fn run_inner(args: &TuneArgs) -> Result<i32, Usage> {
    let live = is_live_root(&args.root);
    if args.mode == Mode::Apply && live && !effective_root() {
        eprintln!(
            "ringbroker tune apply: must run as root, since it writes /proc/sys and /sys: run it with sudo, \
             or review the changes first with `ringbroker tune render > tune.sh`"
        );
        return Ok(1);
    }
    let fs = RootFs::new(&args.root).map_err(Usage::Root)?;
    let (cpus, data_dir) = broker_view(args, live)?;
    let plan =
        Plan { cpus, data_dir, tuners: if args.tuners.is_empty() { Tuner::ALL.to_vec() } else { args.tuners.clone() } };
    let machine = Machine { fs: &fs, rlimits: &ProcessRlimits };
    let about = format!(
        "Shard CPUs {}; data directory {}; root {}.",
        cpu_list(&plan.cpus),
        plan.data_dir.display(),
        args.root.display()
    );
    let (findings, ok, code) = match args.mode {
        Mode::Check => {
            let f = check(&machine, &plan);
            let ok = f.iter().all(|x| x.status == Status::Ok);
            (f, ok, if ok { 0 } else { 1 })
        }
        Mode::Apply => {
            let f = apply(&machine, &plan);
            let ok = f.iter().all(|x| x.status != Status::Failed);
            (f, ok, if ok { 0 } else { 1 })
        }
        Mode::Render => (check(&machine, &plan), true, 0),
    };
    let script = (args.mode == Mode::Render).then(|| script::render(&fs, &findings, &about));
    match (args.format, &script) {
        (Format::Json, _) => {
            let mode = match args.mode {
                Mode::Check => "check",
                Mode::Apply => "apply",
                Mode::Render => "render",
            };
            let r = Report {
                mode,
                root: args.root.display().to_string(),
                cpus: cpu_list(&plan.cpus),
                data_dir: plan.data_dir.display().to_string(),
                ok,
                findings: &findings,
                script: script.as_deref(),
            };
            println!("{}", report::json(&r));
        }
        (Format::Text, Some(script)) => print!("{script}"),
        (Format::Text, None) => {
            println!("{about}");
            print!("{}", report::table(&findings));
            println!("{}", report::counts(&findings));
            println!("{}", advice(args.mode, &findings));
        }
    }
    Ok(code)
}

/// The closing line: what to do next.
fn advice(mode: Mode, findings: &[Finding]) -> &'static str {
    let any = |s: Status| findings.iter().any(|f| f.status == s);
    match mode {
        Mode::Check if any(Status::NeedsChange) => {
            "Fix with `sudo ringbroker tune apply`, or review `ringbroker tune render` first."
        }
        Mode::Check if any(Status::Failed) => "Failed settings need a manual fix: the detail says which.",
        Mode::Apply if any(Status::Changed) || any(Status::NeedsReboot) => {
            "Runtime changes last until reboot: install tuning/sysctl.d/60-ringbroker.conf and \
             tuning/ringbroker-tune.service to keep them (tuning/README.md)."
        }
        _ => "All settings checked.",
    }
}

/// The shard CPUs and data directory the broker would use, from flags, environment and its
/// config file, resolved with the broker's own rules.
fn broker_view(args: &TuneArgs, live: bool) -> Result<(Vec<usize>, PathBuf), Usage> {
    let mut cfg = match &args.config {
        Some(path) => Config::from_file(path)?,
        None => Config::default(),
    };
    if args.cpus.is_some() {
        cfg.cpus = args.cpus.clone();
    }
    if args.numa_node.is_some() {
        cfg.numa_node = args.numa_node;
    }
    if let Some(d) = &args.data_dir {
        cfg.data_dir = d.clone();
    }
    let sys_root = args.root.join("sys");
    let allowed = if live {
        crate::sys::allowed_cpus().map_err(Usage::Affinity)?
    } else {
        fake_online_cpus(&sys_root, cfg.cpus.as_deref())?
    };
    let cpus = resolve_cpus(&cfg, &allowed, &sys_root)?;
    let data_dir = if cfg.data_dir.is_absolute() {
        cfg.data_dir
    } else {
        let cwd = std::env::current_dir().map_err(Usage::CurrentDir)?;
        // Without the `./` of the default, for the report.
        cwd.join(cfg.data_dir).components().filter(|c| *c != std::path::Component::CurDir).collect()
    };
    Ok((cpus, data_dir))
}

/// Under a fake root, the CPUs "this process may use" are the fake machine's online CPUs
/// (or, without that file, the ones asked for): the real affinity says nothing about it.
fn fake_online_cpus(sys_root: &Path, asked: Option<&str>) -> Result<Vec<usize>, Usage> {
    let online = sys_root.join("devices/system/cpu/online");
    match (std::fs::read_to_string(&online), asked) {
        (Ok(text), _) => parse_cpu_list(text.trim()).map_err(|source| Usage::OnlineCpus { path: online, source }),
        (Err(_), Some(list)) => parse_cpu_list(list).map_err(Usage::Cpus),
        (Err(source), None) => Err(Usage::NoOnlineCpus { path: online, source }),
    }
}

/// Whether this process runs with effective uid 0, from `/proc/self/status` (the `Uid:` line
/// holds real, effective, saved and filesystem uids), which needs no unsafe call.
fn effective_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|ids| ids.split_whitespace().nth(1).map(|euid| euid == "0"))
            .unwrap_or(false)
    })
}
