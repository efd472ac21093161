package interop_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/regent-broker/regent/interop/brokertest"
)

// describeRequests is how many DescribeTopicPartitions requests the broker
// has served (its regent_requests_total).
func describeRequests(t *testing.T, metrics string) int {
	t.Helper()
	resp, err := http.Get("http://" + metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	n := 0
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, `regent_requests_total{api="DescribeTopicPartitions"`) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		n += int(v)
	}
	return n
}

// partitionLines returns, for each partition line of a kafka-topics
// --describe output for topic, its leader.
func partitionLines(t *testing.T, out, topic string) map[int]string {
	t.Helper()
	re := regexp.MustCompile(`(?m)^\s+Topic: ` + regexp.QuoteMeta(topic) + `\s+Partition: (\d+)\s+Leader: (\S+)\s+Replicas: \S+\s+Isr: \S+\s+Elr:`)
	got := map[int]string{}
	for _, m := range re.FindAllStringSubmatch(out, -1) {
		p, _ := strconv.Atoi(m[1])
		if _, dup := got[p]; dup {
			t.Fatalf("partition %d of %s listed twice:\n%s", p, topic, out)
		}
		got[p] = m[2]
	}
	return got
}

// TestKafkaTopicsDescribe runs kafka-topics --describe (Kafka 4.3.1's
// TopicCommand, which describes through DescribeTopicPartitions) for a
// topic, for a topic larger than one response page (the tool follows the
// cursor), and for the internal __consumer_offsets.
func TestKafkaTopicsDescribe(t *testing.T) {
	lib := kafkaLib(t)
	metrics := fmt.Sprintf("127.0.0.1:%d", brokertest.FreePort(t))
	b := brokertest.Start(t, "--metrics-listen", metrics)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const topics = "org.apache.kafka.tools.TopicCommand"
	tool := func(args ...string) string {
		return kafkaTool(t, ctx, lib, topics, append([]string{"--bootstrap-server", b.Addr}, args...)...)
	}

	tool("--create", "--topic", "described", "--partitions", "3", "--replication-factor", "1", "--config", "retention.ms=3600000")
	before := describeRequests(t, metrics)
	out := tool("--describe", "--topic", "described")
	if !strings.Contains(out, "PartitionCount: 3") || !strings.Contains(out, "retention.ms=3600000") || !strings.Contains(out, "TopicId: ") {
		t.Fatalf("kafka-topics --describe:\n%s", out)
	}
	if got := partitionLines(t, out, "described"); len(got) != 3 || got[0] != "1" || got[2] != "1" {
		t.Fatalf("partitions %v:\n%s", got, out)
	}
	if n := describeRequests(t, metrics) - before; n < 1 {
		t.Fatalf("kafka-topics --describe sent %d DescribeTopicPartitions requests", n)
	}

	// 12 partitions in pages of 5: three requests, each partition once.
	tool("--create", "--topic", "paged", "--partitions", "12", "--replication-factor", "1")
	before = describeRequests(t, metrics)
	out = tool("--describe", "--topic", "paged", "--partition-size-limit-per-response", "5")
	if got := partitionLines(t, out, "paged"); len(got) != 12 {
		t.Fatalf("paged describe listed %d partitions:\n%s", len(got), out)
	}
	if n := describeRequests(t, metrics) - before; n < 3 {
		t.Fatalf("12 partitions in pages of 5 took %d DescribeTopicPartitions requests, want 3 or more", n)
	} else {
		t.Logf("12 partitions in pages of 5: %d DescribeTopicPartitions requests", n)
	}

	out = tool("--describe", "--topic", "__consumer_offsets")
	if !strings.Contains(out, "PartitionCount: 50") || !strings.Contains(out, "cleanup.policy=compact") {
		t.Fatalf("kafka-topics --describe --topic __consumer_offsets:\n%s", out)
	}
	got := partitionLines(t, out, "__consumer_offsets")
	if len(got) != 50 {
		t.Fatalf("__consumer_offsets: %d partitions listed:\n%s", len(got), out)
	}
	for p, leader := range got {
		if leader != "1" {
			t.Fatalf("__consumer_offsets partition %d led by %s, want node 1 (the coordinator)", p, leader)
		}
	}
}
