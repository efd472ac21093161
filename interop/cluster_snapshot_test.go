package interop_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/regent-broker/regent/interop/brokertest"
)

// TestClusterFollowerCatchesUpFromSnapshot: a follower that was down while
// the leader snapshotted and dropped the log it missed is sent the
// snapshot when it comes back, restarts itself to load it, catches up, and
// then holds every acknowledged record: with the old leader killed, the
// log read from the two others is complete.
func TestClusterFollowerCatchesUpFromSnapshot(t *testing.T) {
	const (
		topic      = "cluster-snapshot"
		partitions = 3
	)
	skipClusterInShort(t)
	c := brokertest.StartCluster(t, 3, "--raft-snapshot-threshold", "64", "--raft-trailing-logs", "16", "--raft-snapshot-interval", "300ms")
	ctx, cancel := context.WithTimeout(context.Background(), clusterTestTimeout)
	defer cancel()
	createClusterTopic(t, ctx, c, topic, partitions, 3)
	c.WaitTopic(t, topic, partitions, 3, time.Minute)
	acks := produceSync(t, ctx, c, topic, partitions, "before", 300)

	leader := c.LeaderID(t)
	var follower int32
	for _, id := range c.IDs() {
		if id != leader {
			follower = id
		}
	}
	c.Kill(follower)
	// Many small entries: each synchronous produce is at least one.
	cl := newClusterClient(t, c, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer cl.Close()
	small := func(prefix string, n int) {
		for i := 0; i < n; i++ {
			rec := &kgo.Record{Partition: int32(i % partitions), Value: []byte(prefix + "-" + strconv.Itoa(i))}
			if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
				t.Fatalf("produce %s-%d: %v", prefix, i, err)
			}
			acks = append(acks, acked{rec.Partition, rec.Offset, string(rec.Value)})
		}
	}
	small("while-down", 400)
	snapDir := filepath.Join(c.Node(leader).Dir, "raft", "snapshots")
	deadline := time.Now().Add(time.Minute)
	for {
		ents, _ := os.ReadDir(snapDir)
		if len(ents) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("leader %d took no snapshot within a minute", leader)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// More entries after the snapshot, so the follower needs both.
	small("after-snapshot", 100)

	c.Restart(follower)
	c.WaitCaughtUp(t, follower, 2*time.Minute)
	if !strings.Contains(c.Node(follower).LogTail(1<<20), "installing a snapshot") {
		t.Logf("note: node %d caught up without a snapshot install (the leader still had its log)", follower)
	}
	// Applying is deterministic: the follower's partition logs are the
	// leader's, byte for byte.
	for p := 0; p < partitions; p++ {
		part := topic + "-" + strconv.Itoa(p)
		want, got := logBytes(t, c.Node(leader).Dir, part), logBytes(t, c.Node(follower).Dir, part)
		if !bytes.Equal(want, got) {
			t.Fatalf("%s: follower %d holds %d log bytes, leader %d holds %d, and they differ", part, follower, len(got), leader, len(want))
		}
	}
	c.Kill(leader)
	next := c.WaitLeader(t, time.Minute)
	t.Logf("leader %d killed; node %d leads; node %d came back from a snapshot", leader, next, follower)
	c.WaitTopic(t, topic, partitions, 2, time.Minute)
	verifyAcked(t, "after the follower caught up from a snapshot", readLog(t, ctx, c, topic, partitions), acks)
}

// logBytes concatenates a partition's segment files in a node's state
// directory, in name (base offset) order.
func logBytes(t *testing.T, dataDir, partition string) []byte {
	t.Helper()
	dir := filepath.Join(dataDir, "state", partition)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	var out []byte
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".log") {
			raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, raw...)
		}
	}
	return out
}
