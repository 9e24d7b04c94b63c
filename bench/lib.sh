# shellcheck shell=bash disable=SC2034  # (the variables set here are read by the modes)
# What every bench mode shares. bench/run.sh sources this file and then the mode's file;
# sourcing it only sets the paths below and defines functions.
#
# Paths (environment overrides in brackets):
#   HERE  bench/      ROOT  the repository      KAFKA_LIB  bench/kafka/target/lib
#   BUILD_DIR [$CARGO_TARGET_DIR, else target]  where cargo builds
#   RB_BIN [BUILD_DIR/release/ringbroker]  the broker binary a run copies (see rb_private_copy)
#   BENCH  BUILD_DIR/release/ringbench
#   RESULTS [bench/results]  where modes that write a dated report put it (RESULTS_DIR overrides)
#
# Run directory and cleanup
#   bench_init NAME        RUN = a new temp dir ringbroker-NAME.XXXXXX, log lines say [NAME],
#                          Kafka works in $RUN/kafka, bench_cleanup runs on exit
#   bench_cleanup          stop whatever is still running (brokers, null broker, BG_PIDS),
#                          delete broker data, private binaries and the base worktree;
#                          KEEP_RUN_DIR=0 also deletes RUN after a successful run
# Building
#   build_release          cargo build --release -p ringbroker -p ringbench (SKIP_BUILD=1: skip)
#   rb_private_copy        copy RB_BIN into RUN and point RB at the copy, so a rebuild in the
#                          shared target dir cannot swap the binary mid-run
#   rb_build_base REV      build REV (release) in a temporary git worktree; RB_BASE is its binary
#   kafka_provision [if-missing]   mvn package: Kafka jars into KAFKA_LIB (SKIP_BUILD=1: only check)
# CPU pinning (taskset; empty = no pinning)
#   RB_CPUS  the broker under test (Ringbroker, Kafka's JVM, the null broker)
#   CLIENT_CPUS  the load tools (ringbench, the Java clients)
#   pin CPUS               PIN = (taskset -c CPUS), or () when CPUS is empty
# Ports
#   port_busy PORT, listeners_of PORT, require_free_ports PORT...
#   wait_port PORT SECONDS [PID]   until PORT accepts connections; 1 if PID exits or time runs out
# Ringbroker (one at a time; RB_PID, RB_OUT, RB_LOG, RB_CMD, RB_ADMIN_ADDR describe it)
#   rb_start LABEL BINARY ARGS...  start on $RB_DATA with the admin/metrics listener on
#                          127.0.0.1:$RB_ADMIN_PORT; stdout in $RUN/LABEL.out, log in
#                          $RUN/LABEL.log; wait until it listens; returns 1 if it does not
#                          (KEEP_DATA=1: keep the previous data)
#   rb_admin_listen        the --admin-listen value rb_start passes (RB_ADMIN_PORT=off: off)
#   rb_stop [LABEL]        SIGTERM, wait (SIGKILL after 30 s; RB_KILLED=1 then)
#   rb_addr LISTENER       the address a named listener bound, from the broker's ready lines
#   rb_metric NAME         a metric of the running broker, summed over its shards
# Apache Kafka (KRaft, one combined broker+controller node)
#   KAFKA_BENCH_PORT [19092] (the controller: PORT+2)  KAFKA_BENCH_DIR [$RUN/kafka, or
#   ${TMPDIR:-/tmp}/ringbroker-bench-kafka outside a run]  KAFKA_BENCH_HEAP [1G]
#   KAFKA_BENCH_PARTITIONS [6]  KAFKA_BENCH_EXTRA (extra server.properties lines)
#   kafka_start [PROPERTIES]  fresh work dir, StorageTool format, start, wait until ready
#   kafka_wait [SECONDS]   until it answers a DescribeCluster
#   kafka_stop             SIGTERM, wait (SIGKILL after 30 s); keeps its log, deletes its data
#   kafka_pid              its pid (1 if it is not running)
# ringbench and the Java tools
#   null_start ADDR RECORDS, null_stop   ringbench's null broker
#   ringbench_run NAME ADDR ARGS...      a run of DURATION s after WARMUP s; report in
#                          $OUT_DIR/NAME/ (OUT_DIR defaults to RUN), summary in $OUT_DIR/NAME.txt;
#                          with BENCH_BROKER_PID set, the report has that process's CPU time
#   report_value NAME KEY  a figure from that report.json (publish_rate, consume_rate, ...)
#   java_tool MAIN ARGS... java -Xmx$CLIENT_HEAP [512M] -cp KAFKA_LIB/* MAIN ARGS, on CLIENT_CPUS
#                          (JAVA_TIMEOUT=S: killed after S s)
#   cost_rounds CONFIG...  ROUNDS rounds of (a) produce and (d) consume per configuration,
#                          then bench/cost_table.py (see the function)
# /proc
#   proc_ticks PID         utime+stime of a process (all threads), clock ticks
#   ticks_to_s TICKS       ... in seconds
#   proc_cpu_s PID         utime+stime in seconds
#   proc_kib PID KEY       a /proc/PID/status figure in KiB (VmHWM = peak RSS, VmRSS)
#   broker_stats FILE PID  {"cpu_s", "peak_rss_kib"} of a broker, as JSON into FILE
#   sys_busy, sys_steal    machine-wide busy and steal ticks (/proc/stat)
#   wait_quiet SECONDS     sample 2 s of machine CPU; wait up to SECONDS for it to drop under
#                          0.2 busy cores; IDLE_BUSY is the last sample; warns if still busy

