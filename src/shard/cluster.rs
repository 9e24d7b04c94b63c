//! This shard's part of a cluster (DESIGN §9): the raft groups of the replicated partitions
//! homed here, one transport to the peer brokers, one tick timer for all the groups, and
//! what this broker knows of every partition's leadership (`View`), for Metadata. Shard 0
//! also runs the cluster listener and the metadata quorum (`shard::controller`).
//!
//! Messages from peers arrive on shard 0's cluster listener and hop to the partition's home
//! shard over the mesh; what a shard sends goes out on its own connections.
//!
//! Leadership views: each home shard looks at its groups every tick and, when a leader, an
//! epoch or an ISR changed, hands the new views to every shard. Brokers tell each other what
//! they lead (`shard::leaderships`), so a broker also knows the leaders of partitions it holds
//! no replica of; a told view gives way to one with a later epoch and to the broker's own.

use std::cell::{Cell, OnceCell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::rc::Rc;

use glommio::Task;

use super::{Shard, Tp};
use crate::cluster::frame::{GroupId, Item};
use crate::cluster::group::{Group, GroupConfig};
use crate::cluster::quorum::Quorum;
use crate::cluster::replica::ReplicaConfig;
use crate::cluster::throttle::{Throttle, Throttled};
use crate::cluster::transport::{self, Transport};
use crate::config::ClusterSettings;
use crate::log::config::{self, ThrottledReplicas};
use crate::log::Partition;
use crate::metadata::{Catalog, TopicMeta};

/// The metadata quorum's log, on shard 0 of every member.
pub use crate::metadata::METADATA_TOPIC;
/// How long a stopping broker waits for its leaderships to move (controlled shutdown).
pub(super) const HANDOVER_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
/// How often a leadership transfer that has not happened is asked for again.
const HANDOVER_RETRY: std::time::Duration = std::time::Duration::from_millis(500);
/// Bytes of recent batches each group keeps in memory for followers and commits.
const GROUP_CACHE_BYTES: usize = 8 << 20;

/// A partition's leadership as this broker knows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct View {
    /// -1: none known.
    pub leader: i32,
    pub epoch: i32,
    /// The voters in sync, as the leader sees them (a follower lists every voter).
    pub isr: Vec<i32>,
    /// The replicas the leader has not heard from within `replica_lag_time_max_ms`
    /// (Metadata's offline replicas); none known at a follower.
    #[serde(default)]
    pub offline: Vec<i32>,
}

/// The metadata quorum, on shard 0.
pub struct Meta {
    pub quorum: Rc<Quorum>,
    /// Controller requests run one at a time: each decides on the catalog the ones before it
    /// committed.
    pub turn: glommio::sync::Semaphore,
}

pub struct ShardCluster {
    pub node_id: i32,
    pub settings: ClusterSettings,
    transport: Rc<Transport>,
    /// This shard's share of the replication throttle rates (see `cluster::throttle`).
    throttle: Rc<Throttle>,
    logger: slog::Logger,
    groups: RefCell<HashMap<Tp, Rc<Group>>>,
    meta: OnceCell<Meta>,
    views: RefCell<HashMap<Tp, View>>,
    /// What the leaders of partitions with no replica here told of their leadership.
    told: RefCell<HashMap<Tp, View>>,
    /// Whether `views` changed since shard 0 last told the peers what this broker leads.
    pub(super) views_changed: Cell<bool>,
    /// When shard 0 last told the peers (see `shard::leaderships`).
    pub(super) told_peers_at: Cell<Option<std::time::Instant>>,
    /// The metadata quorum's leader as this shard last heard (-1: none).
    controller_id: Cell<i32>,
    tasks: RefCell<Vec<Task<()>>>,
    /// Partitions whose finished reassignment is being reported to the controller.
    pub(super) reporting: RefCell<std::collections::HashSet<Tp>>,
    /// When this shard next hands leaderships back to preferred replicas.
    pub(super) next_rebalance: Cell<Option<std::time::Instant>>,
    /// On shard 0: raft messages from peers for groups homed on each other shard, in the
    /// order they arrived, and whether a task is handing them over (`forward_raft`).
    forwarding: RefCell<HashMap<usize, Forwarding>>,
}

