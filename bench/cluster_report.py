"""The report of a `bench/run.sh cluster` run directory: three Ringbroker brokers against three
Kafka brokers, acks=all, each figure as the ratio of the two measured side by side in the same
round (the median of the per-round ratios, and their range), the medians of each side, and
every round's values. Also Ringbroker with replication factor 3 against 1: what replication
costs it.

Usage: cluster_report.py RUN_DIR OUT_PREFIX COMMAND   (writes OUT_PREFIX.md and .json)

RUN_DIR holds round-N/ directories, each with one ringbench output directory per run
(kafka-max, kafka-lat, rb-max, rb-lat, rb1-max, and the unmeasured warm-up steps
kafka-warm-1, ...; report.json in each), the fixed rate of the
round (fixed-rate) and each cluster's CPU time and peak RSS (kafka.stats.json, rb.stats.json,
rb1.stats.json: sums over the three broker processes)."""
import glob
import json
import os
import re
import statistics
import sys

from report_common import get, load, rounds_in

run, out, cmd = sys.argv[1:4]
rounds = rounds_in(run)
if not rounds:
    sys.exit(f"cluster_report.py: no round-N directories in {run}")


def value(r, name, path):
    """One figure of one run of round directory r: from its report.json (or, for a path
    starting with "stats:", from NAME.stats.json); None when the run or the figure is missing
    (a report without the brokers' pids has no CPU figures)."""
    if path.startswith("stats:"):
        f = os.path.join(r, name + ".stats.json")
        return load(f).get(path[6:]) if os.path.exists(f) else None
    if path == "disk:mb_per_s":
        f = os.path.join(r, name + ".disk.json")
        d = load(f) if os.path.exists(f) else {}
        return d["written_mb"] / d["seconds"] if d.get("written_mb") is not None and d.get("seconds") else None
    f = os.path.join(r, name, "report.json")
    return get(load(f), path) if os.path.exists(f) else None


med = lambda v: statistics.median(v) if v else float("nan")

# (label, run of the first side, run of the second side, figure, which way is better)
VS_KAFKA = [
    ("(1) max produce records/s, acks=all, RF 3", "rb-max", "kafka-max", "publish_rate", "higher"),
    ("(1) max produce MB/s", "rb-max", "kafka-max", "publish_mb_per_s", "higher"),
    ("(1) publish latency p99 ms at max", "rb-max", "kafka-max", "publish_latency_ms.p99", "lower"),
    ("(2) publish latency p50 ms at the fixed rate", "rb-lat", "kafka-lat", "publish_latency_ms.p50", "lower"),
    ("(2) publish latency p99 ms", "rb-lat", "kafka-lat", "publish_latency_ms.p99", "lower"),
    ("(2) publish latency p99.9 ms", "rb-lat", "kafka-lat", "publish_latency_ms.p99_9", "lower"),
    ("(2) records/s acknowledged at the fixed rate", "rb-lat", "kafka-lat", "publish_rate", "higher"),
    ("(2) publish delay p99 ms (sends late against the schedule)", "rb-lat", "kafka-lat", "publish_delay_ms.p99", "lower"),
    ("(3) broker CPU s per GB produced, max (3 brokers)", "rb-max", "kafka-max", "broker_cpu_s_per_gb", "lower"),
    ("(3) broker CPU s per GB produced, fixed rate", "rb-lat", "kafka-lat", "broker_cpu_s_per_gb", "lower"),
    ("disk MB/s written during (1) (the whole device)", "rb-max", "kafka-max", "disk:mb_per_s", "lower"),
    ("broker CPU s, whole cluster life (3 brokers)", "rb", "kafka", "stats:cpu_s", "lower"),
    ("peak RSS MiB, 3 brokers together", "rb", "kafka", "stats:peak_rss_kib", "lower"),
]
RF = [
    ("(4) max produce records/s, acks=all", "rb-max", "rb1-max", "publish_rate", "higher"),
    ("(4) publish latency p99 ms at max", "rb-max", "rb1-max", "publish_latency_ms.p99", "lower"),
    ("(4) broker CPU s per GB produced (3 brokers)", "rb-max", "rb1-max", "broker_cpu_s_per_gb", "lower"),
    ("(4) disk MB/s written (the whole device)", "rb-max", "rb1-max", "disk:mb_per_s", "lower"),
]


