package io.regent.interop;

import java.io.IOException;
import java.io.PrintStream;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.config.ConfigResource;

/**
 * What every scenario main shares: its arguments (bootstrap address, work
 * directory, then scenario-specific ones), printed checks, bounded waits and a
 * few AdminClient helpers.
 *
 * <p>Each check prints one line, {@code CHECK ok: ...} or {@code CHECK FAILED: ...}.
 * The first failed check ends the scenario with exit code 1; any other error
 * ends it with exit code 2; success exits 0. The clients' own logs go to
 * {@code WORKDIR/client.log} (see log4j2.properties), not to stdout.
 */
public final class Scenario {
    /** Thrown by a failed check; ends the scenario with exit code 1. */
    public static final class CheckFailed extends RuntimeException {
        CheckFailed(String msg) {
            super(msg);
        }
    }

    /** A scenario body. */
    public interface Body {
        void run(Scenario s) throws Exception;
    }

    public final String name;
    public final String bootstrap;
    public final Path workDir;
    private final String[] args;
    private final long startNanos = System.nanoTime();
    private final PrintStream out = System.out;
    private final List<AutoCloseable> closers = new ArrayList<>();
    private int checks;

    private Scenario(String name, String[] args) {
        this.name = name;
        this.args = args;
        this.bootstrap = args[0];
        this.workDir = Paths.get(args[1]).toAbsolutePath();
    }

    /**
     * Parses {@code BOOTSTRAP WORKDIR [more...]}, runs body, and exits the JVM
     * with 0 (every check passed), 1 (a check failed) or 2 (an error).
     */
    public static void main(String name, String usage, String[] args, int minArgs, Body body) {
        if (args.length < Math.max(2, minArgs)) {
            System.err.println("usage: " + name + " BOOTSTRAP WORKDIR " + usage);
            System.exit(2);
        }
        try {
            Files.createDirectories(Paths.get(args[1]));
        } catch (IOException e) {
            System.err.println(name + ": cannot create work dir: " + e);
            System.exit(2);
        }
        // Before the first logger is made: the clients' logs go to the work dir.
        if (System.getProperty("regent.interop.log") == null) {
            System.setProperty("regent.interop.log", Paths.get(args[1], "client.log").toAbsolutePath().toString());
        }
        Scenario s = new Scenario(name, args);
        int code;
        try {
            s.info("scenario %s against %s, work dir %s", name, s.bootstrap, s.workDir);
            body.run(s);
            s.closeAll();
            s.info("PASS: %s, %d checks", name, s.checks);
            code = 0;
        } catch (CheckFailed e) {
            s.closeAll();
            s.info("FAIL: %s: %s (after %d checks passed)", name, e.getMessage(), s.checks);
            code = 1;
        } catch (Throwable t) {
            s.info("ERROR: %s: %s", name, t);
            for (Throwable c = t.getCause(); c != null && c != c.getCause(); c = c.getCause()) {
                s.info("  caused by: %s", c);
            }
            Path trace = s.workDir.resolve("error.txt");
            try (PrintStream ps = new PrintStream(Files.newOutputStream(trace), true, StandardCharsets.UTF_8)) {
                t.printStackTrace(ps);
                s.info("  stack trace in %s", trace);
            } catch (IOException e) {
                t.printStackTrace(System.out);
            }
            s.closeAll();
            s.info("FAIL: %s (error after %d checks passed)", name, s.checks);
            code = 2;
        }
        System.out.flush();
        final int exit = code;
        // A framework's shutdown hook or a thread inside it can hold System.exit
        // up; the verdict is in by now, so don't wait on them for long.
        Thread killer = new Thread(() -> {
            try {
                Thread.sleep(5_000);
            } catch (InterruptedException ignored) {
            }
            System.err.println(name + ": JVM exit took over 5 s; halting");
            Runtime.getRuntime().halt(exit);
        });
        killer.setDaemon(true);
        killer.start();
        System.exit(code);
    }

    /** The i-th argument (0 = bootstrap, 1 = work dir), or def if absent. */
    public String arg(int i, String def) {
        return i < args.length ? args[i] : def;
    }

