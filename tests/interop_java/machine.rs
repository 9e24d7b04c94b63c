//! Tests of this binary run two at a time, but some need the machine to themselves: a broker
//! and several JVMs at once, whose clients' session and request timeouts turn into flakes
//! when another test's JVMs compete for the same two cores. Those hold [`alone`] for their
//! whole run; every other test holds [`shared`], so none runs beside them.

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
