//! The storage behind every metric: counters, gauges and fixed-bucket latency histograms
//! made of atomics that exactly one thread (the owning shard's) writes and any thread may
//! read.
//!
//! Because there is a single writer, an update is a Relaxed load and a Relaxed store rather
//! than a locked read-modify-write: on x86 two plain `mov`s, no bus lock, nothing a reader
//! can stall. A reader on another thread sees each value a little late, never torn. The
//! single-writer rule is enforced by who can reach the write methods: they are
//! crate-private and called only through a shard's `Probe`, which cannot leave its thread.
//!
//! Histogram buckets are exponential, upper bounds 50 µs × 2^i for i = 0..20 (50 µs …
//! 52.4 s, so the 30 s longest fetch wait still lands in a bucket), plus an overflow bucket
//! (+Inf). Finding the bucket is a division and a leading-zeros count, no search.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Adds `n` to a value only this thread writes (see the module doc).
fn bump(cell: &AtomicU64, n: u64) {
    cell.store(cell.load(Relaxed).wrapping_add(n), Relaxed);
}

/// A count that only goes up.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    pub(crate) fn add(&self, n: u64) {
        bump(&self.0, n);
    }

    pub(crate) fn inc(&self) {
        self.add(1);
    }

    pub fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

/// A value that goes up and down (open connections, log bytes).
#[derive(Debug, Default)]
pub struct Gauge(AtomicI64);

impl Gauge {
    pub(crate) fn add(&self, n: i64) {
        self.0.store(self.0.load(Relaxed).wrapping_add(n), Relaxed);
    }

    pub(crate) fn set(&self, v: i64) {
        self.0.store(v, Relaxed);
    }

    pub fn get(&self) -> i64 {
        self.0.load(Relaxed)
    }
}

/// Number of finite bucket bounds.
pub const BOUNDS: usize = 21;
/// The first bucket's upper bound.
const FIRST_NS: u64 = 50_000;

/// The bucket a duration of `ns` nanoseconds falls in: the first whose upper bound is at
/// least `ns`, or `BOUNDS` (the overflow bucket).
pub fn bucket_of(ns: u64) -> usize {
    // q = ceil(ns / 50 µs); the bucket is ceil(log2(q)), which for q > 1 is the bit length
    // of q - 1.
    let q = ns.div_ceil(FIRST_NS);
    if q <= 1 {
        return 0;
    }
    ((u64::BITS - (q - 1).leading_zeros()) as usize).min(BOUNDS)
}

/// Upper bound of finite bucket `i`, in seconds.
pub fn bound_seconds(i: usize) -> f64 {
    (FIRST_NS << i) as f64 / 1e9
}

/// A latency histogram: one counter per bucket plus the sum of all observations.
#[derive(Debug)]
pub struct Histogram {
    buckets: [AtomicU64; BOUNDS + 1],
    sum_ns: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram { buckets: [const { AtomicU64::new(0) }; BOUNDS + 1], sum_ns: AtomicU64::new(0) }
    }
}

/// What a scrape reads out of a histogram.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramSnapshot {
    /// Observations per bucket (not cumulative), the last one being +Inf.
    pub buckets: [u64; BOUNDS + 1],
    pub sum_seconds: f64,
}

impl HistogramSnapshot {
    /// The number of observations: the sum of the buckets, so that the +Inf bucket always
    /// equals the count even though the writer may move on while the buckets are read.
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }
}

impl Histogram {
    pub(crate) fn observe(&self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        bump(&self.buckets[bucket_of(ns)], 1);
        bump(&self.sum_ns, ns);
    }

    pub fn snapshot(&self) -> HistogramSnapshot {
        HistogramSnapshot {
            buckets: std::array::from_fn(|i| self.buckets[i].load(Relaxed)),
            sum_seconds: self.sum_ns.load(Relaxed) as f64 / 1e9,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_land_in_the_first_bucket_whose_bound_holds_them() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(1), 0);
        assert_eq!(bucket_of(50_000), 0, "a bound is inclusive (Prometheus `le`)");
        assert_eq!(bucket_of(50_001), 1);
        assert_eq!(bucket_of(100_000), 1);
        assert_eq!(bucket_of(100_001), 2);
        assert_eq!(bucket_of(200_000), 2);
        assert_eq!(bucket_of(1_000_000), 5, "1 ms ≤ 1.6 ms");
        assert_eq!(bucket_of(30_000_000_000), 20, "the 30 s fetch cap is still finite");
        assert_eq!(bucket_of(FIRST_NS << 20), 20);
        assert_eq!(bucket_of((FIRST_NS << 20) + 1), BOUNDS, "past the last bound: +Inf");
        assert_eq!(bucket_of(u64::MAX), BOUNDS);
        // Exhaustively at every bound and one past it.
        for i in 0..BOUNDS {
            let bound = FIRST_NS << i;
            assert_eq!(bucket_of(bound), i);
            assert_eq!(bucket_of(bound + 1), i + 1);
            assert_eq!(bound_seconds(i), bound as f64 / 1e9);
        }
        assert_eq!(bound_seconds(0), 0.00005);
        assert!((bound_seconds(20) - 52.4288).abs() < 1e-9);
    }

    #[test]
    fn a_histogram_counts_and_sums_what_it_observes() {
        let h = Histogram::default();
        h.observe(Duration::from_micros(10));
        h.observe(Duration::from_micros(70));
        h.observe(Duration::from_millis(1));
        h.observe(Duration::from_secs(3600));
        let s = h.snapshot();
        assert_eq!(s.count(), 4);
        assert_eq!(s.buckets[0], 1);
        assert_eq!(s.buckets[1], 1);
        assert_eq!(s.buckets[5], 1);
        assert_eq!(s.buckets[BOUNDS], 1);
        assert!((s.sum_seconds - (3600.0 + 0.001 + 0.00008)).abs() < 1e-9, "{}", s.sum_seconds);
    }

    #[test]
    fn counters_and_gauges_move_as_told() {
        let c = Counter::default();
        c.inc();
        c.add(41);
        assert_eq!(c.get(), 42);
        let g = Gauge::default();
        g.add(5);
        g.add(-2);
        assert_eq!(g.get(), 3);
        g.set(-1);
        assert_eq!(g.get(), -1);
    }
}
