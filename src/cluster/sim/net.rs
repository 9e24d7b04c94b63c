//! The simulated network: every message gets a delivery time a few steps ahead (so messages
//! overtake each other), and when the network is lossy it may be dropped or duplicated.
//! A partition assigns each node a side; messages between sides are lost at delivery.

use std::collections::BTreeMap;

use raft::prelude::Message;

use super::rng::Rng;

const MAX_DELAY_STEPS: u64 = 4;
const DROP_PER_MILLE: u64 = 50;
const DUPLICATE_PER_MILLE: u64 = 20;

pub(super) struct Net {
    /// Keyed by (delivery step, send sequence): the sequence keeps same-step order seeded.
    in_flight: BTreeMap<(u64, u64), Message>,
    sent: u64,
    /// Partition side per node (index `id - 1`); all zero when healed.
    side: Vec<u8>,
    pub(super) lossy: bool,
}

impl Net {
    pub(super) fn new(nodes: usize) -> Net {
        Net { in_flight: BTreeMap::new(), sent: 0, side: vec![0; nodes], lossy: true }
    }

    pub(super) fn send(&mut self, rng: &mut Rng, now: u64, msgs: Vec<Message>) {
        for msg in msgs {
            if self.lossy && rng.chance(DROP_PER_MILLE) {
                continue;
            }
            if self.lossy && rng.chance(DUPLICATE_PER_MILLE) {
                self.enqueue(now + rng.below(MAX_DELAY_STEPS + 1), msg.clone());
            }
            self.enqueue(now + rng.below(MAX_DELAY_STEPS + 1), msg);
        }
    }

    fn enqueue(&mut self, at: u64, msg: Message) {
        self.sent += 1;
        self.in_flight.insert((at, self.sent), msg);
    }

    /// The next message due by `now` that the partition lets through.
    pub(super) fn deliver(&mut self, now: u64) -> Option<Message> {
        loop {
            let entry = self.in_flight.first_entry()?;
            if entry.key().0 > now {
                return None;
            }
            let msg = entry.remove();
            if self.side[msg.from as usize - 1] == self.side[msg.to as usize - 1] {
                return Some(msg);
            }
        }
    }

    pub(super) fn partition(&mut self, side: Vec<u8>) {
        self.side = side;
    }

    pub(super) fn is_partitioned(&self) -> bool {
        self.side.iter().any(|&s| s != 0)
    }

    pub(super) fn heal(&mut self) {
        self.side.iter_mut().for_each(|s| *s = 0);
    }
}
