package interop_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
)

// TestProducerStateExpires: with producer.id.expiration.ms and
// transactional.id.expiration.ms at two seconds, an idempotent and a
// transactional producer that wrote once are listed by DescribeProducers,
// then dropped by the leader's maintenance (a partition.expire_producers
// command) once idle past the expiration, and the idle transactional id
// leaves ListTransactions; the idempotent producer then writes again,
// its next sequence taken as a new producer's (KIP-360).
func TestProducerStateExpires(t *testing.T) {
	b := brokertest.Start(t, "--retention-check-interval", "100ms",
		"--broker-config", "producer.id.expiration.ms=2000,transactional.id.expiration.ms=2000")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := newAdmin(t, b.Addr)
	topic := "expiry"
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	idem := newClient(t, kgo.SeedBrokers(b.Addr), kgo.DefaultProduceTopic(topic))
	if err := idem.ProduceSync(ctx, &kgo.Record{Value: []byte("once")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	txnl := newClient(t, kgo.SeedBrokers(b.Addr), kgo.DefaultProduceTopic(topic), kgo.TransactionalID("expiry-txn"))
	if err := txnl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txnl.ProduceSync(ctx, &kgo.Record{Value: []byte("in a txn")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := txnl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	producers := func() int {
		d, err := adm.DescribeProducers(ctx, kadm.TopicsSet{topic: {0: {}}})
		if err != nil {
			t.Logf("describe producers: %v", err)
			return -1
		}
		p := d[topic].Partitions[0]
		if p.Err != nil {
			t.Logf("describe producers: %v", p.Err)
			return -1
		}
		return len(p.ActiveProducers)
	}
	if n := producers(); n != 2 {
		t.Fatalf("%d producers described after the writes, want 2", n)
	}
	start := time.Now()
	testwait.For(t, "producer state expired", 30*time.Second, func() bool { return producers() == 0 })
	t.Logf("producer state gone %v after the writes", time.Since(start).Round(10*time.Millisecond))
	testwait.For(t, "transactional id expired", 30*time.Second, func() bool {
		l, err := adm.ListTransactions(ctx, nil, nil)
		if err != nil {
			return false
		}
		_, ok := l["expiry-txn"]
		return !ok
	})
	if err := idem.ProduceSync(ctx, &kgo.Record{Value: []byte("again")}).FirstErr(); err != nil {
		t.Fatalf("the expired idempotent producer writes again: %v", err)
	}
	if n := producers(); n != 1 {
		t.Fatalf("%d producers after the second write, want 1", n)
	}
}
