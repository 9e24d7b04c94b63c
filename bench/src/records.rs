//! Record batches as producers send them and consumers read them back.
//!
//! Every value starts with its send time (ns since the Unix epoch, big-endian), which
//! consumers turn into end-to-end latency. The rest of the value is text-like filler (16
//! symbols, 4 bits of entropy a byte) so that compressed runs compress about as much as
//! typical JSON or log lines do (about 2:1), not absurdly as zeros would. Keys, when asked
//! for, are a zero-padded counter of `key_size` bytes: each record's key is distinct, which
//! is the costlier case for a broker's and a client's encoders, unless `key_space` wraps the
//! counter (updates of the same keys, for compacted topics).
//!
//! Uncompressed batches are built with the broker's own batch builder (the fast path).
//! Compressed ones go through proto-kafka's record encoder, which also decompresses them on
//! the consumer side.

use anyhow::{bail, Context, Result};
use bytes::{Bytes, BytesMut};
use ringbroker::protocol::batch;
use ringbroker::protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

/// Parses a codec name as Kafka's `compression.type` spells it.
pub fn parse_compression(s: &str) -> Result<Compression> {
    Ok(match s {
        "none" => Compression::None,
        "gzip" => Compression::Gzip,
        "snappy" => Compression::Snappy,
        "lz4" => Compression::Lz4,
        "zstd" => Compression::Zstd,
        other => bail!("unknown compression `{other}`: use none, gzip, snappy, lz4 or zstd"),
    })
}

/// What every record of a run looks like.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Bytes per value, at least 8 (the send timestamp).
    pub record_size: usize,
    /// Bytes per key; 0 sends null keys.
    pub key_size: usize,
    /// Distinct keys, over all producers (0: every key distinct): updates of the same keys,
    /// for compacted topics.
    pub key_space: u64,
    pub compression: Compression,
}

/// Builds the batches of one producer, reusing its value buffers.
pub struct BatchBuilder {
    shape: Shape,
    values: Vec<Vec<u8>>,
    keys: Vec<Vec<u8>>,
    next_key: u64,
}

impl BatchBuilder {
    pub fn new(shape: Shape, max_records: usize, seed: u64) -> BatchBuilder {
        let mut rng = seed | 1;
        let values = (0..max_records).map(|_| filler(shape.record_size.max(8), &mut rng)).collect();
        let keys = (0..max_records).map(|_| vec![b'0'; shape.key_size]).collect();
        BatchBuilder { shape, values, keys, next_key: seed << 32 }
    }

    /// A batch of `n` records stamped with `send_ns`, timestamped `send_ns / 1e6` ms.
    pub fn build(&mut self, n: usize, send_ns: u64) -> Result<Bytes> {
        let n = n.min(self.values.len());
        let ts = send_ns.to_be_bytes();
        for v in self.values.iter_mut().take(n) {
            v[..8].copy_from_slice(&ts);
        }
        let space = self.shape.key_space;
        for k in self.keys.iter_mut().take(n) {
            write_counter(k, if space > 0 { self.next_key % space } else { self.next_key });
            self.next_key = self.next_key.wrapping_add(1);
        }
        let timestamp_ms = (send_ns / 1_000_000) as i64;
        let key = |i: usize| (self.shape.key_size > 0).then(|| self.keys[i].as_slice());
        if self.shape.compression == Compression::None {
            let kvs: Vec<batch::KeyValue> = (0..n).map(|i| (key(i), Some(self.values[i].as_slice()))).collect();
            return Ok(Bytes::from(batch::build_keyed(timestamp_ms, &kvs)));
        }
        let records: Vec<Record> = (0..n)
            .map(|i| Record {
                transactional: false,
                control: false,
                delete_horizon_ms: None,
                partition_leader_epoch: -1,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset: i as i64,
                sequence: -1,
                timestamp: timestamp_ms,
                key: key(i).map(Bytes::copy_from_slice),
                value: Some(Bytes::copy_from_slice(&self.values[i])),
                headers: Vec::new(),
            })
            .collect();
        let mut buf = BytesMut::new();
        let options = RecordEncodeOptions { version: 2, compression: self.shape.compression };
        RecordBatchEncoder::encode(&mut buf, &records, &options).context("encoding a compressed batch")?;
        Ok(buf.freeze())
    }
}

/// Text-like bytes: 16 symbols drawn by xorshift.
fn filler(len: usize, state: &mut u64) -> Vec<u8> {
    const SYMBOLS: &[u8; 16] = b"abcdefghij{}\":, ";
    (0..len)
        .map(|_| {
            *state ^= *state << 13;
            *state ^= *state >> 7;
            *state ^= *state << 17;
            SYMBOLS[(*state >> 60) as usize]
        })
        .collect()
}

