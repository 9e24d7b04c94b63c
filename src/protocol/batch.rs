//! The record batch (magic v2) as it travels on the wire and sits in segment files. The broker
//! validates the 61-byte batch header and the CRC, reads every record of a produced batch
//! (`check_records`), then patches the base offset and partition leader epoch in place (both
//! lie outside the CRC). It rewrites a batch for its topic (`stamp_log_append_time`,
//! `recompress`, `set_max_timestamp`); compressed records are decompressed within a limit
//! (see `compression`).
//!
//! ```text
//! offset  size  field
//!      0     8  baseOffset            (patched by the broker)
//!      8     4  batchLength           (bytes after this field)
//!     12     4  partitionLeaderEpoch  (patched by the broker)
//!     16     1  magic = 2
//!     17     4  crc (CRC-32C of bytes 21..end)
//!     21     2  attributes (bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control)
//!     23     4  lastOffsetDelta
//!     27     8  baseTimestamp
//!     35     8  maxTimestamp
//!     43     8  producerId
//!     51     2  producerEpoch
//!     53     4  baseSequence
//!     57     4  recordCount
//!     61     -  records
//! ```

use std::borrow::Cow;

use crate::protocol::compression::{self, CodecError};
use crate::protocol::error_code::ErrorCode;

/// Bytes before the records: the smallest possible batch.
pub const HEADER_LEN: usize = 61;
/// baseOffset + batchLength: what must be read to know a batch's total size.
pub const LOG_OVERHEAD: usize = 12;

const ATTR_CODEC: i16 = 0x7;
const ATTR_LOG_APPEND_TIME: i16 = 1 << 3;
const ATTR_TRANSACTIONAL: i16 = 1 << 4;
const ATTR_CONTROL: i16 = 1 << 5;
/// KIP-534: the base timestamp holds the time after which the cleaner may remove the
/// batch's tombstones (record timestamps stay base timestamp + delta).
const ATTR_DELETE_HORIZON: i16 = 1 << 6;

/// The fields of a batch header the broker uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    /// Whole batch size in bytes, including baseOffset and batchLength.
    pub size: usize,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub record_count: i32,
}

impl BatchHeader {
    pub fn last_offset(&self) -> i64 {
        self.base_offset + self.last_offset_delta as i64
    }
    pub fn is_transactional(&self) -> bool {
        self.attributes & ATTR_TRANSACTIONAL != 0
    }
    pub fn is_control(&self) -> bool {
        self.attributes & ATTR_CONTROL != 0
    }
    /// The records' codec (see `compression`).
    pub fn codec(&self) -> u8 {
        (self.attributes & ATTR_CODEC) as u8
    }
    /// Whether the broker's clock stamped the batch (LogAppendTime).
    pub fn is_log_append_time(&self) -> bool {
        self.attributes & ATTR_LOG_APPEND_TIME != 0
    }
    /// When the log cleaner may remove this batch's tombstones, if a cleaning set it (KIP-534).
    pub fn delete_horizon(&self) -> Option<i64> {
        (self.attributes & ATTR_DELETE_HORIZON != 0).then_some(self.base_timestamp)
    }
}

/// Why a batch was refused, with the Kafka error code the producer gets.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    #[error("batch is truncated: {have} bytes, header says {want}")]
    Truncated { have: usize, want: usize },
    #[error("batch length {0} is smaller than a batch header")]
    TooShort(i32),
    #[error("record batch magic {0} is not supported (only v2)")]
    Magic(i8),
    #[error("CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Crc { stored: u32, computed: u32 },
    #[error("lastOffsetDelta {delta} does not match recordCount {count}")]
    CountMismatch { delta: i32, count: i32 },
    #[error("batch of {size} bytes exceeds message.max.bytes ({max})")]
    TooLarge { size: usize, max: usize },
    #[error("a produce request must carry exactly one record batch per partition, got {0}")]
    BatchCount(usize),
    #[error("clients may not write control batches")]
    Control,
    #[error("transactional batches need transactions, which this broker does not support yet")]
    Transactional,
    #[error("cannot read the records: {0}")]
    Records(CodecError),
    #[error("malformed records: {0}")]
    BadRecords(String),
    #[error("record timestamp {timestamp} is more than {bound_ms} ms {side} the broker's clock ({now})")]
    Timestamp { timestamp: i64, now: i64, bound_ms: u64, side: &'static str },
}

