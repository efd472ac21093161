package interop_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/regent-broker/regent/interop/brokertest"
)

// TestKafkaReassignPartitions: Kafka 4.3's kafka-reassign-partitions
// lists no reassignment in progress, generates a plan, executes it (the
// replicas a partition already has: done at once) and verifies it
// complete; a plan naming the broker's log dir executes and verifies
// (AlterReplicaLogDirs), one naming another dir fails with
// LOG_DIR_NOT_FOUND; franz-go's admin client gets INVALID_REPLICA_ASSIGNMENT with
// Regent's reason for a move (every partition stays on every raft voter)
// and NO_REASSIGNMENT_IN_PROGRESS for a cancel.
func TestKafkaReassignPartitions(t *testing.T) {
	lib := kafkaLib(t)
	b := brokertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	adm := kadm.NewClient(newClient(t, kgo.SeedBrokers(b.Addr)))
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "reassign"); err != nil {
		t.Fatal(err)
	}
	md, err := adm.BrokerMetadata(ctx)
	if err != nil || len(md.Brokers) != 1 {
		t.Fatalf("brokers: %+v %v", md.Brokers, err)
	}
	node := md.Brokers[0].NodeID
	const tool = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
	dir := t.TempDir()
	out := kafkaTool(t, ctx, lib, tool, "--bootstrap-server", b.Addr, "--list")
	if !strings.Contains(out, "No partition reassignments found") {
		t.Fatalf("--list:\n%s", out)
	}
	move := filepath.Join(dir, "move.json")
	if err := os.WriteFile(move, []byte(`{"version":1,"topics":[{"topic":"reassign"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out = kafkaTool(t, ctx, lib, tool, "--bootstrap-server", b.Addr, "--generate", "--topics-to-move-json-file", move, "--broker-list", fmt.Sprint(node))
	m := regexp.MustCompile(`(?s)Proposed partition reassignment configuration\s*(\{.*\})`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("--generate:\n%s", out)
	}
	plan := filepath.Join(dir, "plan.json")
	if err := os.WriteFile(plan, []byte(m[1]), 0o600); err != nil {
		t.Fatal(err)
	}
	out = kafkaTool(t, ctx, lib, tool, "--bootstrap-server", b.Addr, "--execute", "--reassignment-json-file", plan)
	t.Logf("--execute:\n%s", out)
	if !strings.Contains(out, "Successfully started partition reassignment") {
		t.Fatalf("--execute:\n%s", out)
	}
	out = kafkaTool(t, ctx, lib, tool, "--bootstrap-server", b.Addr, "--verify", "--reassignment-json-file", plan)
	for p := range 3 {
		if !strings.Contains(out, fmt.Sprintf("Reassignment of partition reassign-%d is completed", p)) {
			t.Fatalf("--verify:\n%s", out)
		}
	}

	// A plan naming log dirs: the tool sends AlterReplicaLogDirs to the
	// replica's broker (its one dir: done at once) and --verify finds the
	// replica there (DescribeLogDirs).
	abs, err := filepath.Abs(b.Dir)
	if err != nil {
		t.Fatal(err)
	}
	dirPlan := filepath.Join(dir, "dirs.json")
	if err := os.WriteFile(dirPlan, fmt.Appendf(nil, `{"version":1,"partitions":[{"topic":"reassign","partition":0,"replicas":[%d],"log_dirs":[%q]}]}`, node, abs), 0o600); err != nil {
		t.Fatal(err)
	}
	out = kafkaTool(t, ctx, lib, tool, "--bootstrap-server", b.Addr, "--execute", "--reassignment-json-file", dirPlan)
	if !strings.Contains(out, fmt.Sprintf("Successfully started moving log directory to %s for replica reassign-0 with broker %d", abs, node)) {
		t.Fatalf("--execute with log_dirs:\n%s", out)
	}
	out = kafkaTool(t, ctx, lib, tool, "--bootstrap-server", b.Addr, "--verify", "--reassignment-json-file", dirPlan)
	if !strings.Contains(out, fmt.Sprintf("Reassignment of replica reassign-0-%d completed successfully", node)) {
		t.Fatalf("--verify with log_dirs:\n%s", out)
	}
	// A dir the broker does not have: Kafka's LOG_DIR_NOT_FOUND, which the
	// tool reports.
	if err := os.WriteFile(dirPlan, fmt.Appendf(nil, `{"version":1,"partitions":[{"topic":"reassign","partition":0,"replicas":[%d],"log_dirs":[%q]}]}`, node, abs+"-other"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := runToolFails(t, ctx, lib, tool, "--bootstrap-server", b.Addr, "--execute", "--reassignment-json-file", dirPlan); !strings.Contains(out, "LogDirNotFoundException") {
		t.Fatalf("--execute to an unknown dir:\n%s", out)
	}

	res, err := adm.AlterPartitionAssignments(ctx, kadm.AlterPartitionAssignmentsReq{"reassign": {0: {node + 1}, 1: nil, 2: {node}}, "nope": {0: {node}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := res["reassign"][0]; !errors.Is(r.Err, kerr.InvalidReplicaAssignment) || !strings.Contains(r.ErrMessage, "raft voter") {
		t.Errorf("move to another broker: %v %q", r.Err, r.ErrMessage)
	}
	if r := res["reassign"][1]; !errors.Is(r.Err, kerr.NoReassignmentInProgress) {
		t.Errorf("cancel: %v", r.Err)
	}
	if r := res["reassign"][2]; r.Err != nil {
		t.Errorf("to its own replicas: %v", r.Err)
	}
	if r := res["nope"][0]; !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("unknown topic: %v", r.Err)
	}
	ls, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"reassign": {0: {}, 1: {}}})
	if err != nil || len(ls) != 0 {
		t.Fatalf("list: %+v %v", ls, err)
	}
}

// TestKafkaConfigsBrokerDelete: kafka-configs sets dynamic broker configs
// and lists them as the broker's dynamic configs (DYNAMIC_BROKER_CONFIG,
// and under --entity-default as DYNAMIC_DEFAULT_BROKER_CONFIG: they apply
// to every node), then deletes them (IncrementalAlterConfigs DELETE,
// which a BROKER resource refused as a null value before): a key also
// given at start (--broker-config) falls back to that value, one never
// set stays unset, as kafka-reassign-partitions --verify clears the
// replication throttles. A restart keeps runtime values, and the start
// values come from the command line again.
func TestKafkaConfigsBrokerDelete(t *testing.T) {
	lib := kafkaLib(t)
	b := brokertest.Start(t, "--broker-config", "log.retention.ms=7200000")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := kadm.NewClient(newClient(t, kgo.SeedBrokers(b.Addr)))
	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprint(md.Brokers[0].NodeID)
	const configs = "kafka.admin.ConfigCommand"
	describe := func(args ...string) string {
		return kafkaTool(t, ctx, lib, configs, append([]string{"--bootstrap-server", b.Addr, "--describe", "--entity-type", "brokers"}, args...)...)
	}
	if out := describe("--entity-name", id); strings.Contains(out, "log.retention.ms") {
		t.Fatalf("a start value listed as dynamic:\n%s", out)
	}
	kafkaTool(t, ctx, lib, configs, "--bootstrap-server", b.Addr, "--alter", "--entity-type", "brokers", "--entity-name", id,
		"--add-config", "log.retention.ms=3600000,follower.replication.throttled.rate=1000000")
	out := describe("--entity-name", id)
	t.Logf("kafka-configs --describe --entity-name %s:\n%s", id, out)
	if !strings.Contains(out, "log.retention.ms=3600000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.ms=3600000, STATIC_BROKER_CONFIG:log.retention.ms=7200000") ||
		!strings.Contains(out, "follower.replication.throttled.rate=1000000") {
		t.Fatalf("after --add-config:\n%s", out)
	}
	if out := describe("--entity-default"); !strings.Contains(out, "log.retention.ms=3600000") {
		t.Fatalf("--entity-default after --add-config:\n%s", out)
	}
	b.Restart()
	if out := describe("--entity-name", id); !strings.Contains(out, "log.retention.ms=3600000") {
		t.Fatalf("after a restart:\n%s", out)
	}
	kafkaTool(t, ctx, lib, configs, "--bootstrap-server", b.Addr, "--alter", "--entity-type", "brokers", "--entity-name", id,
		"--delete-config", "log.retention.ms,follower.replication.throttled.rate,leader.replication.throttled.rate")
	if out := describe("--entity-name", id); strings.Contains(out, "log.retention.ms") || strings.Contains(out, "throttled.rate") {
		t.Fatalf("after --delete-config:\n%s", out)
	}
	if out := describe("--entity-name", id, "--all"); !strings.Contains(out, "log.retention.ms=7200000 sensitive=false synonyms={STATIC_BROKER_CONFIG:log.retention.ms=7200000") {
		t.Fatalf("the start value is not back:\n%s", out)
	}
	out = kafkaToolFails(t, ctx, lib, configs, "--bootstrap-server", b.Addr, "--alter", "--entity-type", "brokers", "--entity-name", id,
		"--delete-config", "log.retention.hours")
	if !strings.Contains(out, "Cannot update these configs dynamically") {
		t.Fatalf("deleting a read-only key:\n%s", out)
	}
}
