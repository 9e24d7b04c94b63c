package ringbroker.interop;

import java.io.BufferedOutputStream;
import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.consumer.RoundRobinAssignor;
import org.apache.kafka.clients.consumer.StickyAssignor;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;

/**
 * One member of a consumer group (classic protocol, {@code subscribe}), for the group tests in
 * tests/groups_java.rs. It processes each record by printing it, then commits the processed offsets
 * synchronously (explicit offsets, after every poll batch, and for the partitions being revoked in
 * {@code onPartitionsRevoked}), so that a clean rebalance never hands a partition over with processed
 * but uncommitted records: the group consumes every record exactly once.
 *
 * <p>Controlled through stdin: the line {@code stop} (or end of input, e.g. the test went away) commits
 * what was processed and closes the consumer cleanly ({@code close()}: a dynamic member leaves the group,
 * a static one stays until its session times out). {@code --max-seconds} bounds the run.
 *
 * <p>Stdout, one event per line, flushed before every commit (so a committed record is always printed):
 * <pre>
 *   STARTED name=N instance=I|-
 *   ASSIGNED gen=G member=M added=0,3 owned=0,1,3      (onPartitionsAssigned; owned = assignment after)
 *   REVOKED gen=G member=M revoked=1 owned=0,1,3       (onPartitionsRevoked; owned = assignment before)
 *   LOST gen=G member=M lost=0,1 owned=0,1
 *   R partition offset key                              (a processed record)
 *   COMMIT why p:o,p:o                                  (a commitSync that succeeded; o = next offset)
 *   COMMIT-FAILED why ExceptionClass: message           (a commitSync that failed)
 *   CLOSED                                              (close() returned)
 * </pre>
 */
final class GroupConsume {
    private GroupConsume() {}

    private static volatile boolean stop = false;

