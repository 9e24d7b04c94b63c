"""Side-by-side table from a `bench/run.sh ringbench` run directory: the median of each figure
over the rounds for Ringbroker and Kafka, the ratio of the medians, and the range of the
per-round ratios (each round ran both brokers back to back). Also the null-broker ceiling
and each broker's CPU time and peak RSS.

Usage: ringbench_report.py RUN_DIR OUT_PREFIX COMMAND [PLACEMENT]   (writes OUT_PREFIX.md and .json)

PLACEMENT says where the brokers and ringbench ran (default: sharing every core)."""
import json
import os
import statistics
import sys

from report_common import get, load, rounds_in

run, out, cmd = sys.argv[1:4]
where = sys.argv[4] if len(sys.argv) > 4 else "One broker at a time, ringbench on the same cores."
rounds = rounds_in(run)


def series(name, path):
    """The figure from every round that has the run (and the figure: a report without the
    broker's pid has no CPU figures)."""
    vals = []
    for r in rounds:
        f = os.path.join(r, name, "report.json")
        if os.path.exists(f):
            v = get(load(f), path)
            if v is not None:
                vals.append(v)
    return vals


def stats(name, key):
    vals = []
    for r in rounds:
        f = os.path.join(r, name + ".stats.json")
        if os.path.exists(f):
            vals.append(load(f)[key])
    return vals


med = lambda v: statistics.median(v) if v else float("nan")

FIGURES = [
    ("(a) produce records/s, acks=1, no fsync", "a", "publish_rate", "higher"),
    ("(a) produce MB/s", "a", "publish_mb_per_s", "higher"),
    ("(a) publish latency p99 ms", "a", "publish_latency_ms.p99", "lower"),
    ("(b) publish latency p50 ms, 50% of Kafka's max", "b", "publish_latency_ms.p50", "lower"),
    ("(b) publish latency p99 ms", "b", "publish_latency_ms.p99", "lower"),
    ("(b) publish latency p99.9 ms", "b", "publish_latency_ms.p99_9", "lower"),
    ("(b) publish delay p99 ms", "b", "publish_delay_ms.p99", "lower"),
    ("(c) produce records/s, acks=all + fsync", "c", "publish_rate", "higher"),
    ("(c) publish latency p99 ms", "c", "publish_latency_ms.p99", "lower"),
    ("(d) consume records/s from the beginning", "d", "consume_rate", "higher"),
    ("(d) consume MB/s", "d", "consume_mb_per_s", "higher"),
    ("(e) end-to-end latency p50 ms", "e", "end_to_end_latency_ms.p50", "lower"),
    ("(e) end-to-end latency p99 ms", "e", "end_to_end_latency_ms.p99", "lower"),
    ("(f) produce records/s, zstd, 16 B keys", "f", "publish_rate", "higher"),
    # ringbench reads the broker's CPU time (every thread, user + system) over the measured
    # window and puts it against the record bytes moved in it.
    ("(a) broker CPU s per GB produced", "a", "broker_cpu_s_per_gb", "lower"),
    ("(c) broker CPU s per GB produced, fsync", "c", "broker_cpu_s_per_gb", "lower"),
    ("(d) broker CPU s per GB fetched", "d", "broker_cpu_s_per_gb", "lower"),
]

rows, figures = [], {}
for label, key, path, better in FIGURES:
    rv, kv = series("rb-" + key, path), series("kafka-" + key, path)
    if not rv or not kv:
        continue
    ratios = [a / b for a, b in zip(rv, kv) if b]
    ratio = med(rv) / med(kv) if med(kv) else float("nan")
    spread = f"{min(ratios):.2f}–{max(ratios):.2f}×" if ratios else "n/a"
    rows.append(f"| {label} | {med(rv):,.2f} | {med(kv):,.2f} | {ratio:.2f}× | {spread} |")
    figures[label] = {"ringbroker": rv, "kafka": kv, "ratio_of_medians": ratio, "round_ratios": ratios, "better": better}

