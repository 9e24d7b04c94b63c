#!/usr/bin/env bash
# Ringbroker and Apache Kafka side by side with ringbench, one broker at a time on this
# machine, in one run of ROUNDS rounds (each round runs every workload on both brokers, so
# slow drift of a shared machine hits both alike). Workloads (1 KiB records, 6 partitions):
#   a  max produce throughput, acks=1, no fsync on either side
#   b  fixed rate at 50% of Kafka's (a) in the same round: publish latency percentiles
#   c  acks=all with fsync on both sides (Kafka log.flush.interval.messages=1, Ringbroker --flush always)
#   d  consume throughput of a topic pre-filled with D_RECORDS records, read from the beginning
#      again and again (page cache) for DURATION
#   e  end-to-end latency at a fixed rate (RATE_E records/s)
#   f  (a) with zstd compression and 16-byte keys
# plus (a), (b) and (d) against ringbench's null broker: the ceiling of the tool and loopback
# (for (b), the latency floor: what the tool measures when the broker costs nothing).
# Writes bench/results/<date>-ringbench.md (medians over rounds, ratios, each round's ratio)
# and .json, and keeps every run's report.json, .hgrm files and latency.svg under the run
# directory it names. Broker CPU time and peak RSS are read from /proc for each broker.
#
#   bench/ringbench-compare.sh
#   environment: ROUNDS [3] DURATION [20] WARMUP [5] PRODUCERS [4] RATE_E [5000] D_RECORDS [1000000]
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-20}"
WARMUP="${WARMUP:-5}"
PRODUCERS="${PRODUCERS:-4}"
RATE_E="${RATE_E:-5000}"
D_RECORDS="${D_RECORDS:-1000000}"
RB_PORT="${RB_PORT:-19493}"
KAFKA_PORT="${KAFKA_BENCH_PORT:-19492}"
NULL_PORT="${NULL_PORT:-19494}"
RUN="$(mktemp -d "${TMPDIR:-/tmp}/ringbench-compare.XXXXXX")"
log() { echo "[ringbench-compare $(date -u +%H:%M:%S)] $*" >&2; }

RB_PID=""
NULL_PID=""
cleanup() {
    if [[ -n "$RB_PID" ]]; then kill "$RB_PID" 2>/dev/null || true; fi
    if [[ -n "$NULL_PID" ]]; then kill "$NULL_PID" 2>/dev/null || true; fi
    KAFKA_BENCH_PORT="$KAFKA_PORT" KAFKA_BENCH_DIR="$RUN/kafka" "$HERE/kafka.sh" stop >/dev/null 2>&1 || true
    rm -rf "$RUN/rb-data"
}
trap cleanup EXIT

log "building (release)"
(cd "$ROOT" && cargo build --release -p ringbroker -p ringbench 2>&1 | tail -1 >&2)
"$HERE/kafka.sh" provision >/dev/null
BENCH="$ROOT/target/release/ringbench"

# utime+stime of a process in seconds, and its peak RSS in KiB.
cpu_s() { awk -v h="$(getconf CLK_TCK)" '{ s = $0; sub(/^.*\) /, "", s); split(s, f, " "); printf "%.2f", (f[12] + f[13]) / h }' "/proc/$1/stat"; }
hwm_kib() { awk '$1 == "VmHWM:" { print $2 }' "/proc/$1/status"; }
# broker_stats NAME PID: CPU seconds and peak RSS of a broker just before it stops.
broker_stats() { printf '{"cpu_s": %s, "peak_rss_kib": %s}\n' "$(cpu_s "$2")" "$(hwm_kib "$2")" >"$ROUND_DIR/$1.stats.json"; }

