//! Splitting a handler's time into *local* (working on this shard) and *remote* (waiting on
//! another shard, a delayed fetch or a durable ack), without threading a timer through every
//! handler and `Shard` method.
//!
//! A request runs inside a scope (`RequestScope::run`): while any of its futures is being
//! polled, the shard's thread knows which request it is working for. A wait that is not
//! local work is wrapped in `remote(..)`, which charges the time from its first `Pending` to
//! its completion to the current request. A request's sub-tasks (the per-partition tasks of
//! Produce and Fetch) join their parent's scope with `inherit(..)`. Overlapping waits of one
//! request count once: remote time is the time during which at least one wait was open.
//! Local time is then the handler's wall time minus its remote time; it includes waiting
//! for the executor to run the handler again, which is this shard being busy.
//!
//! The scope's state lives in a per-thread slab, so there is no allocation per request
//! once the slab has grown to the shard's largest number of concurrent requests. A thread is
//! a shard here (thread per core), so the slab is shard-local state. Each scope id carries a
//! generation: a sub-task that outlives its request (acks=0 produce) charges nothing to the
//! request that reuses its slot.
//!
//! The scope also carries the one thing besides its response that a handler tells the
//! connection: for how long a quota throttles the client (`throttle`), which the connection
//! waits out before it reads the client's next request (see `quota`). A request quota counts
//! the handler's local time, known only when it answers: the scope holds the charge
//! (`charge_when_answered`), and the answer takes it (`charge_request_quota`), so that the
//! throttle it decides goes into the response's `throttle_time_ms` as well.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ScopeId {
    index: u32,
    generation: u32,
}

#[derive(Debug)]
struct Entry {
    generation: u32,
    /// Remote waits open now.
    open: u32,
    /// When `open` last went from 0 to 1.
    since: Instant,
    remote: Duration,
    /// The client's throttle time, set by a handler that found it over a quota.
    throttle: Duration,
    /// When the request began: its local time is the time since, less the remote time.
    started: Instant,
    /// The request quota's charge for the local time, until the answer takes it.
    charge: Option<Charge>,
}

impl Entry {
    /// Remote time so far, counting a wait still open as ending `now`.
    fn remote_at(&self, now: Instant) -> Duration {
        match self.open {
            0 => self.remote,
            _ => self.remote + now.saturating_duration_since(self.since),
        }
    }
}

/// Records a request's local time against its client's request quota; the throttle due.
pub struct Charge(Box<dyn FnOnce(Duration) -> Duration>);

impl std::fmt::Debug for Charge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Charge")
    }
}

#[derive(Default)]
struct Slab {
    entries: Vec<Entry>,
    free: Vec<u32>,
}

impl Slab {
    fn entry(&mut self, id: ScopeId) -> Option<&mut Entry> {
        self.entries.get_mut(id.index as usize).filter(|e| e.generation == id.generation)
    }
}

thread_local! {
    static SLAB: RefCell<Slab> = RefCell::new(Slab::default());
    static CURRENT: Cell<Option<ScopeId>> = const { Cell::new(None) };
}

/// The accounting of one request's remote time; ends when dropped.
#[derive(Debug)]
pub struct RequestScope {
    id: ScopeId,
}

impl RequestScope {
    pub fn begin() -> RequestScope {
        let now = Instant::now();
        let id = SLAB.with_borrow_mut(|s| match s.free.pop() {
            Some(index) => {
                let e = &mut s.entries[index as usize];
                e.open = 0;
                e.remote = Duration::ZERO;
                e.throttle = Duration::ZERO;
                e.since = now;
                e.started = now;
                e.charge = None;
                ScopeId { index, generation: e.generation }
            }
            None => {
                s.entries.push(Entry {
                    generation: 0,
                    open: 0,
                    since: now,
                    remote: Duration::ZERO,
                    throttle: Duration::ZERO,
                    started: now,
                    charge: None,
                });
                ScopeId { index: (s.entries.len() - 1) as u32, generation: 0 }
            }
        });
        RequestScope { id }
    }

    /// Runs `fut` as this request's work.
    pub fn run<F: Future>(&self, fut: F) -> impl Future<Output = F::Output> {
        within(self.id, fut)
    }

    /// Remote time so far, counting a wait still open as ending `now`.
    pub fn remote(&self, now: Instant) -> Duration {
        SLAB.with_borrow_mut(|s| s.entry(self.id).map_or(Duration::ZERO, |e| e.remote_at(now)))
    }
}

impl RequestScope {
    /// Has the request's local time charged with `charge` (a request quota) when it is
    /// answered (`charge_request_quota`), or when it ends unanswered (`charge_unanswered`).
    pub fn charge_when_answered(&self, charge: impl FnOnce(Duration) -> Duration + 'static) {
        SLAB.with_borrow_mut(|s| {
            if let Some(e) = s.entry(self.id) {
                e.charge = Some(Charge(Box::new(charge)));
            }
        });
    }

