//! The settings of a partition log, and the one table of topic configs that fills them.
//!
//! A partition's `LogConfig` is built in three layers: the broker's static settings
//! (`Config`), then dynamic broker defaults (set at run time through AlterConfigs or
//! IncrementalAlterConfigs on the BROKER resource, kept in the catalog, named as Kafka names
//! them: `log.retention.ms`, ...), then the topic's own configs (`retention.ms`, ...). Every
//! row of `TOPIC_CONFIGS` names both forms, parses and checks a value, applies it, and shows
//! the effective value for DescribeConfigs; CreateTopics, AlterConfigs,
//! IncrementalAlterConfigs and DescribeConfigs all go through it, so a config is either
//! known here and does what it says, or refused with INVALID_CONFIG and a reason
//! (`refusal`).
//!
//! Where each takes effect (the partition reads its config per use, see `partition.rs`):
//!
//! | config | takes effect |
//! |---|---|
//! | `cleanup.policy` | retention pass: `delete` trims by time or size; `compact` has the shard's cleaner keep only each key's latest record (see `cleaner`); an empty one does neither |
//! | `delete.retention.ms` | cleaning: how long a tombstone stays after the cleaning that first kept it |
//! | `min.cleanable.dirty.ratio`, `max.compaction.lag.ms` | the cleaner's check: when a compacted log is due |
//! | `min.compaction.lag.ms` | cleaning: segments holding newer records are not cleaned yet |
//! | `compression.type` | append: a batch in another codec is recompressed (`producer` keeps it) |
//! | `compression.gzip.level`, `lz4.level`, `zstd.level` | append: the level a recompressed batch is packed at (a batch already in the topic's codec is kept as sent, as in Kafka) |
//! | `flush.messages`, `flush.ms` | append: the durability policy of the topic (see `FlushPolicy`) |
//! | `index.interval.bytes` | append: sparse index density |
//! | `segment.index.bytes` | roll check: the active segment rolls once its offset index has this many bytes / 12 entries (Kafka's time index is full there when every batch raises the timestamp; with timestamps that do not rise Kafka rolls later, at / 8) |
//! | `max.message.bytes` | append: largest batch |
//! | `message.timestamp.type` | append: `LogAppendTime` stamps the broker's clock into each batch |
//! | `message.timestamp.before.max.ms`, `after.max.ms` | append: batches with timestamps further from the broker's clock are refused (INVALID_TIMESTAMP) |
//! | `min.insync.replicas` | acks=all produce waits for min(`min.insync.replicas`, replicas) in-sync replicas, as Kafka 4 counts them (KIP-966): with one replica, the leader's own write |
//! | `retention.bytes`, `retention.ms` | retention pass |
//! | `segment.bytes`, `segment.ms` | roll check before each append |

use crate::config::{Config, FlushPolicy};
use crate::protocol::compression;

/// "Never" for the Kafka settings whose default is `Long.MAX_VALUE`.
pub const NEVER: u64 = i64::MAX as u64;

/// How many times `max.message.bytes` a batch's records may decompress to.
pub const DECOMPRESSION_FACTOR: usize = 64;

/// When a batch's timestamps come from (`message.timestamp.type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    /// The producer's timestamps, kept as they came.
    CreateTime,
    /// The broker's clock at append, written into each batch.
    LogAppendTime,
}

/// What `compression.type` asks for: keep the producer's codec, or store in this one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopicCompression {
    Producer,
    /// A codec, by its attribute bits (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
    Codec(u8),
}

/// Settings a partition log needs: the broker's, with dynamic defaults and the topic's own
/// configs over them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogConfig {
    pub segment_bytes: u64,
    pub segment_ms: u64,
    /// `segment.jitter.ms`: the most a segment's time roll comes before `segment_ms`.
    pub segment_jitter_ms: u64,
    pub retention_bytes: i64,
    pub retention_ms: i64,
    pub index_interval_bytes: u32,
    /// `segment.index.bytes`: the most an active segment's index may hold.
    pub index_max_bytes: u32,
    /// `flush.messages`: sync after this many unsynced records (1: before every ack).
    pub flush_messages: u64,
    /// `flush.ms`: sync when data has been unsynced this long (`NEVER`: no time bound).
    pub flush_ms: u64,
    /// Sync after this many unsynced bytes (the broker's `flush_interval_bytes`).
    pub flush_bytes: u64,
    /// The time bound of a topic that syncs by count only (see `policy`).
    pub flush_fallback_ms: u64,
    pub message_max_bytes: u32,
    /// `producer.id.expiration.ms`: idempotence state of an idle producer is dropped after.
    pub producer_id_expiration_ms: i64,
    pub timestamp_type: TimestampType,
    /// `message.timestamp.before.max.ms`: how far in the past a batch's timestamps may be.
    pub timestamp_before_max_ms: u64,
    /// `message.timestamp.after.max.ms`: how far in the future.
    pub timestamp_after_max_ms: u64,
    pub compression: TopicCompression,
    /// `compression.gzip.level`, `compression.lz4.level`, `compression.zstd.level`.
    pub gzip_level: i32,
    pub lz4_level: i32,
    pub zstd_level: i32,
    /// `cleanup.policy` contains `compact`.
    pub compact: bool,
    /// `cleanup.policy` contains `delete`.
    pub delete: bool,
    /// `min.cleanable.dirty.ratio`: the dirty share of the cleanable bytes that makes a
    /// compacted log due for cleaning.
    pub min_cleanable_dirty_ratio: f64,
    /// `min.compaction.lag.ms`: records newer than this are not compacted yet.
    pub min_compaction_lag_ms: u64,
    /// `max.compaction.lag.ms`: a dirty record older than this makes the log due.
    pub max_compaction_lag_ms: u64,
    /// `delete.retention.ms`: tombstones stay this long after the cleaning that kept them.
    pub delete_retention_ms: u64,
    pub min_insync_replicas: i32,
}

