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
