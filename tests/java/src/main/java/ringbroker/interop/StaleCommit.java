package ringbroker.interop;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RebalanceInProgressException;

/**
 * A member whose generation moved on cannot commit, and rejoins when it polls again.
 *
 * <ol>
 *   <li>Member A joins alone (2 partitions), consumes, and commits offset 1 for both partitions.</li>
 *   <li>A stops polling. Member B (its own thread) joins; the rebalance waits for A, whose poll timeout
 *       ({@code max.poll.interval.ms}, also its rebalance timeout) runs out, so A is dropped and B gets
 *       both partitions in a new generation.</li>
 *   <li>A commits offset 5 for both partitions with its old membership: the commit must fail
 *       ({@link CommitFailedException}, or {@link RebalanceInProgressException}), and the group's
 *       committed offsets (Admin, OffsetFetch) must still be 1.</li>
 *   <li>A polls again: it rejoins in a newer generation and the partitions are shared with B.</li>
 * </ol>
 */
final class StaleCommit {
    private StaleCommit() {}

    static int run(Args args) throws Exception {
        String bootstrap = args.str("bootstrap");
        String topic = args.str("topic");
        String group = args.str("group");
        long timeoutSec = args.longValue("timeout-sec", 45);
        args.rejectUnknown();
        String tag = "[group-stale-commit]";
        Duration timeout = Duration.ofSeconds(timeoutSec);

        Kafka.createTopic(bootstrap, topic, 2, true);
        Properties pp = Kafka.producerProps(bootstrap, "stale-producer");
        try (KafkaProducer<byte[], byte[]> producer = Kafka.producer(pp)) {
            for (int i = 0; i < 20; i++) {
                producer.send(new ProducerRecord<>(topic, i % 2, Kafka.utf8("k-" + i), Kafka.utf8("v-" + i))).get();
            }
        }
        TopicPartition p0 = new TopicPartition(topic, 0);
        TopicPartition p1 = new TopicPartition(topic, 1);

        Properties pa = props(bootstrap, group, "stale-a", 6_000);
        AtomicReference<Set<Integer>> bAssigned = new AtomicReference<>(Set.of());
        AtomicInteger bGeneration = new AtomicInteger(-1);
        AtomicReference<Throwable> bError = new AtomicReference<>();
        AtomicBoolean stopB = new AtomicBoolean(false);

        try (KafkaConsumer<byte[], byte[]> a = Kafka.consumer(pa)) {
            a.subscribe(List.of(topic));
            long deadline = System.nanoTime() + timeout.toNanos();
            int got = 0;
            while (a.assignment().size() < 2 || got == 0) {
                if (System.nanoTime() > deadline) {
                    System.out.printf("%s FAIL: A was not assigned both partitions within %s (has %s)%n", tag,
                            timeout, a.assignment());
                    return Main.EXIT_MISMATCH;
                }
                got += a.poll(Duration.ofMillis(200)).count();
            }
            a.commitSync(Map.of(p0, new OffsetAndMetadata(1), p1, new OffsetAndMetadata(1)), timeout);
            int genA = a.groupMetadata().generationId();
            String memberA = a.groupMetadata().memberId();
            System.out.printf("%s A is member %s of generation %d, committed 1 for both partitions%n", tag, memberA,
                    genA);

            Thread b = new Thread(() -> {
                try (KafkaConsumer<byte[], byte[]> cb = Kafka.consumer(props(bootstrap, group, "stale-b", 30_000))) {
                    cb.subscribe(List.of(topic));
                    while (!stopB.get()) {
                        cb.poll(Duration.ofMillis(100));
                        Set<Integer> s = new TreeSet<>();
                        cb.assignment().forEach(tp -> s.add(tp.partition()));
                        bAssigned.set(s);
                        bGeneration.set(cb.groupMetadata().generationId());
                    }
                    cb.close(CloseOptions.timeout(Duration.ofSeconds(10)));
                } catch (Throwable t) {
                    bError.set(t);
                }
            }, "member-b");
            b.start();
            try {
                // A does not poll now: B's join must outlive A's membership.
                deadline = System.nanoTime() + timeout.toNanos();
                while (!bAssigned.get().equals(Set.of(0, 1))) {
                    if (System.nanoTime() > deadline || bError.get() != null) {
                        System.out.printf("%s FAIL: B never got both partitions while A was not polling "
                                + "(B has %s, error %s)%n", tag, bAssigned.get(), bError.get());
                        return Main.EXIT_MISMATCH;
                    }
                    Thread.sleep(100);
                }
                System.out.printf("%s B owns both partitions in generation %d%n", tag, bGeneration.get());

                Map<TopicPartition, OffsetAndMetadata> stale = new HashMap<>();
                stale.put(p0, new OffsetAndMetadata(5));
                stale.put(p1, new OffsetAndMetadata(5));
                try {
                    a.commitSync(stale, timeout);
                    System.out.printf("%s FAIL: A's commit with generation %d succeeded after the group moved to "
                            + "generation %d%n", tag, genA, bGeneration.get());
                    return Main.EXIT_MISMATCH;
                } catch (CommitFailedException | RebalanceInProgressException e) {
                    System.out.printf("%s A's stale commit was refused: %s%n", tag, e.getClass().getSimpleName());
                }

                try (Admin admin = Kafka.admin(bootstrap)) {
                    Map<TopicPartition, OffsetAndMetadata> committed = admin.listConsumerGroupOffsets(group)
                            .partitionsToOffsetAndMetadata().get(timeoutSec, TimeUnit.SECONDS);
                    long c0 = committed.get(p0) == null ? -1 : committed.get(p0).offset();
                    long c1 = committed.get(p1) == null ? -1 : committed.get(p1).offset();
                    System.out.printf("%s committed offsets after the stale commit: p0=%d p1=%d%n", tag, c0, c1);
                    if (c0 != 1 || c1 != 1) {
                        System.out.printf("%s FAIL: expected 1 and 1 (the stale commit of 5 must not apply)%n", tag);
                        return Main.EXIT_MISMATCH;
                    }
                }

                // A polls again: it rejoins (new generation) and the two members share the partitions.
                deadline = System.nanoTime() + timeout.toNanos();
                while (a.assignment().isEmpty() || a.groupMetadata().generationId() <= genA
                        || bAssigned.get().size() != 1) {
                    if (System.nanoTime() > deadline) {
                        System.out.printf("%s FAIL: A did not rejoin within %s (A: gen %d, %s; B: %s)%n", tag,
                                timeout, a.groupMetadata().generationId(), a.assignment(), bAssigned.get());
                        return Main.EXIT_MISMATCH;
                    }
                    a.poll(Duration.ofMillis(100));
                }
                System.out.printf("%s A rejoined as %s in generation %d with %s; B has %s%n", tag,
                        a.groupMetadata().memberId(), a.groupMetadata().generationId(), a.assignment(),
                        bAssigned.get());
            } finally {
                stopB.set(true);
                b.join(30_000);
            }
            a.close(CloseOptions.timeout(Duration.ofSeconds(10)));
        }
        if (bError.get() != null) {
            throw new IllegalStateException("member B failed", bError.get());
        }
        System.out.printf("%s OK%n", tag);
        return Main.EXIT_OK;
    }

    private static Properties props(String bootstrap, String group, String clientId, int maxPollIntervalMs) {
        Properties p = Kafka.consumerProps(bootstrap, clientId);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "6000");
        p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
        p.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, String.valueOf(maxPollIntervalMs));
        return p;
    }
}
