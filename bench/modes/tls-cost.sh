# what TLS and SASL cost: the Java client over PLAINTEXT, SSL, SASL_SSL
#
#   bench/run.sh tls-cost
#
# Kafka's own ProducerPerformance and ConsumerPerformance (the Java client) against one
# Ringbroker over PLAINTEXT, SSL and SASL_SSL (SCRAM-SHA-512), in ROUNDS rounds (each round
# runs the three one after another, so drift of a shared machine hits all alike). Over TLS
# the broker reads fetched file regions and writes them through rustls; plaintext sends them
# with sendfile. The listeners bind port 0 (free ports the broker picks and prints).
# Prints a markdown table of medians and each protocol's ratio to PLAINTEXT.
#
# Environment: ROUNDS [3] RECORDS [300000] RECORD_SIZE [1024] RB_ADMIN_PORT [0] WAIT_QUIET [0]
# shellcheck shell=bash
ROUNDS="${ROUNDS:-3}"
RECORDS="${RECORDS:-300000}"
RECORD_SIZE="${RECORD_SIZE:-1024}"

bench_init tls-cost
build_release
rb_private_copy
kafka_provision

# A CA and a server certificate for 127.0.0.1.
cd "$RUN" || exit 1
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=tls-cost CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign" \
    -keyout ca.key -out ca.crt 2>/dev/null
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=localhost" \
    -keyout server.key -out server.csr 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >server.ext
openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile server.ext \
    -out server.crt 2>/dev/null

rb_start rb "$RB" --flush os --default-partitions 6 \
    --listeners "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0" \
    --ssl-certificate-file "$RUN/server.crt" --ssl-key-file "$RUN/server.key"
echo bench-pw | "$RB" user set bench --password-stdin -b "$(rb_addr PLAINTEXT)" >/dev/null
wait_quiet "${WAIT_QUIET:-0}"

printf '' >PLAINTEXT.properties
printf 'security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location=%s/ca.crt\n' "$RUN" >SSL.properties
{
    sed 's/=SSL$/=SASL_SSL/' SSL.properties
    echo "sasl.mechanism=SCRAM-SHA-512"
    echo 'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="bench" password="bench-pw";'
} >SASL_SSL.properties

for ((round = 1; round <= ROUNDS; round++)); do
    for proto in PLAINTEXT SSL SASL_SSL; do
        topic="t-$proto-$round"
        log "round $round: $proto produce"
        java_tool org.apache.kafka.tools.ProducerPerformance --topic "$topic" --num-records "$RECORDS" \
            --record-size "$RECORD_SIZE" --throughput -1 --bootstrap-server "$(rb_addr "$proto")" \
            --command-config "$RUN/$proto.properties" --command-property acks=1 enable.idempotence=false \
            >"r$round-$proto-produce.out" 2>"r$round-$proto-produce.err"
        log "round $round: $proto consume"
        java_tool org.apache.kafka.tools.ConsumerPerformance --topic "$topic" --num-records "$RECORDS" \
            --bootstrap-server "$(rb_addr "$proto")" --command-config "$RUN/$proto.properties" --timeout 120000 \
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
