package interop_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
)

const leaderElectionCommand = "org.apache.kafka.tools.LeaderElectionCommand"

// TestClusterElectLeaders runs Kafka 4.3's kafka-leader-election against a
// 3-node cluster, through a follower. One raft group leads every
// partition: a preferred election of a partition whose preferred leader
// (its first replica) is another node moves the leadership there (Metadata
// then names it, at a higher leader epoch) and records keep flowing; an
// election of every partition, whose preferences differ, is refused with
// PREFERRED_LEADER_NOT_AVAILABLE saying why; partitions led by their
// preferred leader need no election; UNCLEAN is never needed.
func TestClusterElectLeaders(t *testing.T) {
	skipClusterInShort(t)
	lib := kafkaLib(t)
	c := brokertest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), clusterTestTimeout)
	defer cancel()
	first := c.LeaderID(t)
	var others []int32
	for _, id := range c.IDs() {
		if id != first {
			others = append(others, id)
		}
	}
	cl := newClusterClient(t, c)
	defer cl.Close()
	// One topic per preferred leader: "prefers-N" has one partition whose
	// replicas start with N.
	for _, id := range c.IDs() {
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = fmt.Sprintf("prefers-%d", id), -1, -1
		ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		ra.Partition, ra.Replicas = 0, []int32{id}
		for _, o := range c.IDs() {
			if o != id {
				ra.Replicas = append(ra.Replicas, o)
			}
		}
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
		}
		if err != nil {
			t.Fatalf("create prefers-%d: %v", id, err)
		}
	}
	target := others[0]
	follower := others[1] // the tool asks a node that does not lead
	elect := func(args ...string) (string, error) {
		full := append([]string{"--bootstrap-server", c.Node(follower).Addr}, args...)
		out, err := kafkaToolResult(ctx, lib, leaderElectionCommand, full...)
		t.Logf("kafka-leader-election %s:\n%s", strings.Join(args, " "), out)
		return out, err
	}

	// Every partition at once: their preferred leaders differ.
	out, err := elect("--election-type", "PREFERRED", "--all-topic-partitions")
	if err == nil || !strings.Contains(out, "prefer different leaders") || strings.Contains(out, fmt.Sprintf("prefers-%d-0", first)) {
		t.Fatalf("electing every partition: %v, want a refusal naming the differing preferences and leaving out prefers-%d-0, which needs none", err, first)
	}
	if l := c.LeaderNow(); l != first {
		t.Fatalf("a refused election moved the leader from %d to %d", first, l)
	}
	// The partition led by its preferred leader needs no election.
	if out, _ := elect("--election-type", "PREFERRED", "--topic", fmt.Sprintf("prefers-%d", first), "--partition", "0"); !strings.Contains(out, "Valid replica already elected") {
		t.Fatalf("electing prefers-%d-0 (led by its preferred leader) did not say no election was needed", first)
	}
	if out, _ := elect("--election-type", "UNCLEAN", "--topic", fmt.Sprintf("prefers-%d", target), "--partition", "0"); !strings.Contains(out, "Valid replica already elected") {
		t.Fatalf("an unclean election was not answered as not needed")
	}

	epochBefore := metadataLeader(t, ctx, cl, fmt.Sprintf("prefers-%d", target))
	out, err = elect("--election-type", "PREFERRED", "--topic", fmt.Sprintf("prefers-%d", target), "--partition", "0")
	if err != nil || !strings.Contains(out, "Successfully completed leader election (PREFERRED)") {
		t.Fatalf("electing prefers-%d-0's preferred leader: %v", target, err)
	}
	testwait.For(t, fmt.Sprintf("node %d leads", target), time.Minute, func() bool { return c.LeaderNow() == target })
	testwait.For(t, "Metadata names the preferred leader at a higher epoch", time.Minute, func() bool {
		after := metadataLeader(t, ctx, cl, fmt.Sprintf("prefers-%d", target))
		return after.Leader == target && after.LeaderEpoch > epochBefore.LeaderEpoch
	})
	p := newClusterClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()))
	defer p.Close()
	if err := p.ProduceSync(ctx, &kgo.Record{Topic: fmt.Sprintf("prefers-%d", target), Value: []byte("after the election")}).FirstErr(); err != nil {
		t.Fatalf("produce after the election: %v", err)
	}
}

// metadataLeader is what Metadata says of topic's partition 0.
func metadataLeader(t *testing.T, ctx context.Context, cl *kgo.Client, topic string) kmsg.MetadataResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return kmsg.MetadataResponseTopicPartition{Leader: -1, LeaderEpoch: -1}
	}
	return resp.Topics[0].Partitions[0]
}
