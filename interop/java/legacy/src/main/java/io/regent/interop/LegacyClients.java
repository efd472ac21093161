package io.regent.interop;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;

import org.apache.kafka.clients.admin.AdminClient;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.AppInfoParser;

/**
 * An older Java client (2.0.1, or 2.8.2 on the same classes) against Regent:
 * admin, idempotent and plain producers with compression and headers, a
 * consumer group that commits and resumes, transactions read with both
 * isolation levels, and consume-transform-produce with
 * sendOffsetsToTransaction. These clients speak the protocol versions Kafka 4
 * dropped (KIP-896) and Regent keeps (SPEC: every API from the lowest version
 * Kafka 3.9 served). Usage: LegacyClients BOOTSTRAP. Prints one CHECK line
 * per check; exits 0 when all pass, 1 on a failed check, 2 on an error.
 */
public final class LegacyClients {
    private static final int PARTITIONS = 3;
    private static final int PLAIN = 3000;
    private static final int MORE = 30;
    private static final Duration LIMIT = Duration.ofSeconds(60);

    private final String bootstrap;
    private final String prefix;

    private LegacyClients(String bootstrap) {
        this.bootstrap = bootstrap;
        this.prefix = "legacy-" + AppInfoParser.getVersion().replace('.', '_');
    }

    public static void main(String[] args) {
        if (args.length < 1) {
            System.err.println("usage: LegacyClients BOOTSTRAP");
            System.exit(2);
        }
        try {
            new LegacyClients(args[0]).run();
        } catch (CheckFailed e) {
            System.out.println("CHECK FAILED: " + e.getMessage());
            System.exit(1);
        } catch (Exception e) {
            System.out.println("ERROR: " + e);
            e.printStackTrace(System.out);
            System.exit(2);
        }
        System.exit(0);
    }

    static final class CheckFailed extends RuntimeException {
        CheckFailed(String msg) {
            super(msg);
        }
    }

    private static void check(boolean ok, String what) {
        if (!ok) {
            throw new CheckFailed(what);
        }
        System.out.println("CHECK ok: " + what);
    }

    private void run() throws Exception {
        System.out.println("kafka-clients " + AppInfoParser.getVersion());
        String plain = prefix + "-plain", txn = prefix + "-txn", out = prefix + "-out";
        try (AdminClient admin = AdminClient.create(props())) {
            admin(admin, plain, txn, out);
        }
        produce(plain);
        consumeAndResume(plain);
        transactions(txn);
        consumeTransformProduce(plain, out);
    }

    private Properties props() {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("request.timeout.ms", "20000");
        return p;
    }

