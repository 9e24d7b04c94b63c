# what batch-rewriting topic configs cost: LogAppendTime, broker zstd [vs BASE]
#
#   bench/run.sh topic-config-cost
#   BASE=<rev> bench/run.sh topic-config-cost     also the broker built from git revision <rev>
#
# Measured side by side in one run of ROUNDS rounds with ringbench (1 KiB text-like records,
# 6 partitions, PRODUCERS producers, acks=1, no fsync), each round running every
# configuration one after another:
#   base        the broker built from git revision BASE (e.g. before these configs existed), if set
#   plain       this tree's broker, a topic with no configs (batches stored as they come)
#   stamped     message.timestamp.type=LogAppendTime (each batch's maxTimestamp and CRC rewritten)
#   recompress  compression.type=zstd while the producers send uncompressed batches (the broker compresses)
#   recompress-lz4  the same with compression.type=lz4 (at its default level: the fast compressor)
#   base-lz4    recompress-lz4 on the broker built from BASE, if set
#   zstd-client the producers compress with zstd themselves, into a topic with no configs
# Workloads: (a) max produce throughput; (d) consume throughput re-reading a topic filled
# with D_RECORDS records in the same configuration. Prints a markdown table of medians and
# per-round ratios against `plain` (bench/cost_table.py).
#
# Environment: BASE [unset] ROUNDS [3] DURATION [10] WARMUP [3] PRODUCERS [4] D_RECORDS [300000]
#   RB_PORT [19594] RB_ADMIN_PORT [0] WAIT_QUIET [0]
#   ONLY [unset]: only these configurations, e.g. ONLY="plain recompress-lz4 base-lz4"; the
#   ratios are to `plain` (or to COST_REF), which must be among them
# shellcheck shell=bash
ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-10}"
WARMUP="${WARMUP:-3}"
PRODUCERS="${PRODUCERS:-4}"
D_RECORDS="${D_RECORDS:-300000}"
ADDR="127.0.0.1:${RB_PORT:-19594}"

bench_init topic-config-cost
require_free_ports "${ADDR##*:}"
build_release
rb_private_copy
CONFIGS=(plain stamped recompress recompress-lz4 zstd-client)
if [[ -n "${BASE:-}" ]]; then
    rb_build_base "$BASE"
    CONFIGS=(base base-lz4 "${CONFIGS[@]}")
fi
if [[ -n "${ONLY:-}" ]]; then read -r -a CONFIGS <<<"$ONLY"; fi
wait_quiet "${WAIT_QUIET:-0}"

topics() { # CONFIG: create topics a and d with the configuration's topic configs
    local configs=()
    case "$1" in
    stamped) configs=(-c message.timestamp.type=LogAppendTime) ;;
    recompress) configs=(-c compression.type=zstd) ;;
    recompress-lz4 | base-lz4) configs=(-c compression.type=lz4) ;;
    esac
    for t in a d; do
        "$RB" topic create "$t" -p 6 "${configs[@]}" -b "$ADDR" >/dev/null
    done
}

cost_start() { # CONFIG
    local bin="$RB"
    if [[ "$1" == base* ]]; then bin="$RB_BASE"; fi
    rb_start "$1" "$bin" --flush os --listen "$ADDR"
    topics "$1"
    # shellcheck disable=SC2034  # (cost_rounds passes it to the producers)
    if [[ "$1" == zstd-client ]]; then COST_PRODUCE_ARGS=(--compression zstd); fi
}

cost_rounds "${CONFIGS[@]}"
