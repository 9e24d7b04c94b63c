//! Log levels read and changed at run time, as Kafka's BROKER_LOGGER config resource does
//! (`kafka-configs --entity-type broker-loggers --entity-name <node id>`): DescribeConfigs
//! lists the root logger and every logger given a level of its own, IncrementalAlterConfigs
//! SET gives a logger a level and DELETE takes it away again (the logger then follows the
//! root's), as in Kafka. A logger is a tracing target: a module path such as
//! `ringbroker::cluster` covers every target that starts with it (the modules under it; as
//! tracing matches by prefix, `ringbroker::log` also covers `ringbroker::loggers`). Loggers
//! are named with dots
//! (`ringbroker.cluster`), as Kafka's are and as `kafka-configs` insists (it refuses `:` in a
//! name); either form is taken. Levels take Kafka's names (`ALL`,
//! `TRACE`, `DEBUG`, `INFO`, `WARN`, `ERROR`, `FATAL`, `OFF`); tracing has no level above
//! ERROR, so `FATAL` logs errors, and `ALL` is `TRACE`.
//!
//! Kafka's tools change only loggers the broker lists, and a log4j broker lists every logger
//! it has made; this one lists the root, `ringbroker` and each of its top-level modules,
//! `raft` (raft-rs's records), and any other logger given a level, each with the level it
//! logs at (that of the longest logger given a level that its name starts with, else the
//! root's).
//!
//! The levels start from the log filter the broker started with (`RUST_LOG` or `log_level`),
//! and, as in Kafka, changes last until the broker stops. A filter directive naming spans or
//! fields is kept as it is and not listed. The binary installs the hook that applies a new
//! filter to its tracing subscriber (`install`); without one (tests), changes are only kept.

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

use tracing::level_filters::LevelFilter;

/// The root logger's name, as Kafka's tools show it.
pub const ROOT: &str = "root";

/// The loggers always listed, as tracing targets: the crate, its top-level modules (a test
/// keeps them those of lib.rs) and raft-rs's records (`cluster::logging`).
const LISTED: &[&str] = &[
    "raft",
    "ringbroker",
    "ringbroker::api",
    "ringbroker::auth",
    "ringbroker::cli",
    "ringbroker::client",
    "ringbroker::cluster",
    "ringbroker::config",
    "ringbroker::controller",
    "ringbroker::error",
    "ringbroker::fetch_session",
    "ringbroker::group",
    "ringbroker::listener",
    "ringbroker::log",
    "ringbroker::loggers",
    "ringbroker::metadata",
    "ringbroker::metrics",
    "ringbroker::net",
    "ringbroker::placement",
    "ringbroker::producer",
    "ringbroker::protocol",
    "ringbroker::quota",
    "ringbroker::rng",
    "ringbroker::server",
    "ringbroker::shard",
    "ringbroker::storage",
    "ringbroker::sys",
    "ringbroker::tune",
];

/// Applies a filter string (`EnvFilter` syntax) to the running subscriber.
pub type Apply = Box<dyn Fn(&str) -> Result<(), String> + Send + Sync>;

/// Why a change is refused (Kafka answers INVALID_CONFIG or INVALID_REQUEST with it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("{0:?} is not a log level; valid levels are ALL, TRACE, DEBUG, INFO, WARN, ERROR, FATAL and OFF")]
    Level(String),
    #[error("{0:?} is not a logger name: a module path such as ringbroker.cluster, or root")]
    Name(String),
    #[error("the root logger's level cannot be removed, only set")]
    RootRemoved,
    #[error("the log filter could not be applied: {0}")]
    Apply(String),
}

/// A change to one logger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Set(String, String),
    Remove(String),
}

struct State {
    root: String,
    /// Loggers with a level of their own, by target, with their level in Kafka's name.
    targets: BTreeMap<String, String>,
    /// Directives this module does not model (span or field filters), kept verbatim.
    kept: Vec<String>,
    apply: Option<Apply>,
}

