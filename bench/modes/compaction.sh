# the log cleaner: its throughput, and what a running cleaner costs other partitions
#
#   bench/run.sh compaction
#   bench/run.sh compaction ROUNDS=1 FILL_RECORDS=500000 DURATION=5   # a short trial
#
# One broker with one shard (--cpus 0; its cleaner thread is on the same CPU, at nice 19),
# ringbench on CLIENT_CPUS [1], --flush os. Each round runs, for each workload,
# the configuration `idle` then `cleaning`:
#   1. a fresh broker with the cleaner off fills topic `dirty` (compacted, one partition,
#      64 MiB segments, min.cleanable.dirty.ratio 0.01) with FILL_RECORDS records of 1 KiB over
#      KEYS keys, then stops;
#   2. it starts again with the cleaner on (`cleaning`: at once, held to the broker's default
#      `log_cleaner_io_max_bytes_per_second` unless CLEANER_IO_LIMIT bytes/s is set; 0: no
#      limit) or off (`idle`), and ringbench measures another topic,
#      `live` (4 partitions, on the same shard), while the cleaner works through `dirty`:
#        (a) max produce throughput, acks=1, DURATION s after WARMUP s;
#        (b) publish latency at RATE records/s (p50, p99).
#   After a `cleaning` run the broker is left to finish the cleaning, and its metrics give
#   the cleaning throughput: bytes of old segments cleaned per second of cleaning time.
# A run whose cleaning finished before its window ended is flagged: the cleaner's effect was
# then measured over less than the whole window (raise FILL_RECORDS).
#
# BASE=<rev> (or BASE_BIN, a release binary of it built before) adds a third configuration to
# each round, `base`: that build with its cleaner on, measured the same way, so that a change
# to the cleaner is compared with the build before it side by side in one run. Only this
# tree's broker fills `dirty` (both read the same log format). BASE_CLEANER_IO_LIMIT sets
# `base`'s limit apart from CLEANER_IO_LIMIT: with BASE_BIN the same binary, it compares two
# limits of one build.
#
# On a guest whose kernel reports free memory to its host (virtio-balloon free page
# reporting: /sys/module/page_reporting), each run also records how much freed memory went back
# to the host during it: the next page-cache page written into such memory is faulted in
# again by the host, which can cost a write far more than the copy itself.
#
# Writes bench/results/<date>-compaction.md (RESULTS_DIR: another directory).
#
# Environment: ROUNDS [3] DURATION [10] WARMUP [2] FILL_RECORDS [2000000] KEYS [20000]
#   RATE [20000] PRODUCERS [4] CLEANER_IO_LIMIT [the broker's default] RB_PORT [19611]
#   CLIENT_CPUS [1] BASE [none] BASE_BIN BASE_CLEANER_IO_LIMIT [CLEANER_IO_LIMIT]
# shellcheck shell=bash
ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-10}"
WARMUP="${WARMUP:-2}"
FILL_RECORDS="${FILL_RECORDS:-2000000}"
KEYS="${KEYS:-20000}"
RATE="${RATE:-20000}"
PRODUCERS="${PRODUCERS:-4}"
CLEANER_IO_LIMIT="${CLEANER_IO_LIMIT:-}"
BASE_CLEANER_IO_LIMIT="${BASE_CLEANER_IO_LIMIT:-$CLEANER_IO_LIMIT}"
ADDR="127.0.0.1:${RB_PORT:-19611}"
export CLIENT_CPUS="${CLIENT_CPUS:-1}"

bench_init compaction
require_free_ports "${ADDR##*:}"
build_release
rb_private_copy
CONFIGS=(idle cleaning)
if [[ -n "${BASE_BIN:-}" ]]; then
    cp "$BASE_BIN" "$RUN/ringbroker-base"
    RB_BASE="$RUN/ringbroker-base"
elif [[ -n "${BASE:-}" ]]; then
    rb_build_base "$BASE"
fi
if [[ -n "${RB_BASE:-}" ]]; then
    CONFIGS+=(base)
    log "base: ${BASE:-$BASE_BIN}, sha256 $(sha256sum "$RB_BASE" | cut -c1-16)"
fi

# A broker whose `dirty` topic holds FILL_RECORDS records over KEYS keys, none cleaned yet.
fill() { # LABEL
    rb_start "$1-fill" "$RB" --cpus 0 --flush os --listen "$ADDR" --log-cleaner-enable false
    "$RB" topic create dirty -p 1 -c cleanup.policy=compact -c segment.bytes=67108864 \
        -c min.cleanable.dirty.ratio=0.01 -b "$ADDR" >/dev/null
    "$RB" topic create live -p 4 -b "$ADDR" >/dev/null
    pin "$CLIENT_CPUS"
    "${PIN[@]}" "$BENCH" --broker "$ADDR" --topic dirty --partitions 1 --producers 2 --consumers 0 --acks 1 \
        --key-size 16 --key-space "$KEYS" --records "$FILL_RECORDS" --duration 600 --quiet \
        --out "$RUN/$1-fill" >"$RUN/$1-fill.txt"
    rb_stop "$1-fill"
}

