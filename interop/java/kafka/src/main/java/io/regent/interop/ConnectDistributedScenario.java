package io.regent.interop;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.TimeUnit;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.connect.cli.ConnectDistributed;
import org.apache.kafka.connect.runtime.Connect;
import org.apache.kafka.connect.runtime.distributed.DistributedHerder;

/**
 * A Kafka Connect distributed worker, in this JVM, moving a file through a
 * topic into another file with Kafka's FileStreamSource and FileStreamSink
 * connectors, across a worker restart.
 *
 * <pre>ConnectDistributedScenario BOOTSTRAP WORKDIR [eos=enabled|disabled]</pre>
 *
 * exactly.once.source.support is enabled unless the third argument says
 * eos=disabled (for diagnosis only: the suite runs it enabled).
 *
 * Checks: the worker creates its config, offset and status topics compacted
 * with 1, 25 and 5 partitions; both connectors and their tasks run; the sink
 * file holds every source line exactly once, in order; the source's position
 * is committed in the offset topic; after the worker stops, more lines are
 * appended and the worker starts again, its connectors come back from the
 * config topic and the sink file ends with every line exactly once: nothing
 * lost, nothing committed written again.
 */
public final class ConnectDistributedScenario {
    static final String CONFIG_TOPIC = "connect-configs";
    static final String OFFSET_TOPIC = "connect-offsets";
    static final String STATUS_TOPIC = "connect-status";
    static final String DATA_TOPIC = "connect-lines";
    static final String SOURCE = "file-source";
    static final String SINK = "file-sink";
    static final int FIRST = 500;
    static final int SECOND = 300;

    static final ObjectMapper JSON = new ObjectMapper();
    static final HttpClient HTTP = HttpClient.newBuilder()
            .proxy(HttpClient.Builder.NO_PROXY)
            .connectTimeout(Duration.ofSeconds(10))
            .build();

    public static void main(String[] args) {
        Scenario.main("ConnectDistributed", "[eos=enabled|disabled]", args, 2, ConnectDistributedScenario::run);
    }

