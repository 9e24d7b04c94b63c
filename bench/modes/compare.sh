# Ringbroker vs Kafka with Kafka's ProducerPerformance; broker CPU per GB, sendfile vs copy
#
#   bench/run.sh compare
#   WAIT_QUIET=600 bench/run.sh compare     first wait (up to 600 s) for an idle machine
#
# For each broker: create a topic (PARTITIONS partitions), produce RECORDS records of
# RECORD_SIZE bytes with Kafka's own ProducerPerformance (acks=1, enable.idempotence=false,
# --throughput -1), then read them all back CONSUME_PASSES times with ringbroker.bench.ConsumePerf
# (assign all partitions, seekToBeginning; no consumer group). Ringbroker is run twice on the
# same data dir: with --zero-copy-fetch true (sendfile) for produce + consume, then restarted
# with --zero-copy-fetch false (read+write copy) for consume only. Broker CPU time (utime+stime,
# /proc/PID/stat) is taken around every phase, peak RSS (VmHWM) before each broker stops.
#
# Writes bench/results/<date>-compare.md and .json (RESULT_NAME overrides "<date>-compare",
# RESULTS_DIR the directory).
#
# Environment (defaults in brackets):
#   RECORDS [2000000]  RECORD_SIZE [1024]  PARTITIONS [6]  CONSUME_PASSES [3]
#   RB_PORT [19093]  KAFKA_BENCH_PORT [19092]  RB_ADMIN_PORT [0]  KAFKA_BENCH_HEAP [1G]  CLIENT_HEAP [512M]
#   PRODUCER_PROPS  extra producer properties, space-separated k=v (e.g. "linger.ms=10")
#   SKIP_BUILD=1    use the existing target/release/ringbroker and bench/kafka/target/lib
#   KEEP_RUN_DIR=0  delete the temp run dir at the end (by default its logs and tool output are
#                   kept, only the brokers' data is deleted; the report names the dir)
#   WAIT_QUIET=S    before measuring, wait up to S seconds for the machine to be idle
# shellcheck shell=bash
RECORDS="${RECORDS:-2000000}"
RECORD_SIZE="${RECORD_SIZE:-1024}"
PARTITIONS="${PARTITIONS:-6}"
CONSUME_PASSES="${CONSUME_PASSES:-3}"
RB_PORT="${RB_PORT:-19093}"
export KAFKA_BENCH_PORT="${KAFKA_BENCH_PORT:-19092}"
export KAFKA_BENCH_HEAP="${KAFKA_BENCH_HEAP:-1G}"
export KAFKA_BENCH_PARTITIONS="$PARTITIONS"
PRODUCER_PROPS="${PRODUCER_PROPS:-}"
TOPIC="bench"
PRODUCE_TIMEOUT=300
CONSUME_TIMEOUT_MS=180000
INVOCATION="$(for v in RECORDS RECORD_SIZE PARTITIONS CONSUME_PASSES PRODUCER_PROPS RB_PORT KAFKA_BENCH_PORT SKIP_BUILD; do
    if [[ -n "${!v:-}" ]]; then printf '%s=%q ' "$v" "${!v}"; fi; done)bench/run.sh compare${*:+ $*}"

bench_init compare
require_free_ports "$RB_PORT" "$KAFKA_BENCH_PORT" $((KAFKA_BENCH_PORT + 2))
RESULT_NAME="${RESULT_NAME:-$(date -u +%Y-%m-%d)-compare}"
mkdir -p "$RESULTS"
METRICS="$RUN/metrics.tsv"
: >"$METRICS"

metric() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$METRICS"; }

