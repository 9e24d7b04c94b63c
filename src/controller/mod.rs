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
//! every new catalog to the other shards (`shard::controller`).
//!
//! In a cluster the same controller runs on every member over the metadata quorum instead of
//! the local log (`Backend::Quorum`): a request's records are held as pending, which
//! `shard::controller` proposes to the quorum, and every member applies them when they
//! commit (`apply_committed`). The catalog then starts empty at each start and is rebuilt by
//! replaying the quorum's log; the cluster id and the fake-salt secret are records of that
//! log, written once by its first leader.

mod assign;
mod configs;
pub mod log;
mod reassign;
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
pub use assign::Member;
use log::MetadataLog;
pub use reassign::{ongoing, Ongoing};
use records::Record;
pub use requests::{
    ConfigChange, ConfigOp, ConfigTarget, CredentialChange, Failure, NewPartitions, NewTopic, QuotaChange,
    Reassignment, TopicResult,
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
    /// In a cluster, its members' node ids (the metadata quorum's voters); empty alone.
    pub members: Vec<i32>,
    /// Replicas of a topic created without a count (cluster mode).
    pub default_replication_factor: u32,
}

/// The broker-wide log defaults under a catalog: static settings, then the dynamic
/// cluster-wide defaults, then this broker's own dynamic configs.
pub fn broker_log_config(static_log: &LogConfig, cat: &Catalog) -> LogConfig {
    static_log.with_stored(Form::Broker, &cat.broker_defaults).with_stored(Form::Broker, &cat.broker_configs)
}

/// Where the controller's records go.
enum Backend {
    /// A broker alone: the local metadata log, appended and applied at once.
    File(MetadataLog),
    /// A cluster member: records wait here until `shard::controller` proposes them to the
    /// metadata quorum; they are applied when committed.
    Quorum { pending: Vec<Record> },
}

