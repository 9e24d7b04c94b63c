package ringbroker.interop;

import java.time.Duration;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.Properties;
import java.util.TreeSet;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;

/**
 * Performs client actions as whoever the {@code --props} file authenticates, and reports
 * whether the broker's authorizer let each through. {@code --action} takes one action or several
 * separated by commas; stdout has one line per action (prefixed with the action's name and a
 * space when there are several):
 * <pre>
 *   ALLOWED                          (list-topics and list-groups: ALLOWED name,name,... sorted;
 *                                     just ALLOWED when the list is empty)
 *   DENIED &lt;SimpleName&gt;             an AuthorizationException is behind the failure:
 *                                     Topic-, Group-, Cluster- or TransactionalIdAuthorizationException
 *   ERROR &lt;SimpleName&gt;: &lt;message&gt;   any other Kafka exception (e.g. UnknownTopicOrPartitionException
 *                                     for a topic the metadata hides; the test decides what it means)
 * </pre>
 * Exit 0 for all three; details (offsets, cluster id, the denial's message) go to stderr. Exit 2
 * for bad usage, 3 when something other than a Kafka exception failed (a harness bug).
 *
 * <p>The actions: produce (one record to T, acks=all, enable.idempotence=false), idempotent-produce
 * (the same, idempotent), consume (partition 0 of T, no group), group-consume (subscribe to T as a
 * member of G, commit the positions, leave), init-transactions (transactional.id X), and one Admin
 * call each: describe-topic, list-topics, create-topic (1 partition, replication factor 1),
 * delete-topic, describe-configs and alter-configs (incremental SET retention.ms=86400000) of topic
 * T, describe-group, list-groups (listGroups(ListGroupsOptions.forConsumerGroups()), the
 * replacement of the deprecated listConsumerGroups), delete-group, list-offsets (latest of T-0),
 * describe-cluster, describe-acls (every ACL: DESCRIBE on the cluster).
 *
 * <p>Every client timeout is {@code --timeout-sec} (10 s), so a denied action returns quickly.
 */
final class AclProbe {
    private AclProbe() {}

    private static final String ACTIONS = "produce|idempotent-produce|consume|describe-topic|list-topics|create-topic|"
            + "delete-topic|describe-configs|alter-configs|group-consume|describe-group|list-groups|delete-group|"
            + "list-offsets|describe-cluster|describe-acls|init-transactions";

    @FunctionalInterface
    private interface AdminAction {
        /** Returns what to print after ALLOWED, or null for nothing. */
        String run(Admin admin) throws Exception;
    }

    private String bootstrap;
    private Properties security;
    private Duration timeout;
    private String topic;
    private String group;
    private String transactionalId;

    static int run(Args args) throws Exception {
        AclProbe p = new AclProbe();
        p.bootstrap = args.str("bootstrap");
        p.security = Security.props(args);
        String[] actions = args.str("action").split(",");
        p.topic = args.str("topic", null);
        p.group = args.str("group", null);
        p.transactionalId = args.str("transactional-id", null);
        p.timeout = Duration.ofSeconds(args.integer("timeout-sec", 10));
        args.rejectUnknown();
        // Several actions in one run (one JVM start for a whole row of a test's matrix): one
        // line each, in order, prefixed with the action's name.
        for (String action : actions) {
            String outcome = p.outcome(action);
            System.out.println(actions.length == 1 ? outcome : action + " " + outcome);
        }
        return Main.EXIT_OK;
    }

    /** ALLOWED [...], DENIED X or ERROR X: message, for one action. */
    private String outcome(String action) throws Exception {
        String allowed;
        try {
            allowed = perform(action);
        } catch (Args.UsageException e) {
            throw e;
        } catch (Exception e) {
            AuthorizationException denied = Security.deepestAuthorization(e);
            if (denied != null) {
                System.err.println("[acl-probe " + action + "] denied: " + Security.oneLine(denied.getMessage()));
                return "DENIED " + denied.getClass().getSimpleName();
            }
            if (Security.deepestKafka(e) != null) {
                System.err.println("[acl-probe " + action + "] failed:");
                e.printStackTrace(System.err);
                return "ERROR " + Security.describe(e);
            }
            throw e;
        }
        return allowed == null || allowed.isEmpty() ? "ALLOWED" : "ALLOWED " + allowed;
    }

