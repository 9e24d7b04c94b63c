# three brokers each: Ringbroker (RF 3, fsync before every ack) vs Kafka (RF 3, no fsync), acks=all
#
#   bench/run.sh cluster
#   bench/run.sh cluster ROUNDS=1 DURATION=5 WARMUP=2 RESULTS_DIR=/tmp/cluster-trial   # a short trial
#
# Each system as a cluster of three brokers on this machine (127.0.0.1), one cluster at a
# time, next to ringbench, in ROUNDS rounds. Every round starts each cluster afresh, on empty
# data directories, in this order:
#   kafka  Apache Kafka 4.4, three KRaft nodes, each a broker and a controller (a voter of the
#          metadata quorum); Kafka's defaults: no fsync (the OS writes back), min.insync.replicas 1
#   rb     Ringbroker, three brokers, every one a voter of the metadata quorum, one shard each
#          (--cpus from RB_NODE_CPUS, --pin false), --flush always: fdatasync before every ack
#   rb1    the same three Ringbroker brokers started afresh, the topic with replication factor 1
# Workloads (ringbench: 1 KiB records, PARTITIONS partitions, PRODUCERS producers, 16 records a
# batch, acks=all; a topic of its own each, created at the controller and settled first: every
# partition with a leader and all its replicas in sync):
#   warm unmeasured max produce on a topic of its own right after the cluster starts, in steps
#        of PREWARM_STEP s whose rates the report lists: PREWARM s on Kafka (its JIT: on two
#        cores three fresh JVMs produce 4x less in their first 20 s under load than after
#        two minutes), RB_PREWARM s on Ringbroker (native code: its steps stay flat)
#   max  max produce throughput, replication factor 3 (and on rb1, factor 1)
#   lat  a fixed rate, the same on both: RATE records/s, else RATE_FRACTION of Kafka's max of
#        the same round; publish latency p50, p99, p99.9. It starts LAT_SETTLE s after the max
#        run ends (and its sync): on this machine's virtual disk fdatasyncs took over 25 ms,
#        some over 50 ms, now and then for a while after Ringbroker's max run had written
#        15 GB, where they otherwise stay under 13 ms, and a broker that syncs every ack waits
#        for each (bench/results/2026-12-06-cluster.md). Kafka, which does not sync, waits as
#        long. The pause made such stalls rarer there, not absent.
# ringbench sends each partition's batches to its leader (a connection per leader and producer,
# MAX_IN_FLIGHT requests in flight on each) and reads the three brokers' CPU time from /proc over
# the measured window (--broker-pid, summed): broker CPU s per GB produced. Before every run a
# sync writes back what earlier runs left dirty, and the report gives the MB/s each run wrote
# to the data directories' disk (the whole device, from /sys/class/block/DEV/stat).
# Figures, each a ratio measured side by side in the same round, the median over the rounds:
#   (1) max throughput, Ringbroker RF 3 / Kafka RF 3
#   (2) publish latency at the fixed rate, Ringbroker / Kafka
#   (3) broker CPU s per GB produced (three brokers together), Ringbroker / Kafka
#   (4) the cost of replication: Ringbroker RF 3 / RF 1 (throughput and CPU per GB)
# Writes bench/results/<date>-cluster.md and .json (RESULTS_DIR: another directory) with each
# round's values too (bench/cluster_report.py), and keeps every run's report.json, .hgrm files
# and latency.svg, and every broker's log, under the run directory it names.
#
# Ports (each listener its own): Ringbroker node N clients RB_PORT+N-1, broker-to-broker
# RB_PORT+2+N, metrics RB_PORT+5+N (19961-19969); Kafka node N PLAINTEXT KAFKA_BENCH_PORT+N-1,
# CONTROLLER KAFKA_BENCH_PORT+2+N (19971-19976).
#
# Environment: ROUNDS [3] DURATION [20] WARMUP [5] PRODUCERS [4] PARTITIONS [6] MAX_IN_FLIGHT [5]
#   RATE [unset] RATE_FRACTION [0.5] PREWARM [150] RB_PREWARM [20] PREWARM_STEP [30] LAT_SETTLE [30]
#   RB_PORT [19961] KAFKA_BENCH_PORT [19971] RB_FLUSH [always]
#   KAFKA_BENCH_HEAP [768M] (each of the three JVMs) RB_NODE_CPUS ["C1 C2 C3": each broker's
#   shard CPU; default the allowed CPUs in turn, "0 1 0" on two cores] RB_FLAGS (more flags
#   for every Ringbroker broker) RB_START_TIMEOUT [60] KAFKA_START_TIMEOUT [120] WAIT_QUIET [0]
# shellcheck shell=bash
ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-20}"
WARMUP="${WARMUP:-5}"
PRODUCERS="${PRODUCERS:-4}"
PARTITIONS="${PARTITIONS:-6}"
MAX_IN_FLIGHT="${MAX_IN_FLIGHT:-5}"
RATE="${RATE:-}"
RATE_FRACTION="${RATE_FRACTION:-0.5}"
LAT_SETTLE="${LAT_SETTLE:-30}"
PREWARM="${PREWARM:-150}"
RB_PREWARM="${RB_PREWARM:-20}"
PREWARM_STEP="${PREWARM_STEP:-30}"
RB_PORT="${RB_PORT:-19961}"
# Ringbroker's flush policy: `always` (fdatasync before every ack) is the comparison the mode
# is for; `os` shows what the fsyncs cost on this disk.
RB_FLUSH="${RB_FLUSH:-always}"
export KAFKA_BENCH_PORT="${KAFKA_BENCH_PORT:-19971}"
# Three JVMs on one machine: Kafka keeps its log in the page cache, not the heap, and 768M
# is ample for a few partitions; three 1G heaps (kafka_start's default, all committed up
# front with -Xms) would take 3 GB from the page cache the three logs and ringbench use.
export KAFKA_BENCH_HEAP="${KAFKA_BENCH_HEAP:-768M}"
read -r -a RB_EXTRA <<<"${RB_FLAGS:-}"
RB_ADDR="127.0.0.1:$RB_PORT"
KAFKA_ADDR="127.0.0.1:$KAFKA_BENCH_PORT"

