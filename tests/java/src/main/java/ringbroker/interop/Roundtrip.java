package ringbroker.interop;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLongArray;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.TimestampType;

/**
 * Creates a topic, produces N keyed records with headers (acks=all), remembers every acknowledged
 * (partition, offset), reads everything back by assignment from the beginning and compares key,
 * value, headers, timestamp and offset of every record; offsets of each partition must be
 * contiguous from 0 and the end offsets must match the acknowledged counts.
 */
final class Roundtrip {
    private static final int MAX_REPORTED = 20;

    private Roundtrip() {}

    /** The deterministic content of record {@code i}. */
    static final class Expected {
        final byte[] key;
        final byte[] value;
        final List<Header> headers;
        final long timestamp;

        Expected(long seed, int i, long baseTimestamp) {
            SplittableRandom r = new SplittableRandom(seed * 0x9E3779B97F4A7C15L + i);
            key = Kafka.utf8("k-" + i);
            value = value(r, i);
            headers = new ArrayList<>(2);
            headers.add(new RecordHeader("rb-idx", Kafka.utf8("i-" + i)));
            if (i % 2 == 0) {
                byte[] tag = new byte[1 + r.nextInt(40)];
                r.nextBytes(tag);
                headers.add(new RecordHeader("rb-tag", tag));
            }
            timestamp = baseTimestamp + i;
        }

        private static byte[] value(SplittableRandom r, int i) {
            if (i % 1000 == 7) {
                return new byte[0]; // empty, not null
            }
            if (i % 1000 == 500) {
                return null; // a tombstone-style null value
            }
            int len;
            if (i % 101 == 0) {
                len = 8192 + r.nextInt(24 * 1024); // 8..32 KiB
            } else if (i % 10 == 0) {
                len = 500 + r.nextInt(1500);
            } else {
                len = 1 + r.nextInt(300);
            }
            byte[] b = new byte[len];
            // First part compressible (a small alphabet in runs), the rest random bytes, so every
            // codec has something to do and something it cannot shrink.
            int text = len / 2 + r.nextInt(len / 2 + 1);
            int j = 0;
            while (j < text) {
                byte c = (byte) ('a' + r.nextInt(8));
                int run = 1 + r.nextInt(12);
                for (int k = 0; k < run && j < text; k++) {
                    b[j++] = c;
                }
            }
            byte[] rnd = new byte[len - text];
            r.nextBytes(rnd);
            System.arraycopy(rnd, 0, b, text, rnd.length);
            return b;
        }
    }

