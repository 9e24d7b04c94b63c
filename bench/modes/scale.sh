# how cost grows: throughput and p99 against partitions and connections, Ringbroker vs Kafka
#
#   bench/run.sh scale
#   bench/run.sh scale DURATION=5 WARMUP=2 PARTITIONS="6 600" CONNECTIONS="4 100"   (a short trial)
#
# Kafka, then Ringbroker, each over two sweeps of points:
#   partitions   PARTITIONS partitions at CONNECTIONS_FIXED producer connections
#   connections  CONNECTIONS producer connections at PARTITIONS_FIXED partitions
# (the point both sweeps share runs once). Each point runs on a broker started afresh on an
# empty data directory, with one topic of that many partitions, 1 KiB records, 16 a batch:
#   max   max produce throughput, acks=1, no fsync: records/s and publish latency p99
#   rate  FIXED_RATE records/s, acks=1: publish latency p99 (p50 and p99.9 in the .json)
# ringbench runs PRODUCERS producer threads and spreads them over the point's connections
# (--connections: each thread sends round-robin over its share, up to MAX_IN_FLIGHT requests
# on each, and waits on all of them with ppoll), so 1000 connections cost PRODUCERS threads;
# records go to every partition in turn.
# Ringbroker runs with --flush os as in the other modes, Kafka with lib.sh's settings (Kafka's
# defaults). Neither limits connections by default (Ringbroker --max-connections and
# --max-connections-per-ip, Kafka max.connections and max.connections.per.ip: 2147483647), so
# nothing is raised; the script raises the soft `ulimit -n` to what the largest point needs.
# A point that fails (a broker that does not start, a topic it cannot create, a run that
# errors) is reported with its error, and the sweep goes on.
# Writes bench/results/<date>-scale.md, .svg and .json (scale_report.py; RESULTS_DIR: another
# directory) and keeps every run's report.json, its stderr and each broker's CPU time and
# peak RSS (from /proc, per point) under the run directory it names.
#
# Environment: DURATION [20] WARMUP [5] PARTITIONS ["6 60 600 3000"] CONNECTIONS ["4 100 1000"]
#   PARTITIONS_FIXED [6] CONNECTIONS_FIXED [4] FIXED_RATE [20000] PRODUCERS [4] MAX_IN_FLIGHT [5]
#   BROKERS ["kafka rb"] RB_PORT [19793] KAFKA_BENCH_PORT [19792] RB_CPUS CLIENT_CPUS WAIT_QUIET [0]
# shellcheck shell=bash
DURATION="${DURATION:-20}"
WARMUP="${WARMUP:-5}"
PARTITIONS="${PARTITIONS-6 60 600 3000}"
CONNECTIONS="${CONNECTIONS-4 100 1000}"
PARTITIONS_FIXED="${PARTITIONS_FIXED:-6}"
CONNECTIONS_FIXED="${CONNECTIONS_FIXED:-4}"
FIXED_RATE="${FIXED_RATE:-20000}"
PRODUCERS="${PRODUCERS:-4}"
MAX_IN_FLIGHT="${MAX_IN_FLIGHT:-5}"
BROKERS="${BROKERS:-kafka rb}"
RB_PORT="${RB_PORT:-19793}"
export KAFKA_BENCH_PORT="${KAFKA_BENCH_PORT:-19792}"
RB_ADDR="127.0.0.1:$RB_PORT"
KAFKA_ADDR="127.0.0.1:$KAFKA_BENCH_PORT"

bench_init scale
require_free_ports "$RB_PORT" "$KAFKA_BENCH_PORT" $((KAFKA_BENCH_PORT + 2))

# The points, "SWEEP PARTITIONS CONNECTIONS" a line; the report reads them back. The point both
# sweeps share is listed in both and runs once.
read -ra PARTS <<<"$PARTITIONS"
read -ra CONNS <<<"$CONNECTIONS"
{
    for p in "${PARTS[@]}"; do echo "partitions $p $CONNECTIONS_FIXED"; done
    for c in "${CONNS[@]}"; do echo "connections $PARTITIONS_FIXED $c"; done
} >"$RUN/plan"

