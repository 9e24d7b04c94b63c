#!/usr/bin/env bash
# What TLS and SASL cost: Kafka's own ProducerPerformance and ConsumerPerformance (the Java
# client) against one Ringbroker over PLAINTEXT, SSL and SASL_SSL (SCRAM-SHA-512), in ROUNDS
# rounds (each round runs the three one after another, so drift of a shared machine hits all
# alike). Over TLS the broker reads fetched file regions and writes them through rustls;
# plaintext sends them with sendfile.
#
#   bench/tls-cost.sh          environment: ROUNDS [3] RECORDS [300000] RECORD_SIZE [1024]
#
# Prints a markdown table of medians and each protocol's ratio to PLAINTEXT.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
LIB="$HERE/kafka/target/lib"
ROUNDS="${ROUNDS:-3}"
RECORDS="${RECORDS:-300000}"
RECORD_SIZE="${RECORD_SIZE:-1024}"
RUN="$(mktemp -d "${TMPDIR:-/tmp}/tls-cost.XXXXXX")"
log() { echo "[tls-cost $(date -u +%H:%M:%S)] $*" >&2; }

PID=""
cleanup() {
    if [[ -n "$PID" ]]; then kill "$PID" 2>/dev/null || true; fi
    rm -rf "$RUN/data"
}
trap cleanup EXIT

log "building (release)"
(cd "$ROOT" && cargo build --release -p ringbroker 2>&1 | tail -1 >&2)
"$HERE/kafka.sh" provision >/dev/null
RB="$ROOT/target/release/ringbroker"

# A CA and a server certificate for 127.0.0.1.
cd "$RUN"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=tls-cost CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign" \
    -keyout ca.key -out ca.crt 2>/dev/null
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=localhost" \
    -keyout server.key -out server.csr 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >server.ext
openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile server.ext \
    -out server.crt 2>/dev/null

"$RB" --data-dir "$RUN/data" --flush os --admin-listen off --default-partitions 6 \
    --listeners "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0" \
    --ssl-certificate-file server.crt --ssl-key-file server.key >"$RUN/out" 2>"$RUN/log" &
PID=$!
for _ in $(seq 1 100); do grep -q "^ringbroker listening on" "$RUN/out" 2>/dev/null && break; sleep 0.1; done
addr() { awk -v n="$1" '$1 == "ringbroker" && $2 == "listener" && $3 == n { print $NF }' "$RUN/out"; }
echo bench-pw | "$RB" user set bench --password-stdin -b "$(addr PLAINTEXT)" >/dev/null

printf '' >PLAINTEXT.properties
printf 'security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location=%s/ca.crt\n' "$RUN" >SSL.properties
{
    cat SSL.properties | sed 's/=SSL$/=SASL_SSL/'
    echo "sasl.mechanism=SCRAM-SHA-512"
    echo 'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="bench" password="bench-pw";'
} >SASL_SSL.properties

java_tool() { java -Xmx512M -cp "$LIB/*" "$@"; }
for ((round = 1; round <= ROUNDS; round++)); do
    for proto in PLAINTEXT SSL SASL_SSL; do
        topic="t-$proto-$round"
        log "round $round: $proto produce"
        java_tool org.apache.kafka.tools.ProducerPerformance --topic "$topic" --num-records "$RECORDS" \
            --record-size "$RECORD_SIZE" --throughput -1 --bootstrap-server "$(addr "$proto")" \
            --command-config "$RUN/$proto.properties" --command-property acks=1 enable.idempotence=false \
            >"r$round-$proto-produce.out" 2>"r$round-$proto-produce.err"
        log "round $round: $proto consume"
        java_tool org.apache.kafka.tools.ConsumerPerformance --topic "$topic" --num-records "$RECORDS" \
            --bootstrap-server "$(addr "$proto")" --command-config "$RUN/$proto.properties" --timeout 120000 \
            >"r$round-$proto-consume.out" 2>"r$round-$proto-consume.err"
    done
done

python3 - "$RUN" "$ROUNDS" <<'EOF'
import re, statistics, sys
run, rounds = sys.argv[1], int(sys.argv[2])
protos = ["PLAINTEXT", "SSL", "SASL_SSL"]
def produce(r, p):
    line = [l for l in open(f"{run}/r{r}-{p}-produce.out") if "records sent" in l][-1]
    return float(re.search(r"([\d.]+) records/sec", line).group(1))
def consume(r, p):
    # CSV: start, end, MB, MB.sec, nMsg, nMsg.sec, rebalance ms, fetch ms, fetch MB.sec, fetch nMsg.sec
    line = [l for l in open(f"{run}/r{r}-{p}-consume.out") if l[:1].isdigit()][-1]
    return float(line.split(",")[9])
print("| Java client, records/s | " + " | ".join(protos) + " | SSL/PLAINTEXT | SASL_SSL/PLAINTEXT |")
print("|---|---:|---:|---:|---:|---:|")
for label, f in [("ProducerPerformance", produce), ("ConsumerPerformance (fetch time)", consume)]:
    med = {p: statistics.median(f(r, p) for r in range(1, rounds + 1)) for p in protos}
    ratio = lambda p: sorted(f(r, p) / f(r, "PLAINTEXT") for r in range(1, rounds + 1))
    cells = [f"{med[p] / med['PLAINTEXT']:.2f} ({ratio(p)[0]:.2f}–{ratio(p)[-1]:.2f})" for p in protos[1:]]
    print(f"| {label} | " + " | ".join(f"{med[p]:,.0f}" for p in protos) + " | " + " | ".join(cells) + " |")
EOF
log "runs kept in $RUN"
