# the main comparison: workloads a-f on Ringbroker, Kafka and the null broker
#
#   bench/run.sh ringbench
#
# Both brokers one at a time on this machine, in one run of ROUNDS rounds (each round runs
# every workload on both brokers, so slow drift of a shared machine hits both alike).
# Workloads (1 KiB records, 6 partitions):
#   a  max produce throughput, acks=1, no fsync on either side
#   b  fixed rate at 50% of Kafka's (a) in the same round: publish latency percentiles
#   c  acks=all with fsync on both sides (Kafka log.flush.interval.messages=1, Ringbroker --flush always)
#   d  consume throughput of a topic pre-filled with D_RECORDS records, read from the beginning
#      again and again (page cache) for DURATION
#   e  end-to-end latency at a fixed rate (RATE_E records/s)
#   f  (a) with zstd compression and 16-byte keys
# plus (a), (b) and (d) against ringbench's null broker: the ceiling of the tool and loopback
# (for (b), the latency floor: what the tool measures when the broker costs nothing).
# Writes bench/results/<date>-ringbench-<placement>.md (RESULTS_DIR: another directory) (medians over rounds, ratios, each round's ratio)
# and .json, and keeps every run's report.json, .hgrm files and latency.svg under the run
# directory it names. Broker CPU time and peak RSS are read from /proc for each broker, and
# ringbench reads the broker's CPU time over each run's measured window (--broker-pid): the
# report gives it per GB produced and per GB fetched.
#
# Two placements, each a full run with its own report (bench/results/<date>-ringbench-<placement>):
#   shared     the brokers and ringbench share every core (a machine that also runs clients)
#   dedicated  the broker on DEDICATED_BROKER_CPUS (Ringbroker --cpus; Kafka's JVM and the null
#              broker under taskset), ringbench on DEDICATED_CLIENT_CPUS: the per-core cost
#
# Environment: ROUNDS [3] DURATION [20] WARMUP [5] PRODUCERS [4] RATE_E [5000] D_RECORDS [1000000]
#   PLACEMENTS ["shared dedicated"] DEDICATED_BROKER_CPUS [0] DEDICATED_CLIENT_CPUS [1]
#   RB_PORT [19493] KAFKA_BENCH_PORT [19492] NULL_PORT [19494] RB_ADMIN_PORT [0] WAIT_QUIET [0]
# shellcheck shell=bash
ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-20}"
WARMUP="${WARMUP:-5}"
PRODUCERS="${PRODUCERS:-4}"
RATE_E="${RATE_E:-5000}"
D_RECORDS="${D_RECORDS:-1000000}"
PLACEMENTS="${PLACEMENTS:-shared dedicated}"
DEDICATED_BROKER_CPUS="${DEDICATED_BROKER_CPUS:-0}"
DEDICATED_CLIENT_CPUS="${DEDICATED_CLIENT_CPUS:-1}"
RB_PORT="${RB_PORT:-19493}"
export KAFKA_BENCH_PORT="${KAFKA_BENCH_PORT:-19492}"
NULL_PORT="${NULL_PORT:-19494}"
RB_ADDR="127.0.0.1:$RB_PORT"
KAFKA_ADDR="127.0.0.1:$KAFKA_BENCH_PORT"
NULL_ADDR="127.0.0.1:$NULL_PORT"

bench_init ringbench
require_free_ports "$RB_PORT" "$KAFKA_BENCH_PORT" $((KAFKA_BENCH_PORT + 2)) "$NULL_PORT"
build_release
rb_private_copy
kafka_provision
wait_quiet "${WAIT_QUIET:-0}"

bench() { # NAME ADDR ringbench-args...
    log "round $ROUND: $1"
    ringbench_run "$@"
}

# The same workloads against one broker; NAME is rb or kafka.
workloads() { # NAME ADDR
    local n="$1" a="$2"
    # Kafka's (a) ran first, to set (b)'s rate.
    [[ -e "$OUT_DIR/$n-a/report.json" ]] || bench "$n-a" "$a" --topic a --producers "$PRODUCERS" --consumers 0 --acks 1
    bench "$n-f" "$a" --topic f --producers "$PRODUCERS" --consumers 0 --acks 1 --compression zstd --key-size 16
    # (d): fill a topic with exactly D_RECORDS records, then read it all from the beginning.
    bench "$n-d-fill" "$a" --topic d --producers "$PRODUCERS" --consumers 0 --acks 1 --records "$D_RECORDS" --warmup 0
    bench "$n-d" "$a" --topic d --producers 0 --consumers 2 --from-beginning --rewind
    bench "$n-e" "$a" --topic e --producers 1 --consumers 1 --rate "$RATE_E" --acks 1
    bench "$n-b" "$a" --topic b --producers "$PRODUCERS" --consumers 0 --rate "$HALF" --acks 1
}