# Descriptors: a broker holds one a connection and a few a partition (segment, indexes).
max_of() { printf '%s\n' "$@" | sort -n | tail -1; }
NOFILE=$((2 * $(max_of "${CONNS[@]}" "$CONNECTIONS_FIXED") + 4 * $(max_of "${PARTS[@]}" "$PARTITIONS_FIXED") + 4096))
if (($(ulimit -n) < NOFILE)); then
    if ulimit -n "$NOFILE" 2>/dev/null; then
        log "ulimit -n raised to $NOFILE"
    else
        log "WARNING: ulimit -n is $(ulimit -n) (hard limit $(ulimit -Hn)); the largest points need about $NOFILE"
    fi
fi

build_release
rb_private_copy
kafka_provision
wait_quiet "${WAIT_QUIET:-0}"

# Starts BROKER (kafka or rb) afresh; ADDR is where it listens.
broker_start() { # BROKER
    case "$1" in
    kafka) ADDR="$KAFKA_ADDR" && kafka_start >/dev/null ;;
    rb) ADDR="$RB_ADDR" && rb_start "rb-$POINT" "$RB" --listen "$RB_ADDR" --flush os ;;
    esac
}

broker_pid() { # BROKER
    case "$1" in
    kafka) kafka_pid ;;
    rb) [[ -n "$RB_PID" ]] && echo "$RB_PID" ;;
    esac
}

broker_stop() { # BROKER
    case "$1" in
    kafka) kafka_stop >/dev/null ;;
    rb) rb_stop "rb-$POINT" ;;
    esac
}

# A ringbench run of this point; on failure its error is kept in NAME.err and 1 returned.
point_run() { # NAME ringbench-args...
    local name="$1"
    shift
    log "$name"
    if ! ringbench_run "$name" "$ADDR" "$@" 2>"$RUN/$name.err"; then
        log "$name failed: $(grep -v '^\s*$' "$RUN/$name.err" | tail -3 | paste -sd' ')"
        return 1
    fi
}

for broker in $BROKERS; do
    ran=" "
    # (the plan on fd 3: nothing the loop runs can read it from stdin)
    while read -r sweep p c <&3; do
        POINT="p$p-c$c"
        if [[ "$ran" == *" $POINT "* ]]; then continue; fi
        ran+="$POINT "
        log "$broker $POINT ($sweep sweep): $p partitions, $c connections"
        if ! broker_start "$broker"; then
            log "$broker did not start for $POINT"
            for w in max rate; do echo "the broker did not start" >"$RUN/$broker-$POINT-$w.err"; done
            continue
        fi
        args=(--topic "p$p" --partitions "$p" --producers $((c < PRODUCERS ? c : PRODUCERS)) --connections "$c"
            --max-in-flight "$MAX_IN_FLIGHT" --consumers 0 --acks 1)
        point_run "$broker-$POINT-max" "${args[@]}" || true
        point_run "$broker-$POINT-rate" "${args[@]}" --rate "$FIXED_RATE" || true
        if pid="$(broker_pid "$broker")" && kill -0 "$pid" 2>/dev/null; then
            broker_stats "$RUN/$broker-$POINT.stats.json" "$pid"
        else
            log "$broker is no longer running after $POINT"
        fi
        broker_stop "$broker"
    done 3<"$RUN/plan"
done

OUT="$RESULTS/$(date -u +%Y-%m-%d)-scale"
if [[ -n "$RB_CPUS$CLIENT_CPUS" ]]; then
    PLACED="One broker at a time${RB_CPUS:+ on CPUs $RB_CPUS (taskset)}, ringbench${CLIENT_CPUS:+ on CPUs $CLIENT_CPUS}."
else
    PLACED="One broker at a time, ringbench on the same cores."
fi
python3 "$HERE/scale_report.py" "$RUN" "$OUT" \
    "bench/run.sh scale (DURATION=$DURATION WARMUP=$WARMUP PARTITIONS=\"$PARTITIONS\" CONNECTIONS=\"$CONNECTIONS\" PARTITIONS_FIXED=$PARTITIONS_FIXED CONNECTIONS_FIXED=$CONNECTIONS_FIXED FIXED_RATE=$FIXED_RATE PRODUCERS=$PRODUCERS MAX_IN_FLIGHT=$MAX_IN_FLIGHT)" \
    "$PLACED" "$FIXED_RATE" "$MAX_IN_FLIGHT"
log "wrote $OUT.md, $OUT.svg and $OUT.json"
