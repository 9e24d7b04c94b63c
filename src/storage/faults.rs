//! Faults injected into the storage seam, for tests: a rule makes every matching call under
//! a directory fail as a full disk (ENOSPC) or a failing one (EIO) would, or makes a write
//! land only its first bytes before failing (a torn write, as a crash or a full disk leaves
//! it). Rules are per directory, so tests running side by side in one process, each in its
//! own temporary directory, do not disturb each other. With no rule set, a check is one
//! atomic load.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// The kind of storage call a rule applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Open,
    Read,
    Write,
    Sync,
    /// Reserving blocks for a file (index files before they are written through a map).
    Allocate,
    Truncate,
    Rename,
    Remove,
}

/// What a matching call does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// ENOSPC: no space left on the device.
    NoSpace,
    /// EIO: the device failed.
    Io,
    /// A write stores its first `keep` bytes, then fails with ENOSPC.
    Torn { keep: usize },
}

impl Fault {
    pub fn error(self) -> io::Error {
        match self {
            Fault::NoSpace | Fault::Torn { .. } => io::Error::from_raw_os_error(libc::ENOSPC),
            Fault::Io => io::Error::from_raw_os_error(libc::EIO),
        }
    }
}

struct Rule {
    dir: PathBuf,
    op: Op,
    fault: Fault,
    /// Calls left to fail; `None`: every one until cleared.
    remaining: Option<u32>,
    /// Matching calls to let through first.
    skip: u32,
}

static ACTIVE: AtomicBool = AtomicBool::new(false);
static RULES: Mutex<Vec<Rule>> = Mutex::new(Vec::new());

fn rules() -> std::sync::MutexGuard<'static, Vec<Rule>> {
    RULES.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Makes `op` calls on paths under `dir` fail with `fault`: the next `times` of them, or all
/// until `clear` when `None`.
pub fn inject(dir: &Path, op: Op, fault: Fault, times: Option<u32>) {
    inject_after(dir, op, fault, 0, times);
}

/// `inject`, letting the first `skip` matching calls through: a crash at the `skip`-th step
/// of a sequence of such calls (the failing call and everything after it never happen).
pub fn inject_after(dir: &Path, op: Op, fault: Fault, skip: u32, times: Option<u32>) {
    rules().push(Rule { dir: dir.to_path_buf(), op, fault, remaining: times, skip });
    ACTIVE.store(true, Ordering::Release);
}

/// Removes every rule under `dir`.
pub fn clear(dir: &Path) {
    let mut r = rules();
    r.retain(|rule| !rule.dir.starts_with(dir));
    ACTIVE.store(!r.is_empty(), Ordering::Release);
}

/// The fault an `op` call on `path` must suffer, if a rule says so.
pub(super) fn check(op: Op, path: &Path) -> Option<Fault> {
    if !ACTIVE.load(Ordering::Acquire) {
        return None;
    }
    let mut r = rules();
    let rule = r.iter_mut().find(|rule| rule.op == op && path.starts_with(&rule.dir) && rule.remaining != Some(0))?;
    if rule.skip > 0 {
        rule.skip -= 1;
        return None;
    }
    if let Some(n) = &mut rule.remaining {
        *n -= 1;
    }
    Some(rule.fault)
}

/// `Err` with the fault's error when a rule hits `op` on `path`.
pub(super) fn hit(op: Op, path: &Path) -> io::Result<()> {
    match check(op, path) {
        Some(f) => Err(f.error()),
        None => Ok(()),
    }
}