bench_init cluster
trap cluster_cleanup EXIT
DISK="$(disk_of "$RUN")" # the data directories' disk, for the MB/s each run wrote to it
# shellcheck disable=SC2046 # one port a word
require_free_ports $(cluster_ports)
build_release
rb_private_copy
kafka_provision
wait_quiet "${WAIT_QUIET:-0}"

# One ringbench run against the cluster whose pids are given: acks=all, producers only.
bench() { # NAME ADDR TOPIC REPLICAS PIDS ringbench-args...
    local name="$1" addr="$2" topic="$3" rf="$4" pids="$5"
    shift 5
    settle_disk
    log "round $ROUND: $name"
    local mb0 t0
    mb0="$(disk_written_mb "$DISK")"
    t0="$(date +%s.%N)"
    BENCH_BROKER_PID="$pids" ringbench_run "$name" "$addr" --topic "$topic" --partitions "$PARTITIONS" \
        --replication-factor "$rf" --producers "$PRODUCERS" --consumers 0 --acks -1 \
        --max-in-flight "$MAX_IN_FLIGHT" "$@"
    printf '{"device": "%s", "written_mb": %s, "seconds": %s}\n' "$DISK" \
        "$(python3 -c "import sys; a, b = sys.argv[1:]; print('null' if 'null' in (a, b) else round(float(b) - float(a), 1))" "$mb0" "$(disk_written_mb "$DISK")")" \
        "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')" >"$OUT_DIR/$name.disk.json"
    python3 - "$OUT_DIR/$name/report.json" "$name" "$OUT_DIR/$name.disk.json" <<'EOF' >&2
import json, sys
r = json.load(open(sys.argv[1]))
d = json.load(open(sys.argv[3]))
print(f"[{sys.argv[2]}] {r['publish_rate']:,.0f} records/s, p99 {r['publish_latency_ms']['p99']:.2f} ms, "
      f"{r['replicas']} replicas, partitions led by {r['leader_brokers']} brokers, "
      f"broker CPU {r['broker_cpu_s_per_gb'] or float('nan'):.1f} s/GB, "
      f"disk {d['written_mb'] / d['seconds'] if d['written_mb'] is not None else float('nan'):.0f} MB/s written")
if r["produce_errors"]:
    print(f"[{sys.argv[2]}] WARNING: {r['produce_errors']} records were refused (a leader moved?)")
EOF
}

# The fixed-rate run, LAT_SETTLE s after the writes before it (see the header).
bench_lat() { # NAME ADDR PIDS
    settle_disk
    if ((LAT_SETTLE > 0)); then
        log "round $ROUND: $1 starts in $LAT_SETTLE s (LAT_SETTLE)"
        sleep "$LAT_SETTLE"
    fi
    bench "$1" "$2" lat 3 "$3" --rate "$FIXED"
}

