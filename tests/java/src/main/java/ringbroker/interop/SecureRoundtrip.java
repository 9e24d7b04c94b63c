package ringbroker.interop;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TopicExistsException;

/**
 * A small produce-and-read-back through whatever security the {@code --props} file sets up (TLS,
 * mTLS, SASL): Admin creates the topic (1 partition; an existing one is fine), a producer
 * (acks=all) sends {@code --records} records with values {@code v-<i>}, and a consumer (assign +
 * seekToBeginning, no group) reads the partition up to the last acknowledged offset and checks the
 * count and values of the records this run wrote (records of an earlier run on the same topic,
 * before the first acknowledged offset, are skipped).
 *
 * <p>Stdout, one line: {@code OK produced=N consumed=N} (exit 0); {@code MISMATCH produced=N
 * consumed=M: <first problem>} (exit 1); {@code FAILED <SimpleName>: <message>}, naming the deepest
 * Kafka exception behind the failure, e.g. SaslAuthenticationException or
 * SslAuthenticationException (exit 3).
 */
final class SecureRoundtrip {
    private SecureRoundtrip() {}

    static int run(Args args) throws Exception {
        String bootstrap = args.str("bootstrap");
        Properties security = Security.props(args);
        String topic = args.str("topic");
        int n = args.integer("records", 1000);
        Duration timeout = Duration.ofSeconds(args.integer("timeout-sec", 15));
        String idempotence = args.str("idempotence", "true");
        args.rejectUnknown();
        if (n < 1) {
            throw new Args.UsageException("--records must be positive");
        }
        if (!idempotence.equals("true") && !idempotence.equals("false")) {
            throw new Args.UsageException("--idempotence must be true or false, got " + idempotence);
        }
        try {
            return roundtrip(bootstrap, security, topic, n, timeout, idempotence);
        } catch (Exception e) {
            System.err.println("[secure-roundtrip] failed:");
            e.printStackTrace(System.err);
            System.out.println("FAILED " + Security.describe(e));
            return Main.EXIT_ERROR;
        }
    }

    private static int roundtrip(String bootstrap, Properties security, String topic, int n, Duration timeout,
            String idempotence) throws Exception {
        try (Admin admin = Security.admin(bootstrap, security, timeout)) {
            try {
                admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof TopicExistsException)) {
                    throw e;
                }
            }
        }

        Properties pp = Security.producerProps(bootstrap, "rb-interop-secure-producer", security, timeout);
        pp.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, idempotence);
        List<Future<RecordMetadata>> acks = new ArrayList<>(n);
        long firstOffset;
        long lastOffset;
        try (KafkaProducer<byte[], byte[]> producer = Kafka.producer(pp)) {
            for (int i = 0; i < n; i++) {
                acks.add(producer.send(new ProducerRecord<>(topic, 0, Kafka.utf8("k-" + i), value(i))));
            }
            producer.flush();
            for (Future<RecordMetadata> f : acks) {
                f.get(); // throws the first send failure (ExecutionException with the Kafka cause)
            }
            firstOffset = acks.get(0).get().offset();
            lastOffset = acks.get(n - 1).get().offset();
        }

        TopicPartition tp = new TopicPartition(topic, 0);
        List<String> got = new ArrayList<>(n);
        long earlier = 0;
        Properties cp = Security.consumerProps(bootstrap, "rb-interop-secure-consumer", security, timeout);
        KafkaConsumer<byte[], byte[]> consumer = Kafka.consumer(cp);
        try {
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            long deadline = System.nanoTime() + 2 * timeout.toNanos();
            long next = 0;
            while (next <= lastOffset && System.nanoTime() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    next = r.offset() + 1;
                    if (r.offset() < firstOffset) {
                        earlier++;
                    } else if (r.offset() <= lastOffset) {
                        got.add(Kafka.str(r.value()));
                    }
                }
            }
        } finally {
            consumer.close(CloseOptions.timeout(Duration.ofSeconds(5)));
        }
        if (earlier > 0) {
            System.err.printf("[secure-roundtrip] skipped %d record(s) of earlier runs before offset %d%n", earlier,
                    firstOffset);
        }

        String problem = null;
        for (int i = 0; i < Math.min(n, got.size()) && problem == null; i++) {
            String want = Kafka.str(value(i));
            if (!want.equals(got.get(i))) {
                problem = "record " + i + " has value " + got.get(i) + ", expected " + want;
            }
        }
        if (problem == null && got.size() != n) {
            problem = "read " + got.size() + " records at offsets " + firstOffset + ".." + lastOffset
                    + " (the acknowledged ones) within " + 2 * timeout.toSeconds() + " s";
        }
        if (problem != null) {
            System.out.printf("MISMATCH produced=%d consumed=%d: %s%n", n, got.size(), problem);
            return Main.EXIT_MISMATCH;
        }
        System.out.printf("OK produced=%d consumed=%d%n", n, got.size());
        return Main.EXIT_OK;
    }

    private static byte[] value(int i) {
        return Kafka.utf8("v-" + i);
    }
}
