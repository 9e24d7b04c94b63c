//! The mesh: a bounded channel for every ordered pair of shards, and calls over it. A call
//! carries work to another shard, where it runs as one task, and comes back as its reply: a
//! value of the caller's type, handed to the caller's oneshot on the caller's own shard.
//!
//! Why a reply travels back as a message instead of completing the oneshot on the remote
//! shard: glommio 0.9 must not have a task woken from another thread (such a foreign wake
//! races with the task's own reference counting, seen as a double free under load). The
//! oneshot's sender rides along with the work and is only ever completed, or dropped, on the
//! caller's thread (`HomewardSender`).
//!
//! Sends are bounded: a full peer queue is backpressure (the send waits, counted in
//! `mesh_queue_full`), never a failure. A shard that has stopped fails the call with
//! NOT_LEADER_OR_FOLLOWER, which clients retry. Calls to one peer leave in the order they
//! were made even when its queue fills (`PeerSender`): a connection's pipelined produces to a
//! partition homed there are appended in request order, as Kafka appends them.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::Poll;
use std::thread::{self, ThreadId};

use futures_channel::oneshot;
use glommio::channels::shared_channel::{ConnectedReceiver, ConnectedSender};
use glommio::{GlommioError, ResourceType};

use super::Shard;
use crate::metrics;
use crate::protocol::ErrorCode;

/// Work for a shard, made on another: it runs on the receiving shard and sends its reply.
pub type Work = Box<dyn FnOnce(Rc<Shard>) -> Pin<Box<dyn Future<Output = ()>>> + Send>;

pub enum Msg {
    /// Run this here; it replies by itself.
    Call(Work),
    /// A call's result, to hand to the waiting caller (runs on the caller's shard).
    Reply(Box<dyn FnOnce() + Send>),
}

/// A oneshot sender that travels with a call and back, and is completed or dropped only on
/// the thread that made it. Dropped anywhere else (the other shard stopped with the call in
/// flight) it is forgotten instead: dropping would wake the caller from a foreign thread. The
/// caller is then going away too.
struct HomewardSender<T> {
    tx: Option<oneshot::Sender<T>>,
    thread: ThreadId,
}

impl<T> HomewardSender<T> {
    fn new(tx: oneshot::Sender<T>) -> Self {
        HomewardSender { tx: Some(tx), thread: thread::current().id() }
    }

    fn send(mut self, value: T) {
        debug_assert_eq!(thread::current().id(), self.thread, "a reply completed away from its caller");
        if let Some(tx) = self.tx.take() {
            let _ = tx.send(value);
        }
    }
}

impl<T> Drop for HomewardSender<T> {
    fn drop(&mut self) {
        if let Some(tx) = self.tx.take() {
            if thread::current().id() != self.thread {
                std::mem::forget(tx);
            }
        }
    }
}

/// The sending end of one peer shard's queue. A send that finds the queue full waits for
/// room holding the peer's gate, and every later send waits its turn behind it instead of
/// slipping into the room that appears first: without it a later call could overtake an
/// earlier one.
pub struct PeerSender<T: Send> {
    tx: ConnectedSender<T>,
    gate: Gate,
}

impl<T: Send + 'static> PeerSender<T> {
    pub fn new(tx: ConnectedSender<T>) -> Self {
        PeerSender { tx, gate: Gate::default() }
    }

    /// Sends `msg` after every earlier send to this peer; `on_full` runs when it has to wait.
    /// Fails only when the peer has stopped.
    pub async fn send(&self, msg: T, on_full: impl FnOnce()) -> Result<(), ErrorCode> {
        let mut on_full = Some(on_full);
        let mut waits = || on_full.take().map_or((), |f| f());
        let _turn = match self.gate.try_enter() {
            Some(turn) => turn,
            None => {
                waits();
                self.gate.enter().await
            }
        };
        match self.tx.try_send(msg) {
            Ok(()) => Ok(()),
            Err(GlommioError::WouldBlock(ResourceType::Channel(msg))) => {
                waits();
                metrics::remote(self.tx.send(msg)).await.map_err(peer_gone)
            }
            Err(e) => Err(peer_gone(e)),
        }
    }
}