pub struct Loggers {
    state: Mutex<State>,
}

/// The filter level for a Kafka level name (any case), or `None` if it is none.
fn filter_level(kafka: &str) -> Option<&'static str> {
    Some(match kafka.to_ascii_uppercase().as_str() {
        "ALL" | "TRACE" => "trace",
        "DEBUG" => "debug",
        "INFO" => "info",
        "WARN" => "warn",
        "ERROR" | "FATAL" => "error",
        "OFF" => "off",
        _ => return None,
    })
}

/// The Kafka name of a level as a filter writes it (`warn`, or a number: 0 off to 5 trace).
fn kafka_name(filter: &str) -> String {
    match filter.parse::<LevelFilter>() {
        Ok(l) => l.to_string().to_ascii_uppercase(),
        Err(_) => filter.to_ascii_uppercase(),
    }
}

fn valid_target(target: &str) -> bool {
    !target.is_empty() && target.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | ':' | '-'))
}

/// The tracing target a logger name stands for (`ringbroker.cluster` → `ringbroker::cluster`).
fn target_of(name: &str) -> String {
    name.replace('.', "::")
}

/// A target's logger name, as Kafka's tools show and take it.
fn name_of(target: &str) -> String {
    target.replace("::", ".")
}

impl Loggers {
    /// The levels of a filter string such as `info,ringbroker::net=debug`.
    pub fn new(filter: &str) -> Loggers {
        // A filter without a level of its own logs nothing the other directives do not name.
        let mut state = State { root: "OFF".into(), targets: BTreeMap::new(), kept: Vec::new(), apply: None };
        for d in filter.split(',').map(str::trim).filter(|d| !d.is_empty()) {
            match d.split_once('=') {
                None if d.parse::<LevelFilter>().is_ok() => state.root = kafka_name(d),
                // A bare target enables every level of it.
                None if valid_target(d) => {
                    state.targets.insert(d.to_string(), "TRACE".into());
                }
                Some((t, l)) if valid_target(t) && l.parse::<LevelFilter>().is_ok() => {
                    state.targets.insert(t.to_string(), kafka_name(l));
                }
                _ => state.kept.push(d.to_string()),
            }
        }
        Loggers { state: Mutex::new(state) }
    }

    /// The broker's loggers, made once from the filter it started with.
    pub fn global() -> &'static Loggers {
        GLOBAL.get_or_init(|| Loggers::new("info"))
    }

    /// Makes the process's loggers those of `filter` and has every change applied through
    /// `apply`; the binary calls it once, when it sets up logging.
    pub fn install(filter: &str, apply: Apply) {
        let mut fresh = Loggers::new(filter).state.into_inner().unwrap_or_else(|e| e.into_inner());
        fresh.apply = Some(apply);
        *GLOBAL.get_or_init(|| Loggers::new(filter)).lock() = fresh;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic elsewhere while holding it leaves valid levels behind.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every listed logger with the level it logs at: the root first, then by name.
    pub fn levels(&self) -> Vec<(String, String)> {
        let s = self.lock();
        let mut targets: Vec<&str> = LISTED.to_vec();
        targets.extend(s.targets.keys().map(String::as_str));
        targets.sort_unstable();
        targets.dedup();
        let mut out = vec![(ROOT.to_string(), s.root.clone())];
        out.extend(targets.into_iter().map(|t| (name_of(t), effective(&s, t).to_string())));
        out
    }

    /// The loggers given a level of their own, with it.
    pub fn set_levels(&self) -> Vec<(String, String)> {
        self.lock().targets.iter().map(|(t, l)| (name_of(t), l.clone())).collect()
    }

    /// Checks `changes` and, unless `validate_only`, applies them all at once.
    pub fn change(&self, changes: &[Change], validate_only: bool) -> Result<(), Refused> {
        let mut s = self.lock();
        let (mut root, mut targets) = (s.root.clone(), s.targets.clone());
        for c in changes {
            match c {
                Change::Set(name, level) => {
                    filter_level(level).ok_or_else(|| Refused::Level(level.clone()))?;
                    let level = level.to_ascii_uppercase();
                    match target_of(name) {
                        t if t == ROOT => root = level,
                        t if valid_target(&t) => {
                            targets.insert(t, level);
                        }
                        _ => return Err(Refused::Name(name.clone())),
                    }
                }
                Change::Remove(name) if name == ROOT => return Err(Refused::RootRemoved),
                Change::Remove(name) if valid_target(&target_of(name)) => {
                    targets.remove(&target_of(name));
                }
                Change::Remove(name) => return Err(Refused::Name(name.clone())),
            }
        }
        if validate_only {
            return Ok(());
        }
        let filter = filter_string(&root, &targets, &s.kept);
        if let Some(apply) = &s.apply {
            apply(&filter).map_err(Refused::Apply)?;
        }
        (s.root, s.targets) = (root, targets);
        tracing::info!(filter = %filter, "log levels changed");
        Ok(())
    }

    /// The filter string the levels make (what `install`'s hook is given).
    pub fn filter(&self) -> String {
        let s = self.lock();
        filter_string(&s.root, &s.targets, &s.kept)
    }
}

