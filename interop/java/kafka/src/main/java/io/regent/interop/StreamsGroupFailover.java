package io.regent.interop;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.StreamsGroupDescription;
import org.apache.kafka.clients.admin.StreamsGroupMemberAssignment;
import org.apache.kafka.clients.admin.StreamsGroupMemberDescription;
import org.apache.kafka.clients.admin.StreamsGroupSubtopologyDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * Two instances of one Kafka Streams word count application in a KIP-1071
 * streams group (group.protocol=streams), with one instance leaving and
 * coming back: the broker's task assignment is checked through the Admin
 * client at each step, and the output through read_committed.
 *
 * <pre>StreamsGroupFailover BOOTSTRAP WORKDIR at_least_once|exactly_once_v2</pre>
 *
 * Checks: with a first third of the input produced, instances A and B (own
 * state directories, so own process ids) both reach RUNNING; the group is
 * listed as a streams group and described as Stable with 2 members whose
 * active tasks split the 12 tasks (2 subtopologies x 6 partitions) with none
 * twice and each member at least one; the first third's counts are exact.
 * A closes (leaving the group): the group becomes Stable with B's member
 * alone, holding all 12 tasks; the second third's counts are exact. A
 * starts again from its state directory (same process id): the group is
 * Stable with 2 members and a split again; the final counts are exact and
 * stay so for 4 s. Both close cleanly, the group ends Empty, and no stream
 * thread died.
 */
public final class StreamsGroupFailover {
    static final int PARTITIONS = 6;
    static final int LINES = 600;
    static final Duration SETTLE = Duration.ofSeconds(90);

    public static void main(String[] args) {
        Scenario.main("StreamsGroupFailover", "at_least_once|exactly_once_v2", args, 3, StreamsGroupFailover::run);
    }

    /** One application instance (a KafkaStreams object, recreated on restart) and what its listeners saw. */
    static final class Instance {
        final String name;
        final String clientId;
        final Path stateDir;
        final Scenario s;
        final AtomicReference<Throwable> died = new AtomicReference<>();
        final AtomicReference<KafkaStreams.State> state = new AtomicReference<>(KafkaStreams.State.CREATED);
        KafkaStreams streams;

        Instance(Scenario s, String name, String appId) {
            this.s = s;
            this.name = name;
            this.clientId = appId + "-" + name;
            this.stateDir = s.workDir.resolve("state-" + name);
        }

        void start(Topology topology, Properties base) {
            Properties p = new Properties();
            p.putAll(base);
            p.put(StreamsConfig.CLIENT_ID_CONFIG, clientId);
            p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
            state.set(KafkaStreams.State.CREATED);
            KafkaStreams ks = new KafkaStreams(topology, p);
            ks.setStateListener((now, before) -> {
                state.set(now);
                s.info("  instance %s: streams state %s -> %s", name, before, now);
            });
            ks.setUncaughtExceptionHandler(e -> {
                died.compareAndSet(null, e);
                s.info("  instance %s: stream thread died: %s", name, e);
                return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
            });
            streams = ks;
            s.closeLater(() -> {
                if (ks.state() != KafkaStreams.State.NOT_RUNNING) {
                    ks.close(Duration.ofSeconds(30));
                }
            });
            ks.start();
        }

        /** Closes, leaving the group; true when every thread stopped within the timeout. */
        boolean close() {
            return streams.close(CloseOptions.timeout(Duration.ofSeconds(60))
                    .withGroupMembershipOperation(CloseOptions.GroupMembershipOperation.LEAVE_GROUP));
        }

        void failIfDead() {
            StreamsWordCount.failIfDead(s, died, state);
        }

        boolean running() {
            return state.get() == KafkaStreams.State.RUNNING;
        }

        /** Whether a group member (a stream thread's consumer) belongs to this instance. */
        boolean owns(StreamsGroupMemberDescription m) {
            return m.clientId().startsWith(clientId + "-StreamThread-");
        }
    }

