//! `ringbroker produce TOPIC`: one record per input line (stdin or files), batched per
//! partition and sent to each partition's leader.
//!
//! A batch closes at `BATCH_BYTES` or `BATCH_RECORDS`, and whenever the input pauses (the
//! reader thread has nothing queued), so a line typed by hand is sent at once while a piped
//! file goes out in full batches. Up to `MAX_IN_FLIGHT` requests per broker are pipelined;
//! one connection keeps them in order. There are no retries: a partition error stops the
//! command, after reporting what was acknowledged.

use std::collections::{BTreeMap, VecDeque};
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::sync::mpsc;

use anyhow::{bail, Context, Result};
use bytes::{Bytes, BytesMut};
use clap::{Args, ValueEnum};
use serde_json::json;

use super::common::{check, now_ms, parse_key_value, sb, topic_name, BrokerArgs};
use super::output::{print_json, Format, Table};
use super::partitioner::{partition_for_key, Sticky};
use super::partitions;
use crate::client::Cluster;
use crate::protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use crate::protocol::messages::{ApiKey, ProduceRequest, ProduceResponse};
use crate::protocol::StrBytes;
use proto_kafka::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};

#[derive(Debug, Args)]
pub struct ProduceArgs {
    #[command(flatten)]
    broker: BrokerArgs,
    /// Topic to write to (created if the broker auto-creates topics)
    topic: String,
    /// Send every record to this partition [default: by key as Kafka's default partitioner,
    /// records without a key fill one partition's batch, then the next]
    #[arg(short, long)]
    partition: Option<i32>,
    /// Split each line at the first SEP: key before, value after (a line without SEP is an error)
    #[arg(long, value_name = "SEP")]
    key_separator: Option<String>,
    /// Header KEY=VALUE added to every record (repeatable)
    #[arg(short = 'H', long = "header", value_parser = parse_key_value)]
    headers: Vec<(String, String)>,
    /// Acknowledgement to wait for: 0 (none), 1 (leader), all (in-sync replicas)
    #[arg(long, default_value = "all", value_parser = ["0", "1", "all", "-1"])]
    acks: String,
    /// Compression codec of the record batches
    #[arg(long, value_enum, default_value_t = Codec::None)]
    compression: Codec,
    /// Output format of the summary
    #[arg(long, value_enum, default_value_t)]
    format: Format,
    /// Files to read, one record per line; - is stdin [default: stdin]
    files: Vec<PathBuf>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Codec {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl From<Codec> for Compression {
    fn from(c: Codec) -> Compression {
        match c {
            Codec::None => Compression::None,
            Codec::Gzip => Compression::Gzip,
            Codec::Snappy => Compression::Snappy,
            Codec::Lz4 => Compression::Lz4,
            Codec::Zstd => Compression::Zstd,
        }
    }
}

/// A batch closes once its records take this many bytes (before compression)...
const BATCH_BYTES: usize = 16 * 1024;
/// ...or hold this many records.
const BATCH_RECORDS: usize = 100;
/// Requests sent to one broker and not yet answered.
const MAX_IN_FLIGHT: usize = 5;
/// Produce versions this client builds: v3 is the oldest Kafka 4 serves; v13 names topics
/// by id.
const PRODUCE_VERSIONS: (i16, i16) = (3, 12);
const PRODUCE_TIMEOUT_MS: i32 = 30_000;

pub fn run(args: ProduceArgs) -> Result<()> {
    let acks: i16 = match args.acks.as_str() {
        "all" | "-1" => -1,
        n => n.parse().expect("clap allows only 0, 1, all, -1"),
    };
    let headers: Vec<(StrBytes, Option<Bytes>)> =
        args.headers.iter().map(|(k, v)| (sb(k), Some(Bytes::from(v.clone().into_bytes())))).collect();
    let mut cluster = args.broker.connect()?;
    let topic = partitions::topic(&mut cluster, &args.topic, true)?;
    if let Some(p) = args.partition {
        if !topic.partitions.contains_key(&p) {
            bail!("topic '{}' has partitions 0-{}, not {p}", topic.name, topic.partition_count() - 1);
        }
    }
    let mut producer = Producer {
        cluster: &mut cluster,
        topic: topic.name.clone(),
        leaders: topic.leaders().into_iter().collect(),
        fixed: args.partition,
        sticky: Sticky::new(topic.partition_count(), now_ms() as u64),
        pending: BTreeMap::new(),
        in_flight: BTreeMap::new(),
        acks,
        compression: args.compression.into(),
        acked: BTreeMap::new(),
        sent: 0,
    };
    let lines = read_lines(args.files);
    let result = producer.feed(lines, args.key_separator.as_deref().map(str::as_bytes), &headers);
    let result = result.and_then(|()| producer.flush_all()).and_then(|()| producer.drain());
    print_summary(&producer, args.format)?;
    result
}

/// One input line, or why reading stopped.
type Line = Result<Vec<u8>>;

/// Reads the inputs on a thread so the producer can tell "no input right now" (send what is
/// batched) from "more is queued" (keep batching).
fn read_lines(files: Vec<PathBuf>) -> mpsc::Receiver<Line> {
    let (tx, rx) = mpsc::sync_channel(4 * BATCH_RECORDS);
    std::thread::spawn(move || {
        let sources = if files.is_empty() { vec![PathBuf::from("-")] } else { files };
        for path in sources {
            let name = path.display().to_string();
            let input: Box<dyn Read> = if name == "-" {
                Box::new(std::io::stdin())
            } else {
                match std::fs::File::open(&path) {
                    Ok(f) => Box::new(f),
                    Err(e) => {
                        let _ = tx.send(Err(anyhow::anyhow!(e).context(format!("opening {name}"))));
                        return;
                    }
                }
            };
            let mut input = BufReader::new(input);
            loop {
                let mut line = Vec::new();
                match input.read_until(b'\n', &mut line) {
                    Ok(0) => break,
                    Ok(_) => {
                        if line.last() == Some(&b'\n') {
                            line.pop();
                            if line.last() == Some(&b'\r') {
                                line.pop();
                            }
                        }
                        if tx.send(Ok(line)).is_err() {
                            return;
                        }
                    }
                    Err(e) => {
                        let _ = tx.send(Err(anyhow::anyhow!(e).context(format!("reading {name}"))));
                        return;
                    }
                }
            }
        }
    });
    rx
}

/// Records of one partition waiting to be sent.
#[derive(Default)]
struct Pending {
    records: Vec<Record>,
    bytes: usize,
}

/// A Produce request sent and not yet answered: its batches' partitions and record counts.
struct InFlight {
    correlation_id: i32,
    version: i16,
    batches: Vec<(i32, usize)>,
}

/// What the broker acknowledged for one partition.
#[derive(Debug, Clone, Copy)]
struct Acked {
    records: u64,
    first: i64,
    last: i64,
}

struct Producer<'a> {
    cluster: &'a mut Cluster,
    topic: String,
    /// partition -> leader
    leaders: BTreeMap<i32, i32>,
    fixed: Option<i32>,
    sticky: Sticky,
    pending: BTreeMap<i32, Pending>,
    /// leader -> requests in order
    in_flight: BTreeMap<i32, VecDeque<InFlight>>,
    acks: i16,
    compression: Compression,
    acked: BTreeMap<i32, Acked>,
    /// Records handed to the broker (with acks=0, all that can be said).
    sent: u64,
}

impl Producer<'_> {
    fn feed(
        &mut self,
        lines: mpsc::Receiver<Line>,
        separator: Option<&[u8]>,
        headers: &[(StrBytes, Option<Bytes>)],
    ) -> Result<()> {
        let mut line_no = 0u64;
        loop {
            let line = match lines.try_recv() {
                Ok(l) => l,
                Err(mpsc::TryRecvError::Empty) => {
                    // The input paused: send what is batched rather than wait for more.
                    self.flush_all()?;
                    match lines.recv() {
                        Ok(l) => l,
                        Err(_) => return Ok(()),
                    }
                }
                Err(mpsc::TryRecvError::Disconnected) => return Ok(()),
            };
            let line = line?;
            line_no += 1;
            let (key, value) = match separator {
                None => (None, line),
                Some(sep) => match find(&line, sep) {
                    Some(at) => (Some(line[..at].to_vec()), line[at + sep.len()..].to_vec()),
                    None => bail!(
                        "line {line_no} has no key separator '{}'; every line must be KEY{}VALUE",
                        String::from_utf8_lossy(sep),
                        String::from_utf8_lossy(sep)
                    ),
                },
            };
            self.add(key.map(Bytes::from), Bytes::from(value), headers)?;
        }
    }

