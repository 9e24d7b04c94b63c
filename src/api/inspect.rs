//! A request frame taken apart the way `dispatch` takes it apart, without a shard: the
//! preamble and version checks, the header, the body decoded by the generated codec for its
//! API and version, and, for Produce, every partition's record batch validated as an append
//! would validate it. The fuzz targets (`tests/fuzz`) and the replay of their corpus as
//! ordinary tests (`tests/wire/fuzz_corpus.rs`) call this, so they exercise the broker's own
//! path: any input must come back as `Ok` or a `Fault`, never a panic or an abort.

use bytes::Bytes;
use proto_kafka::messages::*;

use super::{admit, decode_as, Fault, Undecodable};
use crate::protocol::{batch, frame, header};

/// Decodes the body of a request this broker serves; Produce's record sets are returned for
/// validation.
fn decode_body(api: ApiKey, v: i16, body: &Bytes) -> Result<Vec<Bytes>, Fault> {
    if api == ApiKey::Produce {
        let r: ProduceRequest = decode_as(api, v, body)?;
        return Ok(r.topic_data.into_iter().flat_map(|t| t.partition_data).filter_map(|p| p.records).collect());
    }
    super::decode_body(api, v, body)?;
    Ok(Vec::new())
}

/// Takes a request frame (without its size prefix) apart; `max_batch` is `message.max.bytes`.
/// A batch the broker would refuse is reported as a `Fault::Decode` naming the reason.
pub fn inspect(frame: Bytes, max_batch: usize) -> Result<(), Fault> {
    let pre = header::preamble(&frame).ok_or(Fault::NoHeader)?;
    let api = admit(&pre)?;
    let (_, body) = header::parse(api, pre.api_version, frame).map_err(|e| Fault::Decode {
        api,
        version: pre.api_version,
        reason: Undecodable::Header(e),
    })?;
    for records in decode_body(api, pre.api_version, &body)? {
        batch::validate_produce(&records, max_batch).map_err(|e| Fault::Decode {
            api,
            version: pre.api_version,
            reason: Undecodable::Batch(e),
        })?;
        // What ListOffsets by timestamp and the internal logs' replay read back.
        for _ in batch::records(&records) {}
    }
    Ok(())
}

/// A byte stream as a connection reads it: frames while their size prefixes pass the
/// `max` check, each one inspected; stops at the first refused prefix or an incomplete frame.
pub fn frames(mut stream: &[u8], max: u32) {
    while let Ok(frame::Framing::Complete { len }) = frame::check(stream, max) {
        let Some(body) = stream.get(4..4 + len) else { return };
        let _ = inspect(Bytes::copy_from_slice(body), max as usize);
        stream = &stream[4 + len..];
    }
}

/// One record batch through the produce validator, the record reader and the rewrites an
/// append may make (decompression within a limit, recompression, LogAppendTime stamping).
/// The first byte steers: bit 0 gives the rest a consistent length and CRC32C first, so that
/// the checks after the checksum are reached too; bit 4 first marks the records as
/// compressed with the codec in bits 1–3, so random bytes reach the decompressors; bits 5–7
/// pick the codec to recompress into. A rewritten batch must itself be valid.
pub fn batch(data: &[u8], max: usize) {
    let Some((&mode, rest)) = data.split_first() else { return };
    let mut b = rest.to_vec();
    if b.len() >= batch::HEADER_LEN {
        if mode & 0x10 != 0 {
            b[22] = (b[22] & !0x7) | ((mode >> 1) & 0x7);
        }
        if mode & 1 == 1 {
            let len = (b.len() - batch::LOG_OVERHEAD) as i32;
            b[8..12].copy_from_slice(&len.to_be_bytes());
            let crc = crc32c::crc32c(&b[21..]);
            b[17..21].copy_from_slice(&crc.to_be_bytes());
        }
    }
    let Ok(h) = batch::validate_produce(&b, max) else { return };
    for _ in batch::records(&b) {}
    if let Ok(records) = batch::record_bytes(&b, max) {
        for _ in batch::parse_records(&records, h.base_timestamp) {}
    }
    let _ = batch::min_timestamp(&b, max);
    if let Ok(summary) = batch::check_records(&b, &h, max) {
        let mut fixed = b.clone();
        batch::set_max_timestamp(&mut fixed, summary.max_timestamp);
        batch::check_batch(&fixed).expect("a batch with its maxTimestamp set is valid");
    }
    if let Ok(out) = batch::recompress(&b, (mode >> 5) % 5, max) {
        batch::check_batch(&out).expect("a recompressed batch is valid");
    }
    let mut stamped = b.clone();
    batch::stamp_log_append_time(&mut stamped, 1_700_000_000_000);
    batch::check_batch(&stamped).expect("a stamped batch is valid");
}

