//! The record codecs of Kafka batches (attribute bits 0–2: 1 gzip, 2 snappy, 3 lz4,
//! 4 zstd), with decompression bounded: the broker decompresses a client's batch only to
//! recompress it for a topic's `compression.type` or to find a record by timestamp, and it
//! must never let a small batch expand into an unbounded allocation. Every decoder reads
//! through a limit and fails as soon as the output would pass it.
//!
//! Compression goes through proto-kafka's codecs (Kafka's framing: xerial blocks for snappy,
//! the LZ4 frame format with independent blocks), which write their output as they go, but
//! for zstd, which keeps a compression context per thread (see `zstd_compress`).
//! Decompression is written here on the same codec crates because proto-kafka's decoders
//! grow their output without a bound.

use std::io::Read;

use bytes::BytesMut;
use proto_kafka::compression::{Compressor, Gzip, Lz4, Snappy};

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

/// `data` compressed with `codec`, in the framing Kafka clients read.
pub fn compress(codec: u8, data: &[u8]) -> Result<Vec<u8>, CodecError> {
    fn with<C: Compressor<BytesMut, BufMut = BytesMut>>(codec: u8, data: &[u8]) -> Result<Vec<u8>, CodecError> {
        let mut out = BytesMut::with_capacity(data.len() / 2 + 64);
        C::compress(&mut out, |buf| {
            buf.extend_from_slice(data);
            Ok(())
        })
        .map_err(|e| corrupt(codec, e))?;
        Ok(out.to_vec())
    }
    match codec {
        NONE => Ok(data.to_vec()),
        GZIP => with::<Gzip>(codec, data),
        SNAPPY => with::<Snappy>(codec, data),
        LZ4 => with::<Lz4>(codec, data),
        ZSTD => zstd_compress(data),
        other => Err(CodecError::Unknown(other)),
    }
}

/// Kafka's default zstd level (`compression.zstd.level`).
const ZSTD_LEVEL: i32 = 3;

/// zstd with one compression context per thread: making a context per batch (what a
/// one-shot stream encoder does) allocated and cleared its tables every time, 13% of a
/// shard's time when it recompressed every batch.
fn zstd_compress(data: &[u8]) -> Result<Vec<u8>, CodecError> {
    thread_local! {
        static CONTEXT: std::cell::RefCell<Option<zstd::bulk::Compressor<'static>>> = const { std::cell::RefCell::new(None) };
    }
    CONTEXT.with(|cell| {
        let mut cell = cell.borrow_mut();
        if cell.is_none() {
            *cell = Some(zstd::bulk::Compressor::new(ZSTD_LEVEL).map_err(|e| corrupt(ZSTD, e))?);
        }
        cell.as_mut().expect("made above").compress(data).map_err(|e| corrupt(ZSTD, e))
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
