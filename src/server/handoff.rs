//! Connections spread evenly over the shards. Each shard's listener takes what SO_REUSEPORT
//! gives it, and the kernel picks by a hash of the peer's address and port: a few
//! connections often land on one shard (two consumers on one of two shards half of the
//! time), and that shard then does all their work while the other idles. Measured on 2
//! cores: consume throughput 3.0M or 4.9M records/s depending on which way the hash fell.
//! So an acceptor hands a new connection to the shard serving the fewest connections when
//! that is not itself, as Seastar's connection distribution does. The connection crosses
//! one channel once, at accept, and belongs to that shard from then on; its requests still
//! reach partitions homed elsewhere over the mesh.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use glommio::net::AcceptedTcpStream;

use crate::net::admission::Ticket;

/// Connections served by each shard, all shards together.
pub(super) struct Loads {
    per_shard: Box<[AtomicUsize]>,
}

impl Loads {
    pub(super) fn new(shards: usize) -> Arc<Loads> {
        Arc::new(Loads { per_shard: (0..shards).map(|_| AtomicUsize::new(0)).collect() })
    }

    /// Picks the shard that serves a connection accepted on shard `me` (the one serving the
    /// fewest, `me` on a tie) and counts the connection there at once, so that a burst of
    /// accepts spreads before any of them is served.
    pub(super) fn place(self: &Arc<Self>, me: usize) -> Load {
        let count = |i: usize| self.per_shard[i].load(Ordering::Relaxed);
        let mut best = me;
        for i in 0..self.per_shard.len() {
            if count(i) < count(best) {
                best = i;
            }
        }
        self.count_on(best)
    }

    /// Counts a connection on shard `shard`.
    pub(super) fn count_on(self: &Arc<Self>, shard: usize) -> Load {
        self.per_shard[shard].fetch_add(1, Ordering::Relaxed);
        Load { loads: self.clone(), shard }
    }

    #[cfg(test)]
    fn counts(&self) -> Vec<usize> {
        self.per_shard.iter().map(|c| c.load(Ordering::Relaxed)).collect()
    }
}

/// One connection's place in the counts; dropped when the connection ends.
pub(super) struct Load {
    loads: Arc<Loads>,
    pub(super) shard: usize,
}

impl Drop for Load {
    fn drop(&mut self) {
        self.loads.per_shard[self.shard].fetch_sub(1, Ordering::Relaxed);
    }
}

/// A connection on its way to the shard that will serve it.
pub(super) struct Handoff {
    /// Not yet bound to any executor. glommio closes no fd for it: the receiving shard
    /// always binds it, and a bound stream closes when dropped.
    pub(super) stream: AcceptedTcpStream,
    pub(super) peer: SocketAddr,
    /// Which of the broker's listeners accepted it (the same order on every shard).
    pub(super) listener: usize,
    pub(super) ticket: Ticket,
    pub(super) load: Load,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_go_to_the_least_loaded_shard_and_leave_with_their_load() {
        let loads = Loads::new(3);
        // All accepted on shard 0, as an unlucky hash would have it: they spread.
        let first: Vec<Load> = (0..3).map(|_| loads.place(0)).collect();
        assert_eq!(first.iter().map(|l| l.shard).collect::<Vec<_>>(), [0, 1, 2]);
        let more: Vec<Load> = (0..3).map(|_| loads.place(0)).collect();
        assert_eq!(loads.counts(), [2, 2, 2]);
        // A tie keeps the connection where it was accepted.
        let here = loads.place(2);
        assert_eq!(here.shard, 2);
        drop(first);
        assert_eq!(loads.counts(), [1, 1, 2]);
        assert_eq!(loads.place(2).shard, 0, "the least loaded shard wins over the accepting one");
        drop((more, here));
        assert_eq!(loads.counts(), [0, 0, 0]);
    }
}
