package onceflow.bench.pc;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

import io.confluent.parallelconsumer.PCRetriableException;
import io.confluent.parallelconsumer.ParallelConsumerOptions;
import io.confluent.parallelconsumer.ParallelConsumerOptions.CommitMode;
import io.confluent.parallelconsumer.ParallelConsumerOptions.ProcessingOrder;
import io.confluent.parallelconsumer.ParallelStreamProcessor;

import onceflow.bench.Args;
import onceflow.bench.Control;
import onceflow.bench.Report;
import onceflow.bench.Work;

/**
 * eosbench's parallel-consumer mode: one instance of Confluent's Parallel
 * Consumer in its transactional mode (PERIODIC_TRANSACTIONAL_PRODUCER: the
 * outputs and the offsets of a commit interval in one transaction) with KEY
 * ordering (each session in order, sessions in parallel, as
 * onceflow-session), copying its input to its output through the simulated
 * handler. A faulty record's first attempt throws; Parallel Consumer
 * retries it after the same doubling backoff the other modes use, its key's
 * later records waiting meanwhile.
 */
public final class Main {
    public static void main(String[] argv) throws Exception {
        Args a = new Args(argv);
        Work work = Work.fromArgs(a);
        Control control = new Control(System.out);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        String output = a.string("output");
        long retryInitial = a.nanos("retry-initial", 100_000_000L);

        // A KafkaProducer itself: Parallel Consumer reads its transaction
        // manager by reflection on the object's own class, so no wrapper
        // (to time its commits) can stand in.
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(a));
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProps(a));
        ParallelConsumerOptions<byte[], byte[]> options = ParallelConsumerOptions.<byte[], byte[]>builder()
                .consumer(consumer)
                .producer(producer)
                .ordering(ProcessingOrder.KEY)
                .commitMode(CommitMode.PERIODIC_TRANSACTIONAL_PRODUCER)
                .commitInterval(Duration.ofNanos(a.nanos("commit-interval", 100_000_000L)))
                .maxConcurrency(a.integer("max-concurrency", 16))
                .retryDelayProvider(rc -> backoff(retryInitial, rc.getNumberOfFailedAttempts()))
                // Its check that auto commit is off reads a private field of
                // KafkaConsumer by reflection, which Java 17 refuses; it is
                // off (consumerProps).
                .ignoreReflectiveAccessExceptionsForAutoCommitDisabledCheck(true)
                .build();
        Report rep;
        ParallelStreamProcessor<byte[], byte[]> pc = null;
        try {
            if (a.flag("hold") && !control.hold()) {
                producer.close();
                consumer.close();
                control.report(Report.of(work));
                return;
            }
            pc = ParallelStreamProcessor.createEosStreamProcessor(options);
            pc.subscribe(List.of(a.string("input")));
            pc.pollAndProduce(ctx -> {
                byte[] v = ctx.value();
                try {
                    work.doOnce(Work.id(v), v);
                } catch (Work.InjectedFault e) {
                    work.retries.incrementAndGet();
                    // Retriable: retried after retryDelayProvider's delay,
                    // without a warning each time.
                    throw new PCRetriableException(e);
                }
                return new ProducerRecord<>(output, ctx.key(), v);
            });
            while (!control.awaitStop(100)) {
                if (pc.isClosedOrFailed()) {
                    failure.compareAndSet(null, new IllegalStateException("Parallel Consumer closed or failed by itself"));
                    break;
                }
            }
        } catch (Throwable t) {
            failure.compareAndSet(null, t);
        } finally {
            rep = Report.of(work);
            // Read before close, which closes the producer (the last
            // commit, made by close, is not counted).
            commitTime(producer.metrics(), rep);
            if (pc != null) {
                // Commits what finished; the rest is redone by the next owner.
                pc.closeDontDrainFirst(Duration.ofSeconds(50));
            }
        }
        Throwable f = failure.get();
        if (f != null) {
            rep.error = "parallel-consumer: " + f;
            control.report(rep);
            f.printStackTrace();
            System.exit(1);
        }
        control.report(rep);
    }

    /**
     * The producer's time in transactional offset commits and transaction
     * commits (its txn-send-offsets-time-ns-total and
     * txn-commit-time-ns-total metrics). It keeps no count of them.
     */
    static void commitTime(Map<MetricName, ? extends Metric> metrics, Report rep) {
        double ns = 0;
        for (Map.Entry<MetricName, ? extends Metric> e : metrics.entrySet()) {
            String n = e.getKey().name();
            if (e.getKey().group().equals("producer-metrics")
                    && (n.equals("txn-commit-time-ns-total") || n.equals("txn-send-offsets-time-ns-total"))
                    && e.getValue().metricValue() instanceof Double d && !d.isNaN()) {
                ns += d;
            }
        }
        rep.commitNanos = (long) ns;
    }

    /** The Go modes' retry backoff: initial, doubling, at most 10 s. */
    static Duration backoff(long initialNanos, int failedAttempts) {
        long d = initialNanos;
        for (int i = 1; i < failedAttempts && d < 10_000_000_000L; i++) {
            d *= 2;
        }
        return Duration.ofNanos(Math.min(d, 10_000_000_000L));
    }

    static Properties consumerProps(Args a) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, a.string("brokers"));
        p.put(ConsumerConfig.GROUP_ID_CONFIG, a.string("group"));
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, a.string("group") + "-" + a.string("instance"));
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, a.string("group-protocol", "classic"));
        if (a.string("group-protocol", "classic").equals("classic")) {
            long session = a.nanos("session-timeout", 10_000_000_000L) / 1_000_000L;
            p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, (int) session);
            p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, (int) Math.max(100, session / 3));
        }
        p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, a.string("group") + "-" + a.string("instance"));
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
        return p;
    }

    static Properties producerProps(Args a) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, a.string("brokers"));
        p.put(ProducerConfig.CLIENT_ID_CONFIG, a.string("group") + "-" + a.string("instance") + "-producer");
        // One transactional ID per instance, as the Go modes have.
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, a.string("group") + "/" + a.string("instance"));
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 10_000);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
        return p;
    }
}
