# start-up replay of __consumer_offsets after COMMITS offset commits, cleaner off and on
#
#   bench/run.sh offsets-replay
#   bench/run.sh offsets-replay COMMITS=100000   # a short trial
#
# One broker, one shard (--cpus 0). A committer (Python, Kafka's OffsetCommit v2 over a raw
# socket: no client library, so the figure is the broker's) commits COMMITS offsets to one
# group, PARTITIONS a request, each commit a new offset, with the cleaner off. Then:
#   1. `before`: the broker restarts with the cleaner off and replays every commit;
#   2. it restarts with the cleaner on, which compacts the offsets partition of the group
#      (the newest segment, OFFSETS_SEGMENT_BYTES, stays as it is: the active segment is
#      never cleaned, as in Kafka), then stops;
#   3. `after`: it restarts again and replays what the cleaner left.
# Each of ROUNDS rounds does 1 and 3 once; the figures are the broker's own
# "replayed committed offsets" log line (records, ms) and the time from the start of the
# process to its listening line, with the bytes of __consumer_offsets on disk.
#
# CLUSTER=1 runs the broker as a cluster of one (its own metadata quorum, on RB_PORT+1):
# `__consumer_offsets` is then a replicated log, a raft group of one voter, replayed when
# the broker comes to lead it; the clean phase runs retention every 500 ms too, which moves
# the raft log's start past what was cleaned, and waits for the cleaning that follows.
# BASE_BIN=<binary> measures that build the same way in each round, as `base-before` and
# `base-after`.
#
# Writes bench/results/<date>-offsets-replay.md (RESULTS_DIR: another directory).
#
# Environment: COMMITS [1000000] PARTITIONS [100] OFFSETS_SEGMENT_BYTES [4194304]
#   ROUNDS [3] RB_PORT [19621] CLUSTER [0] BASE_BIN []
# shellcheck shell=bash
COMMITS="${COMMITS:-1000000}"
PARTITIONS="${PARTITIONS:-100}"
OFFSETS_SEGMENT_BYTES="${OFFSETS_SEGMENT_BYTES:-4194304}"
ROUNDS="${ROUNDS:-3}"
ADDR="127.0.0.1:${RB_PORT:-19621}"
PEER="127.0.0.1:$((${RB_PORT:-19621} + 1))"

bench_init offsets-replay
require_free_ports "${ADDR##*:}" "${PEER##*:}"
build_release
rb_private_copy
BUILDS=(new)
if [[ -n "${BASE_BIN:-}" ]]; then
    BUILDS+=(base)
    BASE_COPY="$RUN/ringbroker-base"
    cp "$BASE_BIN" "$BASE_COPY"
fi

offsets_bytes() { du -sb "$RB_DATA"/__consumer_offsets-* 2>/dev/null | awk '{ s += $1 } END { print s + 0 }'; }

BROKER_ARGS=(--cpus 0 --listen "$ADDR" --offsets-topic-segment-bytes "$OFFSETS_SEGMENT_BYTES")
if [[ "${CLUSTER:-0}" == 1 ]]; then
    BROKER_ARGS+=(--node-id 1 --cluster-listen "$PEER" --controller-quorum-voters "1@$PEER")
fi

# Starts the broker, records its replay line and start-up time as LABEL.json.
measured_start() { # LABEL ARGS...
    local label="$1" t0
    shift
    t0=$(date +%s.%N)
    KEEP_DATA=1 rb_start "$label" "$BIN" "${BROKER_ARGS[@]}" "$@"
    # In a cluster the replay comes once the broker leads the partition, after listening.
    local deadline=$((SECONDS + 120))
    until grep -q "replayed committed offsets" "$RB_LOG" || ((SECONDS >= deadline)); do sleep 0.1; done
    local ready
    ready=$(awk -v t0="$t0" -v t1="$(date +%s.%N)" 'BEGIN { printf "%.0f", (t1 - t0) * 1000 }')
    python3 - "$RB_LOG" "$ready" "$(offsets_bytes)" >"$RUN/$label.json" <<'EOF'
import json, re, sys
log, ready, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
line = [l for l in open(log) if "replayed committed offsets" in l and "ms=" in l][-1]
plain = re.sub(r"\x1b\[[0-9;]*m", "", line)
get = lambda k: int(re.search(k + r"=(\d+)", plain).group(1))
print(json.dumps({"records": get("records"), "replay_ms": get("ms"), "ready_ms": ready, "offsets_bytes": size}))
EOF
}

