package interop_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
)

// TestClusterProducerExpiryOnEveryNode: in a 3-node cluster with
// producer.id.expiration.ms at 2 s, an idempotent producer's state on a
// partition replicated to the three voters is dropped on every node by
// the leader's replicated expiry pass (each node logs it when it applies
// the command; followers never decide expiry themselves), and the leader
// then describes no producer.
func TestClusterProducerExpiryOnEveryNode(t *testing.T) {
	if testing.Short() {
		t.Skip("3-node cluster: not in -short")
	}
	c := brokertest.StartCluster(t, 3, "--retention-check-interval", "100ms",
		"--broker-config", "producer.id.expiration.ms=2000")
	c.WaitLeader(t, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := "expiry-cluster"
	cl := newClient(t, kgo.SeedBrokers(c.Seeds()...), kgo.DefaultProduceTopic(topic))
	adm := kadm.NewClient(cl)
	testwait.For(t, "topic created", time.Minute, func() bool {
		r, err := adm.CreateTopic(ctx, 1, 3, nil, topic)
		return err == nil && r.Err == nil
	})
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("once")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	applied := func(n *brokertest.Node) bool {
		for _, line := range strings.Split(n.LogTail(1<<20), "\n") {
			if strings.Contains(line, `msg="producer state expired"`) && strings.Contains(line, "topic="+topic) {
				return true
			}
		}
		return false
	}
	testwait.For(t, "every node applied the expiry pass", time.Minute, func() bool {
		for _, n := range c.Nodes() {
			if !applied(n) {
				return false
			}
		}
		return true
	})
	t.Logf("every node dropped the producer %v after its write", time.Since(start).Round(10*time.Millisecond))
	d, err := adm.DescribeProducers(ctx, kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if p := d[topic].Partitions[0]; p.Err != nil || len(p.ActiveProducers) != 0 {
		t.Fatalf("leader describes %+v (%v) after the pass", p.ActiveProducers, p.Err)
	}
}