    static void run(Scenario s) throws Exception {
        String guarantee = s.arg(2, "");
        if (!guarantee.equals(StreamsConfig.AT_LEAST_ONCE) && !guarantee.equals(StreamsConfig.EXACTLY_ONCE_V2)) {
            throw new IllegalArgumentException("processing guarantee must be at_least_once or exactly_once_v2, not " + guarantee);
        }
        String tag = guarantee.replace('_', '-');
        String runId = UUID.randomUUID().toString().substring(0, 8);
        String input = "failover-input-" + tag + "-" + runId;
        String output = "failover-output-" + tag + "-" + runId;
        String appId = "failover-" + tag + "-" + runId;
        StreamsWordCount.Input in = new StreamsWordCount.Input(11, LINES);
        int third = LINES / 3;
        Map<String, Long> firstCounts = in.counts(third);
        Map<String, Long> secondCounts = in.counts(2 * third);
        Map<String, Long> finalCounts = in.counts(LINES);
        s.info("input: %d lines, %d distinct words; application.id=%s, processing.guarantee=%s, group.protocol=streams",
                LINES, finalCounts.size(), appId, guarantee);

        Admin admin = s.admin();
        s.createTopics(admin, Map.of(input, PARTITIONS, output, PARTITIONS));
        KafkaProducer<String, String> producer = s.closeLater(
                new KafkaProducer<>(StreamsWordCount.producerProps(s), new StringSerializer(), new StringSerializer()));
        StreamsWordCount.produce(producer, input, in.lines.subList(0, third));
        s.check(true, "produced lines 0-%d to %s before starting Streams", third - 1, input);

        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> lines = builder.stream(input);
        lines.flatMapValues(v -> Arrays.asList(v.toLowerCase(Locale.ROOT).split("\\W+")))
                .filter((k, w) -> !w.isEmpty())
                .groupBy((k, w) -> w, Grouped.with("words", Serdes.String(), Serdes.String()))
                .count(Materialized.as("counts"))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));
        Topology topology = builder.build();

        Properties base = new Properties();
        base.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        base.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, s.bootstrap);
        base.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, guarantee);
        base.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        base.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        base.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "1000");
        base.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        base.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");

        // One standby replica per stateful task (the group config the
        // broker's assignor reads): with two processes, every counting task
        // has a standby on the process that does not run it.
        admin.incrementalAlterConfigs(Map.of(new ConfigResource(ConfigResource.Type.GROUP, appId),
                List.of(new AlterConfigOp(new ConfigEntry("streams.num.standby.replicas", "1"), AlterConfigOp.OpType.SET))))
                .all().get(60, TimeUnit.SECONDS);
        s.check(true, "group config streams.num.standby.replicas=1 set on %s", appId);

        Instance a = new Instance(s, "a", appId);
        Instance b = new Instance(s, "b", appId);
        List<Instance> both = List.of(a, b);

        // 1. Two instances.
        long t0 = System.nanoTime();
        a.start(topology, base);
        b.start(topology, base);
        s.await(Duration.ofSeconds(120), "instances A and B both RUNNING", () -> {
            a.failIfDead();
            b.failIfDead();
            return a.running() && b.running();
        }, () -> String.format("A %s, B %s", a.state.get(), b.state.get()));
        s.check(true, "instances A and B (state dirs %s, %s) both RUNNING after %.1f s",
                a.stateDir.getFileName(), b.stateDir.getFileName(), secs(t0));

        // 2. The broker's view of the group.
        StreamsGroupDescription d = awaitSettled(s, admin, appId, 2, both, "two members");
        Set<String> allTasks = checkTopology(s, d, input, appId);
        String processA = checkSplit(s, d, allTasks, a, b);
        Collection<GroupListing> listed = admin.listGroups(ListGroupsOptions.forStreamsGroups()).all().get(60, TimeUnit.SECONDS);
        GroupListing mine = listed.stream().filter(g -> g.groupId().equals(appId)).findFirst().orElse(null);
        s.check(mine != null && mine.type().equals(java.util.Optional.of(GroupType.STREAMS)),
                "ListGroups filtered to type streams lists %s as a streams group (%s)", appId, mine);
        s.check(mine.groupState().equals(java.util.Optional.of(GroupState.STABLE)),
                "ListGroups gives %s the state Stable (%s)", appId, mine.groupState());
        Collection<GroupListing> consumerGroups = admin.listGroups(ListGroupsOptions.forConsumerGroups()).all().get(60, TimeUnit.SECONDS);
        s.check(consumerGroups.stream().noneMatch(g -> g.groupId().equals(appId)),
                "ListGroups filtered to classic and consumer groups does not list %s", appId);

        // 3. The output until the first third's counts are exact.
        Output out = new Output(s, output);
        out.awaitCounts(both, firstCounts, "the first " + third + " lines");

        // 4. A leaves; B takes every task.
        t0 = System.nanoTime();
        boolean closed = a.close();
        s.check(closed && a.died.get() == null, "instance A closed (leaving the group) within 60 s in %.1f s (state %s)",
                secs(t0), a.streams.state());
        d = awaitSettled(s, admin, appId, 1, List.of(b), "B's member alone");
        StreamsGroupMemberDescription only = d.members().iterator().next();
        s.check(b.owns(only), "the one member left is B's (client id %s)", only.clientId());
        Set<String> bTasks = new TreeSet<>(tasks(only.assignment().activeTasks()));
        List<String> bList = tasks(only.assignment().activeTasks());
        s.check(bTasks.equals(allTasks) && bList.size() == allTasks.size(),
                "B's member holds all %d active tasks %.1f s after A closed (holds %s)", allTasks.size(), secs(t0), bList);
        s.check(only.assignment().standbyTasks().isEmpty(),
                "with one process left, no standby tasks (B has %s)", tasks(only.assignment().standbyTasks()));
        s.await(Duration.ofSeconds(60), "instance B RUNNING", () -> {
            b.failIfDead();
            return b.running();
        });
        StreamsWordCount.produce(producer, input, in.lines.subList(third, 2 * third));
        s.check(true, "produced lines %d-%d to %s with B alone", third, 2 * third - 1, input);
        out.awaitCounts(List.of(b), secondCounts, "the first " + 2 * third + " lines");

        // 5. A comes back from its state directory.
        t0 = System.nanoTime();
        a.start(topology, base);
        s.await(Duration.ofSeconds(120), "instances A (restarted) and B both RUNNING", () -> {
            a.failIfDead();
            b.failIfDead();
            return a.running() && b.running();
        }, () -> String.format("A %s, B %s", a.state.get(), b.state.get()));
        s.check(true, "restarted instance A and B both RUNNING after %.1f s", secs(t0));
        d = awaitSettled(s, admin, appId, 2, both, "two members again");
        String processA2 = checkSplit(s, d, allTasks, a, b);
        s.check(processA.equals(processA2), "restarted A joined with the process id it had (%s; before %s)", processA2, processA);
        s.check(true, "tasks split again %.1f s after A restarted", secs(t0));
        StreamsWordCount.produce(producer, input, in.lines.subList(2 * third, LINES));
        s.check(true, "produced lines %d-%d to %s with A and B", 2 * third, LINES - 1, input);
        out.awaitCounts(both, finalCounts, "all " + LINES + " lines");
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(4);
        while (System.nanoTime() < until) {
            out.poll();
        }
        s.check(out.latest.equals(finalCounts), "counts still exact 4 s later (%d output records); differences: %s",
                out.records, StreamsWordCount.diff(out.latest, finalCounts));

        // 6. Both close.
        t0 = System.nanoTime();
        boolean closedA = a.close();
        boolean closedB = b.close();
        s.check(closedA && closedB, "A and B closed within 60 s each (%.1f s; states %s, %s)", secs(t0), a.streams.state(), b.streams.state());
        s.check(a.died.get() == null && b.died.get() == null, "no stream thread died (A: %s, B: %s)", a.died.get(), b.died.get());
        StreamsGroupDescription[] last = {null};
        s.await(Duration.ofSeconds(30), "group " + appId + " Empty", () -> {
            last[0] = describe(admin, appId);
            return last[0] != null && last[0].groupState() == GroupState.EMPTY && last[0].members().isEmpty();
        }, () -> summary(last[0]));
        s.check(true, "the group is Empty with no members once both left");
    }

    /** The read_committed output: every word's latest count. */
    static final class Output {
        final Scenario s;
        final String topic;
        final KafkaConsumer<String, Long> consumer;
        final Map<String, Long> latest = new HashMap<>();
        long records;

        Output(Scenario s, String topic) {
            this.s = s;
            this.topic = topic;
            consumer = s.closeLater(new KafkaConsumer<>(StreamsWordCount.readCommitted(s), new StringDeserializer(), new LongDeserializer()));
            List<TopicPartition> parts = new ArrayList<>();
            for (int i = 0; i < PARTITIONS; i++) {
                parts.add(new TopicPartition(topic, i));
            }
            consumer.assign(parts);
            consumer.seekToBeginning(parts);
        }

        void poll() {
            for (ConsumerRecord<String, Long> r : consumer.poll(Duration.ofMillis(500))) {
                latest.put(r.key(), r.value());
                records++;
            }
        }

        void awaitCounts(List<Instance> live, Map<String, Long> want, String what) throws Exception {
            long t0 = System.nanoTime();
            s.await(Duration.ofSeconds(180), "the count of every word in " + what + " on " + topic, () -> {
                for (Instance i : live) {
                    i.failIfDead();
                }
                poll();
                return latest.equals(want);
            }, () -> String.format("%d output records, %d/%d words exact; differences: %s", records,
                    StreamsWordCount.exact(latest, want), want.size(), StreamsWordCount.diff(latest, want)));
            s.check(true, "read_committed output: count of all %d words in %s exact after %.1f s (%d output records)",
                    want.size(), what, secs(t0), records);
        }
    }

    /** The group's description, or null when the broker does not describe it (yet). */
    static StreamsGroupDescription describe(Admin admin, String appId) throws Exception {
        try {
            return admin.describeStreamsGroups(List.of(appId)).all().get(30, TimeUnit.SECONDS).get(appId);
        } catch (ExecutionException e) {
            return null;
        }
    }

    /**
     * Waits until the broker describes the group as Stable with n members,
     * each at the target assignment epoch with its assignment equal to its
     * target (the broker has finished moving tasks).
     */
    static StreamsGroupDescription awaitSettled(Scenario s, Admin admin, String appId, int n, List<Instance> live, String what) throws Exception {
        long t0 = System.nanoTime();
        StreamsGroupDescription[] last = {null};
        String[] err = {null};
        s.await(SETTLE, "group " + appId + " Stable with " + what, () -> {
            for (Instance i : live) {
                i.failIfDead();
            }
            try {
                last[0] = admin.describeStreamsGroups(List.of(appId)).all().get(30, TimeUnit.SECONDS).get(appId);
                err[0] = null;
            } catch (ExecutionException e) {
                err[0] = String.valueOf(e.getCause());
                return false;
            }
            StreamsGroupDescription d = last[0];
            if (d.groupState() != GroupState.STABLE || d.members().size() != n) {
                return false;
            }
            for (StreamsGroupMemberDescription m : d.members()) {
                if (m.memberEpoch() != d.targetAssignmentEpoch()
                        || !new TreeSet<>(tasks(m.assignment().activeTasks())).equals(new TreeSet<>(tasks(m.targetAssignment().activeTasks())))
                        || !new TreeSet<>(tasks(m.assignment().standbyTasks())).equals(new TreeSet<>(tasks(m.targetAssignment().standbyTasks())))) {
                    return false;
                }
            }
            return true;
        }, () -> err[0] != null ? "describe failed: " + err[0] : summary(last[0]));
        s.info("  %s", summary(last[0]));
        s.check(true, "DescribeStreamsGroups: %s is Stable with %s (%d members, group epoch %d, target assignment epoch %d) after %.1f s",
                appId, what, n, last[0].groupEpoch(), last[0].targetAssignmentEpoch(), secs(t0));
        return last[0];
    }

    /** Checks the described topology and returns its tasks (subtopology_partition). */
    static Set<String> checkTopology(Scenario s, StreamsGroupDescription d, String input, String appId) {
        Map<String, StreamsGroupSubtopologyDescription> subs = new TreeMap<>();
        for (StreamsGroupSubtopologyDescription st : d.subtopologies()) {
            subs.put(st.subtopologyId(), st);
        }
        s.check(subs.keySet().equals(Set.of("0", "1")), "the group's topology has subtopologies 0 and 1 (has %s)", subs.keySet());
        String repartition = appId + "-words-repartition";
        StreamsGroupSubtopologyDescription s0 = subs.get("0");
        StreamsGroupSubtopologyDescription s1 = subs.get("1");
        s.check(s0.sourceTopics().equals(List.of(input)) && s0.repartitionSinkTopics().equals(List.of(repartition)),
                "subtopology 0 reads %s and writes %s (reads %s, writes %s)", input, repartition, s0.sourceTopics(), s0.repartitionSinkTopics());
        // Streams declares a repartition topic a subtopology reads among its
        // repartition source topics, not its source topics, and leaves its
        // partition count to the broker (the describe echoes the declaration).
        s.check(s1.sourceTopics().isEmpty() && s1.repartitionSourceTopics().keySet().equals(Set.of(repartition))
                        && s1.stateChangelogTopics().keySet().equals(Set.of(appId + "-counts-changelog")),
                "subtopology 1 reads the repartition topic %s and has the changelog %s-counts-changelog "
                        + "(source topics %s, repartition source topics %s, changelogs %s)",
                repartition, appId, s1.sourceTopics(), s1.repartitionSourceTopics(), s1.stateChangelogTopics());
        Set<String> all = new TreeSet<>();
        for (String id : subs.keySet()) {
            for (int p = 0; p < PARTITIONS; p++) {
                all.add(id + "_" + p);
            }
        }
        return all;
    }

    /**
     * Checks that the two members are A's and B's, with distinct process
     * ids, and that their active tasks split allTasks; returns A's process id.
     */
    static String checkSplit(Scenario s, StreamsGroupDescription d, Set<String> allTasks, Instance a, Instance b) {
        StreamsGroupMemberDescription ma = null;
        StreamsGroupMemberDescription mb = null;
        for (StreamsGroupMemberDescription m : d.members()) {
            if (a.owns(m)) {
                ma = m;
            } else if (b.owns(m)) {
                mb = m;
            }
        }
        StreamsGroupMemberDescription fa = ma;
        StreamsGroupMemberDescription fb = mb;
        s.check(fa != null && fb != null, "one member is A's and one is B's (client ids %s)",
                d.members().stream().map(StreamsGroupMemberDescription::clientId).collect(Collectors.toList()));
        s.check(!fa.processId().equals(fb.processId()), "A and B have distinct process ids (%s, %s)", fa.processId(), fb.processId());
        List<String> ta = tasks(fa.assignment().activeTasks());
        List<String> tb = tasks(fb.assignment().activeTasks());
        s.check(!ta.isEmpty() && !tb.isEmpty(), "each member has active tasks (A %s, B %s)", ta, tb);
        List<String> every = new ArrayList<>(ta);
        every.addAll(tb);
        Set<String> twice = every.stream().filter(t -> every.indexOf(t) != every.lastIndexOf(t)).collect(Collectors.toCollection(TreeSet::new));
        s.check(twice.isEmpty(), "no active task assigned twice (twice: %s)", twice);
        s.check(new TreeSet<>(every).equals(allTasks), "the active tasks of A (%d) and B (%d) cover all %d tasks (missing %s, unknown %s)",
                ta.size(), tb.size(), allTasks.size(), minus(allTasks, every), minus(new TreeSet<>(every), allTasks));
        // Standbys: each counting task (subtopology 1, stateful) on the
        // other process than its active; none for the stateless 0.
        List<String> sa = tasks(fa.assignment().standbyTasks());
        List<String> sb = tasks(fb.assignment().standbyTasks());
        Set<String> stateful = allTasks.stream().filter(t -> t.startsWith("1_")).collect(Collectors.toCollection(TreeSet::new));
        Set<String> standbys = new TreeSet<>(sa);
        standbys.addAll(sb);
        s.check(sa.size() + sb.size() == stateful.size() && standbys.equals(stateful)
                        && sa.stream().noneMatch(ta::contains) && sb.stream().noneMatch(tb::contains),
                "one standby of every stateful task, on the process not running it (A standby %s, B standby %s)", sa, sb);
        return fa.processId();
    }

    static Set<String> minus(Collection<String> x, Collection<String> y) {
        Set<String> r = new TreeSet<>(x);
        r.removeAll(y);
        return r;
    }

    /** Task ids as subtopology_partition, in the order given. */
    static List<String> tasks(List<StreamsGroupMemberAssignment.TaskIds> ids) {
        List<String> out = new ArrayList<>();
        for (StreamsGroupMemberAssignment.TaskIds t : ids) {
            for (int p : t.partitions()) {
                out.add(t.subtopologyId() + "_" + p);
            }
        }
        return out;
    }

    static String summary(StreamsGroupDescription d) {
        if (d == null) {
            return "not described yet";
        }
        StringBuilder sb = new StringBuilder();
        sb.append(String.format("state %s, group epoch %d, target assignment epoch %d, %d members:", d.groupState(),
                d.groupEpoch(), d.targetAssignmentEpoch(), d.members().size()));
        for (StreamsGroupMemberDescription m : d.members()) {
            sb.append(String.format(" [%s epoch %d process %s active %s target %s standby %s]", m.clientId(), m.memberEpoch(),
                    m.processId(), tasks(m.assignment().activeTasks()), tasks(m.targetAssignment().activeTasks()),
                    tasks(m.assignment().standbyTasks())));
        }
        return sb.toString();
    }

    static double secs(long since) {
        return (System.nanoTime() - since) / 1e9;
    }
}
