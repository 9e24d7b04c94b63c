"""The report of a `bench/run.sh scale` run directory: one table of every point (partitions and
connections), Ringbroker's and Kafka's max produce throughput, its p99 and the p99 at the fixed
rate, with the ratios; and one SVG of the curves, hand-written (no plotting library).

Usage: scale_report.py RUN_DIR OUT_PREFIX COMMAND PLACEMENT FIXED_RATE MAX_IN_FLIGHT
(writes OUT_PREFIX.md, .svg and .json)

RUN_DIR holds `plan` ("SWEEP PARTITIONS CONNECTIONS" a line), and for each broker (kafka, rb)
and point BROKER-pP-cC-max/report.json and BROKER-pP-cC-rate/report.json (a failed run: only
its .err), and BROKER-pP-cC.stats.json (CPU time, peak RSS)."""
import json
import math
import os
import sys

run, out, cmd, where, fixed_rate, in_flight = sys.argv[1:7]
fixed_rate = float(fixed_rate)
BROKERS = [("rb", "Ringbroker", "#1f77b4"), ("kafka", "Kafka", "#d62728")]
BEHIND = "behind"

with open(os.path.join(run, "plan")) as f:
    plan = [(s, int(p), int(c)) for s, p, c in (line.split() for line in f if line.strip())]
points = list(dict.fromkeys((p, c) for _, p, c in plan))  # each once, in plan order


def load(path):
    with open(path) as f:
        return json.load(f)


def result(broker, p, c, workload):
    """(report.json or None, the error if the run failed)."""
    base = os.path.join(run, f"{broker}-p{p}-c{c}-{workload}")
    if os.path.exists(os.path.join(base, "report.json")):
        return load(os.path.join(base, "report.json")), None
    err = ""
    if os.path.exists(base + ".err"):
        with open(base + ".err") as f:
            lines = [l.strip() for l in f if l.strip()]
        err = lines[-1] if lines else ""
    return None, err or "no report (not run)"


figures, errors = {}, []
for p, c in points:
    fig = {}
    for b, name, _ in BROKERS:
        mx, mx_err = result(b, p, c, "max")
        rt, rt_err = result(b, p, c, "rate")
        stats = os.path.join(run, f"{b}-p{p}-c{c}.stats.json")
        fig[b] = {
            "max_rate": mx["publish_rate"] if mx else None,
            "max_p99_ms": mx["publish_latency_ms"]["p99"] if mx else None,
            "rate_achieved": rt["publish_rate"] if rt else None,
            "rate_p50_ms": rt["publish_latency_ms"]["p50"] if rt else None,
            # A run so far behind that no request due after the warm-up was sent has no latency
            # samples (latency counts from when a request was due): "behind", not 0.
            "rate_p99_ms": (rt["publish_latency_ms"]["p99"] if rt["publish_latency_ms"]["count"] else BEHIND)
            if rt
            else None,
            "rate_p99_9_ms": rt["publish_latency_ms"]["p99_9"] if rt else None,
            "rate_delay_p99_ms": rt["publish_delay_ms"]["p99"] if rt else None,
            "partitions_seen": (mx or rt or {}).get("partitions"),
            "errors": (mx["produce_errors"] if mx else 0) + (rt["produce_errors"] if rt else 0),
            "broker": load(stats) if os.path.exists(stats) else None,
        }
        for w, e in (("max", mx_err), ("rate", rt_err)):
            if e:
                errors.append(f"- {name}, {p} partitions, {c} connections, {w}: `{e}`")
        seen = fig[b]["partitions_seen"]
        if seen is not None and seen != p:
            errors.append(f"- {name}, {p} partitions, {c} connections: the topic had {seen} partitions")
    figures[f"p{p}-c{c}"] = {"partitions": p, "connections": c, **fig}


def num(v, fmt):
    return "failed" if v is None else "—" if v == BEHIND else format(v, fmt)


def ratio(a, b):
    numbers = all(isinstance(v, (int, float)) for v in (a, b))
    if not numbers or not b:
        return ""
    return f"{a / b:.2f}×" if a / b >= 0.1 else f"{a / b:.2g}×"


