package interop_test

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
)

// TestClusterProducerEvictionOnEveryNode: in a 3-node cluster with
// --max-producer-states 1000, a client invents 3000 producer ids on a
// partition replicated to the three voters. The leader's eviction passes
// reach every node as commands: each node logs the same passes, dropping
// and keeping the same counts, and after the leader is killed the new
// leader describes exactly the producers the old one did.
func TestClusterProducerEvictionOnEveryNode(t *testing.T) {
	if testing.Short() {
		t.Skip("3-node cluster: not in -short")
	}
	c := brokertest.StartCluster(t, 3, "--max-producer-states", "1000")
	c.WaitLeader(t, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	topic := "flood-cluster"
	cl := newClient(t, kgo.SeedBrokers(c.Seeds()...))
	adm := kadm.NewClient(cl)
	var id [16]byte
	testwait.For(t, "topic created", time.Minute, func() bool {
		r, err := adm.CreateTopic(ctx, 1, 3, nil, topic)
		id = r.ID
		return err == nil && r.Err == nil
	})
	var leader int32 = -1
	testwait.For(t, "the partition's leader", time.Minute, func() bool {
		md, err := adm.ListTopics(ctx, topic)
		if err != nil || md[topic].Err != nil {
			return false
		}
		leader = md[topic].Partitions[0].Leader
		return leader >= 0
	})
	floodInventedIDs(t, ctx, cl.Broker(int(leader)), topic, id, 1, 3000)

	pass := regexp.MustCompile(`producers=(\d+) kept=(\d+)`)
	passes := func(n *brokertest.Node) []string {
		var out []string
		for _, line := range strings.Split(n.LogTail(4<<20), "\n") {
			if strings.Contains(line, "over its producer budget") && strings.Contains(line, "topic="+topic) {
				if m := pass.FindString(line); m != "" {
					out = append(out, m)
				}
			}
		}
		return out
	}
	var want []string
	testwait.For(t, "every node applied the same eviction passes", time.Minute, func() bool {
		nodes := c.Nodes()
		want = passes(nodes[0])
		for _, n := range nodes[1:] {
			if !slices.Equal(passes(n), want) {
				return false
			}
		}
		return len(want) > 0
	})
	t.Logf("every node: %d passes, %v", len(want), want)

	describe := func() []int64 {
		t.Helper()
		var ids []int64
		testwait.For(t, "producers described", time.Minute, func() bool {
			d, err := adm.DescribeProducers(ctx, kadm.TopicsSet{topic: {0: {}}})
			if err != nil {
				return false
			}
			p := d[topic].Partitions[0]
			if p.Err != nil {
				return false
			}
			ids = ids[:0]
			for _, ap := range p.ActiveProducers {
				ids = append(ids, ap.ProducerID)
			}
			return true
		})
		slices.Sort(ids)
		return ids
	}
	before := describe()
	if len(before) > 1100 {
		t.Fatalf("the leader holds %d producers, budget 1000", len(before))
	}
	old := c.LeaderID(t)
	c.Kill(old)
	testwait.For(t, "a new leader", time.Minute, func() bool {
		id := c.LeaderID(t)
		return id != 0 && id != old
	})
	after := describe()
	if !slices.Equal(before, after) {
		t.Fatalf("the old leader held %d producers, the new one %d, or not the same ones", len(before), len(after))
	}
	t.Logf("the new leader describes the same %d producers", len(after))
}
