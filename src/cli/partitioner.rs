//! Which partition a record goes to, as Kafka's Java producer decides (its built-in
//! partitioner): a keyed record to `murmur2(key) & 0x7fffffff % partitions`, so the CLI puts
//! a key where every Java, librdkafka (`murmur2_random`) or franz-go client with the default
//! settings puts it; records without a key stick to one partition until its batch is full,
//! then move to the next (the sticky partitioner of KIP-480, without its load weighting).

/// Kafka's 32-bit MurmurHash2 (`org.apache.kafka.common.utils.Utils.murmur2`): seed
/// 0x9747b28c, four little-endian bytes at a time, the 1-3 trailing bytes mixed in last.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;

    let mut h = SEED ^ data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate().rev() {
            h ^= u32::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition of a keyed record among `partitions` (> 0).
pub fn partition_for_key(key: &[u8], partitions: i32) -> i32 {
    debug_assert!(partitions > 0);
    // Kafka's `Utils.toPositive`: clear the sign bit rather than take the absolute value.
    (murmur2(key) & 0x7fff_ffff) % partitions
}

/// Where records without a key go: one partition until the caller reports its batch full.
#[derive(Debug)]
pub struct Sticky {
    current: i32,
    partitions: i32,
}

impl Sticky {
    /// Starts at `seed % partitions`, so several producers do not all fill partition 0 first.
    pub fn new(partitions: i32, seed: u64) -> Sticky {
        debug_assert!(partitions > 0);
        Sticky { current: (seed % partitions as u64) as i32, partitions }
    }

    pub fn current(&self) -> i32 {
        self.current
    }

    /// The batch of the current partition was sent: the next unkeyed record starts a batch
    /// on the next partition.
    pub fn batch_full(&mut self) {
        self.current = (self.current + 1) % self.partitions;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kafka's own vectors (`UtilsTest.testMurmur2`), plus a binary key whose hash a JVM
    /// Kafka client computed (Sarama keeps it among its test cases).
    #[test]
    fn murmur2_matches_kafka() {
        let cases: &[(&[u8], i32)] = &[
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58_897_971),
            (b"abc", 479_470_107),
            (&[12, 42, 56, 24, 109, 111], 274_204_207),
        ];
        for (input, want) in cases {
            assert_eq!(murmur2(input), *want, "murmur2({:?})", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn the_partition_clears_the_sign_bit_then_takes_the_remainder() {
        // -973932308 & 0x7fffffff = 1173551340
        assert_eq!(partition_for_key(b"21", i32::MAX), 1_173_551_340);
        assert_eq!(partition_for_key(b"21", 7), 1_173_551_340 % 7);
        assert_eq!(partition_for_key(b"abc", 10), 479_470_107 % 10);
        for n in 1..20 {
            let p = partition_for_key(b"any key", n);
            assert!((0..n).contains(&p));
        }
    }

    #[test]
    fn unkeyed_records_move_on_when_a_batch_fills() {
        let mut s = Sticky::new(3, 7);
        assert_eq!(s.current(), 1);
        s.batch_full();
        assert_eq!(s.current(), 2);
        s.batch_full();
        assert_eq!(s.current(), 0);
    }
}