# measure PHASE BROKER_PID OUTFILE CMD...: run CMD, record wall time, broker CPU, client CPU
# (children of a subshell, via `times`) and the rest of the machine's busy CPU.
measure() {
    local phase="$1" pid="$2" out="$3"
    shift 3
    local b0 s0 st0 t0 b1 s1 st1 t1 rc=0
    b0="$(proc_ticks "$pid")"; s0="$(sys_busy)"; st0="$(sys_steal)"; t0="$(date +%s.%N)"
    (
        rc=0
        "$@" >"$out" 2>"$out.err" || rc=$?
        times >"$out.times"
        exit $rc
    ) || rc=$?
    t1="$(date +%s.%N)"; s1="$(sys_busy)"; st1="$(sys_steal)"
    if kill -0 "$pid" 2>/dev/null; then b1="$(proc_ticks "$pid")"; else b1="$b0"; metric "$phase" broker_died 1; fi
    local client_s
    client_s="$(awk 'NR == 2 { n = split($0, a, " "); tot = 0; for (i = 1; i <= n; i++) { x = a[i]; m = x; sub(/m.*/, "", m); s = x; sub(/^[0-9]+m/, "", s); sub(/s$/, "", s); tot += m * 60 + s } printf "%.3f", tot }' "$out.times")"
    metric "$phase" rc "$rc"
    metric "$phase" wall_s "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')"
    metric "$phase" broker_cpu_s "$(ticks_to_s $((b1 - b0)))"
    metric "$phase" client_cpu_s "$client_s"
    metric "$phase" machine_busy_s "$(ticks_to_s $((s1 - s0)))"
    metric "$phase" machine_steal_s "$(ticks_to_s $((st1 - st0)))"
    return $rc
}

create_topic() {
    java_tool ringbroker.bench.TopicSetup --bootstrap "$1" --create "$TOPIC" --partitions "$PARTITIONS" >&2
}

PRODUCE_CMD=(org.apache.kafka.tools.ProducerPerformance --topic "$TOPIC" --num-records "$RECORDS"
    --record-size "$RECORD_SIZE" --throughput -1 --command-property acks=1 enable.idempotence=false)
# shellcheck disable=SC2206
if [[ -n "$PRODUCER_PROPS" ]]; then PRODUCE_CMD+=($PRODUCER_PROPS); fi

produce() { # BROKER BOOTSTRAP PID
    log "$1: produce $RECORDS x $RECORD_SIZE B to $TOPIC ($PARTITIONS partitions)"
    if ! JAVA_TIMEOUT="$PRODUCE_TIMEOUT" measure "$1.produce" "$3" "$RUN/$1.produce.out" \
        java_tool "${PRODUCE_CMD[@]}" --bootstrap-server "$2"; then
        log "$1: ProducerPerformance failed (rc $(awk -F'\t' -v p="$1.produce" '$1 == p && $2 == "rc" { print $3 }' "$METRICS")); tail:"
        tail -5 "$RUN/$1.produce.out" "$RUN/$1.produce.out.err" >&2 || true
    fi
    tail -1 "$RUN/$1.produce.out" >&2 || true
    cp "$RUN/$1.produce.out" "$RUN/$1.produce.log"
}

consume() { # LABEL BOOTSTRAP PID
    local i
    for ((i = 1; i <= CONSUME_PASSES; i++)); do
        log "$1: consume pass $i/$CONSUME_PASSES"
        if ! measure "$1.consume.$i" "$3" "$RUN/$1.consume.$i.out" \
            java_tool ringbroker.bench.ConsumePerf --bootstrap "$2" --topic "$TOPIC" \
            --records "$RECORDS" --timeout-ms "$CONSUME_TIMEOUT_MS"; then
            log "$1: ConsumePerf pass $i failed; tail:"
            tail -5 "$RUN/$1.consume.$i.out.err" >&2 || true
        fi
        cat "$RUN/$1.consume.$i.out" >&2 || true
    done
}

record_rss() { # LABEL PID
    metric "$1" vm_hwm_kib "$(proc_kib "$2" VmHWM)"
    metric "$1" vm_rss_kib "$(proc_kib "$2" VmRSS)"
}

stop_ringbroker() { # LABEL
    rb_stop "$1"
    if [[ "$RB_KILLED" == 1 ]]; then metric "$1" shutdown_killed 1; fi
}

build_release
rb_private_copy
kafka_provision
ls "$KAFKA_LIB"/ringbroker-bench-kafka-*.jar >/dev/null

