package io.regent.interop;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StoreQueryParameters;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.InvalidStateStoreException;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.QueryableStoreTypes;
import org.apache.kafka.streams.state.ReadOnlyKeyValueStore;

/**
 * An exactly_once_v2 Kafka Streams application keeping a KTable (per key:
 * how many updates it had and the latest value) under a steady update stream
 * of a bounded key set, for the broker's compaction of transactional data
 * (issue 16). Its changelog is compacted and rolls a segment a second
 * (segment.ms=1000), with min.cleanable.dirty.ratio=0.01 and
 * delete.retention.ms=2000, so passes run all along and COMMIT markers may go
 * two seconds after their transaction's records did. The Go test beside it
 * (interop/eos_changelog_compaction_test.go) measures the changelog on disk.
 *
 * <pre>StreamsChangelogCompaction BOOTSTRAP WORKDIR APPLICATION_ID SECONDS [FIGURES_FILE]</pre>
 *
 * Checks: the application reaches RUNNING; SECONDS of updates at RATE records
 * a second over KEYS keys go in without the application failing; its store
 * holds every key's exact count; after a clean close and a wipe of its local
 * state, a new instance restores the store from the compacted changelog
 * (read_committed, as Streams restores under exactly_once_v2) and holds the
 * same exact counts and latest values. FIGURES_FILE, if given, gets
 * "commits N", "restored N" and "end N" lines for the Go test.
 */
public final class StreamsChangelogCompaction {
    static final int KEYS = 100;
    static final int RATE = 1000; // input records per second
    static final String STORE = "agg";
    static final int PAYLOAD = 100;

    public static void main(String[] args) {
        Scenario.main("StreamsChangelogCompaction", "APPLICATION_ID SECONDS [FIGURES_FILE]", args, 4, StreamsChangelogCompaction::run);
    }

    static String key(long i) {
        return String.format("key-%03d", i % KEYS);
    }

    /** The input value of update i: its number, padded to PAYLOAD bytes. */
    static String value(long i) {
        String n = Long.toString(i);
        return n + "x".repeat(PAYLOAD - n.length());
    }

    static Topology topology(String input) {
        Map<String, String> changelog = Map.of(
                "segment.ms", "1000",
                "min.cleanable.dirty.ratio", "0.01",
                "min.compaction.lag.ms", "0",
                "delete.retention.ms", "2000");
        StreamsBuilder b = new StreamsBuilder();
        b.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .groupByKey()
                .aggregate(() -> "0|",
                        (k, v, agg) -> (Long.parseLong(agg.substring(0, agg.indexOf('|'))) + 1) + "|" + v,
                        Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as(STORE)
                                .withKeySerde(Serdes.String()).withValueSerde(Serdes.String())
                                .withLoggingEnabled(changelog));
        return b.build();
    }

