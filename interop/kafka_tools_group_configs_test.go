package interop_test

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/interop/brokertest"
)

// TestKafkaConfigsGroupConfigs runs Kafka 4.3.1's kafka-configs on GROUP
// resources: --alter --add-config sets a group's
// consumer.session.timeout.ms and consumer.heartbeat.interval.ms and a
// share key, --describe shows them, a value outside the broker's bounds
// and an unknown key are refused with Kafka's messages, --delete-config
// removes one; and a KIP-848 member of that group is told the group's
// heartbeat interval while a member of another group gets the broker's.
func TestKafkaConfigsGroupConfigs(t *testing.T) {
	lib := kafkaLib(t)
	b := brokertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const configs = "kafka.admin.ConfigCommand"
	run := runTool(t, ctx, lib, configs, "--bootstrap-server", b.Addr, "--alter", "--entity-type", "groups", "--entity-name", "gc",
		"--add-config", "consumer.session.timeout.ms=50000,consumer.heartbeat.interval.ms=6000,share.isolation.level=read_committed")
	if !strings.Contains(run.stdout, "Completed updating config for group gc.") {
		t.Fatalf("kafka-configs --alter:\n%s", run.stdout)
	}
	run = runTool(t, ctx, lib, configs, "--bootstrap-server", b.Addr, "--describe", "--entity-type", "groups", "--entity-name", "gc")
	for _, want := range []string{"consumer.session.timeout.ms=50000", "consumer.heartbeat.interval.ms=6000", "share.isolation.level=read_committed"} {
		if !strings.Contains(run.stdout, want) {
			t.Fatalf("kafka-configs --describe lacks %s:\n%s", want, run.stdout)
		}
	}
	run = runTool(t, ctx, lib, configs, "--bootstrap-server", b.Addr, "--describe", "--entity-type", "groups")
	if !strings.Contains(run.stdout, "gc") {
		t.Fatalf("kafka-configs --describe --entity-type groups does not list gc:\n%s", run.stdout)
	}
	for _, bad := range []struct{ config, msg string }{
		{"consumer.session.timeout.ms=70000", "consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms"},
		{"consumer.heartbeat.interval.ms=100", "consumer.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms"},
		{"share.record.lock.duration.ms=500", "share.record.lock.duration.ms"},
	} {
		out := runToolFails(t, ctx, lib, configs, "--bootstrap-server", b.Addr, "--alter", "--entity-type", "groups", "--entity-name", "gc", "--add-config", bad.config)
		if !strings.Contains(out, bad.msg) {
			t.Fatalf("kafka-configs --add-config %s: want %q in:\n%s", bad.config, bad.msg, out)
		}
	}

	// A KIP-848 member of gc is told gc's interval; one of another group
	// the broker's (5000).
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	interval := func(group string) int32 {
		t.Helper()
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = group, "m-"+group+"-0123456789abcdef", 0, 60000
		req.SubscribedTopicNames = []string{"gc-topic"}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || resp.ErrorCode != 0 {
			t.Fatalf("heartbeat of %s: %v %+v", group, err, resp)
		}
		return resp.HeartbeatIntervalMillis
	}
	if got := interval("gc"); got != 6000 {
		t.Fatalf("gc's member told %d ms, want 6000", got)
	}
	if got := interval("other"); got != 5000 {
		t.Fatalf("another group's member told %d ms, want 5000", got)
	}

	run = runTool(t, ctx, lib, configs, "--bootstrap-server", b.Addr, "--alter", "--entity-type", "groups", "--entity-name", "gc",
		"--delete-config", "consumer.heartbeat.interval.ms")
	run = runTool(t, ctx, lib, configs, "--bootstrap-server", b.Addr, "--describe", "--entity-type", "groups", "--entity-name", "gc")
	if strings.Contains(run.stdout, "consumer.heartbeat.interval.ms=6000") || !strings.Contains(run.stdout, "consumer.session.timeout.ms=50000") {
		t.Fatalf("after --delete-config:\n%s", run.stdout)
	}
}

// runToolFails runs a Kafka tool that must exit non-zero and returns what
// it printed.
func runToolFails(t *testing.T, ctx context.Context, lib, class string, args ...string) string {
	t.Helper()
	full := append([]string{"-Xmx256m", "-cp", filepath.Join(lib, "*"), class}, args...)
	cmd := exec.CommandContext(ctx, "java", full...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err == nil {
		t.Fatalf("%s %s succeeded, want a failure:\n%s", class, strings.Join(args, " "), out.String())
	}
	return out.String()
}