/// Raft messages on their way from shard 0 to one other shard.
#[derive(Default)]
struct Forwarding {
    queue: VecDeque<(Tp, raft::prelude::Message)>,
    /// Whether a task is handing the queue over.
    running: bool,
}

/// Raft messages shard 0 holds for one other shard at most; beyond, new ones are dropped
/// (raft sends again what it misses) rather than held while that shard is stalled.
const FORWARD_QUEUE_MAX: usize = 16_384;

fn id64(id: i32) -> u64 {
    id as u64
}

fn id32(id: u64) -> i32 {
    i32::try_from(id).unwrap_or(-1)
}

impl ShardCluster {
    pub fn new(node_id: i32, settings: ClusterSettings) -> Rc<ShardCluster> {
        let peers: HashMap<u64, SocketAddr> = settings.voters.iter().map(|(id, a)| (id64(*id), *a)).collect();
        Rc::new(ShardCluster {
            node_id,
            transport: Transport::new(id64(node_id), &peers),
            throttle: Rc::default(),
            settings,
            logger: crate::cluster::logging::logger(),
            groups: RefCell::default(),
            meta: OnceCell::new(),
            views: RefCell::default(),
            told: RefCell::default(),
            views_changed: Cell::new(false),
            told_peers_at: Cell::new(None),
            controller_id: Cell::new(-1),
            tasks: RefCell::default(),
            reporting: RefCell::default(),
            next_rebalance: Cell::new(None),
            forwarding: RefCell::default(),
        })
    }

    pub fn transport(&self) -> &Rc<Transport> {
        &self.transport
    }

    pub fn meta(&self) -> Option<&Meta> {
        self.meta.get()
    }

    pub fn group(&self, tp: &Tp) -> Option<Rc<Group>> {
        self.groups.borrow().get(tp).cloned()
    }

    pub fn controller_id(&self) -> i32 {
        self.controller_id.get()
    }

    /// A partition's leadership: this broker's own view if it holds a replica, else what its
    /// leader told.
    pub fn view(&self, tp: &Tp) -> Option<View> {
        self.views.borrow().get(tp).or(self.told.borrow().get(tp)).cloned()
    }

    /// The views of the partitions this broker leads.
    pub(super) fn led_views(&self) -> Vec<(Tp, View)> {
        let views = self.views.borrow();
        views.iter().filter(|(_, v)| v.leader == self.node_id).map(|(tp, v)| (*tp, v.clone())).collect()
    }

    /// Takes a peer's word for the leadership of partitions, unless a later epoch is known.
    pub(super) fn take_told(&self, views: &[(Tp, View)]) {
        let mut told = self.told.borrow_mut();
        for (tp, v) in views {
            if told.get(tp).is_none_or(|old| old.epoch <= v.epoch) {
                told.insert(*tp, v.clone());
            }
        }
    }

    fn group_config(&self, voters: &[i32], metadata: bool) -> GroupConfig {
        let election = self.settings.election_ticks;
        GroupConfig {
            node_id: id64(self.node_id),
            voters: voters.iter().map(|v| id64(*v)).collect(),
            replica: ReplicaConfig {
                election_tick: election,
                max_election_tick: 2 * election,
                heartbeat_tick: 1,
                skip_bcast_commit: !metadata,
                ..ReplicaConfig::default()
            },
            cache_bytes: GROUP_CACHE_BYTES,
            replica_lag: self.settings.replica_lag,
        }
    }

    /// Starts the raft group of a replicated partition over its opened log, and serves it.
    pub async fn open_group(&self, topic: &TopicMeta, tp: Tp, log: Rc<Partition>) -> Result<Rc<Group>, String> {
        let p = tp.partition;
        // A replica a reassignment added starts outside the configuration it replays.
        let new_group = !topic.first_voters.contains_key(&p);
        let g = self.start_group(&topic.name, topic.id, p, topic.first_voters_of(p), new_group, log).await?;
        self.groups.borrow_mut().insert(tp, g.clone());
        Ok(g)
    }

