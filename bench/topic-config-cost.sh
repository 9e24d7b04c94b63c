#!/usr/bin/env bash
# What the topic configs that rewrite batches cost at append, measured side by side in one
# run of ROUNDS rounds with ringbench (1 KiB text-like records, 6 partitions, PRODUCERS
# producers, acks=1, no fsync), each round running every configuration one after another:
#   base        the broker built from git revision BASE (e.g. before these configs existed), if set
#   plain       this tree's broker, a topic with no configs (batches stored as they come)
#   stamped     message.timestamp.type=LogAppendTime (each batch's maxTimestamp and CRC rewritten)
#   recompress  compression.type=zstd while the producers send uncompressed batches (the broker compresses)
#   zstd-client the producers compress with zstd themselves, into a topic with no configs
# Workloads: (a) max produce throughput; (d) consume throughput re-reading a topic filled
# with D_RECORDS records in the same configuration. Prints a markdown table of medians and
# per-round ratios against `plain`.
#
#   BASE=<rev> bench/topic-config-cost.sh
#   environment: BASE [unset] ROUNDS [3] DURATION [10] WARMUP [3] PRODUCERS [4] D_RECORDS [300000]
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-10}"
WARMUP="${WARMUP:-3}"
PRODUCERS="${PRODUCERS:-4}"
D_RECORDS="${D_RECORDS:-300000}"
PORT="${RB_PORT:-19594}"
RUN="$(mktemp -d "${TMPDIR:-/tmp}/topic-config-cost.XXXXXX")"
NAME=topic-config-cost
# shellcheck source=bench/lib.sh
source "$HERE/lib.sh"
trap rb_cleanup EXIT

log "building (release)"
(cd "$ROOT" && cargo build --release -p ringbroker -p ringbench 2>&1 | tail -1 >&2)
NEW="$ROOT/target/release/ringbroker"
BENCH="$ROOT/target/release/ringbench"
CONFIGS=(plain stamped recompress zstd-client)
if [[ -n "${BASE:-}" ]]; then
    rb_build_base "$BASE" >/dev/null
    CONFIGS=(base "${CONFIGS[@]}")
fi

topics() { # CONFIG: create topics a and d with the configuration's topic configs
    local configs=()
    case "$1" in
    stamped) configs=(-c message.timestamp.type=LogAppendTime) ;;
    recompress) configs=(-c compression.type=zstd) ;;
    esac
    for t in a d; do
        "$NEW" topic create "$t" -p 6 "${configs[@]}" -b "127.0.0.1:$PORT" >/dev/null
    done
}

for ((round = 1; round <= ROUNDS; round++)); do
    for config in "${CONFIGS[@]}"; do
        log "round $round: $config"
        bin="$NEW"
        [[ "$config" == base ]] && bin="$RUN/ringbroker-base"
        rb_start "$bin" --listen "127.0.0.1:$PORT"
        topics "$config"
        codec=none
        [[ "$config" == zstd-client ]] && codec=zstd
        rb_bench "r$round-$config-a" --topic a --producers "$PRODUCERS" --consumers 0 --acks 1 --compression "$codec"
        rb_bench "r$round-$config-d-fill" --topic d --producers "$PRODUCERS" --consumers 0 --acks 1 \
            --compression "$codec" --records "$D_RECORDS" --warmup 0
        rb_bench "r$round-$config-d" --topic d --producers 0 --consumers 2 --from-beginning --rewind
        rb_stop
    done
done

python3 "$HERE/cost_table.py" "$RUN" "$ROUNDS" "${CONFIGS[@]}"
log "runs kept in $RUN"
