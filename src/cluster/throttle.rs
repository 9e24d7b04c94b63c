//! Replication throttles as a leader applies them: Kafka's `leader.replication.throttled.rate`
//! and `follower.replication.throttled.rate` over the replicas a topic's
//! `leader.replication.throttled.replicas` and `follower.replication.throttled.replicas` name,
//! as `kafka-reassign-partitions --throttle` sets them.
//!
//! Kafka throttles fetches: a leader leaves a throttled partition out of a follower's fetch
//! response while the leader's rate is spent, and a follower leaves it out of its fetch
//! request while its own is. Only replicas out of sync are throttled, so a reassignment's
//! new replicas catch up slowly while the ISR keeps its pace. Here leaders push, so both
//! rates are applied where the bytes leave, to each append (`Group::throttle_sends`):
//! - the leader rate by a bucket per broker, for appends of partitions whose leader replica
//!   (partition:this broker) the leader list names;
//! - a follower's rate by a bucket per follower on each sending broker, for appends to a
//!   replica (partition:that broker) the follower list names. Unlike Kafka, where a follower
//!   takes at most its rate in all, a follower here takes at most its rate from each broker
//!   leading partitions it catches up on.
//!
//! Each shard sends its own partitions' appends: it takes an equal share of each rate.
//! A peer in sync (Kafka's ISR: a voter heard from within the lag bound and replicated to)
//! is never throttled. A throttled peer gets at most `THROTTLED_INFLIGHT` appends in flight
//! rather than raft's window, so a burst before a bucket runs dry stays small; once a bucket
//! is in debt the peer's window is closed (raft sends it nothing new) until the rate has paid
//! the debt back, so over time the peer gets the rate. Only a probe can pass a closed window
//! (raft's Probe state ignores it); that one is dropped and raft probes again later. What
//! raft counts as in flight is never dropped, so nothing is sent twice. Snapshots (a
//! compacted log's start, at most 16 MiB) are not throttled.

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Instant;

use crate::log::config::ThrottledReplicas;

/// Appends a throttled peer may have in flight.
pub const THROTTLED_INFLIGHT: usize = 2;

/// A token bucket: `rate` bytes per second, holding at most a second's worth. A charge may
/// take it below zero (an append is sent whole); it is in debt until refilled past zero.
#[derive(Debug, Clone)]
pub struct Bucket {
    rate: u64,
    balance: f64,
    at: Instant,
}

impl Bucket {
    pub fn new(rate: u64, now: Instant) -> Bucket {
        Bucket { rate, balance: rate as f64, at: now }
    }

    fn refill(&mut self, now: Instant) {
        let secs = now.saturating_duration_since(self.at).as_secs_f64();
        self.at = self.at.max(now);
        self.balance = (self.balance + secs * self.rate as f64).min(self.rate as f64);
    }

    pub fn charge(&mut self, bytes: u64, now: Instant) {
        self.refill(now);
        self.balance -= bytes as f64;
    }

    pub fn in_debt(&mut self, now: Instant) -> bool {
        self.refill(now);
        self.balance < 0.0
    }
}

/// One shard's share of this broker's leader rate and of each peer's follower rate.
#[derive(Debug, Default)]
pub struct Throttle {
    leader: RefCell<Option<Bucket>>,
    followers: RefCell<HashMap<u64, Bucket>>,
}

/// A bucket at `rate` (None: unthrottled), the one there kept if its rate is the same.
fn rebucket(old: Option<Bucket>, rate: Option<u64>, now: Instant) -> Option<Bucket> {
    let rate = rate?;
    match old {
        Some(b) if b.rate == rate => Some(b),
        _ => Some(Bucket::new(rate, now)),
    }
}

impl Throttle {
    /// Sets the shard's share of the rates: this broker's leader rate and each peer's
    /// follower rate (None: unthrottled).
    pub fn set_rates(&self, leader: Option<u64>, followers: &[(u64, Option<u64>)], now: Instant) {
        let old = self.leader.borrow_mut().take();
        *self.leader.borrow_mut() = rebucket(old, leader, now);
        let mut buckets = self.followers.borrow_mut();
        let mut next = HashMap::new();
        for &(peer, rate) in followers {
            if let Some(b) = rebucket(buckets.remove(&peer), rate, now) {
                next.insert(peer, b);
            }
        }
        *buckets = next;
    }

    /// Whether sending `peer` an append under `covers` must wait.
    pub fn over(&self, covers: Covers, peer: u64, now: Instant) -> bool {
        let leader = covers.leader && self.leader.borrow_mut().as_mut().is_some_and(|b| b.in_debt(now));
        leader || (covers.follower && self.followers.borrow_mut().get_mut(&peer).is_some_and(|b| b.in_debt(now)))
    }

