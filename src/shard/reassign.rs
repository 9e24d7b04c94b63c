//! Reassignments and preferred-leader elections at the partitions' leaders (DESIGN §9).
//!
//! Each tick, the home shard of every partition this broker leads that the catalog has a
//! reassignment for takes the next step towards the target (`cluster::membership`); when the
//! group's voters are the target it reports so to the controller, which makes the target the
//! partition's replicas (`Controller::complete_reassignment`). The brokers that left then
//! close and delete their replica when they install that catalog (`shard::catalog`).
//!
//! ElectLeaders PREFERRED asks each partition's preferred replica (the first of its
//! replicas) to take the leadership: raft-rs forwards the request from that follower to the
//! leader, which hands over once the preferred replica has caught up. The broker that
//! received the request calls the preferred replica's broker over the cluster transport.
//!
//! Kafka's automatic preferred-leader election (`auto_leader_rebalance_enable`): every
//! `leader_imbalance_check_interval_seconds`, a partition this broker leads whose preferred
//! replica is another one, in sync and holding everything committed, is handed to it, so
//! that a broker that restarted gets its leaderships back. Kafka first checks each broker's
//! imbalance against `leader.imbalance.per.broker.percentage`; here every such partition moves.

use std::rc::Rc;
use std::time::{Duration, Instant};

use super::cluster::ShardCluster;
use super::{Shard, Tp};
use crate::cluster::group::Group;
use crate::cluster::membership::{next_step, Step};
use crate::controller::Failure;
use crate::protocol::ErrorCode;

/// The longest an ElectLeaders request waits for the preferred replicas to lead.
const MAX_ELECTION_WAIT: Duration = Duration::from_secs(30);

impl Shard {
    /// Runs `work` on shard `home`, here if it is this one.
    pub(super) async fn on_shard<T: Send + 'static, F: std::future::Future<Output = T> + 'static>(
        self: &Rc<Self>,
        home: usize,
        work: impl FnOnce(Rc<Shard>) -> F + Send + 'static,
    ) -> Result<T, ErrorCode> {
        if home == self.id.0 {
            return Ok(work(self.clone()).await);
        }
        self.call(home, work).await
    }

    /// One step of every reassignment this shard's groups lead (from `tick_raft`).
    pub(super) fn drive_reassignments(self: &Rc<Self>, cluster: &Rc<ShardCluster>) {
        let cat = self.catalog();
        for t in cat.topics.values().filter(|t| !t.reassigning.is_empty()) {
            for (&partition, target) in &t.reassigning {
                let tp = Tp { topic: t.id, partition };
                let Some(g) = cluster.group(&tp).filter(|g| g.serving()) else { continue };
                let target: Vec<u64> = target.iter().map(|id| *id as u64).collect();
                match next_step(&g.membership(), &target, |id| g.caught_up(id)) {
                    Step::Wait | Step::CatchUp => {}
                    Step::Change(cc) => {
                        tracing::info!(topic = %t.name, partition, change = ?cc.changes, "reassignment: changing the replicas");
                        let _ = g.change_membership(cc);
                    }
                    Step::HandOver(to) => {
                        tracing::info!(topic = %t.name, partition, to, "reassignment: handing the leadership to a staying replica");
                        g.transfer_leader(to);
                    }
                    Step::Done => self.report_reassigned(cluster, tp, t.name.clone(), &g),
                }
            }
        }
    }

    /// Hands leaderships back to preferred replicas, once per check interval (from
    /// `tick_raft`; see the module doc). The first check comes one interval after start.
    pub(super) fn rebalance_leaders(&self, cluster: &Rc<ShardCluster>) {
        let Some(every) = cluster.settings.rebalance else { return };
        let now = Instant::now();
        let due = *cluster.next_rebalance.get().get_or_insert(now + every);
        if now < due {
            cluster.next_rebalance.set(Some(due));
            return;
        }
        cluster.next_rebalance.set(Some(now + every));
        let cat = self.catalog();
        for (tp, g) in cluster.groups() {
            let Some(t) = cat.topic_by_id(&tp.topic) else { continue };
            if !g.serving() || g.changing_membership() || t.reassigning.contains_key(&tp.partition) {
                continue;
            }
            let Some(&preferred) = t.replicas_of(tp.partition).first() else { continue };
            let to = preferred as u64;
            if preferred != cluster.node_id && g.voters().contains(&to) && g.caught_up(to) {
                tracing::info!(topic = %t.name, partition = tp.partition, to, "handing the leadership back to the preferred replica");
                g.transfer_leader(to);
            }
        }
    }

