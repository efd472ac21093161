package io.regent.interop;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.flink.api.common.JobExecutionResult;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.serialization.SimpleStringSchema;
import org.apache.flink.api.common.state.CheckpointListener;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.JobManagerOptions;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.configuration.RestartStrategyOptions;
import org.apache.flink.configuration.TaskManagerOptions;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.core.execution.CheckpointingMode;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A Flink job (local MiniCluster) from a KafkaSource that starts at a
 * timestamp to a KafkaSink with DeliveryGuarantee.EXACTLY_ONCE, checkpointing,
 * and one injected task failure.
 *
 * <pre>FlinkExactlyOnce BOOTSTRAP WORKDIR [guarantee=exactly_once|at_least_once]</pre>
 *
 * The input topic holds records produced before a timestamp T and records
 * produced after it. The job reads from T (OffsetsInitializer.timestamp) to the
 * end offsets at its start (bounded), through a map that throws once, in its
 * first attempt, after some records and a completed checkpoint; the fixed-delay
 * restart strategy restarts it from that checkpoint. Checks: offsetsForTimes(T)
 * gives the first record after T in every partition; the job finishes after
 * exactly one injected failure; reading the output topic with read_committed
 * gives every input record after T exactly once and none before it.
 * (guarantee=at_least_once is for diagnosis only: then only "at least once"
 * is checked.)
 */
public final class FlinkExactlyOnce {
    static final int PARTITIONS = 3;
    static final int BEFORE = 300;
    static final int AFTER = 1200;
    static final int FAIL_AFTER = 200;

    /** Failures the map has injected; static, as the MiniCluster runs tasks in this JVM. */
    static final AtomicInteger INJECTED = new AtomicInteger();

    public static void main(String[] args) {
        Scenario.main("FlinkExactlyOnce", "[guarantee=exactly_once|at_least_once]", args, 2, FlinkExactlyOnce::run);
    }

    /** Passes records through, slowly, and fails once (first attempt of subtask 0) after FAIL_AFTER records and a checkpoint. */
    static final class FailOnce extends RichMapFunction<String, String> implements CheckpointListener {
        private transient int seen;
        private transient int checkpoints;
        private transient boolean armed;

        @Override
        public void open(OpenContext ctx) {
            armed = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask() == 0
                    && getRuntimeContext().getTaskInfo().getAttemptNumber() == 0;
        }

        @Override
        public String map(String value) throws Exception {
            Thread.sleep(4);
            if (armed && ++seen >= FAIL_AFTER && checkpoints >= 1) {
                armed = false;
                INJECTED.incrementAndGet();
                System.out.printf("  injected task failure in subtask 0 after %d records and %d completed checkpoints%n", seen, checkpoints);
                System.out.flush();
                throw new RuntimeException("injected failure (FlinkExactlyOnce)");
            }
            return value;
        }

        @Override
        public void notifyCheckpointComplete(long checkpointId) {
            checkpoints++;
        }
    }

    static void run(Scenario s) throws Exception {
        boolean exactlyOnce = !s.arg(2, "guarantee=exactly_once").endsWith("at_least_once");
        String run = UUID.randomUUID().toString().substring(0, 8);
        String input = "flink-in-" + run;
        String output = "flink-out-" + run;

        Admin admin = s.admin();
        s.createTopics(admin, Map.of(input, PARTITIONS, output, PARTITIONS));

        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, s.bootstrap);
        pp.put(ProducerConfig.ACKS_CONFIG, "all");
        KafkaProducer<String, String> producer = s.closeLater(new KafkaProducer<>(pp, new StringSerializer(), new StringSerializer()));
        Map<Integer, Integer> beforePerPartition = new HashMap<>();
        List<Future<?>> acks = new ArrayList<>();
        for (int i = 0; i < BEFORE; i++) {
            acks.add(producer.send(new ProducerRecord<>(input, i % PARTITIONS, "k" + i, "before-" + i)));
            beforePerPartition.merge(i % PARTITIONS, 1, Integer::sum);
        }
        producer.flush();
        for (Future<?> f : acks) {
            f.get(30, TimeUnit.SECONDS);
        }
        acks.clear();
        Thread.sleep(1500);
        long t = System.currentTimeMillis();
        Thread.sleep(100);
        Set<String> want = new HashSet<>();
        for (int i = 0; i < AFTER; i++) {
            acks.add(producer.send(new ProducerRecord<>(input, i % PARTITIONS, "k" + i, "after-" + i)));
            want.add("after-" + i);
        }
        producer.flush();
        for (Future<?> f : acks) {
            f.get(30, TimeUnit.SECONDS);
        }
        s.check(true, "produced %d records to %s before T=%d and %d after it", BEFORE, input, t, AFTER);