# Unmeasured max produce on topic warm, SECONDS s in PREWARM_STEP s steps (NAME-warm-1, ...).
prewarm() { # NAME ADDR REPLICAS PIDS SECONDS
    local name="$1" addr="$2" rf="$3" pids="$4" left="$5" step i=0
    if ((left <= 0)); then return 0; fi
    cluster_topic "$bs" warm "$PARTITIONS" "$rf"
    while ((left > 0)); do
        step=$((left < PREWARM_STEP ? left : PREWARM_STEP))
        i=$((i + 1))
        DURATION="$step" WARMUP=0 bench "$name-warm-$i" "$addr" warm "$rf" "$pids"
        left=$((left - step))
    done
}

for ((ROUND = 1; ROUND <= ROUNDS; ROUND++)); do
    OUT_DIR="$RUN/round-$ROUND"
    mkdir -p "$OUT_DIR"

    # Kafka first: the fixed rate is a fraction of its max of this round.
    kafkac_start
    bs="$(kafkac_bootstrap)"
    cluster_topic "$bs" max "$PARTITIONS" 3
    cluster_topic "$bs" lat "$PARTITIONS" 3
    pids="$(pids_csv "${KAFKAC_PIDS[@]}")"
    prewarm kafka "$KAFKA_ADDR" 3 "$pids" "$PREWARM"
    bench kafka-max "$KAFKA_ADDR" max 3 "$pids"
    if [[ -n "$RATE" ]]; then
        FIXED="$RATE"
    else
        FIXED="$(python3 -c "print(round($(report_value kafka-max publish_rate) * $RATE_FRACTION))")"
    fi
    echo "$FIXED" >"$OUT_DIR/fixed-rate"
    log "round $ROUND: the fixed-rate runs produce $FIXED records/s"
    bench_lat kafka-lat "$KAFKA_ADDR" "$pids"
    cluster_stats "$OUT_DIR/kafka.stats.json" "${KAFKAC_PIDS[@]}"
    kafkac_stop

    rbc_start rb "${RB_EXTRA[@]}" --flush "$RB_FLUSH"
    bs="$(rbc_bootstrap)"
    cluster_topic "$bs" max "$PARTITIONS" 3
    cluster_topic "$bs" lat "$PARTITIONS" 3
    pids="$(pids_csv "${RBC_PIDS[@]}")"
    prewarm rb "$RB_ADDR" 3 "$pids" "$RB_PREWARM"
    bench rb-max "$RB_ADDR" max 3 "$pids"
    bench_lat rb-lat "$RB_ADDR" "$pids"
    cluster_stats "$OUT_DIR/rb.stats.json" "${RBC_PIDS[@]}"
    rbc_stop rb

    rbc_start rb1 "${RB_EXTRA[@]}" --flush "$RB_FLUSH"
    bs="$(rbc_bootstrap)"
    cluster_topic "$bs" max1 "$PARTITIONS" 1
    pids="$(pids_csv "${RBC_PIDS[@]}")"
    prewarm rb1 "$RB_ADDR" 1 "$pids" "$RB_PREWARM"
    bench rb1-max "$RB_ADDR" max1 1 "$pids"
    cluster_stats "$OUT_DIR/rb1.stats.json" "${RBC_PIDS[@]}"
    rbc_stop rb1
done

OUT="$RESULTS/$(date -u +%Y-%m-%d)-cluster"
mkdir -p "$RESULTS"
if [[ -n "$RATE" ]]; then rate_setting="RATE=$RATE"; else rate_setting="RATE_FRACTION=$RATE_FRACTION"; fi
python3 "$HERE/cluster_report.py" "$RUN" "$OUT" \
    "bench/run.sh cluster ROUNDS=$ROUNDS DURATION=$DURATION WARMUP=$WARMUP PRODUCERS=$PRODUCERS PARTITIONS=$PARTITIONS MAX_IN_FLIGHT=$MAX_IN_FLIGHT $rate_setting PREWARM=$PREWARM RB_PREWARM=$RB_PREWARM PREWARM_STEP=$PREWARM_STEP LAT_SETTLE=$LAT_SETTLE RB_FLUSH=$RB_FLUSH KAFKA_BENCH_HEAP=$KAFKA_BENCH_HEAP RB_NODE_CPUS=\"$(rbc_node_cpus)\"${RB_FLAGS:+ RB_FLAGS=\"$RB_FLAGS\"}"
log "wrote $OUT.md and $OUT.json"