/// Writes `v` in decimal, right-aligned and zero-padded, into `out` (high digits dropped).
fn write_counter(out: &mut [u8], mut v: u64) {
    for b in out.iter_mut().rev() {
        *b = b'0' + (v % 10) as u8;
        v /= 10;
    }
}

/// What a consumer learned from one fetched record set.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Read {
    /// The offset after the last whole batch (the next fetch offset).
    pub next: i64,
    /// Records at or past the fetch offset.
    pub count: u64,
}

/// Walks the whole batches of `records`, counting records at offsets ≥ `next` and calling
/// `on_value` with each one's value. A batch cut off at the end of the fetch is left for the
/// next fetch, as clients do.
pub fn read(records: &Bytes, next: i64, mut on_value: impl FnMut(&[u8])) -> Result<Read> {
    let mut out = Read { next, count: 0 };
    let mut pos = 0;
    while let Some(Ok(size)) = batch::batch_size(&records[pos..]) {
        let Some(b) = records.get(pos..pos + size) else { break };
        let h = batch::read_header(b).map_err(|e| anyhow::anyhow!("fetched a bad batch: {e:?}"))?;
        if h.attributes & 0x7 == 0 {
            for r in batch::records(b) {
                if h.base_offset + r.offset_delta as i64 >= next {
                    out.count += 1;
                    on_value(r.value.unwrap_or_default());
                }
            }
        } else {
            let set = RecordBatchDecoder::decode(&mut records.slice(pos..pos + size))
                .context("decompressing a fetched batch")?;
            for r in set.records.iter().filter(|r| r.offset >= next) {
                out.count += 1;
                on_value(r.value.as_deref().unwrap_or_default());
            }
        }
        out.next = out.next.max(h.last_offset() + 1);
        pos += size;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(compression: Compression, key_size: usize) -> Shape {
        Shape { record_size: 100, key_size, key_space: 0, compression }
    }

    #[test]
    fn every_codec_round_trips_values_and_timestamps() {
        for codec in ["none", "gzip", "snappy", "lz4", "zstd"] {
            let mut b = BatchBuilder::new(shape(parse_compression(codec).unwrap(), 6), 10, 7);
            let mut batch = BytesMut::from(&b.build(10, 123_456_789_000).unwrap()[..]);
            batch::patch(&mut batch, 40, 0);
            let mut stamps = Vec::new();
            let r = read(&batch.freeze(), 42, |v| stamps.push(u64::from_be_bytes(v[..8].try_into().unwrap())))
                .unwrap_or_else(|e| panic!("{codec}: {e}"));
            assert_eq!(r, Read { next: 50, count: 8 }, "{codec}: offsets 40 and 41 were read before");
            assert!(stamps.iter().all(|&s| s == 123_456_789_000), "{codec}");
        }
    }

    #[test]
    fn compressed_batches_are_smaller_than_plain_ones() {
        let plain = BatchBuilder::new(shape(Compression::None, 0), 16, 3).build(16, 1).unwrap();
        let zstd = BatchBuilder::new(shape(Compression::Zstd, 0), 16, 3).build(16, 1).unwrap();
        assert!(
            zstd.len() < plain.len() * 3 / 4,
            "zstd {} vs plain {}: filler should compress",
            zstd.len(),
            plain.len()
        );
        assert!(zstd.len() > plain.len() / 10, "filler should not compress absurdly well");
    }

    #[test]
    fn keys_are_distinct_counters_of_the_asked_size() {
        let mut b = BatchBuilder::new(shape(Compression::None, 4), 3, 0);
        let batch = b.build(3, 1).unwrap();
        let keys: Vec<Vec<u8>> = batch::records(&batch).map(|r| r.key.unwrap().to_vec()).collect();
        assert_eq!(keys, vec![b"0000".to_vec(), b"0001".to_vec(), b"0002".to_vec()]);
    }

    #[test]
    fn a_cut_batch_at_the_end_is_left_for_the_next_fetch() {
        let mut b = BatchBuilder::new(shape(Compression::None, 0), 3, 1);
        let mut two = BytesMut::from(&b.build(3, 5).unwrap()[..]);
        batch::patch(&mut two, 10, 0);
        let mut c = BytesMut::from(&b.build(1, 5).unwrap()[..]);
        batch::patch(&mut c, 13, 0);
        two.extend_from_slice(&c);
        two.extend_from_slice(&c[..20]);
        let r = read(&two.freeze(), 11, |_| {}).unwrap();
        assert_eq!(r, Read { next: 14, count: 3 });
    }

    #[test]
    fn unknown_codecs_are_named() {
        let e = parse_compression("brotli").unwrap_err().to_string();
        assert!(e.contains("brotli") && e.contains("zstd"), "{e}");
    }
}
