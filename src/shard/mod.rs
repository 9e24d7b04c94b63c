//! A shard: one pinned executor that owns its listener, connections and the partitions
//! homed on it. `Shard` is the per-executor context the API handlers work through: it
//! routes each partition operation to the partition's home shard, locally by a direct call
//! or remotely as a `Msg` over the mesh, and holds this shard's catalog snapshot.
//!
//! Metrics recorded here: partitions homed on this shard, mesh messages sent and received,
//! sends that found a peer's queue full (backpressure: the send then waits, it never
//! fails), and appends whose ack had to wait (delayed produce). Waiting on another shard
//! or on an append's ack is wrapped in `metrics::remote`, so it counts as the request's
//! remote time.

pub mod controller;
pub mod message;

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_channel::oneshot;
use glommio::channels::shared_channel::{ConnectedReceiver, ConnectedSender};
use glommio::{GlommioError, ResourceType};

use crate::auth::acl::{Acls, AuthorizerConfig, Operation, ResourceType as AclResource};
use crate::auth::Session;
use crate::config::Config;
use crate::controller::{
    ConfigChange, Controller, CredentialChange, Failure, NewPartitions, NewTopic, QuotaChange, TopicResult,
};
use crate::group::coordinator::Coordinator;
use crate::group::{offsets, GroupLimits, GroupListing, GroupOp};
use crate::log::config::Form;
use crate::log::{Appended, LogConfig, Offsets, Partition, ReadOut};
use crate::metadata::Catalog;
use crate::metrics::{self, Probe};
use crate::protocol::ErrorCode;
use crate::quota::{ClientQuota, QuotaTable};
use message::ControllerOp;
pub use message::{Msg, Tp};

/// Index of a shard (0 is the controller).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShardId(pub usize);

pub struct Shard {
    pub id: ShardId,
    pub count: usize,
    pub config: Rc<Config>,
    pub log_config: LogConfig,
    /// The ACLs of the current catalog, indexed: read on every request without a lock.
    acls: RefCell<Rc<Acls>>,
    /// None when ACLs are not enforced (`authorizer_enabled` off).
    authorizer: Option<AuthorizerConfig>,
    /// SASL mechanisms offered on SASL listeners.
    pub sasl_mechanisms: Vec<String>,
    catalog: RefCell<Arc<Catalog>>,
    logs: RefCell<HashMap<Tp, Rc<Partition>>>,
    /// Senders to every other shard, by shard index (None for this shard).
    peers: Vec<Option<ConnectedSender<Msg>>>,
    /// The controller, on shard 0 only.
    controller: Option<RefCell<Controller>>,
    /// The consumer groups homed on this shard.
    pub groups: Coordinator,
    /// Requests sent to other shards, waiting for their `Msg::Reply`.
    pending: RefCell<HashMap<u64, oneshot::Sender<Box<dyn Any + Send>>>>,
    next_call: Cell<u64>,
    /// This shard's metrics.
    pub probe: Probe,
    /// Client quotas, measured broker-wide (see `quota`).
    pub quotas: crate::quota::ShardQuotas,
    /// The quotas of the config file, environment and flags (the catalog's come over them).
    static_quotas: StaticQuotas,
}

/// The static quota settings: the client-id default, client-ids' and users'.
struct StaticQuotas {
    default: ClientQuota,
    clients: HashMap<String, ClientQuota>,
    users: HashMap<String, ClientQuota>,
}

impl StaticQuotas {
    fn table(&self, dynamic: &[crate::metadata::QuotaSetting]) -> QuotaTable {
        let dynamic = dynamic
            .iter()
            .map(|s| (&s.entity, ClientQuota::from_values(s.values.iter().map(|(k, v)| (k.as_str(), *v)))));
        QuotaTable::new(self.default, &self.clients, &self.users, dynamic)
    }
}

/// A controller request that never reached an answer.
fn unreachable(e: ErrorCode) -> Failure {
    (e, "controller unreachable".into())
}

/// What went wrong sending to another shard: it has stopped.
fn peer_gone<T>(_: T) -> ErrorCode {
    ErrorCode::NotLeaderOrFollower
}

