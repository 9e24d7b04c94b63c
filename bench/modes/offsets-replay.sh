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
# Writes bench/results/<date>-offsets-replay.md (RESULTS_DIR: another directory).
#
# Environment: COMMITS [1000000] PARTITIONS [100] OFFSETS_SEGMENT_BYTES [4194304]
#   ROUNDS [3] RB_PORT [19621]
# shellcheck shell=bash
COMMITS="${COMMITS:-1000000}"
PARTITIONS="${PARTITIONS:-100}"
OFFSETS_SEGMENT_BYTES="${OFFSETS_SEGMENT_BYTES:-4194304}"
ROUNDS="${ROUNDS:-3}"
ADDR="127.0.0.1:${RB_PORT:-19621}"

bench_init offsets-replay
require_free_ports "${ADDR##*:}"
build_release
rb_private_copy

offsets_bytes() { du -sb "$RB_DATA"/__consumer_offsets-* 2>/dev/null | awk '{ s += $1 } END { print s + 0 }'; }

BROKER_ARGS=(--cpus 0 --listen "$ADDR" --offsets-topic-segment-bytes "$OFFSETS_SEGMENT_BYTES")

# Starts the broker, records its replay line and start-up time as LABEL.json.
measured_start() { # LABEL ARGS...
    local label="$1" t0
    shift
    t0=$(date +%s.%N)
    KEEP_DATA=1 rb_start "$label" "$RB" "${BROKER_ARGS[@]}" "$@"
    local ready
    ready=$(awk -v t0="$t0" -v t1="$(date +%s.%N)" 'BEGIN { printf "%.0f", (t1 - t0) * 1000 }')
    python3 - "$RB_LOG" "$ready" "$(offsets_bytes)" >"$RUN/$label.json" <<'EOF'
import json, re, sys
log, ready, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
line = [l for l in open(log) if "replayed committed offsets" in l][-1]
plain = re.sub(r"\x1b\[[0-9;]*m", "", line)
get = lambda k: int(re.search(k + r"=(\d+)", plain).group(1))
print(json.dumps({"records": get("records"), "replay_ms": get("ms"), "ready_ms": ready, "offsets_bytes": size}))
EOF
}

# A fresh broker's data dir holding COMMITS commits, none cleaned.
fill() { # LABEL
    rb_start "$1" "$RB" "${BROKER_ARGS[@]}" --log-cleaner-enable false
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

for ((ROUND = 1; ROUND <= ROUNDS; ROUND++)); do
    fill "fill-r$ROUND"
    measured_start "before-r$ROUND" --log-cleaner-enable false
    rb_stop "before-r$ROUND"
    KEEP_DATA=1 rb_start "clean-r$ROUND" "$RB" "${BROKER_ARGS[@]}" --log-cleaner-backoff-ms 100
    # Done when no log has been due for 2 s (the cleaner checks every 100 ms).
    sleep 2
    deadline=$((SECONDS + 300)) quiet=0
    while ((quiet < 4 && SECONDS < deadline)); do
        if [[ "$(rb_metric ringbroker_cleaner_backlog)" == 0 ]]; then quiet=$((quiet + 1)); else quiet=0; fi
        sleep 0.5
    done
    log "clean-r$ROUND: $(rb_metric ringbroker_cleaner_runs_total) cleanings"
    rb_stop "clean-r$ROUND"
    measured_start "after-r$ROUND" --log-cleaner-enable false
    rb_stop "after-r$ROUND"
done

OUT="$RESULTS/$(date -u +%Y-%m-%d)-offsets-replay"
mkdir -p "$RESULTS"
python3 - "$RUN" "$ROUNDS" "$OUT.md" "bench/run.sh offsets-replay COMMITS=$COMMITS PARTITIONS=$PARTITIONS OFFSETS_SEGMENT_BYTES=$OFFSETS_SEGMENT_BYTES ROUNDS=$ROUNDS" <<'EOF'
import json, os, statistics, sys
run, rounds, out, command = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
got = {w: [json.load(open(os.path.join(run, f"{w}-r{i}.json"))) for i in range(1, rounds + 1)] for w in ("before", "after")}
med = lambda w, k: statistics.median(r[k] for r in got[w])
with open(out, "w") as f:
    f.write("# start-up replay of __consumer_offsets, before and after compaction\n\n")
    f.write(f"Command: `{command}`. Run directory: `{run}`. Medians of {rounds} rounds.\n\n")
    f.write("| | records replayed | replay ms | start to listening ms | __consumer_offsets bytes |\n|---|---:|---:|---:|---:|\n")
    for w in ("before", "after"):
        f.write(f"| {w} compaction | {med(w, 'records'):,.0f} | {med(w, 'replay_ms'):,.0f} | {med(w, 'ready_ms'):,.0f} | {med(w, 'offsets_bytes'):,.0f} |\n")
    f.write("\nPer round (before / after replay ms): " + ", ".join(
        f"{b['replay_ms']} / {a['replay_ms']}" for b, a in zip(got["before"], got["after"])) + "\n")
print(open(out).read())
EOF
log "wrote $OUT.md"
