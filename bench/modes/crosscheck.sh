# ringbench checked against Kafka's ProducerPerformance/ConsumerPerformance
#
#   bench/run.sh crosscheck
#
# For Kafka 4.4 and then Ringbroker (--flush os), one broker at a time:
#   1. ProducerPerformance: RECORDS records into topic pp (acks=1, no idempotence, as fast as
#      possible; the Java producer's defaults: batch.size 16 KiB, linger.ms 5, 5 in flight);
#   2. ringbench, the same shape: RECORDS records into topic rb from one connection, 16
#      records (16 KiB) a batch, 5 requests in flight, acks=1;
#   3. ConsumerPerformance (a consumer group, from the earliest offset) reads topic pp;
#   4. ringbench reads topic pp from the beginning (one connection, all partitions).
# Each tool's client CPU time (user+sys of the process tree) is recorded, since on a 2-core
# machine a client that needs more CPU takes it from the broker.
# Writes bench/results/<date>-crosscheck.md and .json (RESULTS_DIR: another directory); keeps
# tool output in the run dir it names.
#
# Environment: RECORDS [1000000] RECORD_SIZE [1024] PARTITIONS [6]
#   RB_PORT [19593] KAFKA_BENCH_PORT [19592] RB_ADMIN_PORT [0] WAIT_QUIET [0]
# shellcheck shell=bash
RECORDS="${RECORDS:-1000000}"
RECORD_SIZE="${RECORD_SIZE:-1024}"
PARTITIONS="${PARTITIONS:-6}"
RB_PORT="${RB_PORT:-19593}"
export KAFKA_BENCH_PORT="${KAFKA_BENCH_PORT:-19592}" KAFKA_BENCH_PARTITIONS="$PARTITIONS"

bench_init crosscheck
require_free_ports "$RB_PORT" "$KAFKA_BENCH_PORT" $((KAFKA_BENCH_PORT + 2))
build_release
rb_private_copy
kafka_provision
wait_quiet "${WAIT_QUIET:-0}"

# timed NAME CMD...: runs CMD with its output in NAME.out and its wall and CPU time in NAME.time.json.
timed() {
    local name="$1"
    shift
    log "$name"
    pin "$CLIENT_CPUS"
    python3 - "$RUN/$name" "${PIN[@]}" "$@" <<'PY'
import json, resource, subprocess, sys, time
out = sys.argv[1]
t = time.time()
with open(out + ".out", "w") as o, open(out + ".err", "w") as e:
    rc = subprocess.call(sys.argv[2:], stdout=o, stderr=e)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
json.dump({"rc": rc, "wall_s": time.time() - t, "cpu_s": r.ru_utime + r.ru_stime}, open(out + ".time.json", "w"))
sys.exit(rc)
PY
}

run_tools() { # NAME BOOTSTRAP
    local n="$1" b="$2"
    java_tool ringbroker.bench.TopicSetup --bootstrap "$b" --create pp --partitions "$PARTITIONS" >&2
    timed "$n-producer-perf" java "-Xmx$CLIENT_HEAP" -cp "$KAFKA_LIB/*" org.apache.kafka.tools.ProducerPerformance --topic pp \
        --num-records "$RECORDS" --record-size "$RECORD_SIZE" --throughput -1 \
        --command-property acks=1 enable.idempotence=false --bootstrap-server "$b"
    timed "$n-ringbench-produce" "$BENCH" --broker "$b" --topic rb --partitions "$PARTITIONS" --producers 1 \
        --consumers 0 --acks 1 --records "$RECORDS" --record-size "$RECORD_SIZE" --batch-records 16 \
        --max-in-flight 5 --warmup 0 --quiet --out "$RUN/$n-ringbench-produce"
    timed "$n-consumer-perf" java "-Xmx$CLIENT_HEAP" -cp "$KAFKA_LIB/*" org.apache.kafka.tools.ConsumerPerformance \
        --bootstrap-server "$b" --topic pp --num-records "$RECORDS" --timeout 120000
    timed "$n-ringbench-consume" "$BENCH" --broker "$b" --topic pp --producers 0 --consumers 1 \
        --from-beginning --warmup 0 --quiet --out "$RUN/$n-ringbench-consume"
}

kafka_start >/dev/null
run_tools kafka "127.0.0.1:$KAFKA_BENCH_PORT"
kafka_stop >/dev/null