impl Shard {
    pub fn new(
        id: ShardId,
        config: Rc<Config>,
        catalog: Catalog,
        peers: Vec<Option<ConnectedSender<Msg>>>,
        probe: Probe,
        quotas: Arc<crate::quota::Quotas>,
        controller: Option<Controller>,
    ) -> Rc<Shard> {
        let count = peers.len();
        let controller = controller.map(RefCell::new);
        // Validated at start (server::run): a bad value cannot get here.
        let (default, clients) = config.client_quotas().unwrap_or((ClientQuota::NONE, HashMap::new()));
        let static_quotas = StaticQuotas { default, clients, users: config.user_quotas().unwrap_or_default() };
        let catalog_quotas = catalog.client_quotas.clone();
        let limits = GroupLimits {
            min_session_ms: config.group_min_session_timeout_ms,
            max_session_ms: config.group_max_session_timeout_ms,
            initial_rebalance_delay_ms: config.group_initial_rebalance_delay_ms,
            max_size: config.group_max_size as usize,
        };
        let retention_ms = (config.offsets_retention_minutes * 60_000).min(i64::MAX as u64) as i64;
        Rc::new(Shard {
            groups: Coordinator::new(limits, retention_ms),
            pending: RefCell::new(HashMap::new()),
            next_call: Cell::new(1),
            id,
            count,
            log_config: LogConfig::from_config(&config),
            acls: RefCell::new(Rc::new(Acls::new(catalog.acls.clone()))),
            authorizer: config.authorizer_enabled.then(|| AuthorizerConfig {
                super_users: config.super_user_list(),
                allow_everyone_if_no_acl_found: config.allow_everyone_if_no_acl_found,
            }),
            sasl_mechanisms: config.sasl_mechanisms().unwrap_or_default(),
            config,
            catalog: RefCell::new(Arc::new(catalog)),
            logs: RefCell::new(HashMap::new()),
            peers,
            controller,
            quotas: crate::quota::ShardQuotas::new(quotas, static_quotas.table(&catalog_quotas)),
            static_quotas,
            probe,
        })
    }

