//! Broker-wide connection limits: `max.connections` and `max.connections.per.ip` (with
//! `max.connections.per.ip.overrides`), checked when a shard accepts a connection.
//!
//! **Why shared state here.** Shards share nothing mutable, but these caps are broker-wide
//! and the kernel spreads connections over the shards' SO_REUSEPORT listeners as it likes: a
//! per-shard share of the cap would refuse clients while other shards sit below theirs. So
//! one `Admission` is made before the shards start and every shard's acceptor holds an `Arc`
//! of it. It is touched only when a connection is accepted or ends, never per request: the
//! total is one atomic (a locked add per accept), and the per-IP counts are a
//! `Mutex<HashMap>` taken only when a per-IP cap is set, for a few map operations.
//!
//! An over-cap connection has already completed the TCP handshake (the kernel does that);
//! the acceptor closes it at once and logs why through `RefusalLog`, which keeps a flood of
//! refusals to one line per second per shard. (Kafka closes over-cap connections per IP the
//! same way, but at `max.connections` it stops accepting until a place frees; closing at
//! once instead tells the client now rather than leaving it in the backlog until it times
//! out.) This module does no I/O.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::metrics::ConnectionLimit;

/// The caps and the connections they count, shared by every shard's acceptor.
#[derive(Debug)]
pub struct Admission {
    max_total: usize,
    max_per_ip: usize,
    overrides: HashMap<IpAddr, usize>,
    total: AtomicUsize,
    /// Open connections per peer IP; an IP leaves the map with its last connection.
    per_ip: Mutex<HashMap<IpAddr, usize>>,
}

/// Why a connection was refused: the limit, its cap, and the peer's address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    pub limit: ConnectionLimit,
    pub cap: usize,
    pub ip: IpAddr,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.limit {
            ConnectionLimit::MaxConnections => {
                write!(f, "connection from {} refused: the broker has max_connections ({}) open", self.ip, self.cap)
            }
            ConnectionLimit::MaxConnectionsPerIp => {
                write!(f, "connection from {} refused: that IP has max_connections_per_ip ({}) open", self.ip, self.cap)
            }
        }
    }
}

/// One admitted connection's place in the counts; dropping it gives the place back.
#[derive(Debug)]
pub struct Ticket {
    admission: Arc<Admission>,
    ip: IpAddr,
    counted_per_ip: bool,
}

impl Admission {
    /// `overrides` replace `max_per_ip` for their addresses.
    pub fn new(max_total: usize, max_per_ip: usize, overrides: &[(IpAddr, u32)]) -> Arc<Admission> {
        Arc::new(Admission {
            max_total,
            max_per_ip,
            overrides: overrides.iter().map(|&(ip, n)| (ip.to_canonical(), n as usize)).collect(),
            total: AtomicUsize::new(0),
            per_ip: Mutex::new(HashMap::new()),
        })
    }

    /// Takes a place for a connection from `ip`, or says which cap it would exceed.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Ticket, Refused> {
        let ip = ip.to_canonical();
        if self.total.fetch_add(1, Ordering::AcqRel) >= self.max_total {
            self.total.fetch_sub(1, Ordering::AcqRel);
            return Err(Refused { limit: ConnectionLimit::MaxConnections, cap: self.max_total, ip });
        }
        let per_ip_cap = self.per_ip_cap(ip);
        // At the defaults (no per-IP cap) the map is never touched.
        let counted_per_ip = per_ip_cap < i32::MAX as usize;
        if counted_per_ip {
            let mut map = self.per_ip_counts();
            let n = map.entry(ip).or_insert(0);
            if *n >= per_ip_cap {
                if *n == 0 {
                    map.remove(&ip);
                }
                drop(map);
                self.total.fetch_sub(1, Ordering::AcqRel);
                return Err(Refused { limit: ConnectionLimit::MaxConnectionsPerIp, cap: per_ip_cap, ip });
            }
            *n += 1;
        }
        Ok(Ticket { admission: self.clone(), ip, counted_per_ip })
    }

    /// Connections open now, broker-wide.
    pub fn open(&self) -> usize {
        self.total.load(Ordering::Acquire)
    }

    /// Connections open now from `ip`, as far as a per-IP cap counts them.
    pub fn open_from(&self, ip: IpAddr) -> usize {
        self.per_ip_counts().get(&ip.to_canonical()).copied().unwrap_or(0)
    }

    fn per_ip_cap(&self, ip: IpAddr) -> usize {
        self.overrides.get(&ip).copied().unwrap_or(self.max_per_ip)
    }

    fn per_ip_counts(&self) -> MutexGuard<'_, HashMap<IpAddr, usize>> {
        // A panic while holding the lock cannot leave a count half-changed: use it as is.
        self.per_ip.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if self.counted_per_ip {
            let mut map = self.admission.per_ip_counts();
            if let Some(n) = map.get_mut(&self.ip) {
                *n -= 1;
                if *n == 0 {
                    map.remove(&self.ip);
                }
            }
        }
        self.admission.total.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Keeps refusals from flooding the log: the first refusal is logged, then at most one line
