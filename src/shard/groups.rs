//! Consumer-group operations routed to the group's coordinator: the shard that homes the
//! group's partition of `__consumer_offsets`; and the timers and replay of the groups homed
//! here.

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use bytes::Bytes;
use futures_channel::oneshot;

use super::mesh::join_all;
use super::{Shard, Tp};
use crate::group::{offsets, GroupListing, GroupOp, OffsetsLog};
use crate::log::Partition;
use crate::metrics;
use crate::protocol::ErrorCode;

impl Shard {
    /// The `__consumer_offsets` partition of a group and the shard that homes it.
    fn group_home(&self, group: &str) -> Result<(usize, Tp), ErrorCode> {
        let cat = self.catalog.borrow();
        let t = cat.topic(offsets::TOPIC).ok_or(ErrorCode::CoordinatorNotAvailable)?;
        let p = offsets::partition_for(group, t.homes.len() as u32);
        Ok((t.homes[p as usize], Tp { topic: t.id, partition: p }))
    }

    /// Runs the group operation `make(reply)` on the group's home shard and waits for its
    /// reply; an unreachable home is COORDINATOR_NOT_AVAILABLE (clients retry), a home that
    /// does not coordinate the group now answers why (`offsets_log`).
    pub async fn group_op<T: Send + 'static>(
        &self,
        group: String,
        make: impl FnOnce(oneshot::Sender<T>) -> GroupOp + Send + 'static,
    ) -> Result<T, ErrorCode> {
        let (home, _) = self.group_home(&group)?;
        if home == self.id.0 {
            let (tx, rx) = oneshot::channel();
            // A group op parks on its offsets log's durable append or, for a join, on the
            // rebalance (Kafka's delayed join): remote time. Its own work is a little
            // bookkeeping, counted with the wait.
            return metrics::remote(async {
                self.run_group_op(group, make(tx)).await?;
                rx.await.map_err(|_| ErrorCode::CoordinatorNotAvailable)
            })
            .await;
        }
        let on_home = move |here: Rc<Shard>| async move {
            let (tx, rx) = oneshot::channel();
            here.run_group_op(group, make(tx)).await?;
            rx.await.map_err(|_| ErrorCode::CoordinatorNotAvailable)
        };
        self.call(home, on_home).await.map_err(|_| ErrorCode::CoordinatorNotAvailable)?
    }

    /// Hands `op` to the coordinator, or answers why this broker does not coordinate the
    /// group now: NOT_COORDINATOR (another broker does: the client looks it up again),
    /// COORDINATOR_LOAD_IN_PROGRESS (the client retries here), COORDINATOR_NOT_AVAILABLE.
    /// Kafka's codes: Java consumers before 3.9 fail an OffsetFetch answered
    /// COORDINATOR_NOT_AVAILABLE instead of retrying it.
    async fn run_group_op(&self, group: String, op: GroupOp) -> Result<(), ErrorCode> {
        let log = self.offsets_log(&group)?;
        self.groups.handle(group, op, log).await;
        Ok(())
    }

    /// The local `__consumer_offsets` partition of a group homed here; in a cluster, through
    /// its raft group, and only while this broker leads it (else NOT_COORDINATOR) and has
    /// replayed it (else COORDINATOR_LOAD_IN_PROGRESS).
    fn offsets_log(&self, group: &str) -> Result<Option<Rc<dyn OffsetsLog>>, ErrorCode> {
        let Ok((_, tp)) = self.group_home(group) else { return Ok(None) };
        if let Some(g) = self.cluster().and_then(|c| c.group(&tp)) {
            if !g.serving() {
                return Err(ErrorCode::NotCoordinator);
            }
            if !self.coordinating(tp.partition) {
                // Leading it, its groups not replayed yet.
                return Err(ErrorCode::CoordinatorLoadInProgress);
            }
            return Ok(Some(Rc::new(ReplicatedOffsets(g))));
        }
        if self.catalog.borrow().topic_by_id(&tp.topic).is_some_and(|t| t.replicated()) {
            return Err(ErrorCode::NotCoordinator); // no replica here
        }
        // Kafka answers COORDINATOR_LOAD_IN_PROGRESS while it loads a partition's groups; a
        // partition it cannot read (or not open here) serves none of them.
        if !self.offsets_replayed.get() {
            return Err(ErrorCode::CoordinatorLoadInProgress);
        }
        if self.offsets_unreadable.borrow().contains(&tp.partition) {
            return Err(ErrorCode::CoordinatorNotAvailable);
        }
        match self.log(&tp) {
            Ok(p) => Ok(Some(p as Rc<dyn OffsetsLog>)),
            Err(_) => Err(ErrorCode::CoordinatorNotAvailable),
        }
    }

    /// Follows the leaderships of the `__consumer_offsets` partitions homed here (cluster
    /// mode, every tick): a partition this broker came to lead is replayed into the
    /// coordinator, whose groups' members then carry on here; one it no longer leads has its
    /// groups dropped.
    pub(super) fn follow_offsets_leadership(&self) {
        let Some(cluster) = self.cluster() else { return };
        let Some(topic) = self.catalog.borrow().topic(offsets::TOPIC).filter(|t| t.replicated()).cloned() else {
            return;
        };
        let n = topic.partitions() as u32;
        for p in 0..topic.partitions() {
            let tp = Tp { topic: topic.id, partition: p };
            let Some(g) = cluster.group(&tp) else { continue };
            let serving = g.serving();
            if serving == self.coordinating(p) {
                continue;
            }
            self.groups.forget(|group| offsets::partition_for(group, n) == p);
            if serving {
                let started = std::time::Instant::now();
                let mut records = Vec::new();
                if let Err(e) = g.log().scan_batches(0, |b| records.extend(offsets::from_batch(b))) {
                    tracing::error!(partition = p, "cannot replay {}: {e}", offsets::TOPIC);
                    continue;
                }
                let n = records.len();
                self.groups.replay(records);
                self.coordinated.borrow_mut().insert(p);
                let ms = started.elapsed().as_millis() as u64;
                tracing::info!(
                    partition = p,
                    records = n,
                    ms,
                    "replayed committed offsets of a partition this broker leads"
                );
            } else {
                self.coordinated.borrow_mut().remove(&p);
            }
        }
    }

    fn coordinating(&self, partition: i32) -> bool {
        self.coordinated.borrow().contains(&partition)
    }

    /// ListGroups across every shard.
    pub async fn list_groups(&self, states: Vec<String>) -> Vec<GroupListing> {
        let mut out = self.groups.list(&states);
        let others = (0..self.count).filter(|s| *s != self.id.0).map(|shard| {
            let states = states.clone();
            self.call(shard, move |here| async move { here.groups.list(&states) })
        });
        for listed in join_all(others).await {
            out.extend(listed.unwrap_or_default());
        }
        out.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        out
    }

    /// Rebuilds the committed offsets of the groups homed here from the local
    /// `__consumer_offsets` partitions (at start, after they are open).
    pub fn replay_group_offsets(&self) {
        self.replay_local_offsets();
        self.offsets_replayed.set(true);
    }

    fn replay_local_offsets(&self) {
        let Some(topic) = self.catalog.borrow().topic(offsets::TOPIC).map(|t| t.id) else { return };
        // In a cluster a partition is replayed when this broker comes to lead it
        // (`follow_offsets_leadership`), not at start.
        let replicated = |tp: &Tp| self.cluster().is_some_and(|c| c.group(tp).is_some());
        let logs: Vec<Rc<Partition>> = self
            .logs
            .borrow()
            .iter()
            .filter(|(tp, _)| tp.topic == topic && !replicated(tp))
            .map(|(_, p)| p.clone())
            .collect();
        if logs.is_empty() {
            return;
        }
        let started = std::time::Instant::now();
        let mut records = Vec::new();
        for p in logs {
            let mut read = Vec::new();
            match p.scan_batches(0, |b| read.extend(offsets::from_batch(b))) {
                Ok(_) => records.extend(read),
                // Half a partition's commits would serve older offsets as the latest.
                Err(e) => {
                    tracing::error!(
                        partition = p.index,
                        "cannot replay {}: {e}; its groups are not served until a restart reads it",
                        offsets::TOPIC
                    );
                    self.offsets_unreadable.borrow_mut().insert(p.index);
                }
            }
        }
        let n = records.len();
        self.groups.replay(records);
        tracing::info!(records = n, ms = started.elapsed().as_millis() as u64, "replayed committed offsets");
    }

    /// Session/rebalance timers of the groups homed here, and the store of each group a
    /// timer emptied.
    pub async fn tick_groups(&self) {
        for group in self.groups.tick() {
            let Ok(log) = self.offsets_log(&group) else { continue };
            if let Err(e) = self.groups.store(&group, log).await {
                tracing::warn!(group, "cannot store the group's membership: {e:?}");
            }
        }
    }

    /// Removes committed offsets past `offsets_retention_minutes` (see `Coordinator::expire_offsets`).
    pub async fn expire_group_offsets(&self) {
        for (group, records) in self.groups.expire_offsets() {
            let Ok(log) = self.offsets_log(&group) else { continue };
            self.groups.apply_expiry(&group, records, log).await;
        }
    }
}

