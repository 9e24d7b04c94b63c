//! The controller: the single writer of the cluster's metadata (topics, configs, quotas, ACLs,
//! credentials, producer-id blocks), as a state machine over a log. Each request is checked
//! against the current catalog and turned into records (`records::Record`), each fact
//! decided up front (a new topic's id and partition homes too); the records of one request
//! are appended to the metadata log as one durable entry and only then applied. At start the
//! catalog is the last snapshot with the log's later entries replayed over it, so what a
//! response acknowledged survives a crash, and a crash mid-append loses only the change that
//! was never answered.
//!
//! The controller knows nothing of shards or the network: it runs on shard 0, which hands
//! every new catalog to the other shards (`shard::controller`). It is also the one piece a
//! replicated metadata quorum will drive: replicate the entry instead of appending it, apply
//! it on commit.

mod configs;
pub mod log;
pub mod records;
pub mod requests;
mod security;
mod topics;

use std::path::{Path, PathBuf};

use crate::error::{BrokerError, MetadataFault};
use crate::log::config::Form;
use crate::log::LogConfig;
use crate::metadata::Catalog;
use crate::protocol::ErrorCode;
use log::MetadataLog;
use records::Record;
pub use requests::{
    ConfigChange, ConfigOp, ConfigTarget, CredentialChange, Failure, NewPartitions, NewTopic, QuotaChange, TopicResult,
};

/// Producer ids are reserved this many at a time: one metadata-log entry per block.
const PRODUCER_ID_BLOCK: i64 = 1000;
/// Where brokers before the metadata log kept their producer-id reservation.
const LEGACY_PRODUCER_IDS: &str = "producer_ids.json";

/// What the controller needs to know of the broker it runs in.
#[derive(Debug, Clone)]
pub struct Context {
    pub shards: usize,
    pub node_id: i32,
    /// Partitions of a topic created without a count.
    pub default_partitions: u32,
    /// The log settings of the config file, environment and flags.
    pub static_log: LogConfig,
    pub data_dir: PathBuf,
}

/// The broker-wide log defaults under a catalog: static settings, then the dynamic
/// cluster-wide defaults, then this broker's own dynamic configs.
pub fn broker_log_config(static_log: &LogConfig, cat: &Catalog) -> LogConfig {
    static_log.with_stored(Form::Broker, &cat.broker_defaults).with_stored(Form::Broker, &cat.broker_configs)
}

pub struct Controller {
    state: Catalog,
    log: MetadataLog,
    ctx: Context,
    /// The next producer id to hand out (below `state.producer_ids_reserved`, or a new block
    /// is reserved first).
    next_producer_id: i64,
}

impl Controller {
    /// Loads the last snapshot, replays the log over it and fits partition homes to the
    /// current shard count.
    pub fn open(ctx: Context) -> Result<Controller, BrokerError> {
        let dir = ctx.data_dir.clone();
        let mut state = Catalog::load_or_create(&dir)?;
        let (log, entries) = MetadataLog::open(&dir, state.applied).map_err(|e| metadata_error(&dir, e))?;
        let replayed = entries.len();
        for entry in entries {
            for r in &entry.records {
                records::apply(&mut state, r);
            }
            state.applied = entry.index;
        }
        state.producer_ids_reserved = state.producer_ids_reserved.max(legacy_producer_ids(&dir)?);
        state.fit_homes(ctx.shards);
        if replayed > 0 {
            tracing::info!(entries = replayed, applied = state.applied, "replayed the metadata log");
        }
        let next_producer_id = state.producer_ids_reserved;
        let mut c = Controller { state, log, ctx, next_producer_id };
        if c.log.wants_snapshot() {
            c.snapshot();
        }
        Ok(c)
    }

    pub fn catalog(&self) -> &Catalog {
        &self.state
    }

    /// The broker-wide log defaults under the current catalog.
    fn broker_log_config(&self, cat: &Catalog) -> LogConfig {
        broker_log_config(&self.ctx.static_log, cat)
    }

    /// Makes `records` one durable log entry, then applies them. Nothing is applied if the
    /// append fails: the change did not happen.
    fn commit(&mut self, records: Vec<Record>) -> Result<(), Failure> {
        self.append(records).map_err(|e| {
            tracing::error!("cannot append to the metadata log: {e}");
            (ErrorCode::KafkaStorageError, format!("cannot write the metadata log: {e}"))
        })
    }

