//! The cluster layer: partitions and the metadata replicated with raft-rs (DESIGN §9). Today it
//! holds the bridge from raft-rs's slog logging to tracing (`logging`) and, under test, the
//! deterministic simulation the replica core is tested in (`sim`): seeded network, fake disks
//! that lose unsynced writes, crashes, and the safety invariants checked after every step.

pub mod logging;
#[cfg(test)]
mod sim;
