package onceflow.bench;

import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.locks.LockSupport;

/**
 * The simulated handler of internal/bench/work.go and cpu.go, bit for bit,
 * so that a JVM mode does the same work per record as the Go modes: SHA-256
 * rounds chained over the value (the rounds calibrated by eosbench and
 * passed in), a sleep drawn from [min, max), and a transient failure of the
 * first attempt at the records whose id hashes below the fault cut (the
 * same records in every mode and every process).
 */
public final class Work {
    private final int cpuRounds;
    private final long latencyMinNanos, latencyMaxNanos;
    /** Record id is faulty when mix(id) < faultCut, compared unsigned; 0: none. */
    private final long faultCut;
    /** Bit id: the first attempt at record id was made (faulty records only). */
    private final AtomicLongArray tried;

    /** One digest per thread: Go's sha256.Sum256 allocates none either. */
    private static final ThreadLocal<MessageDigest> SHA256 = ThreadLocal.withInitial(() -> {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 missing from this JVM", e);
        }
    });

    public final AtomicLong retries = new AtomicLong();
    public final AtomicLong sleeps = new AtomicLong();
    public final AtomicLong sleptNanos = new AtomicLong();

    /** The failure of a faulty record's first attempt. */
    public static final class InjectedFault extends Exception {
        private static final long serialVersionUID = 1L;

        public InjectedFault() {
            super("bench: injected transient fault", null, false, false);
        }
    }

    public Work(int cpuRounds, long latencyMinNanos, long latencyMaxNanos, long faultCut, int messages) {
        this.cpuRounds = cpuRounds;
        this.latencyMinNanos = latencyMinNanos;
        this.latencyMaxNanos = latencyMaxNanos;
        this.faultCut = faultCut;
        this.tried = new AtomicLongArray(faultCut != 0 ? (messages + 63) / 64 : 0);
    }

    public static Work fromArgs(Args a) {
        return new Work(a.integer("cpu-rounds", 0), a.nanos("latency-min", 0), a.nanos("latency-max", 0),
                Long.parseUnsignedLong(a.string("fault-cut", "0")), a.integer("messages", 0));
    }

    /** splitmix64's finalizer, as bench.mix. */
    static long mix(long x) {
        x += 0x9e3779b97f4a7c15L;
        x = (x ^ (x >>> 30)) * 0xbf58476d1ce4e5b9L;
        x = (x ^ (x >>> 27)) * 0x94d049bb133111ebL;
        return x ^ (x >>> 31);
    }

    boolean faulty(long id) {
        return faultCut != 0 && Long.compareUnsigned(mix(id), faultCut) < 0;
    }

    /** The record id held in a payload's first 8 bytes (verify.Payload.ID). */
    public static long id(byte[] value) {
        if (value == null || value.length < 24) {
            throw new IllegalArgumentException("value of " + (value == null ? 0 : value.length) + " bytes holds no payload");
        }
        long v = 0;
        for (int i = 0; i < 8; i++) {
            v = (v << 8) | (value[i] & 0xff);
        }
        return v;
    }

    /** One attempt at record id: hash, sleep, then fail if it is a faulty record's first attempt. */
    public void doOnce(long id, byte[] value) throws InjectedFault {
        if (cpuRounds > 0) {
            hashRounds(value, cpuRounds);
        }
        long d = draw();
        if (d > 0) {
            long t0 = System.nanoTime();
            sleepNanos(d);
            sleptNanos.addAndGet(System.nanoTime() - t0);
            sleeps.incrementAndGet();
        }
        if (!faulty(id) || id / 64 >= tried.length()) {
            return;
        }
        long bit = 1L << (id % 64);
        if ((tried.getAndAccumulate((int) (id / 64), bit, (a, b) -> a | b) & bit) == 0) {
            throw new InjectedFault();
        }
    }

    /**
     * The baselines' retry in place (bench.work.doRetrying): the same
     * doubling backoff from initialNanos up to 10 s, the record holding its
     * thread meanwhile. It returns false when stop was asked for.
     */
    public boolean doRetrying(long id, byte[] value, long initialNanos, java.util.function.BooleanSupplier stop) {
        long delay = initialNanos;
        while (true) {
            try {
                doOnce(id, value);
                return true;
            } catch (InjectedFault e) {
                retries.incrementAndGet();
            }
            if (stop.getAsBoolean()) {
                return false;
            }
            sleepNanos(delay);
            delay = Math.min(2 * delay, 10_000_000_000L);
        }
    }

    private long draw() {
        if (latencyMaxNanos > latencyMinNanos) {
            return latencyMinNanos + ThreadLocalRandom.current().nextLong(latencyMaxNanos - latencyMinNanos);
        }
        return latencyMinNanos;
    }

    /** Sleeps d nanoseconds: parkNanos may wake early, so it parks until the deadline. */
    static void sleepNanos(long d) {
        long end = System.nanoTime() + d;
        for (long left = d; left > 0; left = end - System.nanoTime()) {
            LockSupport.parkNanos(left);
        }
    }

    /**
     * bench.hashRounds: n chained SHA-256 rounds, each over the previous
     * digest followed by value.
     */
    public static byte[] hashRounds(byte[] value, int n) {
        byte[] d = new byte[32];
        if (n <= 0) {
            return d;
        }
        MessageDigest md = SHA256.get();
        byte[] buf = new byte[32 + value.length];
        System.arraycopy(value, 0, buf, 32, value.length);
        for (int i = 0; i < n; i++) {
            System.arraycopy(d, 0, buf, 0, 32);
            d = md.digest(buf);
        }
        return d;
    }
}
