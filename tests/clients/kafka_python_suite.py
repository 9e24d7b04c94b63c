"""kafka-python's side of tests/interop_clients/clients.rs: one command per run, records as
JSON lines.

Keys and values travel as hex strings (null for a null value), so the Rust test compares
bytes exactly. Every command prints JSON lines on stdout and exits non-zero, with the
reason on stderr, when it cannot finish in its time.

    create   BOOTSTRAP TOPIC PARTITIONS
    produce  BOOTSTRAP TOPIC CODEC       stdin {"key","value"} -> stdout {"partition","offset"}
    assigned BOOTSTRAP TOPIC COUNT [P:OFFSET]
                                         no group: assign() every partition and read COUNT
                                         records from the beginning, or only partition P
                                         from OFFSET
    group    BOOTSTRAP TOPIC GROUP COUNT read exactly COUNT records in the group, commit the
                                         offsets after them, close; then a {"committed"} line

kafka-python negotiates each API's version from the broker's ApiVersions answer (the highest
both know; it also infers a Kafka release from it: 4.1 here). kafka-python 3.0.12 uses
ApiVersions v4, Metadata v13, CreateTopics v7, Produce v9, Fetch v12, ListOffsets v10,
FindCoordinator v6, JoinGroup v7, SyncGroup v5, Heartbeat v4, OffsetCommit v8, OffsetFetch v8
and LeaveGroup v5 against this broker (run with --debug to see each request).
"""

import argparse
import json
import logging
import sys
import time

try:
    import kafka
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata
except ImportError as e:
    sys.exit(f"kafka-python is not installed ({e}): run .ci/run, or "
             "tests/clients/.venv/bin/pip install -r tests/clients/requirements.txt")

# Upper bound for one command; the Rust test has its own, longer one.
DEADLINE_S = 40


def emit(obj):
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")


def hexed(b):
    return None if b is None else b.hex()


def record(msg):
    return {"partition": msg.partition, "offset": msg.offset, "key": hexed(msg.key), "value": hexed(msg.value)}


def fail(why):
    sys.stdout.flush()
    sys.exit(f"kafka-python {kafka.__version__}: {why}")


def create(a):
    admin = KafkaAdminClient(bootstrap_servers=a.bootstrap, client_id="kafka-python-suite")
    admin.create_topics({a.topic: {"num_partitions": a.partitions, "replication_factor": 1}},
                        timeout_ms=30_000, wait_for_metadata=True)
    admin.close()


def produce(a):
    producer = KafkaProducer(bootstrap_servers=a.bootstrap, client_id="kafka-python-suite",
                             acks="all", compression_type=None if a.codec == "none" else a.codec,
                             linger_ms=5, retries=0, enable_idempotence=False)
    futures = []
    for line in sys.stdin:
        r = json.loads(line)
        key = bytes.fromhex(r["key"])
        value = None if r["value"] is None else bytes.fromhex(r["value"])
        futures.append(producer.send(a.topic, key=key, value=value))
    producer.flush(timeout=DEADLINE_S)
    for f in futures:
        md = f.get(timeout=DEADLINE_S)
        emit({"partition": md.partition, "offset": md.offset})
    producer.close()


def assigned(a):
    consumer = KafkaConsumer(bootstrap_servers=a.bootstrap, client_id="kafka-python-suite",
                             group_id=None, enable_auto_commit=False, check_crcs=True)
    parts = consumer.partitions_for_topic(a.topic)
    if not parts:
        fail(f"no partitions for {a.topic} in Metadata")
    if a.start:
        p, offset = (int(x) for x in a.start.split(":"))
        consumer.assign([TopicPartition(a.topic, p)])
        consumer.seek(TopicPartition(a.topic, p), offset)
    else:
        tps = [TopicPartition(a.topic, p) for p in sorted(parts)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
    got = poll_until(consumer, a.count)
    # A short extra poll: anything more is a duplicate the Rust test reports.
    got += [m for batch in consumer.poll(timeout_ms=300).values() for m in batch]
    for m in got:
        emit(record(m))
    consumer.close()
    if len(got) < a.count:
        fail(f"read {len(got)} of {a.count} records from {a.topic} by assignment in {DEADLINE_S} s")


def group(a):
    consumer = KafkaConsumer(bootstrap_servers=a.bootstrap, client_id="kafka-python-suite",
                             group_id=a.group, enable_auto_commit=False, auto_offset_reset="earliest",
                             session_timeout_ms=10_000, heartbeat_interval_ms=1_000, check_crcs=True)
    consumer.subscribe([a.topic])
    taken = poll_until(consumer, a.count)[: a.count]
    for m in taken:
        emit(record(m))
    if len(taken) < a.count:
        consumer.close(autocommit=False)
        fail(f"read {len(taken)} of {a.count} records of {a.topic} in group {a.group} in {DEADLINE_S} s")
    # Commit what was taken (records fetched past it stay unread), then leave.
    last = {}
    for m in taken:
        last[m.partition] = m.offset + 1
    consumer.commit({TopicPartition(a.topic, p): OffsetAndMetadata(o, "", -1) for p, o in last.items()})
    consumer.close(autocommit=False)
    emit({"committed": {str(p): o for p, o in sorted(last.items())}})


def poll_until(consumer, count):
    got = []
    end = time.monotonic() + DEADLINE_S
    while len(got) < count and time.monotonic() < end:
        for batch in consumer.poll(timeout_ms=200).values():
            got.extend(batch)
    return got



def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--debug", action="store_true", help="kafka-python's DEBUG log on stderr")
    sub = ap.add_subparsers(dest="command", required=True)
    c = sub.add_parser("create")
    c.add_argument("bootstrap")
    c.add_argument("topic")
    c.add_argument("partitions", type=int)
    p = sub.add_parser("produce")
    p.add_argument("bootstrap")
    p.add_argument("topic")
    p.add_argument("codec", choices=["none", "gzip", "snappy", "lz4", "zstd"])
    s = sub.add_parser("assigned")
    s.add_argument("bootstrap")
    s.add_argument("topic")
    s.add_argument("count", type=int)
    s.add_argument("start", nargs="?", metavar="PARTITION:OFFSET")
    g = sub.add_parser("group")
    g.add_argument("bootstrap")
    g.add_argument("topic")
    g.add_argument("group")
    g.add_argument("count", type=int)
    a = ap.parse_args()
    logging.basicConfig(stream=sys.stderr, level=logging.DEBUG if a.debug else logging.WARNING,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    {"create": create, "produce": produce, "assigned": assigned, "group": group}[a.command](a)


if __name__ == "__main__":
    main()
