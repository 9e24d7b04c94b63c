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
#   2. it starts again with the cleaner on (`cleaning`: at once, unthrottled unless
#      CLEANER_IO_LIMIT bytes/s is set) or off (`idle`), and ringbench measures another topic,
#      `live` (4 partitions, on the same shard), while the cleaner works through `dirty`:
#        (a) max produce throughput, acks=1, DURATION s after WARMUP s;
#        (b) publish latency at RATE records/s (p50, p99).
#   After a `cleaning` run the broker is left to finish the cleaning, and its metrics give
#   the cleaning throughput: bytes of old segments cleaned per second of cleaning time.
# A run whose cleaning finished before its window ended is flagged: the cleaner's effect was
# then measured over less than the whole window (raise FILL_RECORDS).
#
# Writes bench/results/<date>-compaction.md (RESULTS_DIR: another directory).
#
# Environment: ROUNDS [3] DURATION [10] WARMUP [2] FILL_RECORDS [2000000] KEYS [20000]
#   RATE [20000] PRODUCERS [4] CLEANER_IO_LIMIT [0] RB_PORT [19611] CLIENT_CPUS [1]
# shellcheck shell=bash
ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-10}"
WARMUP="${WARMUP:-2}"
FILL_RECORDS="${FILL_RECORDS:-2000000}"
KEYS="${KEYS:-20000}"
RATE="${RATE:-20000}"
PRODUCERS="${PRODUCERS:-4}"
CLEANER_IO_LIMIT="${CLEANER_IO_LIMIT:-0}"
ADDR="127.0.0.1:${RB_PORT:-19611}"
export CLIENT_CPUS="${CLIENT_CPUS:-1}"

bench_init compaction
require_free_ports "${ADDR##*:}"
build_release
rb_private_copy

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

run() { # CONFIG WORKLOAD ringbench-args...
    local config="$1" workload="$2" name="$1-$2-r$ROUND"
    shift 2
    fill "$name"
    local cleaner=(--log-cleaner-enable false)
    if [[ "$config" == cleaning ]]; then
        cleaner=(--log-cleaner-backoff-ms 100 --log-cleaner-io-max-bytes-per-second "$CLEANER_IO_LIMIT")
    fi
    KEEP_DATA=1 rb_start "$name" "$RB" --cpus 0 --flush os --listen "$ADDR" "${cleaner[@]}"
    local shard_before
    shard_before="$(thread_cpu_ns "$RB_PID" shard-0)"
    BENCH_BROKER_PID="$RB_PID" ringbench_run "$name" "$ADDR" --topic live --partitions 4 --producers "$PRODUCERS" \
        --consumers 0 --acks 1 "$@"
    echo $(($(thread_cpu_ns "$RB_PID" shard-0) - shard_before)) >"$RUN/$name.shard-cpu-ns"
    if [[ "$config" == cleaning ]]; then
        if [[ "$(rb_metric ringbroker_cleaner_runs_total)" != 0 ]]; then echo early >"$RUN/$name.early"; fi
        local deadline=$((SECONDS + 300))
        until [[ "$(rb_metric ringbroker_cleaner_runs_total)" != 0 ]] || ((SECONDS >= deadline)); do sleep 0.5; done
        printf '{"bytes_read": %s, "bytes_written": %s, "seconds": %s, "cpu_ns": %s}\n' \
            "$(rb_metric ringbroker_cleaner_bytes_read_total)" "$(rb_metric ringbroker_cleaner_bytes_written_total)" \
            "$(rb_metric ringbroker_cleaner_time_seconds_total)" "$(thread_cpu_ns "$RB_PID" shard-0-cleaner)" \
            >"$RUN/$name.cleaner.json"
    fi
    rb_stop "$name"
}

for ((ROUND = 1; ROUND <= ROUNDS; ROUND++)); do
    for config in idle cleaning; do
        run "$config" max
        run "$config" lat --rate "$RATE"
    done
done

OUT="$RESULTS/$(date -u +%Y-%m-%d)-compaction"
mkdir -p "$RESULTS"
python3 - "$RUN" "$ROUNDS" "$OUT.md" "bench/run.sh compaction ROUNDS=$ROUNDS DURATION=$DURATION WARMUP=$WARMUP FILL_RECORDS=$FILL_RECORDS KEYS=$KEYS RATE=$RATE PRODUCERS=$PRODUCERS CLEANER_IO_LIMIT=$CLEANER_IO_LIMIT" <<'EOF'
import json, os, statistics, sys
run, rounds, out, command = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def rep(name):
    return json.load(open(os.path.join(run, name, "report.json")))