    /// Starts the raft group over `log` with `voters` (the first is the preferred leader).
    /// `new_group`: the voters are those the group is created with, not a configuration
    /// that changed since.
    pub async fn start_group(
        &self,
        topic: &str,
        topic_id: uuid::Uuid,
        partition: i32,
        voters: &[i32],
        new_group: bool,
        log: Rc<Partition>,
    ) -> Result<Rc<Group>, String> {
        let id = GroupId::new(topic, partition).with_topic_id(topic_id);
        let fresh = !log.dir().join(crate::cluster::group::STATE_FILE).exists();
        let logger = self.logger.new(slog::o!("group" => format!("{topic}/{partition}")));
        let g =
            Group::open(id, log, &self.group_config(voters, topic == METADATA_TOPIC), self.transport.clone(), &logger)
                .await
                .map_err(|e| e.to_string())?;
        // A new group's preferred replica stands at once: leaders spread as the assignment
        // dealt them, and the partition is writable within a round trip rather than an
        // election timeout.
        if fresh && new_group && voters.first() == Some(&self.node_id) {
            g.campaign();
        }
        Ok(g)
    }

    /// Stops the group of a partition leaving this broker (deleted, or moved away), and
    /// this shard's view of its leadership.
    pub fn remove_group(&self, tp: &Tp) -> Option<Rc<Group>> {
        self.forget_view(tp);
        self.groups.borrow_mut().remove(tp)
    }

    /// Forgets the leadership of a partition this broker no longer holds a replica of.
    pub fn forget_view(&self, tp: &Tp) {
        self.views.borrow_mut().remove(tp);
        self.views_changed.set(true);
    }

    /// Applies the catalog's replication throttles: this shard's share (of `shards`) of this
    /// broker's leader rate and of each peer's follower rate, and what each topic's lists
    /// say of the partitions led from here.
    pub fn set_throttles(&self, catalog: &Catalog, shards: usize) {
        let share =
            |rate: Option<u64>| rate.filter(|r| *r != config::UNTHROTTLED).map(|r| (r / shards.max(1) as u64).max(1));
        let followers: Vec<(u64, Option<u64>)> = (self.settings.members().into_iter())
            .filter(|m| *m != self.node_id)
            .map(|m| (id64(m), share(catalog.replication_rate(m, config::FOLLOWER_REPLICATION_RATE))))
            .collect();
        let leader = share(catalog.replication_rate(self.node_id, config::LEADER_REPLICATION_RATE));
        self.throttle.set_rates(leader, &followers, std::time::Instant::now());
        for (tp, g) in self.groups() {
            let Some(t) = catalog.topic_by_id(&tp.topic) else { continue };
            let list =
                |name: &str| t.configs.get(name).and_then(|v| ThrottledReplicas::parse(v).ok()).unwrap_or_default();
            let leaders = list(config::LEADER_THROTTLED_REPLICAS);
            let throttled =
                Throttled::new(tp.partition, self.node_id, &leaders, list(config::FOLLOWER_THROTTLED_REPLICAS));
            g.set_throttle((!throttled.is_none()).then(|| (self.throttle.clone(), throttled)));
        }
    }

    pub fn groups(&self) -> Vec<(Tp, Rc<Group>)> {
        self.groups.borrow().iter().map(|(tp, g)| (*tp, g.clone())).collect()
    }

    pub fn set_meta(&self, meta: Meta) {
        let _ = self.meta.set(meta);
    }

