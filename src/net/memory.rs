//! Memory budgets for request bytes: what connections have read and not yet answered (a frame
//! being read, and every request in flight until its response is written). Each connection
//! has its own budget, and all connections of all shards share one broker-wide budget
//! (`queued_max_request_bytes`, Kafka's `queued.max.request.bytes`). A connection reserves
//! from both before it reads more; when either is spent it stops reading until responses free
//! some: backpressure through the kernel's socket buffers and TCP flow control, so memory
//! never grows without bound however many clients send at once.
//!
//! Bytes are reserved as they are read, not when a frame announces its size, so a client that
//! announces a large frame and trickles it holds only what it sent, and cannot starve the
//! others of the shared budget with promises.
//!
//! The broker-wide budget is one atomic counter shared by the shards: shards share nothing
//! mutable by design, but a memory budget that is per shard would let one busy shard starve
//! while another's budget sits idle; a relaxed add and subtract per read is cheap.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A budget of bytes; `reserve` takes from it, dropping the `Held` gives back.
#[derive(Debug)]
pub struct Budget {
    used: AtomicUsize,
    cap: usize,
}

impl Budget {
    pub fn new(cap: usize) -> Arc<Budget> {
        Arc::new(Budget { used: AtomicUsize::new(0), cap })
    }

    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    fn try_take(&self, n: usize) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |u| u.checked_add(n).filter(|&t| t <= self.cap))
            .is_ok()
    }

    fn give(&self, n: usize) {
        self.used.fetch_sub(n, Ordering::AcqRel);
    }
}

/// Bytes held in a connection's budget and the broker's at once; given back on drop.
#[derive(Debug)]
pub struct Held {
    connection: Arc<Budget>,
    broker: Arc<Budget>,
    bytes: usize,
}

impl Held {
    pub fn empty(connection: &Arc<Budget>, broker: &Arc<Budget>) -> Held {
        Held { connection: connection.clone(), broker: broker.clone(), bytes: 0 }
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Takes `n` more bytes from both budgets, or nothing if either lacks room.
    pub fn grow(&mut self, n: usize) -> bool {
        if !self.connection.try_take(n) {
            return false;
        }
        if !self.broker.try_take(n) {
            self.connection.give(n);
            return false;
        }
        self.bytes += n;
        true
    }

    /// Gives back all but `keep` bytes.
    pub fn shrink_to(&mut self, keep: usize) {
        let back = self.bytes.saturating_sub(keep);
        self.connection.give(back);
        self.broker.give(back);
        self.bytes -= back;
    }

    /// Moves `n` of the held bytes into a new `Held` (a finished frame's share).
    pub fn split(&mut self, n: usize) -> Held {
        let n = n.min(self.bytes);
        self.bytes -= n;
        Held { connection: self.connection.clone(), broker: self.broker.clone(), bytes: n }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.shrink_to(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_budgets_must_have_room_and_drops_give_back() {
        let (conn, broker) = (Budget::new(100), Budget::new(150));
        let mut a = Held::empty(&conn, &broker);
        assert!(a.grow(80));
        assert!(!a.grow(30), "the connection's budget is 100");
        let other_conn = Budget::new(100);
        let mut b = Held::empty(&other_conn, &broker);
        assert!(!b.grow(80), "the broker's budget has 70 left");
        assert_eq!(other_conn.used(), 0, "a refused take leaves the connection budget untouched");
        assert!(b.grow(70));
        let frame = a.split(50);
        a.shrink_to(10);
        assert_eq!((conn.used(), broker.used()), (60, 130));
        drop(frame);
        drop(a);
        drop(b);
        assert_eq!((conn.used(), broker.used(), other_conn.used()), (0, 0, 0));
    }
}