    fn add(&mut self, key: Option<Bytes>, value: Bytes, headers: &[(StrBytes, Option<Bytes>)]) -> Result<()> {
        // Bytes a record takes in a batch, roughly: its fields plus varint and header overhead.
        let size = 16
            + key.as_ref().map_or(0, Bytes::len)
            + value.len()
            + headers.iter().map(|(k, v)| 8 + k.len() + v.as_ref().map_or(0, Bytes::len)).sum::<usize>();
        let partition = match (self.fixed, &key) {
            (Some(p), _) => p,
            (None, Some(k)) => partition_for_key(k, self.leaders.len() as i32),
            (None, None) => {
                if self.is_full(self.sticky.current(), size) {
                    // The sticky partition's batch is full: send it and move on (KIP-480).
                    self.flush(self.sticky.current())?;
                    self.sticky.batch_full();
                }
                self.sticky.current()
            }
        };
        if self.is_full(partition, size) {
            self.flush(partition)?;
        }
        let pending = self.pending.entry(partition).or_default();
        pending.records.push(Record {
            transactional: false,
            control: false,
            delete_horizon_ms: None,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: pending.records.len() as i64,
            sequence: -1,
            timestamp: now_ms(),
            key,
            value: Some(value),
            headers: headers.to_vec(),
        });
        pending.bytes += size;
        Ok(())
    }

