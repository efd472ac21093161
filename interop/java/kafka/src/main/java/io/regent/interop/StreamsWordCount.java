package io.regent.interop;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ListTopicsOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * Kafka Streams word count (the WordCountDemo topology: split lines into
 * words, group by word, count, write the counts to an output topic) over a
 * known input, with the processing guarantee given as the third argument and
 * the group protocol (classic, the default, or streams: KIP-1071, where the
 * broker assigns tasks and creates the internal topics) as the fourth.
 *
 * <pre>StreamsWordCount BOOTSTRAP WORKDIR at_least_once|exactly_once_v2 [classic|streams]</pre>
 *
 * Checks: half the input is produced before the application starts; it
 * reaches RUNNING; reading the output with read_committed, the latest count of
 * every word equals its frequency in that half; then the other half is
 * produced and the latest count of every word equals its frequency in the
 * whole input (and stays so); Streams created its repartition and changelog
 * topics with the configs it asks for; the application closes.
 */
public final class StreamsWordCount {
    static final int PARTITIONS = 3;
    static final int LINES = 400;

    public static void main(String[] args) {
        Scenario.main("StreamsWordCount", "at_least_once|exactly_once_v2 [classic|streams]", args, 3, StreamsWordCount::run);
    }

    /** Lines of text over a fixed vocabulary, and the (lower-cased) words of each. */
    static final class Input {
        final List<String> lines = new ArrayList<>();
        final List<List<String>> words = new ArrayList<>();

        Input(long seed, int n) {
            String[] vocab = ("alpha bravo charlie delta echo foxtrot golf hotel india juliett kilo lima mike "
                    + "november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu "
                    + "kafka streams regent broker topic partition offset record").split(" ");
            Random r = new Random(seed);
            for (int i = 0; i < n; i++) {
                int count = 1 + r.nextInt(12);
                List<String> ws = new ArrayList<>();
                StringBuilder sb = new StringBuilder();
                for (int w = 0; w < count; w++) {
                    // Low indices much more often, so the counts range widely.
                    int idx = (int) Math.min(vocab.length - 1, Math.floor(Math.abs(r.nextGaussian()) * vocab.length / 3));
                    String word = vocab[idx];
                    ws.add(word);
                    if (w > 0) {
                        sb.append(r.nextInt(5) == 0 ? ", " : " ");
                    }
                    sb.append(r.nextInt(4) == 0 ? word.toUpperCase(Locale.ROOT) : word);
                }
                if (r.nextBoolean()) {
                    sb.append('.');
                }
                lines.add(sb.toString());
                words.add(ws);
            }
        }

        /** The count of every word in the first n lines. */
        Map<String, Long> counts(int n) {
            Map<String, Long> c = new TreeMap<>();
            for (List<String> ws : words.subList(0, n)) {
                for (String w : ws) {
                    c.merge(w, 1L, Long::sum);
                }
            }
            return c;
        }
    }

