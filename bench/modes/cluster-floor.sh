# Where a three-broker cluster's publish latency goes at fixed rates: the disk's requests per batch
#
#   bench/run.sh cluster-floor                       RATES="500 8600" by default
#   bench/run.sh cluster-floor RATES="500 4000 8600" TRACE=1
#
# Starts the three brokers of `bench/run.sh cluster` afresh for each rate in RATES (one shard
# each, --cpus from RB_NODE_CPUS, --pin false, --flush RB_FLUSH), makes a topic of PARTITIONS
# partitions × 3 replicas, and runs ringbench at that rate for DURATION s after WARMUP s (1 KiB
# records, 16 a batch, PRODUCERS producers, acks=all). Besides publish p50/p99 it reads what the
# data directories' block device did meanwhile (/sys/class/block/DEV/stat): its writes and
# flushes per batch acknowledged and how busy it was; and from the brokers' metrics the mean
# time of their log syncs (`ringbroker_fsync_duration_seconds`, a follower's O_DSYNC write
# included) and of a Produce on its leader. A latency that stays put as the rate falls and the
# disk idles is the floor of the write path: the syncs each batch waits for, in turn.
#
# TRACE=1 also records the device's requests for TRACE_S s early in each measured window (perf,
# block:block_rq_issue) and counts them by kind and size: REQ_META writes of 4 KiB are inode
# blocks, `FF` flushes.
#
# Environment: RATES ["500 8600"] DURATION [15] WARMUP [3] PRODUCERS [4] PARTITIONS [6]
#   MAX_IN_FLIGHT [5] RB_FLUSH [always] RB_NODE_CPUS RB_FLAGS RB_PORT [19961] TRACE [0]
#   TRACE_S [3] SKIP_BUILD [0]
# shellcheck shell=bash
RATES="${RATES:-500 8600}"
DURATION="${DURATION:-15}"
WARMUP="${WARMUP:-3}"
PRODUCERS="${PRODUCERS:-4}"
PARTITIONS="${PARTITIONS:-6}"
MAX_IN_FLIGHT="${MAX_IN_FLIGHT:-5}"
RB_FLUSH="${RB_FLUSH:-always}"
RB_PORT="${RB_PORT:-19961}"
TRACE="${TRACE:-0}"
TRACE_S="${TRACE_S:-3}"
read -r -a RB_EXTRA <<<"${RB_FLAGS:-}"

bench_init cluster-floor
trap cluster_cleanup EXIT
# shellcheck disable=SC2046 # one port a word
require_free_ports $(cluster_ports)
build_release
rb_private_copy
mkdir -p "$RB_DATA"
DEV="$(disk_of "$RB_DATA")"
if [[ -z "$DEV" ]]; then
    log "the data directory $RB_DATA is on no block device this mode can read (/sys/class/block)"
    exit 1
fi
if ((TRACE)) && ! command -v perf >/dev/null; then
    log "TRACE=1 needs perf"
    exit 1
fi
log "data directories on /dev/$DEV; rates: $RATES"

