# fetch stalls under CPU contention: consume passes next to busy loops
#
#   bench/run.sh stall-hunt [ringbroker flags...]   e.g.  --zero-copy-fetch false   or   --cpus 0
#   TARGET=kafka bench/run.sh stall-hunt            the same against Apache Kafka (bench/kafka.sh)
#
# Produce RECORDS x 1 KiB records into a 6-partition topic, then run up to PASSES full
# consumes (ringbroker.bench.ConsumePerf), each with HOGS busy-loop shell processes competing
# for the 2 cores, and report every pass whose consumer went more than 5 s without records
# (the Java client then disconnects after request.timeout.ms, 30 s, and logs "Disconnecting
# from node 0 due to request timeout"). Does not build: it runs RB_BIN as it is.
# Output and logs stay in a temp dir.
#
# Environment: PASSES [8] RECORDS [2000000] HOGS [4] PORT [19293] (Kafka's controller: PORT+2)
#   RB_BIN [target/release/ringbroker] RB_ADMIN_PORT [0] TARGET [ringbroker]
# shellcheck shell=bash
PASSES="${PASSES:-8}"
RECORDS="${RECORDS:-2000000}"
PORT="${PORT:-19293}"
TARGET="${TARGET:-ringbroker}"
HOG_COUNT="${HOGS:-4}"
ADDR="127.0.0.1:$PORT"

bench_init stall-hunt
kafka_provision if-missing
require_free_ports "$PORT"

if [[ "$TARGET" == kafka ]]; then
    export KAFKA_BENCH_PORT="$PORT"
    require_free_ports $((PORT + 2))
    kafka_start
else
    rb_private_copy
    rb_start broker "$RB" --flush os --listen "$ADDR" "$@"
    log "ringbroker $* (pid $RB_PID)"
fi

java_tool ringbroker.bench.TopicSetup --bootstrap "$ADDR" --create bench --partitions 6 >&2
java_tool org.apache.kafka.tools.ProducerPerformance --bootstrap-server "$ADDR" \
    --topic bench --num-records "$RECORDS" --record-size 1024 --throughput -1 \
    --command-property acks=1 enable.idempotence=false | tail -1 >&2

stalls=0
for i in $(seq 1 "$PASSES"); do
    BG_PIDS=()
    for _ in $(seq 1 "$HOG_COUNT"); do timeout 200 sh -c 'while :; do :; done' & BG_PIDS+=($!); done
    rc=0
    java_tool ringbroker.bench.ConsumePerf --bootstrap "$ADDR" --topic bench \
        --records "$RECORDS" --timeout-ms 120000 >"$RUN/pass$i.out" 2>"$RUN/pass$i.err" || rc=$?
    for h in "${BG_PIDS[@]}"; do kill "$h" 2>/dev/null || true; done
    wait "${BG_PIDS[@]}" 2>/dev/null || true
    BG_PIDS=()
    gap="$(grep -o '"max_gap_s": [0-9.]*' "$RUN/pass$i.out" | awk '{print $2}')"
    mbs="$(grep -o '"mb_per_s": [0-9.]*' "$RUN/pass$i.out" | awk '{print $2}')"
    echo "pass $i: rc=$rc MB/s=${mbs:-?} longest_gap_s=${gap:-?}"
    if [[ $rc -ne 0 ]] || awk -v g="${gap:-999}" 'BEGIN { exit !(g > 5) }'; then
        stalls=$((stalls + 1))
        grep -h "request timeout" "$RUN/pass$i.err" | head -2 | sed 's/^/    /'
    fi
    sleep 2
done
echo "$stalls of $PASSES passes stalled ($TARGET $*${RB_PID:+, binary sha256 $(sha256sum "$RB" | cut -c1-16)})"
