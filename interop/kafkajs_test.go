package interop_test

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/regent-broker/regent/interop/brokertest"
)

// kafkajsTimeout bounds one run of node/roundtrip.js (about 7 s on one
// broker).
const kafkajsTimeout = 90 * time.Second

// needKafkajs finds node and interop/node's installed dependencies
// (kafkajs, pinned in node/package-lock.json). Under CI both must be
// there; elsewhere their absence skips.
func needKafkajs(t *testing.T) string {
	t.Helper()
	node := needTool(t, "node")
	if _, err := os.Stat("node/node_modules/kafkajs/package.json"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("interop/node/node_modules is missing (%v); .ci/install-deps installs it", err)
		}
		t.Skipf("interop/node/node_modules is missing: run .ci/install-deps (or npm ci in interop/node)")
	}
	return node
}

// runKafkajs runs node/roundtrip.js against brokers with topic and group
// names under prefix, and fails with its output on any mismatch.
func runKafkajs(t *testing.T, node string, brokers []string, prefix string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), kafkajsTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "node/roundtrip.js", strings.Join(brokers, ","), prefix)
	// The script's own deadline comes first, so a hang reports what passed.
	deadline := (kafkajsTimeout - 5*time.Second).Milliseconds()
	cmd.Env = append(os.Environ(), "REGENT_DEADLINE_MS="+strconv.FormatInt(deadline, 10))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kafkajs round trip against %v: %v\n%s", brokers, err, out)
	}
	t.Logf("%s", strings.TrimSpace(string(out)))
}

// TestKafkajsRoundTrip: kafkajs 2.2.4, a client the spec names, against
// one broker: admin calls (topics, configs, partitions, records deletion,
// groups, offsets), plain, GZIP, acks=0 and idempotent producers, a
// consumer group that rebalances to two members and resumes at its
// commits, and transactions (commit, abort, last stable offset,
// consume-transform-produce with sendOffsets). node/roundtrip.js lists
// the checks.
func TestKafkajsRoundTrip(t *testing.T) {
	node := needKafkajs(t)
	// kafkajs joins a group several times per run: without the initial
	// rebalance delay (3 s by default) each join is immediate.
	b := brokertest.Start(t, "--broker-config", "group.initial.rebalance.delay.ms=0")
	runKafkajs(t, node, []string{b.Addr}, "kjs")
}

// TestKafkajsCluster runs the same script against three nodes in raft
// cluster mode, seeded with all three: partitions and coordinators live
// on the raft leader, which kafkajs must find through Metadata and
// FindCoordinator from whichever node it asks.
func TestKafkajsCluster(t *testing.T) {
	skipClusterInShort(t)
	node := needKafkajs(t)
	c := brokertest.StartCluster(t, 3, "--broker-config", "group.initial.rebalance.delay.ms=0")
	runKafkajs(t, node, c.Seeds(), "kjsc")
}
