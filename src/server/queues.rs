//! A shard's task queues (DESIGN §2). glommio runs one task queue at a time and divides the
//! CPU between the queues that have work by their shares; a task runs in the queue it was
//! spawned into, and what it spawns with `spawn_local` stays in that queue. So the queue a
//! loop starts in is the queue of all the work it leads to: a connection's reader, writer,
//! idle watchdog and request handlers are all `net` tasks.
//!
//! Between queues with work, glommio runs the one with the least virtual runtime, which
//! grows the slower the more shares a queue has: while `net` or `replies` have work,
//! `background` gets about a tenth of the CPU of each. The switch happens when the running
//! task yields or is preempted; network receives preempt at once (glommio puts them on its
//! latency ring, whatever the queue).
//!
//! The latency of `net` and `replies` is `Matters(PREEMPT)`. In glommio 0.9 that does two
//! things. A task of such a queue woken from another thread always signals the executor's
//! eventfd (otherwise only an executor that announced it is going to sleep is signalled),
//! which is what a shard waiting on its peers needs. And the preemption timer becomes the
//! smallest latency among the queues with work: hence `PREEMPT` and no less, since below it
//! glommio 0.9 loses wake-ups (see `placement::PREEMPT`).
//!
//! The shard's default queue keeps the rest: startup, the wake-up bound, group timers (their
//! rebalance and session deadlines are seen by clients, so they are not `background`).

use glommio::{Latency, Shares, TaskQueueHandle};

use crate::placement::PREEMPT;

/// Shares of the queues clients wait on: glommio's default, as the default queue has.
const FOREGROUND: Shares = Shares::Static(1000);
/// Shares of work that can wait: a tenth of a foreground queue's when both have work.
const BACKGROUND: Shares = Shares::Static(100);

#[derive(Debug, Clone, Copy)]
pub(super) struct Queues {
    /// Connections: accepting them, reading and framing requests, the handlers that answer
    /// them (and the local share of their work), writing responses. A client waits on every
    /// task here.
    pub net: TaskQueueHandle,
    /// What other shards send: the calls they make here (appends and reads for their
    /// clients, which wait on them as on our own) and the replies to our calls, which hand
    /// a value to a request waiting in `net`. Its own queue so a burst of connection work
    /// cannot hold up a reply another shard's client is waiting for, nor the reverse.
    pub replies: TaskQueueHandle,
    /// Periodic work nobody waits on: retention and the expiry of committed offsets. Low
    /// shares: a long pass gets a small part of the CPU while the other queues have work.
    pub background: TaskQueueHandle,
}

impl Queues {
    /// Creates this shard's queues; call on the shard's executor.
    pub(super) fn create() -> Queues {
        let ex = glommio::executor();
        Queues {
            net: ex.create_task_queue(FOREGROUND, Latency::Matters(PREEMPT), "net"),
            replies: ex.create_task_queue(FOREGROUND, Latency::Matters(PREEMPT), "replies"),
            background: ex.create_task_queue(BACKGROUND, Latency::NotImportant, "background"),
        }
    }
}

/// Spawns `fut` into `queue`, detached.
pub(super) fn spawn_into<F: std::future::Future<Output = ()> + 'static>(queue: TaskQueueHandle, fut: F) {
    glommio::spawn_local_into(fut, queue).expect("the shard's queues live as long as its executor").detach();
}
