//! Partition logs on their home shard. `partition` is the appender/reader, `segment` one
//! file set, `index` the sparse indexes. Recovery is `Partition::open` + `Segment::rebuild`.

pub mod index;
pub mod partition;
pub mod segment;
pub mod snapshot;

pub use partition::{Appended, LogConfig, Offsets, Partition, ReadOut};
