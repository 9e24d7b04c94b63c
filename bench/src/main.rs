use std::net::ToSocketAddrs;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;

/// Load tool for Kafka-compatible brokers (Ringbroker, Apache Kafka, ...).
#[derive(Debug, Parser)]
#[command(name = "ringbench", version, args_override_self = true)]
struct Args {
    /// Broker address HOST:PORT
    #[arg(long, default_value = "127.0.0.1:9092")]
    broker: String,
    #[arg(long, default_value = "ringbench")]
    topic: String,
    /// Partitions of the topic if it has to be created
    #[arg(long, default_value_t = 6)]
    partitions: i32,
    /// Replicas of each partition if the topic has to be created; above 1 the run waits until
    /// every replica is in sync. With partitions led by several brokers (a cluster), each
    /// producer sends a partition's batches to its leader, on a connection per leader
    #[arg(long, default_value_t = 1)]
    replication_factor: i16,
    /// Producer threads, each with a connection of its own (0: consume only)
    #[arg(long, default_value_t = 1)]
    producers: usize,
    /// Spread the producers' requests over this many connections instead (at least
    /// --producers): each producer thread sends round-robin over its share, up to
    /// --max-in-flight requests on each, and waits for all of them with ppoll
    #[arg(long)]
    connections: Option<usize>,
    /// Consumer connections, partitions assigned round-robin (0: produce only)
    /// unless --group is given
    #[arg(long, default_value_t = 1)]
    consumers: usize,
    /// Records per second over all producers; 0 = as fast as possible
    #[arg(long, default_value_t = 0.0)]
    rate: f64,
    /// Bytes per record value (at least 8: the send timestamp)
    #[arg(long, default_value_t = 1024)]
    record_size: usize,
    /// Bytes per record key (a distinct counter per record); 0 = null keys
    #[arg(long, default_value_t = 0)]
    key_size: usize,
    /// Distinct keys over all producers (the counter wraps: updates, for compacted topics); 0 = every key distinct
    #[arg(long, default_value_t = 0)]
    key_space: u64,
    /// Producer compression: none, gzip, snappy, lz4, zstd
    #[arg(long, default_value = "none")]
    compression: String,
    /// Records per batch (one batch per Produce request)
    #[arg(long, default_value_t = 16)]
    batch_records: usize,
    /// 0, 1 or -1 (all)
    #[arg(long, default_value_t = 1, allow_hyphen_values = true)]
    acks: i16,
    /// Produce requests in flight per connection
    #[arg(long, default_value_t = 5)]
    max_in_flight: usize,
    /// Seconds to produce
    #[arg(long, default_value_t = 30)]
    duration: u64,
    /// Stop after this many records instead of after --duration
    #[arg(long)]
    records: Option<u64>,
    /// Seconds at the start not counted in latency figures
    #[arg(long, default_value_t = 5)]
    warmup: u64,
    /// Consumers start again from their start offsets whenever they reach the log end, until
    /// --duration (consume throughput over more than one pass of a pre-filled topic)
    #[arg(long)]
    rewind: bool,
    /// Consumers join this consumer group (range assignor, offsets committed) instead
    #[arg(long)]
    group: Option<String>,
    /// Consumers read from the beginning of the log (consume-throughput runs)
    #[arg(long)]
    from_beginning: bool,
    /// Directory for report.json, .hgrm files and latency.svg
    #[arg(long)]
    out: Option<PathBuf>,
    /// No progress lines
    #[arg(long)]
    quiet: bool,
    /// Instead of benchmarking, run the null broker (acknowledges without storing, serves
    /// synthetic batches) on this address: the ceiling of ringbench + loopback
    #[arg(long)]
    null_broker: Option<String>,
    /// The broker's process id, when it runs on this machine: the report gives its CPU time
    /// over the measured window, and that per GB of records moved. Repeated (or
    /// comma-separated) for the brokers of a cluster: their CPU times add up
    #[arg(long, value_delimiter = ',')]
    broker_pid: Vec<u32>,
    /// With --null-broker: records each partition pretends to hold
    #[arg(long, default_value_t = 1_000_000)]
    null_records: i64,
}

fn main() -> Result<()> {
    let a = Args::parse();
    if let Some(listen) = &a.null_broker {
        let addr = listen.to_socket_addrs()?.next().context("no address")?;
        let cfg = ringbench::null_broker::NullConfig {
            partitions: a.partitions,
            records: a.null_records,
            record_size: a.record_size,
            batch_records: a.batch_records,
        };
        return ringbench::null_broker::serve(addr, cfg);
    }
    let broker =
        a.broker.to_socket_addrs().with_context(|| format!("resolving {}", a.broker))?.next().context("no address")?;
    let cfg = ringbench::Config {
        broker,
        topic: a.topic,
        partitions: a.partitions,
        producers: a.producers,
        connections: a.connections,
        consumers: a.consumers,
        rate: a.rate,
        record_size: a.record_size,
        key_size: a.key_size,
        key_space: a.key_space,
        compression: ringbench::records::parse_compression(&a.compression)?,
        batch_records: a.batch_records,
        acks: a.acks,
        max_in_flight: a.max_in_flight,
        duration: Duration::from_secs(a.duration),
        records: a.records,
        warmup: Duration::from_secs(a.warmup),
        from_beginning: a.from_beginning,
        group: a.group,
        rewind: a.rewind,
        consume_records: None,
        progress: !a.quiet,
        broker_pid: a.broker_pid.first().copied(),
    };
    let cluster = ringbench::ClusterConfig {
        replication_factor: a.replication_factor,
        more_broker_pids: a.broker_pid.iter().skip(1).copied().collect(),
    };
    let outcome = ringbench::run_with(&cfg, &cluster)?;
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let report = ringbench::report::Report::new(&cfg, &outcome, command);
    print!("{}", report.text());
    if let Some(dir) = a.out {
        ringbench::report::write(&dir, &report, &outcome)?;
        println!("wrote {}", dir.display());
    }
    Ok(())
}
