//! Tests of this binary run two at a time, but the cluster test needs the machine to itself:
//! three brokers and a producer at full speed on two cores starve whatever runs beside
//! them (a broker started then was seen not to report ready within a minute). It holds
//! [`alone`] for its whole run; every other test holds [`shared`], so none runs beside it.

use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

static MACHINE: RwLock<()> = RwLock::new(());

/// Waits until no other test runs, and keeps it so while the guard lives.
pub(crate) fn alone() -> RwLockWriteGuard<'static, ()> {
    // A test that failed while holding the lock poisons it; the next one may still run.
    MACHINE.write().unwrap_or_else(|p| p.into_inner())
}

/// Runs beside other `shared` tests, never beside an `alone` one.
pub(crate) fn shared() -> RwLockReadGuard<'static, ()> {
    MACHINE.read().unwrap_or_else(|p| p.into_inner())
}