/// The SASL mechanisms' parsers on client tokens, as an unauthenticated client sends them:
/// the first byte picks PLAIN (even) or SCRAM (odd; its second bit picks SHA-256 or
/// SHA-512), and for SCRAM the rest is split at the first 0xff byte into the client-first
/// and client-final messages. The user `user` exists (password `pencil`); every other name
/// takes the unknown-user path. PLAIN's tokens are only parsed: checking one is a PBKDF2 run,
/// which would slow the fuzzer and holds no parsing.
pub fn sasl(data: &[u8]) {
    use std::sync::OnceLock;

    use crate::auth::plain;
    use crate::auth::scram::{Mechanism, ScramCredential, ScramServer, MIN_ITERATIONS};
    static KNOWN: OnceLock<[ScramCredential; 2]> = OnceLock::new();
    let Some((&mode, rest)) = data.split_first() else { return };
    if mode & 1 == 0 {
        let _ = plain::parse(rest);
        return;
    }
    let known = KNOWN.get_or_init(|| {
        [Mechanism::Sha256, Mechanism::Sha512]
            .map(|m| ScramCredential::from_password(m, "pencil", b"salt", MIN_ITERATIONS))
    });
    let known = &known[usize::from(mode & 2 != 0)];
    let (first, last) = match rest.iter().position(|&b| b == 0xff) {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, &[][..]),
    };
    let mut server = ScramServer::new(known.mechanism, [7u8; 32]);
    if server.client_first(first, |u| (u == "user").then(|| known.clone())).is_ok() {
        let _ = server.client_final(last);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::{BufMut, BytesMut};
    use proto_kafka::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use proto_kafka::protocol::Encodable;

    fn frame<R: Encodable>(api: ApiKey, version: i16, req: &R) -> Bytes {
        let mut h = RequestHeader::default();
        h.request_api_key = api as i16;
        h.request_api_version = version;
        h.correlation_id = 7;
        let mut b = BytesMut::new();
        h.encode(&mut b, api.request_header_version(version)).unwrap();
        req.encode(&mut b, version).unwrap();
        b.freeze()
    }

    fn produce(records: Vec<u8>) -> Bytes {
        let mut p = PartitionProduceData::default();
        p.records = Some(records.into());
        let mut t = TopicProduceData::default();
        t.name = TopicName(proto_kafka::protocol::StrBytes::from_static_str("t"));
        t.partition_data = vec![p];
        let mut r = ProduceRequest::default();
        r.acks = -1;
        r.topic_data = vec![t];
        frame(ApiKey::Produce, 9, &r)
    }

    /// Header v1 (non-flexible) for `api` v`version`, then `body`.
    fn raw(api: ApiKey, version: i16, body: &[u8]) -> Bytes {
        let mut b = BytesMut::new();
        b.put_i16(api as i16);
        b.put_i16(version);
        b.put_i32(1);
        b.put_i16(-1);
        b.put_slice(body);
        b.freeze()
    }

    fn refused(frame: Bytes) -> bool {
        matches!(inspect(frame, 1 << 20), Err(Fault::Decode { .. }))
    }

    #[test]
    fn every_truncation_of_a_valid_request_is_refused_cleanly() {
        for f in
            [produce(batch::build(0, &[b"value", b"other"])), frame(ApiKey::Metadata, 12, &MetadataRequest::default())]
        {
            inspect(f.clone(), 1 << 20).expect("the whole request is valid");
            for cut in 0..f.len() {
                assert!(inspect(f.slice(..cut), 1 << 20).is_err(), "a request cut at {cut} of {} passed", f.len());
            }
        }
    }

    #[test]
    fn lengths_and_counts_beyond_the_frame_are_refused() {
        // Metadata v4: a topic name claiming 30,000 bytes in a frame of a few.
        assert!(refused(raw(ApiKey::Metadata, 4, &[0, 0, 0, 1, 0x75, 0x30, b'a', 1])));
        // A negative string length other than -1 (null).
        assert!(refused(raw(ApiKey::Metadata, 4, &[0, 0, 0, 1, 0xff, 0xfb, 1])));
        // An array count of 0x7fffffff with nothing behind it.
        assert!(refused(raw(ApiKey::Metadata, 4, &[0x7f, 0xff, 0xff, 0xff, 1])));
        // A negative array count other than -1.
        assert!(refused(raw(ApiKey::ListOffsets, 1, &[0xff, 0xff, 0xff, 0xff, 0x80, 0, 0, 0])));
        // Produce v3 with a records field longer than the frame.
        assert!(refused(raw(
            ApiKey::Produce,
            3,
            &[0xff, 0xff, 0xff, 0xff, 0, 0, 0x75, 0x30, 0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 1, 0, 0, 0, 0, 0x10, 0, 0, 0]
        )));
    }

    #[test]
    fn bad_tagged_fields_are_refused() {
        let base = frame(ApiKey::Metadata, 12, &MetadataRequest::default());
        // The body's final tagged-field section says one field follows; it is missing.
        let mut one_missing = BytesMut::from(&base[..]);
        *one_missing.last_mut().unwrap() = 1;
        assert!(refused(one_missing.freeze()));
        // One field whose length runs past the frame.
        let mut too_long = BytesMut::from(&base[..]);
        *too_long.last_mut().unwrap() = 1;
        too_long.put_slice(&[0x05, 0x7f, b'x']);
        assert!(refused(too_long.freeze()));
        // A field count that overflows a varint.
        let mut overflow = BytesMut::from(&base[..]);
        overflow.truncate(overflow.len() - 1);
        overflow.put_slice(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
        assert!(refused(overflow.freeze()));
    }

    #[test]
    fn well_formed_requests_pass() {
        inspect(frame(ApiKey::Metadata, 12, &MetadataRequest::default()), 1 << 20).unwrap();
        inspect(produce(batch::build(0, &[b"v"])), 1 << 20).unwrap();
    }

    #[test]
    fn each_layer_refuses_what_it_should() {
        assert!(matches!(inspect(Bytes::from_static(&[0, 3]), 1 << 20), Err(Fault::NoHeader)));
        let unknown = Bytes::from_static(&[0x7f, 0x7f, 0, 0, 0, 0, 0, 1]);
        assert!(matches!(inspect(unknown, 1 << 20), Err(Fault::UnknownApi(0x7f7f))));
        let future = Bytes::from_static(&[0, 3, 0, 99, 0, 0, 0, 1]); // Metadata v99
        assert!(matches!(inspect(future, 1 << 20), Err(Fault::UnsupportedVersion { .. })));
        // Metadata v12 whose topic array claims 0x7ffffffe entries: refused, not allocated.
        let mut h = RequestHeader::default();
        h.request_api_key = ApiKey::Metadata as i16;
        h.request_api_version = 12;
        let mut hostile = BytesMut::new();
        h.encode(&mut hostile, 2).unwrap();
        hostile.put_slice(&[0xff, 0xff, 0xff, 0xff, 0x07]);
        assert!(matches!(inspect(hostile.freeze(), 1 << 20), Err(Fault::Decode { .. })));
        let mut bad_crc = batch::build(0, &[b"v"]);
        let last = bad_crc.len() - 1;
        bad_crc[last] ^= 1;
        let e = inspect(produce(bad_crc), 1 << 20).unwrap_err().to_string();
        assert!(e.contains("record batch"), "{e}");
        let e = inspect(produce(batch::build(0, &[&[0u8; 4000]])), 1000).unwrap_err().to_string();
        assert!(e.contains("TooLarge"), "{e}");
    }
}