def behind(f):
    """A mark when the fixed-rate run did not keep up with its rate."""
    a = f["rate_achieved"]
    return " *" if a is not None and a < 0.9 * fixed_rate else ""


rate_label = f"{fixed_rate:,.0f} rec/s"
rows = []
for p, c in points:
    f = figures[f"p{p}-c{c}"]
    r, k = f["rb"], f["kafka"]
    rows.append(
        f"| {p:,} | {c:,} "
        f"| {num(r['max_rate'], ',.0f')} | {num(k['max_rate'], ',.0f')} | {ratio(r['max_rate'], k['max_rate'])} "
        f"| {num(r['max_p99_ms'], ',.2f')} | {num(k['max_p99_ms'], ',.2f')} | {ratio(r['max_p99_ms'], k['max_p99_ms'])} "
        f"| {num(r['rate_p99_ms'], ',.2f')}{behind(r)} | {num(k['rate_p99_ms'], ',.2f')}{behind(k)} "
        f"| {ratio(r['rate_p99_ms'], k['rate_p99_ms'])} |"
    )
mem = []
for p, c in points:
    f = figures[f"p{p}-c{c}"]
    cells = []
    for b in ("rb", "kafka"):
        s = f[b]["broker"]
        cells += [f"{s['cpu_s']:,.1f}", f"{s['peak_rss_kib'] / 1024:,.0f}"] if s else ["", ""]
    mem.append(f"| {p:,} | {c:,} | " + " | ".join(cells) + " |")

# ---- the plot: throughput and p99 against partitions and against connections ----------------

W, H = 940, 665
PW, PH = 360, 200  # one panel's plot area
LEFT, TOP = [90, 560], [70, 370]


def log_pos(v, lo, hi, length):
    return (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)) * length if hi > lo else length / 2


def nice_log_ticks(lo, hi):
    """1, 2, 5 in each decade; only the powers of ten over more than three decades."""
    ticks = []
    decades = range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
    for e in decades:
        for m in (1, 2, 5) if len(decades) <= 4 else (1,):
            v = m * 10**e
            if lo <= v <= hi:
                ticks.append(v)
    return ticks


def fmt_tick(v):
    if v >= 1000:
        return f"{v / 1000:g}k"
    return f"{v:g}"


