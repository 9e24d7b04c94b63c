package ringbroker.interop;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;

/**
 * After a crash and restart: every record listed in the acked file must be in the log at exactly
 * its acknowledged offset with the same key and value; each partition's offsets must be contiguous
 * from 0; and a new record produced to each partition must get an offset above every acknowledged
 * (and every surviving) offset of that partition, that is, offsets are never reused.
 */
final class CrashVerify {
    private static final int MAX_REPORTED = 20;

    private CrashVerify() {}

    private static final class Acked {
        final int partition;
        final long offset;
        final String key;
        final String hash;
        final int line;

        Acked(int partition, long offset, String key, String hash, int line) {
            this.partition = partition;
            this.offset = offset;
            this.key = key;
            this.hash = hash;
            this.line = line;
        }
    }

    /** What the log holds at one offset. */
    private static final class Stored {
        final String key;
        final String hash;

        Stored(String key, String hash) {
            this.key = key;
            this.hash = hash;
        }
    }

    static int run(Args args) throws Exception {
        String bootstrap = args.str("bootstrap");
        String topic = args.str("topic");
        Path ackedFile = Path.of(args.str("acked-file"));
        int timeoutSec = args.integer("timeout-sec", 60);
        args.rejectUnknown();
        String tag = "[crash-verify]";
        List<String> problems = new ArrayList<>();
        int problemCount = 0;

        List<Acked> acked = readAcked(ackedFile);
        if (acked.isEmpty()) {
            System.err.printf("%s FAIL: %s lists no acknowledged record: nothing to verify%n", tag, ackedFile);
            return Main.EXIT_MISMATCH;
        }

        Properties cp = Kafka.consumerProps(bootstrap, "rb-interop-crash-verify");
        Map<Integer, Map<Long, Stored>> log = new HashMap<>();
        Map<Integer, Long> endOffsets = new HashMap<>();
        int partitions;
        try (KafkaConsumer<byte[], byte[]> consumer = Kafka.consumer(cp)) {
            List<TopicPartition> tps = Kafka.partitions(consumer, topic, Duration.ofSeconds(30));
            partitions = tps.size();
            for (Acked a : acked) {
                if (a.partition < 0 || a.partition >= partitions) {
                    System.err.printf("%s FAIL: line %d acknowledges partition %d, but after the restart topic %s "
                            + "has %d partitions%n", tag, a.line, a.partition, topic, partitions);
                    return Main.EXIT_MISMATCH;
                }
            }
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            Map<TopicPartition, Long> end = consumer.endOffsets(tps, Duration.ofSeconds(30));
            Map<TopicPartition, Long> begin = consumer.beginningOffsets(tps, Duration.ofSeconds(30));
            long[] next = new long[partitions];
            for (TopicPartition tp : tps) {
                endOffsets.put(tp.partition(), end.get(tp));
                log.put(tp.partition(), new HashMap<>());
                if (begin.get(tp) != 0) {
                    problemCount++;
                    add(problems, tp + ": log start offset is " + begin.get(tp) + " after the restart, expected 0");
                }
                next[tp.partition()] = begin.get(tp);
            }
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(timeoutSec);
            while (!caughtUp(next, endOffsets) && System.nanoTime() < deadline) {
                ConsumerRecords<byte[], byte[]> recs = consumer.poll(Duration.ofMillis(500));
                for (ConsumerRecord<byte[], byte[]> rec : recs) {
                    int p = rec.partition();
                    if (rec.offset() != next[p]) {
                        problemCount++;
                        add(problems, "partition " + p + ": read offset " + rec.offset() + " after " + (next[p] - 1)
                                + " (offsets not contiguous)");
                    }
                    next[p] = rec.offset() + 1;
                    log.get(p).put(rec.offset(), new Stored(Kafka.str(rec.key()), Kafka.hash(rec.value())));
                }
            }
            if (!caughtUp(next, endOffsets)) {
                problemCount++;
                add(problems, "could not read up to the end offsets " + endOffsets + " within " + timeoutSec
                        + " s; reached " + Arrays.toString(next));
            }
        }

        long[] maxAcked = new long[partitions];
        Arrays.fill(maxAcked, -1);
        long[] ackedCount = new long[partitions];
        for (Acked a : acked) {
            maxAcked[a.partition] = Math.max(maxAcked[a.partition], a.offset);
            ackedCount[a.partition]++;
            String where = "line " + a.line + " (" + a.key + " at partition " + a.partition + " offset " + a.offset + ")";
            Stored s = log.get(a.partition).get(a.offset);
            if (s == null) {
                problemCount++;
                add(problems, where + ": acknowledged but missing after the restart (end offset of the partition is "
                        + endOffsets.get(a.partition) + ")");
            } else if (!s.key.equals(a.key)) {
                problemCount++;
                add(problems, where + ": the log has key " + s.key + " there");
            } else if (!s.hash.equals(a.hash)) {
                problemCount++;
                add(problems, where + ": value hash " + s.hash + ", acknowledged " + a.hash);
            }
        }
        System.out.printf("%s %d acknowledged records checked; per partition acked %s, max acked offset %s, "
                + "end offsets after restart %s%n", tag, acked.size(), Arrays.toString(ackedCount),
                Arrays.toString(maxAcked), endOffsets);

        // Offsets are never reused: a new record lands above every acknowledged and every stored offset.
        Properties pp = Kafka.producerProps(bootstrap, "rb-interop-crash-verify-producer");
        pp.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        pp.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        pp.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        pp.put(ProducerConfig.LINGER_MS_CONFIG, "0");
        try (KafkaProducer<byte[], byte[]> producer = Kafka.producer(pp)) {
            for (int p = 0; p < partitions; p++) {
                byte[] v = Kafka.utf8("after-restart-" + p);
                RecordMetadata md = producer.send(new ProducerRecord<>(topic, p, Kafka.utf8("verify-" + p), v))
                        .get(45, TimeUnit.SECONDS);
                long floor = Math.max(maxAcked[p], endOffsets.get(p) - 1);
                if (md.offset() <= maxAcked[p]) {
                    problemCount++;
                    add(problems, "partition " + p + ": a record produced after the restart got offset " + md.offset()
                            + ", not above the highest acknowledged offset " + maxAcked[p] + " (offset reused)");
                } else if (md.offset() != endOffsets.get(p)) {
                    problemCount++;
                    add(problems, "partition " + p + ": a record produced after the restart got offset " + md.offset()
                            + ", but the end offset was " + endOffsets.get(p) + " (expected exactly that; floor "
                            + floor + ")");
                } else {
                    System.out.printf("%s partition %d: new record at offset %d > highest acknowledged %d%n", tag, p,
                            md.offset(), maxAcked[p]);
                }
            }
        }

        if (problemCount > 0) {
            System.err.printf("%s FAIL: %d problem(s); the first %d:%n", tag, problemCount, problems.size());
            for (String s : problems) {
                System.err.println("  " + s);
            }
            return Main.EXIT_MISMATCH;
        }
        System.out.printf("%s OK: all %d acknowledged records survived at their offsets; offsets were not reused%n",
                tag, acked.size());
        return Main.EXIT_OK;
    }

