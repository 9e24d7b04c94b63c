//! The Prometheus text exposition (format 0.0.4) of every registered shard, written by
//! `prometheus-client`'s encoder from a collector that reads the shards' atomics at scrape
//! time. The crate's own metric types are not used for storage: its histogram takes a lock
//! on every observation that the encoder also takes, which would let a scrape stall a shard.

use std::fmt;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;

use super::histogram::{bound_seconds, HistogramSnapshot, BOUNDS};
use super::probe::{ConnectionLimit, ErrorKind, Phase, ShardMetrics};
use super::Registry;

/// The `Content-Type` of what `Exposition::render` returns.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// Renders a registry's shards; built once, rendered on every scrape.
pub struct Exposition {
    registry: prometheus_client::registry::Registry,
}

impl Exposition {
    pub fn new(shards: Arc<Registry>) -> Exposition {
        let mut registry = prometheus_client::registry::Registry::with_prefix("ringbroker");
        registry.register_collector(Box::new(Shards(shards)));
        Exposition { registry }
    }

    pub fn render(&self) -> String {
        let mut out = String::with_capacity(64 * 1024);
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry);
        out
    }
}

#[derive(Debug)]
struct Shards(Arc<Registry>);

type Labels = Vec<(&'static str, String)>;

fn shard_label(m: &ShardMetrics) -> Labels {
    vec![("shard", m.shard.to_string())]
}

fn counter(enc: &mut DescriptorEncoder, name: &str, help: &str, series: &[(Labels, u64)]) -> fmt::Result {
    if series.is_empty() {
        return Ok(());
    }
    let mut metric = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, v) in series {
        metric.encode_family(labels)?.encode_counter::<NoLabelSet, u64, u64>(v, None)?;
    }
    Ok(())
}

/// A counter of microseconds, shown in seconds.
fn counter_seconds(enc: &mut DescriptorEncoder, name: &str, help: &str, series: &[(Labels, u64)]) -> fmt::Result {
    if series.is_empty() {
        return Ok(());
    }
    let mut metric = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, micros) in series {
        let seconds = *micros as f64 / 1e6;
        metric.encode_family(labels)?.encode_counter::<NoLabelSet, f64, f64>(&seconds, None)?;
    }
    Ok(())
}

fn gauge(enc: &mut DescriptorEncoder, name: &str, help: &str, series: &[(Labels, i64)]) -> fmt::Result {
    if series.is_empty() {
        return Ok(());
    }
    let mut metric = enc.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, v) in series {
        metric.encode_family(labels)?.encode_gauge(v)?;
    }
    Ok(())
}

fn histogram(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: &[(Labels, HistogramSnapshot)],
) -> fmt::Result {
    if series.is_empty() {
        return Ok(());
    }
    let mut metric = enc.encode_descriptor(name, help, None, MetricType::Histogram)?;
    for (labels, snap) in series {
        // The encoder accumulates these per-bucket counts into Prometheus' cumulative ones.
        let buckets: Vec<(f64, u64)> = (0..=BOUNDS)
            .map(|i| (if i < BOUNDS { bound_seconds(i) } else { f64::INFINITY }, snap.buckets[i]))
            .collect();
        metric.encode_family(labels)?.encode_histogram::<NoLabelSet>(snap.sum_seconds, snap.count(), &buckets, None)?;
    }
    Ok(())
}

impl Collector for Shards {
    fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
        let shards: Vec<&Arc<ShardMetrics>> = self.0.shards().collect();
        let per_shard = |f: &dyn Fn(&ShardMetrics) -> u64| -> Vec<(Labels, u64)> {
            shards.iter().map(|m| (shard_label(m), f(m))).collect()
        };
        let per_shard_gauge = |f: &dyn Fn(&ShardMetrics) -> i64| -> Vec<(Labels, i64)> {
            shards.iter().map(|m| (shard_label(m), f(m))).collect()
        };