    private void admin(AdminClient admin, String... topics) throws Exception {
        List<NewTopic> news = new ArrayList<>();
        for (String t : topics) {
            news.add(new NewTopic(t, PARTITIONS, (short) 1)
                    .configs(Collections.singletonMap("retention.ms", "86400000")));
        }
        admin.createTopics(news).all().get();
        Map<String, TopicDescription> d = admin.describeTopics(List.of(topics)).all().get();
        for (String t : topics) {
            check(d.get(t).partitions().size() == PARTITIONS, "describeTopics: " + t + " has " + PARTITIONS + " partitions");
        }
        ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topics[0]);
        Config c = admin.describeConfigs(List.of(res)).all().get().get(res);
        check("86400000".equals(c.get("retention.ms").value()), "describeConfigs: retention.ms as created");
        check(!admin.describeCluster().nodes().get().isEmpty(), "describeCluster lists the broker");
        check(admin.listTopics().names().get().containsAll(List.of(topics)), "listTopics lists the new topics");
    }

    private KafkaProducer<String, String> producer(Properties extra) {
        Properties p = props();
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        p.putAll(extra);
        return new KafkaProducer<>(p);
    }

    private KafkaConsumer<String, String> consumer(String group, String isolation) {
        Properties p = props();
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        p.put("auto.offset.reset", "earliest");
        p.put("enable.auto.commit", "false");
        p.put("isolation.level", isolation);
        if (group != null) {
            p.put("group.id", group);
        }
        return new KafkaConsumer<>(p);
    }

    private static ProducerRecord<String, String> record(String topic, int i) {
        List<Header> h = List.of(new RecordHeader("i", Integer.toString(i).getBytes(StandardCharsets.UTF_8)));
        return new ProducerRecord<>(topic, i % PARTITIONS, "k-" + i, "v-" + i, h);
    }

    /** Records 0..PLAIN-1: two thirds idempotent with lz4, the rest acks=1 with gzip. */
    private void produce(String topic) throws Exception {
        Properties idem = new Properties();
        idem.put("enable.idempotence", "true");
        idem.put("acks", "all");
        idem.put("compression.type", "lz4");
        idem.put("linger.ms", "5");
        Properties gz = new Properties();
        gz.put("acks", "1");
        gz.put("compression.type", "gzip");
        int split = PLAIN * 2 / 3;
        send(idem, topic, 0, split);
        send(gz, topic, split, PLAIN);
        check(true, "produced " + PLAIN + " records (lz4 idempotent acks=all, gzip acks=1), every send acknowledged");
    }

    private void send(Properties extra, String topic, int from, int to) throws Exception {
        try (KafkaProducer<String, String> p = producer(extra)) {
            List<Future<?>> acks = new ArrayList<>();
            for (int i = from; i < to; i++) {
                acks.add(p.send(record(topic, i)));
            }
            for (Future<?> f : acks) {
                f.get();
            }
        }
    }

    /** Polls until want records arrived or the limit passed; returns them in poll order. */
    private static List<ConsumerRecord<String, String>> drain(KafkaConsumer<String, String> c, int want) {
        List<ConsumerRecord<String, String>> got = new ArrayList<>();
        long end = System.nanoTime() + LIMIT.toNanos();
        while (got.size() < want && System.nanoTime() < end) {
            ConsumerRecords<String, String> rs = c.poll(Duration.ofMillis(500));
            for (ConsumerRecord<String, String> r : rs) {
                got.add(r);
            }
        }
        return got;
    }

    /** Checks records from..to-1 arrived once each, keys, headers and per-partition order intact. */
    private static void checkRecords(List<ConsumerRecord<String, String>> got, int from, int to, String what) {
        check(got.size() == to - from, what + ": " + (to - from) + " records (got " + got.size() + ")");
        Map<Integer, Integer> last = new HashMap<>();
        boolean[] seen = new boolean[to - from];
        for (ConsumerRecord<String, String> r : got) {
            int i = Integer.parseInt(r.value().substring(2));
            Header h = r.headers().lastHeader("i");
            boolean ok = i >= from && i < to && !seen[i - from] && ("k-" + i).equals(r.key())
                    && h != null && Integer.toString(i).equals(new String(h.value(), StandardCharsets.UTF_8))
                    && r.partition() == i % PARTITIONS && last.getOrDefault(r.partition(), -1) < i;
            if (!ok) {
                throw new CheckFailed(what + ": unexpected record " + r);
            }
            seen[i - from] = true;
            last.put(r.partition(), i);
        }
        check(true, what + ": each once, keys and headers intact, per-partition order kept");
    }

    private void consumeAndResume(String topic) throws Exception {
        String group = prefix + "-group";
        List<TopicPartition> tps = partitions(topic);
        try (KafkaConsumer<String, String> c = consumer(group, "read_uncommitted")) {
            c.subscribe(List.of(topic));
            checkRecords(drain(c, PLAIN), 0, PLAIN, "group consumer");
            c.commitSync();
            Map<TopicPartition, Long> ends = c.endOffsets(tps);
            for (TopicPartition tp : tps) {
                OffsetAndMetadata om = c.committed(tp);
                check(om != null && om.offset() == ends.get(tp), "committed offset of " + tp + " is its end offset " + ends.get(tp));
            }
        }
        Properties acks = new Properties();
        acks.put("acks", "all");
        send(acks, topic, PLAIN, PLAIN + MORE);
        try (KafkaConsumer<String, String> c = consumer(group, "read_uncommitted")) {
            c.subscribe(List.of(topic));
            checkRecords(drain(c, MORE), PLAIN, PLAIN + MORE, "group consumer after a restart resumes at its commits");
            c.commitSync();
        }
    }

    private static List<TopicPartition> partitions(String topic) {
        List<TopicPartition> tps = new ArrayList<>();
        for (int p = 0; p < PARTITIONS; p++) {
            tps.add(new TopicPartition(topic, p));
        }
        return tps;
    }

    private Properties transactional(String id) {
        Properties p = new Properties();
        p.put("transactional.id", id);
        p.put("enable.idempotence", "true");
        p.put("acks", "all");
        p.put("transaction.timeout.ms", "30000");
        return p;
    }

    /** Commits 0..99, aborts 100..149, commits 150..249. */
    private void transactions(String topic) throws Exception {
        try (KafkaProducer<String, String> p = producer(transactional(prefix + "-tx"))) {
            p.initTransactions();
            int[][] runs = {{0, 100}, {100, 150}, {150, 250}};
            for (int[] run : runs) {
                p.beginTransaction();
                for (int i = run[0]; i < run[1]; i++) {
                    p.send(record(topic, i));
                }
                p.flush();
                if (run[0] == 100) {
                    p.abortTransaction();
                } else {
                    p.commitTransaction();
                }
            }
        }
        try (KafkaConsumer<String, String> c = consumer(null, "read_committed")) {
            c.assign(partitions(topic));
            List<ConsumerRecord<String, String>> got = drain(c, 200);
            List<ConsumerRecord<String, String>> committed = new ArrayList<>(), aborted = new ArrayList<>();
            for (ConsumerRecord<String, String> r : got) {
                int i = Integer.parseInt(r.value().substring(2));
                (i >= 100 && i < 150 ? aborted : committed).add(r);
            }
            check(aborted.isEmpty(), "read_committed: none of the 50 aborted records");
            check(committed.size() == 200, "read_committed: the 200 committed records (got " + committed.size() + ")");
        }
        try (KafkaConsumer<String, String> c = consumer(null, "read_uncommitted")) {
            c.assign(partitions(topic));
            checkRecords(drain(c, 250), 0, 250, "read_uncommitted: committed and aborted records");
        }
    }

    /** Copies the plain topic into out in transactions that also commit the group's offsets. */
    private void consumeTransformProduce(String in, String out) throws Exception {
        String group = prefix + "-ctp";
        int total = PLAIN + MORE, copied = 0;
        long end = System.nanoTime() + LIMIT.toNanos();
        try (KafkaConsumer<String, String> c = consumer(group, "read_committed");
             KafkaProducer<String, String> p = producer(transactional(prefix + "-ctp-tx"))) {
            p.initTransactions();
            c.subscribe(List.of(in));
            while (copied < total && System.nanoTime() < end) {
                ConsumerRecords<String, String> rs = c.poll(Duration.ofMillis(500));
                if (rs.isEmpty()) {
                    continue;
                }
                p.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                for (ConsumerRecord<String, String> r : rs) {
                    p.send(new ProducerRecord<>(out, r.partition(), r.key(), r.value(), r.headers()));
                    next.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    copied++;
                }
                p.sendOffsetsToTransaction(next, group);
                p.commitTransaction();
            }
            check(copied == total, "consume-transform-produce copied " + total + " records (got " + copied + ")");
            Map<TopicPartition, Long> ends = c.endOffsets(partitions(in));
            for (TopicPartition tp : partitions(in)) {
                OffsetAndMetadata om = c.committed(tp);
                check(om != null && om.offset() == ends.get(tp), "transactional commit of " + tp + " is its end offset " + ends.get(tp));
            }
        }
        try (KafkaConsumer<String, String> c = consumer(null, "read_committed")) {
            c.assign(partitions(out));
            checkRecords(drain(c, total), 0, total, "read_committed copy");
        }
    }
}
