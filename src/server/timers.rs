//! A shard's periodic work: retention, log cleaning and the expiry of committed offsets in
//! the `background` queue, group timers (rebalance and session deadlines) in the shard's default
//! queue, since clients wait on those. (Syncs for `flush = "interval"` and `flush.ms` are
//! scheduled by each partition.)

use std::future::Future;
use std::rc::Rc;
use std::time::Duration;

use glommio::TaskQueueHandle;

use super::queues::{self, Queues};
use crate::shard::Shard;

/// How often group timers are looked at: the resolution of rebalance and session timeouts.
const GROUP_TICK: Duration = Duration::from_millis(100);

/// Starts the shard's timers; call from the shard's default queue.
pub(super) fn spawn(shard: &Rc<Shard>, queues: Queues) {
    let s = shard.clone();
    let retention = Duration::from_millis(s.config.retention_check_interval_ms.max(1));
    every(queues.background, retention, move || {
        s.apply_retention();
        async {}
    });
    let s = shard.clone();
    every(glommio::executor().current_task_queue(), GROUP_TICK, move || {
        let s = s.clone();
        async move { s.tick_groups().await }
    });
    if shard.config.log_cleaner_enable {
        let s = shard.clone();
        let backoff = Duration::from_millis(s.config.log_cleaner_backoff_ms.max(1));
        queues::spawn_into(queues.background, async move {
            loop {
                if s.clean_once().await {
                    glommio::yield_if_needed().await;
                } else {
                    glommio::timer::sleep(backoff).await;
                }
            }
        });
    }
    let s = shard.clone();
    let expiry = Duration::from_millis(s.config.offsets_retention_check_interval_ms.max(1));
    every(queues.background, expiry, move || {
        let s = s.clone();
        async move { s.expire_group_offsets().await }
    });
}

/// Runs `tick` every `period` (after each sleep, so a slow tick delays the next) in `queue`.
fn every<F, Fut>(queue: TaskQueueHandle, period: Duration, mut tick: F)
where
    F: FnMut() -> Fut + 'static,
    Fut: Future<Output = ()>,
{
    queues::spawn_into(queue, async move {
        loop {
            glommio::timer::sleep(period).await;
            tick().await;
        }
    });
}
