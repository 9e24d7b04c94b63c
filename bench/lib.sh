# Helpers the side-by-side cost scripts share (source it; it sets nothing up by itself):
# building a base revision, starting and stopping a Ringbroker, running one ringbench
# workload. The caller sets RUN (a scratch directory), PORT, and NAME (for log lines).
#
#   rb_build_base REV      build REV (release) in a worktree; prints the binary's path
#   rb_start BINARY ARGS   start a broker on $RUN/data (KEEP_DATA=1: keep the previous data)
#   rb_stop                stop it
#   rb_bench NAME ARGS     ringbench against it; report in $RUN/NAME/report.json
#   rb_rate NAME KEY       a number from that report (publish_rate, consume_rate, ...)

HERE="${HERE:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}"
ROOT="${ROOT:-$(cd "$HERE/.." && pwd)}"
RB_PID=""

log() { echo "[$NAME $(date -u +%H:%M:%S)] $*" >&2; }

rb_cleanup() {
    if [[ -n "$RB_PID" ]]; then kill "$RB_PID" 2>/dev/null || true; fi
    rm -rf "$RUN/data"
    if [[ -d "$RUN/base-src" ]]; then git -C "$ROOT" worktree remove --force "$RUN/base-src" 2>/dev/null || true; fi
}

rb_build_base() { # REV
    log "building $1 (release) in a worktree"
    git -C "$ROOT" worktree add --detach "$RUN/base-src" "$1" >/dev/null 2>&1
    # Its own target directory, kept between runs so that only the first one pays.
    (cd "$RUN/base-src" && CARGO_TARGET_DIR="$ROOT/target/bench-base" cargo build --release -p ringbroker 2>&1 | tail -1 >&2)
    cp "$ROOT/target/bench-base/release/ringbroker" "$RUN/ringbroker-base"
    echo "$RUN/ringbroker-base"
}

rb_start() { # BINARY ARGS...
    local bin="$1"
    shift
    if [[ -z "${KEEP_DATA:-}" ]]; then rm -rf "$RUN/data"; fi
    "$bin" --data-dir "$RUN/data" --flush os --admin-listen off "$@" >"$RUN/out" 2>"$RUN/log" &
    RB_PID=$!
    for _ in $(seq 1 100); do
        if grep -q "^ringbroker listening on" "$RUN/out" 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    log "the broker did not start"
    cat "$RUN/log" >&2
    exit 1
}

rb_stop() {
    kill "$RB_PID" 2>/dev/null || true
    wait "$RB_PID" 2>/dev/null || true
    RB_PID=""
}

rb_bench() { # NAME ARGS...
    local name="$1"
    shift
    "$BENCH" --broker "127.0.0.1:$PORT" --quiet --duration "$DURATION" --warmup "$WARMUP" --out "$RUN/$name" "$@" \
        >"$RUN/$name.txt"
}
