//! Reading records from partition leaders: a position per partition, one Fetch per leader
//! per round (sent to every leader before any answer is read), and the decoding of what comes
//! back. `decode_batches` does no I/O.
//!
//! A Fetch answer may end in a partial batch (the broker cuts at the byte limit), starts
//! compressed batches before the requested offset (a batch is returned whole), and carries
//! control batches of transactions; none of those reach the caller.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use bytes::Bytes;

use super::common::topic_name;
use super::partitions::{self, EARLIEST, LATEST};
use crate::client::{describe_error, Cluster};
use crate::protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use crate::protocol::messages::{ApiKey, FetchRequest, FetchResponse};
use crate::protocol::ErrorCode;
use proto_kafka::records::{Record, RecordBatchDecoder};

/// Fetch versions this client builds: v4 is the oldest Kafka 4 serves; v13 names topics by id.
const FETCH_VERSIONS: (i16, i16) = (4, 12);
/// How long a leader may hold a Fetch waiting for data: also how soon Ctrl-C and heartbeats
/// are noticed.
pub(super) const MAX_WAIT_MS: i32 = 500;
const MAX_BYTES: i32 = 50 << 20;
const PARTITION_MAX_BYTES: i32 = 1 << 20;

/// Byte offsets in a v2 record batch header.
const BATCH_LENGTH_AT: usize = 8;
const MAGIC_AT: usize = 16;
const LAST_OFFSET_DELTA_AT: usize = 23;
/// Header bytes up to and including `lastOffsetDelta`.
const HEADER_PREFIX: usize = 27;

/// The records of one partition in one Fetch answer.
pub(super) struct Fetched {
    pub partition: i32,
    pub records: Vec<Record>,
    /// Where the next fetch starts once every record here has been handled.
    pub next: i64,
}

/// Decodes the complete batches in `data`, keeping data records at or after `position`.
/// Returns them and the offset after the last complete batch (or `position` if none).
pub(super) fn decode_batches(mut data: Bytes, position: i64) -> Result<(Vec<Record>, i64)> {
    let mut records = Vec::new();
    let mut next = position;
    while data.len() >= HEADER_PREFIX {
        let base_offset = i64::from_be_bytes(data[..8].try_into().expect("8 bytes"));
        let length = i32::from_be_bytes(data[BATCH_LENGTH_AT..BATCH_LENGTH_AT + 4].try_into().expect("4 bytes"));
        let total = 12 + usize::try_from(length).context("negative record batch length")?;
        if data.len() < total {
            break; // cut by the byte limit; fetched again from `next`
        }
        let magic = data[MAGIC_AT] as i8;
        if magic != 2 {
            bail!("record batch at offset {base_offset} has message format v{magic}; only v2 (Kafka 0.11+) is read");
        }
        let last_delta =
            i32::from_be_bytes(data[LAST_OFFSET_DELTA_AT..LAST_OFFSET_DELTA_AT + 4].try_into().expect("4 bytes"));
        let mut batch = data.split_to(total);
        let set = RecordBatchDecoder::decode(&mut batch)
            .with_context(|| format!("decoding the record batch at offset {base_offset}"))?;
        records.extend(set.records.into_iter().filter(|r| !r.control && r.offset >= position));
        next = next.max(base_offset + i64::from(last_delta) + 1);
    }
    Ok((records, next))
}

/// Positions of the partitions of one topic, and their leaders.
pub(super) struct Fetcher {
    pub topic: String,
    /// partition -> next offset to read
    pub positions: BTreeMap<i32, i64>,
    /// partition -> leader
    leaders: BTreeMap<i32, i32>,
}

impl Fetcher {
    pub(super) fn new(topic: &str, leaders: BTreeMap<i32, i32>) -> Fetcher {
        Fetcher { topic: topic.to_string(), positions: BTreeMap::new(), leaders }
    }

    fn refresh_leaders(&mut self, cluster: &mut Cluster) -> Result<()> {
        let t = partitions::topic(cluster, &self.topic, false)?;
        self.leaders = t.leaders().into_iter().collect();
        Ok(())
    }

    /// `(partition, leader)` of the given partitions.
    pub(super) fn leaders_of(&self, parts: impl IntoIterator<Item = i32>) -> Vec<(i32, i32)> {
        parts.into_iter().filter_map(|p| self.leaders.get(&p).map(|&l| (p, l))).collect()
    }

