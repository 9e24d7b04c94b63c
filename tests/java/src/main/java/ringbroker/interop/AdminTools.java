package ringbroker.interop;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterClientQuotasOptions;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.AlterConfigsOptions;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.CreatePartitionsOptions;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.clients.admin.DescribeProducersOptions;
import org.apache.kafka.clients.admin.DescribeProducersResult.PartitionProducerState;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetOutOfRangeException;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;

/**
 * Subcommands for tests/admin_tools.rs, which drives the admin APIs with Kafka's command-line
 * tools and checks what producers, consumers and the Java Admin client then see. Each prints its
 * results on stdout, one per line, for the test to compare; failures of single calls are printed
 * as the simple name of the Kafka exception behind them, not thrown.
 *
 * <pre>
 *   partition-produce --bootstrap H:P --topic T [--records 20] [--gate --partitions N] [--client-id C]
 *   group-read        --bootstrap H:P --topic T --group G --records N [--timeout-sec 60]
 *   read-at           --bootstrap H:P --topic T --partition P --offset O
 *   quota-produce     --bootstrap H:P [--props F] --topic T --client-id C [--bytes 262144]
 *   admin-apis        --bootstrap H:P --topic T
 * </pre>
 */
final class AdminTools {
    private AdminTools() {}

    /** The simple name of the deepest cause: what a Kafka error code became in the client. */
    static String err(Throwable t) {
        while ((t instanceof ExecutionException || t.getClass() == RuntimeException.class) && t.getCause() != null) {
            t = t.getCause();
        }
        return t.getClass().getSimpleName();
    }

    /**
     * An idempotent producer (the client's defaults, metadata refreshed every 500 ms) sends
     * {@code --records} records to each partition of the topic, by explicit partition. With
     * {@code --gate} it first writes to the partitions its metadata lists, prints
     * {@code WAITING partitions=K}, reads one line from stdin, and then waits until its metadata
     * lists {@code --partitions} partitions (it is never told of the change: it finds it at a
     * metadata refresh) before writing to all of them. Prints {@code ACKED partition count next}
     * per partition (next = last offset + 1) and {@code DONE total}.
     */
    static int partitionProduce(Args args) throws Exception {
        String bootstrap = args.str("bootstrap");
        String topic = args.str("topic");
        int records = args.integer("records", 20);
        boolean gate = args.flag("gate");
        int want = args.integer("partitions", 0);
        String clientId = args.str("client-id", "rb-admin-tools-producer");
        args.rejectUnknown();
        Properties p = Kafka.producerProps(bootstrap, clientId);
        p.put(ProducerConfig.METADATA_MAX_AGE_CONFIG, "500");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        TreeMap<Integer, long[]> acked = new TreeMap<>();
        try (KafkaProducer<byte[], byte[]> producer = Kafka.producer(p)) {
            int known = producer.partitionsFor(topic).size();
            if (gate) {
                send(producer, topic, known, records, acked);
                System.out.printf("WAITING partitions=%d%n", known);
                System.out.flush();
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                while ((known = producer.partitionsFor(topic).size()) < want) {
                    if (System.nanoTime() > deadline) {
                        System.out.printf("STUCK partitions=%d (wanted %d)%n", known, want);
                        return Main.EXIT_MISMATCH;
                    }
                    Thread.sleep(100);
                }
                System.out.printf("SEES partitions=%d%n", known);
            }
            send(producer, topic, known, records, acked);
        }
        long total = 0;
        for (Map.Entry<Integer, long[]> e : acked.entrySet()) {
            System.out.printf("ACKED %d %d %d%n", e.getKey(), e.getValue()[0], e.getValue()[1]);
            total += e.getValue()[0];
        }
        System.out.printf("DONE %d%n", total);
        return Main.EXIT_OK;
    }

    private static void send(KafkaProducer<byte[], byte[]> producer, String topic, int partitions, int records,
            TreeMap<Integer, long[]> acked) throws Exception {
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        for (int part = 0; part < partitions; part++) {
            for (int i = 0; i < records; i++) {
                byte[] key = Kafka.utf8("k-" + part + "-" + i);
                sent.add(producer.send(new ProducerRecord<>(topic, part, key, Kafka.utf8("v-" + i))));
            }
        }
        producer.flush();
        for (Future<RecordMetadata> f : sent) {
            RecordMetadata md = f.get(30, TimeUnit.SECONDS);
            long[] a = acked.computeIfAbsent(md.partition(), k -> new long[2]);
            a[0]++;
            a[1] = Math.max(a[1], md.offset() + 1);
        }
    }

