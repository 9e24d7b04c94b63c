#!/usr/bin/env bash
# The entry point of Ringbroker's benchmarks.
#
#   bench/run.sh MODE [NAME=VALUE...] [args]   run one mode
#   bench/run.sh help [MODE]                  list the modes, or print one mode's documentation
#
# NAME=VALUE arguments right after MODE set the mode's environment variables, the same as
# putting them before the command: `bench/run.sh ab BASE=main ROUNDS=3`.
#
# A mode is bench/modes/MODE.sh: its first line is the summary `help` lists, the comment
# block under it its documentation (usage, workloads, environment with defaults). run.sh
# sources bench/lib.sh (the helpers every mode shares) and then the mode's file, with the
# remaining arguments. bench/README.md describes every mode and how to read the figures.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
MODES="$HERE/modes"

modes() { for f in "$MODES"/*.sh; do basename "$f" .sh; done; }

list() {
    echo "usage: bench/run.sh MODE [NAME=VALUE...] [args]   (bench/run.sh help MODE: its settings)"
    echo
    local m
    for m in $(modes); do
        printf '  %-18s %s\n' "$m" "$(sed -n '1s/^# //p' "$MODES/$m.sh")"
    done
}

# The comment block at the top of a mode's file, without the shellcheck directive.
doc() { awk '!/^#/ { exit } !/^# shellcheck/ { sub(/^# ?/, ""); print }' "$MODES/$1.sh"; }

mode="${1:-help}"
shift || true
case "$mode" in
help | -h | --help)
    if [[ $# -gt 0 ]]; then
        [[ -f "$MODES/$1.sh" ]] || { echo "bench/run.sh: no mode '$1'" >&2; list >&2; exit 64; }
        doc "$1"
    else
        list
    fi
    ;;
*)
    if [[ ! -f "$MODES/$mode.sh" ]]; then
        echo "bench/run.sh: no mode '$mode'" >&2
        list >&2
        exit 64
    fi
    while [[ $# -gt 0 && "$1" =~ ^[A-Z_][A-Z0-9_]*= ]]; do
        export "${1?}"
        shift
    done
    # shellcheck source=bench/lib.sh
    source "$HERE/lib.sh"
    # shellcheck disable=SC1090
    source "$MODES/$mode.sh" "$@"
    ;;
esac