    static void run(Scenario s) throws Exception {
        String eos = s.arg(2, "eos=enabled").replace("eos=", "");
        Path source = s.workDir.resolve("source.txt");
        Path sink = s.workDir.resolve("sink.txt");
        Files.deleteIfExists(source);
        Files.deleteIfExists(sink);
        List<String> lines = new ArrayList<>();
        for (int i = 1; i <= FIRST + SECOND; i++) {
            lines.add(String.format("line-%05d %s", i, UUID.nameUUIDFromBytes(("line" + i).getBytes(StandardCharsets.UTF_8))));
        }
        Scenario.appendLines(source, lines.subList(0, FIRST));
        s.info("source file %s: %d lines; exactly.once.source.support=%s", source, FIRST, eos);

        Admin admin = s.admin();
        s.createTopics(admin, Map.of(DATA_TOPIC, 1));

        int port = Scenario.freePort();
        Map<String, String> worker = new HashMap<>();
        worker.put("bootstrap.servers", s.bootstrap);
        worker.put("group.id", "regent-connect-" + UUID.randomUUID().toString().substring(0, 8));
        worker.put("key.converter", "org.apache.kafka.connect.json.JsonConverter");
        worker.put("value.converter", "org.apache.kafka.connect.json.JsonConverter");
        worker.put("key.converter.schemas.enable", "true");
        worker.put("value.converter.schemas.enable", "true");
        worker.put("config.storage.topic", CONFIG_TOPIC);
        worker.put("offset.storage.topic", OFFSET_TOPIC);
        worker.put("status.storage.topic", STATUS_TOPIC);
        worker.put("config.storage.replication.factor", "1");
        worker.put("offset.storage.replication.factor", "1");
        worker.put("status.storage.replication.factor", "1");
        worker.put("offset.storage.partitions", "25");
        worker.put("status.storage.partitions", "5");
        worker.put("offset.flush.interval.ms", "1000");
        worker.put("listeners", "http://127.0.0.1:" + port);
        worker.put("rest.advertised.host.name", "127.0.0.1");
        worker.put("rest.advertised.port", String.valueOf(port));
        worker.put("plugin.discovery", "service_load");
        worker.put("exactly.once.source.support", eos);
        String rest = "http://127.0.0.1:" + port;

        // --- first run of the worker --------------------------------------
        // The worker creates its three topics before it joins its group.
        Connect<DistributedHerder> connect = startWorker(s, worker, rest, admin);
        awaitHealthy(s, connect, rest);

        Map<String, String> src = new LinkedHashMap<>();
        src.put("connector.class", "org.apache.kafka.connect.file.FileStreamSourceConnector");
        src.put("tasks.max", "1");
        src.put("file", source.toString());
        src.put("topic", DATA_TOPIC);
        if (eos.equals("enabled")) {
            src.put("exactly.once.support", "required");
        }
        Map<String, String> snk = new LinkedHashMap<>();
        snk.put("connector.class", "org.apache.kafka.connect.file.FileStreamSinkConnector");
        snk.put("tasks.max", "1");
        snk.put("file", sink.toString());
        snk.put("topics", DATA_TOPIC);
        put(s, rest + "/connectors/" + SOURCE + "/config", src);
        put(s, rest + "/connectors/" + SINK + "/config", snk);
        s.check(true, "created connectors %s (FileStreamSource) and %s (FileStreamSink) through the REST API", SOURCE, SINK);
        awaitRunning(s, rest, SOURCE);
        awaitRunning(s, rest, SINK);

        awaitSinkLines(s, sink, FIRST, rest);
        checkExactlyOnce(s, sink, lines.subList(0, FIRST), "first run");
        awaitSinkCommitted(s, admin, "connect-" + SINK, eos.equals("enabled"));
        checkSourcePosition(s, source, FIRST, eos);

        s.info("stopping the worker");
        connect.stop();
        connect.awaitStop();
        s.check(true, "worker stopped");

        // --- more input while the worker is down, then a second run -------
        Scenario.appendLines(source, lines.subList(FIRST, FIRST + SECOND));
        s.info("appended %d lines to %s while the worker is down", SECOND, source);
        long sinkBefore = Files.readAllLines(sink).size();
        s.check(sinkBefore == FIRST, "sink file unchanged while the worker is down (%d lines)", sinkBefore);

        connect = startWorker(s, worker, rest, null);
        awaitHealthy(s, connect, rest);
        JsonNode names = get(s, rest + "/connectors");
        s.check(names.toString().contains(SOURCE) && names.toString().contains(SINK),
                "after the restart the worker knows both connectors from %s: %s", CONFIG_TOPIC, names);
        awaitRunning(s, rest, SOURCE);
        awaitRunning(s, rest, SINK);
        awaitSinkLines(s, sink, FIRST + SECOND, rest);
        // A late duplicate would show up after the count is reached: wait for commits.
        Thread.sleep(3000);
        checkExactlyOnce(s, sink, lines, "after the restart");
        awaitSinkCommitted(s, admin, "connect-" + SINK, eos.equals("enabled"));
        checkSourcePosition(s, source, FIRST + SECOND, eos);

        connect.stop();
        connect.awaitStop();
        s.check(true, "worker stopped");
    }

    /** Starts a worker; with admin, checks the internal topics it creates (before it is healthy). */
    static Connect<DistributedHerder> startWorker(Scenario s, Map<String, String> props, String rest, Admin admin) throws Exception {
        s.info("starting a distributed worker, REST on %s", rest);
        Connect<DistributedHerder> c = new ConnectDistributed().startConnect(props);
        if (admin == null) {
            return c;
        }
        int[] want = {1, 25, 5};
        String[] topics = {CONFIG_TOPIC, OFFSET_TOPIC, STATUS_TOPIC};
        s.await(Duration.ofSeconds(60), "worker created " + String.join(", ", topics),
                () -> admin.listTopics().names().get(30, TimeUnit.SECONDS).containsAll(List.of(topics)));
        for (int i = 0; i < topics.length; i++) {
            int parts = s.describeTopic(admin, topics[i]).partitions().size();
            Config cfg = s.topicConfig(admin, topics[i]);
            String policy = Scenario.value(cfg, "cleanup.policy");
            s.check(parts == want[i] && "compact".equals(policy), "worker created %s with %d partitions, cleanup.policy=%s (want %d, compact)",
                    topics[i], parts, policy, want[i]);
        }
        return c;
    }

