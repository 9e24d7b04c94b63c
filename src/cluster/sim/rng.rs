//! The simulation's only source of randomness (`crate::rng`'s splitmix64), so a seed replays
//! a run exactly.

use crate::rng::SplitMix64;

pub(super) struct Rng(SplitMix64);

impl Rng {
    pub(super) fn new(seed: u64) -> Rng {
        Rng(SplitMix64::new(seed))
    }

    /// Uniform enough in `0..n` for a simulation (the modulo bias is negligible).
    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.0.next_u64() % n
    }

    pub(super) fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }
}
