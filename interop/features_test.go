package interop_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/regent-broker/regent/interop/brokertest"
)

const featureCommand = "org.apache.kafka.tools.FeatureCommand"

// kafkaToolFails runs one of Kafka's tools expecting it to fail and
// returns its output.
func kafkaToolFails(t *testing.T, ctx context.Context, lib, class string, args ...string) string {
	t.Helper()
	out, err := kafkaToolResult(ctx, lib, class, args...)
	if err == nil {
		t.Fatalf("%s %s succeeded, want a failure:\n%s", class, strings.Join(args, " "), out)
	}
	return out
}

// finalizedLevel reads "FinalizedVersionLevel" and "Epoch" of a feature
// from kafka-features describe.
func finalizedLevel(t *testing.T, describe, feature string) (level, epoch string) {
	t.Helper()
	m := regexp.MustCompile(`Feature: ` + regexp.QuoteMeta(feature) + `\s+SupportedMinVersion: \S+\s+SupportedMaxVersion: \S+\s+FinalizedVersionLevel: (\S+)\s+Epoch: (\d+)`).FindStringSubmatch(describe)
	if m == nil {
		t.Fatalf("kafka-features describe lists no %s:\n%s", feature, describe)
	}
	return m[1], m[2]
}

// TestKafkaFeatures runs Kafka 4.3's kafka-features against Regent: describe
// shows Kafka 4.3's finalized levels for a new cluster (metadata.version
// 4.3-IV0, transaction.version 2, group.version 1, kraft.version 1,
// streams.version 1, and Regent's regent.raft.version 1); a
// downgrade of transaction.version to 1 is applied, survives a restart and
// makes the Java producer run transactions version 1 (no EndTxn v5, no
// epoch bump per transaction) with the same outcome; levels out of range
// and unknown features are refused with Kafka's message; a dry run changes
// nothing; the upgrade back to 2 is applied.
func TestKafkaFeatures(t *testing.T) {
	lib := kafkaLib(t)
	b := brokertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	features := func(args ...string) string {
		return kafkaTool(t, ctx, lib, featureCommand, append([]string{"--bootstrap-server", b.Addr}, args...)...)
	}

	out := features("describe")
	for feature, want := range map[string]string{"metadata.version": "4.3-IV0", "transaction.version": "2", "group.version": "1", "kraft.version": "1", "streams.version": "1", "regent.raft.version": "1"} {
		if level, epoch := finalizedLevel(t, out, feature); level != want || epoch != "0" {
			t.Fatalf("%s finalized at %s (epoch %s), want %s (epoch 0):\n%s", feature, level, epoch, want, out)
		}
	}

	if out := features("downgrade", "--feature", "transaction.version=1"); !strings.Contains(out, "transaction.version was downgraded to 1") {
		t.Fatalf("downgrade:\n%s", out)
	}
	out = kafkaToolFails(t, ctx, lib, featureCommand, "--bootstrap-server", b.Addr, "upgrade", "--feature", "transaction.version=3")
	if !strings.Contains(out, "Invalid update version 3 for feature transaction.version. Local controller 1 only supports versions 0-2") {
		t.Fatalf("upgrade to 3:\n%s", out)
	}
	out = kafkaToolFails(t, ctx, lib, featureCommand, "--bootstrap-server", b.Addr, "upgrade", "--feature", "eligible.leader.replicas.version=1")
	if !strings.Contains(out, "does not support this feature") {
		t.Fatalf("upgrade of an unknown feature:\n%s", out)
	}
	if out := features("upgrade", "--feature", "transaction.version=2", "--dry-run"); !strings.Contains(out, "transaction.version can be upgraded to 2") {
		t.Fatalf("dry run:\n%s", out)
	}

	// The level is durable: a restarted broker still finalizes 1.
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	b.Restart()
	if level, epoch := finalizedLevel(t, features("describe"), "transaction.version"); level != "1" || epoch != "1" {
		t.Fatalf("after restart transaction.version = %s (epoch %s), want 1 (epoch 1)", level, epoch)
	}

	// A Java producer of Kafka 4.3 now runs transactions version 1.
	const topic, id, n = "tv1", "java-tv1", 6
	adm := newAdmin(t, b.Addr)
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	src, _ := filepath.Abs(filepath.Join("javaclients", "TxnProducer.java"))
	log4j, _ := filepath.Abs(filepath.Join("..", "bench", "log4j2.properties"))
	jout, err := exec.CommandContext(ctx, "java", "-Xmx256m", "-Dlog4j2.configurationFile="+log4j, "-cp", filepath.Join(lib, "*"),
		src, b.Addr, topic, id, fmt.Sprint(n), "tv1-group").CombinedOutput()
	if err != nil || !strings.Contains(string(jout), "DONE") {
		t.Fatalf("TxnProducer under transaction.version=1: %v\n%s", err, jout)
	}
	ds, err := adm.DescribeTransactions(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if d := ds[id]; d.ProducerEpoch != 0 || d.State != "CompleteAbort" {
		t.Fatalf("under transaction.version=1 the epoch moved: %+v, want 0 and CompleteAbort (the last transaction aborts)", d)
	}
	for _, line := range strings.Split(b.LogTail(1<<20), "\n") {
		if strings.Contains(line, tv2LogLine) && strings.Contains(line, id) {
			t.Fatalf("EndTxn v5 used under transaction.version=1: %s", line)
		}
	}
	got := consumeIsolated(t, ctx, b.Addr, topic, 3, true, 4*3) // transactions 0, 1, 3, 4 commit
	if len(got) != 12 || got["t2-r0"] != 0 || got["t5-r0"] != 0 || got["t4-r2"] != 1 {
		t.Fatalf("read_committed under transaction.version=1 saw %v", got)
	}

	if out := features("upgrade", "--feature", "transaction.version=2"); !strings.Contains(out, "transaction.version was upgraded to 2") {
		t.Fatalf("upgrade:\n%s", out)
	}
	if level, epoch := finalizedLevel(t, features("describe"), "transaction.version"); level != "2" || epoch != "2" {
		t.Fatalf("after the upgrade transaction.version = %s (epoch %s), want 2 (epoch 2)", level, epoch)
	}
}
