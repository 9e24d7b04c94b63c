# A/B of two Ringbroker builds as three-broker clusters, BASE=<rev> against this tree: RF 3, acks=all
#
#   bench/run.sh cluster-ab BASE=<rev>          e.g.  bench/run.sh cluster-ab BASE=main ROUNDS=4
#   bench/run.sh cluster-ab BASE_BIN=<binary>   a release binary built before, instead of BASE
#
# Builds BASE (release) in a temporary git worktree as `bench/run.sh ab` does, and this tree,
# then starts each as the three brokers of `bench/run.sh cluster` (one shard each, --cpus from
# RB_NODE_CPUS, --pin false, --flush RB_FLUSH), afresh on empty data directories, alternating
# `before` (BASE) and `after` (this tree) in each of ROUNDS rounds, so that slow drift of a
# shared machine hits both alike. Kafka is not run: for what a change to the replicated write
# path is worth against the build before it (`bench/run.sh cluster` compares with Kafka).
# Workloads, ringbench on topics of PARTITIONS partitions × 3 replicas (1 KiB records, 16 a
# batch, PRODUCERS producers, acks=all, MAX_IN_FLIGHT requests in flight per connection):
#   lat  RATE records/s: publish latency p50, p99, p99.9
#   max  max produce throughput, DURATION s after WARMUP s
# lat runs first, on the fresh cluster: right after a max run this machine's virtual disk
# flushes slowly now and then, and the fixed-rate run would measure that
# (bench/results/2026-12-06-cluster.md).
# both with the three brokers' CPU s per GB produced. Prints a markdown table: medians of both
# builds, after/before (the ratio of the medians, and the range of the per-round ratios).
# Every run's report.json and every broker's log stay in the run dir it names.
#
# Environment: BASE [HEAD] BASE_BIN ROUNDS [3] DURATION [15] WARMUP [3] RATE [28000]
#   PRODUCERS [4] PARTITIONS [6] MAX_IN_FLIGHT [5] RB_FLUSH [always] RB_NODE_CPUS RB_FLAGS
#   RB_PORT [19961] WAIT_QUIET [0] SKIP_BUILD [0]
# shellcheck shell=bash
BASE="${BASE:-HEAD}"
ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-15}"
WARMUP="${WARMUP:-3}"
RATE="${RATE:-28000}"
PRODUCERS="${PRODUCERS:-4}"
PARTITIONS="${PARTITIONS:-6}"
MAX_IN_FLIGHT="${MAX_IN_FLIGHT:-5}"
RB_FLUSH="${RB_FLUSH:-always}"
RB_PORT="${RB_PORT:-19961}"
read -r -a RB_EXTRA <<<"${RB_FLAGS:-}"
RB_ADDR="127.0.0.1:$RB_PORT"

bench_init cluster-ab
trap cluster_cleanup EXIT
# shellcheck disable=SC2046 # one port a word
require_free_ports $(cluster_ports)
build_release
rb_private_copy
RB_AFTER="$RB"
if [[ -n "${BASE_BIN:-}" ]]; then
    cp "$BASE_BIN" "$RUN/ringbroker-base"
    RB_BASE="$RUN/ringbroker-base"
    log "before: $BASE_BIN (sha256 $(sha256sum "$RB_BASE" | cut -c1-16))"
else
    rb_build_base "$BASE"
    log "before: $BASE ($(git -C "$ROOT" rev-parse --short "$BASE^{commit}"), sha256 $(sha256sum "$RB_BASE" | cut -c1-16))"
fi
log "after:  this tree ($(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD -- src Cargo.toml Cargo.lock || echo '+dirty'), sha256 $(sha256sum "$RB_AFTER" | cut -c1-16))"
wait_quiet "${WAIT_QUIET:-0}"

for ((ROUND = 1; ROUND <= ROUNDS; ROUND++)); do
    OUT_DIR="$RUN/round-$ROUND"
    mkdir -p "$OUT_DIR"
    for build in before after; do
        if [[ $build == before ]]; then RB="$RB_BASE"; else RB="$RB_AFTER"; fi
        rbc_start "$build" "${RB_EXTRA[@]}" --flush "$RB_FLUSH"
        bs="$(rbc_bootstrap)"
        cluster_topic "$bs" max "$PARTITIONS" 3
        cluster_topic "$bs" lat "$PARTITIONS" 3
        pids="$(pids_csv "${RBC_PIDS[@]}")"
        for w in lat max; do
            settle_disk
            rate=()
            if [[ $w == lat ]]; then rate=(--rate "$RATE"); fi
            log "round $ROUND/$ROUNDS: $build $w"
            BENCH_BROKER_PID="$pids" ringbench_run "$build-$w" "$RB_ADDR" --topic "$w" --partitions "$PARTITIONS" \
                --replication-factor 3 --producers "$PRODUCERS" --consumers 0 --acks -1 \
                --max-in-flight "$MAX_IN_FLIGHT" "${rate[@]}"
        done
        rbc_stop "$build"
    done
done

python3 - "$RUN" "$ROUNDS" <<'EOF' | tee "$RUN/table.md"
import json, statistics, sys

run, rounds = sys.argv[1], int(sys.argv[2])


def value(r, build, w, path):
    with open(f"{run}/round-{r}/{build}-{w}/report.json") as f:
        v = json.load(f)
    for k in path:
        v = v[k]
    return v


rows = [
    ("max", ["publish_rate"], "max produce, records/s"),
    ("max", ["publish_latency_ms", "p99"], "max produce, publish p99 ms"),
    ("max", ["broker_cpu_s_per_gb"], "max produce, broker CPU s per GB (3 brokers)"),
    ("lat", ["publish_rate"], "fixed rate, records/s acknowledged"),
    ("lat", ["publish_latency_ms", "p50"], "fixed rate, publish p50 ms"),
    ("lat", ["publish_latency_ms", "p99"], "fixed rate, publish p99 ms"),
    ("lat", ["publish_latency_ms", "p99_9"], "fixed rate, publish p99.9 ms"),
    ("lat", ["broker_cpu_s_per_gb"], "fixed rate, broker CPU s per GB (3 brokers)"),
]
print("| figure | before | after | after/before (rounds) |")
print("|---|---:|---:|---:|")
for w, path, label in rows:
    b = [value(r, "before", w, path) for r in range(1, rounds + 1)]
    a = [value(r, "after", w, path) for r in range(1, rounds + 1)]
    if None in a or None in b:
        continue
    per = sorted(x / y for x, y in zip(a, b))
    mb, ma = statistics.median(b), statistics.median(a)
    f = ",.0f" if "records/s" in label else ",.2f"
    print(f"| {label} | {mb:{f}} | {ma:{f}} | {ma / mb:.2f}× ({per[0]:.2f}–{per[-1]:.2f}) |")
EOF
log "table: $RUN/table.md"
