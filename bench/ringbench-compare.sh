#!/usr/bin/env bash
# Ringbroker and Apache Kafka side by side with ringbench, one broker at a time on this
# machine, in one run. Workloads (1 KiB records, 6 partitions):
#   a  max produce throughput, acks=1, no fsync on either side
#   b  fixed rate at 50% of Kafka's (a): publish latency percentiles
#   c  acks=all with fsync on both sides (Kafka log.flush.interval.messages=1, Ringbroker --flush always)
#   d  consume throughput of the topic (a) filled, from the beginning
#   e  end-to-end latency at a fixed rate (RATE_E records/s)
# plus (a) and (d) against ringbench's null broker: the ceiling of the tool and loopback.
# Writes bench/results/<date>-ringbench.md (table + ratios) and keeps every run's
# report.json, .hgrm files and latency.svg under the run directory it names.
#
#   bench/ringbench-compare.sh     environment: DURATION [20] WARMUP [5] PRODUCERS [4] RATE_E [5000]
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
DURATION="${DURATION:-20}"
WARMUP="${WARMUP:-5}"
PRODUCERS="${PRODUCERS:-4}"
RATE_E="${RATE_E:-5000}"
RB_PORT="${RB_PORT:-19493}"
KAFKA_PORT="${KAFKA_BENCH_PORT:-19492}"
RUN="$(mktemp -d "${TMPDIR:-/tmp}/ringbench-compare.XXXXXX")"
log() { echo "[ringbench-compare $(date -u +%H:%M:%S)] $*" >&2; }

RB_PID=""
cleanup() {
    if [[ -n "$RB_PID" ]]; then kill "$RB_PID" 2>/dev/null || true; fi
    KAFKA_BENCH_PORT="$KAFKA_PORT" KAFKA_BENCH_DIR="$RUN/kafka" "$HERE/kafka.sh" stop >/dev/null 2>&1 || true
}
trap cleanup EXIT

log "building (release)"
(cd "$ROOT" && cargo build --release -p ringbroker -p ringbench 2>&1 | tail -1 >&2)
"$HERE/kafka.sh" provision >/dev/null
BENCH="$ROOT/target/release/ringbench"

start_rb() {
    rm -rf "$RUN/rb-data"
    "$ROOT/target/release/ringbroker" --listen "127.0.0.1:$RB_PORT" --data-dir "$RUN/rb-data" "$@" \
        >"$RUN/rb.out" 2>"$RUN/rb.log" &
    RB_PID=$!
    for _ in $(seq 1 100); do
        if grep -q listening "$RUN/rb.out" 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    log "ringbroker did not start"
    cat "$RUN/rb.log" >&2
    exit 1
}
stop_rb() {
    kill "$RB_PID" 2>/dev/null || true
    wait "$RB_PID" 2>/dev/null || true
    RB_PID=""
}
start_kafka() {
    KAFKA_BENCH_PORT="$KAFKA_PORT" KAFKA_BENCH_DIR="$RUN/kafka" KAFKA_BENCH_EXTRA="${1:-}" "$HERE/kafka.sh" start >/dev/null
}
stop_kafka() {
    KAFKA_BENCH_PORT="$KAFKA_PORT" KAFKA_BENCH_DIR="$RUN/kafka" "$HERE/kafka.sh" stop >/dev/null
}
bench() { # name port ringbench-args...
    local name="$1" port="$2"
    shift 2
    log "$name"
    "$BENCH" --broker "127.0.0.1:$port" --quiet --duration "$DURATION" --warmup "$WARMUP" \
        --out "$RUN/$name" "$@" >"$RUN/$name.txt"
}
rate_of() {
    python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['publish_rate'])" "$RUN/$1/report.json"
}

# Kafka first: (b) runs at half of Kafka's (a).
start_kafka
bench kafka-a "$KAFKA_PORT" --topic a --producers "$PRODUCERS" --consumers 0 --acks 1
bench kafka-d "$KAFKA_PORT" --topic a --producers 0 --consumers 2 --from-beginning
bench kafka-e "$KAFKA_PORT" --topic e --producers 1 --consumers 1 --rate "$RATE_E" --acks 1
HALF="$(python3 -c "print(round($(rate_of kafka-a) / 2))")"
log "(b) runs at $HALF records/s, half of Kafka's (a)"
bench kafka-b "$KAFKA_PORT" --topic b --producers "$PRODUCERS" --consumers 0 --rate "$HALF" --acks 1
stop_kafka
start_kafka "log.flush.interval.messages=1"
bench kafka-c "$KAFKA_PORT" --topic c --producers "$PRODUCERS" --consumers 0 --acks -1
stop_kafka

start_rb --flush os
bench rb-a "$RB_PORT" --topic a --producers "$PRODUCERS" --consumers 0 --acks 1
bench rb-d "$RB_PORT" --topic a --producers 0 --consumers 2 --from-beginning
bench rb-e "$RB_PORT" --topic e --producers 1 --consumers 1 --rate "$RATE_E" --acks 1
bench rb-b "$RB_PORT" --topic b --producers "$PRODUCERS" --consumers 0 --rate "$HALF" --acks 1
stop_rb
start_rb --flush always
bench rb-c "$RB_PORT" --topic c --producers "$PRODUCERS" --consumers 0 --acks -1
stop_rb

# The null broker (acknowledges without storing, serves synthetic batches): the ceiling of
# ringbench + loopback for (a) and (d).
NULL_PORT="${NULL_PORT:-19494}"
"$BENCH" --null-broker "127.0.0.1:$NULL_PORT" --null-records 500000 >"$RUN/null.log" 2>&1 &
NULL_PID=$!
sleep 0.5
bench null-a "$NULL_PORT" --topic a --producers "$PRODUCERS" --consumers 0 --acks 1
bench null-d "$NULL_PORT" --topic a --producers 0 --consumers 2 --from-beginning
kill "$NULL_PID" 2>/dev/null || true

OUT="$HERE/results/$(date -u +%Y-%m-%d)-ringbench.md"
python3 "$HERE/ringbench_report.py" "$RUN" "$OUT" \
    "bench/ringbench-compare.sh (DURATION=$DURATION WARMUP=$WARMUP PRODUCERS=$PRODUCERS RATE_E=$RATE_E)"
log "wrote $OUT"
