package onceflow.bench;

/**
 * A worker's report, bench.WorkerReport as JSON: its counters (commits and
 * their time as the JVM framework measures them, retries, handler sleeps)
 * and peaks (threads stand in for goroutines).
 */
public final class Report {
    public long commits, commitNanos, commitMaxNanos, aborts, retries, rebuilds, sleeps, sleptNanos;
    public int peakThreads;
    public long peakRSS;
    public String error;

    public static Report of(Work w) {
        Report r = new Report();
        r.retries = w.retries.get();
        r.sleeps = w.sleeps.get();
        r.sleptNanos = w.sleptNanos.get();
        r.peakThreads = java.lang.management.ManagementFactory.getThreadMXBean().getPeakThreadCount();
        r.peakRSS = Control.peakRSS();
        return r;
    }

    String json() {
        StringBuilder b = new StringBuilder("{");
        b.append("\"peak_goroutines\":").append(peakThreads);
        b.append(",\"peak_rss_bytes\":").append(peakRSS);
        b.append(",\"commits\":").append(commits);
        b.append(",\"commit_ns\":").append(commitNanos);
        if (commitMaxNanos > 0) {
            b.append(",\"commit_max_ns\":").append(commitMaxNanos);
        }
        b.append(",\"aborts\":").append(aborts);
        b.append(",\"retries\":").append(retries);
        if (rebuilds > 0) {
            b.append(",\"rebuilds\":").append(rebuilds);
        }
        b.append(",\"handler_sleeps\":").append(sleeps);
        b.append(",\"handler_slept_ns\":").append(sleptNanos);
        if (error != null) {
            b.append(",\"error\":\"").append(escape(error)).append('"');
        }
        return b.append('}').toString();
    }

    private static String escape(String s) {
        StringBuilder b = new StringBuilder();
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                case '\t' -> b.append("\\t");
                default -> {
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
            }
        }
        return b.toString();
    }
}