    static void run(Scenario s) throws Exception {
        String appId = s.arg(2, "");
        int seconds = Integer.parseInt(s.arg(3, "90"));
        String input = appId + "-input";
        String changelog = appId + "-" + STORE + "-changelog";
        Admin admin = s.admin();
        s.createTopics(admin, Map.of(input, 1));

        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, s.bootstrap);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.STATE_DIR_CONFIG, s.workDir.resolve("state").toString());
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        // The second instance joins once the first one's member expires
        // (Streams does not leave the group on close): 10 s, not 45.
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), "10000");

        Instance first = new Instance(s, topology(input), p);
        first.startRunning();

        KafkaProducer<String, String> producer = s.closeLater(new KafkaProducer<>(producerProps(s), new StringSerializer(), new StringSerializer()));
        long total = (long) RATE * seconds;
        List<Future<?>> pending = new ArrayList<>();
        long start = System.nanoTime();
        long lastReport = start;
        for (long i = 0; i < total; ) {
            long due = Math.min(total, (System.nanoTime() - start) / 1_000_000L * RATE / 1000);
            for (; i < due; i++) {
                pending.add(producer.send(new ProducerRecord<>(input, key(i), value(i))));
            }
            if (pending.size() > 5000) {
                for (Future<?> f : pending) {
                    f.get(60, TimeUnit.SECONDS);
                }
                pending.clear();
            }
            first.failIfDead();
            if (System.nanoTime() - lastReport > TimeUnit.SECONDS.toNanos(10)) {
                lastReport = System.nanoTime();
                s.info("  %d/%d updates sent; changelog end offset %d", i, total, endOffset(admin, changelog));
            }
            Thread.sleep(5); // pacing the input rate, not waiting for a condition
        }
        producer.flush();
        for (Future<?> f : pending) {
            f.get(60, TimeUnit.SECONDS);
        }
        s.check(true, "sent %d updates over %d keys in %d s", total, KEYS, seconds);

        Map<String, String> want = new TreeMap<>();
        for (long i = total - KEYS; i < total; i++) {
            want.put(key(i), (total / KEYS + (i % KEYS < total % KEYS ? 1 : 0)) + "|" + value(i));
        }
        s.await(Duration.ofSeconds(120), "every key's count and latest value in the store", () -> {
            first.failIfDead();
            return first.store().equals(want);
        }, () -> String.format("%d/%d keys exact", exact(first.store(), want), want.size()));
        s.check(true, "the store holds all %d keys' exact counts (%d updates each)", KEYS, total / KEYS);
        long commits = first.commits();
        s.check(first.close(), "first instance closed cleanly after %d commits (transactions)", commits);

        Instance second = new Instance(s, topology(input), p);
        second.streams.cleanUp(); // no local state: the store comes from the changelog alone
        second.startRunning();
        Map<String, String> restored = second.store();
        s.check(restored.equals(want), "a new instance restored the store from the compacted changelog (%d records read): %d/%d keys exact",
                second.restored.get(), exact(restored, want), want.size());
        long end = endOffset(admin, changelog);
        String figures = s.arg(4, "");
        if (!figures.isEmpty()) {
            Scenario.appendLines(java.nio.file.Paths.get(figures), List.of("commits " + commits, "restored " + second.restored.get(), "end " + end));
        }
        s.check(second.close(), "second instance closed cleanly; changelog end offset %d, %d records restored", end, second.restored.get());
    }

    /** One KafkaStreams instance and what the scenario watches of it. */
    static final class Instance {
        final Scenario s;
        final KafkaStreams streams;
        final AtomicReference<Throwable> died = new AtomicReference<>();
        final AtomicReference<KafkaStreams.State> state = new AtomicReference<>(KafkaStreams.State.CREATED);
        final AtomicLong restored = new AtomicLong();

        Instance(Scenario s, Topology t, Properties p) {
            this.s = s;
            streams = new KafkaStreams(t, p);
            streams.setStateListener((now, before) -> {
                state.set(now);
                s.info("  streams state %s -> %s", before, now);
            });
            streams.setUncaughtExceptionHandler(e -> {
                died.set(e);
                s.info("  streams thread died: %s", e);
                return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
            });
            streams.setGlobalStateRestoreListener(new StateRestoreListener() {
                @Override
                public void onRestoreStart(TopicPartition tp, String store, long startingOffset, long endingOffset) {
                    s.info("  restoring %s from %s offsets %d..%d", store, tp, startingOffset, endingOffset);
                }

                @Override
                public void onBatchRestored(TopicPartition tp, String store, long batchEndOffset, long numRestored) {
                }

                @Override
                public void onRestoreEnd(TopicPartition tp, String store, long totalRestored) {
                    restored.addAndGet(totalRestored);
                    s.info("  restored %s from %s: %d records", store, tp, totalRestored);
                }
            });
            s.closeLater(() -> {
                if (streams.state() != KafkaStreams.State.NOT_RUNNING) {
                    streams.close(Duration.ofSeconds(30));
                }
            });
        }

        void startRunning() throws Exception {
            streams.start();
            s.await(Duration.ofSeconds(120), "Streams application RUNNING", () -> {
                failIfDead();
                return state.get() == KafkaStreams.State.RUNNING;
            });
            s.check(true, "Streams instance is RUNNING");
        }

        void failIfDead() {
            if (died.get() != null) {
                throw s.fail("Streams thread died: %s", died.get());
            }
            KafkaStreams.State st = state.get();
            if (st == KafkaStreams.State.ERROR || st == KafkaStreams.State.PENDING_ERROR) {
                throw s.fail("Streams application in state %s", st);
            }
        }

        /** The store's contents; empty while it cannot be queried (a rebalance). */
        Map<String, String> store() {
            Map<String, String> out = new TreeMap<>();
            try {
                ReadOnlyKeyValueStore<String, String> kv = streams.store(
                        StoreQueryParameters.fromNameAndType(STORE, QueryableStoreTypes.<String, String>keyValueStore()));
                try (var it = kv.all()) {
                    it.forEachRemaining(e -> out.put(e.key, e.value));
                }
            } catch (InvalidStateStoreException e) {
                out.clear();
            }
            return out;
        }

        long commits() {
            double n = 0;
            for (var e : streams.metrics().entrySet()) {
                MetricName m = e.getKey();
                if (m.name().equals("commit-total") && m.group().equals("stream-thread-metrics")) {
                    n += ((Number) e.getValue().metricValue()).doubleValue();
                }
            }
            return (long) n;
        }

        boolean close() {
            return streams.close(Duration.ofSeconds(60)) && died.get() == null;
        }
    }

    static long exact(Map<String, String> got, Map<String, String> want) {
        return want.entrySet().stream().filter(e -> e.getValue().equals(got.get(e.getKey()))).count();
    }

    static long endOffset(Admin admin, String topic) throws Exception {
        TopicPartition tp = new TopicPartition(topic, 0);
        return admin.listOffsets(Map.of(tp, OffsetSpec.latest())).partitionResult(tp).get(60, TimeUnit.SECONDS).offset();
    }

    static Properties producerProps(Scenario s) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, s.bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "changelog-compaction-input");
        return p;
    }
}