    static int run(Args args) throws Exception {
        String bootstrap = args.str("bootstrap");
        String topic = args.str("topic");
        int partitions = args.integer("partitions", 3);
        int n = args.integer("records", 10_000);
        String compression = args.str("compression", "none");
        int timeoutSec = args.integer("timeout-sec", 60);
        long seed = args.longValue("seed", 42);
        // Small: many fetches per partition (fetch sessions then carry the consumer's progress).
        int maxPartitionFetchBytes = args.integer("max-partition-fetch-bytes", 0);
        Map<String, String> topicConfigs = new HashMap<>();
        for (String pair : args.str("topic-config", "").split(",")) {
            if (pair.isEmpty()) {
                continue;
            }
            String[] kv = pair.split("=", 2);
            if (kv.length != 2) {
                throw new Args.UsageException("--topic-config takes K=V pairs, got " + pair);
            }
            topicConfigs.put(kv[0], kv[1]);
        }
        args.rejectUnknown();
        if (!List.of("none", "gzip", "snappy", "lz4", "zstd").contains(compression)) {
            throw new Args.UsageException("--compression must be none|gzip|snappy|lz4|zstd, got " + compression);
        }
        if (partitions < 1 || n < 1) {
            throw new Args.UsageException("--partitions and --records must be positive");
        }
        String tag = "[roundtrip " + compression + "]";

        long t0 = System.nanoTime();
        Kafka.createTopic(bootstrap, topic, partitions, false, topicConfigs);
        System.out.printf("%s created topic %s with %d partitions, configs %s%n", tag, topic, partitions, topicConfigs);

        // Timestamps slightly in the past so no broker-side "too far in the future" check trips.
        long baseTs = System.currentTimeMillis() - n - 60_000;

        // ---- produce ----
        AtomicIntegerArray ackedPartition = new AtomicIntegerArray(n);
        AtomicLongArray ackedOffset = new AtomicLongArray(n);
        for (int i = 0; i < n; i++) {
            ackedPartition.set(i, -1);
        }
        AtomicInteger acked = new AtomicInteger();
        ConcurrentLinkedQueue<String> sendErrors = new ConcurrentLinkedQueue<>();
        AtomicInteger sendErrorCount = new AtomicInteger();
        long valueBytes = 0;

        Properties pp = Kafka.producerProps(bootstrap, "rb-interop-roundtrip-producer");
        pp.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, compression);
        pp.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        pp.put(ProducerConfig.BATCH_SIZE_CONFIG, String.valueOf(64 * 1024));
        pp.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        pp.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "20000");
        pp.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "45000");
        try (KafkaProducer<byte[], byte[]> producer = Kafka.producer(pp)) {
            for (int i = 0; i < n; i++) {
                Expected e = new Expected(seed, i, baseTs);
                if (e.value != null) {
                    valueBytes += e.value.length;
                }
                final int idx = i;
                producer.send(new ProducerRecord<>(topic, null, e.timestamp, e.key, e.value, e.headers),
                        (md, ex) -> {
                            if (ex != null) {
                                if (sendErrorCount.incrementAndGet() <= MAX_REPORTED) {
                                    sendErrors.add("record k-" + idx + ": " + ex);
                                }
                            } else {
                                ackedPartition.set(idx, md.partition());
                                ackedOffset.set(idx, md.offset());
                            }
                            acked.incrementAndGet();
                        });
            }
            producer.flush();
        }
        // close() has waited for every callback.
        long tProduced = System.nanoTime();
        if (sendErrorCount.get() > 0) {
            System.err.printf("%s FAIL: %d of %d sends failed; first errors:%n", tag, sendErrorCount.get(), n);
            sendErrors.forEach(s -> System.err.println("  " + s));
            return Main.EXIT_MISMATCH;
        }
        if (acked.get() != n) {
            System.err.printf("%s FAIL: only %d of %d send callbacks ran%n", tag, acked.get(), n);
            return Main.EXIT_MISMATCH;
        }
        List<String> problems = new ArrayList<>();
        int problemCount = 0;
        long[] ackedPerPartition = new long[partitions];
        Map<Long, Integer> byPartitionOffset = new HashMap<>(n * 2);
        for (int i = 0; i < n; i++) {
            int p = ackedPartition.get(i);
            long o = ackedOffset.get(i);
            if (p < 0 || p >= partitions || o < 0) {
                problemCount++;
                addProblem(problems, "ack of k-" + i + " has partition " + p + " offset " + o);
                continue;
            }
            ackedPerPartition[p]++;
            Integer prev = byPartitionOffset.put(((long) p << 40) | o, i);
            if (prev != null) {
                problemCount++;
                addProblem(problems, "offset " + o + " of partition " + p + " acknowledged for both k-" + prev
                        + " and k-" + i);
            }
        }
        if (problemCount > 0) {
            return fail(tag, "acknowledgements are inconsistent", problems, problemCount);
        }
        System.out.printf("%s produced %d records (%d value bytes) in %d ms; acked per partition %s%n",
                tag, n, valueBytes, TimeUnit.NANOSECONDS.toMillis(tProduced - t0), Arrays.toString(ackedPerPartition));

        // ---- consume ----
        Properties cp = Kafka.consumerProps(bootstrap, "rb-interop-roundtrip-consumer");
        if (maxPartitionFetchBytes > 0) {
            cp.put(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, String.valueOf(maxPartitionFetchBytes));
        }
        boolean[] seen = new boolean[n];
        int consumed = 0;
        long[] nextOffset = new long[partitions];
        try (KafkaConsumer<byte[], byte[]> consumer = Kafka.consumer(cp)) {
            List<TopicPartition> tps = Kafka.partitions(consumer, topic, Duration.ofSeconds(30));
            if (tps.size() != partitions) {
                System.err.printf("%s FAIL: Metadata lists %d partitions of %s, created %d: %s%n", tag,
                        tps.size(), topic, partitions, tps);
                return Main.EXIT_MISMATCH;
            }
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            Map<TopicPartition, Long> begin = consumer.beginningOffsets(tps, Duration.ofSeconds(30));
            Map<TopicPartition, Long> end = consumer.endOffsets(tps, Duration.ofSeconds(30));
            for (TopicPartition tp : tps) {
                long b = begin.get(tp);
                long e = end.get(tp);
                if (b != 0) {
                    problemCount++;
                    addProblem(problems, "ListOffsets(earliest) of " + tp + " is " + b + ", expected 0");
                }
                if (e != ackedPerPartition[tp.partition()]) {
                    problemCount++;
                    addProblem(problems, "ListOffsets(latest) of " + tp + " is " + e + ", expected "
                            + ackedPerPartition[tp.partition()] + " (records acknowledged there)");
                }
            }

            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(timeoutSec);
            while (consumed < n && System.nanoTime() < deadline) {
                ConsumerRecords<byte[], byte[]> recs = consumer.poll(Duration.ofMillis(500));
                for (ConsumerRecord<byte[], byte[]> rec : recs) {
                    int p = rec.partition();
                    String where = "partition " + p + " offset " + rec.offset();
                    if (rec.offset() != nextOffset[p]) {
                        problemCount++;
                        addProblem(problems, where + ": offsets not contiguous, expected offset " + nextOffset[p]);
                    }
                    nextOffset[p] = rec.offset() + 1;
                    consumed++;
                    Integer idx = byPartitionOffset.get(((long) p << 40) | rec.offset());
                    if (idx == null) {
                        problemCount++;
                        addProblem(problems, where + ": no record was acknowledged here, but read key "
                                + Kafka.str(rec.key()));
                        continue;
                    }
                    if (seen[idx]) {
                        problemCount++;
                        addProblem(problems, where + ": read twice");
                        continue;
                    }
                    seen[idx] = true;
                    problemCount += compare(problems, where, new Expected(seed, idx, baseTs), rec);
                }
            }
            if (consumed < n) {
                problemCount++;
                addProblem(problems, "read only " + consumed + " of " + n + " records within " + timeoutSec
                        + " s; next offsets per partition " + Arrays.toString(nextOffset) + ", acknowledged "
                        + Arrays.toString(ackedPerPartition));
            }
        }
        long tConsumed = System.nanoTime();
        for (int i = 0; i < n && consumed >= n; i++) {
            if (!seen[i]) {
                problemCount++;
                addProblem(problems, "record k-" + i + " (partition " + ackedPartition.get(i) + " offset "
                        + ackedOffset.get(i) + ") was never read");
            }
        }
        if (problemCount > 0) {
            return fail(tag, "read-back does not match what was acknowledged", problems, problemCount);
        }
        System.out.printf("%s OK: %d records over %d partitions %s, compression=%s: keys, values, headers, "
                        + "timestamps and offsets all match; produce %d ms, consume %d ms%n",
                tag, n, partitions, Arrays.toString(ackedPerPartition), compression,
                TimeUnit.NANOSECONDS.toMillis(tProduced - t0), TimeUnit.NANOSECONDS.toMillis(tConsumed - tProduced));
        return Main.EXIT_OK;
    }

    private static int compare(List<String> problems, String where, Expected e, ConsumerRecord<byte[], byte[]> rec) {
        int bad = 0;
        String k = Kafka.str(e.key);
        if (!Arrays.equals(e.key, rec.key())) {
            bad++;
            addProblem(problems, where + ": key " + Kafka.str(rec.key()) + ", acknowledged " + k);
        }
        if (!Arrays.equals(e.value, rec.value())) {
            bad++;
            addProblem(problems, where + " (" + k + "): value [" + Kafka.describe(rec.value()) + "], expected ["
                    + Kafka.describe(e.value) + "]");
        }
        Header[] got = rec.headers().toArray();
        boolean headersOk = got.length == e.headers.size();
        for (int h = 0; headersOk && h < got.length; h++) {
            Header want = e.headers.get(h);
            headersOk = want.key().equals(got[h].key()) && Arrays.equals(want.value(), got[h].value());
        }
        if (!headersOk) {
            bad++;
            addProblem(problems, where + " (" + k + "): headers " + headersToString(Arrays.asList(got))
                    + ", expected " + headersToString(e.headers));
        }
        if (rec.timestampType() != TimestampType.CREATE_TIME || rec.timestamp() != e.timestamp) {
            bad++;
            addProblem(problems, where + " (" + k + "): timestamp " + rec.timestamp() + " (" + rec.timestampType()
                    + "), expected " + e.timestamp + " (CreateTime)");
        }
        return bad;
    }

    private static String headersToString(List<Header> hs) {
        StringBuilder sb = new StringBuilder("[");
        for (Header h : hs) {
            if (sb.length() > 1) {
                sb.append(", ");
            }
            sb.append(h.key()).append('=').append(Kafka.describe(h.value()));
        }
        return sb.append(']').toString();
    }

    private static void addProblem(List<String> problems, String p) {
        if (problems.size() < MAX_REPORTED) {
            problems.add(p);
        }
    }

    private static int fail(String tag, String what, List<String> problems, int count) {
        System.err.printf("%s FAIL: %s: %d problem(s); the first %d:%n", tag, what, count, problems.size());
        for (String p : problems) {
            System.err.println("  " + p);
        }
        return Main.EXIT_MISMATCH;
    }
}