        let info: Vec<(Labels, i64)> = shards
            .iter()
            .map(|m| {
                let node = m.numa_node.map_or_else(|| "-".to_string(), |n| n.to_string());
                (vec![("shard", m.shard.to_string()), ("cpu", m.cpu.to_string()), ("numa_node", node)], 1)
            })
            .collect();
        gauge(&mut enc, "shard_info", "The CPU and NUMA node each shard runs on (value always 1).", &info)?;

        // Per API: only APIs some shard has seen, so an idle broker's page stays short.
        let api_count = shards.first().map_or(0, |m| m.apis.len());
        let seen: Vec<usize> = (0..api_count)
            .filter(|&a| {
                shards.iter().any(|m| m.apis[a].requests.get() > 0 || m.apis[a].errors.iter().any(|e| e.get() > 0))
            })
            .collect();
        let api_labels = |m: &ShardMetrics, a: usize| -> Labels {
            vec![("shard", m.shard.to_string()), ("api", m.apis[a].name.clone())]
        };
        let requests: Vec<(Labels, u64)> = seen
            .iter()
            .flat_map(|&a| shards.iter().map(move |m| (a, m)))
            .map(|(a, m)| (api_labels(m, a), m.apis[a].requests.get()))
            .collect();
        counter(
            &mut enc,
            "requests",
            "Requests handled (answered, or refused and the connection closed), by API.",
            &requests,
        )?;
        let mut errors = Vec::new();
        for &a in &seen {
            for kind in ErrorKind::ALL {
                if shards.iter().all(|m| m.apis[a].errors[kind as usize].get() == 0) {
                    continue;
                }
                for m in &shards {
                    let mut labels = api_labels(m, a);
                    labels.push(("error", kind.label().to_string()));
                    errors.push((labels, m.apis[a].errors[kind as usize].get()));
                }
            }
        }
        counter(
            &mut enc,
            "request_errors",
            "Requests refused (unknown_api, unsupported_version, decode, encode: the connection is closed) \
             or answered with a non-zero Kafka error code (error_code: Produce and Fetch).",
            &errors,
        )?;
        // Only APIs that some shard has throttled.
        let throttled_apis: Vec<usize> =
            seen.iter().copied().filter(|&a| shards.iter().any(|m| m.apis[a].throttled.get() > 0)).collect();
        let per_api = |f: &dyn Fn(&super::probe::ApiMetrics) -> u64| -> Vec<(Labels, u64)> {
            throttled_apis
                .iter()
                .flat_map(|&a| shards.iter().map(move |m| (a, m)))
                .map(|(a, m)| (api_labels(m, a), f(&m.apis[a])))
                .collect()
        };
        counter(
            &mut enc,
            "throttled_responses",
            "Responses that throttled their client because it exceeded its byte-rate quota \
             (quota_producer_byte_rate, quota_consumer_byte_rate, quota_client_overrides).",
            &per_api(&|a| a.throttled.get()),
        )?;
        counter_seconds(
            &mut enc,
            "throttle_time_seconds",
            "Throttle time given in throttled responses (the connection reads no request meanwhile).",
            &per_api(&|a| a.throttle_micros.get()),
        )?;
        for phase in Phase::ALL {
            let (name, help) = match phase {
                Phase::Queue => ("request_queue_time_seconds", "Request frame read until its handler starts."),
                Phase::Local => ("request_local_time_seconds", "Time the handler worked on the connection's shard."),
                Phase::Remote => (
                    "request_remote_time_seconds",
                    "Time the handler waited on another shard, a delayed fetch or a durable ack.",
                ),
                Phase::ResponseQueue => {
                    ("response_queue_time_seconds", "Handler done until its response starts being written.")
                }
                Phase::ResponseSend => ("response_send_time_seconds", "Writing the response to the socket."),
                Phase::Total => ("request_total_time_seconds", "Request frame read until its response is written."),
            };
            let series: Vec<(Labels, HistogramSnapshot)> = seen
                .iter()
                .flat_map(|&a| shards.iter().map(move |m| (a, m)))
                .map(|(a, m)| (api_labels(m, a), m.apis[a].latency[phase as usize].snapshot()))
                .collect();
            histogram(&mut enc, name, help, &series)?;
        }