REPORTED_KIB=/sys/module/page_reporting/parameters/reported_kib
reported_kib() { if [[ -r "$REPORTED_KIB" ]]; then cat "$REPORTED_KIB"; fi; }

run() { # CONFIG WORKLOAD ringbench-args...
    local config="$1" workload="$2" name="$1-$2-r$ROUND"
    shift 2
    fill "$name"
    local cleaner=(--log-cleaner-enable false) bin="$RB" limit="$CLEANER_IO_LIMIT"
    if [[ "$config" == base ]]; then bin="$RB_BASE" limit="$BASE_CLEANER_IO_LIMIT"; fi
    if [[ "$config" != idle ]]; then
        cleaner=(--log-cleaner-backoff-ms 100 ${limit:+--log-cleaner-io-max-bytes-per-second "$limit"})
    fi
    KEEP_DATA=1 rb_start "$name" "$bin" --cpus 0 --flush os --listen "$ADDR" "${cleaner[@]}"
    local shard_before reported_before
    shard_before="$(thread_schedstat "$RB_PID" "shard-0-?")"
    reported_before="$(reported_kib)"
    BENCH_BROKER_PID="$RB_PID" ringbench_run "$name" "$ADDR" --topic live --partitions 4 --producers "$PRODUCERS" \
        --consumers 0 --acks 1 "$@"
    echo "$shard_before $(thread_schedstat "$RB_PID" "shard-0-?")" >"$RUN/$name.shard-schedstat"
    if [[ -n "$reported_before" ]]; then echo $(($(reported_kib) - reported_before)) >"$RUN/$name.reported-kib"; fi
    if [[ "$config" != idle ]]; then
        if [[ "$(rb_metric ringbroker_cleaner_runs_total)" != 0 ]]; then echo early >"$RUN/$name.early"; fi
        local deadline=$((SECONDS + 300))
        until [[ "$(rb_metric ringbroker_cleaner_runs_total)" != 0 ]] || ((SECONDS >= deadline)); do sleep 0.5; done
        printf '{"bytes_read": %s, "bytes_written": %s, "seconds": %s, "cpu_ns": %s}\n' \
            "$(rb_metric ringbroker_cleaner_bytes_read_total)" "$(rb_metric ringbroker_cleaner_bytes_written_total)" \
            "$(rb_metric ringbroker_cleaner_time_seconds_total)" "$(thread_cpu_ns "$RB_PID" "shard-0-*clean*")" \
            >"$RUN/$name.cleaner.json"
    fi
    rb_stop "$name"
}

for ((ROUND = 1; ROUND <= ROUNDS; ROUND++)); do
    for config in "${CONFIGS[@]}"; do
        run "$config" max
        run "$config" lat --rate "$RATE"
    done
done

OUT="$RESULTS/$(date -u +%Y-%m-%d)-compaction"
mkdir -p "$RESULTS"
python3 - "$RUN" "$ROUNDS" "$OUT.md" "bench/run.sh compaction ROUNDS=$ROUNDS DURATION=$DURATION WARMUP=$WARMUP FILL_RECORDS=$FILL_RECORDS KEYS=$KEYS RATE=$RATE PRODUCERS=$PRODUCERS${CLEANER_IO_LIMIT:+ CLEANER_IO_LIMIT=$CLEANER_IO_LIMIT}${BASE:+ BASE=$BASE}${BASE_BIN:+ BASE_BIN=$BASE_BIN}${BASE_CLEANER_IO_LIMIT:+ BASE_CLEANER_IO_LIMIT=$BASE_CLEANER_IO_LIMIT}" "${CONFIGS[@]:1}" <<'EOF'
import json, os, statistics, sys
run, rounds, out, command, busy_configs = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
def rep(name):
    r = json.load(open(os.path.join(run, name, "report.json")))
    r["_name"] = name
    return r
NAMES = {"cleaning": "cleaner running", "base": "base, cleaner running"}
def per_round(config, workload, get):
    return [get(rep(f"{config}-{workload}-r{i}")) for i in range(1, rounds + 1)]
def ratio_cells(busy, idle):
    ratios = [b / a for a, b in zip(idle, busy) if a and b]
    return f"{statistics.median(ratios):.3f}× ({min(ratios):.3f}–{max(ratios):.3f})" if ratios else "—"
