//! The fixed-rate schedule: send `k` is due at `start + k × interval`. A send that leaves
//! late still counts its latency from when it was due (so a stalled broker shows up in the
//! percentiles instead of silently lowering the load), and the lateness itself is recorded
//! as publish delay.

use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    start: Instant,
    /// None: as fast as possible.
    interval: Option<Duration>,
    sent: u64,
}

impl Schedule {
    /// `per_second` sends a second; 0 means no pacing.
    pub fn new(start: Instant, per_second: f64) -> Schedule {
        let interval = (per_second > 0.0).then(|| Duration::from_secs_f64(1.0 / per_second));
        Schedule { start, interval, sent: 0 }
    }

    /// When the next send is due (`None`: now, unpaced).
    pub fn next_due(&self) -> Option<Instant> {
        self.interval.map(|i| self.start + i.mul_f64(self.sent as f64))
    }

    /// Marks the next send as made; returns when it was due (or `now` if unpaced).
    pub fn take(&mut self, now: Instant) -> Instant {
        let due = self.next_due().unwrap_or(now);
        self.sent += 1;
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sends_are_due_at_a_fixed_interval_whatever_the_delays() {
        let t0 = Instant::now();
        let mut s = Schedule::new(t0, 1000.0);
        assert_eq!(s.take(t0), t0);
        assert_eq!(s.next_due(), Some(t0 + Duration::from_millis(1)));
        // a send that leaves 50 ms late keeps its due time: the next ones are not shifted
        let late = t0 + Duration::from_millis(50);
        assert_eq!(s.take(late), t0 + Duration::from_millis(1));
        assert_eq!(s.take(late), t0 + Duration::from_millis(2));
    }

    #[test]
    fn unpaced_sends_are_due_when_they_leave() {
        let t0 = Instant::now();
        let mut s = Schedule::new(t0, 0.0);
        assert_eq!(s.next_due(), None);
        let t1 = t0 + Duration::from_millis(7);
        assert_eq!(s.take(t1), t1);
    }
}