        counter(
            &mut enc,
            "network_received_bytes",
            "Bytes read from client connections.",
            &per_shard(&|m| m.bytes_received.get()),
        )?;
        counter(
            &mut enc,
            "network_sent_bytes",
            "Bytes written to client connections (fetched records sent by sendfile included).",
            &per_shard(&|m| m.bytes_sent.get()),
        )?;
        gauge(
            &mut enc,
            "connections_open",
            "Client connections open.",
            &per_shard_gauge(&|m| m.connections_open.get()),
        )?;
        counter(
            &mut enc,
            "connections_accepted",
            "Client connections accepted.",
            &per_shard(&|m| m.connections_accepted.get()),
        )?;
        let closed: Vec<(Labels, u64)> = shards
            .iter()
            .flat_map(|m| {
                [
                    ("client", m.connections_closed_by_client.get()),
                    ("error", m.connections_closed_on_error.get()),
                    ("idle", m.connections_closed_idle.get()),
                ]
                .map(|(reason, v)| (vec![("shard", m.shard.to_string()), ("reason", reason.to_string())], v))
            })
            .collect();
        counter(
            &mut enc,
            "connections_closed",
            "Client connections closed, by the client, by the broker on an error (bad frame, refused request, \
             failed read or write), or by the broker after connections.max.idle.ms without a request (idle).",
            &closed,
        )?;
        let refused: Vec<(Labels, u64)> = shards
            .iter()
            .flat_map(|m| {
                ConnectionLimit::ALL.map(|limit| {
                    let labels = vec![("shard", m.shard.to_string()), ("reason", limit.label().to_string())];
                    (labels, m.connections_refused[limit as usize].get())
                })
            })
            .collect();
        counter(
            &mut enc,
            "connections_refused",
            "Accepted connections closed at once because the broker-wide (max_connections) or per-IP \
             (max_connections_per_ip) limit was reached; not counted as accepted.",
            &refused,
        )?;

