package interop_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/interop/brokertest"
)

// TestClusterReplicaAssignmentOrder: replica assignments given to
// CreateTopics and CreatePartitions order the replicas every node reports
// (Metadata, DescribeTopicPartitions), before and after a node restarts:
// every voter holds every partition, but a client that assigned [3 2 1]
// expects broker 3 first, its preferred leader (librdkafka's 0081_admin
// checks this). A count of assignments that does not match the partitions
// added is refused as Kafka refuses it. AlterPartitionReassignments
// reordering the voters is stored and reported the same way.
func TestClusterReplicaAssignmentOrder(t *testing.T) {
	c := brokertest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := newClusterClient(t, c)
	defer cl.Close()
	const topic = "assigned"
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = topic, -1, -1
	for i, rs := range [][]int32{{3, 2, 1}, {2, 1, 3}} {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(i), rs
		ct.ReplicaAssignment = append(ct.ReplicaAssignment, a)
	}
	create.Topics = append(create.Topics, ct)
	create.TimeoutMillis = 30000
	cresp, err := create.RequestWith(ctx, cl)
	if err != nil || cresp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create: %v %+v", err, cresp)
	}
	grow := func(count int32, assignments ...[]int32) error {
		req := kmsg.NewPtrCreatePartitionsRequest()
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = topic, count
		for _, rs := range assignments {
			a := kmsg.NewCreatePartitionsRequestTopicAssignment()
			a.Replicas = rs
			rt.Assignment = append(rt.Assignment, a)
		}
		req.Topics, req.TimeoutMillis = append(req.Topics, rt), 30000
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err := grow(4, []int32{1, 3, 2}); err != kerr.InvalidReplicaAssignment {
		t.Fatalf("2 partitions added with 1 assignment: %v, want INVALID_REPLICA_ASSIGNMENT", err)
	}
	if err := grow(4, []int32{1, 3, 2}, []int32{3, 1, 2}); err != nil {
		t.Fatalf("create partitions: %v", err)
	}
	if err := grow(5); err != nil {
		t.Fatalf("create partitions without assignments: %v", err)
	}
	want := [][]int32{{3, 2, 1}, {2, 1, 3}, {1, 3, 2}, {3, 1, 2}, {1, 2, 3}}
	checkNodes := func() {
		t.Helper()
		for _, n := range c.Nodes() {
			ncl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr))
			if err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				got, err := nodeReplicas(ctx, ncl, topic)
				if err == nil && slices.EqualFunc(got, want, slices.Equal) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("node %d reports replicas %v (%v), want %v", n.ID, got, err, want)
				}
				time.Sleep(100 * time.Millisecond) // polling interval
			}
			ncl.Close()
		}
	}
	checkNodes()
	// AlterPartitionReassignments reordering the voters (sent to a
	// follower, which forwards it): stored, reported by every node; a
	// move off a voter is refused and changes nothing.
	reassign := func(seed string, parts map[int32][]int32) map[int32]int16 {
		t.Helper()
		ncl, err := kgo.NewClient(kgo.SeedBrokers(seed))
		if err != nil {
			t.Fatal(err)
		}
		defer ncl.Close()
		req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
		rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
		rt.Topic = topic
		for p, rs := range parts {
			rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
			rp.Partition, rp.Replicas = p, rs
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, ncl)
		if err != nil || resp.ErrorCode != 0 || len(resp.Topics) != 1 {
			t.Fatalf("reassign: %v %+v", err, resp)
		}
		codes := map[int32]int16{}
		for _, p := range resp.Topics[0].Partitions {
			codes[p.Partition] = p.ErrorCode
		}
		return codes
	}
	follower := c.Nodes()[0].Addr
	if c.LeaderID(t) == c.Nodes()[0].ID {
		follower = c.Nodes()[1].Addr
	}
	codes := reassign(follower, map[int32][]int32{0: {1, 2, 3}, 4: {2, 3, 1}, 1: {1, 2}})
	if codes[0] != 0 || codes[4] != 0 || codes[1] != kerr.InvalidReplicaAssignment.Code {
		t.Fatalf("reassign codes %v: want 0 and 4 done, 1 INVALID_REPLICA_ASSIGNMENT", codes)
	}
	want[0], want[4] = []int32{1, 2, 3}, []int32{2, 3, 1}
	checkNodes()
	c.Kill(2)
	c.Restart(2)
	c.WaitCaughtUp(t, 2, time.Minute)
	checkNodes()
}

// nodeReplicas asks the node cl is seeded with for topic's replicas, by
// partition, with Metadata and with DescribeTopicPartitions; an error if
// the two disagree.
func nodeReplicas(ctx context.Context, cl *kgo.Client, topic string) ([][]int32, error) {
	mreq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	mreq.Topics = append(mreq.Topics, mt)
	mresp, err := mreq.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if len(mresp.Topics) != 1 || mresp.Topics[0].ErrorCode != 0 {
		return nil, kerr.UnknownTopicOrPartition
	}
	got := make([][]int32, len(mresp.Topics[0].Partitions))
	for _, p := range mresp.Topics[0].Partitions {
		if int(p.Partition) < len(got) {
			got[p.Partition] = p.Replicas
		}
	}
	dreq := kmsg.NewPtrDescribeTopicPartitionsRequest()
	dt := kmsg.NewDescribeTopicPartitionsRequestTopic()
	dt.Topic = topic
	dreq.Topics, dreq.ResponsePartitionLimit = append(dreq.Topics, dt), 100
	dresp, err := dreq.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	for _, p := range dresp.Topics[0].Partitions {
		if int(p.Partition) >= len(got) || !slices.Equal(got[p.Partition], p.Replicas) {
			return got, kerr.InconsistentClusterID // any error: they disagree
		}
	}
	return got, nil
}
