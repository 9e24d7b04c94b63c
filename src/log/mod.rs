//! Partition logs on their home shard. `partition` is the appender/reader, `segment` one
//! file set, `index` the sparse indexes, `config` the settings and the table of topic configs, `cleaner` log compaction. Recovery is `Partition::open` + `Segment::rebuild`.

pub mod cleaner;
pub mod config;
pub mod index;
pub mod partition;
pub mod segment;
pub mod snapshot;

pub use config::LogConfig;
pub use partition::{Appended, BatchLoc, Offsets, Partition, ReadOut, Refusal};