KAFKA_JARS=("$KAFKA_LIB"/kafka_2.13-*.jar)
KAFKA_VERSION="$(basename "${KAFKA_JARS[0]}" .jar | sed 's/^kafka_2.13-//')"
metric machine cpu_model "$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)"
metric machine cores "$(nproc)"
metric machine kernel "$(uname -sr)"
metric machine mem_total_kib "$(awk '/^MemTotal/ { print $2 }' /proc/meminfo)"
metric machine java "$(java -version 2>&1 | head -1)"
metric machine kafka_version "$KAFKA_VERSION"
metric machine ringbroker_git "$(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null)$(cd "$ROOT" && git diff --quiet HEAD -- src Cargo.toml Cargo.lock 2>/dev/null || echo '+dirty')"
metric machine ringbroker_sha256 "$(sha256sum "$RB" | cut -c1-16)"
metric machine loadavg_at_start "$(cut -d' ' -f1-3 /proc/loadavg)"
# How busy the machine is before we start (2 s sample): other work skews every figure.
wait_quiet "${WAIT_QUIET:-0}"
metric machine busy_cores_before_start "$IDLE_BUSY"
metric config records "$RECORDS"
metric config record_size "$RECORD_SIZE"
metric config partitions "$PARTITIONS"
metric config consume_passes "$CONSUME_PASSES"
metric config invocation "$INVOCATION"
metric config produce_cmd "java -Xmx$CLIENT_HEAP -cp 'bench/kafka/target/lib/*' ${PRODUCE_CMD[*]} --bootstrap-server HOST:PORT"
metric config consume_cmd "java -Xmx$CLIENT_HEAP -cp 'bench/kafka/target/lib/*' ringbroker.bench.ConsumePerf --bootstrap HOST:PORT --topic $TOPIC --records $RECORDS"
metric config ringbroker_cmd "target/release/ringbroker --data-dir TMP --admin-listen $(rb_admin_listen) --flush os --listen 127.0.0.1:$RB_PORT --zero-copy-fetch true|false"
metric config kafka_cmd "bench/kafka.sh start (kafka.Kafka, KRaft broker+controller, heap $KAFKA_BENCH_HEAP, num.partitions=$PARTITIONS, 127.0.0.1:$KAFKA_BENCH_PORT)"
metric config client_heap "$CLIENT_HEAP"
metric config run_dir "$RUN"
metric config kafka_heap "$KAFKA_BENCH_HEAP"

T_START=$SECONDS
RB_BOOT="127.0.0.1:$RB_PORT"

# Ringbroker, sendfile: produce + consume.
if rb_start rb-sendfile "$RB" --flush os --listen "$RB_BOOT" --zero-copy-fetch true; then
    metric rb-sendfile started 1
    if create_topic "$RB_BOOT"; then
        produce rb "$RB_BOOT" "$RB_PID"
        consume rb-sendfile "$RB_BOOT" "$RB_PID"
    else
        metric rb-sendfile topic_failed 1
    fi
    metric rb-sendfile data_bytes "$(du -s -B1 "$RB_DATA" | cut -f1)"
    record_rss rb-sendfile "$RB_PID"
    stop_ringbroker rb-sendfile
else
    metric rb-sendfile started 0
fi

# Ringbroker, copying fetch path: consume only, same data.
if KEEP_DATA=1 rb_start rb-copy "$RB" --flush os --listen "$RB_BOOT" --zero-copy-fetch false; then
    metric rb-copy started 1
    consume rb-copy "$RB_BOOT" "$RB_PID"
    record_rss rb-copy "$RB_PID"
    stop_ringbroker rb-copy
else
    metric rb-copy started 0
fi
sed 's/\x1b\[[0-9;]*m//g' "$RUN"/rb-*.log | grep -E " (WARN|ERROR) " | head -20 >"$RUN/rb-warnings.txt" || true
rm -rf "$RB_DATA"

# Apache Kafka: produce + consume.
KAFKA_BOOT="127.0.0.1:$KAFKA_BENCH_PORT"
if kafka_start; then
    metric kafka started 1
    KPID="$(kafka_pid)"
    if create_topic "$KAFKA_BOOT"; then
        produce kafka "$KAFKA_BOOT" "$KPID"
        consume kafka "$KAFKA_BOOT" "$KPID"
    else
        metric kafka topic_failed 1
    fi
    metric kafka data_bytes "$(du -s -B1 "$KAFKA_BENCH_DIR/data" | cut -f1)"
    record_rss kafka "$KPID"
    kafka_stop
else
    metric kafka started 0
fi
grep -E " (WARN|ERROR) " "$KAFKA_BENCH_DIR/kafka.log" 2>/dev/null | head -20 >"$RUN/kafka-warnings.txt" || true

metric config total_wall_s "$((SECONDS - T_START))"
metric machine loadavg_at_end "$(cut -d' ' -f1-3 /proc/loadavg)"

python3 "$HERE/compare_report.py" "$RUN" "$RESULTS/$RESULT_NAME"
log "wrote $RESULTS/$RESULT_NAME.md and .json"
