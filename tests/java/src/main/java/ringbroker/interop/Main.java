package ringbroker.interop;

import java.util.Arrays;

/**
 * Entry point of the Java interop harness: the Apache Kafka Java client against Ringbroker.
 *
 * <pre>
 *   roundtrip     --bootstrap H:P --topic T [--partitions 3] [--records 10000] [--compression none|gzip|snappy|lz4|zstd]
 *                 [--max-partition-fetch-bytes N] [--topic-config K=V,...]
 *   crash-produce --bootstrap H:P --topic T --acked-file F
 *   crash-verify  --bootstrap H:P --topic T --acked-file F
 *   group-produce --bootstrap H:P --topic T --acked-file F [--partitions 6] [--records 30000] [--rate 2500]
 *   group-consume --bootstrap H:P --topic T --group G --name N [--assignor range|cooperative-sticky|...]
 *                 [--instance-id I] [--session-timeout-ms 10000] [--heartbeat-ms 1000]
 *   group-stale-commit --bootstrap H:P --topic T --group G
 *   idem-produce  --bootstrap H:P --topic T --acked-file F [--partitions 4] [--records 100000] [--rate 0]
 *                 [--delivery-timeout-ms 120000] [--request-timeout-ms 30000] [--max-seconds 150]
 *
 *   secure-roundtrip --bootstrap H:P [--props F] --topic T [--records 1000] [--timeout-sec 15] [--idempotence true]
 *   acl-probe     --bootstrap H:P [--props F] --action A [--topic T] [--group G] [--transactional-id X]
 *                 [--timeout-sec 10]
 *   scram-user    --bootstrap H:P [--props F] --user U --password P [--mechanism SCRAM-SHA-512]
 *                 [--iterations 8192] [--delete] [--timeout-sec 15]
 *   describe-scram --bootstrap H:P [--props F] [--user U[,U...]] [--timeout-sec 15]
 *
 *   partition-produce --bootstrap H:P --topic T [--records 20] [--gate --partitions N] [--client-id C]
 *   group-read    --bootstrap H:P --topic T --group G --records N [--timeout-sec 60]
 *   read-at       --bootstrap H:P --topic T --partition P --offset O
 *   quota-produce --bootstrap H:P [--props F] --topic T --client-id C [--bytes 262144]
 *   admin-apis    --bootstrap H:P --topic T
 *
 *   streams-wordcount --bootstrap H:P --app-id A --input T --state-dir D --expect-file F [--timeout-sec 120]
 * </pre>
 *
 * The last four are the security subcommands (see {@link Security}): {@code --props F} is a Java
 * properties file of client settings (security.protocol, ssl.*, sasl.*) applied to every client
 * they create; without it they use PLAINTEXT. Each prints one result line on stdout (acl-probe:
 * ALLOWED / DENIED / ERROR, see {@link AclProbe}; the others OK or FAILED &lt;Exception&gt;: message).
 * The last five serve the admin-tool tests (see {@link AdminTools}).
 *
 * Exit codes: 0 success, 1 a check failed (the message says which), 2 bad usage, 3 an unexpected
 * error (exception) got in the way of checking. acl-probe exits 0 whether the action was allowed,
 * denied or failed, 3 only for a harness bug.
 */
public final class Main {
    static final int EXIT_OK = 0;
    static final int EXIT_MISMATCH = 1;
    static final int EXIT_USAGE = 2;
    static final int EXIT_ERROR = 3;

    private Main() {}

