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
    /// reply; an unreachable home is COORDINATOR_NOT_AVAILABLE (clients retry).
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
                self.run_group_op(group, make(tx)).await;
                rx.await.map_err(|_| ErrorCode::CoordinatorNotAvailable)
            })
            .await;
        }
        let on_home = move |here: Rc<Shard>| async move {
            let (tx, rx) = oneshot::channel();
            here.run_group_op(group, make(tx)).await;
            rx.await.ok()
        };
        self.call(home, on_home).await.ok().flatten().ok_or(ErrorCode::CoordinatorNotAvailable)
    }

    async fn run_group_op(&self, group: String, op: GroupOp) {
        let log = self.offsets_log(&group);
        self.groups.handle(group, op, log).await;
    }

    /// The local `__consumer_offsets` partition of a group homed here.
    fn offsets_log(&self, group: &str) -> Option<Rc<dyn OffsetsLog>> {
        let log = self.group_home(group).ok().and_then(|(_, tp)| self.log(&tp).ok())?;
        Some(log)
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
        let Some(topic) = self.catalog.borrow().topic(offsets::TOPIC).map(|t| t.id) else { return };
        let logs: Vec<Rc<Partition>> =
            self.logs.borrow().iter().filter(|(tp, _)| tp.topic == topic).map(|(_, p)| p.clone()).collect();
        let mut records = Vec::new();
        for p in logs {
            if let Err(e) = p.scan_batches(0, |b| records.extend(offsets::from_batch(b))) {
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
            let log = self.offsets_log(&group);
            self.groups.apply_expiry(&group, records, log).await;
        }
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
