package ringbroker.interop;

import java.io.IOException;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.AuthorizationException;

/**
 * What the security subcommands (secure-roundtrip, acl-probe, scram-user, describe-scram) share:
 * the {@code --props} file of client security settings, clients with short timeouts, and naming
 * the Kafka exception behind a failure.
 *
 * <p>The {@code --props} file is a Java properties file such as
 * <pre>
 *   security.protocol=SASL_SSL
 *   ssl.truststore.type=PEM
 *   ssl.truststore.location=/tmp/.../ca.crt
 *   sasl.mechanism=SCRAM-SHA-512
 *   sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="alice-secret";
 * </pre>
 * It is applied last to every client's configuration, so it also overrides the harness's own
 * settings. Without {@code --props} the clients use PLAINTEXT.
 *
 * <p>The timeouts are short on purpose: a client that fails to authenticate, or is denied, must
 * report it within seconds instead of retrying for the clients' default minute or two.
 */
final class Security {
    private Security() {}

    /** The {@code --props} file's settings; empty when the option is absent. */
    static Properties props(Args args) throws IOException {
        String file = args.str("props", "");
        Properties p = new Properties();
        if (!file.isEmpty()) {
            try (Reader r = Files.newBufferedReader(Path.of(file), StandardCharsets.UTF_8)) {
                p.load(r);
            }
        }
        return p;
    }

    static Admin admin(String bootstrap, Properties security, Duration timeout) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, "rb-interop-admin");
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, millis(timeout));
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, millis(timeout));
        p.putAll(security);
        return Admin.create(p);
    }

    /** Producer settings (acks=all, idempotence at the client default) with short timeouts. */
    static Properties producerProps(String bootstrap, String clientId, Properties security, Duration timeout) {
        Properties p = Kafka.producerProps(bootstrap, clientId);
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, millis(timeout));
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, millis(timeout));
        // The producer requires delivery.timeout.ms >= linger.ms + request.timeout.ms.
        p.put(ProducerConfig.LINGER_MS_CONFIG, "0");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, millis(timeout));
        p.putAll(security);
        return p;
    }

    /** Consumer settings (no group, earliest, no auto-commit) with short timeouts. */
    static Properties consumerProps(String bootstrap, String clientId, Properties security, Duration timeout) {
        Properties p = Kafka.consumerProps(bootstrap, clientId);
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, millis(timeout));
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, millis(timeout));
        p.putAll(security);
        return p;
    }

    /**
     * The deepest {@link KafkaException} in {@code t}'s cause chain (e.g. the
     * SaslAuthenticationException under an ExecutionException, or the SslAuthenticationException
     * over an SSLHandshakeException), or null when the chain holds none.
     */
    static Throwable deepestKafka(Throwable t) {
        Throwable found = null;
        for (Throwable c : chain(t)) {
            if (c instanceof KafkaException) {
                found = c;
            }
        }
        return found;
    }

    /** The deepest {@link AuthorizationException} in {@code t}'s cause chain, or null. */
    static AuthorizationException deepestAuthorization(Throwable t) {
        AuthorizationException found = null;
        for (Throwable c : chain(t)) {
            if (c instanceof AuthorizationException) {
                found = (AuthorizationException) c;
            }
        }
        return found;
    }

    /**
     * {@code <SimpleName>: <message>} of the deepest Kafka exception behind {@code t} (of the
     * deepest cause when none is a Kafka exception), on one line.
     */
    static String describe(Throwable t) {
        Throwable e = deepestKafka(t);
        if (e == null) {
            e = t;
            for (Throwable c : chain(t)) {
                e = c;
            }
        }
        return e.getClass().getSimpleName() + ": " + oneLine(e.getMessage());
    }

    static String oneLine(String s) {
        return s == null ? "null" : s.replace('\n', ' ').replace('\r', ' ');
    }

    static String millis(Duration d) {
        return String.valueOf(d.toMillis());
    }

    /** {@code t} and its causes, outermost first (a cause cycle ends the walk). */
    private static List<Throwable> chain(Throwable t) {
        Map<Throwable, Boolean> seen = new IdentityHashMap<>();
        List<Throwable> l = new ArrayList<>();
        for (Throwable c = t; c != null && seen.put(c, Boolean.TRUE) == null; c = c.getCause()) {
            l.add(c);
        }
        return l;
    }
}