    /// Tells the controller that partition `tp`'s voters are its reassignment's target, once
    /// at a time per partition.
    fn report_reassigned(self: &Rc<Self>, cluster: &Rc<ShardCluster>, tp: Tp, topic: String, g: &Rc<Group>) {
        if !cluster.reporting.borrow_mut().insert(tp) {
            return;
        }
        let voters: Vec<i32> = g.voters().into_iter().map(|id| id as i32).collect();
        let shard = self.clone();
        glommio::spawn_local(async move {
            let partition = tp.partition;
            let reported =
                shard.on_shard(0, move |zero| async move { zero.reassigned(topic, partition, voters).await }).await;
            if let Ok(Err((_, why))) | Err(why) = reported.map_err(|e| e.to_string()) {
                tracing::debug!(partition, "reporting a finished reassignment, will retry: {why}");
            }
            if let Some(c) = shard.cluster() {
                c.reporting.borrow_mut().remove(&tp);
            }
        })
        .detach();
    }

    /// ElectLeaders PREFERRED for each (topic, partition) of a replicated topic, waiting at
    /// most `wait` for each preferred replica to lead.
    pub async fn elect_preferred(
        self: &Rc<Self>,
        asks: Vec<(String, i32)>,
        wait: Duration,
    ) -> Vec<Result<(), Failure>> {
        let wait = wait.min(MAX_ELECTION_WAIT);
        let cat = self.catalog();
        let elections = asks.into_iter().map(|(topic, partition)| {
            let t = cat.topic(&topic).cloned();
            let shard = self.clone();
            async move {
                let Some(preferred) = t.and_then(|t| t.holders_of(partition).first().copied()) else {
                    return Err((ErrorCode::UnknownTopicOrPartition, format!("{topic}-{partition} has no replicas")));
                };
                if preferred == shard.config.node_id {
                    return shard.lead_here(topic, partition, wait).await;
                }
                shard.ask_to_lead(preferred, topic, partition, wait).await
            }
        });
        super::mesh::join_all(elections).await
    }

    /// Makes this broker's replica of a partition take the leadership (on its home shard).
    pub(super) async fn lead_here(
        self: &Rc<Self>,
        topic: String,
        partition: i32,
        wait: Duration,
    ) -> Result<(), Failure> {
        let cat = self.catalog();
        let Some(t) = cat.topic(&topic) else {
            return Err((ErrorCode::UnknownTopicOrPartition, format!("{topic} does not exist here yet")));
        };
        let tp = Tp { topic: t.id, partition };
        let home = t.homes.get(partition as usize).copied().unwrap_or(0);
        let led = self.on_shard(home, move |here| async move { here.take_leadership(tp, wait).await }).await;
        led.map_err(|e| (e, "the partition's home shard did not answer".to_string()))?
    }

    async fn take_leadership(self: &Rc<Self>, tp: Tp, wait: Duration) -> Result<(), Failure> {
        let unavailable = |why: &str| Err((ErrorCode::PreferredLeaderNotAvailable, why.to_string()));
        let Some(g) = self.cluster().and_then(|c| c.group(&tp)) else {
            return unavailable("the preferred replica is not open on its broker");
        };
        let me = self.config.node_id as u64;
        if g.serving() {
            return Err((ErrorCode::ElectionNotNeeded, "the preferred replica already leads".into()));
        }
        if !g.voters().contains(&me) {
            return unavailable("the preferred replica is not a voter yet (it is still being added)");
        }
        let deadline = Instant::now() + wait;
        let mut asked = Instant::now() - Duration::from_secs(1);
        while !g.serving() {
            if Instant::now() > deadline {
                return unavailable(&format!(
                    "the preferred replica did not take the leadership within {wait:?}: it may be behind its leader or cut off from it"
                ));
            }
            // raft-rs drops a hand-over to a replica that does not catch up in time: ask again.
            if asked.elapsed() >= Duration::from_millis(500) {
                g.take_leadership();
                asked = Instant::now();
            }
            glommio::timer::sleep(Duration::from_millis(10)).await;
        }
        tracing::info!(partition = tp.partition, "the preferred replica took the leadership");
        Ok(())
    }
}