        // What OffsetsInitializer.timestamp(T) will ask the broker (ListOffsets by timestamp).
        Properties cp = consumerProps(s, "read_committed");
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp, new StringDeserializer(), new StringDeserializer())) {
            Map<TopicPartition, Long> q = new HashMap<>();
            for (int p = 0; p < PARTITIONS; p++) {
                q.put(new TopicPartition(input, p), t);
            }
            Map<TopicPartition, OffsetAndTimestamp> got = c.offsetsForTimes(q, Duration.ofSeconds(30));
            for (int p = 0; p < PARTITIONS; p++) {
                OffsetAndTimestamp o = got.get(new TopicPartition(input, p));
                long wantOffset = beforePerPartition.getOrDefault(p, 0);
                s.check(o != null && o.offset() == wantOffset && o.timestamp() >= t,
                        "offsetsForTimes(%s-%d, T) = %s (want offset %d, timestamp >= T)", input, p, o, wantOffset);
            }
        }

        Configuration conf = new Configuration();
        conf.set(RestartStrategyOptions.RESTART_STRATEGY, "fixed-delay");
        conf.set(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_ATTEMPTS, 3);
        conf.set(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_DELAY, Duration.ofSeconds(1));
        // Everything the MiniCluster listens on stays on the loopback interface.
        conf.set(RestOptions.BIND_ADDRESS, "127.0.0.1");
        conf.set(RestOptions.ADDRESS, "127.0.0.1");
        conf.set(RestOptions.BIND_PORT, "0");
        conf.set(JobManagerOptions.ADDRESS, "127.0.0.1");
        conf.set(JobManagerOptions.BIND_HOST, "127.0.0.1");
        conf.set(TaskManagerOptions.HOST, "127.0.0.1");
        conf.set(TaskManagerOptions.BIND_HOST, "127.0.0.1");
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(2);
        env.enableCheckpointing(500, exactlyOnce ? CheckpointingMode.EXACTLY_ONCE : CheckpointingMode.AT_LEAST_ONCE);

        KafkaSource<String> source = KafkaSource.<String>builder()
                .setBootstrapServers(s.bootstrap)
                .setTopics(input)
                .setGroupId("flink-" + run)
                .setStartingOffsets(OffsetsInitializer.timestamp(t))
                .setBounded(OffsetsInitializer.latest())
                .setValueOnlyDeserializer(new SimpleStringSchema())
                .build();
        KafkaSink<String> sink = KafkaSink.<String>builder()
                .setBootstrapServers(s.bootstrap)
                .setRecordSerializer(KafkaRecordSerializationSchema.builder()
                        .setTopic(output)
                        .setValueSerializationSchema(new SimpleStringSchema())
                        .build())
                .setDeliveryGuarantee(exactlyOnce ? DeliveryGuarantee.EXACTLY_ONCE : DeliveryGuarantee.AT_LEAST_ONCE)
                .setTransactionalIdPrefix("regent-flink-" + run)
                // Flink's documented setting for a broker with Kafka's default
                // transaction.max.timeout.ms (15 min): Flink's own default is 1 h.
                .setProperty("transaction.timeout.ms", "600000")
                .build();
        env.fromSource(source, WatermarkStrategy.noWatermarks(), "kafka-source")
                .map(new FailOnce()).name("fail-once")
                .sinkTo(sink).name("kafka-sink");

        s.info("running the Flink job (%s, checkpoint every 500 ms, fixed-delay restart)", exactlyOnce ? "EXACTLY_ONCE" : "AT_LEAST_ONCE");
        JobExecutionResult result = env.execute("regent-flink-" + run);
        s.check(true, "Flink job finished in %d ms", result.getNetRuntime());
        s.check(INJECTED.get() == 1, "the job recovered from %d injected task failure (want 1)", INJECTED.get());

        Map<String, Integer> committed = readAll(s, output, "read_committed");
        Map<String, Integer> uncommitted = readAll(s, output, "read_uncommitted");
        int uncommittedTotal = uncommitted.values().stream().mapToInt(Integer::intValue).sum();
        int committedTotal = committed.values().stream().mapToInt(Integer::intValue).sum();
        s.info("output %s: %d records read_committed, %d read_uncommitted (the difference is aborted work)", output, committedTotal, uncommittedTotal);

        List<String> missing = new ArrayList<>();
        List<String> repeated = new ArrayList<>();
        for (String w : want) {
            int c = committed.getOrDefault(w, 0);
            if (c == 0) {
                missing.add(w);
            } else if (c > 1) {
                repeated.add(w + " x" + c);
            }
        }
        List<String> unexpected = new ArrayList<>();
        for (String k : committed.keySet()) {
            if (!want.contains(k)) {
                unexpected.add(k);
            }
        }
        s.check(missing.isEmpty(), "every one of the %d records after T is in the read_committed output (missing %d%s)",
                AFTER, missing.size(), head(missing));
        s.check(unexpected.isEmpty(), "no record from before T (or anything else) in the output (unexpected %d%s)", unexpected.size(), head(unexpected));
        if (exactlyOnce) {
            s.check(repeated.isEmpty() && committedTotal == AFTER, "each record exactly once: %d records read_committed (repeated %d%s)",
                    committedTotal, repeated.size(), head(repeated));
        } else {
            s.info("at_least_once: %d repeated records", repeated.size());
        }
    }

    static String head(List<String> l) {
        return l.isEmpty() ? "" : ", e.g. " + l.subList(0, Math.min(3, l.size()));
    }

    static Properties consumerProps(Scenario s, String isolation) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, s.bootstrap);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        return p;
    }

    /** Every value in topic from the start to its end offsets (the last stable offsets for read_committed). */
    static Map<String, Integer> readAll(Scenario s, String topic, String isolation) throws Exception {
        Map<String, Integer> seen = new HashMap<>();
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(consumerProps(s, isolation), new StringDeserializer(), new StringDeserializer())) {
            List<TopicPartition> parts = new ArrayList<>();
            for (int p = 0; p < PARTITIONS; p++) {
                parts.add(new TopicPartition(topic, p));
            }
            c.assign(parts);
            c.seekToBeginning(parts);
            Map<TopicPartition, Long> end = c.endOffsets(parts, Duration.ofSeconds(30));
            s.await(Duration.ofSeconds(60), "read " + topic + " (" + isolation + ") to " + end, () -> {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    seen.merge(r.value(), 1, Integer::sum);
                }
                for (TopicPartition tp : parts) {
                    if (c.position(tp) < end.get(tp)) {
                        return false;
                    }
                }
                return true;
            });
        }
        return seen;
    }
}
