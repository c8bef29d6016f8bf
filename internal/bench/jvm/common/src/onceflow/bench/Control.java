package onceflow.bench;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * A JVM worker's side of eosbench's worker protocol (internal/bench/workers.go):
 * the worker stops when its standard input closes (eosbench asking, or
 * dying), and prints one JSON report line on standard output at a clean
 * stop. With --hold it first prints "ready" once it is built and waits for
 * a "go" line, so that the JVM's own start (class loading, ~1 s on a busy
 * 2-core machine) falls outside the timed run, as a Go mode's binary is
 * loaded before its run starts; a restarted worker is not held.
 */
public final class Control {
    private final CountDownLatch go = new CountDownLatch(1);
    private final CountDownLatch stop = new CountDownLatch(1);
    private final PrintStream out;

    public Control(PrintStream out) {
        this.out = out;
        Thread t = new Thread(this::readStdin, "eosbench-stdin");
        t.setDaemon(true);
        t.start();
    }

    private void readStdin() {
        try (BufferedReader r = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            String line;
            while ((line = r.readLine()) != null) {
                if (line.trim().equals("go")) {
                    go.countDown();
                }
            }
        } catch (IOException e) {
            // A broken stdin is a closed one: stop.
        }
        go.countDown();
        stop.countDown();
    }

    /** Prints "ready" and waits for "go" (or for a stop, then returns false). */
    public boolean hold() throws InterruptedException {
        out.println("ready");
        out.flush();
        go.await();
        return stop.getCount() > 0;
    }

    public void awaitStop() throws InterruptedException {
        stop.await();
    }

    public boolean awaitStop(long millis) throws InterruptedException {
        return stop.await(millis, TimeUnit.MILLISECONDS);
    }

    public boolean stopping() {
        return stop.getCount() == 0;
    }

    /** Writes the report line: bench.WorkerReport's JSON fields. */
    public void report(Report r) {
        out.println(r.json());
        out.flush();
    }

    /** This process's peak resident memory (VmHWM), 0 where /proc is missing. */
    public static long peakRSS() {
        try {
            for (String l : Files.readAllLines(Path.of("/proc/self/status"))) {
                if (l.startsWith("VmHWM:")) {
                    return 1024 * Long.parseLong(l.substring(6).trim().split("\\s+")[0]);
                }
            }
        } catch (IOException | RuntimeException e) {
            // unknown
        }
        return 0;
    }
}
