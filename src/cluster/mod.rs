//! The cluster layer: partitions and the metadata replicated with raft-rs (DESIGN §9).
//!
//! - `entry`: raft entries as Kafka record batches (the partition log is the raft log).
//! - `meta`: the replica state kept beside the log (hard state, configuration, log start).
//! - `store`: raft-rs's `Storage` over the batches, with the recent ones in memory.
//! - `snapshot`: what a raft snapshot carries (the state at the log start, not the data).
//! - `replica`: one replica, sans-IO: offsets and epochs stamped before proposing, the
//!   write each Ready asks for, the high watermark, produce waits settled.
//! - `cursor`: big-endian reads off a byte slice for the cluster's own formats.
//! - `frame`, `transport`: raft messages between brokers, one frame per peer per loop turn.
//! - `group`: a replica driven on its home shard over its partition log and the transport.
//! - `throttle`: replication throttles, applied to a leader's appends to replicas catching up.
//! - `membership`: the steps that move a group to a reassignment's target replicas.
//! - `quorum`: a replicated state machine over one group (the metadata quorum's log).
//! - `logging`: raft-rs's slog records forwarded to tracing.
//! - `sim` (tests): the deterministic simulation replicas are tested in, with a seeded
//!   network, fake disks that lose unsynced writes, crashes, and the safety invariants
//!   checked after every step.

mod cursor;
pub mod entry;
pub mod frame;
pub mod group;
pub mod logging;
pub mod membership;
pub mod meta;
pub mod quorum;
pub mod replica;
#[cfg(test)]
mod sim;
pub mod snapshot;
pub mod store;
pub mod throttle;
pub mod transport;
