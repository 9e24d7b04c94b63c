//! The run's results for people and scripts: a text summary, a JSON report (with the
//! machine and the exact command), `.hgrm` percentile distributions and an SVG plot of
//! latency by percentile.

use std::path::Path;

use anyhow::Result;
use hdrhistogram::Histogram;
use serde::Serialize;

use crate::run::{Config, Outcome};
use crate::stats::{hgrm, summarize, Percentiles};

#[derive(Debug, Serialize)]
pub struct Machine {
    pub cpu_model: String,
    pub cores: usize,
    pub kernel: String,
}

impl Machine {
    pub fn probe() -> Machine {
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split(':').nth(1))
                    .map(|m| m.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        let kernel =
            std::fs::read_to_string("/proc/sys/kernel/osrelease").map(|s| s.trim().to_string()).unwrap_or_default();
        Machine { cpu_model, cores: std::thread::available_parallelism().map_or(1, |n| n.get()), kernel }
    }
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub command: String,
    pub machine: Machine,
    pub broker: String,
    pub topic: String,
    /// Partitions of the topic, from the broker's metadata.
    pub partitions: i32,
    /// Replicas of partition 0, from the broker's metadata.
    pub replicas: usize,
    /// Brokers leading the topic's partitions (more than 1: a cluster, each partition's
    /// batches sent to its leader).
    pub leader_brokers: usize,
    pub producers: usize,
    /// Producer connections (more than `producers` when spread over them).
    pub connections: usize,
    pub consumers: usize,
    /// The consumer group, if consumers joined one.
    pub group: Option<String>,
    pub target_rate: f64,
    pub record_size: usize,
    pub key_size: usize,
    pub key_space: u64,
    pub compression: String,
    pub batch_records: usize,
    pub acks: i16,
    pub warmup_s: f64,
    pub elapsed_s: f64,
    /// The window the rates cover: from the end of the warm-up (or the start of a run too
    /// short for one) to the end of producing, or of consuming in a consume-only run.
    pub measured_s: f64,
    pub records_sent: u64,
    pub records_acked: u64,
    pub records_consumed: u64,
    pub produce_errors: u64,
    /// `produce_errors` by Kafka error code.
    pub produce_error_codes: std::collections::BTreeMap<i16, u64>,
    /// Acknowledged records per second over the measured window.
    pub publish_rate: f64,
    pub publish_mb_per_s: f64,
    /// Consumed records per second over the measured window.
    pub consume_rate: f64,
    pub consume_mb_per_s: f64,
    pub publish_latency_ms: Percentiles,
    pub publish_delay_ms: Percentiles,
    pub end_to_end_latency_ms: Percentiles,
    /// The broker's CPU seconds (user + system, every thread) within the measured window,
    /// when ringbench was given its pid (the sum over every `--broker-pid`).
    pub broker_cpu_s: Option<f64>,
    /// `broker_cpu_s` per GB (10^9 bytes) of record payload acknowledged plus consumed
    /// within the window: what moving the data cost the broker.
    pub broker_cpu_s_per_gb: Option<f64>,
}

impl Report {
    pub fn new(cfg: &Config, out: &Outcome, command: String) -> Report {
        let secs = out.elapsed.as_secs_f64().max(1e-9);
        let measured = out.measured.as_secs_f64().max(1e-9);
        let mb = |records: u64| records as f64 * cfg.record_size as f64 / measured / 1e6;
        let moved_gb = (out.measured_acked + out.measured_consumed) as f64 * cfg.record_size as f64 / 1e9;
        let broker_cpu_s = out.broker_cpu.map(|t| t.as_secs_f64());
        Report {
            command,
            machine: Machine::probe(),
            broker: cfg.broker.to_string(),
            topic: cfg.topic.clone(),
            partitions: out.partitions,
            replicas: out.replicas,
            leader_brokers: out.leader_brokers,
            producers: cfg.producers,
            connections: cfg.connections.unwrap_or(cfg.producers),
            consumers: cfg.consumers,
            group: cfg.group.clone(),
            target_rate: cfg.rate,
            record_size: cfg.record_size,
            key_size: cfg.key_size,
            key_space: cfg.key_space,
            compression: cfg.compression.name().to_string(),
            batch_records: cfg.batch_records,
            acks: cfg.acks,
            warmup_s: cfg.warmup.as_secs_f64(),
            elapsed_s: secs,
            measured_s: measured,
            records_sent: out.records_sent,
            records_acked: out.records_acked,
            records_consumed: out.records_consumed,
            produce_errors: out.produce_errors,
            produce_error_codes: out.produce_error_codes.clone(),
            publish_rate: out.measured_acked as f64 / measured,
            publish_mb_per_s: mb(out.measured_acked),
            consume_rate: out.measured_consumed as f64 / measured,
            consume_mb_per_s: mb(out.measured_consumed),
            publish_latency_ms: summarize(&out.publish_latency),
            publish_delay_ms: summarize(&out.publish_delay),
            end_to_end_latency_ms: summarize(&out.e2e_latency),
            broker_cpu_s,
            broker_cpu_s_per_gb: broker_cpu_s.filter(|_| moved_gb > 0.0).map(|s| s / moved_gb),
        }
    }