def figure(label, a, b, path, better):
    """Each round's pair, the per-round ratios a/b, their median and range, the medians."""
    scale = 1 / 1024 if path == "stats:peak_rss_kib" else 1
    pairs = []
    for r in rounds:
        va, vb = value(r, a, path), value(r, b, path)
        pairs.append((None if va is None else va * scale, None if vb is None else vb * scale))
    both = [(x, y) for x, y in pairs if x is not None and y is not None]
    ratios = [x / y for x, y in both if y]
    return {
        "label": label,
        "runs": [a, b],
        "path": path,
        "better": better,
        "per_round": pairs,
        "round_ratios": ratios,
        "median_of_round_ratios": med(ratios),
        "medians": [med([x for x, _ in both]), med([y for _, y in both])],
    }


def fmt(v):
    if v is None or v != v:
        return "n/a"
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:,.2f}"


def table(figures, first, second):
    lines = [
        f"| figure | {first} | {second} | {first} / {second} (median of round ratios) | range of round ratios |",
        "|---|---:|---:|---:|---:|",
    ]
    for f in figures:
        if not f["round_ratios"]:
            continue
        rr = f["round_ratios"]
        spread = f"{min(rr):.2f}–{max(rr):.2f}×"
        lines.append(
            f"| {f['label']} | {fmt(f['medians'][0])} | {fmt(f['medians'][1])} | {f['median_of_round_ratios']:.2f}× | {spread} |"
        )
    return lines


def per_round(figures, first, second):
    lines = [
        "| figure | round | " + first + " | " + second + " | ratio |",
        "|---|---:|---:|---:|---:|",
    ]
    for f in figures:
        for i, (x, y) in enumerate(f["per_round"], 1):
            ratio = f"{x / y:.2f}×" if x is not None and y else "n/a"
            lines.append(f"| {f['label']} | {i} | {fmt(x)} | {fmt(y)} | {ratio} |")
    return lines


vs_kafka = [figure(*f) for f in VS_KAFKA]
rf = [figure(*f) for f in RF]

fixed = []
for r in rounds:
    f = os.path.join(r, "fixed-rate")
    fixed.append(float(open(f).read()) if os.path.exists(f) else None)
layout = {}
for name in ["kafka-max", "rb-max", "rb1-max"]:
    layout[name] = [(value(r, name, "replicas"), value(r, name, "leader_brokers")) for r in rounds]
# The unmeasured warm-up steps of each cluster, records/s, per round.
warm = {}
for name in ["kafka", "rb", "rb1"]:
    warm[name] = []
    for r in rounds:
        steps = [d for d in glob.glob(os.path.join(r, name + "-warm-*")) if os.path.isdir(d)]
        steps.sort(key=lambda d: int(d.rsplit("-", 1)[1]))
        warm[name].append([value(r, os.path.basename(d), "publish_rate") for d in steps])
rising = [
    f"{n} round {i}" for n, per in warm.items() for i, v in enumerate(per, 1) if len(v) >= 2 and v[-2] and v[-1] > 1.05 * v[-2]
]
errors = {
    name: [value(r, name, "produce_errors") for r in rounds]
    for name in ["kafka-max", "kafka-lat", "rb-max", "rb-lat", "rb1-max"]
}

first_report = next(
    (os.path.join(r, n, "report.json") for r in rounds for n in ["rb-max", "kafka-max"] if os.path.exists(os.path.join(r, n, "report.json"))),
    None,
)
m = load(first_report)["machine"] if first_report else {"cpu_model": "unknown", "kernel": "unknown"}
rep = load(first_report) if first_report else {}