HERE="${HERE:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}"
ROOT="${ROOT:-$(cd "$HERE/.." && pwd)}"
KAFKA_LIB="$HERE/kafka/target/lib"
BUILD_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
RB_BIN="${RB_BIN:-$BUILD_DIR/release/ringbroker}"
BENCH="$BUILD_DIR/release/ringbench"
RESULTS="${RESULTS_DIR:-$HERE/results}"
RB_ADMIN_PORT="${RB_ADMIN_PORT:-0}"
RB_CPUS="${RB_CPUS:-}"
CLIENT_CPUS="${CLIENT_CPUS:-}"
CLIENT_HEAP="${CLIENT_HEAP:-512M}"
CLK_TCK="$(getconf CLK_TCK)"

NAME="${NAME:-bench}"
RUN=""
RB=""
RB_BASE=""
RB_DATA=""
RB_PID=""
RB_OUT=""
RB_LOG=""
RB_CMD=()
RB_ADMIN_ADDR=""
RB_KILLED=0
NULL_PID=""
BG_PIDS=()
PIN=()

log() { echo "[$NAME $(date -u +%H:%M:%S)] $*" >&2; }

# ---- run directory and cleanup ------------------------------------------------------------

bench_init() { # NAME
    NAME="$1"
    RUN="$(mktemp -d "${TMPDIR:-/tmp}/ringbroker-$NAME.XXXXXX")"
    RB_DATA="$RUN/rb-data"
    export KAFKA_BENCH_DIR="$RUN/kafka"
    trap bench_cleanup EXIT
}

bench_cleanup() {
    local rc=$?
    local p
    for p in "${BG_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    null_stop
    rb_stop
    if kafka_pid >/dev/null 2>&1; then kafka_stop >/dev/null 2>&1 || true; fi
    rm -rf "$RB_DATA" "$KAFKA_BENCH_DIR/data" "$RUN/ringbroker" "$RUN/ringbroker-base"
    if [[ -d "$RUN/base-src" ]]; then git -C "$ROOT" worktree remove --force "$RUN/base-src" 2>/dev/null || true; fi
    if [[ "${KEEP_RUN_DIR:-1}" == 0 && $rc -eq 0 ]]; then rm -rf "$RUN"; else log "logs and tool output kept in $RUN"; fi
}

# ---- building -----------------------------------------------------------------------------

build_release() {
    if [[ "${SKIP_BUILD:-0}" == 1 ]]; then return 0; fi
    log "cargo build --release -p ringbroker -p ringbench"
    (cd "$ROOT" && cargo build --release -p ringbroker -p ringbench 2>&1 | tail -1 >&2)
}

rb_private_copy() {
    cp "$RB_BIN" "$RUN/ringbroker"
    RB="$RUN/ringbroker"
}

rb_build_base() { # REV
    local rev
    rev="$(git -C "$ROOT" rev-parse --verify --short "$1^{commit}")" || { log "no git revision '$1'"; exit 1; }
    log "building $1 ($rev, release) in a temporary worktree"
    git -C "$ROOT" worktree add --detach "$RUN/base-src" "$rev" >/dev/null 2>&1
    # Its own target directory, kept between runs so that only the first one pays for the
    # dependencies.
    if ! (cd "$RUN/base-src" && CARGO_TARGET_DIR="$ROOT/target/bench-base" cargo build --release -p ringbroker \
        >"$RUN/build-base.log" 2>&1); then
        log "building $1 failed; tail of $RUN/build-base.log:"
        tail -20 "$RUN/build-base.log" >&2
        exit 1
    fi
    tail -1 "$RUN/build-base.log" >&2
    cp "$ROOT/target/bench-base/release/ringbroker" "$RUN/ringbroker-base"
    RB_BASE="$RUN/ringbroker-base"
}

kafka_jars_present() {
    ls "$KAFKA_LIB"/kafka_2.13-*.jar >/dev/null 2>&1 && ls "$KAFKA_LIB"/ringbroker-bench-kafka-*.jar >/dev/null 2>&1
}

kafka_provision() { # [if-missing]
    if [[ "${SKIP_BUILD:-0}" == 1 || "${1:-}" == if-missing ]] && kafka_jars_present; then return 0; fi
    log "mvn package (bench/kafka/pom.xml)"
    mvn -q -B -f "$HERE/kafka/pom.xml" package -DskipTests >&2
    kafka_jars_present || { log "no Kafka jars in $KAFKA_LIB after mvn package"; return 1; }
}

# ---- CPU pinning --------------------------------------------------------------------------

pin() { # CPUS
    PIN=()
    if [[ -n "${1:-}" ]]; then PIN=(taskset -c "$1"); fi
}

# ---- ports --------------------------------------------------------------------------------

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# Who listens on PORT (ss output, one line), for messages.
listeners_of() { ss -ltnpH "sport = :$1" 2>/dev/null | sed 's/  */ /g' | paste -sd';' || true; }

require_free_ports() { # PORT...
    local p
    for p in "$@"; do
        if port_busy "$p"; then
            log "127.0.0.1:$p is already in use ($(listeners_of "$p")): pick free ports (RB_PORT, KAFKA_BENCH_PORT, ...)"
            exit 1
        fi
    done
}

wait_port() { # PORT SECONDS [PID]
    local deadline=$((SECONDS + $2))
    until port_busy "$1"; do
        if [[ -n "${3:-}" ]] && ! kill -0 "$3" 2>/dev/null; then return 1; fi
        if ((SECONDS >= deadline)); then return 1; fi
        sleep 0.2
    done
}

# ---- Ringbroker ---------------------------------------------------------------------------

