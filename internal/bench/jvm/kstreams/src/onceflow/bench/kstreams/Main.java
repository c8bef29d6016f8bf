package onceflow.bench.kstreams;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Comparator;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Stream;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TopologyConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;

import onceflow.bench.Args;
import onceflow.bench.Control;
import onceflow.bench.Report;
import onceflow.bench.Work;

/**
 * eosbench's kafka-streams mode: one instance of a Kafka Streams
 * application (exactly_once_v2) that copies its input to its output through
 * the simulated handler. The application id is the run's group, so that
 * several instances (-workers) share the input's partitions; each has as
 * many stream threads as input partitions it owns.
 */
public final class Main {
    public static void main(String[] argv) throws Exception {
        Args a = new Args(argv);
        Work work = Work.fromArgs(a);
        Control control = new Control(System.out);
        AtomicReference<Throwable> failure = new AtomicReference<>();

        Path stateDir = Files.createTempDirectory("eosbench-kstreams-");
        Properties props = props(a, stateDir);
        KafkaStreams streams = new KafkaStreams(topology(a, work, props).build(), props);
        // A stream thread that dies (an EndTxn the broker failed, on an
        // overloaded cluster) is replaced, as a resilient deployment would
        // have it: its tasks resume from their last commit under a new
        // producer. Kafka Streams logs the error; the report counts the
        // replacements (as rebuilds).
        AtomicLong replaced = new AtomicLong();
        streams.setUncaughtExceptionHandler(e -> {
            replaced.incrementAndGet();
            return StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        streams.setStateListener((now, before) -> {
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.PENDING_ERROR) {
                failure.compareAndSet(null, new IllegalStateException("Kafka Streams went from " + before + " to " + now));
            }
        });
        Report rep;
        try {
            if (a.flag("hold") && !control.hold()) {
                streams.close(Duration.ofSeconds(30));
                control.report(Report.of(work));
                return;
            }
            streams.start();
            while (!control.awaitStop(100)) {
                if (failure.get() != null) {
                    break;
                }
            }
        } finally {
            // Metrics are gone once closed: the last transaction's commit,
            // made by close, is not among them.
            rep = Report.of(work);
            rep.rebuilds = replaced.get();
            commits(streams.metrics(), rep);
            // A clean close commits every task's open transaction.
            if (!streams.close(Duration.ofSeconds(50))) {
                failure.compareAndSet(null, new IllegalStateException("Kafka Streams did not close within 50s"));
            }
            deleteTree(stateDir);
        }
        Throwable f = failure.get();
        if (f != null) {
            rep.error = "kafka-streams: " + f;
            control.report(rep);
            f.printStackTrace();
            System.exit(1);
        }
        control.report(rep);
    }

    static StreamsBuilder topology(Args a, Work work, Properties props) {
        String output = a.string("output");
        long retryInitial = a.nanos("retry-initial", 100_000_000L);
        // Built with the application's config: a builder's own default one
        // would warn about the global exception handler (props below).
        StreamsBuilder b = new StreamsBuilder(new TopologyConfig(new StreamsConfig(props)));
        b.stream(a.string("input"), Consumed.with(Serdes.ByteArray(), Serdes.ByteArray()))
                .process(() -> new Handler(work, retryInitial))
                .to(output, Produced.with(Serdes.ByteArray(), Serdes.ByteArray()));
        return b;
    }

    /**
     * The handler: the simulated work, retried in place on a transient
     * fault as the Go baselines do (the stream thread, like their poll
     * loop, waits), then the record forwarded with its key and value. Its
     * timestamp stays the input's (Kafka Streams' default); eosbench times
     * latency from the payload's production time, not the record's.
     */
    static final class Handler implements Processor<byte[], byte[], byte[], byte[]> {
        private final Work work;
        private final long retryInitial;
        private ProcessorContext<byte[], byte[]> ctx;

        Handler(Work work, long retryInitial) {
            this.work = work;
            this.retryInitial = retryInitial;
        }

        @Override
        public void init(ProcessorContext<byte[], byte[]> ctx) {
            this.ctx = ctx;
        }

        @Override
        public void process(Record<byte[], byte[]> r) {
            work.doRetrying(Work.id(r.value()), r.value(), retryInitial, () -> false);
            // Headers dropped as the Go modes drop them (bench.transform).
            ctx.forward(r.withHeaders(new RecordHeaders()));
        }
    }

    static Properties props(Args a, Path stateDir) {
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, a.string("group"));
        p.put(StreamsConfig.CLIENT_ID_CONFIG, a.string("group") + "-" + a.string("instance"));
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, a.string("brokers"));
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        // 100 ms is Kafka Streams' own default under exactly-once, and
        // eosbench's -commit-interval default: passed on so that a
        // different -commit-interval applies here too.
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, a.nanos("commit-interval", 100_000_000L) / 1_000_000L);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, a.integer("threads", 1));
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
        // There is no global state here: enabling it only silences a
        // warning that would otherwise be printed for every instance.
        p.put(StreamsConfig.PROCESSING_EXCEPTION_HANDLER_GLOBAL_ENABLED_CONFIG, true);
        // The group protocol: Kafka Streams' own KIP-1071 protocol stands
        // for the consumer protocol (KIP-848) the other modes use.
        p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, a.string("group-protocol", "classic"));
        // As the Go modes: the session timeout eosbench picked (short for
        // workers that get killed) and static membership under the
        // instance's ID, so a restarted worker takes its predecessor's place.
        long session = a.nanos("session-timeout", 10_000_000_000L) / 1_000_000L;
        if (!a.string("group-protocol", "classic").equals("streams")) {
            p.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), (int) session);
            p.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), (int) Math.max(100, session / 3));
            p.put(StreamsConfig.consumerPrefix(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG), a.string("group") + "-" + a.string("instance"));
        }
        return p;
    }

    /** Adds the stream threads' commit counts and times (thread-level metrics). */
    static void commits(Map<MetricName, ? extends Metric> metrics, Report rep) {
        double total = 0, nanos = 0, max = 0;
        for (Map.Entry<MetricName, ? extends Metric> e : metrics.entrySet()) {
            MetricName n = e.getKey();
            if (!n.group().equals("stream-thread-metrics")) {
                continue;
            }
            Object v = e.getValue().metricValue();
            if (!(v instanceof Double d) || d.isNaN()) {
                continue;
            }
            switch (n.name()) {
                case "commit-total" -> {
                    total += d;
                    Metric avg = metrics.get(new MetricName("commit-latency-avg", n.group(), "", n.tags()));
                    if (avg != null && avg.metricValue() instanceof Double m && !m.isNaN()) {
                        nanos += d * m * 1e6; // the average is in ms, over the metric's window
                    }
                }
                case "commit-latency-max" -> max = Math.max(max, d);
                default -> {
                }
            }
        }
        rep.commits = (long) total;
        rep.commitNanos = (long) nanos;
        rep.commitMaxNanos = (long) (max * 1e6);
    }

    static void deleteTree(Path dir) {
        try (Stream<Path> s = Files.walk(dir)) {
            s.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (Exception e) {
            System.err.println("kafka-streams: removing " + dir + ": " + e);
        }
    }
}
