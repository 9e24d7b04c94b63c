package ringbroker.bench;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Consumer throughput without consumer groups: assign every partition of a topic, seek to the
 * beginning and poll until a given number of records has arrived.
 *
 * <pre>
 * java -cp 'bench/kafka/target/lib/*' ringbroker.bench.ConsumePerf \
 *     --bootstrap 127.0.0.1:9092 --topic T --records N [--timeout-ms 120000] [--prop k=v ...]
 * </pre>
 *
 * Prints one line of JSON on stdout: records read, records in the log before reading (sum over
 * partitions of end minus beginning offset, from ListOffsets), value/key bytes, the bytes the fetcher received
 * (consumer metric bytes-consumed-total), elapsed seconds from the first poll and from the first
 * record, and the derived MB/s (MiB of key+value bytes per second) and records/s. Exits 2 when
 * the timeout passes before all records arrived; max_gap_s is the longest wait between two polls
 * that returned records (a stall shows there) (the JSON then has "complete": false).
 */
public final class ConsumePerf {
    public static void main(String[] args) throws Exception {
        String bootstrap = null;
        String topic = null;
        long records = -1;
        long timeoutMs = 120_000;
        Properties props = new Properties();
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--bootstrap" -> bootstrap = args[++i];
                case "--topic" -> topic = args[++i];
                case "--records" -> records = Long.parseLong(args[++i]);
                case "--timeout-ms" -> timeoutMs = Long.parseLong(args[++i]);
                case "--prop" -> {
                    String kv = args[++i];
                    int eq = kv.indexOf('=');
                    if (eq <= 0) throw new IllegalArgumentException("--prop wants key=value, got " + kv);
                    props.put(kv.substring(0, eq), kv.substring(eq + 1));
                }
                default -> throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        if (bootstrap == null || topic == null || records <= 0) {
            System.err.println("usage: ConsumePerf --bootstrap HOST:PORT --topic T --records N [--timeout-ms MS] [--prop k=v]...");
            System.exit(64);
        }

        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.putIfAbsent(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.putIfAbsent(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.putIfAbsent(ConsumerConfig.CLIENT_ID_CONFIG, "consume-perf");
        // Kafka's own consumer perf tool asks for a 2 MiB socket receive buffer; the client
        // default (64 KiB, set explicitly, so no autotuning) throttles a loopback transfer.
        props.putIfAbsent(ConsumerConfig.RECEIVE_BUFFER_CONFIG, String.valueOf(2 << 20));

        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            List<PartitionInfo> infos = consumer.partitionsFor(topic, Duration.ofSeconds(30));
            if (infos == null || infos.isEmpty()) {
                System.err.println("topic " + topic + " has no partitions");
                System.exit(3);
            }
            List<TopicPartition> parts = new ArrayList<>();
            for (PartitionInfo p : infos) parts.add(new TopicPartition(p.topic(), p.partition()));
            consumer.assign(parts);
            long logRecords = 0;
            Map<TopicPartition, Long> begin = consumer.beginningOffsets(parts, Duration.ofSeconds(30));
            Map<TopicPartition, Long> endOffsets = consumer.endOffsets(parts, Duration.ofSeconds(30));
            for (TopicPartition tp : parts) logRecords += endOffsets.get(tp) - begin.get(tp);
            consumer.seekToBeginning(parts);

            long count = 0;
            long valueBytes = 0;
            long keyBytes = 0;
            long start = System.nanoTime();
            long firstRecord = -1;
            long deadline = start + timeoutMs * 1_000_000L;
            long lastRecord = start;
            long maxGap = 0;
            int emptyPolls = 0;
            while (count < records && System.nanoTime() < deadline) {
                ConsumerRecords<byte[], byte[]> batch = consumer.poll(Duration.ofMillis(500));
                long now = System.nanoTime();
                if (batch.isEmpty()) {
                    emptyPolls++;
                } else {
                    if (firstRecord < 0) firstRecord = now;
                    else maxGap = Math.max(maxGap, now - lastRecord);
                    lastRecord = now;
                }
                for (ConsumerRecord<byte[], byte[]> r : batch) {
                    count++;
                    if (r.value() != null) valueBytes += r.value().length;
                    if (r.key() != null) keyBytes += r.key().length;
                }
            }
            long end = System.nanoTime();

            double fetched = -1;
            for (Map.Entry<MetricName, ? extends Metric> e : consumer.metrics().entrySet()) {
                MetricName n = e.getKey();
                if (n.name().equals("bytes-consumed-total") && n.group().equals("consumer-fetch-manager-metrics")
                        && !n.tags().containsKey("topic")) {
                    fetched = ((Number) e.getValue().metricValue()).doubleValue();
                }
            }

            double secs = (end - start) / 1e9;
            double secsFromFirst = firstRecord < 0 ? 0 : (end - firstRecord) / 1e9;
            double mib = (valueBytes + keyBytes) / (1024.0 * 1024.0);
            boolean complete = count >= records;
            System.out.println(String.format(Locale.ROOT,
                    "{\"complete\": %b, \"records\": %d, \"log_records\": %d, \"partitions\": %d, \"value_bytes\": %d, \"key_bytes\": %d, "
                            + "\"fetched_bytes\": %.0f, \"elapsed_s\": %.3f, \"elapsed_from_first_record_s\": %.3f, "
                            + "\"mb_per_s\": %.2f, \"records_per_s\": %.1f, \"max_gap_s\": %.3f, \"empty_polls\": %d}",
                    complete, count, logRecords, parts.size(), valueBytes, keyBytes, fetched, secs, secsFromFirst,
                    secs > 0 ? mib / secs : 0, secs > 0 ? count / secs : 0, maxGap / 1e9, emptyPolls));
            System.out.flush();
            if (!complete) {
                System.err.println("timed out after " + timeoutMs + " ms with " + count + " of " + records + " records");
                System.exit(2);
            }
        }
    }
}
