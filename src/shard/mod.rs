//! A shard: one pinned executor that owns its listener, connections and the partitions
//! homed on it. `Shard` is the per-executor context the API handlers work through: it holds
//! this shard's catalog snapshot and ACL index, routes partition operations to their home
//! shards (`partitions`), group operations to their coordinators (`groups`) and metadata
//! changes to the controller on shard 0 (`controller`), all over the mesh (`mesh`).
//!
//! Metrics recorded here: partitions homed on this shard, mesh messages sent and received,
//! sends that found a peer's queue full (backpressure: the send then waits, it never
//! fails), and appends whose ack had to wait (delayed produce). Waiting on another shard
//! or on an append's ack is wrapped in `metrics::remote`, so it counts as the request's
//! remote time.

mod catalog;
mod cleaning;
pub mod cluster;
pub mod controller;
mod forward;
mod groups;
mod leaderships;
pub mod mesh;
mod partitions;
mod quorum;
mod reassign;

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use glommio::channels::shared_channel::ConnectedSender;
use uuid::Uuid;

use crate::auth::acl::{Acls, AuthorizerConfig, Operation, ResourceType as AclResource};
use crate::auth::Session;
use crate::config::Config;
use crate::controller::Controller;
use crate::fetch_session::FetchSessions;
use crate::group::coordinator::Coordinator;
use crate::group::GroupLimits;
use crate::log::{LogConfig, Partition};
use crate::metadata::Catalog;
use crate::metrics::Probe;
use crate::quota::{ClientQuota, QuotaTable};
pub use mesh::Msg;
pub use partitions::{
    alone_epoch, alone_epoch_end, EpochAsk, FetchAsk, OffsetQuery, PartResult, ProduceAcks, Produced, Share,
};

/// A topic partition by topic id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Tp {
    pub topic: Uuid,
    pub partition: i32,
}

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
    peers: Vec<Option<mesh::PeerSender<Msg>>>,
    /// The controller, on shard 0 only.
    controller: Option<RefCell<Controller>>,
    /// The consumer groups homed on this shard.
    pub groups: Coordinator,
    /// This shard's metrics.
    pub probe: Probe,
    /// Client quotas, measured broker-wide (see `quota`).
    pub quotas: crate::quota::ShardQuotas,
    /// The quotas of the config file, environment and flags (the catalog's come over them).
    static_quotas: StaticQuotas,
    /// The fetch sessions of this shard's connections (see `fetch_session` for why per shard).
    pub fetch_sessions: FetchSessions,
    /// This shard's part of the cluster, when the broker is a member of one.
    cluster: std::cell::OnceCell<Rc<cluster::ShardCluster>>,
    /// A catalog publication is scheduled (`quorum`).
    publishing: std::cell::Cell<bool>,
    /// In a cluster, the `__consumer_offsets` partitions homed here whose groups this shard
    /// coordinates: those it leads and has replayed (`groups`).
    coordinated: RefCell<std::collections::HashSet<i32>>,
    /// Outside a cluster: whether the start-up replay of `__consumer_offsets` has run, and the
    /// partitions it could not read (`groups`). Until then, and for those, the groups homed
    /// here are not served: an empty coordinator would answer "no committed offset".
    offsets_replayed: std::cell::Cell<bool>,
    /// This shard has handed its leaderships over, stopping (`close_all`).
    handed_over: std::cell::Cell<bool>,
    offsets_unreadable: RefCell<std::collections::HashSet<i32>>,
    /// Held while a catalog snapshot is installed (`catalog`).
    applying: glommio::sync::Semaphore,
    /// Logs whose last cleaning failed, and when they may be tried again (`cleaning`).
    cleaning_failed: RefCell<HashMap<Tp, std::time::Instant>>,
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
        let mut seed = [0u8; 8];
        if getrandom::getrandom(&mut seed).is_err() {
            // No entropy source: ids are still unique, only easier to guess.
            seed = (crate::sys::unix_now_ms() as u64 ^ id.0 as u64).to_le_bytes();
        }
        let fetch_sessions = FetchSessions::new(
            id.0,
            count,
            config.max_incremental_fetch_session_cache_slots,
            config.min_incremental_fetch_session_eviction_ms,
            u64::from_le_bytes(seed),
        );
        Rc::new(Shard {
            fetch_sessions,
            groups: Coordinator::new(limits, retention_ms),
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
            peers: peers.into_iter().map(|p| p.map(mesh::PeerSender::new)).collect(),
            controller,
            quotas: crate::quota::ShardQuotas::new(quotas, static_quotas.table(&catalog_quotas)),
            static_quotas,
            probe,
            cluster: std::cell::OnceCell::new(),
            publishing: std::cell::Cell::new(false),
            coordinated: RefCell::default(),
            offsets_replayed: std::cell::Cell::new(false),
            handed_over: std::cell::Cell::new(false),
            offsets_unreadable: RefCell::default(),
            applying: glommio::sync::Semaphore::new(1),
            cleaning_failed: RefCell::new(HashMap::new()),
        })
    }

    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog.borrow().clone()
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

    /// Runs retention over this shard's partitions, and forgets their idle producers.
    pub fn apply_retention(&self) {
        let now = crate::sys::unix_now_ms();
        let logs: Vec<_> = self.logs.borrow().values().cloned().collect();
        for p in logs {
            p.apply_retention(now);
            p.expire_producers(now);
        }
        // A replicated log's start moves with its replica (`Group::apply_retention`).
        for (_, g) in self.cluster().map(|c| c.groups()).unwrap_or_default() {
            g.apply_retention(now);
        }
    }

    /// Clean shutdown of every local partition.
    pub async fn close_all(self: &Rc<Self>) {
        if let Some(c) = self.cluster() {
            c.hand_over_leaderships().await;
            self.handed_over.set(true);
            if self.id.0 == 0 {
                // Every peer's message, the new leaders' answers to the other shards'
                // transfers included, arrives through shard 0's cluster listener: it stays
                // up until every shard has handed its leaderships over.
                self.await_other_shards_handed_over().await;
            }
        }
        // Replicas first: stopping one closes its log.
        for (tp, g) in self.cluster().map(|c| c.groups()).unwrap_or_default() {
            self.cluster().map(|c| c.remove_group(&tp));
            self.logs.borrow_mut().remove(&tp);
            if let Err(e) = g.stop().await {
                tracing::error!(group = ?g.id(), "clean stop of a replica failed: {e}");
            }
        }
        if let Some(meta) = self.cluster().and_then(|c| c.meta()) {
            if let Err(e) = meta.quorum.group().stop().await {
                tracing::error!("clean stop of the metadata quorum's replica failed: {e}");
            }
        }
        let logs: Vec<_> = self.logs.borrow_mut().drain().map(|(_, p)| p).collect();
        self.probe.partitions(0);
        for p in logs {
            if let Err(e) = p.close().await {
                tracing::error!(topic = %p.topic, partition = p.index, "clean close failed: {e}");
            }
        }
    }

    async fn await_other_shards_handed_over(self: &Rc<Self>) {
        let others = (1..self.count).map(|shard| {
            self.call(shard, |here| async move {
                while !here.handed_over.get() {
                    glommio::timer::sleep(std::time::Duration::from_millis(20)).await;
                }
            })
        });
        // A shard that stopped already answers nothing; the hand-overs are bounded anyway.
        let all = mesh::join_all(others);
        let _ = glommio::timer::timeout(cluster::HANDOVER_WAIT + std::time::Duration::from_secs(1), async {
            all.await;
            Ok(())
        })
        .await;
    }

    pub fn local_partition_count(&self) -> usize {
        self.logs.borrow().len()
    }
}
