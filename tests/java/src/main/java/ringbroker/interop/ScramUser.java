package ringbroker.interop;

import java.time.Duration;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialAlteration;
import org.apache.kafka.clients.admin.UserScramCredentialDeletion;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;

/**
 * Creates or replaces a user's SCRAM credential for one mechanism (AlterUserScramCredentials
 * upsertion), or with {@code --delete} removes it (deletion). Stdout, one line: {@code OK} (exit 0)
 * or {@code FAILED <SimpleName>: <message>} (exit 3).
 */
final class ScramUser {
    private ScramUser() {}

    static int run(Args args) throws Exception {
        String bootstrap = args.str("bootstrap");
        Properties security = Security.props(args);
        String user = args.str("user");
        boolean delete = args.flag("delete");
        String password = delete ? args.str("password", null) : args.str("password");
        ScramMechanism mechanism = mechanism(args.str("mechanism", "SCRAM-SHA-512"));
        int iterations = args.integer("iterations", 8192);
        Duration timeout = Duration.ofSeconds(args.integer("timeout-sec", 15));
        args.rejectUnknown();

        UserScramCredentialAlteration change = delete
                ? new UserScramCredentialDeletion(user, mechanism)
                : new UserScramCredentialUpsertion(user, new ScramCredentialInfo(mechanism, iterations), password);
        Admin admin = Security.admin(bootstrap, security, timeout);
        try {
            admin.alterUserScramCredentials(List.of(change)).all().get();
        } catch (Exception e) {
            System.err.println("[scram-user] failed:");
            e.printStackTrace(System.err);
            System.out.println("FAILED " + Security.describe(e));
            return Main.EXIT_ERROR;
        } finally {
            admin.close(Duration.ofSeconds(5));
        }
        System.out.println("OK");
        return Main.EXIT_OK;
    }

    static ScramMechanism mechanism(String name) {
        ScramMechanism m = ScramMechanism.fromMechanismName(name);
        if (m == ScramMechanism.UNKNOWN) {
            throw new Args.UsageException("--mechanism must be SCRAM-SHA-256 or SCRAM-SHA-512, got " + name);
        }
        return m;
    }
}