    private static boolean caughtUp(long[] next, Map<Integer, Long> end) {
        for (int p = 0; p < next.length; p++) {
            if (next[p] < end.get(p)) {
                return false;
            }
        }
        return true;
    }

    private static List<Acked> readAcked(Path f) throws IOException {
        List<String> lines = Files.readAllLines(f, StandardCharsets.UTF_8);
        List<Acked> out = new ArrayList<>(lines.size());
        for (int i = 0; i < lines.size(); i++) {
            String line = lines.get(i).trim();
            if (line.isEmpty()) {
                continue;
            }
            String[] f4 = line.split(" ");
            boolean last = i == lines.size() - 1;
            try {
                if (f4.length != 4) {
                    throw new IllegalArgumentException("expected 4 fields");
                }
                out.add(new Acked(Integer.parseInt(f4[0]), Long.parseLong(f4[1]), f4[2], f4[3], i + 1));
            } catch (IllegalArgumentException e) {
                if (last) {
                    // The producer may have been killed in the middle of writing its last line.
                    System.out.printf("ignoring a torn last line %d of the acked file: %s%n", i + 1, line);
                    continue;
                }
                throw new IllegalArgumentException("acked file " + f + " line " + (i + 1) + " is malformed: " + line, e);
            }
        }
        return out;
    }

    private static void add(List<String> problems, String p) {
        if (problems.size() < MAX_REPORTED) {
            problems.add(p);
        }
    }
}