    /// Controlled shutdown: hands every leadership of this shard (the metadata quorum's
    /// included) to an in-sync voter and waits, at most `HANDOVER_WAIT`, until none is led
    /// from here, so that clients see NOT_LEADER_OR_FOLLOWER and move on instead of waiting
    /// out an election timeout.
    pub async fn hand_over_leaderships(&self) {
        let me = id64(self.node_id);
        let mut groups: Vec<Rc<Group>> = self.groups().into_iter().map(|(_, g)| g).collect();
        groups.extend(self.meta().map(|m| m.quorum.group().clone()));
        let leading = |groups: &[Rc<Group>]| -> Vec<Rc<Group>> {
            groups.iter().filter(|g| g.leader() == Some(me)).cloned().collect()
        };
        let before = leading(&groups).len();
        if before == 0 {
            return;
        }
        let deadline = std::time::Instant::now() + HANDOVER_WAIT;
        let mut asked = std::time::Instant::now() - HANDOVER_RETRY;
        loop {
            let still = leading(&groups);
            if still.is_empty() || std::time::Instant::now() > deadline {
                match still.len() {
                    0 => tracing::info!(leaderships = before, "handed every leadership over before stopping"),
                    n => tracing::warn!(
                        leaderships = before,
                        still = n,
                        "some leaderships were not handed over in time: their partitions elect anew"
                    ),
                }
                return;
            }
            if asked.elapsed() >= HANDOVER_RETRY {
                // raft-rs drops a transfer whose target does not catch up: ask again.
                for g in &still {
                    if let Some(to) = g.in_sync_ids().into_iter().find(|id| *id != me) {
                        g.transfer_leader(to);
                    }
                }
                asked = std::time::Instant::now();
            }
            glommio::timer::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    fn hold(&self, task: Task<()>) {
        self.tasks.borrow_mut().push(task);
    }
}

impl Shard {
    pub fn cluster(&self) -> Option<&Rc<ShardCluster>> {
        self.cluster.get()
    }

    /// Joins this shard to the cluster: its transport, and every tick its groups' clocks and
    /// leadership views. Shard 0 also listens for peers (`listener`).
    pub fn join_cluster(self: &Rc<Self>, cluster: Rc<ShardCluster>, listener: Option<glommio::net::TcpListener>) {
        let _ = self.cluster.set(cluster.clone());
        if let Some(listener) = listener {
            let weak = Rc::downgrade(self);
            let deliver: transport::Deliver = Rc::new(move |from, item| {
                if let Some(shard) = weak.upgrade() {
                    shard.deliver(from, item);
                }
            });
            cluster.hold(transport::listen(listener, deliver));
        }
        let weak = Rc::downgrade(self);
        let tick = cluster.settings.tick;
        cluster.hold(glommio::spawn_local(async move {
            loop {
                glommio::timer::sleep(tick).await;
                let Some(shard) = weak.upgrade() else { return };
                shard.tick_raft();
            }
        }));
    }

    /// Routes one item from a peer (on shard 0, where the cluster listener is).
    fn deliver(self: &Rc<Self>, from: u64, item: Item) {
        let Some(cluster) = self.cluster() else { return };
        match item {
            Item::Raft(group, m) if group.topic == METADATA_TOPIC => {
                if let Some(meta) = cluster.meta() {
                    meta.quorum.group().step(m);
                }
            }
            Item::Raft(group, m) => {
                let cat = self.catalog();
                let Some(t) = cat.topic(&group.topic) else { return }; // not applied here yet
                if group.topic_id != t.id {
                    // Another topic of that name: a deleted one's group, or one this broker
                    // has not learnt of yet. Raft counts on neither getting the other's.
                    tracing::debug!(topic = %group.topic, from, "raft message of another topic of the name dropped");
                    return;
                }
                let tp = Tp { topic: t.id, partition: group.partition };
                let Some(&home) = t.homes.get(group.partition as usize) else { return };
                if home == self.id.0 {
                    self.step_group(tp, m);
                } else {
                    self.forward_raft(home, tp, m);
                }
            }
            Item::Reply(id, body) => cluster.transport().complete(id, body),
            Item::Call(id, body) => {
                let shard = self.clone();
                glommio::spawn_local(async move {
                    let reply = shard.serve_call(from, body).await;
                    if let Some(c) = shard.cluster() {
                        c.transport().reply(from, id, reply);
                    }
                })
                .detach();
            }
        }
    }

    /// Hands a peer's raft message to the group's home shard. Messages for one shard go in
    /// the order they arrived (a task per message let later ones overtake earlier ones, and
    /// a follower refuses appends out of order), many in one hop, and at most
    /// `FORWARD_QUEUE_MAX` wait while that shard is busy.
    fn forward_raft(self: &Rc<Self>, home: usize, tp: Tp, m: raft::prelude::Message) {
        let Some(cluster) = self.cluster() else { return };
        {
            // The borrow ends before the task is spawned: it may run at once and borrow too.
            let mut forwarding = cluster.forwarding.borrow_mut();
            let Forwarding { queue, running } = forwarding.entry(home).or_default();
            if queue.len() >= FORWARD_QUEUE_MAX {
                tracing::debug!(shard = home, "raft message dropped: the shard's queue is full");
                return;
            }
            queue.push_back((tp, m));
            if std::mem::replace(running, true) {
                return;
            }
        }
        let shard = self.clone();
        glommio::spawn_local(async move {
            loop {
                let batch: Vec<(Tp, raft::prelude::Message)> = {
                    let Some(cluster) = shard.cluster() else { return };
                    let mut forwarding = cluster.forwarding.borrow_mut();
                    let Forwarding { queue, running } = forwarding.entry(home).or_default();
                    if queue.is_empty() {
                        *running = false;
                        return;
                    }
                    queue.drain(..).collect()
                };
                let _ = shard
                    .call(home, move |here| async move {
                        for (tp, m) in batch {
                            here.step_group(tp, m);
                        }
                    })
                    .await;
            }
        })
        .detach();
    }

    fn step_group(&self, tp: Tp, m: raft::prelude::Message) {
        if let Some(g) = self.cluster().and_then(|c| c.group(&tp)) {
            g.step(m);
        }
    }

    /// One raft tick for every group homed here, then the leadership views that changed go
    /// to every shard.
    fn tick_raft(self: &Rc<Self>) {
        let Some(cluster) = self.cluster() else { return };
        if let Some(meta) = cluster.meta() {
            let g = meta.quorum.group();
            g.tick();
            let leader = g.leader().map_or(-1, id32);
            if leader != cluster.controller_id.get() {
                cluster.controller_id.set(leader);
                self.tell_other_shards(move |c| c.controller_id.set(leader));
            }
        }
        self.follow_offsets_leadership();
        self.drive_reassignments(cluster);
        self.rebalance_leaders(cluster);
        if self.id.0 == 0 {
            self.tell_peers_leaderships(cluster);
        }
        let mut changed = Vec::new();
        let (mut leading, mut under_replicated, mut under_min_isr) = (0, 0, 0);
        for (tp, g) in cluster.groups() {
            g.tick();
            let view = view_of(&g, cluster.node_id);
            if view.leader == cluster.node_id {
                let voters = g.voters().len();
                // As acks=all counts it (`shard::partitions`).
                let min_isr = (g.log().config().min_insync_replicas.max(1) as usize).min(voters);
                leading += 1;
                under_replicated += usize::from(view.isr.len() < voters);
                under_min_isr += usize::from(view.isr.len() < min_isr);
            }
            if cluster.views.borrow().get(&tp) != Some(&view) {
                changed.push((tp, view));
            }
        }
        self.probe.replication(leading, under_replicated, under_min_isr);
        if changed.is_empty() {
            return;
        }
        cluster.views.borrow_mut().extend(changed.iter().cloned());
        cluster.views_changed.set(true);
        self.tell_other_shards(move |c| {
            c.views.borrow_mut().extend(changed.clone());
            c.views_changed.set(true);
        });
    }

    /// Runs `update` on every other shard's part of the cluster, without waiting.
    pub(super) fn tell_other_shards(self: &Rc<Self>, update: impl Fn(&ShardCluster) + Clone + Send + 'static) {
        for s in (0..self.count).filter(|s| *s != self.id.0) {
            let (shard, update) = (self.clone(), update.clone());
            glommio::spawn_local(async move {
                let on_shard = move |here: Rc<Shard>| async move {
                    if let Some(c) = here.cluster() {
                        update(c);
                    }
                };
                let _ = shard.call(s, on_shard).await;
            })
            .detach();
        }
    }
}

/// What a group tells of its leadership.
fn view_of(g: &Group, me: i32) -> View {
    let epoch = i32::try_from(g.term()).unwrap_or(i32::MAX);
    // A leader is told of once it serves (an entry of its term committed): until then
    // clients would only be refused by it.
    let leader = g.leader().map_or(-1, id32);
    let leader = if leader == me && !g.serving() { -1 } else { leader };
    let isr = if g.serving() { g.in_sync_ids() } else { g.voters() };
    let mut isr: Vec<i32> = isr.into_iter().map(id32).collect();
    isr.sort_unstable();
    let offline = if g.serving() { g.silent_ids().into_iter().map(id32).collect() } else { Vec::new() };
    View { leader, epoch, isr, offline }
}
