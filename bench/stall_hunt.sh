#!/usr/bin/env bash
# Reproduce fetch stalls under CPU contention: produce RECORDS x 1 KiB records into a 6-partition
# topic, then run up to PASSES full consumes (ringbroker.bench.ConsumePerf), each with HOGS
# busy-loop shell processes competing for the 2 cores, and report every pass whose consumer
# went more than 5 s without records (the Java client then disconnects after request.timeout.ms,
# 30 s, and logs "Disconnecting from node 0 due to request timeout").
#
#   bench/stall_hunt.sh [ringbroker flags...]     e.g.  --zero-copy-fetch false   or   --cpus 0
#   TARGET=kafka bench/stall_hunt.sh              the same against Apache Kafka (bench/kafka.sh)
#
# Environment: PASSES [8], RECORDS [2000000], HOGS [4], PORT [19293],
# RB_BIN [target/release/ringbroker].
# Output and logs stay in a temp dir.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
LIB="$HERE/kafka/target/lib"
PASSES="${PASSES:-8}"
RECORDS="${RECORDS:-2000000}"
PORT="${PORT:-19293}"
TARGET="${TARGET:-ringbroker}"
HOG_COUNT="${HOGS:-4}"
DIR="$(mktemp -d "${TMPDIR:-/tmp}/ringbroker-stall.XXXXXX")"
log() { echo "[stall_hunt $(date -u +%H:%M:%S)] $*" >&2; }

BPID=""
HOGS=()
cleanup() {
    for h in "${HOGS[@]}"; do kill "$h" 2>/dev/null || true; done
    if [[ "$TARGET" == kafka ]]; then
        KAFKA_BENCH_PORT="$PORT" KAFKA_BENCH_DIR="$DIR/kafka" "$HERE/kafka.sh" stop >/dev/null 2>&1 || true
    elif [[ -n "$BPID" ]]; then
        kill -TERM "$BPID" 2>/dev/null || true
        for _ in $(seq 1 300); do kill -0 "$BPID" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$BPID" 2>/dev/null || true
    fi
    rm -rf "$DIR/data" "$DIR/kafka/data" "$DIR/ringbroker"
    log "logs in $DIR"
}
trap cleanup EXIT

ls "$LIB"/ringbroker-bench-kafka-*.jar >/dev/null || "$HERE/kafka.sh" provision
if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then log "port $PORT is in use"; exit 1; fi

if [[ "$TARGET" == kafka ]]; then
    KAFKA_BENCH_PORT="$PORT" KAFKA_BENCH_DIR="$DIR/kafka" "$HERE/kafka.sh" start
else
    cp "${RB_BIN:-$ROOT/target/release/ringbroker}" "$DIR/ringbroker"
    "$DIR/ringbroker" --flush os --listen "127.0.0.1:$PORT" --data-dir "$DIR/data" "$@" >"$DIR/broker.log" 2>&1 &
    BPID=$!
    for _ in $(seq 1 100); do grep -q "ringbroker listening on" "$DIR/broker.log" && break; sleep 0.1; done
    log "ringbroker $* (pid $BPID)"
fi

java -cp "$LIB/*" ringbroker.bench.TopicSetup --bootstrap "127.0.0.1:$PORT" --create bench --partitions 6 >&2
java -Xmx512M -cp "$LIB/*" org.apache.kafka.tools.ProducerPerformance --bootstrap-server "127.0.0.1:$PORT" \
    --topic bench --num-records "$RECORDS" --record-size 1024 --throughput -1 \
    --command-property acks=1 enable.idempotence=false | tail -1 >&2

stalls=0
for i in $(seq 1 "$PASSES"); do
    HOGS=()
    for _ in $(seq 1 "$HOG_COUNT"); do timeout 200 sh -c 'while :; do :; done' & HOGS+=($!); done
    rc=0
    java -Xmx512M -cp "$LIB/*" ringbroker.bench.ConsumePerf --bootstrap "127.0.0.1:$PORT" --topic bench \
        --records "$RECORDS" --timeout-ms 120000 >"$DIR/pass$i.out" 2>"$DIR/pass$i.err" || rc=$?
    for h in "${HOGS[@]}"; do kill "$h" 2>/dev/null || true; done
    wait "${HOGS[@]}" 2>/dev/null || true
    HOGS=()
    gap="$(grep -o '"max_gap_s": [0-9.]*' "$DIR/pass$i.out" | awk '{print $2}')"
    mbs="$(grep -o '"mb_per_s": [0-9.]*' "$DIR/pass$i.out" | awk '{print $2}')"
    echo "pass $i: rc=$rc MB/s=${mbs:-?} longest_gap_s=${gap:-?}"
    if [[ $rc -ne 0 ]] || awk -v g="${gap:-999}" 'BEGIN { exit !(g > 5) }'; then
        stalls=$((stalls + 1))
        grep -h "request timeout" "$DIR/pass$i.err" | head -2 | sed 's/^/    /'
    fi
    sleep 2
done
echo "$stalls of $PASSES passes stalled ($TARGET $*${BPID:+, binary sha256 $(sha256sum "$DIR/ringbroker" | cut -c1-16)})"