    /** /health answers 200 once the herder has joined its group and read the config topic. */
    static void awaitHealthy(Scenario s, Connect<DistributedHerder> c, String rest) throws Exception {
        String[] last = {"no answer"};
        s.await(Duration.ofSeconds(90), "worker healthy (GET /health)", () -> {
            if (c.herderTask().isDone()) {
                throw s.fail("the worker's herder stopped during startup (see client.log for its error)");
            }
            try {
                HttpResponse<String> r = HTTP.send(HttpRequest.newBuilder(URI.create(rest + "/health")).timeout(Duration.ofSeconds(10)).GET().build(),
                        HttpResponse.BodyHandlers.ofString());
                last[0] = "HTTP " + r.statusCode() + " " + r.body();
                return r.statusCode() == 200;
            } catch (java.io.IOException e) {
                last[0] = e.toString();
                return false;
            }
        }, () -> "GET /health: " + last[0]);
        s.check(true, "worker is up and healthy");
    }

    static void awaitRunning(Scenario s, String rest, String name) throws Exception {
        String[] last = {""};
        s.await(Duration.ofSeconds(90), name + " and its task RUNNING", () -> {
            JsonNode st;
            try {
                st = get(s, rest + "/connectors/" + name + "/status");
            } catch (Scenario.CheckFailed e) {
                return false;
            }
            last[0] = st.toString();
            JsonNode tasks = st.path("tasks");
            for (JsonNode t : tasks) {
                if ("FAILED".equals(t.path("state").asText())) {
                    throw s.fail("%s task failed: %s", name, t.path("trace").asText());
                }
            }
            if ("FAILED".equals(st.path("connector").path("state").asText())) {
                throw s.fail("%s failed: %s", name, st.path("connector").path("trace").asText());
            }
            return "RUNNING".equals(st.path("connector").path("state").asText()) && tasks.size() == 1
                    && "RUNNING".equals(tasks.get(0).path("state").asText());
        }, () -> last[0]);
        s.check(true, "%s and its task are RUNNING", name);
    }

    static void awaitSinkLines(Scenario s, Path sink, int n, String rest) throws Exception {
        s.await(Duration.ofSeconds(120), n + " lines in the sink file", () -> Files.exists(sink) && Files.readAllLines(sink).size() >= n,
                () -> {
                    try {
                        return (Files.exists(sink) ? Files.readAllLines(sink).size() : 0) + " lines; source status "
                                + get(s, rest + "/connectors/" + SOURCE + "/status") + "; sink status " + get(s, rest + "/connectors/" + SINK + "/status");
                    } catch (Exception e) {
                        return e.toString();
                    }
                });
    }

    static void checkExactlyOnce(Scenario s, Path sink, List<String> want, String when) throws Exception {
        List<String> got = Files.readAllLines(sink);
        Map<String, Integer> seen = new HashMap<>();
        for (String l : got) {
            seen.merge(l, 1, Integer::sum);
        }
        List<String> missing = new ArrayList<>();
        List<String> repeated = new ArrayList<>();
        for (String l : want) {
            int c = seen.getOrDefault(l, 0);
            if (c == 0) {
                missing.add(l);
            } else if (c > 1) {
                repeated.add(l + " x" + c);
            }
        }
        long unexpected = got.stream().filter(l -> !want.contains(l)).count();
        s.check(missing.isEmpty() && repeated.isEmpty() && unexpected == 0 && got.size() == want.size(),
                "%s: sink file has %d lines, every one of the %d source lines exactly once (missing %d%s, repeated %d%s, unexpected %d)",
                when, got.size(), want.size(), missing.size(), head(missing), repeated.size(), head(repeated), unexpected);
        s.check(got.equals(want), "%s: sink lines are in source order", when);
    }

