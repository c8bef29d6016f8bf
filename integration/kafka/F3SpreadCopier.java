import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.*;
import org.apache.kafka.common.serialization.*;

/**
 * F3SpreadCopier: a consume-transform-produce loop with Kafka's Java client,
 * like org.apache.kafka.tools.TransactionalMessageCopier, but each record
 * is re-keyed by its value (unique) and goes to the output partition that
 * key hashes to (the producer's default partitioner), so one transaction
 * writes to every output partition, as onceflow's and franz-go's
 * GroupTransactSession loops do. (Keeping the input key would not spread:
 * the input was partitioned by the same hash.) Used by
 * integration/kafka/finding3.sh (F3_COPIER=spread).
 *
 * Args: BOOTSTRAP TRANSACTIONAL_ID GROUP INPUT_TOPIC INPUT_PARTITIONS(comma)
 *       OUTPUT_TOPIC TXN_SIZE TXN_TIMEOUT_MS
 *
 * Order as Kafka recommends for a restarted copier: initTransactions (fences
 * and aborts a predecessor's transaction) before the committed offsets are
 * read. On an abortable error it aborts and rewinds to the committed offsets;
 * on a fatal one (fenced, out of order, ...) it exits 1 and the harness
 * restarts it. Exits 0 once everything up to the input end offsets seen at
 * start is committed. Prints a status line per transaction with
 * "remaining" (the harness reads it).
 */
public class F3SpreadCopier {
    public static void main(String[] a) {
        String bs = a[0], txnId = a[1], group = a[2], in = a[3], out = a[5];
        int txnSize = Integer.parseInt(a[6]);
        String txnTimeout = a[7];
        List<TopicPartition> tps = new ArrayList<>();
        for (String p : a[4].split(",")) tps.add(new TopicPartition(in, Integer.parseInt(p)));

        Properties pp = new Properties();
        pp.put("bootstrap.servers", bs);
        pp.put("transactional.id", txnId);
        pp.put("transaction.timeout.ms", txnTimeout);
        pp.put("batch.size", "512"); // several in-flight batches per partition, as the copier does
        pp.put("max.in.flight.requests.per.connection", "5");
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        Properties cp = new Properties();
        cp.put("bootstrap.servers", bs);
        cp.put("group.id", group);
        cp.put("isolation.level", "read_committed");
        cp.put("enable.auto.commit", "false");
        cp.put("auto.offset.reset", "earliest");
        cp.put("max.poll.records", String.valueOf(txnSize));
        cp.put("key.deserializer", StringDeserializer.class.getName());
        cp.put("value.deserializer", StringDeserializer.class.getName());

        KafkaProducer<String, String> producer = new KafkaProducer<>(pp);
        KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp);
        int rc = 0;
        try {
            producer.initTransactions();
            consumer.assign(tps);
            rewind(consumer);
            Map<TopicPartition, Long> end = consumer.endOffsets(tps);
            long remaining = 0;
            for (TopicPartition tp : tps) remaining += end.get(tp) - consumer.position(tp);
            long total = 0;
            status(txnId, "Start", total, remaining);
            while (remaining > 0) {
                ConsumerRecords<String, String> recs = consumer.poll(Duration.ofMillis(200));
                if (recs.isEmpty()) continue;
                try {
                    producer.beginTransaction();
                    for (ConsumerRecord<String, String> r : recs) producer.send(new ProducerRecord<>(out, r.value(), r.value()));
                    Map<TopicPartition, OffsetAndMetadata> pos = new HashMap<>();
                    for (TopicPartition tp : consumer.assignment()) pos.put(tp, new OffsetAndMetadata(consumer.position(tp)));
                    producer.sendOffsetsToTransaction(pos, consumer.groupMetadata());
                    producer.commitTransaction();
                    remaining -= recs.count();
                    total += recs.count();
                    status(txnId, "ProcessLoop", total, remaining);
                } catch (ProducerFencedException | OutOfOrderSequenceException | AuthorizationException
                         | UnsupportedVersionException | InvalidProducerEpochException e) {
                    throw e;
                } catch (KafkaException e) {
                    System.err.println("abortable: " + e);
                    producer.abortTransaction();
                    rewind(consumer);
                    remaining = 0;
                    for (TopicPartition tp : tps) remaining += end.get(tp) - consumer.position(tp);
                    status(txnId, "Aborted", total, remaining);
                }
            }
            status(txnId, "ShutdownComplete", total, remaining);
        } catch (Exception e) {
            System.err.println("fatal: " + e);
            e.printStackTrace();
            rc = 1;
        } finally {
            try { producer.close(Duration.ofSeconds(5)); } catch (Exception ignored) { }
            try { consumer.close(Duration.ofSeconds(5)); } catch (Exception ignored) { }
        }
        System.exit(rc);
    }

    static void rewind(KafkaConsumer<String, String> c) {
        Map<TopicPartition, OffsetAndMetadata> committed = c.committed(c.assignment());
        for (TopicPartition tp : c.assignment()) {
            OffsetAndMetadata o = committed.get(tp);
            if (o != null) c.seek(tp, o.offset()); else c.seekToBeginning(Collections.singleton(tp));
        }
    }

    static void status(String id, String stage, long total, long remaining) {
        System.out.println("{\"transactionalId\":\"" + id + "\",\"stage\":\"" + stage + "\",\"time\":" + System.currentTimeMillis()
            + ",\"totalProcessed\":" + total + ",\"remaining\":" + remaining + "}");
        System.out.flush();
    }
}
