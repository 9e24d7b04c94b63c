# ringbench's null broker in the foreground: the ceiling of tool + loopback
#
#   bench/run.sh null-broker [ADDR] [ringbench flags]    ADDR [127.0.0.1:$NULL_PORT]
#   e.g. bench/run.sh null-broker 127.0.0.1:9999 --null-records 200000 --partitions 6
#
# What ringbench measures against it is the ceiling of the tool and loopback on this machine
# (the ringbench mode runs it next to both brokers). Builds first unless SKIP_BUILD=1.
#
# Environment: NULL_PORT [19494] SKIP_BUILD [0]
# shellcheck shell=bash
# shellcheck disable=SC2034  # (lib.sh log lines say it)
NAME=null-broker
ADDR="127.0.0.1:${NULL_PORT:-19494}"
if [[ $# -gt 0 && "$1" != -* ]]; then
    ADDR="$1"
    shift
fi
build_release
log "null broker on $ADDR (Ctrl-C stops it)"
exec "$BENCH" --null-broker "$ADDR" "$@"