    static String head(List<String> l) {
        return l.isEmpty() ? "" : " e.g. " + l.subList(0, Math.min(3, l.size()));
    }

    /**
     * The sink's consumer group has committed the offset after the last record
     * in the data topic. With exactly-once source support the topic ends in a
     * transaction marker, so that is one less than the end offset.
     */
    static void awaitSinkCommitted(Scenario s, Admin admin, String group, boolean eos) throws Exception {
        TopicPartition tp = new TopicPartition(DATA_TOPIC, 0);
        long end = admin.listOffsets(Map.of(tp, OffsetSpec.latest())).partitionResult(tp).get(60, TimeUnit.SECONDS).offset();
        long next = -1;
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, s.bootstrap);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer())) {
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (c.position(tp) < end && System.nanoTime() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    next = r.offset() + 1;
                }
            }
        }
        long want = next;
        long[] committed = {-1};
        s.await(Duration.ofSeconds(60), "group " + group + " committed offset " + want, () -> {
            Map<TopicPartition, OffsetAndMetadata> m = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get(60, TimeUnit.SECONDS);
            OffsetAndMetadata o = m.get(tp);
            committed[0] = o == null ? -1 : o.offset();
            return committed[0] == want;
        }, () -> "committed " + committed[0]);
        s.check(true, "sink group %s committed offset %d, after the last record of %s (end offset %d)", group, want, tp, end);
        if (eos) {
            s.check(end > want, "the source wrote %s in transactions: a commit marker follows its last record (end offset %d > %d)", tp, end, want);
        }
    }

    /** The FileStreamSource's last position in the offset topic is the file's length. */
    static void checkSourcePosition(Scenario s, Path source, int lines, String eos) throws Exception {
        long size = Files.size(source);
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, s.bootstrap);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        long[] position = {-1};
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer())) {
            List<TopicPartition> parts = new ArrayList<>();
            c.partitionsFor(OFFSET_TOPIC, Duration.ofSeconds(30)).forEach(pi -> parts.add(new TopicPartition(OFFSET_TOPIC, pi.partition())));
            s.await(Duration.ofSeconds(60), "source position " + size + " in " + OFFSET_TOPIC, () -> {
                c.assign(parts);
                c.seekToBeginning(parts);
                Map<TopicPartition, Long> end = c.endOffsets(parts);
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
                while (parts.stream().anyMatch(tp -> c.position(tp) < end.get(tp)) && System.nanoTime() < deadline) {
                    for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                        if (r.key() != null && r.key().contains(SOURCE) && r.value() != null) {
                            position[0] = JSON.readTree(r.value()).path("position").asLong(-1);
                        }
                    }
                }
                return position[0] == size;
            }, () -> "position " + position[0]);
        }
        s.check(true, "%s's committed position in %s is %d, the length of the %d-line source file", SOURCE, OFFSET_TOPIC, size, lines);
    }

    static void put(Scenario s, String url, Map<String, String> body) throws Exception {
        HttpResponse<String> r = HTTP.send(HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(90))
                .header("Content-Type", "application/json")
                .PUT(HttpRequest.BodyPublishers.ofString(JSON.writeValueAsString(body))).build(), HttpResponse.BodyHandlers.ofString());
        if (r.statusCode() / 100 != 2) {
            throw s.fail("PUT %s: HTTP %d %s", url, r.statusCode(), r.body());
        }
    }

    static JsonNode get(Scenario s, String url) throws Exception {
        HttpResponse<String> r = HTTP.send(HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(90)).GET().build(),
                HttpResponse.BodyHandlers.ofString());
        if (r.statusCode() / 100 != 2) {
            throw new Scenario.CheckFailed("GET " + url + ": HTTP " + r.statusCode() + " " + r.body());
        }
        return JSON.readTree(r.body());
    }
}