    /// Whether a record of `size` bytes would overfill the batch of `partition`.
    fn is_full(&self, partition: i32, size: usize) -> bool {
        self.pending.get(&partition).is_some_and(|p| {
            !p.records.is_empty() && (p.records.len() >= BATCH_RECORDS || p.bytes + size > BATCH_BYTES)
        })
    }

    fn flush(&mut self, partition: i32) -> Result<()> {
        let Some(p) = self.pending.remove(&partition) else { return Ok(()) };
        if p.records.is_empty() {
            return Ok(());
        }
        let leader = self.leaders[&partition];
        self.send(leader, vec![(partition, p.records)])
    }

    /// Sends every batched record: one request per leader.
    fn flush_all(&mut self) -> Result<()> {
        let mut by_leader: BTreeMap<i32, Vec<(i32, Vec<Record>)>> = BTreeMap::new();
        for (partition, p) in std::mem::take(&mut self.pending) {
            if !p.records.is_empty() {
                by_leader.entry(self.leaders[&partition]).or_default().push((partition, p.records));
            }
        }
        for (leader, batches) in by_leader {
            self.send(leader, batches)?;
        }
        Ok(())
    }

    fn send(&mut self, leader: i32, batches: Vec<(i32, Vec<Record>)>) -> Result<()> {
        if self.in_flight.get(&leader).is_some_and(|q| q.len() >= MAX_IN_FLIGHT) {
            self.receive_one(leader)?;
        }
        let conn = self.cluster.node(leader)?;
        let version = conn.version(ApiKey::Produce, PRODUCE_VERSIONS.0, PRODUCE_VERSIONS.1)?;
        let mut td = TopicProduceData::default();
        td.name = topic_name(&self.topic);
        let mut counts = Vec::with_capacity(batches.len());
        let options = RecordEncodeOptions { version: 2, compression: self.compression };
        for (partition, records) in &batches {
            let mut buf = BytesMut::new();
            RecordBatchEncoder::encode(&mut buf, records.iter(), &options)
                .with_context(|| format!("encoding a {} record batch", self.compression.name()))?;
            let mut pd = PartitionProduceData::default();
            pd.index = *partition;
            pd.records = Some(buf.freeze());
            td.partition_data.push(pd);
            counts.push((*partition, records.len()));
        }
        let mut req = ProduceRequest::default();
        req.acks = self.acks;
        req.timeout_ms = PRODUCE_TIMEOUT_MS;
        req.topic_data.push(td);
        let correlation_id = conn.send(ApiKey::Produce, version, &req)?;
        self.sent += counts.iter().map(|&(_, n)| n as u64).sum::<u64>();
        // With acks=0 the broker sends no response at all.
        if self.acks != 0 {
            self.in_flight.entry(leader).or_default().push_back(InFlight { correlation_id, version, batches: counts });
        }
        Ok(())
    }