rb_start() { # LABEL BINARY ARGS...
    local label="$1" bin="$2"
    shift 2
    if [[ -n "$RB_PID" ]]; then
        log "$label: a broker is still running (pid $RB_PID)"
        return 1
    fi
    if [[ -z "${KEEP_DATA:-}" ]]; then rm -rf "$RB_DATA"; fi
    RB_OUT="$RUN/$label.out"
    RB_LOG="$RUN/$label.log"
    pin "$RB_CPUS"
    RB_CMD=("${PIN[@]}" "$bin" --data-dir "$RB_DATA" --admin-listen "$(rb_admin_listen)" "$@")
    log "$label: ${RB_CMD[*]}"
    # Emptied here, not by the background job's redirect: that one may run after the wait
    # below has already found the previous round's ready line in the same file.
    : >"$RB_OUT"
    "${RB_CMD[@]}" >"$RB_OUT" 2>"$RB_LOG" </dev/null &
    RB_PID=$!
    local deadline=$((SECONDS + ${RB_START_TIMEOUT:-30}))
    until grep -q "^ringbroker listening on" "$RB_OUT" 2>/dev/null; do
        if ! kill -0 "$RB_PID" 2>/dev/null; then
            log "$label: the broker exited at start; log tail:"
            tail -20 "$RB_LOG" >&2
            wait "$RB_PID" 2>/dev/null || true
            RB_PID=""
            return 1
        fi
        if ((SECONDS >= deadline)); then
            log "$label: not listening after ${RB_START_TIMEOUT:-30} s; log tail:"
            tail -20 "$RB_LOG" >&2
            rb_stop "$label"
            return 1
        fi
        sleep 0.1
    done
    RB_ADMIN_ADDR="$(awk '$1 == "ringbroker" && $2 == "admin" { print $NF }' "$RB_OUT")"
    # Ringbroker binds with SO_REUSEPORT: a second process on one of its ports would
    # silently take part of the connections.
    if command -v ss >/dev/null; then
        local a
        while read -r a; do
            if listeners_of "${a##*:}" | grep -v "pid=$RB_PID," | grep -q .; then
                log "$label: another process also listens on $a: $(listeners_of "${a##*:}")"
                rb_stop "$label"
                return 1
            fi
        done < <(awk '/^ringbroker (listener |listening on |admin listening on )/ { print $NF }' "$RB_OUT" | sort -u)
    fi
}

# The --admin-listen value for RB_ADMIN_PORT: port 0 (the default) lets the kernel pick a free
# port, so the metrics listener never collides with another broker's (9644 by default).
rb_admin_listen() { if [[ "$RB_ADMIN_PORT" == off ]]; then echo off; else echo "127.0.0.1:$RB_ADMIN_PORT"; fi; }

# SIGTERM PID, wait up to 30 s, then SIGKILL; returns 2 if it had to kill.
stop_pid() { # PID LABEL
    kill -TERM "$1" 2>/dev/null || true
    local i
    for ((i = 0; i < 300; i++)); do
        kill -0 "$1" 2>/dev/null || return 0
        sleep 0.1
    done
    log "$2: still running 30 s after SIGTERM: SIGKILL"
    kill -KILL "$1" 2>/dev/null || true
    return 2
}

rb_stop() { # [LABEL]
    RB_KILLED=0
    if [[ -z "$RB_PID" ]]; then return 0; fi
    stop_pid "$RB_PID" "${1:-ringbroker}" || RB_KILLED=1
    wait "$RB_PID" 2>/dev/null || true
    RB_PID=""
}

rb_metric() { # NAME
    curl -s "http://$RB_ADMIN_ADDR/metrics" | awk -v n="$1" 'index($1, n "{") == 1 || $1 == n { s += $2 } END { print s + 0 }'
}

threads_named() { # PID GLOB: the process's threads whose name matches GLOB, lowest-numbered
    # first. Threads are named for the thread that made them: glommio's executor of shard 0
    # is `shard-0-1` and so is its blocking pool's thread, made after it; the cleaner's is
    # `shard-0-1-clean` (15 characters).
    local t comm
    for t in $(ls /proc/"$1"/task | sort -n); do
        comm="$(cat /proc/"$1"/task/"$t"/comm 2>/dev/null)" || continue
        # shellcheck disable=SC2053  # GLOB is a pattern
        if [[ "$comm" == $2 ]]; then echo "$t"; fi
    done
}

thread_schedstat() { # PID GLOB: the schedstat of the first of `threads_named`: ns on a CPU,
    # ns runnable but waiting for one, times it ran.
    local t
    t="$(threads_named "$1" "$2" | head -1)"
    if [[ -n "$t" ]]; then cat /proc/"$1"/task/"$t"/schedstat; else echo "0 0 0"; fi
}

thread_cpu_ns() { # PID GLOB: CPU time so far of the process's threads whose name matches
    # GLOB, ns.
    local t n=0
    for t in $(threads_named "$1" "$2"); do
        n=$((n + $(cut -d' ' -f1 /proc/"$1"/task/"$t"/schedstat 2>/dev/null || echo 0)))
    done
    echo "$n"
}

rb_addr() { # LISTENER
    awk -v n="$1" '$1 == "ringbroker" && $2 == "listener" && $3 == n { print $NF }' "$RB_OUT"
}

# ---- Apache Kafka -------------------------------------------------------------------------
# Settings are Kafka's defaults apart from what one node needs (replication factors 1) and
# num.partitions; in particular no fsync per message (log.flush.* unset: the OS writes back).

kafka_port() { echo "${KAFKA_BENCH_PORT:-19092}"; }
kafka_dir() { echo "${KAFKA_BENCH_DIR:-${TMPDIR:-/tmp}/ringbroker-bench-kafka}"; }

kafka_pid() {
    local f pid
    f="$(kafka_dir)/kafka.pid"
    [[ -f "$f" ]] || return 1
    pid="$(cat "$f")"
    [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

kafka_write_config() { # DIR PORT
    local dir="$1" port="$2"
    cat >"$dir/server.properties" <<EOF
# Generated by bench/lib.sh: one node acting as broker and KRaft controller.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$((port + 2))
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$((port + 2))
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$dir/data
num.partitions=${KAFKA_BENCH_PARTITIONS:-6}
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
EOF
    # Extra server properties, one per line (e.g. log.flush.interval.messages=1 for fsync).
    if [[ -n "${KAFKA_BENCH_EXTRA:-}" ]]; then printf '%s\n' "$KAFKA_BENCH_EXTRA" >>"$dir/server.properties"; fi
}

kafka_wait() { # [SECONDS]
    local secs="${1:-90}" port pid
    port="$(kafka_port)"
    pid="$(kafka_pid 2>/dev/null || true)"
    # First the port (cheap, quiet), then a real DescribeCluster round trip.
    if ! wait_port "$port" "$secs" "$pid"; then
        log "Kafka: port $port not open after $secs s, or the broker exited"
        return 1
    fi
    java -cp "$KAFKA_LIB/*" ringbroker.bench.TopicSetup --bootstrap "127.0.0.1:$port" --wait-ready "$secs" >&2
}

kafka_start() { # [PROPERTIES]
    local dir port heap pid p cluster_id
    dir="$(kafka_dir)"
    port="$(kafka_port)"
    heap="${KAFKA_BENCH_HEAP:-1G}"
    kafka_provision if-missing
    if pid="$(kafka_pid)"; then
        log "Kafka: already running (pid $pid)"
        return 1
    fi
    # Something else on our ports would answer the readiness probe in Kafka's place.
    for p in "$port" $((port + 2)); do
        if port_busy "$p"; then
            log "Kafka: 127.0.0.1:$p is already in use ($(listeners_of "$p")); set KAFKA_BENCH_PORT to another port"
            return 1
        fi
    done
    rm -rf "$dir"
    mkdir -p "$dir/data"
    KAFKA_BENCH_EXTRA="${1:-${KAFKA_BENCH_EXTRA:-}}" kafka_write_config "$dir" "$port"
    cluster_id="$(java -cp "$KAFKA_LIB/*" kafka.tools.StorageTool random-uuid)"
    log "Kafka: format $dir/data (cluster id $cluster_id)"
    java -cp "$KAFKA_LIB/*" kafka.tools.StorageTool format --config "$dir/server.properties" \
        --cluster-id "$cluster_id" >"$dir/format.log" 2>&1 || { cat "$dir/format.log" >&2; return 1; }
    log "Kafka: start on 127.0.0.1:$port (heap $heap${RB_CPUS:+, CPUs $RB_CPUS})"
    pin "$RB_CPUS"
    # The JVM options Kafka's launcher uses by default (G1, short pauses, headless).
    nohup "${PIN[@]}" java "-Xms$heap" "-Xmx$heap" -server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
        -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true \
        -Dlog4j2.configurationFile="$HERE/kafka/src/main/resources/log4j2.properties" \
        -cp "$KAFKA_LIB/*" kafka.Kafka "$dir/server.properties" >"$dir/kafka.log" 2>&1 </dev/null &
    pid=$!
    echo "$pid" >"$dir/kafka.pid"
    if ! kafka_wait 90; then
        log "Kafka: not ready; log tail:"
        tail -20 "$dir/kafka.log" >&2
        kafka_stop
        return 1
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
        log "Kafka: exited right after the port answered; log tail:"
        tail -20 "$dir/kafka.log" >&2
        rm -f "$dir/kafka.pid"
        return 1
    fi
    if command -v ss >/dev/null && ! listeners_of "$port" | grep -q "pid=$pid,"; then
        log "Kafka: 127.0.0.1:$port is not served by Kafka (pid $pid): $(listeners_of "$port")"
        kafka_stop
        return 1
    fi
    log "Kafka: ready (pid $pid)"
}

kafka_stop() {
    local dir pid
    dir="$(kafka_dir)"
    if pid="$(kafka_pid)"; then
        stop_pid "$pid" Kafka || true
        wait "$pid" 2>/dev/null || true
        log "Kafka: stopped (pid $pid)"
    fi
    # A stale pid file could later name an unrelated process that reused the pid.
    rm -f "$dir/kafka.pid"
    rm -rf "$dir/data"
}

# ---- ringbench and the Java tools ---------------------------------------------------------

null_start() { # ADDR RECORDS
    pin "$RB_CPUS"
    "${PIN[@]}" "$BENCH" --null-broker "$1" --null-records "$2" >"$RUN/null.log" 2>&1 &
    NULL_PID=$!
    local i
    for ((i = 0; i < 100; i++)); do
        if grep -q "^null broker listening on" "$RUN/null.log" 2>/dev/null; then return 0; fi
        kill -0 "$NULL_PID" 2>/dev/null || break
        sleep 0.1
    done
    log "the null broker did not start:"
    cat "$RUN/null.log" >&2
    null_stop
    return 1
}

null_stop() {
    if [[ -z "$NULL_PID" ]]; then return 0; fi
    kill "$NULL_PID" 2>/dev/null || true
    wait "$NULL_PID" 2>/dev/null || true
    NULL_PID=""
}

ringbench_run() { # NAME ADDR ARGS...
    local name="$1" addr="$2" dir="${OUT_DIR:-$RUN}" cpu=()
    shift 2
    pin "$CLIENT_CPUS"
    if [[ -n "${BENCH_BROKER_PID:-}" ]]; then cpu=(--broker-pid "$BENCH_BROKER_PID"); fi
    "${PIN[@]}" "$BENCH" --broker "$addr" --quiet --duration "$DURATION" --warmup "$WARMUP" --out "$dir/$name" \
        "${cpu[@]}" "$@" >"$dir/$name.txt"
}

report_value() { # NAME KEY
    python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' \
        "${OUT_DIR:-$RUN}/$1/report.json" "$2"
}

java_tool() { # MAIN ARGS...   (JAVA_TIMEOUT=S: killed after S seconds)
    local t=()
    if [[ -n "${JAVA_TIMEOUT:-}" ]]; then t=(timeout "$JAVA_TIMEOUT"); fi
    pin "$CLIENT_CPUS"
    "${t[@]}" "${PIN[@]}" java "-Xmx$CLIENT_HEAP" -cp "$KAFKA_LIB/*" "$@"
}

# The side-by-side cost modes (security-cost, topic-config-cost, ab): ROUNDS rounds, each
# running every CONFIG in turn. For each, the mode's cost_start CONFIG starts a broker on ADDR
# (and sets it up; it may set COST_PRODUCE_ARGS, extra ringbench flags for the producers), then
#   (a) max produce throughput: PRODUCERS producers, acks=1, DURATION s after WARMUP s;
#   (d) consume throughput: fill topic d with D_RECORDS records, then 2 consumers re-read it
#       from the beginning (--rewind) for DURATION s;
# and the broker stops. Prints bench/cost_table.py's table: medians and each configuration's
# ratio to COST_REF [plain] (the median, and the range of the per-round ratios).
cost_rounds() { # CONFIG...
    local round config addr="${ADDR:?cost_rounds: the mode sets ADDR}"
    for ((round = 1; round <= ROUNDS; round++)); do
        for config in "$@"; do
            log "round $round/$ROUNDS: $config"
            COST_PRODUCE_ARGS=()
            cost_start "$config"
            ringbench_run "r$round-$config-a" "$addr" --topic a --producers "$PRODUCERS" --consumers 0 --acks 1 \
                "${COST_PRODUCE_ARGS[@]}"
            ringbench_run "r$round-$config-d-fill" "$addr" --topic d --producers "$PRODUCERS" --consumers 0 --acks 1 \
                "${COST_PRODUCE_ARGS[@]}" --records "$D_RECORDS" --warmup 0
            ringbench_run "r$round-$config-d" "$addr" --topic d --producers 0 --consumers 2 --from-beginning --rewind
            rb_stop "$config"
        done
    done
    python3 "$HERE/cost_table.py" --ref "${COST_REF:-plain}" "$RUN" "$ROUNDS" "$@"
}

# ---- /proc --------------------------------------------------------------------------------

proc_ticks() { awk '{ s = $0; sub(/^.*\) /, "", s); split(s, f, " "); print f[12] + f[13] }' "/proc/$1/stat"; }
ticks_to_s() { awk -v t="$1" -v h="$CLK_TCK" 'BEGIN { printf "%.3f", t / h }'; }
proc_cpu_s() { awk -v t="$(proc_ticks "$1")" -v h="$CLK_TCK" 'BEGIN { printf "%.2f", t / h }'; }
proc_kib() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }
broker_stats() { printf '{"cpu_s": %s, "peak_rss_kib": %s}\n' "$(proc_cpu_s "$2")" "$(proc_kib "$2" VmHWM)" >"$1"; }

# Machine-wide busy ticks (user+nice+system+irq+softirq) and steal ticks.
sys_busy() { awk '/^cpu /{ print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }
sys_steal() { awk '/^cpu /{ print $9 }' /proc/stat; }

# Other work on the machine skews every figure, most of all on two shared cores.
wait_quiet() { # SECONDS
    local deadline=$((SECONDS + ${1:-0})) b0 b1
    while :; do
        b0="$(sys_busy)"
        sleep 2
        b1="$(sys_busy)"
        IDLE_BUSY="$(awk -v t=$((b1 - b0)) -v h="$CLK_TCK" 'BEGIN { printf "%.2f", t / h / 2 }')"
        if awk -v b="$IDLE_BUSY" 'BEGIN { exit !(b <= 0.2) }' || ((SECONDS >= deadline)); then break; fi
        log "waiting for a quiet machine ($IDLE_BUSY cores busy)"
        sleep 3
    done
    if awk -v b="$IDLE_BUSY" 'BEGIN { exit !(b > 0.2) }'; then
        log "WARNING: the machine is already busy ($IDLE_BUSY cores in use before start); top processes:"
        ps -eo pcpu,pid,comm --sort=-pcpu | head -4 >&2
    fi
}

# ---- three-broker clusters (bench/modes/cluster.sh) ----
# Three brokers of one system at a time on this machine, every listener on a port of its own,
# each broker with its own data directory (under RB_DATA and KAFKA_BENCH_DIR/data, which
# bench_cleanup deletes). Node N (1-3) listens on:
#   Ringbroker  clients RB_PORT+N-1 [19961-19963], broker-to-broker (the metadata quorum and the
#               partitions' raft groups) RB_PORT+2+N [19964-19966], admin/metrics RB_PORT+5+N
#               [19967-19969]
#   Kafka       PLAINTEXT KAFKA_BENCH_PORT+N-1 [19971-19973], CONTROLLER KAFKA_BENCH_PORT+2+N
#               [19974-19976]
#   cluster_ports          all fifteen ports, for require_free_ports
#   cluster_cleanup        the mode's EXIT trap: stop both clusters, then bench_cleanup
#   cpu_list_expand LIST   "0-2,5" -> "0 1 2 5"
# Ringbroker (RBC_PIDS: node N's pid at index N-1; node N's output in $RUN/LABEL-N.out and .log)
#   rbc_start LABEL ARGS...  start all three at once (a broker is ready only once a quorum of
#                          its peers is up), one shard each (--cpus from RB_NODE_CPUS, --pin false),
#                          ARGS given to every broker; wait for every broker's ready line
#   rbc_stop [LABEL]       SIGTERM to all three, wait (SIGKILL after 30 s)
#   rbc_bootstrap          the client addresses, comma-separated
# Apache Kafka (KAFKAC_PIDS; node N works in $KAFKA_BENCH_DIR/node-N, logs in kafka.log there)
#   kafkac_write_config DIR N   server.properties of node N: broker and KRaft controller, one of
#                          three voters; Kafka's defaults otherwise (no fsync per message,
#                          replication factors 3 for the internal topics)
#   kafkac_start [PROPERTIES]   one cluster id, StorageTool format of each node, start the three
#                          JVMs (-Xms/-Xmx KAFKA_BENCH_HEAP each), wait until DescribeCluster lists 3
#   kafkac_stop            SIGTERM to all three, wait (SIGKILL after 30 s); keeps the logs
#   kafkac_bootstrap       the PLAINTEXT addresses, comma-separated
# Both
#   cluster_topic BOOTSTRAP TOPIC PARTITIONS REPLICAS   create it with the ringbroker admin CLI
#                          ($RB topic create: at the controller), retried while brokers are still
#                          registering; wait until every partition has a leader and all its replicas
#                          in sync; logs each partition's leader
#   pids_csv PID...        "p1,p2,p3" (ringbench --broker-pid takes a list: CPU time summed)
#   cluster_stats FILE PID...   {"cpu_s", "peak_rss_kib"} summed over the processes, and per node
#   disk_of PATH           the block device PATH's filesystem is on (vda, nvme0n1p1, ...), if any
#   disk_written_mb DEV    MB (10^6 B) written to DEV since boot (/sys/class/block/DEV/stat)
#   settle_disk            sync: write back what earlier runs left dirty (Kafka does not fsync)
#                          so that a run starts on an idle disk; logs how long it took

RBC_PIDS=()
KAFKAC_PIDS=()

cluster_ports() {
    local rb="${RB_PORT:-19961}" k="${KAFKA_BENCH_PORT:-19971}" i
    for ((i = 0; i < 9; i++)); do echo $((rb + i)); done
    for ((i = 0; i < 6; i++)); do echo $((k + i)); done
}

cluster_cleanup() {
    local rc=$?
    set +e
    rbc_stop >/dev/null 2>&1
    kafkac_stop >/dev/null 2>&1
    (exit "$rc") # bench_cleanup reads the exit status from $?
    bench_cleanup
}

cpu_list_expand() { # LIST
    echo "$1" | awk -F, '{ for (i = 1; i <= NF; i++) { n = split($i, r, "-"); for (c = r[1]; c <= r[n]; c++) printf "%s%d", (o++ ? " " : ""), c } } END { print "" }'
}

rbc_bootstrap() {
    local rb="${RB_PORT:-19961}"
    echo "127.0.0.1:$rb,127.0.0.1:$((rb + 1)),127.0.0.1:$((rb + 2))"
}

# Each broker's shard CPU: RB_NODE_CPUS ("C1 C2 C3"), by default the allowed CPUs in turn
# (RB_CPUS if set, else this process's), as ringbroker dev-cluster and the test suite place
# them. With --pin false a shard's thread floats over its --cpus set only, so three brokers on
# `--cpus 0` would all share CPU 0.
rbc_node_cpus() {
    if [[ -n "${RB_NODE_CPUS:-}" ]]; then
        echo "$RB_NODE_CPUS"
        return
    fi
    local cpus
    read -r -a cpus <<<"$(cpu_list_expand "${RB_CPUS:-$(awk '$1 == "Cpus_allowed_list:" { print $2 }' /proc/self/status)}")"
    echo "${cpus[0]} ${cpus[1 % ${#cpus[@]}]} ${cpus[2 % ${#cpus[@]}]}"
}

rbc_start() { # LABEL ARGS...
    local label="$1" rb="${RB_PORT:-19961}" voters cpus i out deadline
    shift
    if ((${#RBC_PIDS[@]})); then
        log "$label: a Ringbroker cluster is still running (pids ${RBC_PIDS[*]})"
        return 1
    fi
    voters="1@127.0.0.1:$((rb + 3)),2@127.0.0.1:$((rb + 4)),3@127.0.0.1:$((rb + 5))"
    read -r -a cpus <<<"$(rbc_node_cpus)"
    rm -rf "$RB_DATA"
    pin "$RB_CPUS"
    for i in 1 2 3; do
        mkdir -p "$RB_DATA/broker-$i"
        out="$RUN/$label-$i.out"
        RB_CMD=("${PIN[@]}" "$RB" --node-id "$i" --listen "127.0.0.1:$((rb + i - 1))"
            --cluster-listen "127.0.0.1:$((rb + 2 + i))" --controller-quorum-voters "$voters"
            --admin-listen "127.0.0.1:$((rb + 5 + i))" --cpus "${cpus[i - 1]}" --pin false
            --data-dir "$RB_DATA/broker-$i" "$@")
        log "$label node $i: ${RB_CMD[*]}"
        : >"$out"
        "${RB_CMD[@]}" >"$out" 2>"$RUN/$label-$i.log" </dev/null &
        RBC_PIDS+=($!)
    done
    deadline=$((SECONDS + ${RB_START_TIMEOUT:-60}))
    for i in 1 2 3; do
        until grep -q "^ringbroker listening on" "$RUN/$label-$i.out" 2>/dev/null; do
            if ! kill -0 "${RBC_PIDS[i - 1]}" 2>/dev/null || ((SECONDS >= deadline)); then
                log "$label: node $i exited at start or is not listening after ${RB_START_TIMEOUT:-60} s; log tail:"
                tail -20 "$RUN/$label-$i.log" >&2
                rbc_stop "$label"
                return 1
            fi
            sleep 0.2
        done
    done
    # Ringbroker binds with SO_REUSEPORT: another process on one of its ports would silently
    # take part of the connections (as rb_start checks).
    if command -v ss >/dev/null; then
        local a
        for i in 1 2 3; do
            while read -r a; do
                if listeners_of "${a##*:}" | grep -v "pid=${RBC_PIDS[i - 1]}," | grep -q .; then
                    log "$label: another process also listens on $a: $(listeners_of "${a##*:}")"
                    rbc_stop "$label"
                    return 1
                fi
            done < <(awk '/^ringbroker (listener |listening on |admin listening on )/ { print $NF }' "$RUN/$label-$i.out" | sort -u)
        done
    fi
    log "$label: three brokers ready (pids ${RBC_PIDS[*]}, bootstrap $(rbc_bootstrap))"
}

# SIGTERM to every PID at once, then wait up to 30 s for each; SIGKILL what is left.
stop_pids() { # LABEL PID...
    local label="$1" p i
    shift
    for p in "$@"; do kill -TERM "$p" 2>/dev/null || true; done
    for ((i = 0; i < 300; i++)); do
        local alive=0
        for p in "$@"; do if kill -0 "$p" 2>/dev/null; then alive=1; fi; done
        ((alive)) || break
        sleep 0.1
    done
    for p in "$@"; do
        if kill -0 "$p" 2>/dev/null; then
            log "$label: pid $p still running 30 s after SIGTERM: SIGKILL"
            kill -KILL "$p" 2>/dev/null || true
        fi
        wait "$p" 2>/dev/null || true
    done
}

rbc_stop() { # [LABEL]
    if ((${#RBC_PIDS[@]} == 0)); then return 0; fi
    stop_pids "${1:-ringbroker cluster}" "${RBC_PIDS[@]}"
    RBC_PIDS=()
}

kafkac_bootstrap() {
    local k="${KAFKA_BENCH_PORT:-19971}"
    echo "127.0.0.1:$k,127.0.0.1:$((k + 1)),127.0.0.1:$((k + 2))"
}

kafkac_write_config() { # DIR N
    local dir="$1" n="$2" k="${KAFKA_BENCH_PORT:-19971}"
    cat >"$dir/node-$n/server.properties" <<EOP
# Generated by bench/lib.sh (kafkac_write_config): node $n of three, each a broker and a KRaft
# controller (a voter of the metadata quorum). Everything else is Kafka's default: no fsync
# per message, replication factor 3 and min.insync.replicas 2 for the internal topics,
# min.insync.replicas 1 for others.
process.roles=broker,controller
node.id=$n
controller.quorum.voters=1@127.0.0.1:$((k + 3)),2@127.0.0.1:$((k + 4)),3@127.0.0.1:$((k + 5))
listeners=PLAINTEXT://127.0.0.1:$((k + n - 1)),CONTROLLER://127.0.0.1:$((k + 2 + n))
advertised.listeners=PLAINTEXT://127.0.0.1:$((k + n - 1))
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$dir/data/node-$n
EOP
    if [[ -n "${KAFKA_BENCH_EXTRA:-}" ]]; then printf '%s\n' "$KAFKA_BENCH_EXTRA" >>"$dir/node-$n/server.properties"; fi
}

kafkac_start() { # [PROPERTIES]
    local dir heap cluster_id n deadline ready
    dir="$(kafka_dir)"
    heap="${KAFKA_BENCH_HEAP:-768M}"
    kafka_provision if-missing
    if ((${#KAFKAC_PIDS[@]})); then
        log "Kafka cluster: already running (pids ${KAFKAC_PIDS[*]})"
        return 1
    fi
    rm -rf "$dir"
    cluster_id="$(java -cp "$KAFKA_LIB/*" kafka.tools.StorageTool random-uuid)"
    for n in 1 2 3; do
        mkdir -p "$dir/node-$n" "$dir/data/node-$n"
        KAFKA_BENCH_EXTRA="${1:-${KAFKA_BENCH_EXTRA:-}}" kafkac_write_config "$dir" "$n"
        java -cp "$KAFKA_LIB/*" kafka.tools.StorageTool format --config "$dir/node-$n/server.properties" \
            --cluster-id "$cluster_id" >"$dir/node-$n/format.log" 2>&1 || { cat "$dir/node-$n/format.log" >&2; return 1; }
    done
    log "Kafka cluster: formatted three nodes (cluster id $cluster_id); start on $(kafkac_bootstrap) (heap $heap each${RB_CPUS:+, CPUs $RB_CPUS})"
    pin "$RB_CPUS"
    for n in 1 2 3; do
        # The JVM options of kafka_start (Kafka's launcher's defaults).
        nohup "${PIN[@]}" java "-Xms$heap" "-Xmx$heap" -server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
            -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true \
            -Dlog4j2.configurationFile="$HERE/kafka/src/main/resources/log4j2.properties" \
            -cp "$KAFKA_LIB/*" kafka.Kafka "$dir/node-$n/server.properties" >"$dir/node-$n/kafka.log" 2>&1 </dev/null &
        KAFKAC_PIDS+=($!)
        echo "$!" >"$dir/node-$n/kafka.pid"
    done
    deadline=$((SECONDS + ${KAFKA_START_TIMEOUT:-120}))
    for n in 1 2 3; do
        if ! wait_port $((${KAFKA_BENCH_PORT:-19971} + n - 1)) $((deadline - SECONDS)) "${KAFKAC_PIDS[n - 1]}"; then
            log "Kafka cluster: node $n not listening, or exited; log tail:"
            tail -20 "$dir/node-$n/kafka.log" >&2
            kafkac_stop
            return 1
        fi
    done
    # Listening is not yet registered: wait until DescribeCluster lists all three brokers.
    until ready="$(java -cp "$KAFKA_LIB/*" ringbroker.bench.TopicSetup --bootstrap "$(kafkac_bootstrap)" \
        --wait-ready $((deadline - SECONDS > 1 ? deadline - SECONDS : 1)) 2>/dev/null)" && [[ "$ready" == "ready: 3 node(s)" ]]; do
        if ((SECONDS >= deadline)); then
            log "Kafka cluster: DescribeCluster does not list three brokers after ${KAFKA_START_TIMEOUT:-120} s (${ready:-no answer}); node 1 log tail:"
            tail -20 "$dir/node-1/kafka.log" >&2
            kafkac_stop
            return 1
        fi
        sleep 1
    done
    for n in 1 2 3; do
        if ! listeners_of $((${KAFKA_BENCH_PORT:-19971} + n - 1)) | grep -q "pid=${KAFKAC_PIDS[n - 1]},"; then
            log "Kafka cluster: node $n's port is not served by its JVM (pid ${KAFKAC_PIDS[n - 1]})"
            kafkac_stop
            return 1
        fi
    done
    log "Kafka cluster: ready (pids ${KAFKAC_PIDS[*]})"
}

kafkac_stop() {
    if ((${#KAFKAC_PIDS[@]} == 0)); then return 0; fi
    stop_pids "Kafka cluster" "${KAFKAC_PIDS[@]}"
    log "Kafka cluster: stopped (pids ${KAFKAC_PIDS[*]})"
    KAFKAC_PIDS=()
    rm -f "$(kafka_dir)"/node-*/kafka.pid
    rm -rf "$(kafka_dir)/data"
}

cluster_topic() { # BOOTSTRAP TOPIC PARTITIONS REPLICAS
    local bootstrap="$1" topic="$2" parts="$3" rf="$4" deadline out leaders
    deadline=$((SECONDS + ${TOPIC_TIMEOUT:-60}))
    until out="$("$RB" topic create "$topic" -p "$parts" -r "$rf" -b "$bootstrap" 2>&1)"; do
        if [[ "$out" == *TOPIC_ALREADY_EXISTS* ]]; then break; fi
        if ((SECONDS >= deadline)); then
            log "creating $topic ($parts partitions, $rf replicas) at $bootstrap failed: $out"
            return 1
        fi
        sleep 1
    done
    until leaders="$("$RB" topic describe "$topic" -b "$bootstrap" --format json 2>/dev/null | python3 -c '
import json, sys
parts, rf = int(sys.argv[1]), int(sys.argv[2])
try:  # empty while the topic is not yet in the metadata: try again
    ps = sorted(json.load(sys.stdin)[0]["partitions"], key=lambda p: p["partition"])
except ValueError:
    sys.exit(1)
ok = len(ps) == parts and all(p["leader"] >= 0 and len(p["replicas"]) == rf and sorted(p["isr"]) == sorted(p["replicas"]) for p in ps)
print(" ".join(str(p["leader"]) for p in ps)) if ok else sys.exit(1)
' "$parts" "$rf")"; do
        if ((SECONDS >= deadline)); then
            log "$topic: not every partition has a leader and $rf replicas in sync after ${TOPIC_TIMEOUT:-60} s"
            "$RB" topic describe "$topic" -b "$bootstrap" >&2 || true
            return 1
        fi
        sleep 0.5
    done
    log "$topic: $parts partitions x $rf replicas, leaders by partition: $leaders"
}

pids_csv() { local IFS=,; echo "$*"; }

cluster_stats() { # FILE PID...
    local f="$1" p cpu=() rss=()
    shift
    for p in "$@"; do
        cpu+=("$(proc_cpu_s "$p")")
        rss+=("$(proc_kib "$p" VmHWM)")
    done
    python3 -c 'import json, sys
cpu, rss = json.loads(sys.argv[2]), json.loads(sys.argv[3])
json.dump({"cpu_s": round(sum(cpu), 2), "peak_rss_kib": sum(rss), "nodes": [{"cpu_s": c, "peak_rss_kib": r} for c, r in zip(cpu, rss)]}, open(sys.argv[1], "w"))' \
        "$f" "[$(pids_csv "${cpu[@]}")]" "[$(pids_csv "${rss[@]}")]"
}

disk_of() { # PATH
    local src
    src="$(df --output=source "$1" 2>/dev/null | tail -1)"
    src="$(readlink -f "$src" 2>/dev/null || true)"
    if [[ -e "/sys/class/block/${src##*/}/stat" ]]; then echo "${src##*/}"; fi
}

disk_written_mb() { # DEV
    if [[ -z "$1" ]]; then echo null; return; fi
    awk '{ printf "%.1f", $7 * 512 / 1e6 }' "/sys/class/block/$1/stat"
}

settle_disk() {
    local t0=$SECONDS
    timeout "${SETTLE_TIMEOUT:-300}" sync || log "sync did not finish within ${SETTLE_TIMEOUT:-300} s"
    if ((SECONDS - t0 >= 2)); then log "sync: $((SECONDS - t0)) s to write back what earlier runs left dirty"; fi
}