    /** Something to close (in reverse order) when the scenario ends, however it ends. */
    public <T extends AutoCloseable> T closeLater(T c) {
        closers.add(c);
        return c;
    }

    private void closeAll() {
        for (int i = closers.size() - 1; i >= 0; i--) {
            try {
                closers.get(i).close();
            } catch (Throwable t) {
                info("closing %s: %s", closers.get(i).getClass().getSimpleName(), t);
            }
        }
        closers.clear();
    }

    public synchronized void info(String fmt, Object... a) {
        double secs = (System.nanoTime() - startNanos) / 1e9;
        out.printf("[%7.1fs] %s%n", secs, String.format(fmt, a));
        out.flush();
    }

    /** Prints the check and ends the scenario if it failed. */
    public void check(boolean ok, String fmt, Object... a) {
        String msg = String.format(fmt, a);
        if (!ok) {
            info("CHECK FAILED: %s", msg);
            throw new CheckFailed(msg);
        }
        checks++;
        info("CHECK ok: %s", msg);
    }

    /** Fails the scenario with msg. */
    public CheckFailed fail(String fmt, Object... a) {
        check(false, fmt, a);
        return new CheckFailed("unreachable");
    }

    /**
     * Polls cond every 200 ms until it is true, for at most limit; a failed
     * check ("what" not reached within limit) when it never is. cond may throw
     * CheckFailed to end the wait early.
     */
    public void await(Duration limit, String what, Callable<Boolean> cond) throws Exception {
        long deadline = System.nanoTime() + limit.toNanos();
        while (true) {
            if (Boolean.TRUE.equals(cond.call())) {
                return;
            }
            if (System.nanoTime() > deadline) {
                throw fail("%s: not reached within %ds", what, limit.toSeconds());
            }
            Thread.sleep(200);
        }
    }

    /** Like await, with a progress line from progress every 10 s. */
    public void await(Duration limit, String what, Callable<Boolean> cond, Supplier<String> progress) throws Exception {
        long[] last = {System.nanoTime()};
        await(limit, what, () -> {
            if (Boolean.TRUE.equals(cond.call())) {
                return true;
            }
            if (System.nanoTime() - last[0] > TimeUnit.SECONDS.toNanos(10)) {
                last[0] = System.nanoTime();
                info("  waiting for %s: %s", what, progress.get());
            }
            return false;
        });
    }

    public Properties adminProps() {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, name + "-admin");
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "30000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "60000");
        return p;
    }

    public Admin admin() {
        return closeLater(Admin.create(adminProps()));
    }

    /** Creates topics (1 replica each) and checks that the broker answered success. */
    public void createTopics(Admin admin, Map<String, Integer> partitions) throws Exception {
        List<NewTopic> topics = new ArrayList<>();
        partitions.forEach((t, n) -> topics.add(new NewTopic(t, n, (short) 1)));
        try {
            admin.createTopics(topics).all().get(60, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            throw fail("CreateTopics %s: %s", partitions, e.getCause());
        }
        check(true, "created topics %s", partitions);
    }

    public TopicDescription describeTopic(Admin admin, String topic) throws Exception {
        return admin.describeTopics(List.of(topic)).allTopicNames().get(60, TimeUnit.SECONDS).get(topic);
    }

    public Config topicConfig(Admin admin, String topic) throws Exception {
        ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        return admin.describeConfigs(List.of(r)).all().get(60, TimeUnit.SECONDS).get(r);
    }

    /** The value of one config entry, or null. */
    public static String value(Config c, String key) {
        ConfigEntry e = c.get(key);
        return e == null ? null : e.value();
    }

    /** Writes lines (each followed by a newline) to path, appending. */
    public static void appendLines(Path path, Collection<String> lines) throws IOException {
        StringBuilder sb = new StringBuilder();
        for (String l : lines) {
            sb.append(l).append('\n');
        }
        Files.writeString(path, sb.toString(), StandardCharsets.UTF_8,
                java.nio.file.StandardOpenOption.CREATE, java.nio.file.StandardOpenOption.APPEND);
    }

    /** A TCP port on 127.0.0.1 that was free a moment ago. */
    public static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        }
    }
}