# A fresh broker's data dir holding COMMITS commits, none cleaned.
fill() { # LABEL
    rb_start "$1" "$BIN" "${BROKER_ARGS[@]}" --log-cleaner-enable false
    "$RB" topic create committed -p "$PARTITIONS" -b "$ADDR" >/dev/null
    python3 - "$ADDR" "$COMMITS" "$PARTITIONS" <<'EOF'
import socket, struct, sys
host, port = sys.argv[1].rsplit(":", 1)
commits, partitions = int(sys.argv[2]), int(sys.argv[3])
s = socket.create_connection((host, int(port)))
def string(v):
    b = v.encode()
    return struct.pack(">h", len(b)) + b
def read(n):
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            sys.exit("the broker closed the connection")
        out += chunk
    return out
done, correlation = 0, 0
while done < commits:
    n = min(partitions, commits - done)
    parts = b"".join(struct.pack(">iqh", p, done + p, -1) for p in range(n))
    body = string("busy") + struct.pack(">i", -1) + string("") + struct.pack(">q", -1)
    body += struct.pack(">i", 1) + string("committed") + struct.pack(">i", n) + parts
    correlation += 1
    req = struct.pack(">hhi", 8, 2, correlation) + string("offsets-replay") + body
    s.sendall(struct.pack(">i", len(req)) + req)
    resp = read(struct.unpack(">i", read(4))[0])
    # correlation id, topics: [name, partitions: [index, error_code]]
    pos = 4 + 4
    name_len = struct.unpack_from(">h", resp, pos)[0]
    pos += 2 + name_len
    count = struct.unpack_from(">i", resp, pos)[0]
    pos += 4
    for _ in range(count):
        index, error = struct.unpack_from(">ih", resp, pos)
        pos += 6
        if error:
            sys.exit(f"commit of partition {index} failed with error code {error}")
    done += n
print(f"committed {done} offsets", file=sys.stderr)
EOF
    rb_stop "$1"
}

CLEAN_ARGS=(--log-cleaner-backoff-ms 100)
if [[ "${CLUSTER:-0}" == 1 ]]; then CLEAN_ARGS+=(--retention-check-interval-ms 500); fi

for ((ROUND = 1; ROUND <= ROUNDS; ROUND++)); do
    for build in "${BUILDS[@]}"; do
        BIN="$RB" prefix=""
        if [[ "$build" == base ]]; then BIN="$BASE_COPY" prefix="base-"; fi
        fill "${prefix}fill-r$ROUND"
        measured_start "${prefix}before-r$ROUND" --log-cleaner-enable false
        rb_stop "${prefix}before-r$ROUND"
        KEEP_DATA=1 rb_start "${prefix}clean-r$ROUND" "$BIN" "${BROKER_ARGS[@]}" "${CLEAN_ARGS[@]}"
        # Done when no log has been due for 2 s (the cleaner checks every 100 ms).
        sleep 2
        deadline=$((SECONDS + 300)) quiet=0
        while ((quiet < 4 && SECONDS < deadline)); do
            if [[ "$(rb_metric ringbroker_cleaner_backlog)" == 0 ]]; then quiet=$((quiet + 1)); else quiet=0; fi
            sleep 0.5
        done
        log "${prefix}clean-r$ROUND: $(rb_metric ringbroker_cleaner_runs_total) cleanings"
        rb_stop "${prefix}clean-r$ROUND"
        measured_start "${prefix}after-r$ROUND" --log-cleaner-enable false
        rb_stop "${prefix}after-r$ROUND"
    done
done

OUT="$RESULTS/$(date -u +%Y-%m-%d)-offsets-replay"
mkdir -p "$RESULTS"
python3 - "$RUN" "$ROUNDS" "$OUT.md" "bench/run.sh offsets-replay COMMITS=$COMMITS PARTITIONS=$PARTITIONS OFFSETS_SEGMENT_BYTES=$OFFSETS_SEGMENT_BYTES ROUNDS=$ROUNDS CLUSTER=${CLUSTER:-0}${BASE_BIN:+ BASE_BIN=$BASE_BIN}" "${BUILDS[@]}" <<'EOF'
import json, os, statistics, sys
run, rounds, out, command, builds = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
whats = [(b, w) for b in builds for w in ("before", "after")]
label = lambda b, w: ("base-" if b == "base" else "") + w
got = {(b, w): [json.load(open(os.path.join(run, f"{label(b, w)}-r{i}.json"))) for i in range(1, rounds + 1)] for b, w in whats}
med = lambda bw, k: statistics.median(r[k] for r in got[bw])
with open(out, "w") as f:
    f.write("# start-up replay of __consumer_offsets, before and after compaction\n\n")
    f.write(f"Command: `{command}`. Run directory: `{run}`. Medians of {rounds} rounds.\n\n")
    f.write("| build | | records replayed | replay ms | start to replayed ms | __consumer_offsets bytes |\n|---|---|---:|---:|---:|---:|\n")
    for b, w in whats:
        f.write(f"| {b} | {w} compaction | {med((b, w), 'records'):,.0f} | {med((b, w), 'replay_ms'):,.0f} | {med((b, w), 'ready_ms'):,.0f} | {med((b, w), 'offsets_bytes'):,.0f} |\n")
    for b in builds:
        f.write(f"\n{b}, per round (before / after replay ms): " + ", ".join(
            f"{x['replay_ms']} / {y['replay_ms']}" for x, y in zip(got[(b, "before")], got[(b, "after")])) + "\n")
print(open(out).read())
EOF
log "wrote $OUT.md"