/// How a partition makes appends durable, derived from `flush.messages` and `flush.ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// fdatasync before the ack (group commit).
    Always,
    /// fdatasync once `messages` records or `bytes` bytes are unsynced, or `ms` after the
    /// first unsynced write; the high watermark waits for it.
    Interval { messages: u64, bytes: u64, ms: u64 },
    /// Never fdatasync: the high watermark follows the write.
    Os,
}

impl LogConfig {
    /// The broker's static settings as a partition's.
    pub fn from_config(c: &Config) -> LogConfig {
        let (flush_messages, flush_ms) = match c.flush {
            FlushPolicy::Always => (1, NEVER),
            FlushPolicy::Interval => (NEVER, c.flush_interval_ms),
            FlushPolicy::Os => (NEVER, NEVER),
        };
        LogConfig {
            segment_bytes: c.segment_bytes,
            segment_ms: c.segment_ms,
            segment_jitter_ms: 0,
            retention_bytes: c.retention_bytes,
            retention_ms: c.retention_ms,
            index_interval_bytes: c.index_interval_bytes,
            // Kafka's default: 10 MiB.
            index_max_bytes: 10 << 20,
            flush_messages,
            flush_ms,
            flush_bytes: c.flush_interval_bytes,
            flush_fallback_ms: c.flush_interval_ms,
            message_max_bytes: c.message_max_bytes,
            producer_id_expiration_ms: c.producer_id_expiration_ms,
            timestamp_type: TimestampType::CreateTime,
            timestamp_before_max_ms: NEVER,
            // Kafka 4's default: a producer clock an hour ahead is refused.
            timestamp_after_max_ms: 3_600_000,
            compression: TopicCompression::Producer,
            gzip_level: compression::default_level(compression::GZIP),
            lz4_level: compression::default_level(compression::LZ4),
            zstd_level: compression::default_level(compression::ZSTD),
            compact: false,
            delete: true,
            min_cleanable_dirty_ratio: c.log_cleaner_min_cleanable_ratio,
            min_compaction_lag_ms: c.log_cleaner_min_compaction_lag_ms,
            max_compaction_lag_ms: c.log_cleaner_max_compaction_lag_ms,
            delete_retention_ms: c.log_cleaner_delete_retention_ms,
            min_insync_replicas: c.min_insync_replicas.min(i32::MAX as u32) as i32,
        }
    }

    /// The durability policy. A topic that syncs by count but sets no `flush.ms` still
    /// syncs within `flush_fallback_ms` (the broker's `flush_interval_ms`): the high
    /// watermark waits for the sync, so without a time bound a quiet partition's last
    /// records would never reach consumers.
    pub fn durability(&self) -> Durability {
        if self.flush_messages <= 1 {
            return Durability::Always;
        }
        if self.flush_messages == NEVER && self.flush_ms == NEVER {
            return Durability::Os;
        }
        let ms = if self.flush_ms == NEVER { self.flush_fallback_ms } else { self.flush_ms };
        Durability::Interval { messages: self.flush_messages, bytes: self.flush_bytes, ms }
    }

    /// Entries an active segment's indexes take: one per `index.interval.bytes` of a full
    /// segment, at most what `segment.index.bytes` holds of the time index's 12-byte entries.
    /// Kafka rolls a segment when either of its indexes is full; its time index, with the
    /// wider entries, fills first when every batch raises the timestamp, as producers'
    /// batches do, and only then is this where Kafka rolls (otherwise it rolls later, its
    /// offset index full at / 8). At least one.
    pub fn index_capacity(&self) -> usize {
        let by_size = crate::log::segment::Segment::index_capacity(self.segment_bytes, self.index_interval_bytes);
        by_size.min(self.index_max_bytes as usize / 12).max(1)
    }

    /// The most a batch's records may decompress to when the broker reads them
    /// (recompression, timestamp checks and lookups): 64 × `max.message.bytes`. Past it the
    /// batch is refused with CORRUPT_MESSAGE, so a small compressed batch cannot make the
    /// broker allocate without bound.
    pub fn decompressed_limit(&self) -> usize {
        (self.message_max_bytes as usize).saturating_mul(DECOMPRESSION_FACTOR)
    }