        gauge(
            &mut enc,
            "partitions",
            "Partitions homed on the shard (internal topics included).",
            &per_shard_gauge(&|m| m.partitions.get()),
        )?;
        gauge(
            &mut enc,
            "log_bytes",
            "Bytes in the segment files of the shard's partitions.",
            &per_shard_gauge(&|m| m.log_bytes.get()),
        )?;
        counter(
            &mut enc,
            "connections_creation_throttled",
            "Accepted connections that waited because new connections came faster than max_connection_creation_rate.",
            &per_shard(&|m| m.creation_throttled.get()),
        )?;
        counter(
            &mut enc,
            "request_memory_waits",
            "Times a connection stopped reading because the request-memory budget (its own or the broker's) was spent.",
            &per_shard(&|m| m.memory_waits.get()),
        )?;
        counter(
            &mut enc,
            "sasl_authentications",
            "SASL authentications that succeeded (re-authentications included).",
            &per_shard(&|m| m.authentications.get()),
        )?;
        counter(
            &mut enc,
            "sasl_authentication_failures",
            "SASL authentications that failed (wrong password, unknown user, bad exchange).",
            &per_shard(&|m| m.authentication_failures.get()),
        )?;
        counter(
            &mut enc,
            "tls_handshake_failures",
            "TLS handshakes that failed or did not finish within connections_max_idle_ms.",
            &per_shard(&|m| m.tls_handshake_failures.get()),
        )?;
        counter(
            &mut enc,
            "log_recoveries",
            "Partitions opened after an unclean stop, or a clean one whose log tail did not check out, whose newest segment was scanned and cut at the first bad batch.",
            &per_shard(&|m| m.log_recoveries.get()),
        )?;
        counter(
            &mut enc,
            "log_writes_refused",
            "Append writes refused because the data disk was full; their batches got KAFKA_STORAGE_ERROR and later appends try again.",
            &per_shard(&|m| m.log_writes_refused.get()),
        )?;
        counter(
            &mut enc,
            "cleaner_runs",
            "Cleanings of compacted logs finished.",
            &per_shard(&|m| m.cleaner_runs.get()),
        )?;
        counter(
            &mut enc,
            "cleaner_bytes_read",
            "Bytes of old segments the cleaner rewrote.",
            &per_shard(&|m| m.cleaner_bytes_read.get()),
        )?;
        counter(
            &mut enc,
            "cleaner_bytes_written",
            "Bytes of the cleaned segments that replaced them.",
            &per_shard(&|m| m.cleaner_bytes_written.get()),
        )?;
        counter_seconds(
            &mut enc,
            "cleaner_time_seconds",
            "Time spent cleaning compacted logs (key map and rewrite).",
            &per_shard(&|m| m.cleaner_micros.get()),
        )?;
        gauge(
            &mut enc,
            "cleaner_max_dirty_ratio_permille",
            "Dirty share of the shard's dirtiest compacted log at the cleaner's last check, in thousandths.",
            &per_shard_gauge(&|m| m.cleaner_max_dirty_permille.get()),
        )?;
        gauge(
            &mut enc,
            "cleaner_backlog",
            "Compacted logs due for cleaning at the cleaner's last check.",
            &per_shard_gauge(&|m| m.cleaner_backlog.get()),
        )?;
        gauge(
            &mut enc,
            "leader_partitions",
            "Replicated partitions this shard leads (Kafka's LeaderCount).",
            &per_shard_gauge(&|m| m.leader_partitions.get()),
        )?;
        gauge(
            &mut enc,
            "under_replicated_partitions",
            "Partitions this shard leads with a voter out of sync (Kafka's UnderReplicatedPartitions).",
            &per_shard_gauge(&|m| m.under_replicated_partitions.get()),
        )?;
        gauge(
            &mut enc,
            "under_min_isr_partitions",
            "Partitions this shard leads with fewer voters in sync than min.insync.replicas: acks=all produces to them fail.",
            &per_shard_gauge(&|m| m.under_min_isr_partitions.get()),
        )?;
        counter(
            &mut enc,
            "replication_throttled_bytes",
            "Bytes of appends sent to replicas catching up under a replication throttle.",
            &per_shard(&|m| m.replication_throttled_bytes.get()),
        )?;
        counter(&mut enc, "mesh_messages_sent", "Messages sent to other shards.", &per_shard(&|m| m.mesh_sent.get()))?;
        counter(
            &mut enc,
            "mesh_messages_received",
            "Messages received from other shards.",
            &per_shard(&|m| m.mesh_received.get()),
        )?;
        counter(
            &mut enc,
            "mesh_queue_full",
            "Sends to another shard that found its queue full and waited (backpressure).",
            &per_shard(&|m| m.mesh_queue_full.get()),
        )?;
        counter(
            &mut enc,
            "delayed_produces",
            "Appends whose ack waited for the log writer (write, and fdatasync under flush=always).",
            &per_shard(&|m| m.delayed_produce.get()),
        )?;
        counter(
            &mut enc,
            "delayed_fetches",
            "Fetches that found fewer than min_bytes and parked until data arrived or max_wait_ms passed.",
            &per_shard(&|m| m.delayed_fetch.get()),
        )?;
        gauge(
            &mut enc,
            "fetch_sessions",
            "Fetch sessions (KIP-227) in the shard's cache.",
            &per_shard_gauge(&|m| m.fetch_sessions.get()),
        )?;
        gauge(
            &mut enc,
            "fetch_session_partitions",
            "Partitions over all fetch sessions in the shard's cache.",
            &per_shard_gauge(&|m| m.fetch_session_partitions.get()),
        )?;
        counter(
            &mut enc,
            "fetch_session_evictions",
            "Fetch sessions evicted to make room for a new one (stale, or with fewer partitions).",
            &per_shard(&|m| m.fetch_session_evictions.get()),
        )?;
        counter(
            &mut enc,
            "incremental_fetches",
            "Fetches served within a fetch session (incremental: naming only changed partitions).",
            &per_shard(&|m| m.incremental_fetches.get()),
        )?;
        let fsync: Vec<(Labels, HistogramSnapshot)> =
            shards.iter().map(|m| (shard_label(m), m.fsync.snapshot())).collect();
        histogram(
            &mut enc,
            "fsync_duration_seconds",
            "Syncs of partition logs, one per group commit: an fdatasync, or under flush=always the write that syncs as it writes (O_DSYNC), timed whole; _count is the number of syncs.",
            &fsync,
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::probe::Closed;
    use std::time::{Duration, Instant};

    /// Parses `name{labels} value` lines into (name, labels, value).
    fn samples(text: &str) -> Vec<(String, String, f64)> {
        text.lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .map(|l| {
                let (series, value) = l.rsplit_once(' ').expect("a value");
                let (name, labels) = match series.split_once('{') {
                    Some((n, rest)) => (n.to_string(), rest.trim_end_matches('}').to_string()),
                    None => (series.to_string(), String::new()),
                };
                (name, labels, value.parse::<f64>().unwrap_or_else(|_| value.replace("+Inf", "inf").parse().unwrap()))
            })
            .collect()
    }

    #[test]
    fn the_page_is_prometheus_text_with_well_formed_histograms() {
        let reg = Registry::new(2, vec![(0, "Produce".to_string()), (1, "Fetch".to_string())]);
        let p0 = reg.register_shard(0, 3, Some(1));
        let p1 = reg.register_shard(1, 4, None);
        let t0 = Instant::now();
        for (i, ms) in [0u64, 1, 7, 90, 2_000].into_iter().enumerate() {
            let h = crate::metrics::HandlerTiming {
                api: p0.api_slot(Some(0)),
                started: t0,
                finished: t0 + Duration::from_millis(ms),
                remote: Duration::from_millis(ms / 2),
            };
            p0.request_done(&h, t0, t0 + Duration::from_millis(ms), t0 + Duration::from_millis(ms + i as u64));
        }
        p0.request_error(p0.api_slot(Some(9)), crate::metrics::ErrorKind::UnknownApi);
        p1.connection_opened();
        p1.connection_opened();
        p1.connection_closed(Closed::Client);
        p1.connection_closed(Closed::Idle);
        p1.connection_refused(ConnectionLimit::MaxConnectionsPerIp);
        p1.fsync(Duration::from_micros(300));
        p1.partitions(3);
        p1.throttled(p1.api_slot(Some(0)), Duration::from_millis(1500));
        p1.throttled(p1.api_slot(Some(0)), Duration::from_millis(250));
        p1.replication(4, 2, 1);
        p1.replication_throttled(4096);
        let text = Exposition::new(reg.clone()).render();
        for line in [
            "ringbroker_leader_partitions{shard=\"1\"} 4\n",
            "ringbroker_under_replicated_partitions{shard=\"1\"} 2\n",
            "ringbroker_under_min_isr_partitions{shard=\"1\"} 1\n",
            "ringbroker_under_replicated_partitions{shard=\"0\"} 0\n",
            "ringbroker_replication_throttled_bytes_total{shard=\"1\"} 4096\n",
        ] {
            assert!(text.contains(line), "{line}{text}");
        }

        assert!(text.contains("# TYPE ringbroker_requests_total counter"), "{text}");
        assert!(text.contains("ringbroker_requests_total{shard=\"0\",api=\"Produce\"} 5\n"), "{text}");
        assert!(text.contains("ringbroker_requests_total{shard=\"1\",api=\"Produce\"} 0\n"), "{text}");
        assert!(!text.contains("api=\"Fetch\""), "an API no shard has seen is left out:\n{text}");
        assert!(
            text.contains("ringbroker_request_errors_total{shard=\"0\",api=\"unknown\",error=\"unknown_api\"} 1\n"),
            "{text}"
        );
        assert!(text.contains("ringbroker_shard_info{shard=\"0\",cpu=\"3\",numa_node=\"1\"} 1\n"), "{text}");
        assert!(text.contains("ringbroker_shard_info{shard=\"1\",cpu=\"4\",numa_node=\"-\"} 1\n"), "{text}");
        assert!(text.contains("ringbroker_connections_open{shard=\"1\"} 0\n"), "{text}");
        assert!(text.contains("ringbroker_connections_closed_total{shard=\"1\",reason=\"client\"} 1\n"), "{text}");
        assert!(text.contains("ringbroker_connections_closed_total{shard=\"1\",reason=\"idle\"} 1\n"), "{text}");
        assert!(
            text.contains("ringbroker_connections_refused_total{shard=\"1\",reason=\"max_connections_per_ip\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("ringbroker_connections_refused_total{shard=\"0\",reason=\"max_connections\"} 0\n"),
            "{text}"
        );
        assert!(text.contains("ringbroker_partitions{shard=\"1\"} 3\n"), "{text}");
        assert!(text.contains("# TYPE ringbroker_throttled_responses_total counter"), "{text}");
        assert!(text.contains("ringbroker_throttled_responses_total{shard=\"1\",api=\"Produce\"} 2\n"), "{text}");
        assert!(text.contains("ringbroker_throttled_responses_total{shard=\"0\",api=\"Produce\"} 0\n"), "{text}");
        assert!(text.contains("ringbroker_throttle_time_seconds_total{shard=\"1\",api=\"Produce\"} 1.75\n"), "{text}");
        assert!(text.contains("# TYPE ringbroker_fsync_duration_seconds histogram"), "{text}");
        assert!(text.contains("ringbroker_fsync_duration_seconds_count{shard=\"1\"} 1\n"), "{text}");
        assert!(text.contains("ringbroker_fsync_duration_seconds_bucket{shard=\"1\",le=\"0.0004\"} 1\n"), "{text}");
        assert!(text.contains("ringbroker_fsync_duration_seconds_bucket{shard=\"1\",le=\"0.0002\"} 0\n"), "{text}");

        // Every histogram series: cumulative buckets never decrease and +Inf equals _count.
        let all = samples(&text);
        let series_of = |name: &str, labels: &str| {
            all.iter()
                .filter(|(n, l, _)| n == name && l.starts_with(labels) && l.contains("le="))
                .map(|(_, l, v)| (l.clone(), *v))
                .collect::<Vec<_>>()
        };
        let total = series_of("ringbroker_request_total_time_seconds_bucket", "shard=\"0\",api=\"Produce\"");
        assert_eq!(total.len(), BOUNDS + 1);
        assert!(total.windows(2).all(|w| w[0].1 <= w[1].1), "{total:?}");
        assert!(total.last().unwrap().0.contains("le=\"+Inf\""));
        assert_eq!(total.last().unwrap().1, 5.0);
        let count = all
            .iter()
            .find(|(n, l, _)| n == "ringbroker_request_total_time_seconds_count" && l.starts_with("shard=\"0\""))
            .unwrap();
        assert_eq!(count.2, 5.0);
        let sum = all
            .iter()
            .find(|(n, l, _)| n == "ringbroker_request_local_time_seconds_sum" && l.starts_with("shard=\"0\""))
            .unwrap();
        // Local = handler - remote: 0 + 1 + 4 + 45 + 1000 ms.
        assert!((sum.2 - 1.050).abs() < 1e-9, "{sum:?}");
    }
}
