//! `max.connection.creation.rate`: new connections per second, broker-wide. Like Kafka, an
//! accept over the rate is not refused but delayed: the shard's acceptor waits before it
//! serves the connection (and before it accepts the next one), so a client reconnecting in
//! a tight loop is slowed instead of burning the broker's CPU on handshakes, and the kernel's
//! backlog holds the others meanwhile.
//!
//! The limiter is a leaky bucket kept in one atomic (the time the next connection may start,
//! as nanoseconds since the limiter was made), shared by every shard's acceptor for the same
//! reason as the connection caps (`net::admission`): the kernel spreads connections over the
//! shards as it likes. A burst of up to one second's worth is let through at once.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct CreationRate {
    /// Nanoseconds between connections at the rate; 0: unlimited.
    interval_ns: u64,
    /// How far ahead of now the schedule may run before connections wait (the burst).
    burst_ns: u64,
    epoch: Instant,
    /// When the schedule's next slot starts, ns since `epoch`.
    next_ns: AtomicU64,
}

impl CreationRate {
    /// `per_second` connections a second; `u32::MAX` or more (or 0) means unlimited.
    pub fn new(per_second: u64) -> CreationRate {
        let unlimited = per_second == 0 || per_second >= i32::MAX as u64;
        let interval_ns = if unlimited { 0 } else { 1_000_000_000 / per_second.max(1) };
        CreationRate { interval_ns, burst_ns: 1_000_000_000, epoch: Instant::now(), next_ns: AtomicU64::new(0) }
    }

    /// Takes a slot for a connection accepted at `now`; returns how long to wait before
    /// serving it (zero within the rate).
    pub fn delay(&self, now: Instant) -> Duration {
        if self.interval_ns == 0 {
            return Duration::ZERO;
        }
        let now_ns = now.saturating_duration_since(self.epoch).as_nanos() as u64;
        let mut next = self.next_ns.load(Ordering::Relaxed);
        loop {
            let start = next.max(now_ns);
            match self.next_ns.compare_exchange_weak(
                next,
                start + self.interval_ns,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Duration::from_nanos(start.saturating_sub(now_ns + self.burst_ns)),
                Err(seen) => next = seen,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_of_one_second_passes_then_connections_wait_their_turn() {
        let r = CreationRate::new(10);
        let t0 = r.epoch + Duration::from_secs(5);
        let delays: Vec<Duration> = (0..25).map(|_| r.delay(t0)).collect();
        assert!(delays[..11].iter().all(|d| d.is_zero()), "{delays:?}");
        assert_eq!(delays[11], Duration::from_millis(100));
        assert_eq!(delays[24], Duration::from_millis(1400), "the 25th of 25 at once waits 1.4 s at 10/s");
        // Time passing frees slots again.
        assert!(r.delay(t0 + Duration::from_secs(10)).is_zero());
    }

    #[test]
    fn unlimited_never_waits() {
        let r = CreationRate::new(i32::MAX as u64);
        assert!((0..1000).all(|_| r.delay(Instant::now()).is_zero()));
    }
}