    /// The level a batch recompressed into `codec` is packed at.
    pub fn level(&self, codec: u8) -> i32 {
        match codec {
            compression::GZIP => self.gzip_level,
            compression::LZ4 => self.lz4_level,
            compression::ZSTD => self.zstd_level,
            _ => 0,
        }
    }

    /// Whether time and size retention may delete this log's old segments (`delete` alone,
    /// or with `compact`, as Kafka's `compact,delete`).
    pub fn retention_deletes(&self) -> bool {
        self.delete
    }

    /// These settings with `configs` (name → value, as the named `Form` calls them) applied
    /// over them; an unknown name or a bad value is an error naming it.
    pub fn with<'a>(
        mut self,
        form: Form,
        configs: impl IntoIterator<Item = (&'a String, &'a String)>,
    ) -> Result<LogConfig, ConfigRefused> {
        for (name, value) in configs {
            self.set(form, name, value)?;
        }
        Ok(self)
    }

    fn set(&mut self, form: Form, name: &str, value: &str) -> Result<(), ConfigRefused> {
        let row = lookup(form, name)?;
        (row.set)(self, value.trim()).map_err(|why| ConfigRefused::Value {
            name: name.to_string(),
            value: value.to_string(),
            why,
        })
    }

    /// `with`, for configs already checked when they were stored: a value that no longer
    /// parses is logged and skipped rather than failing the partition.
    pub fn with_stored<'a>(self, form: Form, configs: impl IntoIterator<Item = (&'a String, &'a String)>) -> LogConfig {
        let mut c = self;
        for (name, value) in configs {
            if let Err(e) = c.set(form, name, value) {
                tracing::warn!(config = %name, value = %value, "stored config ignored: {e}");
            }
        }
        c
    }
}

/// Why a topic config cannot be set; Kafka answers INVALID_CONFIG with this message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigRefused {
    #[error("unknown config {0:?}")]
    Unknown(String),
    /// A Kafka config Ringbroker does not hold, and why.
    #[error("{name} is not supported: {why}")]
    Unsupported { name: String, why: &'static str },
    #[error("invalid value {value:?} for {name}: {why}")]
    Value { name: String, value: String, why: BadValue },
}

/// Why a value does not fit its config, saying what would.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadValue {
    #[error("not a whole number")]
    NotANumber,
    #[error("must be at least {0}")]
    TooSmall(i64),
    #[error("must be at most {0}")]
    TooLarge(i64),
    /// The values allowed, in words.
    #[error("must be {0}")]
    NotOneOf(&'static str),
    #[error("{0:?} is not a cleanup policy (compact, delete)")]
    CleanupPolicy(String),
    /// A value only Kafka's features would honour, and why Ringbroker cannot.
    #[error("{0}")]
    Unsupported(&'static str),
}

/// Which name a config goes by: the topic's (`retention.ms`) or the broker default's
/// (`log.retention.ms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    Topic,
    Broker,
}

/// Kafka's ConfigType codes, for DescribeConfigs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Boolean = 1,
    String = 2,
    Int = 3,
    Long = 5,
    Double = 6,
    List = 7,
}

/// One topic config: its names, type, how to apply a value, and how to show the effective one.
pub struct TopicConfig {
    pub name: &'static str,
    /// The broker-wide default's name (a dynamic broker config); `TOPIC_ONLY` for none.
    pub broker_name: &'static str,
    pub kind: Kind,
    /// What it does, for DescribeConfigs with `include_documentation`.
    pub doc: &'static str,
    /// Parses, checks and applies a value.
    pub set: fn(&mut LogConfig, &str) -> Result<(), BadValue>,
    /// The effective value, as Kafka prints it.
    pub show: fn(&LogConfig) -> String,
}

/// The `broker_name` of a topic config without a broker-wide default.
pub const TOPIC_ONLY: &str = "";

impl TopicConfig {
    /// Whether the config has a broker-wide default (most do; the throttled-replica lists
    /// name one topic's replicas and have none, as in Kafka).
    pub fn has_broker_default(&self) -> bool {
        !self.broker_name.is_empty()
    }

    pub fn name_in(&self, form: Form) -> &'static str {
        match form {
            Form::Topic => self.name,
            Form::Broker => self.broker_name,
        }
    }

    /// Whether the value is a comma-separated list (IncrementalAlterConfigs APPEND and
    /// SUBTRACT apply to these only).
    pub fn is_list(&self) -> bool {
        self.kind == Kind::List
    }
}

fn long(v: &str, min: i64) -> Result<i64, BadValue> {
    let n: i64 = v.parse().map_err(|_| BadValue::NotANumber)?;
    if n < min {
        return Err(BadValue::TooSmall(min));
    }
    Ok(n)
}

fn int(v: &str, min: i64) -> Result<i32, BadValue> {
    let n = long(v, min)?;
    i32::try_from(n).map_err(|_| BadValue::TooLarge(i32::MAX.into()))
}

/// A number from 0 to 1 (`min.cleanable.dirty.ratio`).
fn ratio(v: &str) -> Result<f64, BadValue> {
    let r: f64 = v.parse().map_err(|_| BadValue::NotOneOf("a number from 0 to 1"))?;
    match (0.0..=1.0).contains(&r) {
        true => Ok(r),
        false => Err(BadValue::NotOneOf("a number from 0 to 1")),
    }
}

