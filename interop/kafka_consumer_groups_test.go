package interop_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/regent-broker/regent/interop/brokertest"
)

// TestKafkaConsumerGroupsTool runs kafka-consumer-groups --list,
// --describe and --reset-offsets against a group a kgo consumer committed.
func TestKafkaConsumerGroupsTool(t *testing.T) {
	lib := kafkaLib(t)
	b := brokertest.Start(t, "--broker-config", "group.initial.rebalance.delay.ms=0")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const tool = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
	adm := newAdmin(t, b.Addr)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "cg"); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.ConsumerGroup("tool-group"), kgo.ConsumeTopics("cg"), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "cg", Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	got := 0
	for got < 20 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of 20", got)
		}
		got += fs.NumRecords()
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	cl.Close() // leaves the group: it is Empty, as --reset-offsets requires

	if out := kafkaTool(t, ctx, lib, tool, "--bootstrap-server", b.Addr, "--list"); !strings.Contains(out, "tool-group") {
		t.Fatalf("--list:\n%s", out)
	}
	out := kafkaTool(t, ctx, lib, tool, "--bootstrap-server", b.Addr, "--describe", "--group", "tool-group")
	if !strings.Contains(out, "cg") || !strings.Contains(out, "tool-group") {
		t.Fatalf("--describe:\n%s", out)
	}
	out = kafkaTool(t, ctx, lib, tool, "--bootstrap-server", b.Addr, "--reset-offsets", "--group", "tool-group", "--topic", "cg", "--to-earliest", "--execute")
	if !strings.Contains(out, "cg") {
		t.Fatalf("--reset-offsets:\n%s", out)
	}
	fo, err := adm.FetchOffsets(ctx, "tool-group")
	if err != nil {
		t.Fatal(err)
	}
	fo.Each(func(o kadm.OffsetResponse) {
		if o.At != 0 {
			t.Errorf("partition %d committed at %d after --to-earliest", o.Partition, o.At)
		}
	})
	if len(fo.Offsets().Sorted()) != 2 {
		t.Fatalf("offsets after reset: %v", fo)
	}
	kafkaTool(t, ctx, lib, tool, "--bootstrap-server", b.Addr, "--delete", "--group", "tool-group")
	if out := kafkaTool(t, ctx, lib, tool, "--bootstrap-server", b.Addr, "--list"); strings.Contains(out, "tool-group") {
		t.Fatalf("group listed after --delete:\n%s", out)
	}
}