impl BatchError {
    pub fn code(&self) -> ErrorCode {
        // CORRUPT_MESSAGE is retriable: only for a CRC mismatch, which a resend can cure.
        // Bytes that match their CRC were built that way, and a retry would send them again:
        // INVALID_RECORD, as Kafka's produce validation answers.
        match self {
            BatchError::Crc { .. } => ErrorCode::CorruptMessage,
            BatchError::Records(CodecError::TooLarge { .. }) => ErrorCode::MessageTooLarge,
            BatchError::Timestamp { .. } => ErrorCode::InvalidTimestamp,
            BatchError::TooLarge { .. } => ErrorCode::MessageTooLarge,
            BatchError::Transactional => ErrorCode::InvalidTxnState,
            BatchError::Truncated { .. }
            | BatchError::TooShort(_)
            | BatchError::Magic(_)
            | BatchError::Records(_)
            | BatchError::BadRecords(_)
            | BatchError::CountMismatch { .. }
            | BatchError::BatchCount(_)
            | BatchError::Control => ErrorCode::InvalidRecord,
        }
    }
}

fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn be_i64(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Total size of the batch starting at `buf[0]`, from its first 12 bytes; `None` if fewer.
pub fn batch_size(buf: &[u8]) -> Option<Result<usize, BatchError>> {
    if buf.len() < LOG_OVERHEAD {
        return None;
    }
    let len = be_i32(buf, 8);
    if len < (HEADER_LEN - LOG_OVERHEAD) as i32 {
        return Some(Err(BatchError::TooShort(len)));
    }
    Some(Ok(LOG_OVERHEAD + len as usize))
}

/// Reads the header of the batch at the front of `buf` without checking the CRC (for
/// indexes and scans over data that was validated when appended). `buf` must hold at least
/// `HEADER_LEN` bytes.
pub fn read_header(buf: &[u8]) -> Result<BatchHeader, BatchError> {
    if buf.len() < HEADER_LEN {
        return Err(BatchError::Truncated { have: buf.len(), want: HEADER_LEN });
    }
    let size = batch_size(buf).expect("12 bytes")?;
    let magic = buf[16] as i8;
    if magic != 2 {
        return Err(BatchError::Magic(magic));
    }
    Ok(BatchHeader {
        base_offset: be_i64(buf, 0),
        size,
        attributes: be_i16(buf, 21),
        last_offset_delta: be_i32(buf, 23),
        base_timestamp: be_i64(buf, 27),
        max_timestamp: be_i64(buf, 35),
        producer_id: be_i64(buf, 43),
        producer_epoch: be_i16(buf, 51),
        base_sequence: be_i32(buf, 53),
        record_count: be_i32(buf, 57),
    })
}

/// Fully checks the single batch that makes up `buf` (length, magic, CRC, record count):
/// what recovery applies to each batch on disk. A compacted batch may hold fewer records
/// than its offset range (none at all: a producer's last batch the cleaner kept).
pub fn check_batch(buf: &[u8]) -> Result<BatchHeader, BatchError> {
    let h = check_framing(buf)?;
    let stored = be_i32(buf, 17) as u32;
    let computed = crc32c::crc32c(&buf[21..h.size]);
    if stored != computed {
        return Err(BatchError::Crc { stored, computed });
    }
    Ok(h)
}

/// `check_batch` without the CRC: length, magic and record count only, touching the header
/// alone. For a pass that reads the same batches again with `check_batch` before anything it
/// concluded from them is acted on (the log cleaner's key map).
pub fn check_framing(buf: &[u8]) -> Result<BatchHeader, BatchError> {
    let h = read_header(buf)?;
    if buf.len() < h.size {
        return Err(BatchError::Truncated { have: buf.len(), want: h.size });
    }
    if h.record_count < 0 || h.last_offset_delta < 0 || h.record_count > h.last_offset_delta.saturating_add(1) {
        return Err(BatchError::CountMismatch { delta: h.last_offset_delta, count: h.record_count });
    }
    Ok(h)
}

/// Validates the records of one partition in a produce request: exactly one whole batch
/// (as Kafka requires since Produce v3), within `max_size`, not a control or transactional
/// batch.
pub fn validate_produce(records: &[u8], max_size: usize) -> Result<BatchHeader, BatchError> {
    let size = match batch_size(records) {
        None => return Err(BatchError::Truncated { have: records.len(), want: HEADER_LEN }),
        Some(r) => r?,
    };
    if size > max_size {
        return Err(BatchError::TooLarge { size, max: max_size });
    }
    if size < records.len() {
        return Err(BatchError::BatchCount(count_batches(records)));
    }
    let h = check_batch(records)?;
    // What a producer sends holds every offset of its range.
    if h.record_count < 1 || h.last_offset_delta != h.record_count - 1 {
        return Err(BatchError::CountMismatch { delta: h.last_offset_delta, count: h.record_count });
    }
    if h.is_control() {
        return Err(BatchError::Control);
    }
    if h.is_transactional() {
        return Err(BatchError::Transactional);
    }
    Ok(h)
}

/// What `check_records` learned from a produced batch's records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordsSummary {
    /// The smallest record timestamp, records without one (-1) left out; `None` if no
    /// record has one.
    pub min_timestamp: Option<i64>,
    /// The largest record timestamp: what the batch's maxTimestamp must hold.
    pub max_timestamp: i64,
    /// The indexes in the batch of the records with a null key (none allocated when none).
    pub keyless: Vec<i32>,
}