    /// Counts `bytes` sent to `peer` under `covers`.
    pub fn charge(&self, covers: Covers, peer: u64, bytes: u64, now: Instant) {
        if covers.leader {
            if let Some(b) = self.leader.borrow_mut().as_mut() {
                b.charge(bytes, now);
            }
        }
        if covers.follower {
            if let Some(b) = self.followers.borrow_mut().get_mut(&peer) {
                b.charge(bytes, now);
            }
        }
    }

    /// `covers` narrowed to the rates set: an append counts only against a bucket there is.
    pub fn effective(&self, covers: Covers, peer: u64) -> Covers {
        Covers {
            leader: covers.leader && self.leader.borrow().is_some(),
            follower: covers.follower && self.followers.borrow().contains_key(&peer),
        }
    }

    /// Whether any rate is set (a group checks nothing otherwise).
    pub fn any(&self) -> bool {
        self.leader.borrow().is_some() || !self.followers.borrow().is_empty()
    }
}

/// Which rates an append to one peer counts against.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Covers {
    pub leader: bool,
    pub follower: bool,
}

impl Covers {
    pub fn any(self) -> bool {
        self.leader || self.follower
    }
}

/// What the topic's throttled-replica lists say of one partition on this broker.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Throttled {
    pub partition: i32,
    /// The leader list names this broker's replica of the partition.
    pub leader: bool,
    pub followers: ThrottledReplicas,
}

impl Throttled {
    pub fn new(partition: i32, node: i32, leaders: &ThrottledReplicas, followers: ThrottledReplicas) -> Throttled {
        Throttled { partition, leader: leaders.contains(partition, node), followers }
    }

    /// Which rates an append to `peer` counts against (before the in-sync check).
    pub fn covers(&self, peer: u64) -> Covers {
        let follower = i32::try_from(peer).is_ok_and(|p| self.followers.contains(self.partition, p));
        Covers { leader: self.leader, follower }
    }

    pub fn is_none(&self) -> bool {
        !self.leader && self.followers == ThrottledReplicas::None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_bucket_lends_one_append_then_waits_until_the_rate_has_paid_it_back() {
        let t0 = Instant::now();
        let mut b = Bucket::new(1000, t0);
        b.charge(1500, t0);
        assert!(b.in_debt(t0), "500 bytes in debt");
        assert!(b.in_debt(t0 + Duration::from_millis(400)));
        assert!(!b.in_debt(t0 + Duration::from_millis(600)), "paid back at 1000 B/s");
        // Idle time fills it to one second's worth, no more.
        let later = t0 + Duration::from_secs(60);
        b.charge(1001, later);
        assert!(b.in_debt(later));
    }

    #[test]
    fn each_append_counts_against_the_rates_its_lists_name() {
        let now = Instant::now();
        let t = Throttle::default();
        t.set_rates(Some(100), &[(2, Some(50)), (3, None)], now);
        let p0 =
            Throttled::new(0, 1, &ThrottledReplicas::parse("0:1").unwrap(), ThrottledReplicas::parse("0:2").unwrap());
        assert_eq!(p0.covers(2), Covers { leader: true, follower: true });
        assert_eq!(p0.covers(3), Covers { leader: true, follower: false });
        let p1 = Throttled::new(1, 1, &ThrottledReplicas::parse("0:1").unwrap(), ThrottledReplicas::All);
        assert_eq!(p1.covers(3), Covers { leader: false, follower: true });

        t.charge(p1.covers(2), 2, 60, now);
        assert!(t.over(p1.covers(2), 2, now), "peer 2's follower rate is spent");
        assert!(!t.over(p0.covers(3), 3, now), "the leader rate is not");
        assert!(!t.over(p1.covers(3), 3, now), "peer 3 has no follower rate");
        t.charge(p0.covers(3), 3, 150, now);
        assert!(t.over(p0.covers(3), 3, now), "now the leader rate is spent too");

        // New rates keep a bucket whose rate stayed; one removed stops throttling.
        t.set_rates(Some(100), &[], now);
        assert!(t.over(p0.covers(3), 3, now), "same leader rate, same debt");
        assert!(!t.over(p1.covers(2), 2, now), "peer 2 unthrottled");
        assert_eq!(t.effective(p1.covers(2), 2), Covers::default(), "no bucket for peer 2 any more");
        assert_eq!(t.effective(p0.covers(2), 2), Covers { leader: true, follower: false });
        t.set_rates(None, &[], now);
        assert!(!t.any());
    }
}