    /// Reads the oldest outstanding response from `leader` and records its offsets.
    fn receive_one(&mut self, leader: i32) -> Result<()> {
        let Some(sent) = self.in_flight.get_mut(&leader).and_then(VecDeque::pop_front) else {
            return Ok(());
        };
        let conn = self.cluster.node(leader)?;
        let (id, resp): (i32, ProduceResponse) = conn.recv(ApiKey::Produce, sent.version)?;
        if id != sent.correlation_id {
            bail!("broker {leader} answered request {id} while {} was outstanding", sent.correlation_id);
        }
        for (partition, count) in sent.batches {
            let r = resp
                .responses
                .iter()
                .filter(|t| t.name.as_str() == self.topic)
                .flat_map(|t| &t.partition_responses)
                .find(|p| p.index == partition)
                .with_context(|| format!("the Produce response left out partition {partition}"))?;
            let detail = r
                .error_message
                .clone()
                .or_else(|| r.record_errors.first().and_then(|e| e.batch_index_error_message.clone()));
            check(
                r.error_code,
                detail.as_ref(),
                format_args!("{count} records to partition {partition} of '{}' were not written", self.topic),
            )?;
            let last = r.base_offset + count as i64 - 1;
            let a = self.acked.entry(partition).or_insert(Acked { records: 0, first: r.base_offset, last });
            a.records += count as u64;
            a.first = a.first.min(r.base_offset);
            a.last = a.last.max(last);
        }
        Ok(())
    }

    /// Waits for every outstanding response.
    fn drain(&mut self) -> Result<()> {
        let leaders: Vec<i32> = self.in_flight.keys().copied().collect();
        for leader in leaders {
            while self.in_flight.get(&leader).is_some_and(|q| !q.is_empty()) {
                self.receive_one(leader)?;
            }
        }
        Ok(())
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return None;
    }
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn print_summary(p: &Producer<'_>, format: Format) -> Result<()> {
    let acknowledged: u64 = p.acked.values().map(|a| a.records).sum();
    match format {
        Format::Json => print_json(&json!({
            "topic": p.topic,
            "acks": p.acks,
            "sent": p.sent,
            "acknowledged": acknowledged,
            "partitions": p.acked.iter().map(|(partition, a)| json!({
                "partition": partition,
                "records": a.records,
                "first_offset": a.first,
                "last_offset": a.last,
            })).collect::<Vec<_>>(),
        }))?,
        Format::Text if p.acks == 0 => {
            println!(
                "sent {} records to '{}' (acks=0: the broker does not acknowledge, offsets unknown)",
                p.sent, p.topic
            );
        }
        Format::Text => {
            println!("acknowledged {acknowledged} of {} records sent to '{}'", p.sent, p.topic);
            let mut t = Table::new(&["PARTITION", "RECORDS", "FIRST-OFFSET", "LAST-OFFSET"]);
            for (partition, a) in &p.acked {
                t.row(vec![partition.to_string(), a.records.to_string(), a.first.to_string(), a.last.to_string()]);
            }
            if !t.is_empty() {
                t.print()?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_separator_is_found_at_its_first_occurrence() {
        assert_eq!(find(b"k::v::w", b"::"), Some(1));
        assert_eq!(find(b"kv", b"::"), None);
        assert_eq!(find(b"kv", b""), None);
    }
}