    pub fn text(&self) -> String {
        let row = |name: &str, p: &Percentiles| {
            format!(
                "{name:<22} p50 {:8.2}  p75 {:8.2}  p95 {:8.2}  p99 {:8.2}  p99.9 {:8.2}  p99.99 {:8.2}  max {:8.2} ms\n",
                p.p50, p.p75, p.p95, p.p99, p.p99_9, p.p99_99, p.max
            )
        };
        let mut s = format!(
            "records sent {}  acknowledged {}  consumed {}  errors {} {:?}\n\
             publish rate {:.0} rec/s  {:.2} MB/s, consume rate {:.0} rec/s  {:.2} MB/s, over {:.1} of {:.1} s\n",
            self.records_sent,
            self.records_acked,
            self.records_consumed,
            self.produce_errors,
            self.produce_error_codes,
            self.publish_rate,
            self.publish_mb_per_s,
            self.consume_rate,
            self.consume_mb_per_s,
            self.measured_s,
            self.elapsed_s
        );
        s += &row("publish latency", &self.publish_latency_ms);
        s += &row("end-to-end latency", &self.end_to_end_latency_ms);
        s += &row("publish delay", &self.publish_delay_ms);
        if let (Some(cpu), per_gb) = (self.broker_cpu_s, self.broker_cpu_s_per_gb) {
            s += &format!("broker CPU {cpu:.2} s over the window, {:.2} s per GB moved\n", per_gb.unwrap_or(f64::NAN));
        }
        s
    }
}

/// A log-scale percentile plot ("latency by percentile", as HdrHistogram plots them).
pub fn svg(series: &[(&str, &Histogram<u64>)]) -> String {
    let (w, h, left, bottom) = (800.0, 450.0, 70.0, 40.0);
    let nines = 5.0; // x axis: 0% .. 99.999%
    let x_of = |q: f64| left + (-(1.0 - q.min(0.99999)).log10() / nines) * (w - left - 20.0);
    let max_ms = series.iter().map(|(_, h)| h.max() as f64 / 1000.0).fold(1.0_f64, f64::max);
    let y_of = |ms: f64| (h - bottom) - (ms / max_ms) * (h - bottom - 20.0);
    let colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"];
    let mut out = format!("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
    for (i, label) in ["0%", "90%", "99%", "99.9%", "99.99%", "99.999%"].iter().enumerate() {
        let x = left + (i as f64 / nines) * (w - left - 20.0);
        out += &format!("<line x1=\"{x}\" y1=\"20\" x2=\"{x}\" y2=\"{}\" stroke=\"#ddd\"/><text x=\"{x}\" y=\"{}\" text-anchor=\"middle\">{label}</text>\n", h - bottom, h - bottom + 16.0);
    }
    out += &format!("<text x=\"10\" y=\"20\">{max_ms:.1} ms</text><text x=\"10\" y=\"{}\">0 ms</text>\n", h - bottom);
    for (i, (name, hist)) in series.iter().enumerate() {
        if hist.is_empty() {
            continue;
        }
        let pts: Vec<String> = hist
            .iter_quantiles(1)
            .map(|v| {
                format!("{:.1},{:.1}", x_of(v.quantile_iterated_to()), y_of(v.value_iterated_to() as f64 / 1000.0))
            })
            .collect();
        let c = colors[i % colors.len()];
        out += &format!("<polyline fill=\"none\" stroke=\"{c}\" stroke-width=\"2\" points=\"{}\"/>\n", pts.join(" "));
        out += &format!("<text x=\"{}\" y=\"{}\" fill=\"{c}\">{name}</text>\n", left + 10.0, 40.0 + 16.0 * i as f64);
    }
    out += "</svg>\n";
    out
}

pub fn write(dir: &Path, report: &Report, out: &Outcome) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("report.json"), serde_json::to_vec_pretty(report)?)?;
    std::fs::write(dir.join("publish-latency.hgrm"), hgrm(&out.publish_latency))?;
    std::fs::write(dir.join("publish-delay.hgrm"), hgrm(&out.publish_delay))?;
    std::fs::write(dir.join("end-to-end-latency.hgrm"), hgrm(&out.e2e_latency))?;
    let plot = svg(&[
        ("publish latency", &out.publish_latency),
        ("end-to-end latency", &out.e2e_latency),
        ("publish delay", &out.publish_delay),
    ]);
    std::fs::write(dir.join("latency.svg"), plot)?;
    Ok(())
}
