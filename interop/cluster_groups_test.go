package interop_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
)

// groupsArgs start a cluster with two partition raft groups per node.
var groupsArgs = []string{"--raft-groups", "6"}

// partitionLeaders is what Metadata says leads each partition of topic.
func partitionLeaders(ctx context.Context, adm *kadm.Client, topic string) (map[int32]int32, error) {
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return nil, err
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil {
		return nil, fmt.Errorf("topic %s: %v", topic, td.Err)
	}
	out := map[int32]int32{}
	for p, pd := range td.Partitions {
		if pd.Err != nil {
			return nil, fmt.Errorf("partition %d: %w", p, pd.Err)
		}
		out[p] = pd.Leader
	}
	return out, nil
}

// ledBy counts the partitions each node leads.
func ledBy(leaders map[int32]int32) map[int32]int {
	out := map[int32]int{}
	for _, l := range leaders {
		out[l]++
	}
	return out
}

// TestClusterPartitionGroups: with partition raft groups, a 12-partition
// topic's leadership spreads over the three nodes (each leads 4 ± 1 once
// the groups' leaders are on their preferred nodes); records produced
// with acks=all to every partition are all read back in order;
// transactions spanning partitions led by different nodes commit and
// abort as one (markers travel between nodes); after kill -9 of a node
// its partitions are led by the others within 5 s, producing goes on,
// and nothing acknowledged is lost or duplicated.
func TestClusterPartitionGroups(t *testing.T) {
	skipClusterInShort(t)
	c := brokertest.StartCluster(t, 3, groupsArgs...)
	ctx, cancel := context.WithTimeout(context.Background(), clusterTestTimeout)
	defer cancel()
	const topic, partitions = "spread", 12
	adm := kadm.NewClient(newClusterClient(t, c))
	if _, err := adm.CreateTopic(ctx, partitions, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	c.WaitTopic(t, topic, partitions, 3, time.Minute)

	var leaders map[int32]int32
	testwait.For(t, "each node leads 4 ± 1 partitions", time.Minute, func() bool {
		var err error
		if leaders, err = partitionLeaders(ctx, adm, topic); err != nil || len(leaders) != partitions {
			return false
		}
		counts := ledBy(leaders)
		for _, id := range c.IDs() {
			if n := counts[id]; n < 3 || n > 5 {
				return false
			}
		}
		return true
	})
	t.Logf("leaders by partition: %v, partitions per node: %v", leaders, ledBy(leaders))

	// Every partition, acks=all, idempotent.
	producer := newClusterClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(1000), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer producer.Close()
	acked := map[int32][]string{}
	produce := func(prefix string, n int) {
		t.Helper()
		for i := range n {
			p := int32(i % partitions)
			v := fmt.Sprintf("%s-%d", prefix, i)
			if err := producer.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("produce %s: %v", v, err)
			}
			acked[p] = append(acked[p], v)
		}
	}
	produce("plain", 240)

	// A transaction over partitions led by every node commits; another
	// aborts.
	txnProduce := func(id string, commit bool) {
		t.Helper()
		tp := newClusterClient(t, c, kgo.TransactionalID(id), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(1000))
		defer tp.Close()
		if err := tp.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for p := int32(0); p < partitions; p++ {
			v := fmt.Sprintf("%s-%d", id, p)
			if err := tp.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("transactional produce %s: %v", v, err)
			}
			if commit {
				acked[p] = append(acked[p], v)
			}
		}
		if err := tp.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end transaction %s (commit %v): %v", id, commit, err)
		}
	}
	txnProduce("spread-commit", true)
	txnProduce("spread-abort", false)
	produce("after-txns", 24)

	// kill -9 a node that leads partitions: the others lead them within
	// 5 s of its death.
	victim := leaders[0]
	c.Kill(victim)
	killed := time.Now()
	var moved time.Duration
	testwait.For(t, fmt.Sprintf("no partition led by killed node %d", victim), time.Minute, func() bool {
		ls, err := partitionLeaders(ctx, adm, topic)
		if err != nil || len(ls) != partitions {
			return false
		}
		for _, l := range ls {
			if l == victim || l < 0 {
				return false
			}
		}
		moved = time.Since(killed)
		return true
	})
	t.Logf("partitions of node %d led elsewhere %v after its kill", victim, moved.Round(time.Millisecond))
	if moved > 5*time.Second {
		t.Errorf("partitions moved %v after the kill, want within 5s", moved)
	}
	produce("after-kill", 120)
	c.Restart(victim)
	produce("after-restart", 60)

	// Read everything back, read_committed, from the start.
	consumer := newClusterClient(t, c, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	defer consumer.Close()
	want := 0
	for _, vs := range acked {
		want += len(vs)
	}
	got := map[int32][]string{}
	n := 0
	for n < want {
		fs := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records: %v", n, want, ctx.Err())
		}
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Logf("fetch error: %v", err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], string(r.Value))
			n++
		})
	}
	for _, p := range slices.Sorted(maps.Keys(acked)) {
		if !slices.Equal(got[p], acked[p]) {
			t.Errorf("partition %d: read %d records %v..., want %d %v...", p, len(got[p]), head(got[p]), len(acked[p]), head(acked[p]))
		}
	}
	// After the restart the groups go back to their preferred nodes.
	testwait.For(t, "leadership balanced again after the restart", time.Minute, func() bool {
		ls, err := partitionLeaders(ctx, adm, topic)
		if err != nil {
			return false
		}
		counts := ledBy(ls)
		for _, id := range c.IDs() {
			if n := counts[id]; n < 3 || n > 5 {
				return false
			}
		}
		return true
	})
}