rb_start rb "$RB" --listen "127.0.0.1:$RB_PORT" --flush os --default-partitions "$PARTITIONS" \
    --group-initial-rebalance-delay-ms 0
run_tools rb "127.0.0.1:$RB_PORT"
rb_stop rb

OUT="$RESULTS/$(date -u +%Y-%m-%d)-crosscheck"
python3 - "$RUN" "$OUT" "$RECORDS" "$RECORD_SIZE" <<'PY'
import json, os, re, sys
run, out, records, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def t(name): return json.load(open(os.path.join(run, name + ".time.json")))
def text(name): return open(os.path.join(run, name + ".out")).read()
def producer_perf(n):
    # "N records sent, R records/sec (M MB/sec), A ms avg latency, X ms max latency, p50 ms 50th, ..."
    line = [l for l in text(n + "-producer-perf").splitlines() if "records sent" in l][-1]
    rate = float(re.search(r"([\d.]+) records/sec", line).group(1))
    p99 = float(re.search(r"(\d+) ms 99th", line).group(1))
    return rate, p99
def consumer_perf(n):
    # CSV: start.time, end.time, MB, MB.sec, nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
    lines = [l for l in text(n + "-consumer-perf").splitlines() if l and l[0].isdigit()]
    f = [x.strip() for x in lines[-1].split(",")]
    return float(f[9]), int(f[4])
def rb(n, kind):
    return json.load(open(os.path.join(run, f"{n}-ringbench-{kind}", "report.json")))
fig = {}
for n in ["kafka", "rb"]:
    pr, pp99 = producer_perf(n)
    cr, cn = consumer_perf(n)
    rp, rc = rb(n, "produce"), rb(n, "consume")
    fig[n] = {
        "producer_perf_rate": pr, "producer_perf_p99_ms": pp99, "producer_perf_cpu_s": t(n + "-producer-perf")["cpu_s"],
        "ringbench_produce_rate": rp["publish_rate"], "ringbench_produce_p99_ms": rp["publish_latency_ms"]["p99"],
        "ringbench_produce_cpu_s": t(n + "-ringbench-produce")["cpu_s"],
        "consumer_perf_rate": cr, "consumer_perf_records": cn, "consumer_perf_cpu_s": t(n + "-consumer-perf")["cpu_s"],
        "ringbench_consume_rate": rc["consume_rate"], "ringbench_consume_records": rc["records_consumed"],
        "ringbench_consume_cpu_s": t(n + "-ringbench-consume")["cpu_s"],
    }
k, r = fig["kafka"], fig["rb"]
row = lambda label, key, fmt="{:,.0f}": f"| {label} | {fmt.format(k[key])} | {fmt.format(r[key])} | {r[key] / k[key]:.2f}× |"
lines = [
    "# Cross-check: ringbench against Kafka's ProducerPerformance and ConsumerPerformance",
    "",
    f"{records:,} records × {size} B, 6 partitions, acks=1, one broker at a time on the same 2 cores as the client.",
    f"Command: `bench/run.sh crosscheck` (RECORDS={records}). Tool output: `{run}`.",
    "",
    "| figure | Kafka 4.4 | Ringbroker | Ringbroker / Kafka |",
    "|---|---:|---:|---:|",
    row("(a) ProducerPerformance records/s", "producer_perf_rate"),
    row("(a) ringbench records/s (1 connection, 16 KiB batches, 5 in flight)", "ringbench_produce_rate"),
    row("(a) ProducerPerformance p99 ms", "producer_perf_p99_ms"),
    row("(a) ringbench p99 ms", "ringbench_produce_p99_ms", "{:,.1f}"),
    row("(a) client CPU s, ProducerPerformance", "producer_perf_cpu_s", "{:,.1f}"),
    row("(a) client CPU s, ringbench", "ringbench_produce_cpu_s", "{:,.1f}"),
    row("(d) ConsumerPerformance records/s (fetch time only)", "consumer_perf_rate"),
    row("(d) ringbench records/s", "ringbench_consume_rate"),
    row("(d) client CPU s, ConsumerPerformance", "consumer_perf_cpu_s", "{:,.1f}"),
    row("(d) client CPU s, ringbench", "ringbench_consume_cpu_s", "{:,.1f}"),
    "",
]
open(out + ".md", "w").write("\n".join(lines))
json.dump(fig, open(out + ".json", "w"), indent=2)
print("\n".join(lines))
PY
log "wrote $OUT.md and $OUT.json"
