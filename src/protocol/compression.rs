//! The record codecs of Kafka batches (attribute bits 0–2: 1 gzip, 2 snappy, 3 lz4,
//! 4 zstd), with decompression bounded: the broker decompresses a client's batch only to
//! recompress it for a topic's `compression.type` or to find a record by timestamp, and it
//! must never let a small batch expand into an unbounded allocation. Every decoder reads
//! through a limit and fails as soon as the output would pass it.
//!
//! Snappy compresses through proto-kafka's codec (Kafka's xerial framing); gzip, lz4 and
//! zstd on their crates directly, at the level a topic asks for (`compress_at`), which
//! proto-kafka's codecs do not take. Decompression is written here on the same codec crates
//! because proto-kafka's decoders grow their output without a bound.

use std::io::{Read, Write};

use bytes::BytesMut;
use proto_kafka::compression::{Compressor, Snappy};

pub const NONE: u8 = 0;
pub const GZIP: u8 = 1;
pub const SNAPPY: u8 = 2;
pub const LZ4: u8 = 3;
pub const ZSTD: u8 = 4;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    #[error("unknown compression codec {0}")]
    Unknown(u8),
    #[error("records decompress past {limit} bytes")]
    TooLarge { limit: usize },
    #[error("{codec} data is corrupt: {reason}")]
    Corrupt { codec: &'static str, reason: String },
}

pub fn name(codec: u8) -> &'static str {
    match codec {
        NONE => "none",
        GZIP => "gzip",
        SNAPPY => "snappy",
        LZ4 => "lz4",
        ZSTD => "zstd",
        _ => "unknown",
    }
}

fn corrupt(codec: u8, e: impl std::fmt::Display) -> CodecError {
    CodecError::Corrupt { codec: name(codec), reason: e.to_string() }
}

/// Reads a whole stream, failing once it passes `limit` bytes.
fn read_bounded(codec: u8, reader: impl Read, limit: usize) -> Result<Vec<u8>, CodecError> {
    let mut out = Vec::new();
    reader.take(limit as u64 + 1).read_to_end(&mut out).map_err(|e| corrupt(codec, e))?;
    if out.len() > limit {
        return Err(CodecError::TooLarge { limit });
    }
    Ok(out)
}

/// The xerial framing Kafka's Java client writes for snappy: a 16-byte header, then blocks
/// of (big-endian u32 length, raw snappy block). Without the header the data is one raw
/// snappy block, as Java's SnappyInputStream also accepts.
const XERIAL_MAGIC: &[u8; 8] = b"\x82SNAPPY\x00";

fn snappy(data: &[u8], limit: usize) -> Result<Vec<u8>, CodecError> {
    let mut decoder = snap::raw::Decoder::new();
    let mut block = |out: &mut Vec<u8>, raw: &[u8]| -> Result<(), CodecError> {
        let len = snap::raw::decompress_len(raw).map_err(|e| corrupt(SNAPPY, e))?;
        if out.len() + len > limit {
            return Err(CodecError::TooLarge { limit });
        }
        let start = out.len();
        out.resize(start + len, 0);
        let n = decoder.decompress(raw, &mut out[start..]).map_err(|e| corrupt(SNAPPY, e))?;
        out.truncate(start + n);
        Ok(())
    };
    let mut out = Vec::new();
    if !data.starts_with(XERIAL_MAGIC) {
        block(&mut out, data)?;
        return Ok(out);
    }
    let mut rest = data.get(16..).ok_or_else(|| corrupt(SNAPPY, "truncated header"))?;
    while !rest.is_empty() {
        let len = rest.get(..4).ok_or_else(|| corrupt(SNAPPY, "truncated block length"))?;
        let len = u32::from_be_bytes(len.try_into().expect("4 bytes")) as usize;
        let raw = rest.get(4..4 + len).ok_or_else(|| corrupt(SNAPPY, "truncated block"))?;
        block(&mut out, raw)?;
        rest = &rest[4 + len..];
    }
    Ok(out)
}

/// The uncompressed bytes of `data` in `codec`, refused past `limit` bytes.
pub fn decompress(codec: u8, data: &[u8], limit: usize) -> Result<Vec<u8>, CodecError> {
    match codec {
        NONE if data.len() > limit => Err(CodecError::TooLarge { limit }),
        NONE => Ok(data.to_vec()),
        // Several gzip members in a row are one stream to Java's GZIPInputStream.
        GZIP => read_bounded(codec, flate2::read::MultiGzDecoder::new(data), limit),
        SNAPPY => snappy(data, limit),
        LZ4 => {
            let mut decoder = lz4::Decoder::new(data).map_err(|e| corrupt(codec, e))?;
            let out = read_bounded(codec, &mut decoder, limit)?;
            // The decoder stops quietly at the end of its input; a frame cut short is corrupt.
            decoder.finish().1.map_err(|e| corrupt(codec, e))?;
            Ok(out)
        }
        ZSTD => read_bounded(codec, zstd::stream::read::Decoder::new(data).map_err(|e| corrupt(codec, e))?, limit),
        other => Err(CodecError::Unknown(other)),
    }
}