/// The level `target` logs at: that of the longest target with a level that it starts with
/// (tracing's filter matches targets by prefix, so `ringbroker::log` also covers
/// `ringbroker::loggers`), else the root's.
fn effective<'a>(s: &'a State, target: &str) -> &'a str {
    let covers = |t: &str| target.starts_with(t);
    s.targets.iter().filter(|(t, _)| covers(t)).max_by_key(|(t, _)| t.len()).map_or(&s.root, |(_, l)| l)
}

fn filter_string(root: &str, targets: &BTreeMap<String, String>, kept: &[String]) -> String {
    let mut parts = vec![filter_level(root).unwrap_or("info").to_string()];
    parts.extend(kept.iter().cloned());
    parts.extend(targets.iter().map(|(t, l)| format!("{t}={}", filter_level(l).unwrap_or("info"))));
    parts.join(",")
}

static GLOBAL: OnceLock<Loggers> = OnceLock::new();

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn set(name: &str, level: &str) -> Change {
        Change::Set(name.into(), level.into())
    }

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
    }

    /// The level `levels` lists for `name`.
    fn level_of(l: &Loggers, name: &str) -> String {
        l.levels().into_iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("{name} not listed")).1
    }

    #[test]
    fn the_starting_filter_is_listed_and_rebuilt() {
        let l = Loggers::new("warn, ringbroker::net=debug,ringbroker::cluster,[span{x=1}]=trace");
        assert_eq!(l.set_levels(), pairs(&[("ringbroker.cluster", "TRACE"), ("ringbroker.net", "DEBUG")]));
        assert_eq!(l.levels()[0], ("root".to_string(), "WARN".to_string()));
        assert_eq!(l.filter(), "warn,[span{x=1}]=trace,ringbroker::cluster=trace,ringbroker::net=debug");
    }

    #[test]
    fn every_listed_logger_shows_the_level_it_logs_at() {
        let l = Loggers::new("info,ringbroker=warn,ringbroker::cluster::group=trace,ringbroker::net=error");
        assert_eq!(level_of(&l, "raft"), "INFO", "the root's");
        assert_eq!(level_of(&l, "ringbroker.log"), "WARN", "the crate's");
        assert_eq!(level_of(&l, "ringbroker.net"), "ERROR", "its own");
        assert_eq!(level_of(&l, "ringbroker.cluster"), "WARN", "a module below it has another, not it");
        assert_eq!(level_of(&l, "ringbroker.cluster.group"), "TRACE", "set, so listed too");
        // As tracing matches targets, by prefix: a module whose name starts with another's
        // logs at that one's level.
        let l = Loggers::new("info,ringbroker::log=debug");
        assert_eq!(level_of(&l, "ringbroker.loggers"), "DEBUG");
    }

    #[test]
    fn the_listed_modules_are_those_of_lib_rs() {
        let mut modules: Vec<String> = include_str!("lib.rs")
            .lines()
            .filter_map(|l| l.strip_prefix("pub mod ")?.strip_suffix(';'))
            .map(|m| format!("ringbroker::{m}"))
            .collect();
        modules.extend(["raft".to_string(), "ringbroker".to_string()]);
        modules.sort();
        assert_eq!(modules, LISTED.iter().map(|m| m.to_string()).collect::<Vec<_>>());
    }

    #[test]
    fn changes_apply_together_or_not_at_all() {
        let l = Loggers::new("info");
        let applied = Arc::new(Mutex::new(Vec::new()));
        let seen = applied.clone();
        l.lock().apply = Some(Box::new(move |f| {
            seen.lock().unwrap().push(f.to_string());
            Ok(())
        }));
        l.change(&[set("ringbroker.log", "debug"), set("root", "FATAL")], false).unwrap();
        assert_eq!(l.set_levels(), pairs(&[("ringbroker.log", "DEBUG")]));
        assert_eq!(level_of(&l, "root"), "FATAL");
        assert_eq!(applied.lock().unwrap().as_slice(), ["error,ringbroker::log=debug"]);

        // A bad change among good ones: nothing changes.
        let e = l.change(&[set("ringbroker.net", "TRACE"), set("ringbroker.log", "LOUD")], false).unwrap_err();
        assert_eq!(e, Refused::Level("LOUD".into()));
        assert!(e.to_string().contains("valid levels are ALL"), "{e}");
        assert_eq!(l.change(&[Change::Remove("root".into())], false), Err(Refused::RootRemoved));
        assert_eq!(l.change(&[set("a=b,c", "INFO")], false), Err(Refused::Name("a=b,c".into())));
        assert_eq!(l.set_levels().len(), 1);

        // Validation only: checked, not applied.
        l.change(&[set("ringbroker.net", "OFF")], true).unwrap();
        assert_eq!(l.set_levels().len(), 1);
        assert_eq!(applied.lock().unwrap().len(), 1);

        // Removed (named either way): the logger follows the root again.
        l.change(&[Change::Remove("ringbroker::log".into())], false).unwrap();
        assert_eq!(l.set_levels(), vec![]);
        assert_eq!(level_of(&l, "ringbroker.log"), "FATAL");
        assert_eq!(applied.lock().unwrap().last().unwrap(), "error");
    }

    #[test]
    fn levels_given_as_numbers_are_read_as_tracing_reads_them() {
        let l = Loggers::new("3,ringbroker::net=5,ringbroker::log=0");
        assert_eq!(level_of(&l, "root"), "INFO");
        assert_eq!(l.set_levels(), pairs(&[("ringbroker.log", "OFF"), ("ringbroker.net", "TRACE")]));
        assert_eq!(l.filter(), "info,ringbroker::log=off,ringbroker::net=trace");
    }

    #[test]
    fn a_filter_naming_only_targets_leaves_the_rest_off() {
        let l = Loggers::new("ringbroker::net=debug");
        assert_eq!(level_of(&l, "root"), "OFF");
        assert_eq!(l.filter(), "off,ringbroker::net=debug");
    }

    #[test]
    fn a_filter_the_subscriber_refuses_changes_nothing() {
        let l = Loggers::new("info");
        l.lock().apply = Some(Box::new(|_| Err("no".into())));
        assert_eq!(l.change(&[set("ringbroker", "DEBUG")], false), Err(Refused::Apply("no".into())));
        assert_eq!(l.set_levels(), vec![]);
    }
}
