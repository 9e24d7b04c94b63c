#!/usr/bin/env python3
"""Turn a `bench/run.sh compare` run directory into <out>.md and <out>.json.

usage: compare_report.py RUN_DIR OUT_PREFIX
"""
import json
import os
import re
import sys
from collections import defaultdict

RUN, OUT = sys.argv[1], sys.argv[2]

metrics = defaultdict(dict)
with open(os.path.join(RUN, "metrics.tsv")) as f:
    for line in f:
        line = line.rstrip("\n")
        if not line:
            continue
        phase, key, value = line.split("\t", 2)
        metrics[phase][key] = value

cfg, mach = metrics["config"], metrics["machine"]
RECORDS = int(cfg["records"])
RECORD_SIZE = int(cfg["record_size"])
PASSES = int(cfg["consume_passes"])
problems = []


def num(phase, key, default=None):
    v = metrics.get(phase, {}).get(key)
    try:
        return float(v) if v is not None else default
    except ValueError:
        return default


FINAL = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99\.9th"
)


def produce(broker):
    path = os.path.join(RUN, f"{broker}.produce.out")
    phase = f"{broker}.produce"
    if not os.path.exists(path):
        problems.append(f"{broker}: produce did not run")
        return None
    text = open(path, errors="replace").read()
    err = open(path + ".err", errors="replace").read() if os.path.exists(path + ".err") else ""
    m = None
    for line in text.splitlines():
        mm = FINAL.search(line)
        if mm:
            m = mm
    res = {"rc": int(num(phase, "rc", -1))}
    if m is None:
        problems.append(f"{broker}: no final ProducerPerformance line (rc {res['rc']}); stderr tail: "
                        + " | ".join(err.strip().splitlines()[-3:]))
        return res
    sent = int(m.group(1))
    res.update(
        records=sent,
        records_per_s=float(m.group(2)),
        mb_per_s=float(m.group(3)),
        avg_ms=float(m.group(4)),
        max_ms=float(m.group(5)),
        p50_ms=int(m.group(6)),
        p95_ms=int(m.group(7)),
        p99_ms=int(m.group(8)),
        p999_ms=int(m.group(9)),
        final_line=m.group(0),
    )
    # ProducerPerformance's periodic lines (every 5 s): how throughput and latency moved.
    res["interval_lines"] = [l.strip() for l in text.splitlines() if "records sent" in l and not FINAL.search(l)]
    errors = [l for l in (text + "\n" + err).splitlines() if re.search(r"Exception|ERROR", l)]
    res["error_lines"] = len(errors)
    if errors:
        problems.append(f"{broker}: {len(errors)} error line(s) in producer output, first: {errors[0][:300]}")
    if sent != RECORDS:
        problems.append(f"{broker}: producer reported {sent} records sent, expected {RECORDS}")
    if res["rc"] != 0:
        problems.append(f"{broker}: ProducerPerformance exit code {res['rc']}")
    cpu = num(phase, "broker_cpu_s")
    res.update(broker_cpu_s=cpu, wall_s=num(phase, "wall_s"), client_cpu_s=num(phase, "client_cpu_s"),
               machine_busy_s=num(phase, "machine_busy_s"), machine_steal_s=num(phase, "machine_steal_s"))
    gb = RECORDS * RECORD_SIZE / 1e9
    res["broker_cpu_s_per_gb"] = cpu / gb if cpu is not None else None
    if metrics[phase].get("broker_died"):
        problems.append(f"{broker}: broker process gone after produce")
    return res