/// Kafka's default level of `codec` (`compression.<codec>.level`, KIP-390): gzip's own
/// default (-1, which is 6), lz4's 9, zstd's 3; 0 for codecs without levels.
pub fn default_level(codec: u8) -> i32 {
    match codec {
        GZIP => -1,
        LZ4 => 9,
        ZSTD => 3,
        _ => 0,
    }
}

/// The levels `codec` accepts, as Kafka checks them, in words for an error; `None` for
/// codecs without levels.
pub fn check_level(codec: u8, level: i32) -> Result<(), &'static str> {
    let ok = match codec {
        GZIP => level == -1 || (1..=9).contains(&level),
        LZ4 => (1..=17).contains(&level),
        ZSTD => zstd::compression_level_range().contains(&level),
        _ => level == 0,
    };
    match (ok, codec) {
        (true, _) => Ok(()),
        (false, GZIP) => Err("-1 (the default) or from 1 to 9"),
        (false, LZ4) => Err("from 1 to 17"),
        (false, ZSTD) => Err("from -131072 to 22"),
        (false, _) => Err("0: this codec has no levels"),
    }
}

/// `data` compressed with `codec` at its default level, in the framing Kafka clients read.
pub fn compress(codec: u8, data: &[u8]) -> Result<Vec<u8>, CodecError> {
    compress_at(codec, default_level(codec), data)
}

/// `data` compressed with `codec` at `level` (checked by `check_level`), in the framing
/// Kafka clients read. As Kafka, lz4 at its default level 9 uses the fast compressor and any
/// other level the high-compression one (liblz4 counts level 1 as fast, and levels above 12
/// as 12, its most).
pub fn compress_at(codec: u8, level: i32, data: &[u8]) -> Result<Vec<u8>, CodecError> {
    match codec {
        NONE => Ok(data.to_vec()),
        GZIP => gzip_compress(level, data),
        SNAPPY => {
            let mut out = BytesMut::with_capacity(data.len() / 2 + 64);
            Snappy::compress(&mut out, |buf| {
                buf.extend_from_slice(data);
                Ok(())
            })
            .map_err(|e| corrupt(codec, e))?;
            Ok(out.to_vec())
        }
        LZ4 => lz4_compress(level, data),
        ZSTD => zstd_compress(level, data),
        other => Err(CodecError::Unknown(other)),
    }
}

fn gzip_compress(level: i32, data: &[u8]) -> Result<Vec<u8>, CodecError> {
    let level = match u32::try_from(level) {
        Ok(l) => flate2::Compression::new(l),
        Err(_) => flate2::Compression::default(),
    };
    let mut e = flate2::write::GzEncoder::new(Vec::with_capacity(data.len() / 2 + 64), level);
    e.write_all(data).map_err(|e| corrupt(GZIP, e))?;
    e.finish().map_err(|e| corrupt(GZIP, e))
}

/// The LZ4 frame format with independent blocks, which Kafka's clients read.
fn lz4_compress(level: i32, data: &[u8]) -> Result<Vec<u8>, CodecError> {
    // liblz4's frame level 0 is its fast compressor.
    let level = if level == default_level(LZ4) { 0 } else { level.clamp(0, 12) as u32 };
    let out = Vec::with_capacity(data.len() / 2 + 64);
    let mut e = lz4::EncoderBuilder::new()
        .level(level)
        .block_mode(lz4::BlockMode::Independent)
        .build(out)
        .map_err(|e| corrupt(LZ4, e))?;
    e.write_all(data).map_err(|e| corrupt(LZ4, e))?;
    let (out, done) = e.finish();
    done.map_err(|e| corrupt(LZ4, e))?;
    Ok(out)
}