flush = re.search(r"RB_FLUSH=(\w+)", cmd).group(1) if "RB_FLUSH=" in cmd else "always"
lines = [
    "# cluster: three Ringbroker brokers vs three Apache Kafka 4.4.0 brokers, acks=all",
    "",
    f"Machine: {m['cpu_model']}, {os.cpu_count()} cores, Linux {m['kernel']}; every broker of a cluster, and ringbench,",
    "on this one machine (127.0.0.1), one cluster at a time, each started afresh for its runs.",
    f"Command: `{cmd}`. Per-run report.json, .hgrm files, latency.svg and broker logs: `{run}`.",
    "",
    f"- Ringbroker: three brokers, every one a voter of the metadata quorum, one shard each, `--flush {flush}`",
    ("  (fdatasync before every ack)" if flush == "always" else "  (NOT fsynced before the ack)")
    + "; acks=all answers once a majority of the replicas hold the batch.",
    "- Kafka: three KRaft nodes, each broker and controller, Kafka's defaults (no fsync: the OS writes back);",
    "  acks=all answers once every replica in the ISR holds the batch.",
    f"- ringbench: {rep.get('producers', '?')} producers, {rep.get('record_size', '?')} B records, "
    f"{rep.get('batch_records', '?')} a batch (one batch a request), {rep.get('partitions', '?')} partitions, acks=all; "
    "each partition's batches go to its leader. Broker CPU is the three processes' user + system time over",
    "  the measured window, per GB (10^9 B) of record payload acknowledged. Before every run a `sync` wrote back",
    "  what earlier runs left dirty; disk MB/s is what the data directories' device wrote over the whole run.",
    f"- Fixed rate of (2), per round: {', '.join(fmt(v) for v in fixed)} records/s.",
    "",
    f"Ringbroker (replication factor 3) / Kafka (replication factor 3), {len(rounds)} round(s), "
    "each round running Kafka, then Ringbroker:",
    "",
    *table(vs_kafka, "Ringbroker", "Kafka"),
    "",
    "The cost of replication on Ringbroker: the same three brokers, the topic with replication factor 3 against 1",
    "(a ratio below 1 on throughput is what the two extra copies cost):",
    "",
    *table(rf, "RF 3", "RF 1"),
    "",
    "Replicas and brokers leading partitions, per round: "
    + "; ".join(f"{n}: " + ", ".join(f"{a} replicas/{b} leaders" for a, b in v) for n, v in layout.items()),
    "",
]
if any(v for per in warm.values() for v in per):
    lines += [
        "Warm-up before the measured runs (unmeasured max produce on a topic of its own, right after each",
        "cluster started), records/s per step:",
        "",
        *[f"- {n}, round {i}: " + " → ".join(fmt(x) for x in v) for n, per in warm.items() for i, v in enumerate(per, 1) if v],
        "",
    ]
    if rising:
        lines += [f"WARNING: still rising at the end of the warm-up (last step > 1.05 × the one before): {', '.join(rising)}; raise PREWARM / RB_PREWARM.", ""]
refused = {n: v for n, v in errors.items() if any(v or [])}
if refused:
    lines += [f"WARNING: records refused (a leader moved during the run?): {refused}", ""]
lines += [
    "## Each round",
    "",
    *per_round(vs_kafka, "Ringbroker", "Kafka"),
    "",
    *per_round(rf, "RF 3", "RF 1"),
    "",
]
with open(out + ".md", "w") as f:
    f.write("\n".join(lines))


def finite(v):
    """NaN (a figure no round has) as null: JSON has no NaN."""
    if isinstance(v, float) and v != v:
        return None
    if isinstance(v, dict):
        return {k: finite(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [finite(x) for x in v]
    return v


with open(out + ".json", "w") as f:
    json.dump(
        finite({
            "command": cmd,
            "machine": m,
            "rounds": len(rounds),
            "fixed_rate": fixed,
            "layout": layout,
            "warm_up_rates": warm,
            "produce_errors": errors,
            "ringbroker_vs_kafka": vs_kafka,
            "ringbroker_rf3_vs_rf1": rf,
        }),
        f,
        indent=2,
    )
print("\n".join(lines))