    static int run(Args args) throws Exception {
        String bootstrap = args.str("bootstrap");
        String topic = args.str("topic");
        String group = args.str("group");
        String name = args.str("name");
        String assignor = args.str("assignor", "default");
        String instanceId = args.str("instance-id", "");
        int sessionMs = args.integer("session-timeout-ms", 10_000);
        int heartbeatMs = args.integer("heartbeat-ms", 1_000);
        int maxPollIntervalMs = args.integer("max-poll-interval-ms", 300_000);
        long maxSeconds = args.longValue("max-seconds", 120);
        // classic (the default), or consumer: the KIP-848 protocol, which the broker does not serve.
        String groupProtocol = args.str("group-protocol", "classic");
        args.rejectUnknown();

        PrintStream out = new PrintStream(new BufferedOutputStream(new FileOutputStream(FileDescriptor.out), 1 << 16),
                false, StandardCharsets.UTF_8);

        Properties p = Kafka.consumerProps(bootstrap, name);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, groupProtocol);
        if (groupProtocol.equals("classic")) {
            // The consumer protocol sets these on the broker, and refuses them on the client.
            p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, String.valueOf(sessionMs));
            p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, String.valueOf(heartbeatMs));
        }
        p.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, String.valueOf(maxPollIntervalMs));
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "500");
        if (!instanceId.isEmpty()) {
            p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instanceId);
        }
        String assignorClass = assignorClass(assignor);
        if (assignorClass != null) {
            p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, assignorClass);
        }

        Thread control = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null) {
                    if (line.trim().equals("stop")) {
                        break;
                    }
                }
            } catch (Exception e) {
                // treated as end of input
            }
            stop = true;
        }, "stdin-control");
        control.setDaemon(true);
        control.start();

        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(maxSeconds);
        int code = Main.EXIT_OK;
        try (KafkaConsumer<byte[], byte[]> consumer = Kafka.consumer(p)) {
            Member m = new Member(consumer, out);
            out.printf("STARTED name=%s instance=%s%n", name, instanceId.isEmpty() ? "-" : instanceId);
            out.flush();
            consumer.subscribe(List.of(topic), m);
            while (!stop) {
                if (System.nanoTime() > deadline) {
                    out.printf("ERROR --max-seconds %d reached before stop%n", maxSeconds);
                    code = Main.EXIT_ERROR;
                    break;
                }
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                Map<TopicPartition, OffsetAndMetadata> batch = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    out.printf("R %d %d %s%n", r.partition(), r.offset(), Kafka.str(r.key()));
                    TopicPartition tp = new TopicPartition(r.topic(), r.partition());
                    batch.put(tp, new OffsetAndMetadata(r.offset() + 1));
                    m.processed.put(tp, r.offset() + 1);
                }
                if (!batch.isEmpty()) {
                    m.commit(batch, "batch");
                }
                out.flush();
            }
            // Stop: commit what was processed, then leave (close runs the rebalance listener and, for a
            // dynamic member, sends LeaveGroup).
            m.commit(m.pending(consumer.assignment()), "final");
            out.flush();
            consumer.close(CloseOptions.timeout(Duration.ofSeconds(20)));
            out.println("CLOSED");
        } finally {
            out.flush();
        }
        return code;
    }

    static String assignorClass(String assignor) {
        switch (assignor) {
            case "default":
                return null;
            case "range":
                return RangeAssignor.class.getName();
            case "roundrobin":
                return RoundRobinAssignor.class.getName();
            case "sticky":
                return StickyAssignor.class.getName();
            case "cooperative-sticky":
                return CooperativeStickyAssignor.class.getName();
            default:
                if (assignor.contains(".")) {
                    return assignor; // a class name
                }
                throw new Args.UsageException("unknown --assignor " + assignor);
        }
    }

    static String parts(Collection<TopicPartition> tps) {
        TreeSet<Integer> s = new TreeSet<>();
        for (TopicPartition tp : tps) {
            s.add(tp.partition());
        }
        List<String> l = new ArrayList<>();
        for (int i : s) {
            l.add(String.valueOf(i));
        }
        return l.isEmpty() ? "-" : String.join(",", l);
    }

    /** The rebalance listener plus the member's processed-offset bookkeeping. */
    static final class Member implements ConsumerRebalanceListener {
        final KafkaConsumer<byte[], byte[]> consumer;
        final PrintStream out;
        /** Next offset to process, per partition processed since it was assigned. */
        final Map<TopicPartition, Long> processed = new HashMap<>();

        Member(KafkaConsumer<byte[], byte[]> consumer, PrintStream out) {
            this.consumer = consumer;
            this.out = out;
        }

        Map<TopicPartition, OffsetAndMetadata> pending(Collection<TopicPartition> tps) {
            Map<TopicPartition, OffsetAndMetadata> m = new HashMap<>();
            for (TopicPartition tp : tps) {
                Long o = processed.get(tp);
                if (o != null) {
                    m.put(tp, new OffsetAndMetadata(o));
                }
            }
            return m;
        }

        void commit(Map<TopicPartition, OffsetAndMetadata> offsets, String why) {
            if (offsets.isEmpty()) {
                return;
            }
            out.flush(); // every record a commit covers is printed first
            java.util.TreeMap<Integer, Long> sorted = new java.util.TreeMap<>();
            offsets.forEach((tp, om) -> sorted.put(tp.partition(), om.offset()));
            StringBuilder sb = new StringBuilder();
            sorted.forEach((k, v) -> sb.append(sb.length() == 0 ? "" : ",").append(k).append(':').append(v));
            try {
                consumer.commitSync(offsets, Duration.ofSeconds(20));
                out.printf("COMMIT %s %s%n", why, sb);
            } catch (KafkaException e) {
                // CommitFailedException (the generation moved on: no longer a member),
                // RebalanceInProgressException (a rebalance started; onPartitionsRevoked commits again), ...
                out.printf("COMMIT-FAILED %s %s: %s%n", why, e.getClass().getSimpleName(),
                        String.valueOf(e.getMessage()).replace('\n', ' '));
            }
            out.flush();
        }

        private String who() {
            try {
                var gm = consumer.groupMetadata();
                return "gen=" + gm.generationId() + " member=" + gm.memberId();
            } catch (RuntimeException e) {
                return "gen=? member=?";
            }
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            out.printf("REVOKED %s revoked=%s owned=%s%n", who(), parts(partitions), parts(consumer.assignment()));
            commit(pending(partitions), "revoked");
            for (TopicPartition tp : partitions) {
                processed.remove(tp);
            }
            out.flush();
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            out.printf("ASSIGNED %s added=%s owned=%s%n", who(), parts(partitions), parts(consumer.assignment()));
            out.flush();
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            out.printf("LOST %s lost=%s owned=%s%n", who(), parts(partitions), parts(consumer.assignment()));
            for (TopicPartition tp : partitions) {
                processed.remove(tp);
            }
            out.flush();
        }
    }
}