    /// `commit` with the storage error itself, for callers that are not answering a request.
    fn append(&mut self, records: Vec<Record>) -> std::io::Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let index = self.log.append(&records)?;
        for r in &records {
            records::apply(&mut self.state, r);
        }
        self.state.applied = index;
        if self.log.wants_snapshot() {
            self.snapshot();
        }
        Ok(())
    }

    /// Writes the catalog as the new snapshot and empties the log it covers. A failure
    /// keeps the log, so nothing is lost; the next commit tries again.
    fn snapshot(&mut self) {
        if let Err(e) = self.state.persist(&self.ctx.data_dir) {
            tracing::warn!("cannot write a metadata snapshot, keeping the log: {e}");
            return;
        }
        if let Err(e) = self.log.truncate() {
            // The snapshot covers every entry: a replay skips them.
            tracing::warn!("cannot empty the metadata log after a snapshot: {e}");
        }
    }

    /// Creates the internal topic `name` if it does not exist, partition `i` on shard
    /// `i % shards`.
    pub fn ensure_internal_topic(
        &mut self,
        name: &str,
        partitions: u32,
        configs: std::collections::BTreeMap<String, String>,
    ) -> Result<(), BrokerError> {
        if self.state.topic(name).is_some() {
            return Ok(());
        }
        let topic = self.state.plan_internal_topic(name, partitions, self.ctx.shards, configs);
        self.append(vec![Record::Topic { topic }]).map_err(|e| metadata_error(&self.ctx.data_dir, e))
    }

    /// A producer id never handed out before, on this broker or before a restart.
    pub fn allocate_producer_id(&mut self) -> Result<i64, Failure> {
        let id = self.next_producer_id;
        if id >= self.state.producer_ids_reserved {
            self.commit(vec![Record::ProducerIds { reserved_until: id + PRODUCER_ID_BLOCK }])?;
        }
        self.next_producer_id = id + 1;
        Ok(id)
    }
}

/// Runs each ask against a scratch copy of the catalog, so later asks of one request see the
/// earlier ones, and collects the records of those that pass. `decide` returns the ask's
/// result and its records.
fn plan<A, T>(
    cat: &Catalog,
    asks: &[A],
    mut decide: impl FnMut(&Catalog, &A) -> Result<(T, Vec<Record>), Failure>,
) -> (Vec<Result<T, Failure>>, Vec<Record>) {
    let mut scratch = cat.clone();
    let mut all = Vec::new();
    let results = asks
        .iter()
        .map(|a| {
            let (value, records) = decide(&scratch, a)?;
            for r in &records {
                records::apply(&mut scratch, r);
            }
            all.extend(records);
            Ok(value)
        })
        .collect();
    (results, all)
}

impl Controller {
    /// Commits the planned records (unless only validating); if that fails, every ask that
    /// had passed gets the storage error.
    fn finish<T>(
        &mut self,
        (mut results, records): (Vec<Result<T, Failure>>, Vec<Record>),
        validate_only: bool,
    ) -> Vec<Result<T, Failure>> {
        if validate_only {
            return results;
        }
        if let Err(e) = self.commit(records) {
            for r in results.iter_mut().filter(|r| r.is_ok()) {
                *r = Err(e.clone());
            }
        }
        results
    }
}

fn metadata_error(dir: &Path, e: std::io::Error) -> BrokerError {
    BrokerError::Metadata { path: dir.join(log::LOG_FILE), source: e.into() }
}

/// The reservation a broker before the metadata log persisted, so ids stay unique across the
/// upgrade; 0 if there is none.
fn legacy_producer_ids(dir: &Path) -> Result<i64, BrokerError> {
    let path = dir.join(LEGACY_PRODUCER_IDS);
    let err = |source: MetadataFault| BrokerError::Metadata { path: path.clone(), source };
    let Some(bytes) = crate::storage::read(&path).map_err(|e| err(e.into()))? else { return Ok(0) };
    let v: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| err(e.into()))?;
    v.get("reserved_until").and_then(|r| r.as_i64()).ok_or_else(|| err(MetadataFault::Missing("reserved_until")))
}

#[cfg(test)]
mod tests;
