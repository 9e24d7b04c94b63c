#!/usr/bin/env bash
# What authorization costs on the request path, measured side by side in one run of ROUNDS
# rounds with ringbench (1 KiB records, 6 partitions, plaintext connections):
#   base  the broker built from git revision BASE (e.g. the commit before ACLs existed), if set
#   plain this tree's broker, no authorizer (the default)
#   acl   this tree's broker with authorizer_enabled, the client's principal (User:ANONYMOUS)
#         allowed by ACLs (not a super user, so every produce and fetch is checked), among
#         FILLER other ACLs (literal and prefixed, for other principals and topics)
# Workloads: (a) max produce throughput, PRODUCERS producers, acks=1, no fsync; (d) consume
# throughput re-reading a topic pre-filled with D_RECORDS records, 2 consumers.
# Prints a markdown table of medians and per-round ratios against `plain`.
#
#   BASE=<rev> bench/security-cost.sh
#   environment: BASE [unset] ROUNDS [3] DURATION [10] WARMUP [3] PRODUCERS [4] D_RECORDS [500000] FILLER [1000]
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-10}"
WARMUP="${WARMUP:-3}"
PRODUCERS="${PRODUCERS:-4}"
D_RECORDS="${D_RECORDS:-500000}"
FILLER="${FILLER:-1000}"
PORT="${RB_PORT:-19593}"
RUN="$(mktemp -d "${TMPDIR:-/tmp}/security-cost.XXXXXX")"
NAME=security-cost
# shellcheck source=bench/lib.sh
source "$HERE/lib.sh"
trap rb_cleanup EXIT

log "building (release)"
(cd "$ROOT" && cargo build --release -p ringbroker -p ringbench 2>&1 | tail -1 >&2)
NEW="$ROOT/target/release/ringbroker"
BENCH="$ROOT/target/release/ringbench"
CONFIGS=(plain acl)
if [[ -n "${BASE:-}" ]]; then
    rb_build_base "$BASE" >/dev/null
    CONFIGS=(base plain acl)
fi

# The acl configuration's ACLs, through the CLI over the (only, plaintext) listener while
# User:ANONYMOUS is a super user; the broker then restarts without super users on the same
# data directory (ACLs persist in its catalog), so every request is checked.
grant() {
    local acl=("$NEW" acl create -b "127.0.0.1:$PORT")
    "${acl[@]}" --allow-principal User:ANONYMOUS --operation All --cluster >/dev/null
    for t in a d; do
        "${acl[@]}" --allow-principal User:ANONYMOUS --operation Read --operation Write --topic "$t" >/dev/null
    done
    local many=()
    for i in $(seq 1 "$FILLER"); do many+=(--allow-principal "User:user-$i"); done
    "${acl[@]}" "${many[@]}" --operation Read --topic other >/dev/null
    many=()
    for i in $(seq 1 $((FILLER / 10))); do many+=(--deny-principal "User:user-$i"); done
    "${acl[@]}" "${many[@]}" --operation Write --topic team- --resource-pattern-type prefixed >/dev/null
}
for ((round = 1; round <= ROUNDS; round++)); do
    for config in "${CONFIGS[@]}"; do
        log "round $round: $config"
        case "$config" in
        base) rb_start "$RUN/ringbroker-base" --listen "127.0.0.1:$PORT" ;;
        plain) rb_start "$NEW" --listen "127.0.0.1:$PORT" ;;
        acl)
            rb_start "$NEW" --listeners "PLAINTEXT://127.0.0.1:$PORT" --authorizer-enabled true --super-users User:ANONYMOUS
            grant
            rb_stop
            KEEP_DATA=1 rb_start "$NEW" --listeners "PLAINTEXT://127.0.0.1:$PORT" --authorizer-enabled true
            ;;
        esac
        rb_bench "r$round-$config-a" --topic a --producers "$PRODUCERS" --consumers 0 --acks 1
        rb_bench "r$round-$config-d-fill" --topic d --producers "$PRODUCERS" --consumers 0 --acks 1 \
            --records "$D_RECORDS" --warmup 0
        rb_bench "r$round-$config-d" --topic d --producers 0 --consumers 2 --from-beginning --rewind
        rb_stop
    done
done

python3 "$HERE/cost_table.py" "$RUN" "$ROUNDS" "${CONFIGS[@]}"
log "runs kept in $RUN"