/// A first-come, first-served lock for one thread. The turn passes straight from the task
/// that leaves to the one that waited longest, so no task arriving in between can take it
/// (glommio's semaphore frees its unit first and lets any task take it before the woken
/// waiter runs). A waiter dropped before its turn is skipped; one dropped with its turn
/// handed to it passes it on.
#[derive(Default)]
struct Gate {
    busy: Cell<bool>,
    waiting: RefCell<VecDeque<oneshot::Sender<()>>>,
}

/// Holding the gate; dropping it hands the gate on.
struct Turn<'a>(&'a Gate);

impl Gate {
    /// The gate at once, if it is free and nobody waits for it.
    fn try_enter(&self) -> Option<Turn<'_>> {
        (!self.busy.get() && self.waiting.borrow().is_empty()).then(|| {
            self.busy.set(true);
            Turn(self)
        })
    }

    /// The gate after every task that asked for it before.
    async fn enter(&self) -> Turn<'_> {
        if let Some(turn) = self.try_enter() {
            return turn;
        }
        let (tx, rx) = oneshot::channel();
        self.waiting.borrow_mut().push_back(tx);
        let mut waiting = Waiting { gate: self, rx: Some(rx) };
        // Only this gate sends, and it never drops a sender it still holds.
        let _ = waiting.rx.as_mut().expect("set above").await;
        waiting.rx = None;
        Turn(self)
    }

    /// Hands the gate to the longest waiter still there, or frees it.
    fn pass_on(&self) {
        loop {
            let next = self.waiting.borrow_mut().pop_front();
            match next {
                Some(tx) => {
                    if tx.send(()).is_ok() {
                        return;
                    }
                }
                None => return self.busy.set(false),
            }
        }
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.0.pass_on();
    }
}

/// A task waiting for the gate; dropped with the gate handed to it, it hands it on.
struct Waiting<'a> {
    gate: &'a Gate,
    rx: Option<oneshot::Receiver<()>>,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if let Some(mut rx) = self.rx.take() {
            if let Ok(Some(())) = rx.try_recv() {
                self.gate.pass_on();
            }
        }
    }
}

/// What went wrong sending to another shard: it has stopped.
pub(super) fn peer_gone<T>(_: T) -> ErrorCode {
    ErrorCode::NotLeaderOrFollower
}

impl Shard {
    /// Runs `work` on `shard` and waits for its result.
    pub(super) async fn call<T, F, W>(&self, shard: usize, work: W) -> Result<T, ErrorCode>
    where
        T: Send + 'static,
        F: Future<Output = T> + 'static,
        W: FnOnce(Rc<Shard>) -> F + Send + 'static,
    {
        let (tx, rx) = oneshot::channel::<T>();
        let tx = HomewardSender::new(tx);
        let origin = self.id.0;
        let work: Work = Box::new(move |here: Rc<Shard>| {
            Box::pin(async move {
                let value = work(here.clone()).await;
                let reply = Box::new(move || tx.send(value));
                if let Err(e) = here.send(origin, Msg::Reply(reply)).await {
                    tracing::debug!(shard = here.id.0, origin, "cannot reply: the caller's shard stopped ({e:?})");
                }
            })
        });
        self.send(shard, Msg::Call(work)).await?;
        metrics::remote(rx).await.map_err(peer_gone)
    }

    async fn send(&self, shard: usize, msg: Msg) -> Result<(), ErrorCode> {
        let peer = self.peers.get(shard).and_then(Option::as_ref).ok_or(ErrorCode::NotLeaderOrFollower)?;
        peer.send(msg, || self.probe.mesh_queue_full()).await?;
        self.probe.mesh_sent();
        Ok(())
    }

    /// Serves messages from one peer shard until it goes away. Each call runs in its own
    /// task so a slow append never holds up the next message; a reply only hands a value to
    /// a waiting task.
    pub async fn serve_peer(self: Rc<Self>, rx: ConnectedReceiver<Msg>) {
        while let Some(msg) = rx.recv().await {
            self.probe.mesh_received();
            match msg {
                Msg::Call(work) => {
                    glommio::spawn_local(work(self.clone())).detach();
                }
                Msg::Reply(hand_over) => hand_over(),
            }
        }
    }
}