/// Reads every record of a produced batch (`validate_produce` passed; decompressed within
/// `limit`): each must be whole (key, value and headers inside its length), the records
/// must fill the batch and number its header's count, with offset deltas 0, 1, 2… A consumer
/// reads exactly these, so a batch that fails here would stop every consumer of the
/// partition at its offset, and a header claiming more records than it holds would move the
/// log's offsets by its count.
pub fn check_records(buf: &[u8], h: &BatchHeader, limit: usize) -> Result<RecordsSummary, BatchError> {
    let body = record_bytes(buf, limit)?;
    let mut rest: &[u8] = &body;
    // Kafka's maxTimestamp starts at NO_TIMESTAMP (-1).
    let mut summary = RecordsSummary { min_timestamp: None, max_timestamp: -1, keyless: Vec::new() };
    let mut n: i64 = 0;
    while !rest.is_empty() {
        let bad = |what: &str| BatchError::BadRecords(format!("record {n}: {what}"));
        let (len, k) = get_varint(rest).ok_or_else(|| bad("unreadable length"))?;
        let len = usize::try_from(len).map_err(|_| bad("negative length"))?;
        let rec = rest.get(k..k + len).ok_or_else(|| bad("longer than the batch"))?;
        rest = &rest[k + len..];
        let (ts_delta, off_delta, keyless) = read_record(rec).ok_or_else(|| bad("malformed"))?;
        if off_delta != n {
            return Err(bad(&format!("offset delta {off_delta}")));
        }
        let ts = h.base_timestamp.wrapping_add(ts_delta);
        if ts != -1 {
            summary.min_timestamp = Some(summary.min_timestamp.map_or(ts, |m| m.min(ts)));
        }
        summary.max_timestamp = summary.max_timestamp.max(ts);
        if keyless {
            summary.keyless.push(n as i32);
        }
        n += 1;
    }
    if n != i64::from(h.record_count) {
        return Err(BatchError::BadRecords(format!("{n} records where the header says {}", h.record_count)));
    }
    Ok(summary)
}

/// One record's timestamp delta, offset delta and whether its key is null, if every field
/// lies within `rec` and fills it exactly.
fn read_record(rec: &[u8]) -> Option<(i64, i64, bool)> {
    let (ts_delta, off_delta, key, _value, mut r) = record_fields(rec)?;
    let (headers, n) = get_varint(r)?;
    r = &r[n..];
    if headers < 0 {
        return None;
    }
    for _ in 0..headers {
        bytes_field(&mut r)??; // a header's key is never null
        bytes_field(&mut r)?;
    }
    r.is_empty().then_some((ts_delta, off_delta, key.is_none()))
}

/// Sets a batch's maxTimestamp (recomputing the CRC): Kafka's produce validation writes the
/// largest record timestamp there, whatever the producer put.
pub fn set_max_timestamp(buf: &mut [u8], max_timestamp: i64) {
    buf[35..43].copy_from_slice(&max_timestamp.to_be_bytes());
    set_crc(buf);
}

fn count_batches(mut buf: &[u8]) -> usize {
    let mut n = 0;
    while let Some(Ok(size)) = batch_size(buf) {
        n += 1;
        buf = buf.get(size..).unwrap_or(&[]);
    }
    n
}

/// Writes the broker-assigned base offset and leader epoch into a batch (outside the CRC).
pub fn patch(buf: &mut [u8], base_offset: i64, leader_epoch: i32) {
    buf[0..8].copy_from_slice(&base_offset.to_be_bytes());
    buf[12..16].copy_from_slice(&leader_epoch.to_be_bytes());
}

fn set_crc(buf: &mut [u8]) {
    let crc = crc32c::crc32c(&buf[21..]);
    buf[17..21].copy_from_slice(&crc.to_be_bytes());
}

/// Marks a whole batch as stamped by the broker's clock at `now_ms` (Kafka's LogAppendTime:
/// the timestamp-type attribute and maxTimestamp, which consumers then read as every
/// record's timestamp), recomputing the CRC.
pub fn stamp_log_append_time(buf: &mut [u8], now_ms: i64) {
    let attributes = be_i16(buf, 21) | ATTR_LOG_APPEND_TIME;
    buf[21..23].copy_from_slice(&attributes.to_be_bytes());
    buf[35..43].copy_from_slice(&now_ms.to_be_bytes());
    set_crc(buf);
}

