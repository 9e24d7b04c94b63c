package ringbroker.interop;

import java.io.BufferedWriter;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.utils.Utils;

/**
 * The idempotent producer with the client's default settings (enable.idempotence on, acks=all,
 * max.in.flight.requests.per.connection 5, retries unbounded; only the delivery and request
 * timeouts may be set) sends {@code --records} keyed records to an existing topic, in one
 * thread, in order.
 *
 * <p>Record {@code i} has key {@code k-<i>}; the default partitioner puts it on partition
 * {@code toPositive(murmur2(key)) % partitions}, which this class computes up front so that the
 * value can carry the record's place in its partition's send order:
 * {@code i=<i> p=<partition> s=<sequence within the partition> } followed by padding. Whoever
 * reads the partition back can check the sequence numbers run 0, 1, 2, ... with no gap and no
 * repeat. Every acknowledgement appends {@code partition offset i s} to the acked file.
 *
 * <p>Exit 0 when every record was acknowledged on its expected partition; 1 when any send
 * failed or landed elsewhere (the first errors are printed).
 */
final class IdemProduce {
    private IdemProduce() {}

    /** The partition Kafka's built-in partitioner picks for a key. */
    static int partitionFor(byte[] key, int partitions) {
        return Utils.toPositive(Utils.murmur2(key)) % partitions;
    }

    /** The value of record {@code i}: its identity, then 0..~300 bytes of padding. */
    static byte[] value(long i, int partition, long seq) {
        StringBuilder sb = new StringBuilder(400);
        sb.append("i=").append(i).append(" p=").append(partition).append(" s=").append(seq).append(' ');
        long x = i * 0x9E3779B97F4A7C15L + 1;
        int pad = (int) ((i * 7919) % 300);
        for (int k = 0; k < pad; k++) {
            x ^= x << 13;
            x ^= x >>> 7;
            x ^= x << 17;
            sb.append((char) ('a' + (int) ((x >>> 33) % 26)));
        }
        return Kafka.utf8(sb.toString());
    }