rows, early, speeds = [], [], []
figures = [
    ("(a) max produce records/s, other partitions", "max", lambda r: r["publish_rate"]),
    ("(b) publish latency p50 ms at the fixed rate", "lat", lambda r: r["publish_latency_ms"]["p50"]),
    ("(b) publish latency p99 ms at the fixed rate", "lat", lambda r: r["publish_latency_ms"]["p99"]),
]
for label, workload, get in figures:
    idle = [get(rep(f"idle-{workload}-r{i}")) for i in range(1, rounds + 1)]
    busy = [get(rep(f"cleaning-{workload}-r{i}")) for i in range(1, rounds + 1)]
    ratios = [b / a for a, b in zip(idle, busy) if a]
    rows.append((label, statistics.median(busy), statistics.median(idle), statistics.median(ratios), min(ratios), max(ratios)))
def shard_cpu_per_record(name):
    r = rep(name)
    ns = int(open(os.path.join(run, name + ".shard-cpu-ns")).read())
    return ns / 1e3 / r["records_acked"] if r["records_acked"] else None
cpu_rows = []
for w in ("max", "lat"):
    idle = [shard_cpu_per_record(f"idle-{w}-r{i}") for i in range(1, rounds + 1)]
    busy = [shard_cpu_per_record(f"cleaning-{w}-r{i}") for i in range(1, rounds + 1)]
    ratios = [b / a for a, b in zip(idle, busy) if a and b]
    if ratios:
        cpu_rows.append((w, statistics.median(busy), statistics.median(idle), statistics.median(ratios), min(ratios), max(ratios)))
cleaner_cpu = []
for i in range(1, rounds + 1):
    for w in ("max", "lat"):
        name = f"cleaning-{w}-r{i}"
        if os.path.exists(os.path.join(run, name + ".early")):
            early.append(name)
        c = json.load(open(os.path.join(run, name + ".cleaner.json")))
        if c["seconds"]:
            speeds.append(c["bytes_read"] / c["seconds"] / 1e6)
        if c["bytes_read"] and c.get("cpu_ns"):
            cleaner_cpu.append(c["cpu_ns"] / 1e9 / (c["bytes_read"] / 1e9))
with open(out, "w") as f:
    f.write("# the log cleaner: throughput, and its cost to other partitions on the same shard\n\n")
    f.write(f"Command: `{command}`. Run directory: `{run}`.\n\n")
    f.write("| figure | cleaner running | cleaner off | running / off (median of round ratios) | range |\n|---|---:|---:|---:|---:|\n")
    for label, busy, idle, ratio, lo, hi in rows:
        f.write(f"| {label} | {busy:,.2f} | {idle:,.2f} | {ratio:.3f}× | {lo:.3f}–{hi:.3f}× |\n")
    f.write("\nThe shard thread's CPU time per record published to `live` (µs: its schedstat over the whole ringbench run, over the records acknowledged in it):\n\n")
    f.write("| workload | cleaner running | cleaner off | running / off | range |\n|---|---:|---:|---:|---:|\n")
    for w, busy, idle, ratio, lo, hi in cpu_rows:
        f.write(f"| {w} | {busy:.2f} | {idle:.2f} | {ratio:.3f}× | {lo:.3f}–{hi:.3f}× |\n")
    if cleaner_cpu:
        f.write(f"\nThe cleaner thread's CPU time per GB of old segments read: median {statistics.median(cleaner_cpu):.2f} s "
                f"({min(cleaner_cpu):.2f}–{max(cleaner_cpu):.2f}).\n")
    f.write(f"\nCleaning throughput (bytes of old segments cleaned per second of cleaning, one shard): "
            f"median {statistics.median(speeds):.0f} MB/s over {len(speeds)} cleanings "
            f"({min(speeds):.0f}–{max(speeds):.0f}).\n")
    if early:
        f.write(f"\nWARNING: the cleaning finished before the window ended in {', '.join(early)}: raise FILL_RECORDS.\n")
print(open(out).read())
EOF
log "wrote $OUT.md"