/// The record bytes of a whole, checked batch (everything after its header), decompressed
/// when the batch is compressed; refused once they would pass `limit` bytes.
pub fn record_bytes(buf: &[u8], limit: usize) -> Result<Cow<'_, [u8]>, BatchError> {
    let h = read_header(buf)?;
    let body = buf.get(HEADER_LEN..h.size).ok_or(BatchError::Truncated { have: buf.len(), want: h.size })?;
    match h.codec() {
        compression::NONE => Ok(Cow::Borrowed(body)),
        codec => compression::decompress(codec, body, limit).map(Cow::Owned).map_err(BatchError::Records),
    }
}

/// The batch with its records in `codec` instead, at the codec's default level: header
/// fields kept, codec bits, length and CRC rewritten. Records decompress to at most `limit`
/// bytes.
pub fn recompress(buf: &[u8], codec: u8, limit: usize) -> Result<Vec<u8>, BatchError> {
    recompress_at(buf, codec, compression::default_level(codec), limit)
}

/// `recompress` at `level` (a topic's `compression.type` and `compression.<codec>.level`).
pub fn recompress_at(buf: &[u8], codec: u8, level: i32, limit: usize) -> Result<Vec<u8>, BatchError> {
    let h = read_header(buf)?;
    let records = record_bytes(buf, limit)?;
    // A codec stream cut short can decode "successfully" into fewer records: count them.
    let found = parse_records(&records, h.base_timestamp).count();
    if found != h.record_count.max(0) as usize {
        let reason = format!("{found} records where the header says {}", h.record_count);
        return Err(BatchError::Records(CodecError::Corrupt { codec: compression::name(h.codec()), reason }));
    }
    rebuild_at(buf, &records, h.record_count, codec, level, h.delete_horizon())
}

/// The smallest record timestamp of a whole, checked batch, records without one (-1) left
/// out (its records read, decompressed within `limit`); `None` if no record has one.
pub fn min_timestamp(buf: &[u8], limit: usize) -> Result<Option<i64>, BatchError> {
    let h = read_header(buf)?;
    let records = record_bytes(buf, limit)?;
    Ok(parse_records(&records, h.base_timestamp).map(|r| r.timestamp).filter(|&t| t != -1).min())
}

/// A record's key and value, either of which may be null.
pub type KeyValue<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

/// Builds a valid uncompressed batch of records with the given values (no keys, no
/// headers): for tests and the load tool.
pub fn build(base_timestamp: i64, values: &[&[u8]]) -> Vec<u8> {
    let kvs: Vec<KeyValue> = values.iter().map(|v| (None, Some(*v))).collect();
    build_keyed(base_timestamp, &kvs)
}

/// Builds a valid uncompressed batch of (key, value) records, all with `base_timestamp`,
/// producer id -1 (not idempotent).
pub fn build_keyed(base_timestamp: i64, kvs: &[KeyValue]) -> Vec<u8> {
    let timed: Vec<(i64, KeyValue)> = kvs.iter().map(|kv| (base_timestamp, *kv)).collect();
    build_timed(&timed)
}

/// Builds a valid uncompressed batch of (timestamp, (key, value)) records, producer id -1:
/// for tests and the load tool. The base timestamp is the first record's, as Java's
/// producer writes it.
pub fn build_timed(records: &[(i64, KeyValue)]) -> Vec<u8> {
    let base_timestamp = records.first().map_or(0, |r| r.0);
    let max_timestamp = records.iter().map(|r| r.0).max().unwrap_or(base_timestamp);
    let mut body = Vec::new();
    for (i, (ts, (k, v))) in records.iter().enumerate() {
        let mut r = Vec::new();
        r.push(0u8); // attributes
        put_varint(&mut r, ts.wrapping_sub(base_timestamp)); // timestamp delta
        put_varint(&mut r, i as i64); // offset delta
        for field in [k, v] {
            match field {
                Some(b) => {
                    put_varint(&mut r, b.len() as i64);
                    r.extend_from_slice(b);
                }
                None => put_varint(&mut r, -1),
            }
        }
        put_varint(&mut r, 0); // headers
        put_varint(&mut body, r.len() as i64);
        body.extend_from_slice(&r);
    }
    let mut b = vec![0u8; HEADER_LEN];
    b.extend_from_slice(&body);
    let len = (b.len() - LOG_OVERHEAD) as i32;
    b[8..12].copy_from_slice(&len.to_be_bytes());
    b[16] = 2;
    b[23..27].copy_from_slice(&(records.len() as i32 - 1).to_be_bytes());
    b[27..35].copy_from_slice(&base_timestamp.to_be_bytes());
    b[35..43].copy_from_slice(&max_timestamp.to_be_bytes());
    b[43..51].copy_from_slice(&(-1i64).to_be_bytes());
    b[51..53].copy_from_slice(&(-1i16).to_be_bytes());
    b[53..57].copy_from_slice(&(-1i32).to_be_bytes());
    b[57..61].copy_from_slice(&(records.len() as i32).to_be_bytes());
    set_crc(&mut b);
    b
}