def panel(x0, y0, title, xs, xlabel, series, ylabel, log_y):
    """series: (color, dashed, [(x, y or None)])"""
    svg = [f'<text x="{x0}" y="{y0 - 12}" font-weight="bold">{title}</text>']
    ys = [y for _, _, pts in series for _, y in pts if isinstance(y, (int, float)) and y > 0]
    if not ys:
        return svg + [f'<text x="{x0 + 10}" y="{y0 + PH / 2}">no data</text>']
    xlo, xhi = min(xs), max(xs)
    if log_y:
        ylo, yhi = 10 ** math.floor(math.log10(min(ys))), 10 ** math.ceil(math.log10(max(ys)))
        y_of = lambda v: y0 + PH - log_pos(v, ylo, yhi, PH)
        yticks = nice_log_ticks(ylo, yhi)
    else:
        step = 10 ** math.floor(math.log10(max(ys)))
        step = next(s for s in (step / 5, step / 2, step, 2 * step) if max(ys) / s <= 6)
        yhi = step * math.ceil(max(ys) * 1.05 / step)
        y_of = lambda v: y0 + PH - v / yhi * PH
        yticks = [step * i for i in range(int(round(yhi / step)) + 1)]
    x_of = lambda v: x0 + log_pos(v, xlo, xhi, PW)
    svg.append(f'<rect x="{x0}" y="{y0}" width="{PW}" height="{PH}" fill="none" stroke="#999"/>')
    for v in yticks:
        y = y_of(v)
        svg.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x0 + PW}" y2="{y:.1f}" stroke="#e5e5e5"/>')
        svg.append(f'<text x="{x0 - 6}" y="{y + 4:.1f}" text-anchor="end">{fmt_tick(v)}</text>')
    for v in xs:
        x = x_of(v)
        svg.append(f'<line x1="{x:.1f}" y1="{y0}" x2="{x:.1f}" y2="{y0 + PH}" stroke="#e5e5e5"/>')
        svg.append(f'<text x="{x:.1f}" y="{y0 + PH + 16}" text-anchor="middle">{v:,}</text>')
    svg.append(f'<text x="{x0 + PW / 2}" y="{y0 + PH + 34}" text-anchor="middle">{xlabel} (log scale)</text>')
    svg.append(
        f'<text x="{x0 - 58}" y="{y0 + PH / 2}" text-anchor="middle" '
        f'transform="rotate(-90 {x0 - 58} {y0 + PH / 2})">{ylabel}</text>'
    )
    for color, dashed, pts in series:
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        good = [(x, y) for x, y in pts if isinstance(y, (int, float)) and y > 0]
        runs, run_ = [], []  # the line breaks where a point failed or is off the chart
        for x, y in pts:
            if isinstance(y, (int, float)) and y > 0:
                run_.append((x, y))
            else:
                runs, run_ = runs + [run_], []
        for seg in runs + [run_]:
            if len(seg) > 1:
                line = " ".join(f"{x_of(x):.1f},{y_of(y):.1f}" for x, y in seg)
                svg.append(f'<polyline fill="none" stroke="{color}" stroke-width="2"{dash} points="{line}"/>')
        for x, y in good:
            svg.append(f'<circle cx="{x_of(x):.1f}" cy="{y_of(y):.1f}" r="3" fill="{color}"/>')
        for x, y in pts:  # off the chart (no latency sample: far behind the rate): a triangle on top
            if y == BEHIND:
                cx = x_of(x)
                svg.append(f'<path d="M{cx - 5:.1f},{y0 + 8} L{cx + 5:.1f},{y0 + 8} L{cx:.1f},{y0}" fill="{color}"/>')
        for x, y in pts:  # a failed point: a cross on the x axis
            if y is None:
                cx, cy = x_of(x), y0 + PH
                svg.append(
                    f'<path d="M{cx - 4:.1f},{cy - 4} L{cx + 4:.1f},{cy + 4} M{cx - 4:.1f},{cy + 4} '
                    f'L{cx + 4:.1f},{cy - 4}" stroke="{color}" stroke-width="2"/>'
                )
    return svg


def sweep(name):
    return [(p, c) for s, p, c in plan if s == name]


def curve(pts, axis, key, broker):
    return [(p if axis == "partitions" else c, figures[f"p{p}-c{c}"][broker][key]) for p, c in pts]


svg = [
    f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
    '<rect width="100%" height="100%" fill="white"/>',
    '<text x="20" y="24" font-size="15" font-weight="bold">Ringbroker vs Apache Kafka: cost against partitions'
    " and connections (acks=1, 1 KiB records)</text>",
]
for col, (axis, fixed_name) in enumerate([("partitions", "connections"), ("connections", "partitions")]):
    pts = sweep(axis)
    if not pts:
        continue
    xs = sorted({p if axis == "partitions" else c for p, c in pts})
    fixed = pts[0][1] if axis == "partitions" else pts[0][0]
    tput = [(color, False, curve(pts, axis, "max_rate", b)) for b, _, color in BROKERS]
    lat = [(color, False, curve(pts, axis, "rate_p99_ms", b)) for b, _, color in BROKERS] + [
        (color, True, curve(pts, axis, "max_p99_ms", b)) for b, _, color in BROKERS
    ]
    svg += panel(LEFT[col], TOP[0], f"max produce throughput, {fixed:,} {fixed_name}", xs, axis, tput, "records/s", False)
    svg += panel(LEFT[col], TOP[1], f"publish latency p99, {fixed:,} {fixed_name}", xs, axis, lat, "ms (log scale)", True)
ly = H - 20
legend = []
for i, (_, name, color) in enumerate(BROKERS):
    x = 90 + 130 * i
    legend.append(f'<line x1="{x}" y1="{ly - 4}" x2="{x + 24}" y2="{ly - 4}" stroke="{color}" stroke-width="2"/>')
    legend.append(f'<text x="{x + 30}" y="{ly}">{name}</text>')
