package ringbroker.interop;

import java.io.BufferedWriter;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Properties;
import java.util.SplittableRandom;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;

/**
 * Produces keyed records without end (acks=all, no retries, short timeouts) and appends one line
 * {@code partition offset key valueHash} per acknowledged record to the acked file, flushed line by
 * line, so whatever kills the broker, the file lists exactly what the broker acknowledged.
 *
 * <p>Stops when killed, when no record has been acknowledged for {@code --give-up-ms} while sends
 * fail (the broker is gone), or at the {@code --max-records} / {@code --max-seconds} bounds.
 */
final class CrashProduce {
    private CrashProduce() {}

    /** The value of record {@code i}: deterministic, 16..~1000 bytes. */
    static byte[] value(long i) {
        SplittableRandom r = new SplittableRandom(0xC0FFEEL * 31 + i);
        int len = 16 + (i % 50 == 0 ? r.nextInt(4000) : r.nextInt(400));
        byte[] b = new byte[len];
        r.nextBytes(b);
        return b;
    }

    static int run(Args args) throws Exception {
        String bootstrap = args.str("bootstrap");
        String topic = args.str("topic");
        String ackedFile = args.str("acked-file");
        int partitions = args.integer("partitions", 3);
        long giveUpMs = args.longValue("give-up-ms", 10_000);
        long maxRecords = args.longValue("max-records", 2_000_000);
        long maxSeconds = args.longValue("max-seconds", 300);
        int maxOutstanding = args.integer("max-outstanding", 2_000);
        args.rejectUnknown();
        String tag = "[crash-produce]";

        boolean created = Kafka.createTopic(bootstrap, topic, partitions, true);
        System.out.printf("%s topic %s %s%n", tag, topic, created ? "created" : "already existed");
        System.out.flush();

        Properties pp = producerProps(bootstrap);
        long start = System.nanoTime();
        AtomicLong acked = new AtomicLong();
        AtomicLong failed = new AtomicLong();
        AtomicLong lastAckNanos = new AtomicLong(start);
        AtomicLong lastFailNanos = new AtomicLong(0);
        AtomicReference<String> firstError = new AtomicReference<>();
        AtomicReference<IOException> writeError = new AtomicReference<>();
        Semaphore outstanding = new Semaphore(maxOutstanding);
        long sent = 0;
        String stopReason;

        try (BufferedWriter out = new BufferedWriter(new OutputStreamWriter(
                new FileOutputStream(ackedFile, true), StandardCharsets.UTF_8));
             KafkaProducer<byte[], byte[]> producer = Kafka.producer(pp)) {
            long lastReport = System.nanoTime();
            while (true) {
                long now = System.nanoTime();
                if (sent >= maxRecords) {
                    stopReason = "reached --max-records " + maxRecords;
                    break;
                }
                if (now - start > TimeUnit.SECONDS.toNanos(maxSeconds)) {
                    stopReason = "reached --max-seconds " + maxSeconds;
                    break;
                }
                if (writeError.get() != null) {
                    throw writeError.get();
                }
                long lastFail = lastFailNanos.get();
                if (lastFail != 0 && lastFail > lastAckNanos.get()
                        && now - lastAckNanos.get() > TimeUnit.MILLISECONDS.toNanos(giveUpMs)) {
                    stopReason = "no acknowledgement for " + giveUpMs + " ms while sends fail (broker gone?)";
                    break;
                }
                if (now - lastReport > TimeUnit.SECONDS.toNanos(5)) {
                    System.out.printf("%s sent %d, acked %d, failed %d%n", tag, sent, acked.get(), failed.get());
                    System.out.flush();
                    lastReport = now;
                }
                if (!outstanding.tryAcquire(200, TimeUnit.MILLISECONDS)) {
                    continue;
                }
                final long i = sent++;
                final String key = "c-" + i;
                final byte[] value = value(i);
                final String hash = Kafka.hash(value);
                try {
                    producer.send(new ProducerRecord<>(topic, Kafka.utf8(key), value), (md, ex) -> {
                        outstanding.release();
                        if (ex != null) {
                            failed.incrementAndGet();
                            lastFailNanos.set(System.nanoTime());
                            firstError.compareAndSet(null, key + ": " + ex);
                            return;
                        }
                        // Callbacks run on the producer's single I/O thread, in order.
                        try {
                            synchronized (out) {
                                out.write(md.partition() + " " + md.offset() + " " + key + " " + hash + "\n");
                                out.flush();
                            }
                        } catch (IOException ioe) {
                            writeError.compareAndSet(null, ioe);
                        }
                        acked.incrementAndGet();
                        lastAckNanos.set(System.nanoTime());
                    });
                } catch (KafkaException e) {
                    outstanding.release();
                    failed.incrementAndGet();
                    lastFailNanos.set(System.nanoTime());
                    firstError.compareAndSet(null, key + " (send threw): " + e);
                    Thread.sleep(100);
                }
            }
            System.out.printf("%s stopping: %s%n", tag, stopReason);
            System.out.flush();
            // Whatever is still pending fails within the delivery timeout; do not wait longer.
            producer.close(Duration.ofSeconds(12));
            synchronized (out) {
                out.flush();
            }
        }
        System.out.printf("%s done: sent %d, acked %d, failed %d%s%n", tag, sent, acked.get(), failed.get(),
                firstError.get() == null ? "" : "; first error: " + firstError.get());
        if (writeError.get() != null) {
            throw writeError.get();
        }
        // Success means: the acked file is complete for what the broker acknowledged. Whether
        // that is enough is for crash-verify (and the test) to judge.
        return Main.EXIT_OK;
    }

    private static Properties producerProps(String bootstrap) {
        Properties pp = Kafka.producerProps(bootstrap, "rb-interop-crash-producer");
        // Never retry: a retried batch could land twice. Give up quickly once the broker is gone.
        pp.put(ProducerConfig.RETRIES_CONFIG, "0");
        pp.put(ProducerConfig.LINGER_MS_CONFIG, "2");
        pp.put(ProducerConfig.BATCH_SIZE_CONFIG, String.valueOf(32 * 1024));
        pp.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "5000");
        pp.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "8000");
        pp.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "5000");
        pp.put(ProducerConfig.RECONNECT_BACKOFF_MS_CONFIG, "100");
        pp.put(ProducerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "1000");
        return pp;
    }
}