def table(f, first, rows_of, fmt):
    # One row per figure: each configuration's median, then each running configuration's
    # median of per-round ratios to the cleaner-off run of the same round, with its range.
    head = [first] + [NAMES[c] for c in busy_configs] + ["cleaner off"] + [f"{NAMES[c]} / off" for c in busy_configs]
    f.write("| " + " | ".join(head) + " |\n|" + "---|" + "---:|" * (len(head) - 1) + "\n")
    for label, workload, get in rows_of:
        idle = per_round("idle", workload, get)
        busy = {c: per_round(c, workload, get) for c in busy_configs}
        cells = [fmt(statistics.median([v for v in busy[c] if v is not None])) for c in busy_configs]
        cells.append(fmt(statistics.median([v for v in idle if v is not None])))
        cells += [ratio_cells(busy[c], idle) for c in busy_configs]
        f.write(f"| {label} | " + " | ".join(cells) + " |\n")
figures = [
    ("(a) max produce records/s, other partitions", "max", lambda r: r["publish_rate"]),
    ("(b) publish latency p50 ms at the fixed rate", "lat", lambda r: r["publish_latency_ms"]["p50"]),
    ("(b) publish latency p99 ms at the fixed rate", "lat", lambda r: r["publish_latency_ms"]["p99"]),
]
def shard_schedstat(r):
    # The shard thread's schedstat over the ringbench run: ns on its CPU, ns runnable but
    # waiting for it, times it ran.
    v = [int(x) for x in open(os.path.join(run, r["_name"] + ".shard-schedstat")).read().split()]
    return [b - a for a, b in zip(v[:3], v[3:])]
def shard_cpu_per_record(r):
    ns = shard_schedstat(r)[0]
    return ns / 1e3 / r["records_acked"] if r["records_acked"] else None
def shard_wait_per_run(r):
    _, wait, runs = shard_schedstat(r)
    return wait / 1e3 / runs if runs else None
def reported_mb(r):
    path = os.path.join(run, r["_name"] + ".reported-kib")
    return int(open(path).read()) / 1e3 if os.path.exists(path) else None
reporting = os.path.exists(os.path.join(run, f"idle-max-r1.reported-kib"))
early, cleaner = [], {c: {"speeds": [], "cpu": []} for c in busy_configs}
for c in busy_configs:
    for i in range(1, rounds + 1):
        for w in ("max", "lat"):
            name = f"{c}-{w}-r{i}"
            if os.path.exists(os.path.join(run, name + ".early")):
                early.append(name)
            j = json.load(open(os.path.join(run, name + ".cleaner.json")))
            if j["seconds"]:
                cleaner[c]["speeds"].append(j["bytes_read"] / j["seconds"] / 1e6)
            if j["bytes_read"] and j.get("cpu_ns"):
                cleaner[c]["cpu"].append(j["cpu_ns"] / 1e9 / (j["bytes_read"] / 1e9))
def spread(xs, fmt):
    return f"median {fmt(statistics.median(xs))} ({fmt(min(xs))}–{fmt(max(xs))}, {len(xs)} cleanings)" if xs else "—"
with open(out, "w") as f:
    f.write("# the log cleaner: throughput, and its cost to other partitions on the same shard\n\n")
    f.write(f"Command: `{command}`. Run directory: `{run}`.\n\n")
    f.write("Ratios: the median of the per-round ratios to the cleaner-off run of the same round (range in brackets).\n\n")
    table(f, "figure", figures, lambda v: f"{v:,.2f}")
    f.write("\nThe shard thread's CPU time per record published to `live` (µs: its schedstat over the whole ringbench run, over the records acknowledged in it):\n\n")
    table(f, "workload", [(w, w, shard_cpu_per_record) for w in ("max", "lat")], lambda v: f"{v:.2f}")
    f.write("\nThe shard thread's wait for its CPU each time it ran (µs: its schedstat's run-queue time over the times it ran, over the ringbench run): what a cleaner on its core holds it up by.\n\n")
    table(f, "workload", [(w, w, shard_wait_per_run) for w in ("max", "lat")], lambda v: f"{v:.1f}")
    if reporting:
        f.write("\nFreed guest memory the kernel reported to the host during the ringbench run (MB, `page_reporting` `reported_kib`): page-cache pages written there next are faulted in again by the host.\n\n")
        table(f, "workload", [(w, w, reported_mb) for w in ("max", "lat")], lambda v: f"{v:,.0f}")
    f.write("\n")
    for c in busy_configs:
        f.write(f"- {NAMES[c]}: cleaner thread CPU per GB of old segments read "
                f"{spread(cleaner[c]['cpu'], lambda v: f'{v:.2f} s')}; cleaning throughput (old segments "
                f"per second of cleaning, one shard) {spread(cleaner[c]['speeds'], lambda v: f'{v:.0f} MB/s')}.\n")
    if early:
        f.write(f"\nWARNING: the cleaning finished before the window ended in {', '.join(early)}: raise FILL_RECORDS.\n")
print(open(out).read())
EOF
log "wrote $OUT.md"
