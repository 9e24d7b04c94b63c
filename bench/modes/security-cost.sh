# what ACL checks cost: no authorizer vs every request authorized [vs BASE]
#
#   bench/run.sh security-cost
#   BASE=<rev> bench/run.sh security-cost     also the broker built from git revision <rev>
#
# Measured side by side in one run of ROUNDS rounds with ringbench (1 KiB records,
# 6 partitions, plaintext connections), each round running every configuration in turn:
#   base  the broker built from git revision BASE (e.g. the commit before ACLs existed), if set
#   plain this tree's broker, no authorizer (the default)
#   acl   this tree's broker with authorizer_enabled, the client's principal (User:ANONYMOUS)
#         allowed by ACLs (not a super user, so every produce and fetch is checked), among
#         FILLER other ACLs (literal and prefixed, for other principals and topics)
# Workloads: (a) max produce throughput, PRODUCERS producers, acks=1, no fsync; (d) consume
# throughput re-reading a topic pre-filled with D_RECORDS records, 2 consumers.
# Prints a markdown table of medians and per-round ratios against `plain` (bench/cost_table.py).
#
# Environment: BASE [unset] ROUNDS [3] DURATION [10] WARMUP [3] PRODUCERS [4] D_RECORDS [500000]
#   FILLER [1000] RB_PORT [19593] RB_ADMIN_PORT [0] WAIT_QUIET [0]
# shellcheck shell=bash
ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-10}"
WARMUP="${WARMUP:-3}"
PRODUCERS="${PRODUCERS:-4}"
D_RECORDS="${D_RECORDS:-500000}"
FILLER="${FILLER:-1000}"
ADDR="127.0.0.1:${RB_PORT:-19593}"

bench_init security-cost
require_free_ports "${ADDR##*:}"
build_release
rb_private_copy
CONFIGS=(plain acl)
if [[ -n "${BASE:-}" ]]; then
    rb_build_base "$BASE"
    CONFIGS=(base plain acl)
fi
wait_quiet "${WAIT_QUIET:-0}"

# The acl configuration's ACLs, through the CLI over the (only, plaintext) listener while
# User:ANONYMOUS is a super user; the broker then restarts without super users on the same
# data directory (ACLs persist in its catalog), so every request is checked.
grant() {
    local acl=("$RB" acl create -b "$ADDR")
    "${acl[@]}" --allow-principal User:ANONYMOUS --operation All --cluster >/dev/null
    for t in a d; do
        "${acl[@]}" --allow-principal User:ANONYMOUS --operation Read --operation Write --topic "$t" >/dev/null
    done
    # FILLER literal allows for other principals, a tenth as many prefixed denies.
    local many=() i
    for ((i = 1; i <= FILLER; i++)); do many+=(--allow-principal "User:user-$i"); done
    if ((FILLER > 0)); then "${acl[@]}" "${many[@]}" --operation Read --topic other >/dev/null; fi
    many=()
    for ((i = 1; i <= FILLER / 10; i++)); do many+=(--deny-principal "User:user-$i"); done
    if ((FILLER >= 10)); then
        "${acl[@]}" "${many[@]}" --operation Write --topic team- --resource-pattern-type prefixed >/dev/null
    fi
}

cost_start() { # CONFIG
    case "$1" in
    base) rb_start base "$RB_BASE" --flush os --listen "$ADDR" ;;
    plain) rb_start plain "$RB" --flush os --listen "$ADDR" ;;
    acl)
        rb_start acl-grant "$RB" --flush os --listeners "PLAINTEXT://$ADDR" --authorizer-enabled true \
            --super-users User:ANONYMOUS
        grant
        rb_stop acl-grant
        KEEP_DATA=1 rb_start acl "$RB" --flush os --listeners "PLAINTEXT://$ADDR" --authorizer-enabled true
        ;;
    esac
}

cost_rounds "${CONFIGS[@]}"