def consume(label):
    passes = []
    for i in range(1, PASSES + 1):
        path = os.path.join(RUN, f"{label}.consume.{i}.out")
        phase = f"{label}.consume.{i}"
        if not os.path.exists(path):
            continue
        p = {"pass": i, "rc": int(num(phase, "rc", -1))}
        js = None
        for line in open(path, errors="replace"):
            line = line.strip()
            if line.startswith("{"):
                try:
                    js = json.loads(line)
                except ValueError:
                    pass
        if js is None:
            err = open(path + ".err", errors="replace").read() if os.path.exists(path + ".err") else ""
            problems.append(f"{label} pass {i}: no result (rc {p['rc']}); stderr tail: "
                            + " | ".join(err.strip().splitlines()[-3:]))
        else:
            p.update(js)
            if not js.get("complete") or js.get("records") != RECORDS:
                problems.append(f"{label} pass {i}: read {js.get('records')} of {RECORDS} records "
                                f"(complete={js.get('complete')})")
            if (js.get("max_gap_s") or 0) > 5:
                problems.append(f"{label} pass {i}: STALL: {js['max_gap_s']:.1f} s without records "
                                f"({js.get('empty_polls')} empty polls, {js.get('mb_per_s')} MB/s)")
            if js.get("log_records") != RECORDS:
                problems.append(f"{label} pass {i}: log holds {js.get('log_records')} records by ListOffsets, "
                                f"expected {RECORDS}")
        errp = path + ".err"
        if os.path.exists(errp):
            # The client logs disconnects (request timeouts) at INFO: they mean a response never came.
            disc = [l.strip() for l in open(errp, errors="replace") if "request timeout" in l or "disconnected" in l]
            if disc:
                p["client_disconnects"] = disc
                problems.append(f"{label} pass {i}: client saw {len(disc)} disconnect line(s), first: {disc[0][:250]}")
        for k in ("broker_cpu_s", "client_cpu_s", "wall_s", "machine_busy_s", "machine_steal_s"):
            p[k] = num(phase, k)
        if metrics[phase].get("broker_died"):
            problems.append(f"{label} pass {i}: broker process gone")
        passes.append(p)
    ok = [p for p in passes if "mb_per_s" in p]
    if not ok:
        return {"passes": passes}
    cpu = sum(p["broker_cpu_s"] or 0 for p in ok)
    fetched = sum((p.get("fetched_bytes") or 0) if (p.get("fetched_bytes") or 0) > 0 else p["value_bytes"] for p in ok)
    return {
        "passes": passes,
        "mb_per_s": sum(p["mb_per_s"] for p in ok) / len(ok),
        "mb_per_s_best": max(p["mb_per_s"] for p in ok),
        "records_per_s": sum(p["records_per_s"] for p in ok) / len(ok),
        "broker_cpu_s": cpu,
        "fetched_bytes": fetched,
        "broker_cpu_s_per_gb": cpu / (fetched / 1e9) if fetched else None,
    }


def rss(label):
    h = num(label, "vm_hwm_kib")
    return h / 1024 if h is not None else None


res = {
    "machine": dict(mach),
    "config": dict(cfg),
    "ringbroker": {
        "produce": produce("rb"),
        "consume_sendfile": consume("rb-sendfile"),
        "consume_copy": consume("rb-copy"),
        "peak_rss_mib_produce_and_sendfile_consume": rss("rb-sendfile"),
        "peak_rss_mib_copy_consume": rss("rb-copy"),
        "data_bytes": num("rb-sendfile", "data_bytes"),
        "shutdown_killed": bool(metrics["rb-sendfile"].get("shutdown_killed") or metrics["rb-copy"].get("shutdown_killed")),
    },
    "kafka": {
        "produce": produce("kafka"),
        "consume": consume("kafka"),
        "peak_rss_mib": rss("kafka"),
        "data_bytes": num("kafka", "data_bytes"),
    },
}
for label in ("rb-sendfile", "rb-copy", "kafka"):
    if metrics[label].get("started") == "0":
        problems.append(f"{label}: broker did not start")
    if metrics[label].get("topic_failed"):
        problems.append(f"{label}: topic creation failed")
    if metrics[label].get("shutdown_killed"):
        problems.append(f"{label}: did not stop within 30 s of SIGTERM (killed)")
for name in ("rb-warnings.txt", "kafka-warnings.txt"):
    path = os.path.join(RUN, name)
    if os.path.exists(path) and os.path.getsize(path):
        lines = open(path, errors="replace").read().strip().splitlines()
        who = name.split("-")[0]
        res.setdefault("broker_warnings", {})[who] = lines
        # Kafka warns routinely (e.g. controller activation on a fresh log): only its ERRORs count.
        bad = lines if who == "rb" else [l for l in lines if " ERROR " in l]
        if bad:
            problems.append(f"{'ringbroker' if who == 'rb' else who} log has {len(bad)} WARN/ERROR line(s) "
                            f"(all in the JSON), first: {bad[0][:300]}")