start_rb() {
    rm -rf "$RUN/rb-data"
    "$ROOT/target/release/ringbroker" --listen "127.0.0.1:$RB_PORT" --data-dir "$RUN/rb-data" "$@" \
        >"$RUN/rb.out" 2>"$RUN/rb.log" &
    RB_PID=$!
    for _ in $(seq 1 100); do
        if grep -q "^ringbroker listening on" "$RUN/rb.out" 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    log "ringbroker did not start"
    cat "$RUN/rb.log" >&2
    exit 1
}
stop_rb() { # NAME
    broker_stats "$1" "$RB_PID"
    kill "$RB_PID" 2>/dev/null || true
    wait "$RB_PID" 2>/dev/null || true
    RB_PID=""
}
start_kafka() {
    KAFKA_BENCH_PORT="$KAFKA_PORT" KAFKA_BENCH_DIR="$RUN/kafka" KAFKA_BENCH_EXTRA="${1:-}" "$HERE/kafka.sh" start >/dev/null
}
stop_kafka() { # NAME
    broker_stats "$1" "$(KAFKA_BENCH_PORT="$KAFKA_PORT" KAFKA_BENCH_DIR="$RUN/kafka" "$HERE/kafka.sh" pid)"
    KAFKA_BENCH_PORT="$KAFKA_PORT" KAFKA_BENCH_DIR="$RUN/kafka" "$HERE/kafka.sh" stop >/dev/null
}
bench() { # name port ringbench-args...
    local name="$1" port="$2"
    shift 2
    log "round $ROUND: $name"
    "$BENCH" --broker "127.0.0.1:$port" --quiet --duration "$DURATION" --warmup "$WARMUP" \
        --out "$ROUND_DIR/$name" "$@" >"$ROUND_DIR/$name.txt"
}
rate_of() {
    python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['publish_rate'])" "$ROUND_DIR/$1/report.json"
}

# The same workloads against one broker on PORT; NAME is rb or kafka.
workloads() { # NAME PORT
    local n="$1" p="$2"
    # Kafka's (a) ran first, to set (b)'s rate.
    [[ -e "$ROUND_DIR/$n-a/report.json" ]] || bench "$n-a" "$p" --topic a --producers "$PRODUCERS" --consumers 0 --acks 1
    bench "$n-f" "$p" --topic f --producers "$PRODUCERS" --consumers 0 --acks 1 --compression zstd --key-size 16
    # (d): fill a topic with exactly D_RECORDS records, then read it all from the beginning.
    bench "$n-d-fill" "$p" --topic d --producers "$PRODUCERS" --consumers 0 --acks 1 --records "$D_RECORDS" --warmup 0
    bench "$n-d" "$p" --topic d --producers 0 --consumers 2 --from-beginning --rewind
    bench "$n-e" "$p" --topic e --producers 1 --consumers 1 --rate "$RATE_E" --acks 1
    bench "$n-b" "$p" --topic b --producers "$PRODUCERS" --consumers 0 --rate "$HALF" --acks 1
}

for ((ROUND = 1; ROUND <= ROUNDS; ROUND++)); do
    ROUND_DIR="$RUN/round-$ROUND"
    mkdir -p "$ROUND_DIR"
    # Kafka first: (b) runs at half of Kafka's (a) of the same round.
    start_kafka
    bench kafka-a "$KAFKA_PORT" --topic a --producers "$PRODUCERS" --consumers 0 --acks 1
    HALF="$(python3 -c "print(round($(rate_of kafka-a) / 2))")"
    log "round $ROUND: (b) runs at $HALF records/s, half of Kafka's (a)"
    workloads kafka "$KAFKA_PORT"
    stop_kafka kafka
    start_kafka "log.flush.interval.messages=1"
    bench kafka-c "$KAFKA_PORT" --topic c --producers "$PRODUCERS" --consumers 0 --acks -1
    stop_kafka kafka-c

    start_rb --flush os
    workloads rb "$RB_PORT"
    stop_rb rb
    start_rb --flush always
    bench rb-c "$RB_PORT" --topic c --producers "$PRODUCERS" --consumers 0 --acks -1
    stop_rb rb-c

    # The null broker (acknowledges without storing, serves synthetic batches).
    "$BENCH" --null-broker "127.0.0.1:$NULL_PORT" --null-records $((D_RECORDS / 6)) >"$RUN/null.log" 2>&1 &
    NULL_PID=$!
    sleep 0.5
    bench null-a "$NULL_PORT" --topic a --producers "$PRODUCERS" --consumers 0 --acks 1
    bench null-d "$NULL_PORT" --topic d --producers 0 --consumers 2 --from-beginning --rewind
    bench null-b "$NULL_PORT" --topic b --producers "$PRODUCERS" --consumers 0 --rate "$HALF" --acks 1
    kill "$NULL_PID" 2>/dev/null || true
    wait "$NULL_PID" 2>/dev/null || true
    NULL_PID=""
done

OUT="$HERE/results/$(date -u +%Y-%m-%d)-ringbench"
python3 "$HERE/ringbench_report.py" "$RUN" "$OUT" \
    "bench/ringbench-compare.sh (ROUNDS=$ROUNDS DURATION=$DURATION WARMUP=$WARMUP PRODUCERS=$PRODUCERS RATE_E=$RATE_E D_RECORDS=$D_RECORDS)"
log "wrote $OUT.md and $OUT.json; runs kept in $RUN"