    /**
     * A consumer group member (subscribe, classic protocol, from the earliest offset) reads until
     * it has {@code --records} records; prints {@code READ partition count} per partition and
     * {@code TOTAL n}.
     */
    static int groupRead(Args args) throws Exception {
        String bootstrap = args.str("bootstrap");
        String topic = args.str("topic");
        String group = args.str("group");
        long want = args.longValue("records", 0);
        long timeout = args.longValue("timeout-sec", 60);
        args.rejectUnknown();
        Properties p = Kafka.consumerProps(bootstrap, "rb-admin-tools-reader");
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        TreeMap<Integer, Long> counts = new TreeMap<>();
        long total = 0;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(timeout);
        try (KafkaConsumer<byte[], byte[]> consumer = Kafka.consumer(p)) {
            consumer.subscribe(List.of(topic));
            while (total < want && System.nanoTime() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    counts.merge(r.partition(), 1L, Long::sum);
                    total++;
                }
            }
            consumer.commitSync();
        }
        for (Map.Entry<Integer, Long> e : counts.entrySet()) {
            System.out.printf("READ %d %d%n", e.getKey(), e.getValue());
        }
        System.out.printf("TOTAL %d%n", total);
        return total == want ? Main.EXIT_OK : Main.EXIT_MISMATCH;
    }

    /**
     * A consumer with {@code auto.offset.reset=none} assigned one partition and positioned at
     * {@code --offset}: prints {@code OUT_OF_RANGE offset} when the broker refuses that offset,
     * {@code FIRST offset} for the first record it reads, {@code NOTHING} after 10 s of neither.
     */
    static int readAt(Args args) throws Exception {
        String bootstrap = args.str("bootstrap");
        TopicPartition tp = new TopicPartition(args.str("topic"), args.integer("partition", 0));
        long offset = args.longValue("offset", 0);
        args.rejectUnknown();
        Properties p = Kafka.consumerProps(bootstrap, "rb-admin-tools-read-at");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none");
        try (KafkaConsumer<byte[], byte[]> consumer = Kafka.consumer(p)) {
            consumer.assign(List.of(tp));
            consumer.seek(tp, offset);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (System.nanoTime() < deadline) {
                try {
                    for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                        System.out.printf("FIRST %d%n", r.offset());
                        return Main.EXIT_OK;
                    }
                } catch (OffsetOutOfRangeException e) {
                    System.out.printf("OUT_OF_RANGE %d%n", e.offsetOutOfRangePartitions().get(tp));
                    return Main.EXIT_OK;
                }
            }
        }
        System.out.println("NOTHING");
        return Main.EXIT_OK;
    }

    /**
     * A producer with client id {@code --client-id} (and the security settings of {@code --props},
 * e.g. to log in as a user) sends {@code --bytes} of 4 KiB records to
     * partition 0, then prints {@code THROTTLE avg=A max=M seconds=S}: the producer's
     * produce-throttle-time-avg and -max metrics (ms the broker asked it to wait) and how long
     * the sends took.
     */
    static int quotaProduce(Args args) throws Exception {
        String bootstrap = args.str("bootstrap");
        String topic = args.str("topic");
        String clientId = args.str("client-id");
        long bytes = args.longValue("bytes", 256 * 1024);
        Properties security = Security.props(args);
        args.rejectUnknown();
        Properties p = Kafka.producerProps(bootstrap, clientId);
        p.putAll(security);
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, String.valueOf(16 * 1024));
        long start = System.nanoTime();
        try (KafkaProducer<byte[], byte[]> producer = Kafka.producer(p)) {
            byte[] value = new byte[4096];
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (long n = 0; n < bytes; n += value.length) {
                sent.add(producer.send(new ProducerRecord<>(topic, 0, null, value)));
            }
            producer.flush();
            for (Future<RecordMetadata> f : sent) {
                f.get(60, TimeUnit.SECONDS);
            }
            double avg = metric(producer.metrics(), "produce-throttle-time-avg");
            double max = metric(producer.metrics(), "produce-throttle-time-max");
            System.out.printf("THROTTLE avg=%.1f max=%.1f seconds=%.1f%n", avg, max,
                    (System.nanoTime() - start) / 1e9);
        }
        return Main.EXIT_OK;
    }

    private static double metric(Map<MetricName, ? extends Metric> metrics, String name) {
        for (Map.Entry<MetricName, ? extends Metric> e : metrics.entrySet()) {
            if (e.getKey().name().equals(name) && e.getKey().group().equals("producer-metrics")) {
                Object v = e.getValue().metricValue();
                return v instanceof Double ? (Double) v : Double.NaN;
            }
        }
        return Double.NaN;
    }

    /**
     * The admin APIs through the Java Admin client, one after the other on a new topic
     * {@code --topic}; every result is a line (see tests/admin_tools.rs for what each must be).
     */
    static int adminApis(Args args) throws Exception {
        String bootstrap = args.str("bootstrap");
        String topic = args.str("topic");
        args.rejectUnknown();
        try (Admin admin = Kafka.admin(bootstrap)) {
            int broker = admin.describeCluster().nodes().get().iterator().next().id();
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();

            // CreatePartitions: grow, then a count that is no increase.
            print("createPartitions 3", () -> admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(3)))
                    .all().get());
            System.out.printf("partitions %d%n",
                    admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().size());
            print("createPartitions 5 validateOnly", () -> admin.createPartitions(
                    Map.of(topic, NewPartitions.increaseTo(5)), new CreatePartitionsOptions().validateOnly(true))
                    .all().get());
            System.out.printf("partitions %d%n",
                    admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().size());
            print("createPartitions 2", () -> admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(2)))
                    .all().get());
            print("createPartitions 3", () -> admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(3)))
                    .all().get());

            // Records on every partition, from an idempotent producer.
            Properties pp = Kafka.producerProps(bootstrap, "rb-admin-apis-producer");
            try (KafkaProducer<byte[], byte[]> producer = Kafka.producer(pp)) {
                TreeMap<Integer, long[]> acked = new TreeMap<>();
                send(producer, topic, 3, 10, acked);
                for (Map.Entry<Integer, long[]> e : acked.entrySet()) {
                    System.out.printf("produced %d %d%n", e.getKey(), e.getValue()[1]);
                }
            }

            // DeleteRecords: below offset 4 on partition 0; past the end of partition 1.
            TopicPartition p0 = new TopicPartition(topic, 0);
            TopicPartition p1 = new TopicPartition(topic, 1);
            TopicPartition p2 = new TopicPartition(topic, 2);
            var deleted = admin.deleteRecords(Map.of(p0, RecordsToDelete.beforeOffset(4),
                    p1, RecordsToDelete.beforeOffset(100))).lowWatermarks();
            print("deleteRecords 0", () -> "lowWatermark=" + deleted.get(p0).get().lowWatermark());
            print("deleteRecords 1", () -> "lowWatermark=" + deleted.get(p1).get().lowWatermark());
            var earliest = admin.listOffsets(Map.of(p0, OffsetSpec.earliest(), p1, OffsetSpec.earliest()))
                    .all().get();
            System.out.printf("earliest 0 %d%n", earliest.get(p0).offset());
            System.out.printf("earliest 1 %d%n", earliest.get(p1).offset());

            // DescribeLogDirs: the one directory and each partition's size and lag.
            Map<String, LogDirDescription> dirs = admin.describeLogDirs(List.of(broker)).allDescriptions().get()
                    .get(broker);
            for (Map.Entry<String, LogDirDescription> d : dirs.entrySet()) {
                LogDirDescription desc = d.getValue();
                System.out.printf("logDir %s error=%s total=%s usable=%s%n", d.getKey(),
                        desc.error() == null ? "none" : err(desc.error()),
                        desc.totalBytes().isPresent() ? "yes" : "no", desc.usableBytes().isPresent() ? "yes" : "no");
                TreeMap<Integer, ReplicaInfo> mine = new TreeMap<>();
                for (Map.Entry<TopicPartition, ReplicaInfo> r : desc.replicaInfos().entrySet()) {
                    if (r.getKey().topic().equals(topic)) {
                        mine.put(r.getKey().partition(), r.getValue());
                    }
                }
                for (Map.Entry<Integer, ReplicaInfo> r : mine.entrySet()) {
                    System.out.printf("replica %d size=%d offsetLag=%d future=%s%n", r.getKey(),
                            r.getValue().size(), r.getValue().offsetLag(), r.getValue().isFuture());
                }
            }

            // IncrementalAlterConfigs on the topic: SET, APPEND, SUBTRACT, DELETE.
            ConfigResource t = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            print("incrementalAlterConfigs topic validateOnly", () -> admin.incrementalAlterConfigs(
                    Map.of(t, List.of(op("retention.ms", "1", AlterConfigOp.OpType.SET))),
                    new AlterConfigsOptions().validateOnly(true)).all().get());
            describe(admin, t, "retention.ms");
            alter(admin, "topic set", t, op("retention.ms", "3600000", AlterConfigOp.OpType.SET),
                    op("cleanup.policy", "compact", AlterConfigOp.OpType.APPEND));
            describe(admin, t, "retention.ms", "cleanup.policy");
            alter(admin, "topic subtract", t, op("cleanup.policy", "delete", AlterConfigOp.OpType.SUBTRACT));
            describe(admin, t, "cleanup.policy");
            alter(admin, "topic append non-list", t, op("retention.ms", "5", AlterConfigOp.OpType.APPEND));
            alter(admin, "topic unsupported", t, op("file.delete.delay.ms", "1000", AlterConfigOp.OpType.SET));
            alter(admin, "topic delete", t, op("retention.ms", null, AlterConfigOp.OpType.DELETE),
                    op("cleanup.policy", null, AlterConfigOp.OpType.DELETE));
            describe(admin, t, "retention.ms", "cleanup.policy");

            // ... and on the BROKER resource: cluster-wide defaults and this broker.
            ConfigResource all = new ConfigResource(ConfigResource.Type.BROKER, "");
            ConfigResource me = new ConfigResource(ConfigResource.Type.BROKER, String.valueOf(broker));
            alter(admin, "broker default set", all, op("log.retention.ms", "7200000", AlterConfigOp.OpType.SET),
                    op("log.cleanup.policy", "compact", AlterConfigOp.OpType.APPEND));
            alter(admin, "broker set", me, op("log.retention.bytes", "1048576", AlterConfigOp.OpType.SET));
            describe(admin, all, "log.retention.ms", "log.cleanup.policy");
            describe(admin, me, "log.retention.ms", "log.retention.bytes", "log.cleanup.policy");
            describe(admin, t, "retention.ms", "retention.bytes", "cleanup.policy");
            alter(admin, "broker default subtract", all,
                    op("log.cleanup.policy", "compact", AlterConfigOp.OpType.SUBTRACT));
            describe(admin, all, "log.cleanup.policy");
            alter(admin, "broker static", me, op("num.io.threads", "4", AlterConfigOp.OpType.SET));
            alter(admin, "broker delete", me, op("log.retention.bytes", null, AlterConfigOp.OpType.DELETE));
            alter(admin, "broker default delete", all, op("log.retention.ms", null, AlterConfigOp.OpType.DELETE),
                    op("log.cleanup.policy", null, AlterConfigOp.OpType.DELETE));
            describe(admin, t, "retention.ms", "retention.bytes", "cleanup.policy");
            documented(admin, t);

            // Client quotas: set on every kind of entity, list, remove.
            List<ClientQuotaAlteration> set = List.of(
                    quota(entity("client-id", "c9"), "producer_byte_rate", 1024.0),
                    quota(entity("user", "alice"), "consumer_byte_rate", 2048.0),
                    quota(entity("user", "alice", "client-id", "c9"), "request_percentage", 25.0),
                    quota(entity("user", null), "producer_byte_rate", 4096.0),
                    quota(entity("client-id", null), "consumer_byte_rate", 8192.0));
            print("alterClientQuotas validateOnly", () -> admin.alterClientQuotas(set,
                    new AlterClientQuotasOptions().validateOnly(true)).all().get());
            listQuotas(admin);
            print("alterClientQuotas", () -> admin.alterClientQuotas(set).all().get());
            listQuotas(admin);
            print("alterClientQuotas bad", () -> admin.alterClientQuotas(List.of(
                    quota(entity("client-id", "c9"), "producer_byte_rate", -1.0))).all().get());
            List<ClientQuotaAlteration> remove = new ArrayList<>();
            for (ClientQuotaAlteration a : set) {
                List<ClientQuotaAlteration.Op> ops = new ArrayList<>();
                for (ClientQuotaAlteration.Op o : a.ops()) {
                    ops.add(new ClientQuotaAlteration.Op(o.key(), null));
                }
                remove.add(new ClientQuotaAlteration(a.entity(), ops));
            }
            print("alterClientQuotas remove", () -> admin.alterClientQuotas(remove).all().get());
            listQuotas(admin);

            // DescribeProducers: the idempotent producer above, on each partition.
            Map<TopicPartition, PartitionProducerState> states = admin.describeProducers(List.of(p0, p1, p2))
                    .all().get();
            for (TopicPartition tp : List.of(p0, p1, p2)) {
                for (ProducerState s : states.get(tp).activeProducers()) {
                    System.out.printf("producer %d id=%d epoch=%d lastSequence=%d coordinatorEpoch=%s txnStart=%s"
                            + " recent=%s%n", tp.partition(), s.producerId(), s.producerEpoch(), s.lastSequence(),
                            s.coordinatorEpoch().isPresent() ? s.coordinatorEpoch().getAsInt() : "none",
                            s.currentTransactionStartOffset().isPresent() ? s.currentTransactionStartOffset()
                                    .getAsLong() : "none",
                            Math.abs(System.currentTimeMillis() - s.lastTimestamp()) < 600_000);
                }
            }
            print("describeProducers 7", () -> admin.describeProducers(List.of(new TopicPartition(topic, 7)),
                    new DescribeProducersOptions().timeoutMs(3000)).all().get());
        }
        System.out.println("END");
        return Main.EXIT_OK;
    }

    interface Call {
        Object run() throws Exception;
    }

    /** {@code what OK}, {@code what <result>} or {@code what <ExceptionName>}. */
    private static void print(String what, Call call) {
        String outcome;
        try {
            Object r = call.run();
            outcome = r == null ? "OK" : r.toString();
        } catch (Exception e) {
            outcome = err(e);
        }
        System.out.println(what + " " + outcome);
    }

    private static AlterConfigOp op(String name, String value, AlterConfigOp.OpType type) {
        return new AlterConfigOp(new ConfigEntry(name, value), type);
    }

    private static void alter(Admin admin, String what, ConfigResource r, AlterConfigOp... ops) {
        print("incrementalAlterConfigs " + what, () -> admin.incrementalAlterConfigs(Map.of(r, List.of(ops)))
                .all().get());
    }

    /** {@code config <type> <name> <key>=<value> <source>} for each key (absent: {@code -}). */
    private static void describe(Admin admin, ConfigResource r, String... keys) throws Exception {
        Config c = admin.describeConfigs(List.of(r)).all().get().get(r);
        for (String k : keys) {
            ConfigEntry e = c.get(k);
            System.out.printf("config %s '%s' %s=%s %s%n", r.type(), r.name(), k, e == null ? "-" : e.value(),
                    e == null ? "-" : e.source());
        }
    }

    /** {@code documented <type> <name> N of M}: entries with documentation when asked for it. */
    private static void documented(Admin admin, ConfigResource r) throws Exception {
        DescribeConfigsOptions asked = new DescribeConfigsOptions().includeDocumentation(true);
        Config c = admin.describeConfigs(List.of(r), asked).all().get().get(r);
        long n = c.entries().stream().filter(e -> e.documentation() != null && !e.documentation().isEmpty()).count();
        System.out.printf("documented %s '%s' %d of %d%n", r.type(), r.name(), n, c.entries().size());
    }

    private static ClientQuotaEntity entity(String... parts) {
        Map<String, String> m = new TreeMap<>();
        for (int i = 0; i < parts.length; i += 2) {
            m.put(parts[i], parts[i + 1]);
        }
        return new ClientQuotaEntity(m);
    }

    private static ClientQuotaAlteration quota(ClientQuotaEntity e, String key, Double value) {
        return new ClientQuotaAlteration(e, List.of(new ClientQuotaAlteration.Op(key, value)));
    }

    /** {@code quota user=alice,client-id=<default> key=value,...}, sorted. */
    private static void listQuotas(Admin admin) throws Exception {
        Map<ClientQuotaEntity, Map<String, Double>> got = admin.describeClientQuotas(ClientQuotaFilter.all())
                .entities().get();
        List<String> lines = new ArrayList<>();
        for (Map.Entry<ClientQuotaEntity, Map<String, Double>> e : got.entrySet()) {
            List<String> parts = new ArrayList<>();
            for (Map.Entry<String, String> p : new TreeMap<>(e.getKey().entries()).descendingMap().entrySet()) {
                parts.add(p.getKey() + "=" + (p.getValue() == null ? "<default>" : p.getValue()));
            }
            lines.add("quota " + String.join(",", parts) + " " + new TreeMap<>(e.getValue()));
        }
        java.util.Collections.sort(lines);
        if (lines.isEmpty()) {
            System.out.println("quota none");
        }
        for (String l : lines) {
            System.out.println(l);
        }
    }
}