# Other processes' CPU during the timed phases: machine busy minus broker minus client.
noise = {}
for phase, kv in metrics.items():
    if "machine_busy_s" in kv:
        other = float(kv["machine_busy_s"]) - float(kv.get("broker_cpu_s", 0)) - float(kv.get("client_cpu_s", 0))
        wall = float(kv["wall_s"])
        noise[phase] = {"other_cpu_s": round(other, 2), "wall_s": wall,
                        "other_cores": round(other / wall, 2) if wall else None,
                        "steal_s": float(kv.get("machine_steal_s", 0))}
res["other_cpu"] = noise
disturbed = [f"{ph} ({v['other_cores']} cores)" for ph, v in sorted(noise.items())
             if v.get("other_cores") is not None and v["other_cores"] > 0.5]
if disturbed:
    problems.append("other processes used over 0.5 of a core on average during: " + ", ".join(disturbed)
                    + " — those figures are disturbed")
busy0 = mach.get("busy_cores_before_start")
if busy0 is not None and float(busy0) > 0.2:
    problems.append(f"the machine was already busy before the start ({busy0} cores)")
res["problems"] = problems


def ratio(a, b):
    return a / b if a is not None and b not in (None, 0) else None


rp, kp = res["ringbroker"]["produce"] or {}, res["kafka"]["produce"] or {}
rcs, rcc, kc = res["ringbroker"]["consume_sendfile"], res["ringbroker"]["consume_copy"], res["kafka"]["consume"]
ratios = {
    "produce_mb_per_s": ratio(rp.get("mb_per_s"), kp.get("mb_per_s")),
    "produce_p99_ms": ratio(rp.get("p99_ms"), kp.get("p99_ms")),
    "consume_mb_per_s_sendfile": ratio(rcs.get("mb_per_s"), kc.get("mb_per_s")),
    "consume_mb_per_s_copy": ratio(rcc.get("mb_per_s"), kc.get("mb_per_s")),
    "consume_cpu_s_per_gb_sendfile": ratio(rcs.get("broker_cpu_s_per_gb"), kc.get("broker_cpu_s_per_gb")),
    "peak_rss": ratio(res["ringbroker"]["peak_rss_mib_produce_and_sendfile_consume"], res["kafka"]["peak_rss_mib"]),
}
res["ratios_ringbroker_over_kafka"] = ratios
res["sendfile_vs_copy_cpu"] = ratio(rcs.get("broker_cpu_s_per_gb"), rcc.get("broker_cpu_s_per_gb"))

with open(OUT + ".json", "w") as f:
    json.dump(res, f, indent=2)
    f.write("\n")


def fmt(v, d=1):
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:,.{d}f}"
    return f"{v:,}"


def fr(v):
    return "—" if v is None else f"{v:.2f}×"


L = []
L.append(f"# Ringbroker vs Apache Kafka {mach.get('kafka_version', '?')} — {os.path.basename(OUT)}")
L.append("")
L.append(f"Machine: {mach.get('cpu_model')}, {mach.get('cores')} cores, "
         f"{int(mach.get('mem_total_kib', 0)) // 1024 // 1024 + 1} GiB, {mach.get('kernel')}; {mach.get('java')}. "
         f"Load average at start {mach.get('loadavg_at_start')}, at end {mach.get('loadavg_at_end')}; "
         f"{mach.get('busy_cores_before_start', '?')} cores busy in the 2 s before the start.")
L.append(f"Ringbroker {mach.get('ringbroker_git')} (binary sha256 {mach.get('ringbroker_sha256')}…), "
         f"`--flush os`; Kafka {mach.get('kafka_version')} KRaft single node (broker+controller), heap {cfg.get('kafka_heap')}, "
         "default flush settings (no fsync). One broker at a time on the same 2 cores as the client.")
L.append("")
L.append(f"Workload: {RECORDS:,} records × {RECORD_SIZE} B into one topic of {cfg['partitions']} partitions, acks=1, "
         f"enable.idempotence=false, `--throughput -1`; then {PASSES} full reads by partition assignment "
         "(no consumer group), each pass a fresh consumer from the beginning. MB = 2^20 bytes (as the tools print); "
         "GB in CPU s/GB = 10^9 bytes fetched (record batches as received by the consumer).")