# One placement's rounds: every workload on Kafka, Ringbroker and the null broker.
placement_rounds() {
    for ((ROUND = 1; ROUND <= ROUNDS; ROUND++)); do
        OUT_DIR="$RUN/$PLACEMENT/round-$ROUND"
        mkdir -p "$OUT_DIR"
        # Kafka first: (b) runs at half of Kafka's (a) of the same round.
        kafka_start >/dev/null
        BENCH_BROKER_PID="$(kafka_pid)"
        bench kafka-a "$KAFKA_ADDR" --topic a --producers "$PRODUCERS" --consumers 0 --acks 1
        HALF="$(python3 -c "print(round($(report_value kafka-a publish_rate) / 2))")"
        log "round $ROUND: (b) runs at $HALF records/s, half of Kafka's (a)"
        workloads kafka "$KAFKA_ADDR"
        broker_stats "$OUT_DIR/kafka.stats.json" "$(kafka_pid)"
        kafka_stop >/dev/null
        kafka_start "log.flush.interval.messages=1" >/dev/null
        BENCH_BROKER_PID="$(kafka_pid)"
        bench kafka-c "$KAFKA_ADDR" --topic c --producers "$PRODUCERS" --consumers 0 --acks -1
        broker_stats "$OUT_DIR/kafka-c.stats.json" "$(kafka_pid)"
        kafka_stop >/dev/null

        rb_start rb "$RB" --listen "$RB_ADDR" --flush os "${RB_PLACEMENT_FLAGS[@]}"
        BENCH_BROKER_PID="$RB_PID"
        workloads rb "$RB_ADDR"
        broker_stats "$OUT_DIR/rb.stats.json" "$RB_PID"
        rb_stop rb
        rb_start rb-c "$RB" --listen "$RB_ADDR" --flush always "${RB_PLACEMENT_FLAGS[@]}"
        BENCH_BROKER_PID="$RB_PID"
        bench rb-c "$RB_ADDR" --topic c --producers "$PRODUCERS" --consumers 0 --acks -1
        broker_stats "$OUT_DIR/rb-c.stats.json" "$RB_PID"
        rb_stop rb-c

        # The null broker (acknowledges without storing, serves synthetic batches).
        null_start "$NULL_ADDR" $((D_RECORDS / 6))
        BENCH_BROKER_PID="$NULL_PID"
        bench null-a "$NULL_ADDR" --topic a --producers "$PRODUCERS" --consumers 0 --acks 1
        bench null-d "$NULL_ADDR" --topic d --producers 0 --consumers 2 --from-beginning --rewind
        bench null-b "$NULL_ADDR" --topic b --producers "$PRODUCERS" --consumers 0 --rate "$HALF" --acks 1
        null_stop
        BENCH_BROKER_PID=""
    done
}

for PLACEMENT in $PLACEMENTS; do
    case "$PLACEMENT" in
    shared)
        RB_CPUS="" CLIENT_CPUS="" RB_PLACEMENT_FLAGS=()
        PLACED="One broker at a time, ringbench on the same cores."
        ;;
    dedicated)
        # shellcheck disable=SC2034 # lib.sh reads them: rb_start, kafka_start, ringbench_run
        RB_CPUS="$DEDICATED_BROKER_CPUS" CLIENT_CPUS="$DEDICATED_CLIENT_CPUS"
        RB_PLACEMENT_FLAGS=(--cpus "$DEDICATED_BROKER_CPUS")
        PLACED="One broker at a time on CPUs $DEDICATED_BROKER_CPUS (Ringbroker --cpus, Kafka's JVM and the null broker under taskset), ringbench on CPUs $DEDICATED_CLIENT_CPUS."
        ;;
    *)
        log "unknown placement '$PLACEMENT' (PLACEMENTS takes shared and dedicated)"
        exit 1
        ;;
    esac
    log "placement $PLACEMENT: $PLACED"
    placement_rounds
    OUT="$RESULTS/$(date -u +%Y-%m-%d)-ringbench-$PLACEMENT"
    python3 "$HERE/ringbench_report.py" "$RUN/$PLACEMENT" "$OUT" \
        "bench/run.sh ringbench (PLACEMENTS=$PLACEMENT ROUNDS=$ROUNDS DURATION=$DURATION WARMUP=$WARMUP PRODUCERS=$PRODUCERS RATE_E=$RATE_E D_RECORDS=$D_RECORDS)" \
        "$PLACED"
    log "wrote $OUT.md and $OUT.json"
done
