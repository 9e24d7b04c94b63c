//! Log compaction (`cleanup.policy=compact`): the cleaner keeps, of each key, only its
//! latest record, in the segments a cleaning may touch (inactive, committed, and older than
//! `min.compaction.lag.ms`), preserving every kept record's offset, timestamp and headers.
//!
//! A cleaning of one partition, on its home shard:
//!
//! 1. the partition plans it (`Partition::cleaning_due`): the cleanable segments, the first
//!    dirty offset (where the last cleaning's key map ended, `cleaner-checkpoint`), and
//!    whether it is due: the dirty part's share of the cleanable bytes is at least
//!    `min.cleanable.dirty.ratio`, or the first batch of a dirty segment is older
//!    than `max.compaction.lag.ms`;
//! 2. `pass` reads and writes files on the shard's cleaner thread (a thread of its own at
//!    nice 19, see `shard::cleaning`): the key map over the dirty part
//!    (`keymap`, at most `log_cleaner_dedupe_buffer_size` bytes, so a large dirty part is
//!    cleaned over several passes), then each run of old segments of up to `segment.bytes`
//!    rewritten as one new segment (`filter` says what stays);
//! 3. back on the shard, `Partition::begin_swap` checks the old segments are all still
//!    there and holds them; the cleaner thread swaps the new ones in on disk
//!    (`Partition::commit_cleaned`, `swap`: crash-safe, with the order of fsyncs it
//!    documents), and `Partition::finish_swap`, on the shard again, opens them and puts them
//!    in the log. Fetches meanwhile keep reading the old files they hold.
//!
//! `reader` reads old segments for `pass`. A replicated log is cleaned keeping every batch
//! (each is a raft entry; see `cluster::group`'s `cleaning`).

pub mod filter;
pub mod keymap;
pub mod pass;
mod reader;
pub mod swap;

pub use filter::Counts;
pub use pass::{Cleaned, Job};

/// The cleaner's broker settings, the same for every partition of a shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CleanerSettings {
    /// Keys one cleaning's map may hold.
    pub map_capacity: usize,
    /// Bytes read and written per second by one shard's cleaner (None: no limit).
    pub io_limit: Option<u64>,
}