    private String perform(String action) throws Exception {
        switch (action) {
            case "produce":
                return produce(action, false);
            case "idempotent-produce":
                return produce(action, true);
            case "consume":
                return consume(action);
            case "group-consume":
                return groupConsume(action);
            case "init-transactions":
                return initTransactions(action);
            case "describe-topic": {
                String t = need(topic, "topic", action);
                return admin(a -> {
                    a.describeTopics(List.of(t)).allTopicNames().get();
                    return null;
                });
            }
            case "list-topics":
                return admin(a -> String.join(",", new TreeSet<>(a.listTopics().names().get())));
            case "create-topic": {
                String t = need(topic, "topic", action);
                return admin(a -> {
                    a.createTopics(List.of(new NewTopic(t, 1, (short) 1))).all().get();
                    return null;
                });
            }
            case "delete-topic": {
                String t = need(topic, "topic", action);
                return admin(a -> {
                    a.deleteTopics(List.of(t)).all().get();
                    return null;
                });
            }
            case "describe-configs": {
                ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, need(topic, "topic", action));
                return admin(a -> {
                    a.describeConfigs(List.of(r)).all().get();
                    return null;
                });
            }
            case "alter-configs": {
                ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, need(topic, "topic", action));
                AlterConfigOp op = new AlterConfigOp(new ConfigEntry("retention.ms", "86400000"),
                        AlterConfigOp.OpType.SET);
                return admin(a -> {
                    a.incrementalAlterConfigs(Map.of(r, List.of(op))).all().get();
                    return null;
                });
            }
            case "describe-group": {
                String g = need(group, "group", action);
                return admin(a -> {
                    ConsumerGroupDescription d = a.describeConsumerGroups(List.of(g)).all().get().get(g);
                    System.err.printf("[acl-probe %s] group %s: state %s, %d member(s)%n", action, g,
                            d.groupState(), d.members().size());
                    return null;
                });
            }
            case "list-groups":
                return admin(a -> {
                    TreeSet<String> names = new TreeSet<>();
                    for (GroupListing l : a.listGroups(ListGroupsOptions.forConsumerGroups()).all().get()) {
                        names.add(l.groupId());
                    }
                    return String.join(",", names);
                });
            case "delete-group": {
                String g = need(group, "group", action);
                return admin(a -> {
                    a.deleteConsumerGroups(List.of(g)).all().get();
                    return null;
                });
            }
            case "describe-acls":
                return admin(a -> {
                    int n = a.describeAcls(AclBindingFilter.ANY).values().get().size();
                    System.err.printf("[acl-probe %s] %d ACLs%n", action, n);
                    return null;
                });
            case "list-offsets": {
                TopicPartition tp = new TopicPartition(need(topic, "topic", action), 0);
                return admin(a -> {
                    ListOffsetsResult.ListOffsetsResultInfo info =
                            a.listOffsets(Map.of(tp, OffsetSpec.latest())).all().get().get(tp);
                    System.err.printf("[acl-probe %s] latest offset of %s: %d%n", action, tp, info.offset());
                    return null;
                });
            }
            case "describe-cluster":
                return admin(a -> {
                    DescribeClusterResult r = a.describeCluster();
                    String id = r.clusterId().get();
                    Collection<Node> nodes = r.nodes().get();
                    System.err.printf("[acl-probe %s] cluster id %s, nodes %s%n", action, id, nodes);
                    return null;
                });
            default:
                throw new Args.UsageException("unknown --action " + action + "; one of " + ACTIONS);
        }
    }

    private String produce(String action, boolean idempotent) throws Exception {
        String t = need(topic, "topic", action);
        Properties pp = Security.producerProps(bootstrap, "rb-acl-probe", security, timeout);
        pp.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, String.valueOf(idempotent));
        KafkaProducer<byte[], byte[]> producer = Kafka.producer(pp);
        try {
            var md = producer.send(new ProducerRecord<>(t, Kafka.utf8("acl-probe"))).get();
            System.err.printf("[acl-probe %s] wrote %s-%d at offset %d%n", action, t, md.partition(), md.offset());
        } finally {
            producer.close(Duration.ofSeconds(5));
        }
        return null;
    }

    /**
     * Looks the topic up, assigns partition 0 (no group) and polls until a record arrives, a Fetch
     * finds nothing (more) to read, or the timeout. A topic the metadata does not list is
     * {@code ERROR UnknownTopicOrPartitionException} (the consumer itself would just wait).
     */
    private String consume(String action) {
        String t = need(topic, "topic", action);
        TopicPartition tp = new TopicPartition(t, 0);
        KafkaConsumer<byte[], byte[]> consumer =
                Kafka.consumer(Security.consumerProps(bootstrap, "rb-acl-probe", security, timeout));
        try {
            List<PartitionInfo> parts = consumer.partitionsFor(t, timeout);
            if (parts == null || parts.isEmpty()) {
                throw new UnknownTopicOrPartitionException("Metadata does not list topic " + t);
            }
            consumer.assign(List.of(tp));
            long deadline = System.nanoTime() + timeout.toNanos();
            int read = 0;
            OptionalLong lag = OptionalLong.empty();
            while (read == 0 && System.nanoTime() < deadline) {
                read += consumer.poll(Duration.ofMillis(200)).count();
                lag = consumer.currentLag(tp);
                if (lag.isPresent() && lag.getAsLong() == 0) {
                    break; // a Fetch answered and the partition holds nothing (more) to read
                }
            }
            System.err.printf("[acl-probe %s] read %d record(s) of %s, lag %s%n", action, read, tp,
                    lag.isPresent() ? String.valueOf(lag.getAsLong()) : "unknown");
        } finally {
            consumer.close(CloseOptions.timeout(Duration.ofSeconds(5)));
        }
        return null;
    }

    /** Subscribe with a group, poll until partitions are assigned, commit their positions, leave. */
    private String groupConsume(String action) {
        String t = need(topic, "topic", action);
        String g = need(group, "group", action);
        Properties cp = Security.consumerProps(bootstrap, "rb-acl-probe", security, timeout);
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, g);
        cp.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
        cp.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
        KafkaConsumer<byte[], byte[]> consumer = Kafka.consumer(cp);
        try {
            consumer.subscribe(List.of(t));
            long deadline = System.nanoTime() + timeout.toNanos();
            while (consumer.assignment().isEmpty() && System.nanoTime() < deadline) {
                consumer.poll(Duration.ofMillis(200));
            }
            if (consumer.assignment().isEmpty()) {
                throw new TimeoutException("no partition of " + t + " was assigned to the member of group " + g
                        + " within " + timeout.toSeconds() + " s");
            }
            // Explicit offsets, so that an OffsetCommit is sent even when nothing was read.
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            for (TopicPartition tp : consumer.assignment()) {
                offsets.put(tp, new OffsetAndMetadata(consumer.position(tp)));
            }
            consumer.commitSync(offsets, timeout);
            System.err.printf("[acl-probe %s] group %s committed %s%n", action, g, offsets);
        } finally {
            consumer.close(CloseOptions.timeout(Duration.ofSeconds(5)));
        }
        return null;
    }

    private String initTransactions(String action) {
        String x = need(transactionalId, "transactional-id", action);
        Properties pp = Security.producerProps(bootstrap, "rb-acl-probe", security, timeout);
        pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, x);
        KafkaProducer<byte[], byte[]> producer = Kafka.producer(pp);
        try {
            producer.initTransactions();
        } finally {
            producer.close(Duration.ofSeconds(5));
        }
        return null;
    }

    private String admin(AdminAction action) throws Exception {
        Admin a = Security.admin(bootstrap, security, timeout);
        try {
            return action.run(a);
        } finally {
            a.close(Duration.ofSeconds(5));
        }
    }


    private static String need(String value, String option, String action) {
        if (value == null) {
            throw new Args.UsageException("--action " + action + " needs --" + option);
        }
        return value;
    }
}