for rate in $RATES; do
    OUT_DIR="$RUN/rate-$rate"
    mkdir -p "$OUT_DIR"
    rbc_start "r$rate" "${RB_EXTRA[@]}" --flush "$RB_FLUSH"
    bs="$(rbc_bootstrap)"
    cluster_topic "$bs" floor "$PARTITIONS" 3
    settle_disk
    cp "/sys/class/block/$DEV/stat" "$OUT_DIR/disk-before"
    date +%s.%N >"$OUT_DIR/t-before"
    if ((TRACE)); then
        (
            sleep $((WARMUP + 1))
            perf record -q -o "$OUT_DIR/blk.data" -e block:block_rq_issue -a -- sleep "$TRACE_S" 2>/dev/null
        ) &
        BG_PIDS+=($!)
    fi
    log "rate $rate records/s"
    BENCH_BROKER_PID="$(pids_csv "${RBC_PIDS[@]}")" ringbench_run bench "127.0.0.1:$RB_PORT" --topic floor \
        --partitions "$PARTITIONS" --replication-factor 3 --producers "$PRODUCERS" --consumers 0 --acks -1 \
        --max-in-flight "$MAX_IN_FLIGHT" --rate "$rate"
    date +%s.%N >"$OUT_DIR/t-after"
    cp "/sys/class/block/$DEV/stat" "$OUT_DIR/disk-after"
    for i in 1 2 3; do
        python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' \
            "http://127.0.0.1:$((RB_PORT + 5 + i))/metrics" >"$OUT_DIR/metrics-$i" || log "node $i: no metrics"
    done
    if ((TRACE)); then
        wait "${BG_PIDS[@]}" 2>/dev/null || true
        BG_PIDS=()
        perf script -i "$OUT_DIR/blk.data" 2>/dev/null | awk -v s="$TRACE_S" '
            { for (i = 1; i < NF; i++) if ($i ~ /^[RWDFSMNE]+$/ && $(i + 1) ~ /^[0-9]+$/) {
                  size = $(i + 1) >= 131072 ? ">= 128 KiB" : $(i + 1) " B"
                  n[$i " " size]++
                  break
              } }
            END { for (k in n) if (n[k] >= s) printf "%8.0f/s  %s\n", n[k] / s, k }' | sort -rn >"$OUT_DIR/requests.txt"
    fi
    rbc_stop "r$rate"
done

python3 - "$RUN" "$RATES" <<'EOF' | tee "$RUN/table.md"
import json, re, sys

run, rates = sys.argv[1], sys.argv[2].split()


def stat(path):
    return [int(x) for x in open(path).read().split()]


def metric_mean(d, name, label=""):
    s = c = 0.0
    for i in (1, 2, 3):
        try:
            text = open(f"{d}/metrics-{i}").read()
        except OSError:
            continue
        for line in text.splitlines():
            m = re.match(rf"{name}_(sum|count)(\{{[^}}]*\}})? (\S+)", line)
            if m and label in (m.group(2) or ""):
                if m.group(1) == "sum":
                    s += float(m.group(3))
                else:
                    c += float(m.group(3))
    return s / c * 1e3 if c else None


print("| rate, records/s | publish p50 ms | p99 ms | disk busy | device writes per batch | flushes per batch | MB written per MB acked | log sync mean ms | Produce on its leader, mean ms |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for rate in rates:
    d = f"{run}/rate-{rate}"
    r = json.load(open(f"{d}/bench/report.json"))
    a, b = stat(f"{d}/disk-before"), stat(f"{d}/disk-after")
    secs = float(open(f"{d}/t-after").read()) - float(open(f"{d}/t-before").read())
    delta = [y - x for x, y in zip(a, b)]
    # /sys/class/block/DEV/stat: [4] writes, [6] sectors written, [9] ms busy, [15] flushes
    # The device's counts cover the whole ringbench run, warm-up included: so do these.
    batches = r["records_acked"] / r["batch_records"]
    acked_mb = r["records_acked"] * r["record_size"] / 1e6
    lat = r["publish_latency_ms"]
    sync = metric_mean(d, "ringbroker_fsync_duration_seconds")
    produce = metric_mean(d, "ringbroker_request_total_time_seconds", 'api="Produce"')
    flushes = delta[15] / batches if len(delta) > 15 else float("nan")
    fmt = lambda v: "–" if v is None else f"{v:.2f}"
    print(f"| {int(rate):,} | {lat['p50']:.2f} | {lat['p99']:.2f} | {delta[9] / 10 / secs:.0f}% | {delta[4] / batches:.2f} "
          f"| {flushes:.2f} | {delta[6] * 512 / 1e6 / acked_mb:.2f} | {fmt(sync)} | {fmt(produce)} |")
EOF
for rate in $RATES; do
    if [[ -s "$RUN/rate-$rate/requests.txt" ]]; then
        echo
        echo "device requests at $rate records/s (per second; kind and size):"
        cat "$RUN/rate-$rate/requests.txt"
    fi
done | tee -a "$RUN/table.md"
log "table: $RUN/table.md"