/// zstd with one compression context per thread: making a context per batch (what a
/// one-shot stream encoder does) allocated and cleared its tables every time, 13% of a
/// shard's time when it recompressed every batch. The context keeps the level it was last
/// set to.
fn zstd_compress(level: i32, data: &[u8]) -> Result<Vec<u8>, CodecError> {
    thread_local! {
        static CONTEXT: std::cell::RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> = const { std::cell::RefCell::new(None) };
    }
    CONTEXT.with(|cell| {
        let mut cell = cell.borrow_mut();
        match cell.as_mut() {
            None => *cell = Some((level, zstd::bulk::Compressor::new(level).map_err(|e| corrupt(ZSTD, e))?)),
            Some((at, c)) if *at != level => {
                c.set_compression_level(level).map_err(|e| corrupt(ZSTD, e))?;
                *at = level;
            }
            Some(_) => {}
        }
        let (_, c) = cell.as_mut().expect("made above");
        c.compress(data).map_err(|e| corrupt(ZSTD, e))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(n: usize) -> Vec<u8> {
        (0..n).map(|i| b"kafka records compress well "[i % 28]).collect()
    }

    #[test]
    fn every_codec_round_trips() {
        for codec in [NONE, GZIP, SNAPPY, LZ4, ZSTD] {
            for len in [0, 1, 100, 70_000] {
                let data = text(len);
                let packed = compress(codec, &data).unwrap();
                assert_eq!(decompress(codec, &packed, len).unwrap(), data, "{} of {len} bytes", name(codec));
            }
        }
    }

    /// Words of a small vocabulary in a pseudo-random order: compressible, but not so
    /// evenly that every level finds the same matches.
    fn prose(n: usize) -> Vec<u8> {
        let words: [&[u8]; 8] =
            [b"offset ", b"leader ", b"epoch ", b"batch ", b"replica ", b"log ", b"fetch ", b"ack "];
        let (mut x, mut out) = (12345u32, Vec::with_capacity(n + 8));
        while out.len() < n {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            out.extend_from_slice(words[(x >> 16) as usize % 8]);
            out.extend_from_slice(&x.to_le_bytes()[2..3]);
        }
        out.truncate(n);
        out
    }

    #[test]
    fn levels_are_checked_applied_and_read_back() {
        let data = prose(200_000);
        for (codec, low, high) in [(GZIP, 1, 9), (LZ4, 3, 12), (ZSTD, -5, 19)] {
            assert_eq!(check_level(codec, default_level(codec)), Ok(()));
            let fast = compress_at(codec, low, &data).unwrap();
            let small = compress_at(codec, high, &data).unwrap();
            let default = compress(codec, &data).unwrap();
            for packed in [&fast, &small, &default] {
                assert_eq!(decompress(codec, packed, data.len()).unwrap(), data, "{}", name(codec));
            }
            assert!(
                small.len() < fast.len(),
                "{} level {high}: {} bytes, level {low}: {}",
                name(codec),
                small.len(),
                fast.len()
            );
            assert_ne!(default, small, "{}: the default level is not level {high}", name(codec));
        }
        // The zstd context of this thread follows the level asked for each time.
        assert_eq!(compress_at(ZSTD, 19, &data).unwrap(), compress_at(ZSTD, 19, &data).unwrap());
        assert_eq!(compress_at(ZSTD, 3, &data).unwrap(), compress(ZSTD, &data).unwrap());
        for (codec, bad) in [(GZIP, 0), (GZIP, 10), (LZ4, 0), (LZ4, 18), (ZSTD, 23), (ZSTD, -131073), (SNAPPY, 1)] {
            assert!(check_level(codec, bad).is_err(), "{} level {bad}", name(codec));
        }
        assert_eq!(check_level(GZIP, -1), Ok(()));
        assert_eq!(check_level(ZSTD, -131072), Ok(()));
    }

    #[test]
    fn output_past_the_limit_is_refused_for_every_codec() {
        // 8 MiB of zeros packs into a few KiB: a small batch that would expand a thousandfold.
        let bomb = vec![0u8; 8 << 20];
        for codec in [NONE, GZIP, SNAPPY, LZ4, ZSTD] {
            let packed = compress(codec, &bomb).unwrap();
            let e = decompress(codec, &packed, 1 << 20).unwrap_err();
            assert_eq!(e, CodecError::TooLarge { limit: 1 << 20 }, "{}", name(codec));
            assert_eq!(decompress(codec, &packed, 8 << 20).unwrap().len(), 8 << 20);
        }
    }

    #[test]
    fn garbage_is_corrupt_not_a_panic() {
        for codec in [GZIP, SNAPPY, LZ4, ZSTD] {
            for junk in
                [&b""[..], b"\x00", b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\xff\xff\xff\xff", &[0xab; 64]]
            {
                let _ = decompress(codec, junk, 1 << 20);
            }
            let mut packed = compress(codec, &text(5000)).unwrap();
            let n = packed.len();
            packed.truncate(n / 2);
            assert!(decompress(codec, &packed, 1 << 20).is_err(), "a cut {} stream", name(codec));
        }
        assert_eq!(decompress(7, b"x", 10).unwrap_err(), CodecError::Unknown(7));
    }
}
