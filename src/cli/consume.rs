//! `ringbroker consume TOPIC`: prints records, read either by assignment (every partition,
//! or those given with -p) or as a member of a consumer group (-g), which commits the
//! position after what it printed and leaves the group on exit.
//!
//! It stops after -n records, when stdout closes, or on Ctrl-C / SIGTERM; each is a clean
//! exit (commit, then LeaveGroup) with status 0.

use std::collections::BTreeMap;
use std::io::{self, BufWriter, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use serde_json::{json, Value};

use super::common::BrokerArgs;
use super::fetcher::Fetcher;
use super::member::{Member, Tick};
use super::partitions::{self, EARLIEST, LATEST};
use super::record_format::RecordFormat;
use crate::client::Cluster;

#[derive(Debug, Args)]
pub struct ConsumeArgs {
    #[command(flatten)]
    broker: BrokerArgs,
    /// Topic to read
    topic: String,
    /// Read only this partition (repeatable) [default: all]
    #[arg(short, long, conflicts_with = "group")]
    partition: Vec<i32>,
    /// Where to start: beginning, end, an offset N, or @TIMESTAMP_MS (the first record at or
    /// after that time). With -g, only for partitions the group has no committed offset for.
    #[arg(long, default_value = "beginning", value_parser = parse_offset_spec, allow_hyphen_values = true)]
    offset: OffsetSpec,
    /// Consume as a member of this consumer group (range assignment; commits what it printed)
    #[arg(short, long)]
    group: Option<String>,
    /// Stop after this many records
    #[arg(short = 'n', long = "num")]
    num: Option<u64>,
    /// text (the value), json (one object per line), or a template such as '%k %v' with
    /// %t topic, %p partition, %o offset, %T timestamp, %k key, %v value, %h headers, %% and
    /// \n \t escapes
    #[arg(long, default_value = "text", value_parser = RecordFormat::parse)]
    format: RecordFormat,
}

/// Where reading starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSpec {
    Beginning,
    End,
    Exact(i64),
    /// Milliseconds since the epoch.
    Timestamp(i64),
}

fn parse_offset_spec(s: &str) -> Result<OffsetSpec, String> {
    match s {
        "beginning" | "start" | "earliest" | "oldest" => Ok(OffsetSpec::Beginning),
        "end" | "latest" | "newest" => Ok(OffsetSpec::End),
        _ => {
            let (ts, digits) = match s.strip_prefix('@') {
                Some(rest) => (true, rest),
                None => (false, s),
            };
            match digits.parse::<i64>() {
                Ok(n) if n >= 0 => Ok(if ts { OffsetSpec::Timestamp(n) } else { OffsetSpec::Exact(n) }),
                _ => Err(format!("expected beginning, end, an offset N >= 0 or @TIMESTAMP_MS, got '{s}'")),
            }
        }
    }
}

/// How often a group member commits while it keeps reading (Kafka's auto.commit.interval.ms).
const COMMIT_INTERVAL: Duration = Duration::from_secs(5);

pub fn run(args: ConsumeArgs) -> Result<()> {
    // Before any thread exists, so every thread inherits the blocked mask.
    let stop = stop_on_signal()?;
    let mut cluster = args.broker.connect()?;
    let topic = partitions::topic(&mut cluster, &args.topic, false)?;
    for p in &args.partition {
        if !topic.partitions.contains_key(p) {
            bail!("topic '{}' has partitions 0-{}, not {p}", topic.name, topic.partition_count() - 1);
        }
    }
    let fetcher = Fetcher::new(&topic.name, topic.leaders().into_iter().collect());
    let printer = Printer { out: BufWriter::new(io::stdout()), format: args.format, topic: topic.name.clone() };
    let mut state = Consumer { fetcher, printer, printed: 0, limit: args.num, stop };
    match &args.group {
        None => {
            let parts: Vec<i32> = if args.partition.is_empty() {
                topic.partitions.keys().copied().collect()
            } else {
                args.partition.clone()
            };
            state.fetcher.positions =
                start_positions(&mut cluster, &state.fetcher, &parts, args.offset, &BTreeMap::new())?;
            while state.running() {
                if !state.round(&mut cluster)? {
                    break;
                }
            }
            Ok(())
        }
        Some(group) => consume_in_group(&mut cluster, &mut state, group, args.offset),
    }
}

struct Consumer {
    fetcher: Fetcher,
    printer: Printer,
    printed: u64,
    limit: Option<u64>,
    stop: Arc<AtomicBool>,
}

impl Consumer {
    fn running(&self) -> bool {
        !self.stop.load(Ordering::Relaxed) && self.limit.is_none_or(|n| self.printed < n)
    }

    /// One fetch round, printing what came back. `false`: stdout closed.
    fn round(&mut self, cluster: &mut Cluster) -> Result<bool> {
        if self.fetcher.positions.is_empty() {
            // Nothing assigned (more group members than partitions): just stay a member.
            std::thread::sleep(Duration::from_millis(super::fetcher::MAX_WAIT_MS as u64));
            return Ok(true);
        }
        for f in self.fetcher.fetch_round(cluster)? {
            let mut all = true;
            for r in &f.records {
                if !self.running() {
                    all = false;
                    break;
                }
                match self.printer.print(f.partition, r) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return Ok(false),
                    Err(e) => return Err(e).context("writing to stdout"),
                }
                self.printed += 1;
                self.fetcher.positions.insert(f.partition, r.offset + 1);
            }
            if all {
                self.fetcher.positions.insert(f.partition, f.next);
            }
        }
        match self.printer.out.flush() {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(false),
            Err(e) => Err(e).context("writing to stdout"),
        }
    }
}

