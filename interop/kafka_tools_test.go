package interop_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/regent-broker/regent/interop/brokertest"
)

// kafkaLib is the classpath directory of Apache Kafka's jars that
// .ci/install-deps resolves (bench/fetch-kafka.sh).
func kafkaLib(t *testing.T) string {
	t.Helper()
	dir, _ := filepath.Abs(filepath.Join("..", "bench", ".cache", "kafka-lib"))
	if m, _ := filepath.Glob(filepath.Join(dir, "kafka-tools-*.jar")); len(m) == 0 {
		if os.Getenv("CI") != "" {
			t.Fatalf("Kafka's jars are missing from %s; .ci/install-deps fetches them", dir)
		}
		t.Skipf("Kafka's jars are not in %s (run .ci/install-deps)", dir)
	}
	if _, err := exec.LookPath("java"); err != nil {
		t.Fatalf("java not found: %v", err)
	}
	return dir
}

// kafkaTool runs one of Kafka's command-line tools by class name.
func kafkaTool(t *testing.T, ctx context.Context, lib, class string, args ...string) string {
	t.Helper()
	out, err := kafkaToolResult(ctx, lib, class, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", class, strings.Join(args, " "), err, out)
	}
	return out
}

// kafkaToolResult runs one of Kafka's tools and returns its output and
// exit error, for tests that check a tool's failures.
func kafkaToolResult(ctx context.Context, lib, class string, args ...string) (string, error) {
	log4j, _ := filepath.Abs(filepath.Join("..", "bench", "log4j2.properties"))
	full := append([]string{"-Xmx256m", "-cp", filepath.Join(lib, "*"), "-Dlog4j2.configurationFile=" + log4j, class}, args...)
	out, err := exec.CommandContext(ctx, "java", full...).CombinedOutput()
	return string(out), err
}

// TestKafkaCommandLineTools runs kafka-topics and kafka-configs (Kafka
// 4.3.1's own classes) against Regent.
func TestKafkaCommandLineTools(t *testing.T) {
	lib := kafkaLib(t)
	b := brokertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const topics = "org.apache.kafka.tools.TopicCommand"
	const configs = "kafka.admin.ConfigCommand"

	kafkaTool(t, ctx, lib, topics, "--bootstrap-server", b.Addr, "--create", "--topic", "tools", "--partitions", "4", "--replication-factor", "1", "--config", "cleanup.policy=compact")
	if out := kafkaTool(t, ctx, lib, topics, "--bootstrap-server", b.Addr, "--list"); !strings.Contains(out, "tools") {
		t.Fatalf("kafka-topics --list:\n%s", out)
	}
	out := kafkaTool(t, ctx, lib, topics, "--bootstrap-server", b.Addr, "--describe", "--topic", "tools")
	if !strings.Contains(out, "PartitionCount: 4") || !strings.Contains(out, "cleanup.policy=compact") {
		t.Fatalf("kafka-topics --describe:\n%s", out)
	}
	kafkaTool(t, ctx, lib, topics, "--bootstrap-server", b.Addr, "--alter", "--topic", "tools", "--partitions", "6")
	if out := kafkaTool(t, ctx, lib, topics, "--bootstrap-server", b.Addr, "--describe", "--topic", "tools"); !strings.Contains(out, "PartitionCount: 6") {
		t.Fatalf("after --alter --partitions 6:\n%s", out)
	}

	kafkaTool(t, ctx, lib, configs, "--bootstrap-server", b.Addr, "--alter", "--entity-type", "topics", "--entity-name", "tools", "--add-config", "retention.ms=3600000,min.compaction.lag.ms=1000")
	out = kafkaTool(t, ctx, lib, configs, "--bootstrap-server", b.Addr, "--describe", "--entity-type", "topics", "--entity-name", "tools")
	if !strings.Contains(out, "retention.ms=3600000") || !strings.Contains(out, "min.compaction.lag.ms=1000") {
		t.Fatalf("kafka-configs --describe after --add-config:\n%s", out)
	}
	kafkaTool(t, ctx, lib, configs, "--bootstrap-server", b.Addr, "--alter", "--entity-type", "topics", "--entity-name", "tools", "--delete-config", "retention.ms")
	if out := kafkaTool(t, ctx, lib, configs, "--bootstrap-server", b.Addr, "--describe", "--entity-type", "topics", "--entity-name", "tools"); strings.Contains(out, "retention.ms=3600000") {
		t.Fatalf("retention.ms still set after --delete-config:\n%s", out)
	}
	if out := kafkaTool(t, ctx, lib, configs, "--bootstrap-server", b.Addr, "--describe", "--entity-type", "brokers", "--entity-name", "1", "--all"); !strings.Contains(out, "log.retention.hours") {
		t.Fatalf("kafka-configs --describe brokers --all:\n%s", out)
	}

	// A refused value is reported by the tool, not swallowed.
	bad := exec.CommandContext(ctx, "java", "-cp", filepath.Join(lib, "*"), configs, "--bootstrap-server", b.Addr, "--alter", "--entity-type", "topics", "--entity-name", "tools", "--add-config", "cleanup.policy=shred")
	if o, err := bad.CombinedOutput(); err == nil || !strings.Contains(string(o), "cleanup.policy") {
		t.Fatalf("cleanup.policy=shred accepted or message lost: %v\n%s", err, o)
	}

	// Records produced with keys (the topic is compacted) are visible to a
	// plain consumer after all this.
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "tools", Key: []byte("k"), Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	kafkaTool(t, ctx, lib, topics, "--bootstrap-server", b.Addr, "--delete", "--topic", "tools")
	if out := kafkaTool(t, ctx, lib, topics, "--bootstrap-server", b.Addr, "--list"); strings.Contains(out, "tools") {
		t.Fatalf("topic listed after --delete:\n%s", out)
	}
}