legend.append(f'<line x1="360" y1="{ly - 4}" x2="384" y2="{ly - 4}" stroke="#555" stroke-width="2"/>')
legend.append(f'<text x="390" y="{ly}">p99 at {rate_label}</text>')
legend.append(
    f'<line x1="560" y1="{ly - 4}" x2="584" y2="{ly - 4}" stroke="#555" stroke-width="2" stroke-dasharray="6 4"/>'
)
legend.append(f'<text x="590" y="{ly}">p99 at max throughput</text>')
legend.append(f'<text x="760" y="{ly}">× failed  ▲ off the chart</text>')
svg += legend + ["</svg>", ""]

# ---- the report ------------------------------------------------------------------------------

machine = next(
    (r["machine"] for p, c in points for b, _, _ in BROKERS for w in ("max", "rate") if (r := result(b, p, c, w)[0])),
    {"cpu_model": "unknown", "kernel": "unknown"},
)
any_report = next(
    (r for p, c in points for b, _, _ in BROKERS for w in ("max", "rate") if (r := result(b, p, c, w)[0])), {}
)
notes = []
if any(behind(figures[f"p{p}-c{c}"][b]) for p, c in points for b in ("rb", "kafka")):
    notes.append(f"\\* the broker fell more than 10% behind {rate_label} in that run (the p99 then includes queueing).")
if any(figures[f"p{p}-c{c}"][b]["rate_p99_ms"] == BEHIND for p, c in points for b in ("rb", "kafka")):
    notes.append(
        "— \\*: so far behind the rate that no request due after the warm-up had been sent by the end of the run "
        "(no latency sample; ▲ in the plot)."
    )
svg_name = os.path.basename(out) + ".svg"
lines = [
    "# ringbench scale: Ringbroker vs Apache Kafka 4.4.0, against partitions and connections",
    "",
    f"Machine: {machine['cpu_model']}, {os.cpu_count()} cores, Linux {machine['kernel']}. {where}",
    f"Command: `{cmd}`. Per-run report.json and .hgrm files: `{run}`.",
    "",
    f"Each point on a broker started afresh (empty data directory), one topic of that many partitions, "
    f"{any_report.get('record_size', 1024)}-byte records, {any_report.get('batch_records', 16)} a batch, acks=1, "
    "no fsync (Ringbroker `--flush os`, Kafka's defaults); ringbench's producer threads spread over the "
    "connections (`--connections`), records to every partition in turn. "
    f"\"max\": as fast as the producers go; \"at {rate_label}\": a fixed rate, latency counted from when each "
    f"request was due. Up to {in_flight} requests in flight on each connection, so the p99 at max throughput "
    "grows with the connections as queueing does (requests in flight / throughput); the p99 at the fixed rate is "
    "the latency under a steady load the brokers should sustain (\\* where one fell behind). Neither broker's connection limits were raised (both unlimited "
    "by default).",
    "",
    f"| partitions | connections | Ringbroker max rec/s | Kafka max rec/s | Ringbroker / Kafka "
    f"| Ringbroker p99 at max, ms | Kafka p99 at max, ms | Ringbroker / Kafka "
    f"| Ringbroker p99 at {rate_label}, ms | Kafka p99 at {rate_label}, ms | Ringbroker / Kafka |",
    "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    *rows,
    "",
    *[line for n in notes for line in (n, "")],
    f"![throughput and p99 against partitions and connections]({svg_name})",
    "",
    "Broker CPU time (both runs of the point) and peak RSS, from /proc:",
    "",
    "| partitions | connections | Ringbroker CPU s | Ringbroker peak RSS MiB | Kafka CPU s | Kafka peak RSS MiB |",
    "|---:|---:|---:|---:|---:|---:|",
    *mem,
    "",
]
if errors:
    lines += ["Runs that failed:", "", *errors, ""]
with open(out + ".md", "w") as f:
    f.write("\n".join(lines))
with open(out + ".svg", "w") as f:
    f.write("\n".join(svg))
with open(out + ".json", "w") as f:
    json.dump(
        {"command": cmd, "machine": machine, "placement": where, "fixed_rate": fixed_rate, "plan": plan,
         "points": figures, "failed": errors},
        f,
        indent=2,
    )
print("\n".join(lines))