    static int run(Args args) throws Exception {
        String bootstrap = args.str("bootstrap");
        String topic = args.str("topic");
        int partitions = args.integer("partitions", 4);
        long records = args.longValue("records", 100_000);
        String ackedFile = args.str("acked-file");
        long rate = args.longValue("rate", 0);
        long deliveryTimeoutMs = args.longValue("delivery-timeout-ms", 120_000);
        long requestTimeoutMs = args.longValue("request-timeout-ms", 30_000);
        long maxSeconds = args.longValue("max-seconds", 150);
        args.rejectUnknown();
        String tag = "[idem-produce]";

        Properties pp = Kafka.producerProps(bootstrap, "rb-interop-idem-producer");
        // Idempotence, acks, retries and max.in.flight stay at the client's defaults. Only the
        // timeouts are bounded, so that a broken broker fails the run instead of hanging it.
        pp.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, String.valueOf(deliveryTimeoutMs));
        pp.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, String.valueOf(requestTimeoutMs));

        long[] nextSeq = new long[partitions];
        AtomicLong acked = new AtomicLong();
        AtomicLong failed = new AtomicLong();
        AtomicLong misplaced = new AtomicLong();
        AtomicReference<String> firstError = new AtomicReference<>();
        AtomicReference<String> firstMisplaced = new AtomicReference<>();
        AtomicReference<IOException> writeError = new AtomicReference<>();
        long start = System.nanoTime();
        long sent = 0;
        String stopReason = null;
        Map<MetricName, ? extends Metric> metrics;

        try (BufferedWriter out = new BufferedWriter(new OutputStreamWriter(
                new FileOutputStream(ackedFile, false), StandardCharsets.UTF_8), 1 << 16);
             KafkaProducer<byte[], byte[]> producer = Kafka.producer(pp)) {
            long lastReport = start;
            for (long i = 0; i < records; i++) {
                long now = System.nanoTime();
                if (now - start > TimeUnit.SECONDS.toNanos(maxSeconds)) {
                    stopReason = "reached --max-seconds " + maxSeconds + " after sending " + sent + " records";
                    break;
                }
                if (rate > 0) {
                    long due = start + (long) (i * 1e9 / rate);
                    if (due > now) {
                        Thread.sleep((due - now) / 1_000_000, (int) ((due - now) % 1_000_000));
                    }
                }
                if (now - lastReport > TimeUnit.SECONDS.toNanos(5)) {
                    System.out.printf("%s sent %d, acked %d, failed %d%n", tag, sent, acked.get(), failed.get());
                    System.out.flush();
                    lastReport = now;
                }
                final long idx = i;
                final byte[] key = Kafka.utf8("k-" + i);
                final int p = partitionFor(key, partitions);
                final long seq = nextSeq[p]++;
                byte[] value = value(i, p, seq);
                try {
                    producer.send(new ProducerRecord<>(topic, key, value), (md, ex) -> {
                        if (ex != null) {
                            failed.incrementAndGet();
                            firstError.compareAndSet(null, "record " + idx + " (partition " + p + " s=" + seq
                                    + "): " + ex);
                            return;
                        }
                        if (md.partition() != p) {
                            misplaced.incrementAndGet();
                            firstMisplaced.compareAndSet(null, "record " + idx + " acknowledged on partition "
                                    + md.partition() + ", expected " + p);
                        }
                        long n = acked.incrementAndGet();
                        // Callbacks run on the producer's I/O thread, one at a time.
                        try {
                            out.write(md.partition() + " " + md.offset() + " " + idx + " " + seq + "\n");
                            if (n % 512 == 0) {
                                out.flush();
                            }
                        } catch (IOException ioe) {
                            writeError.compareAndSet(null, ioe);
                        }
                    });
                    sent++;
                } catch (KafkaException e) {
                    failed.incrementAndGet();
                    firstError.compareAndSet(null, "record " + idx + " (send threw): " + e);
                    stopReason = "send threw " + e;
                    break;
                }
            }
            producer.flush();
            metrics = producer.metrics();
            System.out.printf("%s producer metrics: %s%n", tag, pick(metrics));
            producer.close(Duration.ofSeconds(30));
            out.flush();
        }
        double secs = (System.nanoTime() - start) / 1e9;
        System.out.printf("%s done in %.1f s: sent %d of %d, acked %d, failed %d, misplaced %d%n", tag, secs, sent,
                records, acked.get(), failed.get(), misplaced.get());
        if (writeError.get() != null) {
            throw writeError.get();
        }
        int code = Main.EXIT_OK;
        if (stopReason != null) {
            System.err.printf("%s FAIL: stopped early: %s%n", tag, stopReason);
            code = Main.EXIT_MISMATCH;
        }
        if (failed.get() > 0) {
            System.err.printf("%s FAIL: %d record(s) were not acknowledged; first: %s%n", tag, failed.get(),
                    firstError.get());
            code = Main.EXIT_MISMATCH;
        }
        if (misplaced.get() > 0) {
            System.err.printf("%s FAIL: %d record(s) landed on an unexpected partition; first: %s%n", tag,
                    misplaced.get(), firstMisplaced.get());
            code = Main.EXIT_MISMATCH;
        }
        if (acked.get() != records) {
            System.err.printf("%s FAIL: %d of %d records acknowledged%n", tag, acked.get(), records);
            code = Main.EXIT_MISMATCH;
        }
        return code;
    }

    /** The producer metrics that show retries and errors happened, as {@code name=value}. */
    private static String pick(Map<MetricName, ? extends Metric> metrics) {
        StringBuilder sb = new StringBuilder();
        for (Map.Entry<MetricName, ? extends Metric> e : metrics.entrySet()) {
            MetricName n = e.getKey();
            if (!n.group().equals("producer-metrics")) {
                continue;
            }
            switch (n.name()) {
                case "record-retry-total":
                case "record-error-total":
                case "record-send-total":
                case "request-total":
                case "connection-creation-total":
                case "connection-close-total":
                    sb.append(n.name()).append('=').append(e.getValue().metricValue()).append(' ');
                    break;
                default:
                    break;
            }
        }
        return sb.toString().trim();
    }
}
