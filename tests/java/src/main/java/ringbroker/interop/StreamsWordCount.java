package ringbroker.interop;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StoreQueryParameters;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.QueryableStoreTypes;
import org.apache.kafka.streams.state.ReadOnlyKeyValueStore;

/**
 * {@code streams-wordcount}: Kafka Streams' word count against the broker. Lines of the input
 * topic are split into words, grouped by word (through a repartition topic) and counted into a
 * persistent state store {@code counts}, whose changelog is a compacted topic. The app runs
 * until the store holds exactly the counts of {@code --expect-file} (lines {@code word count}),
 * read through interactive queries, or {@code --timeout-sec} passes.
 *
 * <pre>
 *   streams-wordcount --bootstrap H:P --app-id A --input T --state-dir D --expect-file F [--timeout-sec 120]
 * </pre>
 *
 * Prints {@code RESTORED n} (records the store restored from its changelog at start: after its
 * local state was wiped, every count comes back that way) and {@code COUNTS OK}, or
 * {@code COUNTS MISMATCH ...} and exits 1.
 */
final class StreamsWordCount {
    private StreamsWordCount() {}

    static int run(Args args) throws Exception {
        String bootstrap = args.str("bootstrap");
        String appId = args.str("app-id");
        String input = args.str("input");
        String stateDir = args.str("state-dir");
        Path expectFile = Path.of(args.str("expect-file"));
        int timeoutSec = args.integer("timeout-sec", 120);
        args.rejectUnknown();

        Map<String, Long> expected = new HashMap<>();
        for (String line : Files.readAllLines(expectFile)) {
            String[] f = line.trim().split(" ");
            if (f.length == 2) {
                expected.put(f[0], Long.parseLong(f[1]));
            }
        }

        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.String().getClass());
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.String().getClass());
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        // Streams purges what it has read of its repartition topics with DeleteRecords.
        p.put(StreamsConfig.REPARTITION_PURGE_INTERVAL_MS_CONFIG, 500);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        p.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");

        StreamsBuilder b = new StreamsBuilder();
        b.<String, String>stream(input)
                .flatMapValues(line -> Arrays.asList(line.toLowerCase().split("\\W+")))
                .filter((k, w) -> !w.isEmpty())
                .groupBy((k, w) -> w)
                .count(Materialized.as("counts"));

        AtomicLong restored = new AtomicLong();
        try (KafkaStreams streams = new KafkaStreams(b.build(), p)) {
            streams.setGlobalStateRestoreListener(new StateRestoreListener() {
                @Override
                public void onRestoreStart(TopicPartition tp, String store, long start, long end) {}

                @Override
                public void onBatchRestored(TopicPartition tp, String store, long end, long n) {
                    restored.addAndGet(n);
                }

                @Override
                public void onRestoreEnd(TopicPartition tp, String store, long total) {}
            });
            streams.start();
            long deadline = System.currentTimeMillis() + timeoutSec * 1000L;
            Map<String, Long> got = new HashMap<>();
            while (System.currentTimeMillis() < deadline) {
                Thread.sleep(500);
                if (streams.state() != KafkaStreams.State.RUNNING) {
                    continue;
                }
                got = read(streams);
                if (got.equals(expected)) {
                    System.out.println("RESTORED " + restored.get());
                    System.out.println("COUNTS OK " + got.size() + " words");
                    // Streams purges its repartition topic only at a commit at least one purge
                    // interval after the last purge: an app that matched within its first
                    // interval and closed at once had purged nothing. Six intervals more.
                    Thread.sleep(3_000);
                    streams.close(Duration.ofSeconds(30));
                    return Main.EXIT_OK;
                }
            }
            System.out.println("RESTORED " + restored.get());
            System.out.println("COUNTS MISMATCH state=" + streams.state() + " expected " + expected.size()
                    + " words, got " + got.size() + ": " + diff(expected, got));
            return Main.EXIT_MISMATCH;
        }
    }

    private static Map<String, Long> read(KafkaStreams streams) {
        Map<String, Long> out = new HashMap<>();
        try {
            ReadOnlyKeyValueStore<String, Long> store = streams.store(
                    StoreQueryParameters.fromNameAndType("counts", QueryableStoreTypes.keyValueStore()));
            try (KeyValueIterator<String, Long> it = store.all()) {
                while (it.hasNext()) {
                    KeyValue<String, Long> kv = it.next();
                    out.put(kv.key, kv.value);
                }
            }
        } catch (RuntimeException e) {
            // Not queryable yet (a rebalance or a restore in progress): try again.
        }
        return out;
    }

    private static String diff(Map<String, Long> expected, Map<String, Long> got) {
        StringBuilder sb = new StringBuilder();
        int shown = 0;
        for (Map.Entry<String, Long> e : expected.entrySet()) {
            Long g = got.get(e.getKey());
            if (!e.getValue().equals(g) && shown++ < 10) {
                sb.append(e.getKey()).append('=').append(g).append(" (want ").append(e.getValue()).append(") ");
            }
        }
        return sb.toString();
    }
}