fn consume_in_group(cluster: &mut Cluster, state: &mut Consumer, group: &str, spec: OffsetSpec) -> Result<()> {
    let topic = state.fetcher.topic.clone();
    let mut member = Member::join(cluster, group, std::slice::from_ref(&topic))?;
    state.fetcher.positions = assigned_positions(cluster, &state.fetcher, &member, spec)?;
    let mut last_commit = Instant::now();
    let result = (|| -> Result<()> {
        while state.running() {
            if member.tick(cluster)? == Tick::Rebalance {
                // Commit what was printed while the generation is still ours, then take
                // whatever the new generation assigns.
                if let Err(e) = member.commit(cluster, &topic, &state.fetcher.positions) {
                    eprintln!("note: commit before rebalancing failed: {e:#}");
                }
                member.rejoin(cluster)?;
                state.fetcher.positions = assigned_positions(cluster, &state.fetcher, &member, spec)?;
                continue;
            }
            if !state.round(cluster)? {
                break;
            }
            if last_commit.elapsed() >= COMMIT_INTERVAL {
                member.commit(cluster, &topic, &state.fetcher.positions)?;
                last_commit = Instant::now();
            }
        }
        Ok(())
    })();
    // Whatever ended the loop, hand the partitions back cleanly: commit what was printed,
    // then leave so the rest of the group need not wait for the session timeout.
    let committed = member.commit(cluster, &topic, &state.fetcher.positions);
    let left = member.leave(cluster);
    result.and(committed).and(left)
}

/// Positions of this member's partitions: the committed offset where there is one, else
/// where `spec` says.
fn assigned_positions(
    cluster: &mut Cluster,
    fetcher: &Fetcher,
    member: &Member,
    spec: OffsetSpec,
) -> Result<BTreeMap<i32, i64>> {
    let parts: Vec<i32> = member.assignment.get(&fetcher.topic).cloned().unwrap_or_default();
    let committed = member.committed(cluster, &fetcher.topic, &parts)?;
    start_positions(cluster, fetcher, &parts, spec, &committed)
}

fn start_positions(
    cluster: &mut Cluster,
    fetcher: &Fetcher,
    parts: &[i32],
    spec: OffsetSpec,
    committed: &BTreeMap<i32, i64>,
) -> Result<BTreeMap<i32, i64>> {
    let mut out: BTreeMap<i32, i64> = parts.iter().filter_map(|p| committed.get(p).map(|&o| (*p, o))).collect();
    let rest = fetcher.leaders_of(parts.iter().copied().filter(|p| !committed.contains_key(p)));
    if rest.is_empty() {
        return Ok(out);
    }
    let topic = &fetcher.topic;
    match spec {
        OffsetSpec::Beginning => out.extend(partitions::list_offsets(cluster, topic, &rest, EARLIEST)?),
        OffsetSpec::End => out.extend(partitions::list_offsets(cluster, topic, &rest, LATEST)?),
        OffsetSpec::Exact(n) => out.extend(rest.iter().map(|&(p, _)| (p, n))),
        OffsetSpec::Timestamp(ts) => {
            let at = partitions::list_offsets(cluster, topic, &rest, ts)?;
            // No record at or after the time: start at the end, for records yet to come.
            let end = partitions::list_offsets(cluster, topic, &rest, LATEST)?;
            out.extend(at.into_iter().map(|(p, o)| (p, if o < 0 { end[&p] } else { o })));
        }
    }
    Ok(out)
}

struct Printer {
    out: BufWriter<io::Stdout>,
    format: RecordFormat,
    topic: String,
}

impl Printer {
    fn print(&mut self, partition: i32, r: &proto_kafka::records::Record) -> io::Result<()> {
        match &self.format {
            RecordFormat::Json => {
                let text = |b: &Option<bytes::Bytes>| b.as_ref().map(|b| String::from_utf8_lossy(b).into_owned());
                let doc: Value = json!({
                    "topic": self.topic,
                    "partition": partition,
                    "offset": r.offset,
                    "timestamp": r.timestamp,
                    "key": text(&r.key),
                    "value": text(&r.value),
                    "headers": r.headers.iter().map(|(k, v)| json!({"key": k.as_str(), "value": text(v)})).collect::<Vec<_>>(),
                });
                serde_json::to_writer(&mut self.out, &doc)?;
                self.out.write_all(b"\n")
            }
            f => {
                let line = f.render(&self.topic, partition, r);
                self.out.write_all(&line)
            }
        }
    }
}

/// Ctrl-C and SIGTERM set the returned flag (a second one exits at once). The signals are
/// blocked and taken by `sigwait` on a thread of their own, so no handler (and no unsafe
/// code) is needed; the flag is checked between fetches.
fn stop_on_signal() -> Result<Arc<AtomicBool>> {
    use nix::sys::signal::{SigSet, Signal};
    let mut set = SigSet::empty();
    set.add(Signal::SIGINT);
    set.add(Signal::SIGTERM);
    set.thread_block().context("blocking SIGINT/SIGTERM")?;
    let flag = Arc::new(AtomicBool::new(false));
    let seen = flag.clone();
    std::thread::spawn(move || {
        while set.wait().is_ok() {
            if seen.swap(true, Ordering::Relaxed) {
                std::process::exit(130);
            }
        }
    });
    Ok(flag)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_specs() {
        assert_eq!(parse_offset_spec("beginning"), Ok(OffsetSpec::Beginning));
        assert_eq!(parse_offset_spec("end"), Ok(OffsetSpec::End));
        assert_eq!(parse_offset_spec("42"), Ok(OffsetSpec::Exact(42)));
        assert_eq!(parse_offset_spec("@1700000000000"), Ok(OffsetSpec::Timestamp(1_700_000_000_000)));
        assert!(parse_offset_spec("-3").is_err());
        assert!(parse_offset_spec("@soon").is_err());
    }
}
