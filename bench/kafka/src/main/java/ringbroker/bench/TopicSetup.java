package ringbroker.bench;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.errors.TopicExistsException;

/**
 * Readiness probe and topic creation through the Admin client.
 *
 * <pre>
 * TopicSetup --bootstrap HOST:PORT --wait-ready SECONDS
 *     exits 0 once DescribeCluster answers with at least one node, 1 on timeout
 * TopicSetup --bootstrap HOST:PORT --create TOPIC --partitions N [--timeout-s S]
 *     creates the topic (replication factor 1; an existing one is an error) and waits until
 *     every partition has a leader
 * </pre>
 */
public final class TopicSetup {
    public static void main(String[] args) throws Exception {
        String bootstrap = null;
        String create = null;
        int partitions = 1;
        long waitReady = -1;
        long timeoutS = 60;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--bootstrap" -> bootstrap = args[++i];
                case "--wait-ready" -> waitReady = Long.parseLong(args[++i]);
                case "--create" -> create = args[++i];
                case "--partitions" -> partitions = Integer.parseInt(args[++i]);
                case "--timeout-s" -> timeoutS = Long.parseLong(args[++i]);
                default -> throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        if (bootstrap == null || (waitReady < 0 && create == null)) {
            System.err.println("usage: TopicSetup --bootstrap HOST:PORT (--wait-ready SECONDS | --create TOPIC --partitions N)");
            System.exit(64);
        }
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "5000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "10000");
        props.put(AdminClientConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "500");
        try (Admin admin = Admin.create(props)) {
            if (waitReady >= 0) {
                long deadline = System.nanoTime() + waitReady * 1_000_000_000L;
                while (true) {
                    try {
                        int n = admin.describeCluster().nodes().get().size();
                        if (n > 0) {
                            System.out.println("ready: " + n + " node(s)");
                            break;
                        }
                    } catch (ExecutionException e) {
                        // not up yet
                    }
                    if (System.nanoTime() > deadline) {
                        System.err.println("not ready after " + waitReady + " s");
                        System.exit(1);
                    }
                    Thread.sleep(250);
                }
            }
            if (create != null) {
                try {
                    admin.createTopics(List.of(new NewTopic(create, partitions, (short) 1))).all().get();
                } catch (ExecutionException e) {
                    if (e.getCause() instanceof TopicExistsException) {
                        System.err.println("topic " + create + " already exists");
                    }
                    throw e;
                }
                long deadline = System.nanoTime() + Duration.ofSeconds(timeoutS).toNanos();
                while (true) {
                    try {
                        Map<String, TopicDescription> d = admin.describeTopics(List.of(create)).allTopicNames().get();
                        List<TopicPartitionInfo> ps = d.get(create).partitions();
                        long led = ps.stream().filter(p -> p.leader() != null && !p.leader().isEmpty()).count();
                        if (ps.size() == partitions && led == partitions) {
                            System.out.println("created " + create + " with " + partitions + " partitions, all led");
                            break;
                        }
                    } catch (ExecutionException e) {
                        // metadata not propagated yet
                    }
                    if (System.nanoTime() > deadline) {
                        System.err.println("topic " + create + " not fully led after " + timeoutS + " s");
                        System.exit(1);
                    }
                    Thread.sleep(200);
                }
            }
        }
    }
}