    /// Charges the request quota if no answer did (a request that failed, or one answered
    /// by a writer of its own).
    pub fn charge_unanswered(&self) {
        charge(self.id);
    }

    /// The throttle time a handler set for this request (zero if none).
    pub fn throttle(&self) -> Duration {
        SLAB.with_borrow(|s| {
            s.entries
                .get(self.id.index as usize)
                .filter(|e| e.generation == self.id.generation)
                .map_or(Duration::ZERO, |e| e.throttle)
        })
    }
}

/// Charges the request being polled now to its client's request quota, once, for its local
/// time so far, and returns the throttle that decided (zero without a request quota, or
/// outside a request). The throttle is also the connection's, as with `throttle`.
pub fn charge_request_quota() -> Duration {
    CURRENT.get().map_or(Duration::ZERO, charge)
}

fn charge(id: ScopeId) -> Duration {
    let now = Instant::now();
    let taken = SLAB.with_borrow_mut(|s| {
        let e = s.entry(id)?;
        let charge = e.charge.take()?;
        Some((charge, now.saturating_duration_since(e.started).saturating_sub(e.remote_at(now))))
    });
    // Called outside the slab's borrow: the charge may reach code that opens scopes.
    let Some((Charge(charge), local)) = taken else { return Duration::ZERO };
    let t = charge(local);
    SLAB.with_borrow_mut(|s| {
        if let Some(e) = s.entry(id) {
            e.throttle = e.throttle.max(t);
        }
    });
    t
}

/// Tells the connection of the request being polled now that its client is throttled for
/// `d` (the longest of several calls wins). Outside a request it does nothing.
pub fn throttle(d: Duration) {
    if let Some(id) = CURRENT.get() {
        SLAB.with_borrow_mut(|s| {
            if let Some(e) = s.entry(id) {
                e.throttle = e.throttle.max(d);
            }
        });
    }
}

impl Drop for RequestScope {
    fn drop(&mut self) {
        // A request cancelled before its end leaves its charge untaken: it is dropped here
        // (after the borrow: it holds what it would have charged), not left in the slot.
        let _untaken = SLAB.with_borrow_mut(|s| {
            let e = s.entry(self.id)?;
            e.generation = e.generation.wrapping_add(1);
            let charge = e.charge.take();
            s.free.push(self.id.index);
            charge
        });
    }
}

async fn within<F: Future>(id: ScopeId, fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    std::future::poll_fn(|cx| {
        let outer = CURRENT.replace(Some(id));
        let r = fut.as_mut().poll(cx);
        CURRENT.set(outer);
        r
    })
    .await
}

/// Makes `fut` (to be spawned as a task) part of the request being polled now, if any.
pub fn inherit<F: Future>(fut: F) -> impl Future<Output = F::Output> {
    let id = CURRENT.get();
    async move {
        match id {
            Some(id) => within(id, fut).await,
            None => fut.await,
        }
    }
}

/// Awaits `fut`, charging the time it keeps the current request waiting to the request's
/// remote time. Outside a request (a message from another shard, a timer) it only awaits.
pub async fn remote<F: Future>(fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    let mut wait = Wait { id: CURRENT.get(), open: false };
    std::future::poll_fn(|cx| {
        let r = fut.as_mut().poll(cx);
        // Parked: from now until completion (or cancellation) the request waits.
        if r.is_pending() && !wait.open {
            wait.open = true;
            if let Some(id) = wait.id {
                open(id);
            }
        }
        r
    })
    .await
}

/// One remote wait of a request; closed when dropped, also when the waiting future is
/// cancelled.
struct Wait {
    id: Option<ScopeId>,
    open: bool,
}

impl Drop for Wait {
    fn drop(&mut self) {
        if let (Some(id), true) = (self.id, self.open) {
            close(id);
        }
    }
}

fn open(id: ScopeId) {
    SLAB.with_borrow_mut(|s| {
        if let Some(e) = s.entry(id) {
            if e.open == 0 {
                e.since = Instant::now();
            }
            e.open += 1;
        }
    });
}