fn boolean(v: &str) -> Result<bool, BadValue> {
    match v.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(BadValue::NotOneOf("true or false")),
    }
}

/// A level of `codec` (`compression.<codec>.level`).
fn level(codec: u8, v: &str) -> Result<i32, BadValue> {
    let n: i32 = v.parse().map_err(|_| BadValue::NotANumber)?;
    compression::check_level(codec, n).map_err(BadValue::NotOneOf)?;
    Ok(n)
}

fn codec_name(c: TopicCompression) -> &'static str {
    match c {
        TopicCompression::Producer => "producer",
        TopicCompression::Codec(0) => "uncompressed",
        TopicCompression::Codec(1) => "gzip",
        TopicCompression::Codec(2) => "snappy",
        TopicCompression::Codec(3) => "lz4",
        TopicCompression::Codec(_) => "zstd",
    }
}

/// Which replicas of a topic `leader.replication.throttled.replicas` or
/// `follower.replication.throttled.replicas` names: `*` for all of them, or
/// `partition:broker` pairs. The leader reads them from the topic's stored configs (see
/// `cluster::throttle`); a partition's `LogConfig` holds nothing of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ThrottledReplicas {
    #[default]
    None,
    All,
    Listed(Vec<(i32, i32)>),
}

impl ThrottledReplicas {
    pub fn parse(v: &str) -> Result<ThrottledReplicas, BadValue> {
        const WHAT: &str = "\"*\" or a comma-separated list of partition:broker pairs";
        let v = v.trim();
        if v == "*" {
            return Ok(ThrottledReplicas::All);
        }
        let mut pairs = Vec::new();
        for item in v.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (p, b) = item.split_once(':').ok_or(BadValue::NotOneOf(WHAT))?;
            let id = |s: &str| s.trim().parse::<i32>().ok().filter(|n| *n >= 0).ok_or(BadValue::NotOneOf(WHAT));
            pairs.push((id(p)?, id(b)?));
        }
        Ok(if pairs.is_empty() { ThrottledReplicas::None } else { ThrottledReplicas::Listed(pairs) })
    }

    /// Whether broker `broker`'s replica of `partition` is named.
    pub fn contains(&self, partition: i32, broker: i32) -> bool {
        match self {
            ThrottledReplicas::None => false,
            ThrottledReplicas::All => true,
            ThrottledReplicas::Listed(pairs) => pairs.contains(&(partition, broker)),
        }
    }
}

/// Kafka's replication throttles on a broker, bytes per second: what the broker sends as
/// leader, and what it takes as follower, for the replicas the topics' throttled-replica
/// lists name while they catch up (see `cluster::throttle`). Dynamic broker configs, per
/// broker or cluster-wide; not topic defaults, so not rows of `TOPIC_CONFIGS`.
pub const LEADER_REPLICATION_RATE: &str = "leader.replication.throttled.rate";
pub const FOLLOWER_REPLICATION_RATE: &str = "follower.replication.throttled.rate";
/// The topic configs naming the replicas each rate applies to (`ThrottledReplicas`).
pub const LEADER_THROTTLED_REPLICAS: &str = "leader.replication.throttled.replicas";
pub const FOLLOWER_THROTTLED_REPLICAS: &str = "follower.replication.throttled.replicas";
/// Each rate's name and what it does.
pub const REPLICATION_RATES: [(&str, &str); 2] = [
    (
        LEADER_REPLICATION_RATE,
        "Bytes per second this broker sends as leader to replicas catching up, of the replicas leader.replication.throttled.replicas names.",
    ),
    (
        FOLLOWER_REPLICATION_RATE,
        "Bytes per second each leader sends this broker's replicas catching up, of the replicas follower.replication.throttled.replicas names.",
    ),
];
/// A rate not set: Kafka's default, Long.MAX_VALUE.
pub const UNTHROTTLED: u64 = i64::MAX as u64;

/// A replication rate's value, as Kafka checks it (a long, at least 0).
pub fn replication_rate(v: &str) -> Result<u64, BadValue> {
    long(v.trim(), 0).map(|n| n as u64)
}

/// Why `preallocate=true` is refused.
const NO_PREALLOCATE: &str = "whole segment files are not preallocated by Ringbroker (under a flush policy that syncs it preallocates up to 1 MiB ahead of the data on its own)";

