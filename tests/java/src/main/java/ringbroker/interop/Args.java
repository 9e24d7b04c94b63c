package ringbroker.interop;

import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;

/**
 * {@code --name value} (or {@code --name=value}) options, and {@code --name} flags (an option
 * followed by another option or by nothing); every option is checked to be known by the subcommand
 * that uses it. A value starting with {@code --} must be given as {@code --name=value}.
 */
final class Args {
    static final class UsageException extends RuntimeException {
        private static final long serialVersionUID = 1L;

        UsageException(String message) {
            super(message);
        }
    }

    private final Map<String, String> values = new HashMap<>();
    /** Options given without a value. */
    private final Set<String> flags = new HashSet<>();
    private final Set<String> used = new HashSet<>();

    private Args() {}

    static Args parse(String[] argv) {
        Args a = new Args();
        for (int i = 0; i < argv.length; i++) {
            String k = argv[i];
            if (!k.startsWith("--") || k.length() == 2) {
                throw new UsageException("expected an option like --name, got: " + k);
            }
            String name = k.substring(2);
            String v;
            int eq = name.indexOf('=');
            if (eq >= 0) {
                v = name.substring(eq + 1);
                name = name.substring(0, eq);
            } else if (i + 1 >= argv.length || argv[i + 1].startsWith("--")) {
                if (a.values.containsKey(name) || !a.flags.add(name)) {
                    throw new UsageException("option --" + name + " given twice");
                }
                continue;
            } else {
                v = argv[++i];
            }
            if (a.flags.contains(name) || a.values.put(name, v) != null) {
                throw new UsageException("option --" + name + " given twice");
            }
        }
        return a;
    }

    String str(String name) {
        used.add(name);
        String v = value(name);
        if (v == null) {
            throw new UsageException("missing required option --" + name);
        }
        return v;
    }

    String str(String name, String dflt) {
        used.add(name);
        String v = value(name);
        return v == null ? dflt : v;
    }

    /** True when {@code --name} (or {@code --name=true}) was given, false when absent or {@code =false}. */
    boolean flag(String name) {
        used.add(name);
        if (flags.contains(name)) {
            return true;
        }
        String v = values.get(name);
        if (v == null || v.equals("false")) {
            return false;
        }
        if (v.equals("true")) {
            return true;
        }
        throw new UsageException("option --" + name + " is a flag (true or false), got: " + v);
    }

    /** The option's value, null when absent; an option given as a flag has none. */
    private String value(String name) {
        if (flags.contains(name)) {
            throw new UsageException("option --" + name + " needs a value");
        }
        return values.get(name);
    }

    int integer(String name, int dflt) {
        return (int) longValue(name, dflt);
    }

    long longValue(String name, long dflt) {
        used.add(name);
        String v = value(name);
        if (v == null) {
            return dflt;
        }
        try {
            return Long.parseLong(v.replace("_", ""));
        } catch (NumberFormatException e) {
            throw new UsageException("option --" + name + " expects a number, got: " + v);
        }
    }

    /** Call after reading every option: rejects ones the subcommand does not know (typos). */
    void rejectUnknown() {
        for (String k : values.keySet()) {
            if (!used.contains(k)) {
                throw new UsageException("unknown option --" + k);
            }
        }
        for (String k : flags) {
            if (!used.contains(k)) {
                throw new UsageException("unknown option --" + k);
            }
        }
    }
}