fn close(id: ScopeId) {
    SLAB.with_borrow_mut(|s| {
        if let Some(e) = s.entry(id) {
            e.open = e.open.saturating_sub(1);
            if e.open == 0 {
                e.remote += e.since.elapsed();
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_channel::oneshot;
    use std::task::Poll;

    /// Polls `fut` once with a no-op waker.
    fn poll_once<F: Future>(fut: std::pin::Pin<&mut F>) -> Poll<F::Output> {
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        fut.poll(&mut cx)
    }

    #[test]
    fn only_parked_waits_count_as_remote_and_overlaps_count_once() {
        let scope = RequestScope::begin();
        let (tx1, rx1) = oneshot::channel::<()>();
        let (tx2, rx2) = oneshot::channel::<()>();
        let work = scope.run(async {
            // Ready at once: not a wait.
            let (ready_tx, ready_rx) = oneshot::channel::<()>();
            ready_tx.send(()).unwrap();
            remote(ready_rx).await.unwrap();
            assert_eq!(CURRENT.get().map(|_| ()), Some(()));
            // Two waits open at the same time.
            let a = std::pin::pin!(remote(rx1));
            let b = std::pin::pin!(remote(rx2));
            futures_lite::future::zip(a, b).await
        });
        let mut work = std::pin::pin!(work);
        assert!(poll_once(work.as_mut()).is_pending());
        assert_eq!(CURRENT.get(), None, "the scope ends with the poll");
        std::thread::sleep(Duration::from_millis(20));
        tx1.send(()).unwrap();
        assert!(poll_once(work.as_mut()).is_pending());
        let open_now = scope.remote(Instant::now());
        assert!(open_now >= Duration::from_millis(20), "{open_now:?}");
        std::thread::sleep(Duration::from_millis(20));
        tx2.send(()).unwrap();
        assert!(poll_once(work.as_mut()).is_ready());
        let total = scope.remote(Instant::now());
        assert!(total >= Duration::from_millis(40), "{total:?}");
        assert_eq!(scope.remote(Instant::now() + Duration::from_secs(5)), total, "no wait is open any more");
    }

    #[test]
    fn a_handler_sets_its_requests_throttle_and_nobody_elses() {
        let scope = RequestScope::begin();
        let other = RequestScope::begin();
        throttle(Duration::from_secs(9)); // outside any request: ignored
        let mut work = std::pin::pin!(scope.run(async {
            throttle(Duration::from_millis(300));
            throttle(Duration::from_millis(100));
        }));
        assert!(poll_once(work.as_mut()).is_ready());
        assert_eq!(scope.throttle(), Duration::from_millis(300));
        assert_eq!(other.throttle(), Duration::ZERO);
        drop(scope);
        assert_eq!(RequestScope::begin().throttle(), Duration::ZERO, "a reused slot starts unthrottled");
    }

    #[test]
    fn the_request_quota_is_charged_once_by_the_answer_or_at_the_end() {
        use std::rc::Rc;
        let charged = Rc::new(std::cell::RefCell::new(Vec::new()));
        let charge = |c: &Rc<std::cell::RefCell<Vec<Duration>>>| {
            let c = c.clone();
            move |local: Duration| {
                c.borrow_mut().push(local);
                Duration::from_millis(40)
            }
        };
        // Answered: the answer takes the charge, and its throttle is the connection's too.
        let scope = RequestScope::begin();
        scope.charge_when_answered(charge(&charged));
        assert_eq!(charge_request_quota(), Duration::ZERO, "outside the request: nothing");
        let mut work = std::pin::pin!(scope.run(async { charge_request_quota() }));
        assert!(matches!(poll_once(work.as_mut()), Poll::Ready(t) if t == Duration::from_millis(40)));
        scope.charge_unanswered();
        assert_eq!(charged.borrow().len(), 1, "charged once");
        assert_eq!(scope.throttle(), Duration::from_millis(40));
        drop(scope);

        // Not answered (acks=0, an error): charged when it ends.
        let scope = RequestScope::begin();
        scope.charge_when_answered(charge(&charged));
        scope.charge_unanswered();
        assert_eq!((charged.borrow().len(), scope.throttle()), (2, Duration::from_millis(40)));
        drop(scope);

        // Cancelled: the charge, and what it holds, goes with the scope.
        let scope = RequestScope::begin();
        scope.charge_when_answered(charge(&charged));
        assert_eq!(Rc::strong_count(&charged), 2);
        drop(scope);
        assert_eq!(Rc::strong_count(&charged), 1, "nothing kept in the freed slot");
        assert_eq!(charged.borrow().len(), 2);
    }

    #[test]
    fn waits_outside_a_request_or_after_it_charge_nothing() {
        let (tx, rx) = oneshot::channel::<()>();
        let mut outside = std::pin::pin!(remote(rx));
        assert!(poll_once(outside.as_mut()).is_pending());
        tx.send(()).unwrap();
        assert!(poll_once(outside.as_mut()).is_ready());

        // A sub-task that outlives its request does not touch the request reusing the slot.
        let first = RequestScope::begin();
        let (tx, rx) = oneshot::channel::<()>();
        let mut late = std::pin::pin!(first.run(async { inherit(remote(rx)).await }));
        assert!(poll_once(late.as_mut()).is_pending());
        drop(first);
        let second = RequestScope::begin();
        std::thread::sleep(Duration::from_millis(5));
        tx.send(()).unwrap();
        assert!(poll_once(late.as_mut()).is_ready());
        assert_eq!(second.remote(Instant::now()), Duration::ZERO);
    }
}