    static void run(Scenario s) throws Exception {
        String guarantee = s.arg(2, "");
        if (!guarantee.equals(StreamsConfig.AT_LEAST_ONCE) && !guarantee.equals(StreamsConfig.EXACTLY_ONCE_V2)) {
            throw new IllegalArgumentException("processing guarantee must be at_least_once or exactly_once_v2, not " + guarantee);
        }
        String protocol = s.arg(3, "classic");
        if (!protocol.equals("classic") && !protocol.equals("streams")) {
            throw new IllegalArgumentException("group protocol must be classic or streams, not " + protocol);
        }
        String tag = guarantee.replace('_', '-') + (protocol.equals("streams") ? "-sp" : "");
        String input = "wc-input-" + tag;
        String output = "wc-output-" + tag;
        String appId = "wordcount-" + tag + "-" + UUID.randomUUID().toString().substring(0, 8);
        Input in = new Input(5, LINES);
        int half = in.lines.size() / 2;
        Map<String, Long> firstCounts = in.counts(half);
        Map<String, Long> finalCounts = in.counts(in.lines.size());
        long total = finalCounts.values().stream().mapToLong(Long::longValue).sum();
        s.info("input: %d lines, %d words, %d distinct; application.id=%s, processing.guarantee=%s, group.protocol=%s",
                in.lines.size(), total, finalCounts.size(), appId, guarantee, protocol);

        Admin admin = s.admin();
        s.createTopics(admin, Map.of(input, PARTITIONS, output, PARTITIONS));

        // First half of the input before the application starts, second half while it runs.
        KafkaProducer<String, String> producer = s.closeLater(new KafkaProducer<>(producerProps(s), new StringSerializer(), new StringSerializer()));
        produce(producer, input, in.lines.subList(0, half));
        s.check(true, "produced %d lines to %s before starting Streams", half, input);

        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> lines = builder.stream(input);
        lines.flatMapValues(v -> Arrays.asList(v.toLowerCase(Locale.ROOT).split("\\W+")))
                .filter((k, w) -> !w.isEmpty())
                .groupBy((k, w) -> w, Grouped.with("words", Serdes.String(), Serdes.String()))
                .count(Materialized.as("counts"))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));

        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, s.bootstrap);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, guarantee);
        p.put(StreamsConfig.STATE_DIR_CONFIG, s.workDir.resolve("state").toString());
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "1000");
        p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, protocol);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");

        AtomicReference<Throwable> died = new AtomicReference<>();
        AtomicReference<KafkaStreams.State> state = new AtomicReference<>(KafkaStreams.State.CREATED);
        KafkaStreams streams = new KafkaStreams(builder.build(), p);
        streams.setStateListener((now, before) -> {
            state.set(now);
            s.info("  streams state %s -> %s", before, now);
        });
        streams.setUncaughtExceptionHandler(e -> {
            died.set(e);
            s.info("  streams thread died: %s", e);
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        s.closeLater(() -> {
            if (streams.state() != KafkaStreams.State.NOT_RUNNING) {
                streams.close(Duration.ofSeconds(30));
            }
        });
        streams.start();
        s.await(Duration.ofSeconds(120), "Streams application RUNNING", () -> {
            failIfDead(s, died, state);
            return state.get() == KafkaStreams.State.RUNNING;
        });
        s.check(true, "Streams application %s is RUNNING", appId);

        // The output, read_committed, until every word's latest count is exact.
        Map<String, Long> latest = new HashMap<>();
        long[] outputRecords = {0};
        KafkaConsumer<String, Long> consumer = s.closeLater(new KafkaConsumer<>(readCommitted(s), new StringDeserializer(), new LongDeserializer()));
        List<TopicPartition> outParts = new ArrayList<>();
        for (int i = 0; i < PARTITIONS; i++) {
            outParts.add(new TopicPartition(output, i));
        }
        consumer.assign(outParts);
        consumer.seekToBeginning(outParts);
        Runnable poll = () -> {
            for (ConsumerRecord<String, Long> r : consumer.poll(Duration.ofMillis(500))) {
                latest.put(r.key(), r.value());
                outputRecords[0]++;
            }
        };
        s.await(Duration.ofSeconds(180), "the count of every word in the first " + half + " lines on " + output, () -> {
            failIfDead(s, died, state);
            poll.run();
            return latest.equals(firstCounts);
        }, () -> String.format("%d output records, %d/%d words exact", outputRecords[0], exact(latest, firstCounts), firstCounts.size()));
        s.check(true, "read_committed output of %s: count of all %d words in the first %d lines exact (%d output records)",
                output, firstCounts.size(), half, outputRecords[0]);

        produce(producer, input, in.lines.subList(half, in.lines.size()));
        s.check(true, "produced the other %d lines to %s while Streams runs", in.lines.size() - half, input);
        s.await(Duration.ofSeconds(180), "every final count exact on " + output, () -> {
            failIfDead(s, died, state);
            poll.run();
            return latest.equals(finalCounts);
        }, () -> String.format("%d output records, %d/%d words exact; differences: %s", outputRecords[0],
                exact(latest, finalCounts), finalCounts.size(), diff(latest, finalCounts)));
        s.check(true, "read_committed output of %s: final count of all %d words exact (%d output records)",
                output, finalCounts.size(), outputRecords[0]);

        // No late update may change a count: give Streams a few more commits.
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(4);
        while (System.nanoTime() < until) {
            poll.run();
        }
        s.check(latest.equals(finalCounts), "counts still exact 4 s later (%d output records); differences: %s",
                outputRecords[0], diff(latest, finalCounts));

        // Streams (classic) or the broker (streams protocol) created the
        // internal topics, with the configs Streams asks for.
        Set<String> all = admin.listTopics(new ListTopicsOptions().listInternal(true)).names().get(60, TimeUnit.SECONDS);
        String repartition = appId + "-words-repartition";
        String changelog = appId + "-counts-changelog";
        Set<String> mine = all.stream().filter(t -> t.startsWith(appId)).collect(Collectors.toCollection(java.util.TreeSet::new));
        s.check(mine.contains(repartition) && mine.contains(changelog), "Streams created %s and %s (its topics: %s)", repartition, changelog, mine);
        int rp = s.describeTopic(admin, repartition).partitions().size();
        int cp = s.describeTopic(admin, changelog).partitions().size();
        s.check(rp == PARTITIONS && cp == PARTITIONS, "repartition and changelog topics have %d partitions (have %d, %d)", PARTITIONS, rp, cp);
        Config rc = s.topicConfig(admin, repartition);
        Config cc = s.topicConfig(admin, changelog);
        s.check("compact".equals(Scenario.value(cc, "cleanup.policy")), "changelog %s: cleanup.policy=%s", changelog, Scenario.value(cc, "cleanup.policy"));
        s.check("delete".equals(Scenario.value(rc, "cleanup.policy")) && "-1".equals(Scenario.value(rc, "retention.ms"))
                        && "CreateTime".equals(Scenario.value(rc, "message.timestamp.type")),
                "repartition %s: cleanup.policy=%s retention.ms=%s message.timestamp.type=%s", repartition,
                Scenario.value(rc, "cleanup.policy"), Scenario.value(rc, "retention.ms"), Scenario.value(rc, "message.timestamp.type"));

        boolean closed = streams.close(Duration.ofSeconds(60));
        s.check(closed && died.get() == null, "Streams closed cleanly within 60 s (state %s)", streams.state());
        streams.cleanUp();
    }

    static void failIfDead(Scenario s, AtomicReference<Throwable> died, AtomicReference<KafkaStreams.State> state) {
        Throwable t = died.get();
        if (t != null) {
            Throwable root = t;
            while (root.getCause() != null && root.getCause() != root) {
                root = root.getCause();
            }
            throw s.fail("Streams thread died: %s (root cause: %s)", t, root);
        }
        KafkaStreams.State st = state.get();
        if (st == KafkaStreams.State.ERROR || st == KafkaStreams.State.PENDING_ERROR) {
            throw s.fail("Streams application in state %s", st);
        }
    }

    static long exact(Map<String, Long> got, Map<String, Long> want) {
        return want.entrySet().stream().filter(e -> e.getValue().equals(got.get(e.getKey()))).count();
    }

    static String diff(Map<String, Long> got, Map<String, Long> want) {
        Map<String, String> d = new TreeMap<>();
        for (Map.Entry<String, Long> e : want.entrySet()) {
            if (!e.getValue().equals(got.get(e.getKey()))) {
                d.put(e.getKey(), "want " + e.getValue() + " got " + got.get(e.getKey()));
            }
        }
        for (String k : got.keySet()) {
            if (!want.containsKey(k)) {
                d.put(k, "unexpected, got " + got.get(k));
            }
        }
        return d.isEmpty() ? "none" : d.toString();
    }

    static Properties producerProps(Scenario s) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, s.bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "wordcount-input");
        return p;
    }

    static Properties readCommitted(Scenario s) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, s.bootstrap);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "wordcount-output-check");
        return p;
    }

    static void produce(KafkaProducer<String, String> producer, String topic, List<String> lines) throws Exception {
        List<java.util.concurrent.Future<?>> acks = new ArrayList<>();
        for (String l : lines) {
            acks.add(producer.send(new ProducerRecord<>(topic, null, l)));
        }
        producer.flush();
        for (java.util.concurrent.Future<?> f : acks) {
            f.get(60, TimeUnit.SECONDS);
        }
    }
}