    /// One round: a Fetch to every leader of a positioned partition, then their answers.
    /// Partitions whose leader moved are looked up again; an offset out of range is reset
    /// to the nearest end of the log (with a note on stderr).
    pub(super) fn fetch_round(&mut self, cluster: &mut Cluster) -> Result<Vec<Fetched>> {
        let mut by_leader: BTreeMap<i32, Vec<(i32, i64)>> = BTreeMap::new();
        for (&p, &offset) in &self.positions {
            let Some(&leader) = self.leaders.get(&p) else {
                bail!("partition {p} of '{}' is not in the topic's metadata", self.topic);
            };
            by_leader.entry(leader).or_default().push((p, offset));
        }
        let mut sent = Vec::new();
        for (leader, parts) in by_leader {
            let conn = cluster.node(leader)?;
            let v = conn.version(ApiKey::Fetch, FETCH_VERSIONS.0, FETCH_VERSIONS.1)?;
            let id = conn.send(ApiKey::Fetch, v, &self.request(&parts))?;
            sent.push((leader, v, id));
        }
        let mut out = Vec::new();
        let mut stale_leaders = false;
        let mut out_of_range = Vec::new();
        for (leader, v, id) in sent {
            let (got, resp): (i32, FetchResponse) = cluster.node(leader)?.recv(ApiKey::Fetch, v)?;
            if got != id {
                bail!("broker {leader} answered request {got} while {id} was outstanding");
            }
            if resp.error_code != 0 {
                bail!("Fetch from broker {leader} failed: {}", describe_error(resp.error_code));
            }
            for t in resp.responses.iter().filter(|t| t.topic.as_str() == self.topic) {
                for p in &t.partitions {
                    let Some(&position) = self.positions.get(&p.partition_index) else { continue };
                    match ErrorCode::try_from_code(p.error_code) {
                        None => {}
                        Some(ErrorCode::OffsetOutOfRange) => {
                            out_of_range.push((p.partition_index, leader));
                            continue;
                        }
                        Some(e) if e.is_retriable() || e == ErrorCode::FencedLeaderEpoch => {
                            stale_leaders = true;
                            continue;
                        }
                        Some(_) => {
                            bail!("fetching {}/{}: {}", self.topic, p.partition_index, describe_error(p.error_code))
                        }
                    }
                    let data = p.records.clone().unwrap_or_default();
                    let (records, next) = decode_batches(data, position)?;
                    out.push(Fetched { partition: p.partition_index, records, next });
                }
            }
        }
        if stale_leaders {
            std::thread::sleep(std::time::Duration::from_millis(100));
            self.refresh_leaders(cluster)?;
        }
        if !out_of_range.is_empty() {
            self.reset_out_of_range(cluster, &out_of_range)?;
        }
        Ok(out)
    }

    fn request(&self, parts: &[(i32, i64)]) -> FetchRequest {
        let mut t = FetchTopic::default();
        t.topic = topic_name(&self.topic);
        for &(p, offset) in parts {
            let mut fp = FetchPartition::default();
            fp.partition = p;
            fp.fetch_offset = offset;
            fp.partition_max_bytes = PARTITION_MAX_BYTES;
            t.partitions.push(fp);
        }
        let mut req = FetchRequest::default();
        req.replica_id = (-1).into();
        req.max_wait_ms = MAX_WAIT_MS;
        req.min_bytes = 1;
        req.max_bytes = MAX_BYTES;
        req.topics.push(t);
        req
    }

    /// Kafka's `auto.offset.reset` for an explicit position that fell outside the log:
    /// before the start goes to the start, past the end to the end.
    fn reset_out_of_range(&mut self, cluster: &mut Cluster, parts: &[(i32, i32)]) -> Result<()> {
        let start = partitions::list_offsets(cluster, &self.topic, parts, EARLIEST)?;
        let end = partitions::list_offsets(cluster, &self.topic, parts, LATEST)?;
        for &(p, _) in parts {
            let old = self.positions[&p];
            let new = if old < start[&p] { start[&p] } else { end[&p] };
            eprintln!("note: offset {old} is out of range for {}/{p}; reading from {new}", self.topic);
            self.positions.insert(p, new);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use proto_kafka::records::{Compression, RecordBatchEncoder, RecordEncodeOptions, TimestampType};

    fn record(offset: i64, value: &str) -> Record {
        Record {
            transactional: false,
            control: false,
            delete_horizon_ms: None,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset,
            sequence: -1,
            timestamp: 1_700_000_000_000,
            key: None,
            value: Some(Bytes::from(value.to_string())),
            headers: vec![],
        }
    }

    fn batch(base: i64, values: &[&str], compression: Compression) -> Bytes {
        let records: Vec<Record> = values.iter().enumerate().map(|(i, v)| record(base + i as i64, v)).collect();
        let mut buf = BytesMut::new();
        RecordBatchEncoder::encode(&mut buf, records.iter(), &RecordEncodeOptions { version: 2, compression }).unwrap();
        buf.freeze()
    }

    fn values(records: &[Record]) -> Vec<String> {
        records.iter().map(|r| String::from_utf8_lossy(r.value.as_deref().unwrap()).into_owned()).collect()
    }

    #[test]
    fn records_before_the_position_are_dropped_and_next_follows_the_last_batch() {
        let mut data = BytesMut::new();
        data.extend_from_slice(&batch(10, &["a", "b", "c"], Compression::Lz4));
        data.extend_from_slice(&batch(13, &["d"], Compression::None));
        let (records, next) = decode_batches(data.freeze(), 11).unwrap();
        assert_eq!(values(&records), ["b", "c", "d"]);
        assert_eq!(next, 14);
    }

    #[test]
    fn a_partial_trailing_batch_is_left_for_the_next_fetch() {
        let mut data = BytesMut::new();
        data.extend_from_slice(&batch(0, &["a"], Compression::Gzip));
        let second = batch(1, &["b", "c"], Compression::Zstd);
        data.extend_from_slice(&second[..second.len() - 3]);
        let (records, next) = decode_batches(data.freeze(), 0).unwrap();
        assert_eq!(values(&records), ["a"]);
        assert_eq!(next, 1);
        let (records, next) = decode_batches(Bytes::new(), 5).unwrap();
        assert!(records.is_empty());
        assert_eq!(next, 5);
    }

    #[test]
    fn an_old_message_format_is_refused_by_name() {
        let mut data = BytesMut::from(&batch(0, &["a"], Compression::Snappy)[..]);
        data[MAGIC_AT] = 1;
        let err = decode_batches(data.freeze(), 0).unwrap_err();
        assert!(err.to_string().contains("message format v1"), "{err}");
    }
}