// head is the start of vs, for messages.
func head(vs []string) []string { return vs[:min(len(vs), 5)] }

// TestClusterGroupsMembership: on a cluster with partition raft groups a
// node added with `regent cluster add-voter` joins every group (it catches
// up in each), and a removed node leaves every group, its partitions led by
// the others; records acknowledged before, between and after are all read
// back.
func TestClusterGroupsMembership(t *testing.T) {
	skipClusterInShort(t)
	c := brokertest.StartCluster(t, 3, "--raft-groups", "3")
	ctx, cancel := context.WithTimeout(context.Background(), clusterTestTimeout)
	defer cancel()
	const topic, partitions = "members", 6
	createClusterTopic(t, ctx, c, topic, partitions, 3)
	c.WaitTopic(t, topic, partitions, 3, time.Minute)
	acks := produceSync(t, ctx, c, topic, partitions, "three", 120)

	added := c.AddNode(t) // waits until it caught up in every group
	st, err := c.Status(added.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Groups) != 3 {
		t.Fatalf("node %d reports %d partition groups, want 3", added.ID, len(st.Groups))
	}
	acks = append(acks, produceSync(t, ctx, c, topic, partitions, "four", 120)...)

	adm := kadm.NewClient(newClusterClient(t, c))
	leaders, err := partitionLeaders(ctx, adm, topic)
	if err != nil {
		t.Fatal(err)
	}
	gone := leaders[0]
	c.RemoveNode(t, gone)
	testwait.For(t, fmt.Sprintf("no partition led by removed node %d", gone), time.Minute, func() bool {
		ls, err := partitionLeaders(ctx, adm, topic)
		if err != nil || len(ls) != partitions {
			return false
		}
		for _, l := range ls {
			if l == gone || l < 0 {
				return false
			}
		}
		return true
	})
	acks = append(acks, produceSync(t, ctx, c, topic, partitions, "after-removal", 120)...)
	c.WaitTopic(t, topic, partitions, 3, time.Minute)
	verifyAcked(t, "after a node joined and another left", readLog(t, ctx, c, topic, partitions), acks)
}

// TestClusterGroupSnapshotInstalledInPlace: a follower killed while a
// partition group's leader took 80 MiB and snapshotted past what it holds
// comes back with its data: the group's snapshot installs on the running
// node in place (only that group's partitions are closed, restored and
// reopened; no restart of the process), and every acknowledged record is
// read back once the group's old leader is killed.
func TestClusterGroupSnapshotInstalledInPlace(t *testing.T) {
	skipClusterInShort(t)
	c := brokertest.StartCluster(t, 3, "--raft-groups", "1", "--raft-snapshot-threshold", "64", "--raft-trailing-logs", "16", "--raft-snapshot-interval", "300ms")
	ctx, cancel := context.WithTimeout(context.Background(), clusterTestTimeout)
	defer cancel()
	const topic, partitions = "group-install", 3
	createClusterTopic(t, ctx, c, topic, partitions, 3)
	c.WaitTopic(t, topic, partitions, 3, time.Minute)
	adm := kadm.NewClient(newClusterClient(t, c))
	leaders, err := partitionLeaders(ctx, adm, topic)
	if err != nil {
		t.Fatal(err)
	}
	leader := leaders[0] // group 1 leads every partition
	var follower int32
	for _, id := range c.IDs() {
		if id != leader {
			follower = id
		}
	}
	acks := produceSync(t, ctx, c, topic, partitions, "before", 120)
	c.Kill(follower)
	// Past raft-wal's 64 MiB segments, so the group's log head is really
	// dropped after its snapshot and the follower needs the snapshot.
	acks = append(acks, produceBulk(t, ctx, c, topic, 80<<20, true)...)
	acks = append(acks, produceSync(t, ctx, c, topic, partitions, "small", 200)...)
	waitSnapshotAt(t, filepath.Join(c.Node(leader).Dir, "groups", "1"), 1, time.Minute)

	c.Restart(follower)
	pid := c.Node(follower).PID()
	c.WaitCaughtUp(t, follower, 3*time.Minute)
	since := sinceRestart(c.Node(follower).LogTail(1 << 30))
	if strings.Count(since, "starting regent") != 1 || c.Node(follower).PID() != pid {
		t.Fatalf("node %d restarted itself to load the snapshot:\n%s", follower, since)
	}
	installed := false
	for _, line := range strings.Split(since, "\n") {
		if strings.Contains(line, "installed a snapshot from the leader in place") && strings.Contains(line, "raft_group=1") {
			installed = true
			t.Logf("node %d: %s", follower, line)
		}
	}
	if !installed {
		t.Fatalf("node %d did not install group 1's snapshot in place:\n%s", follower, since)
	}
	c.Kill(leader)
	testwait.For(t, "partitions led by the others", time.Minute, func() bool {
		ls, err := partitionLeaders(ctx, adm, topic)
		if err != nil || len(ls) != partitions {
			return false
		}
		for _, l := range ls {
			if l == leader || l < 0 {
				return false
			}
		}
		return true
	})
	verifyAcked(t, "after the follower loaded the group's snapshot", readLog(t, ctx, c, topic, partitions), acks)
}