L.append("")
L.append("| metric | Ringbroker | Kafka | Ringbroker / Kafka |")
L.append("|---|---:|---:|---:|")
L.append(f"| produce MB/s | {fmt(rp.get('mb_per_s'), 2)} | {fmt(kp.get('mb_per_s'), 2)} | {fr(ratios['produce_mb_per_s'])} |")
L.append(f"| produce records/s | {fmt(rp.get('records_per_s'), 0)} | {fmt(kp.get('records_per_s'), 0)} | "
         f"{fr(ratio(rp.get('records_per_s'), kp.get('records_per_s')))} |")
for k, name in (("avg_ms", "avg"), ("p50_ms", "p50"), ("p95_ms", "p95"), ("p99_ms", "p99"), ("p999_ms", "p99.9"), ("max_ms", "max")):
    L.append(f"| produce latency {name} (ms) | {fmt(rp.get(k))} | {fmt(kp.get(k))} | {fr(ratio(rp.get(k), kp.get(k)))} |")
L.append(f"| broker CPU s per GB produced | {fmt(rp.get('broker_cpu_s_per_gb'), 2)} | {fmt(kp.get('broker_cpu_s_per_gb'), 2)} | "
         f"{fr(ratio(rp.get('broker_cpu_s_per_gb'), kp.get('broker_cpu_s_per_gb')))} |")
L.append(f"| consume MB/s (mean of passes), Ringbroker sendfile | {fmt(rcs.get('mb_per_s'), 2)} | {fmt(kc.get('mb_per_s'), 2)} | "
         f"{fr(ratios['consume_mb_per_s_sendfile'])} |")
L.append(f"| consume MB/s (mean of passes), Ringbroker copy | {fmt(rcc.get('mb_per_s'), 2)} | {fmt(kc.get('mb_per_s'), 2)} | "
         f"{fr(ratios['consume_mb_per_s_copy'])} |")
L.append(f"| consume MB/s (best pass), Ringbroker sendfile | {fmt(rcs.get('mb_per_s_best'), 2)} | {fmt(kc.get('mb_per_s_best'), 2)} | "
         f"{fr(ratio(rcs.get('mb_per_s_best'), kc.get('mb_per_s_best')))} |")
L.append(f"| consume MB/s (best pass), Ringbroker copy | {fmt(rcc.get('mb_per_s_best'), 2)} | {fmt(kc.get('mb_per_s_best'), 2)} | "
         f"{fr(ratio(rcc.get('mb_per_s_best'), kc.get('mb_per_s_best')))} |")
L.append(f"| consume records/s, Ringbroker sendfile | {fmt(rcs.get('records_per_s'), 0)} | {fmt(kc.get('records_per_s'), 0)} | "
         f"{fr(ratio(rcs.get('records_per_s'), kc.get('records_per_s')))} |")
L.append(f"| broker CPU s per GB fetched, Ringbroker sendfile | {fmt(rcs.get('broker_cpu_s_per_gb'), 3)} | "
         f"{fmt(kc.get('broker_cpu_s_per_gb'), 3)} | {fr(ratios['consume_cpu_s_per_gb_sendfile'])} |")
L.append(f"| broker CPU s per GB fetched, Ringbroker copy | {fmt(rcc.get('broker_cpu_s_per_gb'), 3)} | "
         f"{fmt(kc.get('broker_cpu_s_per_gb'), 3)} | {fr(ratio(rcc.get('broker_cpu_s_per_gb'), kc.get('broker_cpu_s_per_gb')))} |")
L.append(f"| peak RSS MiB (VmHWM), produce + consume | {fmt(res['ringbroker']['peak_rss_mib_produce_and_sendfile_consume'], 0)} | "
         f"{fmt(res['kafka']['peak_rss_mib'], 0)} | {fr(ratios['peak_rss'])} |")
L.append(f"| peak RSS MiB, Ringbroker restarted for copy consume | {fmt(res['ringbroker']['peak_rss_mib_copy_consume'], 0)} | | |")
L.append(f"| data dir on disk MiB (du) | {fmt((res['ringbroker']['data_bytes'] or 0) / 2**20, 0)} | "
         f"{fmt((res['kafka']['data_bytes'] or 0) / 2**20, 0)} | |")
