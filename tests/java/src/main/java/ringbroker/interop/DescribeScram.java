package ringbroker.interop;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;

/**
 * Lists SCRAM credentials (DescribeUserScramCredentials) of {@code --user} (comma-separated
 * names allowed), or of every user. Stdout, one line per user, sorted by user:
 * {@code <user> <MECHANISM>:<iterations>[,<MECHANISM>:<iterations>]}, mechanisms sorted (just
 * {@code <user>} if the broker lists the user with no credential; no users, no lines), exit 0; or
 * {@code FAILED <SimpleName>: <message>} (exit 3), e.g. ResourceNotFoundException, which Kafka
 * answers for a named user without credentials.
 */
final class DescribeScram {
    private DescribeScram() {}

    static int run(Args args) throws Exception {
        String bootstrap = args.str("bootstrap");
        Properties security = Security.props(args);
        String users = args.str("user", "");
        Duration timeout = Duration.ofSeconds(args.integer("timeout-sec", 15));
        args.rejectUnknown();

        Map<String, UserScramCredentialsDescription> found;
        Admin admin = Security.admin(bootstrap, security, timeout);
        try {
            found = users.isEmpty()
                    ? admin.describeUserScramCredentials().all().get()
                    : admin.describeUserScramCredentials(List.of(users.split(","))).all().get();
        } catch (Exception e) {
            System.err.println("[describe-scram] failed:");
            e.printStackTrace(System.err);
            System.out.println("FAILED " + Security.describe(e));
            return Main.EXIT_ERROR;
        } finally {
            admin.close(Duration.ofSeconds(5));
        }
        for (Map.Entry<String, UserScramCredentialsDescription> e : new TreeMap<>(found).entrySet()) {
            List<String> creds = new ArrayList<>();
            for (ScramCredentialInfo info : e.getValue().credentialInfos()) {
                creds.add(info.mechanism().mechanismName() + ":" + info.iterations());
            }
            creds.sort(null);
            System.out.println(creds.isEmpty() ? e.getKey() : e.getKey() + " " + String.join(",", creds));
        }
        return Main.EXIT_OK;
    }
}
