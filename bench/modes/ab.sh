# A/B of two Ringbroker builds, BASE=<rev> against this tree: (a) produce, (d) consume
#
#   bench/run.sh ab BASE=<rev> [ringbroker flags...]   e.g.  bench/run.sh ab BASE=main ROUNDS=5
#   bench/run.sh ab                                    BASE=HEAD: uncommitted changes against the last commit
#
# Builds BASE (release) in a temporary git worktree, with its own target dir
# (target/bench-base, kept between runs, so later runs only rebuild the workspace), and this
# tree (release), then runs both side by side in one run of ROUNDS rounds, alternating
# `before` (BASE) and `after` (this tree) in each round, so slow drift of a shared machine
# hits both alike. Both get the same flags: --flush RB_FLUSH --listen ADDR plus the arguments given.
# Workloads, with this tree's ringbench (1 KiB records, topics auto-created with the broker's
# default partitions):
#   (a) max produce throughput: PRODUCERS producers, acks=1, DURATION s after WARMUP s (no fsync
#       unless RB_FLUSH=always or interval)
#   (d) consume throughput: topic d filled with D_RECORDS records, 2 consumers re-reading it
#       from the beginning for DURATION s
# Prints a markdown table (bench/cost_table.py): medians of both, after/before (the ratio of
# the medians, and the range of the per-round ratios; above 1 = this tree is faster).
# Every run's report.json stays in the run dir it names.
#
# Environment: BASE [HEAD] ROUNDS [5] DURATION [10] WARMUP [3] PRODUCERS [4] D_RECORDS [500000]
#   RB_PORT [19893] RB_ADMIN_PORT [0] RB_CPUS CLIENT_CPUS WAIT_QUIET [0] SKIP_BUILD [0]
#   BASE_BIN: a release binary of BASE built before; used instead of building BASE again
#   RB_FLUSH [os]: the brokers' --flush
# shellcheck shell=bash
BASE="${BASE:-HEAD}"
ROUNDS="${ROUNDS:-5}"
DURATION="${DURATION:-10}"
WARMUP="${WARMUP:-3}"
PRODUCERS="${PRODUCERS:-4}"
D_RECORDS="${D_RECORDS:-500000}"
ADDR="127.0.0.1:${RB_PORT:-19893}"
AB_FLAGS=("$@")

bench_init ab
require_free_ports "${ADDR##*:}"
build_release
rb_private_copy
if [[ -n "${BASE_BIN:-}" ]]; then
    cp "$BASE_BIN" "$RUN/ringbroker-base"
    RB_BASE="$RUN/ringbroker-base"
else
    rb_build_base "$BASE"
fi
log "before: $BASE ($(git -C "$ROOT" rev-parse --short "$BASE^{commit}"), sha256 $(sha256sum "$RB_BASE" | cut -c1-16))"
log "after:  this tree ($(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD -- src Cargo.toml Cargo.lock || echo '+dirty'), sha256 $(sha256sum "$RB" | cut -c1-16))"
wait_quiet "${WAIT_QUIET:-0}"

cost_start() { # before | after
    local bin="$RB"
    if [[ "$1" == before ]]; then bin="$RB_BASE"; fi
    rb_start "$1" "$bin" --flush "${RB_FLUSH:-os}" --listen "$ADDR" "${AB_FLAGS[@]}"
}

COST_REF=before cost_rounds before after