L.append("")
L.append(f"Ringbroker sendfile vs copy: {fmt(rcs.get('broker_cpu_s_per_gb'), 3)} vs {fmt(rcc.get('broker_cpu_s_per_gb'), 3)} "
         f"broker CPU s/GB fetched (sendfile/copy = {fr(res['sendfile_vs_copy_cpu'])}); "
         f"consume {fmt(rcs.get('mb_per_s'), 1)} vs {fmt(rcc.get('mb_per_s'), 1)} MB/s.")
L.append("")
L.append("## Consume passes")
L.append("")
L.append("| run | pass | MB/s | records/s | s | records read | longest gap s | broker CPU s | client CPU s | other CPU s |")
L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for label, c in (("ringbroker sendfile", rcs), ("ringbroker copy", rcc), ("kafka", kc)):
    tag = {"ringbroker sendfile": "rb-sendfile", "ringbroker copy": "rb-copy", "kafka": "kafka"}[label]
    for p in c.get("passes", []):
        o = noise.get(f"{tag}.consume.{p['pass']}", {})
        L.append(f"| {label} | {p['pass']} | {fmt(p.get('mb_per_s'), 1)} | {fmt(p.get('records_per_s'), 0)} | "
                 f"{fmt(p.get('elapsed_s'), 2)} | {fmt(p.get('records'))} | {fmt(p.get('max_gap_s'), 2)} | "
                 f"{fmt(p.get('broker_cpu_s'), 2)} | "
                 f"{fmt(p.get('client_cpu_s'), 2)} | {fmt(o.get('other_cpu_s'), 2)} |")
L.append("")
L.append("## Produce phase CPU")
L.append("")
L.append("| broker | wall s | broker CPU s | client CPU s | other processes' CPU s | steal s |")
L.append("|---|---:|---:|---:|---:|---:|")
for b, p in (("ringbroker", rp), ("kafka", kp)):
    o = noise.get(f"{'rb' if b == 'ringbroker' else 'kafka'}.produce", {})
    L.append(f"| {b} | {fmt(p.get('wall_s'), 1)} | {fmt(p.get('broker_cpu_s'), 2)} | {fmt(p.get('client_cpu_s'), 2)} | "
             f"{fmt(o.get('other_cpu_s'), 2)} | {fmt(o.get('steal_s'), 2)} |")
L.append("")
L.append("\"Other processes' CPU\" is the machine's busy time minus broker and client during the phase. It "
         "includes kernel work not charged to either process (page-cache writeback of the produced data, "
         "some softirq time), so a few tenths of a core during produce is normal; more than half a core means "
         "something else was running and the figures were disturbed. The consumer is CPU-bound on this "
         "2-core machine (its JVM uses most of both cores), so consume MB/s largely measures the client and "
         "the spare CPU the broker leaves it; broker CPU s/GB is the broker's own cost.")
L.append("")
L.append("## Final ProducerPerformance lines")
L.append("")
L.append("```")
L.append(f"ringbroker: {rp.get('final_line', '—')}")
L.append(f"kafka:      {kp.get('final_line', '—')}")
L.append("```")
L.append("")
L.append("## Problems seen")
L.append("")
L.extend([f"- {p}" for p in problems] or ["- none"])
L.append("")
L.append("## Commands")
L.append("")
L.append("```")
L.append(cfg.get("invocation", "bench/run.sh compare"))
L.append("")
L.append("# brokers")
L.append(cfg.get("ringbroker_cmd", ""))
L.append(cfg.get("kafka_cmd", ""))
L.append("# clients (client JVM heap " + cfg.get("client_heap", "?") + ")")
L.append(cfg.get("produce_cmd", ""))
L.append(cfg.get("consume_cmd", ""))
L.append("```")
L.append("")
L.append(f"Total run time of the measured part: {cfg.get('total_wall_s')} s. Logs and tool output: `{cfg.get('run_dir')}`.")
L.append("")
with open(OUT + ".md", "w") as f:
    f.write("\n".join(L))
