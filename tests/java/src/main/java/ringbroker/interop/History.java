package ringbroker.interop;

import java.io.BufferedWriter;
import java.io.FileOutputStream;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TopicExistsException;

/**
 * A history of sends for fault tests of a cluster, and its check.
 *
 * <p>{@code history-produce}: an idempotent producer (acks=all, retries without end within the
 * delivery timeout) sends records keyed {@code h-N}, N counting up, for {@code --seconds}, and
 * writes one line per outcome to the history file: {@code ack PARTITION OFFSET KEY} or
 * {@code fail KEY}. Sends whose callback never ran are neither: they are "unknown".
 *
 * <p>{@code history-verify}: reads every partition from its start to its end and counts, against
 * the history: <b>lost</b> (acknowledged, but not at its offset with its key), <b>duplicated</b>
 * (a key read twice), <b>unexpected</b> (a key never sent), and <b>reordered</b> (within a
 * partition, a key of a lower N after a higher one: the idempotent producer keeps each
 * partition's order). Prints one {@code history: ...} line and exits non-zero unless all four
 * are zero.
 */
final class History {
    private History() {}

    static int produce(Args args) throws Exception {
        String bootstrap = args.str("bootstrap");
        String topic = args.str("topic");
        String historyFile = args.str("history-file");
        int partitions = args.integer("partitions", 6);
        int replicas = args.integer("replicas", 3);
        long seconds = args.longValue("seconds", 60);
        args.rejectUnknown();
        String tag = "[history-produce]";
        try (Admin admin = Kafka.admin(bootstrap)) {
            try {
                admin.createTopics(List.of(new NewTopic(topic, partitions, (short) replicas)))
                        .all().get(60, TimeUnit.SECONDS);
            } catch (java.util.concurrent.ExecutionException e) {
                if (!(e.getCause() instanceof TopicExistsException)) {
                    throw e;
                }
            }
        }
        Properties pp = Kafka.producerProps(bootstrap, "rb-history-producer");
        pp.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        pp.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        pp.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "5000");
        pp.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        pp.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "60000");
        pp.put(ProducerConfig.RETRY_BACKOFF_MS_CONFIG, "100");
        pp.put(ProducerConfig.RECONNECT_BACKOFF_MS_CONFIG, "100");
        pp.put(ProducerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "1000");
        pp.put(ProducerConfig.METADATA_MAX_AGE_CONFIG, "5000");
        AtomicLong acked = new AtomicLong();
        AtomicLong failed = new AtomicLong();
        Semaphore outstanding = new Semaphore(500);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        long sent = 0;
        try (BufferedWriter out = new BufferedWriter(new OutputStreamWriter(
                new FileOutputStream(historyFile, false), StandardCharsets.UTF_8));
             KafkaProducer<byte[], byte[]> producer = Kafka.producer(pp)) {
            long lastReport = System.nanoTime();
            while (System.nanoTime() < deadline) {
                if (System.nanoTime() - lastReport > TimeUnit.SECONDS.toNanos(5)) {
                    System.out.printf("%s sent %d, acked %d, failed %d%n", tag, sent, acked.get(), failed.get());
                    System.out.flush();
                    lastReport = System.nanoTime();
                }
                if (!outstanding.tryAcquire(100, TimeUnit.MILLISECONDS)) {
                    continue;
                }
                String key = "h-" + sent++;
                producer.send(new ProducerRecord<>(topic, Kafka.utf8(key), Kafka.utf8("v-" + key)), (md, ex) -> {
                    outstanding.release();
                    String line = ex == null ? "ack " + md.partition() + " " + md.offset() + " " + key : "fail " + key;
                    if (ex == null) {
                        acked.incrementAndGet();
                    } else {
                        failed.incrementAndGet();
                    }
                    synchronized (out) {
                        try {
                            out.write(line + "\n");
                        } catch (java.io.IOException e) {
                            throw new java.io.UncheckedIOException(e);
                        }
                    }
                });
            }
            producer.flush();
            producer.close(Duration.ofSeconds(70));
            synchronized (out) {
                out.flush();
            }
        }
        System.out.printf("%s done: sent %d, acked %d, failed %d%n", tag, sent, acked.get(), failed.get());
        return Main.EXIT_OK;
    }

    static int verify(Args args) throws Exception {
        String bootstrap = args.str("bootstrap");
        String topic = args.str("topic");
        String historyFile = args.str("history-file");
        long sent = args.longValue("sent", -1);
        args.rejectUnknown();
        Map<String, long[]> acked = new HashMap<>(); // key -> {partition, offset}
        Set<String> known = new HashSet<>();
        long maxN = -1;
        for (String line : Files.readAllLines(Path.of(historyFile), StandardCharsets.UTF_8)) {
            String[] f = line.trim().split(" ");
            if (f[0].equals("ack") && f.length == 4) {
                acked.put(f[3], new long[] {Long.parseLong(f[1]), Long.parseLong(f[2])});
                known.add(f[3]);
                maxN = Math.max(maxN, Long.parseLong(f[3].substring(2)));
            } else if (f[0].equals("fail") && f.length == 2) {
                known.add(f[1]);
                maxN = Math.max(maxN, Long.parseLong(f[1].substring(2)));
            }
        }
        long lost = 0, duplicated = 0, unexpected = 0, reordered = 0, read = 0;
        List<String> examples = new ArrayList<>();
        Map<String, long[]> seen = new HashMap<>();
        try (KafkaConsumer<byte[], byte[]> consumer = Kafka.consumer(Kafka.consumerProps(bootstrap, "rb-history-verify"))) {
            List<TopicPartition> tps = Kafka.partitions(consumer, topic, Duration.ofSeconds(60));
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            Map<TopicPartition, Long> end = consumer.endOffsets(tps, Duration.ofSeconds(60));
            Map<Integer, Long> lastN = new HashMap<>();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
            while (tps.stream().anyMatch(tp -> consumer.position(tp, Duration.ofSeconds(30)) < end.get(tp))) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("could not read every partition to its end in 120 s");
                }
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofSeconds(1))) {
                    read++;
                    String key = new String(r.key(), StandardCharsets.UTF_8);
                    long n = key.startsWith("h-") ? Long.parseLong(key.substring(2)) : -1;
                    if (seen.containsKey(key)) {
                        duplicated++;
                        if (examples.size() < 10) {
                            examples.add("duplicated " + key + " at " + r.partition() + "/" + r.offset());
                        }
                    }
                    seen.put(key, new long[] {r.partition(), r.offset()});
                    if (n < 0 || (!known.contains(key) && (sent < 0 || n >= sent))) {
                        unexpected++;
                        if (examples.size() < 10) {
                            examples.add("unexpected " + key);
                        }
                    }
                    Long before = lastN.get(r.partition());
                    if (before != null && n < before) {
                        reordered++;
                        if (examples.size() < 10) {
                            examples.add("reordered " + key + " after h-" + before + " in partition " + r.partition());
                        }
                    }
                    lastN.put(r.partition(), Math.max(n, before == null ? n : before));
                }
            }
        }
        for (Map.Entry<String, long[]> e : acked.entrySet()) {
            long[] at = seen.get(e.getKey());
            if (at == null || at[0] != e.getValue()[0] || at[1] != e.getValue()[1]) {
                lost++;
                if (examples.size() < 10) {
                    examples.add("lost " + e.getKey() + " acknowledged at " + e.getValue()[0] + "/" + e.getValue()[1]
                            + (at == null ? ", not read" : ", read at " + at[0] + "/" + at[1]));
                }
            }
        }
        System.out.printf("history: acknowledged %d, read %d, lost %d, duplicated %d, unexpected %d, reordered %d%n",
                acked.size(), read, lost, duplicated, unexpected, reordered);
        for (String e : examples) {
            System.out.println("  " + e);
        }
        return lost + duplicated + unexpected + reordered == 0 ? Main.EXIT_OK : Main.EXIT_MISMATCH;
    }
}