/// The topic configs the broker implements, in Kafka's alphabetical order.
pub const TOPIC_CONFIGS: &[TopicConfig] = &[
    TopicConfig {
        name: "cleanup.policy",
        broker_name: "log.cleanup.policy",
        kind: Kind::List,
        doc: "What happens to old records: delete (retention trims whole old segments by time and size), compact (the cleaner keeps only the latest record of each key), both, or neither (an empty list).",
        set: |c, v| {
            let (mut compact, mut delete) = (false, false);
            for p in v.split(',').map(str::trim) {
                match p.to_ascii_lowercase().as_str() {
                    "compact" => compact = true,
                    "delete" => delete = true,
                    "" => {}
                    other => return Err(BadValue::CleanupPolicy(other.to_string())),
                }
            }
            // Neither (an empty list, as Kafka 4 allows): nothing is ever deleted or compacted.
            (c.compact, c.delete) = (compact, delete);
            Ok(())
        },
        show: |c| match (c.compact, c.delete) {
            (true, true) => "compact,delete".into(),
            (true, false) => "compact".into(),
            (false, true) => "delete".into(),
            (false, false) => "".into(),
        },
    },
    TopicConfig {
        name: "compression.gzip.level",
        broker_name: "compression.gzip.level",
        kind: Kind::Int,
        doc: "The level a batch the broker recompresses into gzip is packed at: -1 (the codec's default) or 1 to 9.",
        set: |c, v| {
            c.gzip_level = level(compression::GZIP, v)?;
            Ok(())
        },
        show: |c| c.gzip_level.to_string(),
    },
    TopicConfig {
        name: "compression.lz4.level",
        broker_name: "compression.lz4.level",
        kind: Kind::Int,
        doc: "The level a batch the broker recompresses into lz4 is packed at, 1 to 17: 9 uses the fast compressor, any other level the high-compression one.",
        set: |c, v| {
            c.lz4_level = level(compression::LZ4, v)?;
            Ok(())
        },
        show: |c| c.lz4_level.to_string(),
    },
    TopicConfig {
        name: "compression.type",
        broker_name: "compression.type",
        kind: Kind::String,
        doc: "The codec batches are stored in: producer keeps each batch as it came; uncompressed, gzip, snappy, lz4 or zstd has the broker recompress a batch in another codec.",
        set: |c, v| {
            c.compression = match v.to_ascii_lowercase().as_str() {
                "producer" => TopicCompression::Producer,
                "uncompressed" | "none" => TopicCompression::Codec(0),
                "gzip" => TopicCompression::Codec(1),
                "snappy" => TopicCompression::Codec(2),
                "lz4" => TopicCompression::Codec(3),
                "zstd" => TopicCompression::Codec(4),
                _ => return Err(BadValue::NotOneOf("producer, uncompressed, gzip, snappy, lz4 or zstd")),
            };
            Ok(())
        },
        show: |c| codec_name(c.compression).into(),
    },
    TopicConfig {
        name: "compression.zstd.level",
        broker_name: "compression.zstd.level",
        kind: Kind::Int,
        doc: "The level a batch the broker recompresses into zstd is packed at, -131072 to 22.",
        set: |c, v| {
            c.zstd_level = level(compression::ZSTD, v)?;
            Ok(())
        },
        show: |c| c.zstd_level.to_string(),
    },
    TopicConfig {
        name: "delete.retention.ms",
        broker_name: "log.cleaner.delete.retention.ms",
        kind: Kind::Long,
        doc: "How long a tombstone (a record with a null value) stays in a compacted log after the cleaning that first kept it, so that a consumer reading from the start sees the deletion.",
        set: |c, v| {
            c.delete_retention_ms = long(v, 0)? as u64;
            Ok(())
        },
        show: |c| c.delete_retention_ms.to_string(),
    },
    TopicConfig {
        name: "flush.messages",
        broker_name: "log.flush.interval.messages",
        kind: Kind::Long,
        doc: "The log is synced to disk once this many records are unsynced; 1 syncs before every acknowledgement. Consumers see only synced records.",
        set: |c, v| {
            c.flush_messages = long(v, 1)? as u64;
            Ok(())
        },
        show: |c| c.flush_messages.to_string(),
    },
    TopicConfig {
        name: "flush.ms",
        broker_name: "log.flush.interval.ms",
        kind: Kind::Long,
        doc: "The log is synced to disk at the latest this long after its first unsynced write.",
        set: |c, v| {
            c.flush_ms = long(v, 0)? as u64;
            Ok(())
        },
        show: |c| c.flush_ms.to_string(),
    },
    TopicConfig {
        name: FOLLOWER_THROTTLED_REPLICAS,
        broker_name: TOPIC_ONLY,
        kind: Kind::List,
        doc: "Replicas (partition:broker, or *) whose catch-up to this broker as follower is held to its follower.replication.throttled.rate.",
        set: |_, v| ThrottledReplicas::parse(v).map(|_| ()),
        show: |_| String::new(),
    },
    TopicConfig {
        name: "index.interval.bytes",
        broker_name: "log.index.interval.bytes",
        kind: Kind::Int,
        doc: "Bytes of batches between two entries of a segment's sparse offset and time indexes.",
        set: |c, v| {
            c.index_interval_bytes = int(v, 0)?.max(1) as u32;
            Ok(())
        },
        show: |c| c.index_interval_bytes.to_string(),
    },
    TopicConfig {
        name: LEADER_THROTTLED_REPLICAS,
        broker_name: TOPIC_ONLY,
        kind: Kind::List,
        doc: "Replicas (partition:broker, or *) whose leader on that broker sends to replicas catching up at most its leader.replication.throttled.rate.",
        set: |_, v| ThrottledReplicas::parse(v).map(|_| ()),
        show: |_| String::new(),
    },
    TopicConfig {
        name: "max.message.bytes",
        broker_name: "message.max.bytes",
        kind: Kind::Int,
        doc: "The largest record batch the broker takes, checked again after recompression.",
        set: |c, v| {
            c.message_max_bytes = int(v, 0)? as u32;
            Ok(())
        },
        show: |c| c.message_max_bytes.to_string(),
    },
    TopicConfig {
        name: "max.compaction.lag.ms",
        broker_name: "log.cleaner.max.compaction.lag.ms",
        kind: Kind::Long,
        doc: "A compacted log whose oldest uncleaned batch is older than this is due for cleaning whatever its dirty ratio.",
        set: |c, v| {
            c.max_compaction_lag_ms = long(v, 1)? as u64;
            Ok(())
        },
        show: |c| c.max_compaction_lag_ms.to_string(),
    },
    TopicConfig {
        name: "message.timestamp.after.max.ms",
        broker_name: "log.message.timestamp.after.max.ms",
        kind: Kind::Long,
        doc: "How far ahead of the broker's clock a CreateTime record's timestamp may be; a batch further ahead is refused with INVALID_TIMESTAMP.",
        set: |c, v| {
            c.timestamp_after_max_ms = long(v, 0)? as u64;
            Ok(())
        },
        show: |c| c.timestamp_after_max_ms.to_string(),
    },
    TopicConfig {
        name: "message.timestamp.before.max.ms",
        broker_name: "log.message.timestamp.before.max.ms",
        kind: Kind::Long,
        doc: "How far behind the broker's clock a CreateTime record's timestamp may be; a batch further behind is refused with INVALID_TIMESTAMP.",
        set: |c, v| {
            c.timestamp_before_max_ms = long(v, 0)? as u64;
            Ok(())
        },
        show: |c| c.timestamp_before_max_ms.to_string(),
    },
    TopicConfig {
        name: "message.timestamp.type",
        broker_name: "log.message.timestamp.type",
        kind: Kind::String,
        doc: "CreateTime keeps the producer's timestamps; LogAppendTime writes the broker's clock into each batch as it is appended.",
        set: |c, v| {
            c.timestamp_type = match v {
                "CreateTime" => TimestampType::CreateTime,
                "LogAppendTime" => TimestampType::LogAppendTime,
                _ => return Err(BadValue::NotOneOf("CreateTime or LogAppendTime")),
            };
            Ok(())
        },
        show: |c| match c.timestamp_type {
            TimestampType::CreateTime => "CreateTime".into(),
            TimestampType::LogAppendTime => "LogAppendTime".into(),
        },
    },
    TopicConfig {
        name: "min.cleanable.dirty.ratio",
        broker_name: "log.cleaner.min.cleanable.ratio",
        kind: Kind::Double,
        doc: "The share of a compacted log's cleanable bytes not cleaned yet that makes the log due for cleaning.",
        set: |c, v| {
            c.min_cleanable_dirty_ratio = ratio(v)?;
            Ok(())
        },
        show: |c| format!("{:?}", c.min_cleanable_dirty_ratio),
    },
    TopicConfig {
        name: "min.compaction.lag.ms",
        broker_name: "log.cleaner.min.compaction.lag.ms",
        kind: Kind::Long,
        doc: "Records newer than this are not compacted yet: a segment holding one waits for a later cleaning.",
        set: |c, v| {
            c.min_compaction_lag_ms = long(v, 0)? as u64;
            Ok(())
        },
        show: |c| c.min_compaction_lag_ms.to_string(),
    },
    TopicConfig {
        name: "min.insync.replicas",
        broker_name: "min.insync.replicas",
        kind: Kind::Int,
        doc: "In-sync replicas an acks=all produce needs, at most as many as the partition has; with fewer it is refused with NOT_ENOUGH_REPLICAS.",
        set: |c, v| {
            c.min_insync_replicas = int(v, 1)?;
            Ok(())
        },
        show: |c| c.min_insync_replicas.to_string(),
    },
    TopicConfig {
        name: "preallocate",
        broker_name: "log.preallocate",
        kind: Kind::Boolean,
        doc: "Whether whole segment files are preallocated when created; only false is accepted.",
        // Ringbroker writes zeros a little ahead of the data under a flush policy that syncs
        // (see `segment`), never a whole segment at its creation as Kafka's setting asks.
        set: |_, v| match boolean(v)? {
            false => Ok(()),
            true => Err(BadValue::Unsupported(NO_PREALLOCATE)),
        },
        show: |_| "false".into(),
    },
    TopicConfig {
        name: "retention.bytes",
        broker_name: "log.retention.bytes",
        kind: Kind::Long,
        doc: "The most bytes a partition keeps before its oldest segments are deleted; -1 for no limit.",
        set: |c, v| {
            c.retention_bytes = long(v, -1)?;
            Ok(())
        },
        show: |c| c.retention_bytes.to_string(),
    },
    TopicConfig {
        name: "retention.ms",
        broker_name: "log.retention.ms",
        kind: Kind::Long,
        doc: "How long a segment is kept after its newest record before it is deleted; -1 for ever.",
        set: |c, v| {
            c.retention_ms = long(v, -1)?;
            Ok(())
        },
        show: |c| c.retention_ms.to_string(),
    },
    TopicConfig {
        name: "segment.bytes",
        broker_name: "log.segment.bytes",
        // Ringbroker allows segments down to 1 KiB (Kafka: 1 MiB) so tests can roll often.
        kind: Kind::Int,
        doc: "The size at which a partition's active segment is closed and a new one started.",
        set: |c, v| {
            c.segment_bytes = int(v, 1024)? as u64;
            Ok(())
        },
        show: |c| c.segment_bytes.to_string(),
    },
    TopicConfig {
        name: "segment.index.bytes",
        broker_name: "log.index.size.max.bytes",
        kind: Kind::Int,
        doc: "The most bytes an active segment's index holds; the segment rolls once it is full.",
        set: |c, v| {
            c.index_max_bytes = int(v, 4)? as u32;
            Ok(())
        },
        show: |c| c.index_max_bytes.to_string(),
    },
    TopicConfig {
        name: "segment.jitter.ms",
        broker_name: "log.roll.jitter.ms",
        kind: Kind::Long,
        doc: "The most a random time, drawn per segment, takes off segment.ms, so that logs created together do not roll together.",
        set: |c, v| {
            c.segment_jitter_ms = long(v, 0)? as u64;
            Ok(())
        },
        show: |c| c.segment_jitter_ms.to_string(),
    },
    TopicConfig {
        name: "segment.ms",
        broker_name: "log.roll.ms",
        kind: Kind::Long,
        doc: "How long a segment takes appends before it is rolled, full or not.",
        set: |c, v| {
            c.segment_ms = long(v, 1)? as u64;
            Ok(())
        },
        show: |c| c.segment_ms.to_string(),
    },
    TopicConfig {
        name: "unclean.leader.election.enable",
        broker_name: "unclean.leader.election.enable",
        kind: Kind::Boolean,
        doc: "Whether a replica that is not in sync may become leader, losing records; only false is accepted.",
        set: |_, v| match boolean(v)? {
            false => Ok(()),
            true => Err(BadValue::Unsupported("Ringbroker never makes an out-of-sync replica leader")),
        },
        show: |_| "false".into(),
    },
];