/// Builds a control batch (attribute bit 5) of one record whose key is Kafka's control key
/// (version 0, `control_type`) and whose value is `value`, with no timestamp (-1), producer
/// id -1 and base offset 0: consumers skip such batches; the broker patches its offset.
pub fn build_control(control_type: i16, value: Option<&[u8]>) -> Vec<u8> {
    let mut key = [0u8; 4];
    key[2..4].copy_from_slice(&control_type.to_be_bytes());
    let mut b = build_timed(&[(-1, (Some(&key[..]), value))]);
    let attributes = be_i16(&b, 21) | ATTR_CONTROL;
    b[21..23].copy_from_slice(&attributes.to_be_bytes());
    set_crc(&mut b);
    b
}

/// The control type of a control batch's first record (its key's second field), if the
/// batch is an uncompressed control batch whose key is well formed.
pub fn control_type(buf: &[u8]) -> Option<i16> {
    if buf.len() < HEADER_LEN || be_i16(buf, 21) & ATTR_CONTROL == 0 {
        return None;
    }
    let key = records(buf).next()?.key?;
    (key.len() >= 4 && be_i16(key, 0) == 0).then(|| be_i16(key, 2))
}

/// Marks a built batch as written by an idempotent producer (fields inside the CRC, which
/// is recomputed): for tests and the load tool.
pub fn set_producer(buf: &mut [u8], producer_id: i64, epoch: i16, base_sequence: i32) {
    buf[43..51].copy_from_slice(&producer_id.to_be_bytes());
    buf[51..53].copy_from_slice(&epoch.to_be_bytes());
    buf[53..57].copy_from_slice(&base_sequence.to_be_bytes());
    set_crc(buf);
}

/// One record of a batch, borrowed from its (uncompressed) record bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawRecord<'a> {
    pub offset_delta: i32,
    pub timestamp: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
}

/// The records of an uncompressed batch (headers skipped), stopping quietly at the first
/// malformed one; a compressed batch yields none (see `record_bytes` and `parse_records`).
/// Used to replay the broker's own internal logs, which it writes uncompressed.
pub fn records(buf: &[u8]) -> impl Iterator<Item = RawRecord<'_>> + '_ {
    let base_ts = if buf.len() >= HEADER_LEN { be_i64(buf, 27) } else { 0 };
    let compressed = buf.len() >= HEADER_LEN && be_i16(buf, 21) & ATTR_CODEC != 0;
    let body = if compressed { &[][..] } else { buf.get(HEADER_LEN..).unwrap_or(&[]) };
    parse_records(body, base_ts)
}

/// The records in a batch's uncompressed record bytes (`record_bytes`), whose batch has
/// `base_ts`; stops quietly at the first malformed one.
pub fn parse_records(buf: &[u8], base_ts: i64) -> impl Iterator<Item = RawRecord<'_>> + '_ {
    let mut pos = 0;
    std::iter::from_fn(move || {
        let (len, n) = get_varint(buf.get(pos..)?)?;
        let end = (pos + n).checked_add(usize::try_from(len).ok()?)?;
        let rec = buf.get(pos + n..end)?;
        pos = end;
        let (ts_delta, off_delta, key, value, _headers) = record_fields(rec)?;
        // A client chooses both numbers: add as Java's long does (wrapping), never panic.
        Some(RawRecord { offset_delta: off_delta as i32, timestamp: base_ts.wrapping_add(ts_delta), key, value })
    })
}

/// A record's (its length prefix off) timestamp delta, offset delta, key and value, and the
/// bytes after them (its headers), if they lie within it.
type RecordFields<'a> = (i64, i64, Option<&'a [u8]>, Option<&'a [u8]>, &'a [u8]);

fn record_fields(rec: &[u8]) -> Option<RecordFields<'_>> {
    let mut r = rec.get(1..)?; // attributes
    let (ts_delta, n) = get_varint(r)?;
    r = &r[n..];
    let (off_delta, n) = get_varint(r)?;
    r = &r[n..];
    let key = bytes_field(&mut r)?;
    let value = bytes_field(&mut r)?;
    Some((ts_delta, off_delta, key, value, r))
}

