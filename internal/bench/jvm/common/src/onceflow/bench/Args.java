package onceflow.bench;

import java.util.HashMap;
import java.util.Map;

/**
 * The command line eosbench gives a JVM worker: --name=value pairs (see
 * internal/bench/jvm.go, which writes them). A missing required value or a
 * malformed one stops the worker with a message naming the flag.
 */
public final class Args {
    private final Map<String, String> values = new HashMap<>();

    public Args(String[] argv) {
        for (String a : argv) {
            if (!a.startsWith("--") || !a.contains("=")) {
                throw new IllegalArgumentException("argument " + a + ": want --name=value");
            }
            int eq = a.indexOf('=');
            values.put(a.substring(2, eq), a.substring(eq + 1));
        }
    }

    public boolean has(String name) {
        return values.containsKey(name);
    }

    public String string(String name) {
        String v = values.get(name);
        if (v == null) {
            throw new IllegalArgumentException("--" + name + " is required");
        }
        return v;
    }

    public String string(String name, String dflt) {
        return values.getOrDefault(name, dflt);
    }

    public int integer(String name, int dflt) {
        String v = values.get(name);
        try {
            return v == null ? dflt : Integer.parseInt(v);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("--" + name + "=" + v + ": not an integer", e);
        }
    }

    /** A duration given in nanoseconds, as Go's time.Duration is. */
    public long nanos(String name, long dflt) {
        String v = values.get(name);
        try {
            return v == null ? dflt : Long.parseLong(v);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("--" + name + "=" + v + ": not a count of nanoseconds", e);
        }
    }

    public boolean flag(String name) {
        return Boolean.parseBoolean(values.getOrDefault(name, "false"));
    }
}
