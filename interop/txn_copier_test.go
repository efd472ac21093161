package interop_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/regent-broker/regent/interop/brokertest"
)

// TestTransactionalMessageCopier runs Kafka's own exactly-once copier
// (random aborts, offsets committed in the transaction) and checks with a
// read_committed consumer that every input record reached the output
// exactly once.
func TestTransactionalMessageCopier(t *testing.T) {
	lib := kafkaLib(t)
	b := brokertest.Start(t, "--broker-config", "group.initial.rebalance.delay.ms=0")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const n = 20000
	adm := newAdmin(t, b.Addr)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "copier-in"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "copier-out"); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := 0; i < n; i++ {
		cl.Produce(ctx, &kgo.Record{Topic: "copier-in", Value: []byte(fmt.Sprintf("m-%06d", i))}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	out := kafkaTool(t, ctx, lib, "org.apache.kafka.tools.TransactionalMessageCopier",
		"--broker-list", b.Addr, "--input-topic", "copier-in", "--input-partition", "0",
		"--output-topic", "copier-out", "--transactional-id", "copier", "--consumer-group", "copier-group",
		"--transaction-size", "200", "--max-messages", fmt.Sprint(n), "--enable-random-aborts", "--use-group-metadata")
	t.Logf("copier: %d bytes of progress output", len(out))
	// Kafka 4.3's client saw transaction.version=2 finalized and ended its
	// transactions with EndTxn v5 (KIP-890 part 2).
	if log := b.LogTail(1 << 20); !strings.Contains(log, tv2LogLine) || !strings.Contains(log, "transactional_id=copier") {
		t.Fatalf("the copier's transactions did not use EndTxn v5 (no %q for transactional_id=copier in the broker log)", tv2LogLine)
	}

	rc, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.ConsumeTopics("copier-out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	seen := map[string]int{}
	total := 0
	for total < n {
		fs := rc.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read_committed consumer saw %d of %d records", total, n)
		}
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++; total++ })
	}
	// Nothing more: a short poll must come back empty.
	short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
	defer cancelShort()
	rc.PollFetches(short).EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++; total++ })
	for i := 0; i < n; i++ {
		if c := seen[fmt.Sprintf("m-%06d", i)]; c != 1 {
			t.Fatalf("record m-%06d seen %d times by read_committed", i, c)
		}
	}
	if total != n {
		t.Fatalf("read_committed saw %d records, want exactly %d", total, n)
	}
	t.Logf("TransactionalMessageCopier with random aborts: %d records copied exactly once", n)
}