/// One record of a batch with the bytes it is made of: for rewriting a batch (the log
/// cleaner) without decoding what it keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordSpan<'a> {
    pub record: RawRecord<'a>,
    /// The whole record, its length prefix included.
    pub bytes: &'a [u8],
    /// The record's attributes byte.
    pub attributes: u8,
    /// Everything after the offset delta: key, value and headers, as encoded.
    pub tail: &'a [u8],
}

/// The records in uncompressed record bytes, each with its encoding; stops quietly at the
/// first malformed one (as `parse_records`).
pub fn record_spans(buf: &[u8], base_ts: i64) -> impl Iterator<Item = RecordSpan<'_>> + '_ {
    let mut pos = 0;
    std::iter::from_fn(move || {
        let (len, n) = get_varint(buf.get(pos..)?)?;
        let end = (pos + n).checked_add(usize::try_from(len).ok()?)?;
        let bytes = buf.get(pos..end)?;
        let rec = &bytes[n..];
        pos = end;
        let attributes = *rec.first()?;
        let mut r = &rec[1..];
        let (ts_delta, n) = get_varint(r)?;
        r = &r[n..];
        let (off_delta, n) = get_varint(r)?;
        r = &r[n..];
        let tail = r;
        let key = bytes_field(&mut r)?;
        let value = bytes_field(&mut r)?;
        let record =
            RawRecord { offset_delta: off_delta as i32, timestamp: base_ts.wrapping_add(ts_delta), key, value };
        Some(RecordSpan { record, bytes, attributes, tail })
    })
}

/// `span`'s record encoded against another base timestamp (the same timestamp, offset
/// delta, key, value and headers), appended to `out`.
pub fn reencode_record(out: &mut Vec<u8>, span: &RecordSpan, base_ts: i64) {
    let mut r = Vec::with_capacity(span.bytes.len() + 8);
    r.push(span.attributes);
    put_varint(&mut r, span.record.timestamp.wrapping_sub(base_ts));
    put_varint(&mut r, span.record.offset_delta as i64);
    r.extend_from_slice(span.tail);
    put_varint(out, r.len() as i64);
    out.extend_from_slice(&r);
}

/// A batch with the header of `original` (offsets, producer, epoch, sequence, timestamps'
/// maximum) holding `count` of its records, `records` (uncompressed, as encoded), in
/// `codec`; `delete_horizon` stamps KIP-534's horizon in as the base timestamp, which the
/// records were then encoded against. Length, attributes and CRC are rewritten.
/// The codec compresses at its default level, as Kafka's cleaner rewrites batches.
pub fn rebuild(
    original: &[u8],
    records: &[u8],
    count: i32,
    codec: u8,
    delete_horizon: Option<i64>,
) -> Result<Vec<u8>, BatchError> {
    rebuild_at(original, records, count, codec, compression::default_level(codec), delete_horizon)
}

/// `rebuild` with the codec at `level`.
fn rebuild_at(
    original: &[u8],
    records: &[u8],
    count: i32,
    codec: u8,
    level: i32,
    delete_horizon: Option<i64>,
) -> Result<Vec<u8>, BatchError> {
    let h = read_header(original)?;
    let packed = match codec {
        compression::NONE => Cow::Borrowed(records),
        _ => Cow::Owned(compression::compress_at(codec, level, records).map_err(BatchError::Records)?),
    };
    let mut out = Vec::with_capacity(HEADER_LEN + packed.len());
    out.extend_from_slice(&original[..HEADER_LEN]);
    out.extend_from_slice(&packed);
    let len = i32::try_from(out.len() - LOG_OVERHEAD)
        .map_err(|_| BatchError::TooLarge { size: out.len(), max: i32::MAX as usize })?;
    out[8..12].copy_from_slice(&len.to_be_bytes());
    let mut attributes = (h.attributes & !ATTR_CODEC) | codec as i16;
    if let Some(horizon) = delete_horizon {
        attributes |= ATTR_DELETE_HORIZON;
        out[27..35].copy_from_slice(&horizon.to_be_bytes());
    }
    out[21..23].copy_from_slice(&attributes.to_be_bytes());
    out[57..61].copy_from_slice(&count.to_be_bytes());
    set_crc(&mut out);
    Ok(out)
}

/// A varint-length-prefixed byte field (-1 = null), advancing `r` past it.
fn bytes_field<'a>(r: &mut &'a [u8]) -> Option<Option<&'a [u8]>> {
    let (len, n) = get_varint(r)?;
    *r = &r[n..];
    if len < 0 {
        return Some(None);
    }
    let len = usize::try_from(len).ok()?;
    let (v, rest) = (r.get(..len)?, r.get(len..)?);
    *r = rest;
    Some(Some(v))
}

