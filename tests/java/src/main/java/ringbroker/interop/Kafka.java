package ringbroker.interop;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/** Client configurations and small helpers shared by the subcommands. */
final class Kafka {
    private Kafka() {}

    static Properties producerProps(String bootstrap, String clientId) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, clientId);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        // Idempotence stays at the client's default (on since Kafka 3.0): the producer asks
        // for a producer id and sends sequence-numbered batches.
        return p;
    }

    static Properties consumerProps(String bootstrap, String clientId) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        // No group.id: partitions are assigned by hand and no offsets are committed.
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ALLOW_AUTO_CREATE_TOPICS_CONFIG, "false");
        // Let the client verify every batch's CRC32C.
        p.put(ConsumerConfig.CHECK_CRCS_CONFIG, "true");
        return p;
    }

    static Admin admin(String bootstrap) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, "rb-interop-admin");
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        return Admin.create(p);
    }

    /**
     * Creates {@code topic} with {@code partitions} partitions and replication factor 1.
     *
     * @return true if created, false if it already existed and {@code mayExist}
     */
    static boolean createTopic(String bootstrap, String topic, int partitions, boolean mayExist)
            throws Exception {
        return createTopic(bootstrap, topic, partitions, mayExist, Map.of());
    }

    /** As above, with topic configs. */
    static boolean createTopic(String bootstrap, String topic, int partitions, boolean mayExist,
            Map<String, String> configs) throws Exception {
        try (Admin admin = admin(bootstrap)) {
            try {
                admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1).configs(configs)))
                        .all().get(30, TimeUnit.SECONDS);
                return true;
            } catch (ExecutionException e) {
                if (e.getCause() instanceof TopicExistsException && mayExist) {
                    return false;
                }
                throw new IllegalStateException("CreateTopics for '" + topic + "' (" + partitions
                        + " partitions, replication factor 1) failed: " + e.getCause(), e.getCause());
            }
        }
    }

    /** The topic's partitions as the broker's Metadata reports them, sorted; waits for them to appear. */
    static List<TopicPartition> partitions(KafkaConsumer<?, ?> consumer, String topic, Duration timeout)
            throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (true) {
            List<PartitionInfo> infos;
            try {
                infos = consumer.partitionsFor(topic, Duration.ofSeconds(5));
            } catch (org.apache.kafka.common.errors.TimeoutException e) {
                infos = List.of();
            }
            if (infos != null && !infos.isEmpty()) {
                List<TopicPartition> tps = new ArrayList<>();
                for (PartitionInfo pi : infos) {
                    tps.add(new TopicPartition(pi.topic(), pi.partition()));
                }
                tps.sort(Comparator.comparingInt(TopicPartition::partition));
                return tps;
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("Metadata never listed topic '" + topic + "' within "
                        + timeout.toSeconds() + " s");
            }
            Thread.sleep(200);
        }
    }

    static KafkaProducer<byte[], byte[]> producer(Properties p) {
        return new KafkaProducer<>(p);
    }

    static KafkaConsumer<byte[], byte[]> consumer(Properties p) {
        return new KafkaConsumer<>(p);
    }

    static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static String str(byte[] b) {
        return b == null ? "null" : new String(b, StandardCharsets.UTF_8);
    }

    /** Hex SHA-256 of {@code b} (first 16 bytes), or "null" for a null value. */
    static String hash(byte[] b) {
        if (b == null) {
            return "null";
        }
        try {
            byte[] d = MessageDigest.getInstance("SHA-256").digest(b);
            StringBuilder sb = new StringBuilder(32);
            for (int i = 0; i < 16; i++) {
                sb.append(Character.forDigit((d[i] >> 4) & 0xf, 16)).append(Character.forDigit(d[i] & 0xf, 16));
            }
            return sb.toString();
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    /** A short description of a byte array for mismatch messages. */
    static String describe(byte[] b) {
        if (b == null) {
            return "null";
        }
        StringBuilder sb = new StringBuilder();
        sb.append(b.length).append(" bytes, sha256/16=").append(hash(b)).append(", starts ");
        for (int i = 0; i < Math.min(b.length, 12); i++) {
            sb.append(String.format("%02x", b[i] & 0xff));
        }
        return sb.toString();
    }
}