    /// The quotas a catalog's entries give, over the static settings.
    fn quota_table(&self, catalog: &Catalog) -> QuotaTable {
        self.static_quotas.table(&catalog.client_quotas)
    }

    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog.borrow().clone()
    }

    /// A topic's effective log settings: the broker's static ones, the catalog's dynamic
    /// broker defaults over them, then the topic's own configs.
    pub fn topic_log_config(&self, catalog: &Catalog, configs: &BTreeMap<String, String>) -> LogConfig {
        self.broker_log_config(catalog).with_stored(Form::Topic, configs)
    }

    /// The broker-wide log defaults: static settings, then the dynamic cluster-wide
    /// defaults, then this broker's own dynamic configs.
    pub fn broker_log_config(&self, catalog: &Catalog) -> LogConfig {
        crate::controller::broker_log_config(&self.log_config, catalog)
    }

    /// The current ACL snapshot.
    pub fn acls(&self) -> Rc<Acls> {
        self.acls.borrow().clone()
    }

    /// Whether ACLs are enforced.
    pub fn authorizer_enabled(&self) -> bool {
        self.authorizer.is_some()
    }

    /// May `session` do `op` on the resource? Always yes without an authorizer.
    pub fn authorize(&self, session: &Session, op: Operation, resource: AclResource, name: &str) -> bool {
        match &self.authorizer {
            None => true,
            Some(cfg) => self.acls.borrow().authorize(cfg, &session.principal, session.host, op, resource, name),
        }
    }

    /// May `session` do `op` on some resource of this type (Kafka's authorizeByResourceType)?
    pub fn authorize_any(&self, session: &Session, op: Operation, resource: AclResource) -> bool {
        match &self.authorizer {
            None => true,
            Some(cfg) => self.acls.borrow().authorize_any(cfg, &session.principal, session.host, op, resource),
        }
    }

    fn log(&self, tp: &Tp) -> Result<Rc<Partition>, ErrorCode> {
        self.logs.borrow().get(tp).cloned().ok_or(ErrorCode::UnknownTopicOrPartition)
    }

    fn home(&self, tp: &Tp) -> Result<usize, ErrorCode> {
        let cat = self.catalog.borrow();
        let t = cat.topic_by_id(&tp.topic).ok_or(ErrorCode::UnknownTopicOrPartition)?;
        t.homes.get(tp.partition as usize).copied().ok_or(ErrorCode::UnknownTopicOrPartition)
    }

    /// Runs `make(reply)` on `shard` and waits for the reply, which comes back over the mesh
    /// (see `message.rs` for why the oneshot never crosses threads).
    async fn call<T: Send + 'static>(
        &self,
        shard: usize,
        make: impl FnOnce(oneshot::Sender<T>) -> Msg,
    ) -> Result<T, ErrorCode> {
        let (tx, rx) = oneshot::channel::<T>();
        let msg = Box::new(make(tx));
        let relay: message::Relay = Box::pin(async move { Box::new(rx.await.ok()) as Box<dyn Any + Send> });
        let id = self.next_call.get();
        self.next_call.set(id + 1);
        let (back_tx, back_rx) = oneshot::channel();
        self.pending.borrow_mut().insert(id, back_tx);
        if let Err(e) = self.send(shard, Msg::Call { origin: self.id.0, id, msg, relay }).await {
            self.pending.borrow_mut().remove(&id);
            return Err(e);
        }
        let value = metrics::remote(back_rx).await.map_err(peer_gone)?;
        value.downcast::<Option<T>>().ok().and_then(|v| *v).ok_or(ErrorCode::NotLeaderOrFollower)
    }

    async fn send(&self, shard: usize, msg: Msg) -> Result<(), ErrorCode> {
        let peer = self.peers.get(shard).and_then(Option::as_ref).ok_or(ErrorCode::NotLeaderOrFollower)?;
        match peer.try_send(msg) {
            Ok(()) => {}
            Err(GlommioError::WouldBlock(ResourceType::Channel(msg))) => {
                self.probe.mesh_queue_full();
                metrics::remote(peer.send(msg)).await.map_err(peer_gone)?;
            }
            Err(e) => return Err(peer_gone(e)),
        }
        self.probe.mesh_sent();
        Ok(())
    }

    /// Waits for an append's ack, counting it as a delayed produce when it is not there yet.
    async fn acked(&self, mut rx: oneshot::Receiver<Result<Appended, ErrorCode>>) -> Result<Appended, ErrorCode> {
        match rx.try_recv() {
            Ok(Some(r)) => return r,
            Ok(None) => self.probe.delayed_produce(),
            Err(_) => return Err(ErrorCode::KafkaStorageError),
        }
        metrics::remote(rx).await.unwrap_or(Err(ErrorCode::KafkaStorageError))
    }

    /// Appends a produced batch on the partition's home shard.
    pub async fn produce(&self, tp: Tp, records: Bytes) -> Result<Appended, ErrorCode> {
        let home = self.home(&tp)?;
        if home == self.id.0 {
            let rx = self.log(&tp)?.append(&records)?;
            return self.acked(rx).await;
        }
        self.call(home, |reply| Msg::Produce { tp, records, reply }).await?
    }

    pub async fn fetch(&self, tp: Tp, offset: i64, max_bytes: u32) -> Result<ReadOut, ErrorCode> {
        let home = self.home(&tp)?;
        if home == self.id.0 {
            return self.log(&tp)?.read(offset, max_bytes, true);
        }
        self.call(home, |reply| Msg::Fetch { tp, offset, max_bytes, reply }).await?
    }

    /// A receiver that completes when the partition's high watermark passes `offset`, or
    /// after about `wait` (the home shard stops watching then, so idle partitions do not
    /// collect watchers).
    pub async fn watch(
        self: &Rc<Self>,
        tp: Tp,
        offset: i64,
        wait: Duration,
    ) -> Result<oneshot::Receiver<()>, ErrorCode> {
        let home = self.home(&tp)?;
        let (notify, rx) = oneshot::channel();
        if home == self.id.0 {
            self.log(&tp)?.watch(offset, notify);
        } else {
            let me = self.clone();
            glommio::spawn_local(async move {
                let _ = me.call(home, |reply| Msg::Watch { tp, offset, wait, reply }).await;
                let _ = notify.send(());
            })
            .detach();
        }
        Ok(rx)
    }

    pub async fn offsets(&self, tp: Tp) -> Result<Offsets, ErrorCode> {
        let home = self.home(&tp)?;
        if home == self.id.0 {
            return Ok(self.log(&tp)?.offsets());
        }
        self.call(home, |reply| Msg::Offsets { tp, reply }).await?
    }

    /// DeleteRecords on the partition's home shard: the new log start.
    pub async fn delete_records(&self, tp: Tp, offset: i64) -> Result<i64, ErrorCode> {
        let home = self.home(&tp)?;
        if home == self.id.0 {
            return self.log(&tp)?.delete_records(offset);
        }
        self.call(home, |reply| Msg::DeleteRecords { tp, offset, reply }).await?
    }

    /// The partition's idempotent producers, from its home shard.
    pub async fn producers(&self, tp: Tp) -> Result<Vec<crate::producer::ProducerSummary>, ErrorCode> {
        let home = self.home(&tp)?;
        if home == self.id.0 {
            return Ok(self.log(&tp)?.producers());
        }
        self.call(home, |reply| Msg::Producers { tp, reply }).await?
    }

    pub async fn offset_for_time(&self, tp: Tp, timestamp: i64) -> Result<Option<(i64, i64)>, ErrorCode> {
        let home = self.home(&tp)?;
        if home == self.id.0 {
            return local_offset_for_time(&*self.log(&tp)?, timestamp);
        }
        self.call(home, |reply| Msg::OffsetForTime { tp, timestamp, reply }).await?
    }

    /// Runs the controller request `make(reply)` on shard 0 and waits for its answer.
    async fn on_controller<T: Send + 'static>(
        self: &Rc<Self>,
        make: impl FnOnce(oneshot::Sender<T>) -> ControllerOp,
    ) -> Result<T, ErrorCode> {
        if self.id.0 != 0 {
            return self.call(0, |reply| Msg::Controller(make(reply))).await;
        }
        let (tx, rx) = oneshot::channel();
        controller::run(self, make(tx)).await;
        rx.await.map_err(|_| ErrorCode::NotController)
    }

    pub async fn create_topics(self: &Rc<Self>, topics: Vec<NewTopic>, validate_only: bool) -> Vec<TopicResult> {
        let n = topics.len();
        self.on_controller(|reply| ControllerOp::CreateTopics { topics, validate_only, reply })
            .await
            .unwrap_or_else(|e| vec![Err(unreachable(e)); n])
    }

    pub async fn alter_configs(
        self: &Rc<Self>,
        changes: Vec<ConfigChange>,
        validate_only: bool,
    ) -> Vec<Result<(), Failure>> {
        let n = changes.len();
        self.on_controller(|reply| ControllerOp::AlterConfigs { changes, validate_only, reply })
            .await
            .unwrap_or_else(|e| vec![Err(unreachable(e)); n])
    }

    pub async fn create_partitions(
        self: &Rc<Self>,
        asks: Vec<NewPartitions>,
        validate_only: bool,
    ) -> Vec<Result<(), Failure>> {
        let n = asks.len();
        self.on_controller(|reply| ControllerOp::CreatePartitions { asks, validate_only, reply })
            .await
            .unwrap_or_else(|e| vec![Err(unreachable(e)); n])
    }

    pub async fn alter_client_quotas(
        self: &Rc<Self>,
        changes: Vec<QuotaChange>,
        validate_only: bool,
    ) -> Vec<Result<(), Failure>> {
        let n = changes.len();
        self.on_controller(|reply| ControllerOp::AlterClientQuotas { changes, validate_only, reply })
            .await
            .unwrap_or_else(|e| vec![Err(unreachable(e)); n])
    }

    pub async fn delete_topics(self: &Rc<Self>, names: Vec<String>) -> Vec<Result<uuid::Uuid, ErrorCode>> {
        let n = names.len();
        self.on_controller(|reply| ControllerOp::DeleteTopics { names, reply })
            .await
            .unwrap_or_else(|e| vec![Err(e); n])
    }

    pub async fn create_acls(self: &Rc<Self>, bindings: Vec<crate::auth::acl::AclBinding>) -> Result<(), Failure> {
        self.on_controller(|reply| ControllerOp::CreateAcls { bindings, reply })
            .await
            .unwrap_or_else(|e| Err(unreachable(e)))
    }

    pub async fn delete_acls(
        self: &Rc<Self>,
        filters: Vec<crate::auth::acl::AclFilter>,
    ) -> Result<Vec<Vec<crate::auth::acl::AclBinding>>, Failure> {
        self.on_controller(|reply| ControllerOp::DeleteAcls { filters, reply })
            .await
            .unwrap_or_else(|e| Err(unreachable(e)))
    }

    pub async fn alter_credentials(
        self: &Rc<Self>,
        changes: Vec<(String, CredentialChange)>,
    ) -> Vec<Result<(), Failure>> {
        let n = changes.len();
        self.on_controller(|reply| ControllerOp::AlterCredentials { changes, reply })
            .await
            .unwrap_or_else(|e| vec![Err(unreachable(e)); n])
    }

    /// A new producer id from the controller.
    pub async fn allocate_producer_id(self: &Rc<Self>) -> Result<i64, ErrorCode> {
        self.on_controller(|reply| ControllerOp::AllocateProducerId { reply }).await?
    }

    /// Installs a catalog snapshot: opens partitions newly homed here, closes and deletes
    /// those of deleted topics. Older snapshots than the current one are ignored.
    pub async fn apply_catalog(&self, catalog: Arc<Catalog>) {
        if catalog.version < self.catalog.borrow().version {
            return;
        }
        let mut wanted = Vec::new();
        for t in catalog.topics.values() {
            for (p, &home) in t.homes.iter().enumerate() {
                let tp = Tp { topic: t.id, partition: p as i32 };
                if home == self.id.0 && !self.logs.borrow().contains_key(&tp) {
                    wanted.push((t.name.clone(), tp));
                }
            }
        }
        let gone: Vec<(Tp, Rc<Partition>)> = self
            .logs
            .borrow()
            .iter()
            .filter(|(tp, _)| catalog.topic_by_id(&tp.topic).is_none())
            .map(|(tp, p)| (*tp, p.clone()))
            .collect();
        for (tp, p) in gone {
            self.logs.borrow_mut().remove(&tp);
            if let Err(e) = p.close().await {
                tracing::warn!(topic = %p.topic, partition = p.index, "closing deleted partition: {e}");
            }
            if let Err(e) = p.delete_files() {
                tracing::warn!(topic = %p.topic, partition = p.index, "deleting partition files: {e}");
            }
        }
        // Partitions that stay get their topic's current configs (they, or the dynamic broker
        // defaults under them, may have changed).
        for (tp, p) in self.logs.borrow().iter() {
            if let Some(t) = catalog.topic_by_id(&tp.topic) {
                p.set_config(self.topic_log_config(&catalog, &t.configs));
            }
        }
        for (name, tp) in wanted {
            let topic = &catalog.topics[&name];
            let dir = self.config.data_dir.join(Partition::dir_name(&name, tp.partition));
            let cfg = self.topic_log_config(&catalog, &topic.configs);
            match Partition::open(&name, tp.partition, dir, cfg, self.probe.clone()).await {
                Ok(p) => {
                    self.logs.borrow_mut().insert(tp, p);
                }
                Err(e) => tracing::error!(topic = %name, partition = tp.partition, "cannot open partition: {e}"),
            }
        }
        if self.catalog.borrow().client_quotas != catalog.client_quotas {
            self.quotas.set_table(self.quota_table(&catalog));
        }
        if self.acls.borrow().bindings() != catalog.acls.as_slice() {
            *self.acls.borrow_mut() = Rc::new(Acls::new(catalog.acls.clone()));
        }
        *self.catalog.borrow_mut() = catalog;
        self.probe.partitions(self.logs.borrow().len());
    }

    /// Serves messages from one peer shard until it goes away. Each message runs in its own
    /// task so a slow append never holds up the next message.
    pub async fn serve_peer(self: Rc<Self>, rx: ConnectedReceiver<Msg>) {
        while let Some(msg) = rx.recv().await {
            self.probe.mesh_received();
            match msg {
                Msg::Call { origin, id, msg, relay } => {
                    let me = self.clone();
                    glommio::spawn_local(async move {
                        let value = relay.await;
                        let _ = me.send(origin, Msg::Reply { id, value }).await;
                    })
                    .detach();
                    let me = self.clone();
                    glommio::spawn_local(async move { me.handle(*msg).await }).detach();
                }
                Msg::Reply { id, value } => {
                    if let Some(tx) = self.pending.borrow_mut().remove(&id) {
                        let _ = tx.send(value);
                    }
                }
                msg => {
                    let me = self.clone();
                    glommio::spawn_local(async move { me.handle(msg).await }).detach();
                }
            }
        }
    }

    async fn handle(self: Rc<Self>, msg: Msg) {
        match msg {
            Msg::Produce { tp, records, reply } => {
                let r = match self.log(&tp).and_then(|p| p.append(&records)) {
                    Ok(rx) => self.acked(rx).await,
                    Err(e) => Err(e),
                };
                let _ = reply.send(r);
            }
            Msg::Fetch { tp, offset, max_bytes, reply } => {
                let _ = reply.send(self.log(&tp).and_then(|p| p.read(offset, max_bytes, true)));
            }
            Msg::Watch { tp, offset, wait, reply } => {
                // Answered when the data arrives or the wait is over; an unknown partition
                // answers at once (the fetch then sees the error).
                if let Ok(p) = self.log(&tp) {
                    let (local, arrived) = oneshot::channel();
                    p.watch(offset, local);
                    futures_lite::future::or(async { arrived.await.unwrap_or(()) }, glommio::timer::sleep(wait)).await;
                }
                let _ = reply.send(());
            }
            Msg::Call { .. } | Msg::Reply { .. } => {
                tracing::error!("a call or reply reached the message handler; serve_peer unwraps them")
            }
            Msg::Offsets { tp, reply } => {
                let _ = reply.send(self.log(&tp).map(|p| p.offsets()));
            }
            Msg::DeleteRecords { tp, offset, reply } => {
                let _ = reply.send(self.log(&tp).and_then(|p| p.delete_records(offset)));
            }
            Msg::Producers { tp, reply } => {
                let _ = reply.send(self.log(&tp).map(|p| p.producers()));
            }
            Msg::OffsetForTime { tp, timestamp, reply } => {
                let _ = reply.send(self.log(&tp).and_then(|p| local_offset_for_time(&p, timestamp)));
            }
            Msg::ApplyCatalog { catalog, reply } => {
                self.apply_catalog(catalog).await;
                let _ = reply.send(());
            }
            Msg::Group { group, op } => self.run_group_op(group, op).await,
            Msg::Controller(op) => controller::run(&self, op).await,
            Msg::ListGroups { states, reply } => {
                let _ = reply.send(self.groups.list(&states));
            }
        }
    }

    /// The `__consumer_offsets` partition of a group and the shard that homes it.
    fn group_home(&self, group: &str) -> Result<(usize, Tp), ErrorCode> {
        let cat = self.catalog.borrow();
        let t = cat.topic(offsets::TOPIC).ok_or(ErrorCode::CoordinatorNotAvailable)?;
        let p = offsets::partition_for(group, t.homes.len() as u32);
        Ok((t.homes[p as usize], Tp { topic: t.id, partition: p }))
    }

    /// Runs the group operation `make(reply)` on the group's home shard and waits for its
    /// reply; an unreachable home is COORDINATOR_NOT_AVAILABLE (clients retry).
    pub async fn group_op<T: Send + 'static>(
        &self,
        group: String,
        make: impl FnOnce(oneshot::Sender<T>) -> GroupOp,
    ) -> Result<T, ErrorCode> {
        let (home, _) = self.group_home(&group)?;
        if home == self.id.0 {
            let (tx, rx) = oneshot::channel();
            // A group op parks on its offsets log's durable append or, for a join, on the
            // rebalance (Kafka's delayed join): remote time. Its own work is a little
            // bookkeeping, counted with the wait.
            return metrics::remote(async {
                self.run_group_op(group, make(tx)).await;
                rx.await.map_err(|_| ErrorCode::CoordinatorNotAvailable)
            })
            .await;
        }
        self.call(home, move |tx| Msg::Group { group, op: make(tx) })
            .await
            .map_err(|_| ErrorCode::CoordinatorNotAvailable)
    }

    async fn run_group_op(&self, group: String, op: GroupOp) {
        let log = self.group_home(&group).ok().and_then(|(_, tp)| self.log(&tp).ok());
        self.groups.handle(group, op, log).await;
    }

    /// ListGroups across every shard.
    pub async fn list_groups(&self, states: Vec<String>) -> Vec<GroupListing> {
        let mut out = self.groups.list(&states);
        for shard in (0..self.count).filter(|s| *s != self.id.0) {
            let states = states.clone();
            out.extend(self.call(shard, |reply| Msg::ListGroups { states, reply }).await.unwrap_or_default());
        }
        out.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        out
    }

    /// Rebuilds the committed offsets of the groups homed here from the local
    /// `__consumer_offsets` partitions (at start, after they are open).
    pub fn replay_group_offsets(&self) {
        let Some(topic) = self.catalog.borrow().topic(offsets::TOPIC).map(|t| t.id) else { return };
        let logs: Vec<Rc<Partition>> =
            self.logs.borrow().iter().filter(|(tp, _)| tp.topic == topic).map(|(_, p)| p.clone()).collect();
        let mut records = Vec::new();
        for p in logs {
            if let Err(e) = p.scan_batches(|b| records.extend(offsets::from_batch(b))) {
                tracing::error!(partition = p.index, "cannot replay {}: {e}", offsets::TOPIC);
            }
        }
        self.groups.replay(records);
    }

    /// Session/rebalance timers of the groups homed here.
    pub fn tick_groups(&self) {
        self.groups.tick();
    }

    /// Removes committed offsets of empty groups past `offsets_retention_minutes`.
    pub async fn expire_group_offsets(&self) {
        for (group, records) in self.groups.expire_offsets() {
            let log = self.group_home(&group).ok().and_then(|(_, tp)| self.log(&tp).ok());
            self.groups.apply_expiry(&group, records, log).await;
        }
    }

    /// Sends a catalog snapshot to every shard (this one included) and waits until all
    /// have applied it.
    pub async fn broadcast_catalog(&self, catalog: Arc<Catalog>) {
        for shard in (0..self.count).filter(|s| *s != self.id.0) {
            let catalog = catalog.clone();
            let _ = self.call(shard, |reply| Msg::ApplyCatalog { catalog, reply }).await;
        }
        self.apply_catalog(catalog).await;
    }

    /// Runs retention over this shard's partitions.
    pub fn apply_retention(&self) {
        let now = crate::log::partition::unix_now_ms();
        let logs: Vec<_> = self.logs.borrow().values().cloned().collect();
        for p in logs {
            p.apply_retention(now);
        }
    }

    /// Clean shutdown of every local partition.
    pub async fn close_all(&self) {
        let logs: Vec<_> = self.logs.borrow_mut().drain().map(|(_, p)| p).collect();
        self.probe.partitions(0);
        for p in logs {
            if let Err(e) = p.close().await {
                tracing::error!(topic = %p.topic, partition = p.index, "clean close failed: {e}");
            }
        }
    }

    pub fn local_partition_count(&self) -> usize {
        self.logs.borrow().len()
    }
}

fn local_offset_for_time(p: &Partition, timestamp: i64) -> Result<Option<(i64, i64)>, ErrorCode> {
    if timestamp == -3 {
        return Ok(p.max_timestamp_offset());
    }
    p.offset_for_time(timestamp)
}