/// Awaits every future, all at once, in one task; the outputs in order.
pub(super) async fn join_all<F: Future>(futures: impl IntoIterator<Item = F>) -> Vec<F::Output> {
    let mut pending: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut outs: Vec<Option<F::Output>> = pending.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut waiting = false;
        for (f, out) in pending.iter_mut().zip(outs.iter_mut()).filter(|(_, o)| o.is_none()) {
            match f.as_mut().poll(cx) {
                Poll::Ready(v) => *out = Some(v),
                Poll::Pending => waiting = true,
            }
        }
        if waiting {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    outs.into_iter().map(|o| o.expect("every future completed")).collect()
}

/// Completes when the first of `futures` does (never, if there are none).
pub(super) async fn first_of<F: Future>(futures: Vec<F>) {
    let mut pending: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    std::future::poll_fn(|cx| match pending.iter_mut().any(|f| f.as_mut().poll(cx).is_ready()) {
        true => Poll::Ready(()),
        false => Poll::Pending,
    })
    .await
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    use std::sync::Arc;
    use std::time::Duration;

    use glommio::channels::shared_channel;
    use glommio::LocalExecutorBuilder;

    use super::*;

    fn poll<F: Future>(f: Pin<&mut F>) -> Poll<F::Output> {
        f.poll(&mut std::task::Context::from_waker(std::task::Waker::noop()))
    }

    #[test]
    fn the_gate_passes_straight_to_the_longest_waiter() {
        let gate = Gate::default();
        let a = gate.try_enter().expect("free");
        let mut b = Box::pin(gate.enter());
        assert!(poll(b.as_mut()).is_pending());
        drop(a);
        // Handed to b, which has not run yet: a newcomer cannot take it in between.
        assert!(gate.try_enter().is_none());
        let mut c = Box::pin(gate.enter());
        assert!(poll(c.as_mut()).is_pending());
        let Poll::Ready(b_turn) = poll(b.as_mut()) else { panic!("b has the gate") };
        assert!(poll(c.as_mut()).is_pending(), "c waits behind b");
        drop(b_turn);
        assert!(poll(c.as_mut()).is_ready());
    }

    #[test]
    fn a_waiter_dropped_before_or_after_its_turn_came_does_not_keep_the_gate() {
        let gate = Gate::default();
        let a = gate.try_enter().expect("free");
        let mut waiters: Vec<_> = (0..3).map(|_| Box::pin(gate.enter())).collect();
        for w in &mut waiters {
            assert!(poll(w.as_mut()).is_pending());
        }
        let mut d = waiters.pop().expect("d");
        let c = waiters.pop().expect("c");
        drop(waiters); // b gives up before its turn
        drop(a); // c's turn comes...
        drop(c); // ...and c gives up with it: d's
        let Poll::Ready(d_turn) = poll(d.as_mut()) else { panic!("d has the gate") };
        drop(d_turn);
        assert!(gate.try_enter().is_some(), "free again");
    }

    #[test]
    fn a_send_waiting_for_room_is_not_overtaken_by_a_later_one() {
        let (tx, rx) = shared_channel::new_bounded::<u32>(1);
        let (start, taken) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
        let (start_rx, taken_rx) = (start.clone(), taken.clone());
        let receiver = std::thread::spawn(move || {
            LocalExecutorBuilder::default().make().unwrap().run(async move {
                let rx = rx.connect().await;
                while !start_rx.load(SeqCst) {
                    glommio::timer::sleep(Duration::from_millis(1)).await;
                }
                let mut got = vec![rx.recv().await.unwrap()];
                taken_rx.store(true, SeqCst);
                while let Some(m) = rx.recv().await {
                    got.push(m);
                }
                got
            })
        });
        LocalExecutorBuilder::default().make().unwrap().run(async move {
            let peer = Rc::new(PeerSender::new(tx.connect().await));
            peer.send(0, || panic!("room for the first")).await.unwrap();
            let p = peer.clone();
            let waited = Rc::new(Cell::new(false));
            let w = waited.clone();
            let earlier = glommio::spawn_local(async move { p.send(1, || w.set(true)).await });
            glommio::timer::sleep(Duration::from_millis(20)).await;
            assert!(waited.get(), "the queue was full");
            // The receiver makes room while this task holds the thread: the waiting send
            // cannot run before the next one is made.
            start.store(true, SeqCst);
            while !taken.load(SeqCst) {
                std::hint::spin_loop();
            }
            let later_waited = Cell::new(false);
            peer.send(2, || later_waited.set(true)).await.unwrap();
            assert!(later_waited.get(), "the later send waited its turn");
            earlier.await.unwrap();
        });
        assert_eq!(receiver.join().unwrap(), vec![0, 1, 2], "received in the order sent");
    }
}