res = []
for label, rb, kafka in [("broker CPU s, all runs but (c)", "rb", "kafka"), ("broker CPU s, (c)", "rb-c", "kafka-c")]:
    rv, kv = stats(rb, "cpu_s"), stats(kafka, "cpu_s")
    if rv and kv:
        res.append(f"| {label} | {med(rv):,.1f} | {med(kv):,.1f} | {med(rv) / med(kv):.2f}× | |")
rss_rb = [max(a, b) for a, b in zip(stats("rb", "peak_rss_kib"), stats("rb-c", "peak_rss_kib"))]
rss_k = [max(a, b) for a, b in zip(stats("kafka", "peak_rss_kib"), stats("kafka-c", "peak_rss_kib"))]
if rss_rb and rss_k:
    res.append(f"| peak RSS MiB | {max(rss_rb) / 1024:,.0f} | {max(rss_k) / 1024:,.0f} | {max(rss_rb) / max(rss_k):.2f}× | |")
    figures["peak RSS KiB"] = {"ringbroker": rss_rb, "kafka": rss_k}

ceiling = []
na, nd = series("null-a", "publish_rate"), series("null-d", "consume_rate")
nb = series("null-b", "publish_latency_ms.p99")
if na and nd:
    ra, ka = med(series("rb-a", "publish_rate")), med(series("kafka-a", "publish_rate"))
    rd, kd = med(series("rb-d", "consume_rate")), med(series("kafka-d", "consume_rate"))
    ceiling = [
        "",
        "Null broker (acknowledges without storing; serves fetches with sendfile from a memfd of synthetic",
        "batches, built once): the ceiling of ringbench + loopback on this machine.",
        "",
        "| figure | null broker | Ringbroker, % of ceiling | Kafka, % of ceiling |",
        "|---|---:|---:|---:|",
        f"| (a) produce records/s | {med(na):,.0f} | {100 * ra / med(na):.0f}% | {100 * ka / med(na):.0f}% |",
        f"| (d) consume records/s | {med(nd):,.0f} | {100 * rd / med(nd):.0f}% | {100 * kd / med(nd):.0f}% |",
    ]
    if nb:
        rb99, kb99 = med(series("rb-b", "publish_latency_ms.p99")), med(series("kafka-b", "publish_latency_ms.p99"))
        ceiling += [
            "",
            f"(b) latency floor: at the same rate the null broker's publish p99 is {med(nb):.2f} ms "
            f"(Ringbroker {rb99:.2f} ms, Kafka {kb99:.2f} ms): the tool and the machine's scheduling cost that much.",
        ]
    figures["null broker"] = {"produce_rate": na, "consume_rate": nd, "b_publish_p99_ms": nb}

m = load(os.path.join(rounds[0], "rb-a", "report.json"))["machine"]
lines = [
    "# ringbench: Ringbroker vs Apache Kafka 4.4.0",
    "",
    # ringbench counts the cores it may run on; under a placement that is not the machine's.
    f"Machine: {m['cpu_model']}, {os.cpu_count()} cores, Linux {m['kernel']}. {where}",
    f"Command: `{cmd}`. Per-run report.json, .hgrm files and latency.svg: `{run}`.",
    "",
    f"Medians over {len(rounds)} rounds; each round ran every workload on Kafka, then on Ringbroker.",
    "",
    "| figure | Ringbroker | Kafka | Ringbroker / Kafka | per-round ratios |",
    "|---|---:|---:|---:|---:|",
    *rows,
    *res,
    *ceiling,
    "",
]
with open(out + ".md", "w") as f:
    f.write("\n".join(lines))
with open(out + ".json", "w") as f:
    json.dump({"command": cmd, "machine": m, "placement": where, "rounds": len(rounds), "figures": figures}, f, indent=2)
print("\n".join(lines))
