"""Side-by-side table from ringbench-compare.sh's run directory: one row per figure, with
Ringbroker, Kafka and the ratio. Usage: ringbench_report.py RUN_DIR OUT.md COMMAND"""
import json
import os
import sys

run, out, cmd = sys.argv[1:4]


def report(name):
    with open(os.path.join(run, name, "report.json")) as f:
        return json.load(f)


def get(d, path):
    for p in path.split("."):
        d = d[p]
    return d


def rate(r):
    return r["records_consumed"] / r["elapsed_s"] if r["elapsed_s"] else 0.0


FIGURES = [
    ("(a) produce records/s, acks=1, no fsync", "a", "publish_rate"),
    ("(a) produce MB/s", "a", "publish_mb_per_s"),
    ("(a) publish latency p99 ms", "a", "publish_latency_ms.p99"),
    ("(b) publish latency p50 ms, 50% of Kafka's max", "b", "publish_latency_ms.p50"),
    ("(b) publish latency p99 ms", "b", "publish_latency_ms.p99"),
    ("(b) publish latency p99.9 ms", "b", "publish_latency_ms.p99_9"),
    ("(b) publish delay p99 ms", "b", "publish_delay_ms.p99"),
    ("(c) produce records/s, acks=all + fsync", "c", "publish_rate"),
    ("(c) publish latency p99 ms", "c", "publish_latency_ms.p99"),
    ("(e) end-to-end latency p50 ms", "e", "end_to_end_latency_ms.p50"),
    ("(e) end-to-end latency p99 ms", "e", "end_to_end_latency_ms.p99"),
]

rows = []
for label, key, path in FIGURES:
    rv, kv = get(report("rb-" + key), path), get(report("kafka-" + key), path)
    ratio = f"{rv / kv:.2f}×" if kv else "n/a"
    rows.append(f"| {label} | {rv:,.2f} | {kv:,.2f} | {ratio} |")
rd, kd = report("rb-d"), report("kafka-d")
rows.append(f"| (d) consume records/s from the beginning | {rate(rd):,.0f} | {rate(kd):,.0f} | {rate(rd) / rate(kd):.2f}× |")

ceiling = []
if os.path.exists(os.path.join(run, "null-a", "report.json")):
    na, nd = report("null-a"), report("null-d")
    ra, ka = report("rb-a"), report("kafka-a")
    ceiling = [
        "",
        "Null broker (acknowledges without storing, serves synthetic batches): the ceiling of ringbench + loopback.",
        "",
        "| figure | null broker | Ringbroker, % of ceiling | Kafka, % of ceiling |",
        "|---|---:|---:|---:|",
        f"| (a) produce records/s | {na['publish_rate']:,.0f} | {100 * ra['publish_rate'] / na['publish_rate']:.0f}% | {100 * ka['publish_rate'] / na['publish_rate']:.0f}% |",
        f"| (d) consume records/s | {rate(nd):,.0f} | {100 * rate(rd) / rate(nd):.0f}% | {100 * rate(kd) / rate(nd):.0f}% |",
        "",
        "The (d) ceiling is not yet a ceiling: the null broker copies a template batch and re-encodes every",
        "fetch response through the generated codec, which is slower than either broker's fetch path.",
    ]

m = report("rb-a")["machine"]
lines = [
    "# ringbench: Ringbroker vs Apache Kafka 4.4.0",
    "",
    f"Machine: {m['cpu_model']}, {m['cores']} cores, Linux {m['kernel']}. One broker at a time, ringbench on the same cores.",
    f"Command: `{cmd}`. Per-run report.json, .hgrm files and latency.svg: `{run}`.",
    "",
    "| figure | Ringbroker | Kafka | Ringbroker / Kafka |",
    "|---|---:|---:|---:|",
    *rows,
    "",
    f"(d) read {rd['records_consumed']:,} records (Ringbroker) and {kd['records_consumed']:,} (Kafka).",
    *ceiling,
    "",
]
with open(out, "w") as f:
    f.write("\n".join(lines))
print("\n".join(lines))