pub struct Controller {
    state: Catalog,
    backend: Backend,
    ctx: Context,
    /// The next producer id to hand out, below `block_end`, or a new block is reserved
    /// first. A block is reserved by one record and belongs to the controller that
    /// reserved it, so ids stay unique when another member leads for a while.
    next_producer_id: i64,
    block_end: i64,
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
        let mut c =
            Controller { state, backend: Backend::File(log), ctx, next_producer_id, block_end: next_producer_id };
        c.snapshot_if_due();
        Ok(c)
    }

    /// A cluster member's controller: an empty catalog that the metadata quorum's committed
    /// records build (`apply_committed`).
    pub fn replicated(ctx: Context) -> Controller {
        let backend = Backend::Quorum { pending: Vec::new() };
        Controller { state: Catalog::default(), backend, ctx, next_producer_id: 0, block_end: 0 }
    }

    /// Entries in the local metadata log (none in cluster mode).
    #[cfg(test)]
    fn logged(&self) -> usize {
        match &self.backend {
            Backend::File(log) => log.len(),
            Backend::Quorum { .. } => 0,
        }
    }

    /// Whether the records go to the metadata quorum (cluster mode).
    pub fn is_replicated(&self) -> bool {
        matches!(self.backend, Backend::Quorum { .. })
    }

    /// The records decided since the last call, to propose to the quorum (cluster mode).
    pub fn take_pending(&mut self) -> Vec<Record> {
        match &mut self.backend {
            Backend::Quorum { pending } => std::mem::take(pending),
            Backend::File(_) => Vec::new(),
        }
    }

    /// The pending records were not committed: a producer-id block they reserved is not
    /// this controller's to hand out.
    pub fn abandon(&mut self) {
        self.block_end = 0;
    }

    /// Applies one committed quorum entry (cluster mode), on every member.
    pub fn apply_committed(&mut self, records: &[Record]) {
        for r in records {
            records::apply(&mut self.state, r);
        }
        self.state.fit_homes(self.ctx.shards);
    }

    /// The records that make a new cluster's identity, if the catalog has none yet.
    pub fn found_cluster(&mut self) -> bool {
        if !self.state.cluster_id.is_empty() {
            return false;
        }
        let new = Catalog::new_cluster();
        let records = vec![Record::Cluster { cluster_id: new.cluster_id, auth_secret: new.auth_secret }];
        self.append(records).is_ok()
    }

    /// Registers (or re-registers) a member, unless the catalog already has it so.
    pub fn register(&mut self, broker: crate::metadata::BrokerRegistration) -> Result<(), Failure> {
        if self.state.brokers.get(&broker.node_id) == Some(&broker) {
            return Ok(());
        }
        if !self.ctx.members.contains(&broker.node_id) {
            return Err((ErrorCode::InvalidRequest, format!("node {} is not a voter of this cluster", broker.node_id)));
        }
        self.commit(vec![Record::Broker { broker }])
    }

    /// The members replicas can go to, with the racks they registered.
    fn members(&self) -> Vec<Member> {
        let rack = |id: i32| self.state.brokers.get(&id).and_then(|b| b.rack.clone());
        self.ctx.members.iter().map(|&node_id| Member { node_id, rack: rack(node_id) }).collect()
    }

    fn snapshot_if_due(&mut self) {
        if matches!(&self.backend, Backend::File(log) if log.wants_snapshot()) {
            self.snapshot();
        }
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
        let log = match &mut self.backend {
            Backend::File(log) => log,
            Backend::Quorum { pending } => {
                pending.extend(records);
                return Ok(());
            }
        };
        let index = log.append(&records)?;
        for r in &records {
            records::apply(&mut self.state, r);
        }
        self.state.applied = index;
        self.snapshot_if_due();
        Ok(())
    }

    /// Writes the catalog as the new snapshot and empties the log it covers. A failure
    /// keeps the log, so nothing is lost; the next commit tries again.
    fn snapshot(&mut self) {
        if let Err(e) = self.state.persist(&self.ctx.data_dir) {
            tracing::warn!("cannot write a metadata snapshot, keeping the log: {e}");
            return;
        }
        let Backend::File(log) = &mut self.backend else { return };
        if let Err(e) = log.truncate() {
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
        let mut topic = self.state.plan_internal_topic(name, partitions, self.ctx.shards, configs);
        if !self.ctx.members.is_empty() {
            // Kafka's offsets.topic.replication.factor is 3, capped by the cluster's size.
            let rf = self.ctx.members.len().min(3);
            topic.replicas = assign::assign(&self.members(), partitions, rf, 0).expect("rf within the members");
        }
        self.append(vec![Record::Topic { topic }]).map_err(|e| metadata_error(&self.ctx.data_dir, e))
    }

    /// A producer id never handed out before, by any member or before a restart.
    pub fn allocate_producer_id(&mut self) -> Result<i64, Failure> {
        if self.next_producer_id >= self.block_end {
            let (from, until) = self.reserve_producer_ids()?;
            self.next_producer_id = from;
            self.block_end = until;
        }
        let id = self.next_producer_id;
        self.next_producer_id += 1;
        Ok(id)
    }

    /// The next id of the block this member was given, if any is left (cluster mode).
    pub fn next_from_block(&mut self) -> Option<i64> {
        let id = self.next_producer_id;
        (id < self.block_end).then(|| {
            self.next_producer_id += 1;
            id
        })
    }

    /// Hands out ids from [from, until), a block the metadata quorum's leader reserved for
    /// this member.
    pub fn use_block(&mut self, from: i64, until: i64) {
        self.next_producer_id = from;
        self.block_end = until;
    }

    /// Reserves the next block of producer ids, [from, until), for whoever asked: this
    /// controller, or a member that hands them out itself.
    pub fn reserve_producer_ids(&mut self) -> Result<(i64, i64), Failure> {
        let from = self.state.producer_ids_reserved.max(self.next_producer_id).max(self.block_end);
        let until = from + PRODUCER_ID_BLOCK;
        self.commit(vec![Record::ProducerIds { reserved_until: until }])?;
        Ok((from, until))
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