/// A replicated `__consumer_offsets` partition: a commit is durable once the raft group
/// committed it (a majority of the replicas hold it).
struct ReplicatedOffsets(Rc<crate::cluster::group::Group>);

impl OffsetsLog for ReplicatedOffsets {
    fn append(&self, batch: Bytes) -> Pin<Box<dyn Future<Output = Result<(), ErrorCode>>>> {
        let produced = self.0.produce(&batch, crate::cluster::group::Acks::All { min_insync: 1 });
        Box::pin(async move {
            match produced {
                Ok(rx) => match rx.await {
                    Ok(Ok(_)) => Ok(()),
                    Ok(Err(ErrorCode::NotLeaderOrFollower)) | Err(_) => Err(ErrorCode::NotCoordinator),
                    Ok(Err(_)) => Err(ErrorCode::CoordinatorNotAvailable),
                },
                Err(_) => Err(ErrorCode::NotCoordinator),
            }
        })
    }
}

impl OffsetsLog for Partition {
    fn append(&self, batch: Bytes) -> Pin<Box<dyn Future<Output = Result<(), ErrorCode>>>> {
        let appended = Partition::append(self, &batch).map_err(|e| {
            tracing::error!(partition = self.index, "cannot append to {}: {e:?}", offsets::TOPIC);
            ErrorCode::CoordinatorNotAvailable
        });
        Box::pin(async move {
            match appended?.await {
                Ok(Ok(_)) => Ok(()),
                _ => Err(ErrorCode::CoordinatorNotAvailable),
            }
        })
    }
}