    public static void main(String[] argv) {
        // Quiet client logging unless the caller asked otherwise (-Dorg.slf4j.simpleLogger...).
        // Must run before any Kafka class creates a logger.
        setDefault("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        setDefault("org.slf4j.simpleLogger.logFile", "System.err");
        setDefault("org.slf4j.simpleLogger.showDateTime", "true");
        setDefault("org.slf4j.simpleLogger.dateTimeFormat", "HH:mm:ss.SSS");

        if (argv.length == 0) {
            usage("missing subcommand");
            return;
        }
        String sub = argv[0];
        String[] rest = Arrays.copyOfRange(argv, 1, argv.length);
        int code;
        try {
            Args args = Args.parse(rest);
            switch (sub) {
                case "roundtrip":
                    code = Roundtrip.run(args);
                    break;
                case "crash-produce":
                    // The broker is killed under this producer on purpose: connection warnings
                    // from the network client are expected noise then.
                    setDefault("org.slf4j.simpleLogger.log.org.apache.kafka.clients.NetworkClient", "error");
                    code = CrashProduce.run(args);
                    break;
                case "crash-verify":
                    code = CrashVerify.run(args);
                    break;
                case "history-produce":
                    // Brokers are killed under this producer on purpose: connection warnings and
                    // retried batches are expected noise.
                    setDefault("org.slf4j.simpleLogger.log.org.apache.kafka.clients.NetworkClient", "error");
                    setDefault("org.slf4j.simpleLogger.log.org.apache.kafka.clients.producer.internals.Sender",
                            "error");
                    code = History.produce(args);
                    break;
                case "history-verify":
                    code = History.verify(args);
                    break;
                case "group-produce":
                    code = GroupProduce.run(args);
                    break;
                case "group-consume":
                    code = GroupConsume.run(args);
                    break;
                case "group-stale-commit":
                    code = StaleCommit.run(args);
                    break;
                case "idem-produce":
                    // Connections are cut (by a proxy, or a broker kill) under this producer on
                    // purpose: the network client's warnings about them are expected noise.
                    // The sender logs every retried batch at WARN; the retry count is printed at the end.
                    setDefault("org.slf4j.simpleLogger.log.org.apache.kafka.clients.NetworkClient", "error");
                    setDefault("org.slf4j.simpleLogger.log.org.apache.kafka.clients.producer.internals.Sender",
                            "error");
                    // Producer id / epoch changes (an epoch bump means the broker refused a sequence).
                    setDefault("org.slf4j.simpleLogger.log.org.apache.kafka.clients.producer.internals"
                            + ".TransactionManager", "info");
                    code = IdemProduce.run(args);
                    break;
                case "secure-roundtrip":
                    code = SecureRoundtrip.run(args);
                    break;
                case "acl-probe":
                    // A probe of a denied or hidden topic makes the client warn at every metadata
                    // refresh; the result line says what happened.
                    setDefault("org.slf4j.simpleLogger.log.org.apache.kafka.clients.NetworkClient", "error");
                    code = AclProbe.run(args);
                    break;
                case "scram-user":
                    code = ScramUser.run(args);
                    break;
                case "describe-scram":
                    code = DescribeScram.run(args);
                    break;
                case "partition-produce":
                    code = AdminTools.partitionProduce(args);
                    break;
                case "group-read":
                    code = AdminTools.groupRead(args);
                    break;
                case "read-at":
                    // The refused offset is the point: the fetcher's warning about it is noise.
                    setDefault("org.slf4j.simpleLogger.log.org.apache.kafka.clients.consumer.internals", "error");
                    code = AdminTools.readAt(args);
                    break;
                case "quota-produce":
                    code = AdminTools.quotaProduce(args);
                    break;
                case "admin-apis":
                    // Refusals are part of the script; the admin client logs each at ERROR.
                    setDefault("org.slf4j.simpleLogger.log.org.apache.kafka.clients.admin", "off");
                    code = AdminTools.adminApis(args);
                    break;
                case "streams-wordcount":
                    code = StreamsWordCount.run(args);
                    break;
                case "-h":
                case "--help":
                case "help":
                    usage(null);
                    return;
                default:
                    usage("unknown subcommand: " + sub);
                    return;
            }
        } catch (Args.UsageException e) {
            usage(e.getMessage());
            return;
        } catch (Throwable t) {
            System.err.println("[" + sub + "] FAILED with an unexpected error: " + t);
            t.printStackTrace(System.err);
            code = EXIT_ERROR;
        }
        System.out.flush();
        System.err.flush();
        // Kafka client threads are closed by now, but exit explicitly so a stuck non-daemon
        // thread can never keep the harness alive.
        System.exit(code);
    }

    private static void setDefault(String key, String value) {
        if (System.getProperty(key) == null) {
            System.setProperty(key, value);
        }
    }

    private static void usage(String error) {
        if (error != null) {
            System.err.println("error: " + error);
        }
        System.err.println(String.join("\n",
                "usage: ringbroker.interop.Main <subcommand> [options]",
                "  roundtrip     --bootstrap H:P --topic T [--partitions 3] [--records 10000]",
                "                [--compression none|gzip|snappy|lz4|zstd] [--timeout-sec 60] [--seed 42]",
                "                [--max-partition-fetch-bytes N] (the consumer's max.partition.fetch.bytes)",
                "                [--topic-config K=V,...] (configs the topic is created with)",
                "  crash-produce --bootstrap H:P --topic T --acked-file F [--partitions 3]",
                "                [--give-up-ms 10000] [--max-records 2000000] [--max-seconds 300] [--max-outstanding 2000]",
                "  crash-verify  --bootstrap H:P --topic T --acked-file F [--timeout-sec 60]",
                "  history-produce --bootstrap H:P --topic T --history-file F [--partitions 6] [--replicas 3] [--seconds 60]",
                "  history-verify --bootstrap H:P --topic T --history-file F [--sent N]",
                "  group-produce --bootstrap H:P --topic T --acked-file F [--partitions 6] [--records 30000]",
                "                [--rate 2500] [--max-seconds 120]",
                "  group-consume --bootstrap H:P --topic T --group G --name N [--assignor default|range|roundrobin|",
                "                sticky|cooperative-sticky|CLASS] [--instance-id I] [--session-timeout-ms 10000]",
                "                [--heartbeat-ms 1000] [--max-poll-interval-ms 300000] [--max-seconds 120]",
                "                (stdin: a line 'stop', or end of input, commits and closes cleanly)",
                "  group-stale-commit --bootstrap H:P --topic T --group G [--timeout-sec 45]",
                "  idem-produce  --bootstrap H:P --topic T --acked-file F [--partitions 4] [--records 100000]",
                "                [--rate 0 (records/s, 0: unlimited)] [--delivery-timeout-ms 120000]",
                "                [--request-timeout-ms 30000] [--max-seconds 150]",
                "  secure-roundtrip --bootstrap H:P [--props F] --topic T [--records 1000] [--timeout-sec 15]",
                "                [--idempotence true|false]",
                "  acl-probe     --bootstrap H:P [--props F] --action A [--topic T] [--group G] [--transactional-id X]",
                "                [--timeout-sec 10]",
                "                A: produce|idempotent-produce|consume|describe-topic|list-topics|create-topic|",
                "                delete-topic|describe-configs|alter-configs|group-consume|describe-group|",
                "                list-groups|delete-group|list-offsets|describe-cluster|describe-acls|init-transactions",
                "  scram-user    --bootstrap H:P [--props F] --user U --password P [--mechanism SCRAM-SHA-512]",
                "                [--iterations 8192] [--delete] [--timeout-sec 15]",
                "  describe-scram --bootstrap H:P [--props F] [--user U[,U...]] [--timeout-sec 15]",
                "  partition-produce --bootstrap H:P --topic T [--records 20] [--gate --partitions N] [--client-id C]",
                "  group-read    --bootstrap H:P --topic T --group G --records N [--timeout-sec 60]",
                "  read-at       --bootstrap H:P --topic T --partition P --offset O",
                "  quota-produce --bootstrap H:P [--props F] --topic T --client-id C [--bytes 262144]",
                "  admin-apis    --bootstrap H:P --topic T",
                "  (--props F: a Java properties file of client security settings; absent = PLAINTEXT)"));
        System.exit(error == null ? EXIT_OK : EXIT_USAGE);
    }
}
