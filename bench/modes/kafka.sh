# Apache Kafka 4.4 by hand: provision | start | wait | pid | stop | status
#
#   bench/run.sh kafka provision   mvn package: Kafka server + tools jars into bench/kafka/target/lib
#   bench/run.sh kafka start       fresh work dir, StorageTool format, start, wait until ready
#   bench/run.sh kafka wait [S]    wait (up to S s, 90) until the broker answers (DescribeCluster)
#   bench/run.sh kafka pid         print the broker's pid
#   bench/run.sh kafka stop        SIGTERM, wait for exit (SIGKILL after 30 s), remove the work dir
#   bench/run.sh kafka status      running or not
#
# One KRaft node (broker and controller), started with lib.sh's kafka_start as the other modes
# start it, left running in the background for tests or tools run by hand, e.g.
#   bench/run.sh kafka start && SWEEP_BROKER=127.0.0.1:19092 cargo test --test versions -- --nocapture
# Settings are Kafka's defaults apart from what one node needs (replication factors 1) and
# num.partitions; in particular no fsync per message.
#
# Environment: KAFKA_BENCH_PORT [19092] (the controller: PORT+2)
#   KAFKA_BENCH_DIR [${TMPDIR:-/tmp}/ringbroker-bench-kafka] config, data, log, pid
#   KAFKA_BENCH_HEAP [1G] (-Xms and -Xmx)  KAFKA_BENCH_PARTITIONS [6] (num.partitions)
#   KAFKA_BENCH_EXTRA  extra server.properties lines (e.g. log.flush.interval.messages=1)
#   RB_CPUS  pin the JVM to these CPUs (taskset)   KEEP=1  stop keeps the work dir (its log)
# shellcheck shell=bash
# shellcheck disable=SC2034  # (lib.sh log lines say it)
NAME=kafka
case "${1:-}" in
provision) kafka_provision ;;
start) kafka_start ;;
wait) kafka_provision if-missing && kafka_wait "${2:-90}" ;;
pid) kafka_pid || { log "not running"; exit 1; } ;;
stop)
    kafka_stop
    if [[ "${KEEP:-0}" != 1 ]]; then rm -rf "$(kafka_dir)"; fi
    ;;
status) if pid="$(kafka_pid)"; then echo "running (pid $pid)"; else echo "not running"; exit 1; fi ;;
*)
    echo "usage: bench/run.sh kafka provision|start|wait|pid|stop|status" >&2
    exit 64
    ;;
esac
