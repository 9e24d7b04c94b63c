package ringbroker.interop;

import java.io.BufferedWriter;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;

/**
 * Feeds a consumer-group test: creates the topic (if needed), prints {@code [group-produce] topic T ready},
 * then produces {@code --records} keyed records ({@code k-<i>} / {@code v-<i>}) at about {@code --rate}
 * records per second, and appends one line {@code partition offset key} per acknowledged record to the
 * acked file. The test compares what the group consumed with that file.
 *
 * <p>Exit 0 when every record was acknowledged, 1 when some send failed.
 */
final class GroupProduce {
    private GroupProduce() {}

    static int run(Args args) throws Exception {
        String bootstrap = args.str("bootstrap");
        String topic = args.str("topic");
        String ackedFile = args.str("acked-file");
        int partitions = args.integer("partitions", 6);
        long records = args.longValue("records", 30_000);
        long rate = args.longValue("rate", 2_500);
        long maxSeconds = args.longValue("max-seconds", 120);
        args.rejectUnknown();
        String tag = "[group-produce]";

        boolean created = Kafka.createTopic(bootstrap, topic, partitions, true);
        System.out.printf("%s topic %s ready (%s)%n", tag, topic, created ? "created" : "already existed");
        System.out.flush();

        Properties pp = Kafka.producerProps(bootstrap, "rb-group-producer");
        // Idempotence stays at the client default (on): a retried batch is never stored twice, so a
        // key at two offsets would be a broker fault, reported apart from consumer duplicates.
        pp.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        pp.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "1");
        AtomicLong acked = new AtomicLong();
        AtomicLong failed = new AtomicLong();
        AtomicReference<String> firstError = new AtomicReference<>();
        AtomicReference<IOException> writeError = new AtomicReference<>();
        long start = System.nanoTime();
        long deadline = start + TimeUnit.SECONDS.toNanos(maxSeconds);

        try (BufferedWriter out = new BufferedWriter(new OutputStreamWriter(
                new FileOutputStream(ackedFile, true), StandardCharsets.UTF_8));
             KafkaProducer<byte[], byte[]> producer = Kafka.producer(pp)) {
            long lastReport = start;
            for (long i = 0; i < records; i++) {
                // Pace: record i is due at start + i / rate seconds.
                long due = start + (long) (i * 1e9 / rate);
                long now = System.nanoTime();
                if (due > now) {
                    TimeUnit.NANOSECONDS.sleep(due - now);
                }
                if (now > deadline) {
                    System.out.printf("%s giving up at record %d: --max-seconds %d%n", tag, i, maxSeconds);
                    break;
                }
                if (writeError.get() != null) {
                    throw writeError.get();
                }
                if (now - lastReport > TimeUnit.SECONDS.toNanos(2)) {
                    System.out.printf("%s sent %d, acked %d, failed %d%n", tag, i, acked.get(), failed.get());
                    System.out.flush();
                    lastReport = now;
                }
                final String key = "k-" + i;
                producer.send(new ProducerRecord<>(topic, Kafka.utf8(key), Kafka.utf8("v-" + i)), (md, ex) -> {
                    if (ex != null) {
                        failed.incrementAndGet();
                        firstError.compareAndSet(null, key + ": " + ex);
                        return;
                    }
                    try {
                        synchronized (out) {
                            out.write(md.partition() + " " + md.offset() + " " + key + "\n");
                            out.flush();
                        }
                    } catch (IOException ioe) {
                        writeError.compareAndSet(null, ioe);
                    }
                    acked.incrementAndGet();
                });
            }
            producer.flush();
            producer.close(Duration.ofSeconds(30));
            synchronized (out) {
                out.flush();
            }
        }
        if (writeError.get() != null) {
            throw writeError.get();
        }
        System.out.printf("%s done: acked %d of %d, failed %d in %.1f s%s%n", tag, acked.get(), records,
                failed.get(), (System.nanoTime() - start) / 1e9,
                firstError.get() == null ? "" : "; first error: " + firstError.get());
        return acked.get() == records ? Main.EXIT_OK : Main.EXIT_MISMATCH;
    }
}