/// Why a Kafka topic config the table does not hold is refused.
pub fn refusal(name: &str) -> ConfigRefused {
    let why = match name {
        "max.decompressed.message.bytes" => "Ringbroker bounds decompression at 64 × max.message.bytes",
        "file.delete.delay.ms" | "log.segment.delete.delay.ms" => {
            "Ringbroker deletes segment files at once (fetches in flight keep reading them)"
        }
        "local.retention.ms"
        | "local.retention.bytes"
        | "remote.storage.enable"
        | "remote.log.copy.disable"
        | "remote.log.delete.on.disable" => "Ringbroker has no tiered storage",
        "message.downconversion.enable" | "message.format.version" | "message.timestamp.difference.max.ms" => {
            "Kafka 4 removed it"
        }
        _ => return ConfigRefused::Unknown(name.to_string()),
    };
    ConfigRefused::Unsupported { name: name.to_string(), why }
}

/// The table row for a config name in the given form, or why there is none.
pub fn lookup(form: Form, name: &str) -> Result<&'static TopicConfig, ConfigRefused> {
    TOPIC_CONFIGS.iter().find(|r| !name.is_empty() && r.name_in(form) == name).ok_or_else(|| refusal(name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn base() -> LogConfig {
        LogConfig::from_config(&Config::default())
    }

    fn topic(pairs: &[(&str, &str)]) -> Result<LogConfig, ConfigRefused> {
        let m: BTreeMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        base().with(Form::Topic, &m)
    }

    #[test]
    fn every_row_shows_what_it_was_set_to() {
        let values = [
            ("cleanup.policy", "compact,delete"),
            ("compression.gzip.level", "9"),
            ("compression.lz4.level", "12"),
            ("compression.type", "zstd"),
            ("compression.zstd.level", "-7"),
            ("delete.retention.ms", "1000"),
            ("flush.messages", "1000"),
            ("flush.ms", "250"),
            ("follower.replication.throttled.replicas", "0:1, 1:2"),
            ("index.interval.bytes", "8192"),
            ("leader.replication.throttled.replicas", "*"),
            ("max.compaction.lag.ms", "600000"),
            ("max.message.bytes", "2000000"),
            ("message.timestamp.after.max.ms", "3600000"),
            ("message.timestamp.before.max.ms", "86400000"),
            ("message.timestamp.type", "LogAppendTime"),
            ("min.cleanable.dirty.ratio", "0.25"),
            ("min.compaction.lag.ms", "5000"),
            ("min.insync.replicas", "2"),
            ("preallocate", "false"),
            ("retention.bytes", "1048576"),
            ("retention.ms", "60000"),
            ("segment.bytes", "4096"),
            ("segment.index.bytes", "1200"),
            ("segment.jitter.ms", "60000"),
            ("segment.ms", "1000"),
            ("unclean.leader.election.enable", "false"),
        ];
        assert_eq!(values.len(), TOPIC_CONFIGS.len(), "one value per row");
        let c = topic(&values).unwrap();
        for (name, value) in values {
            let row = lookup(Form::Topic, name).unwrap();
            if !row.has_broker_default() {
                // Kept in the topic's stored configs only (the leader reads them there).
                assert_eq!((row.show)(&c), "", "{name}");
                continue;
            }
            assert_eq!((row.show)(&c), value, "{name}");
            assert_eq!(lookup(Form::Broker, row.broker_name).unwrap().name, name);
        }
        assert_ne!(c, base());
    }

    #[test]
    fn bad_values_and_unimplemented_configs_are_refused_with_a_reason() {
        for (name, value, why) in [
            ("retention.ms", "soon", "whole number"),
            ("retention.ms", "-2", "at least -1"),
            ("segment.bytes", "10", "at least 1024"),
            ("segment.bytes", "9999999999", "at most"),
            ("cleanup.policy", "compact,forever", "not a cleanup policy"),
            ("compression.type", "brotli", "must be producer"),
            ("message.timestamp.type", "logappendtime", "CreateTime or LogAppendTime"),
            ("flush.messages", "0", "at least 1"),
            ("min.insync.replicas", "0", "at least 1"),
            ("preallocate", "true", "not preallocated"),
            ("unclean.leader.election.enable", "true", "out-of-sync"),
            ("min.cleanable.dirty.ratio", "1.5", "from 0 to 1"),
            ("min.cleanable.dirty.ratio", "half", "from 0 to 1"),
            ("compression.zstd.level", "23", "from -131072 to 22"),
            ("compression.gzip.level", "0", "-1 (the default) or from 1 to 9"),
            ("compression.lz4.level", "fast", "whole number"),
            ("segment.index.bytes", "3", "at least 4"),
            ("leader.replication.throttled.replicas", "0-1", "partition:broker pairs"),
            ("follower.replication.throttled.replicas", "0:1,x:2", "partition:broker pairs"),
            ("retention.hours", "1", "unknown config"),
        ] {
            let e = topic(&[(name, value)]).unwrap_err().to_string();
            assert!(e.contains(why), "{name}={value}: {e}");
        }
    }

    #[test]
    fn throttled_replica_lists_name_all_replicas_or_partition_broker_pairs() {
        assert_eq!(ThrottledReplicas::parse(" ").unwrap(), ThrottledReplicas::None);
        assert!(ThrottledReplicas::parse("*").unwrap().contains(7, 3));
        let listed = ThrottledReplicas::parse("0:1, 0:2,3:1").unwrap();
        assert!(listed.contains(0, 2) && listed.contains(3, 1));
        assert!(!listed.contains(1, 1) && !listed.contains(0, 3));
        assert!(ThrottledReplicas::parse("0:-1").is_err());
        assert!(ThrottledReplicas::parse("*,0:1").is_err(), "* stands alone");
        // Topic-only: no broker-wide default of either list.
        assert!(lookup(Form::Broker, "leader.replication.throttled.replicas").is_err());
        assert!(lookup(Form::Broker, "").is_err());
    }

    #[test]
    fn durability_follows_flush_messages_and_flush_ms() {
        assert_eq!(base().durability(), Durability::Always, "the broker default is flush = always");
        let c = topic(&[("flush.messages", "9223372036854775807")]).unwrap();
        assert_eq!(c.durability(), Durability::Os, "never by count and never by time");
        let c = topic(&[("flush.ms", "200"), ("flush.messages", "9223372036854775807")]).unwrap();
        assert!(matches!(c.durability(), Durability::Interval { ms: 200, messages: NEVER, .. }));
        let c = topic(&[("flush.messages", "100")]).unwrap();
        let fallback = Config::default().flush_interval_ms;
        assert!(matches!(c.durability(), Durability::Interval { messages: 100, ms, .. } if ms == fallback));
        assert_eq!(topic(&[("flush.messages", "1"), ("flush.ms", "5")]).unwrap().durability(), Durability::Always);
    }

    #[test]
    fn compacted_topics_are_trimmed_by_retention_only_with_delete() {
        assert!(base().retention_deletes());
        assert!(!topic(&[("cleanup.policy", "compact")]).unwrap().retention_deletes());
        assert!(topic(&[("cleanup.policy", "delete,compact")]).unwrap().retention_deletes(), "Kafka's compact,delete");
        let neither = topic(&[("cleanup.policy", "")]).unwrap();
        assert!(!neither.retention_deletes(), "an empty policy keeps everything");
        assert_eq!((lookup(Form::Topic, "cleanup.policy").unwrap().show)(&neither), "");
    }

    #[test]
    fn broker_defaults_go_by_their_broker_names() {
        let m: BTreeMap<String, String> = [("log.retention.ms".to_string(), "1234".to_string())].into();
        assert_eq!(base().with(Form::Broker, &m).unwrap().retention_ms, 1234);
        assert!(base().with(Form::Topic, &m).is_err(), "log.retention.ms is not a topic config");
    }
}