/// per `every`, which also says how many were refused in between without a line.
#[derive(Debug)]
pub struct RefusalLog {
    every: Duration,
    last: Option<Instant>,
    unlogged: u64,
}

impl RefusalLog {
    pub fn new(every: Duration) -> RefusalLog {
        RefusalLog { every, last: None, unlogged: 0 }
    }

    /// A refusal at `now`: `Some(n)` when it should be logged, `n` being the refusals since
    /// the last logged one that were not logged; `None` to stay quiet.
    pub fn refused(&mut self, now: Instant) -> Option<u64> {
        match self.last {
            Some(last) if now.saturating_duration_since(last) < self.every => {
                self.unlogged += 1;
                None
            }
            _ => {
                self.last = Some(now);
                Some(std::mem::take(&mut self.unlogged))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UNLIMITED: usize = i32::MAX as usize;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn the_total_cap_refuses_past_it_and_frees_places_on_drop() {
        let a = Admission::new(2, UNLIMITED, &[]);
        let t1 = a.admit(ip("10.0.0.1")).unwrap();
        let _t2 = a.admit(ip("10.0.0.2")).unwrap();
        let e = a.admit(ip("10.0.0.3")).unwrap_err();
        assert_eq!(e.limit, ConnectionLimit::MaxConnections);
        assert_eq!(e.cap, 2);
        assert!(e.to_string().contains("10.0.0.3") && e.to_string().contains("max_connections (2)"), "{e}");
        assert_eq!(a.open(), 2, "a refusal does not keep its place");
        drop(t1);
        assert_eq!(a.open(), 1);
        let _t3 = a.admit(ip("10.0.0.3")).unwrap();
        assert_eq!(a.open_from(ip("10.0.0.3")), 0, "no per-IP cap: not counted per IP");
    }

    #[test]
    fn the_per_ip_cap_refuses_only_that_ip_and_overrides_replace_it() {
        let a = Admission::new(UNLIMITED, 2, &[(ip("10.0.0.9"), 3), (ip("10.0.0.8"), 0)]);
        let held: Vec<Ticket> = (0..2).map(|_| a.admit(ip("10.0.0.1")).unwrap()).collect();
        let e = a.admit(ip("10.0.0.1")).unwrap_err();
        assert_eq!((e.limit, e.cap, e.ip), (ConnectionLimit::MaxConnectionsPerIp, 2, ip("10.0.0.1")));
        assert!(e.to_string().contains("10.0.0.1") && e.to_string().contains("max_connections_per_ip (2)"), "{e}");
        let _other = a.admit(ip("10.0.0.2")).unwrap();
        let nine: Vec<Ticket> = (0..3).map(|_| a.admit(ip("10.0.0.9")).unwrap()).collect();
        assert_eq!(a.admit(ip("10.0.0.9")).unwrap_err().cap, 3);
        assert_eq!(a.admit(ip("10.0.0.8")).unwrap_err().cap, 0);
        assert_eq!(a.open(), 6);
        assert_eq!(a.open_from(ip("10.0.0.1")), 2);
        drop(held);
        drop(nine);
        assert_eq!(a.open_from(ip("10.0.0.1")), 0);
        assert_eq!(a.per_ip_counts().len(), 1, "IPs leave the map with their last connection");
        let _again = a.admit(ip("10.0.0.1")).unwrap();
    }

    #[test]
    fn ipv4_mapped_addresses_count_as_their_ipv4_address() {
        let a = Admission::new(UNLIMITED, 1, &[]);
        let _t = a.admit(ip("127.0.0.1")).unwrap();
        assert!(a.admit(ip("::ffff:127.0.0.1")).is_err());
    }

    #[test]
    fn the_total_cap_holds_across_threads() {
        let a = Admission::new(50, UNLIMITED, &[]);
        let admitted: usize = std::thread::scope(|s| {
            let workers: Vec<_> = (0..4)
                .map(|_| {
                    let a = a.clone();
                    s.spawn(move || (0..100).filter_map(|_| a.admit(ip("10.0.0.1")).ok()).map(std::mem::forget).count())
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).sum()
        });
        assert_eq!(admitted, 50);
        assert_eq!(a.open(), 50);
    }

    #[test]
    fn refusals_are_logged_at_most_once_per_interval_with_the_count_between() {
        let mut log = RefusalLog::new(Duration::from_secs(1));
        let t0 = Instant::now();
        assert_eq!(log.refused(t0), Some(0));
        for i in 1..=5 {
            assert_eq!(log.refused(t0 + Duration::from_millis(i * 100)), None);
        }
        assert_eq!(log.refused(t0 + Duration::from_millis(1000)), Some(5));
        assert_eq!(log.refused(t0 + Duration::from_millis(1500)), None);
        assert_eq!(log.refused(t0 + Duration::from_millis(5000)), Some(1));
    }
}