fn get_varint(b: &[u8]) -> Option<(i64, usize)> {
    let mut z: u64 = 0;
    for (i, &byte) in b.iter().enumerate().take(10) {
        z |= ((byte & 0x7f) as u64) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((((z >> 1) as i64) ^ -((z & 1) as i64), i + 1));
        }
    }
    None
}

fn put_varint(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        build(1_700_000_000_000, &[b"a", b"bb", b"ccc"])
    }

    #[test]
    fn a_built_batch_validates() {
        let b = sample();
        let h = validate_produce(&b, 1 << 20).unwrap();
        assert_eq!(h.record_count, 3);
        assert_eq!(h.size, b.len());
        assert_eq!(h.last_offset_delta, 2);
        assert_eq!(h.producer_id, -1);
    }

    #[test]
    fn patching_offsets_keeps_the_crc_valid() {
        let mut b = sample();
        patch(&mut b, 1234, 7);
        let h = check_batch(&b).unwrap();
        assert_eq!(h.base_offset, 1234);
        assert_eq!(h.last_offset(), 1236);
        assert_eq!(i32::from_be_bytes(b[12..16].try_into().unwrap()), 7);
    }

    #[test]
    fn corrupt_batches_get_kafka_error_codes() {
        let mut b = sample();
        let last = b.len() - 1;
        b[last] ^= 0xff;
        let e = validate_produce(&b, 1 << 20).unwrap_err();
        assert!(matches!(e, BatchError::Crc { .. }));
        assert_eq!(e.code(), ErrorCode::CorruptMessage);

        let b = sample();
        assert_eq!(validate_produce(&b[..b.len() - 1], 1 << 20).unwrap_err().code(), ErrorCode::InvalidRecord);
        assert_eq!(validate_produce(&b[..20], 1 << 20).unwrap_err().code(), ErrorCode::InvalidRecord);
        assert_eq!(validate_produce(&b, 10).unwrap_err().code(), ErrorCode::MessageTooLarge);

        let mut two = sample();
        two.extend_from_slice(&sample());
        assert_eq!(validate_produce(&two, 1 << 20).unwrap_err(), BatchError::BatchCount(2));

        let mut m = sample();
        m[16] = 1;
        assert_eq!(validate_produce(&m, 1 << 20).unwrap_err().code(), ErrorCode::InvalidRecord);
    }

    /// `b` with its CRC made right again.
    fn resealed(mut b: Vec<u8>) -> Vec<u8> {
        set_crc(&mut b);
        b
    }

    #[test]
    fn records_must_be_whole_and_number_the_header_count() {
        let check = |b: &[u8]| {
            let h = validate_produce(b, 1 << 20).expect("the header is right");
            check_records(b, &h, 1 << 20)
        };
        let good = build_keyed(1000, &[(Some(b"k"), Some(b"v")), (None, Some(b"w"))]);
        let summary = check(&good).unwrap();
        assert_eq!(summary, RecordsSummary { min_timestamp: Some(1000), max_timestamp: 1000, keyless: vec![1] });

        // Garbage records under a right CRC.
        let mut garbage = good.clone();
        garbage[HEADER_LEN..].fill(0xff);
        let e = check(&resealed(garbage)).unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidRecord, "{e}");

        // A header alone claiming i32::MAX records: it would move the log's offsets by as many.
        let mut empty = good[..HEADER_LEN].to_vec();
        empty[8..12].copy_from_slice(&((HEADER_LEN - LOG_OVERHEAD) as i32).to_be_bytes());
        empty[23..27].copy_from_slice(&(i32::MAX - 1).to_be_bytes());
        empty[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
        assert_eq!(check(&resealed(empty)).unwrap_err().code(), ErrorCode::InvalidRecord);

        // A record whose length runs past its fields (one byte of nothing after them).
        let mut long = build_keyed(1000, &[(Some(b"k"), Some(b"value"))]);
        long[HEADER_LEN] += 2; // the record's length (zigzag), one more
        long.push(0);
        let len = (long.len() - LOG_OVERHEAD) as i32;
        long[8..12].copy_from_slice(&len.to_be_bytes());
        assert_eq!(check(&resealed(long)).unwrap_err().code(), ErrorCode::InvalidRecord);

        // Offset deltas out of order.
        let two = build_keyed(1000, &[(Some(b"a"), Some(b"1")), (Some(b"b"), Some(b"2"))]);
        let second = HEADER_LEN + 1 + two[HEADER_LEN] as usize / 2;
        let mut swapped = two.clone();
        // record: length, attributes, timestamp delta, offset delta (one byte each here)
        assert_eq!(swapped[second + 3], 2, "the second record's offset delta, 1 zigzagged");
        swapped[second + 3] = 0;
        assert_eq!(check(&resealed(swapped)).unwrap_err().code(), ErrorCode::InvalidRecord);
    }

    #[test]
    fn a_wrong_record_count_is_an_invalid_record() {
        let mut b = sample();
        b[57..61].copy_from_slice(&5i32.to_be_bytes());
        let crc = crc32c::crc32c(&b[21..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(validate_produce(&b, 1 << 20).unwrap_err().code(), ErrorCode::InvalidRecord);
    }

    #[test]
    fn records_walk_an_uncompressed_batch() {
        let b = build_keyed(7, &[(Some(b"k"), Some(b"v1")), (None, None), (Some(b""), Some(b"v3"))]);
        check_batch(&b).unwrap();
        let r: Vec<_> = records(&b).collect();
        assert_eq!(r.len(), 3);
        assert_eq!(
            (r[0].offset_delta, r[0].timestamp, r[0].key, r[0].value),
            (0, 7, Some(&b"k"[..]), Some(&b"v1"[..]))
        );
        assert_eq!((r[1].key, r[1].value), (None, None));
        assert_eq!((r[2].offset_delta, r[2].key, r[2].value), (2, Some(&b""[..]), Some(&b"v3"[..])));
        assert_eq!(records(&b[..HEADER_LEN + 2]).count(), 0, "a cut batch yields what is whole");
    }

    #[test]
    fn extreme_timestamps_wrap_as_in_java_instead_of_panicking() {
        // Found by the batch fuzz target: a client picks the base timestamp and the deltas.
        let mut b = build(i64::MAX, &[b"a"]);
        let at = HEADER_LEN + 2; // record length varint, attributes, then the timestamp delta
        b[at] = 2; // zigzag varint of +1
        let crc = crc32c::crc32c(&b[21..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        let r: Vec<RawRecord> = records(&b).collect();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].timestamp, i64::MIN);
    }

    #[test]
    fn recompression_keeps_every_record_and_header_field() {
        let mut plain =
            build_timed(&[(100, (Some(b"k1"), Some(b"v1"))), (90, (None, Some(b"v2"))), (120, (Some(b"k3"), None))]);
        set_producer(&mut plain, 42, 3, 17);
        let before = check_batch(&plain).unwrap();
        for codec in [compression::GZIP, compression::SNAPPY, compression::LZ4, compression::ZSTD, compression::NONE] {
            let packed = recompress(&plain, codec, 1 << 20).unwrap();
            let h = check_batch(&packed).unwrap();
            assert_eq!(h.codec(), codec);
            assert_eq!((h.size, h.attributes & !ATTR_CODEC), (packed.len(), before.attributes));
            let same = BatchHeader { size: 0, attributes: 0, ..h } == BatchHeader { size: 0, attributes: 0, ..before };
            assert!(same, "every other header field is kept: {h:?} vs {before:?}");
            let back = recompress(&packed, compression::NONE, 1 << 20).unwrap();
            assert_eq!(back, plain, "{} and back is byte-identical", compression::name(codec));
            assert_eq!(min_timestamp(&packed, 1 << 20).unwrap(), Some(90));
        }
        let err =
            recompress(&recompress(&plain, compression::ZSTD, 1 << 20).unwrap(), compression::GZIP, 10).unwrap_err();
        assert!(matches!(err, BatchError::Records(CodecError::TooLarge { limit: 10 })));
        assert_eq!(err.code(), ErrorCode::MessageTooLarge);
    }

    #[test]
    fn a_compressed_batch_with_fewer_records_than_it_claims_is_refused() {
        let mut b = build(5, &[b"a", b"b", b"c"]);
        b[57..61].copy_from_slice(&4i32.to_be_bytes());
        b[23..27].copy_from_slice(&3i32.to_be_bytes());
        set_crc(&mut b);
        let e = recompress(&b, compression::GZIP, 1 << 20).unwrap_err();
        assert!(e.to_string().contains("3 records where the header says 4"), "{e}");
    }

    #[test]
    fn log_append_time_stamps_the_batch_and_keeps_it_valid() {
        let mut b = sample();
        stamp_log_append_time(&mut b, 1_800_000_000_000);
        let h = check_batch(&b).unwrap();
        assert!(h.is_log_append_time());
        assert_eq!(h.max_timestamp, 1_800_000_000_000);
        assert_eq!(h.base_timestamp, 1_700_000_000_000, "the producer's base timestamp stays");
    }

    #[test]
    fn hostile_lengths_are_refused_not_trusted() {
        let mut b = sample();
        b[8..12].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(matches!(validate_produce(&b, usize::MAX).unwrap_err(), BatchError::Truncated { .. }));
        b[8..12].copy_from_slice(&(-5i32).to_be_bytes());
        assert!(matches!(validate_produce(&b, usize::MAX).unwrap_err(), BatchError::TooShort(-5)));
    }
}
