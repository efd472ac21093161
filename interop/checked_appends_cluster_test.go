package interop_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
)

// TestClusterCheckedAppendsFollowRegentRaftVersion: a cluster's leader
// checks a produce's records before replicating it only while the
// finalized regent.raft.version is 1 (a new cluster's level), since a node
// of an earlier version cannot read a produce replicated as checked. At 1,
// produces of a corrupt batch are refused without a raft entry each; at 0
// (downgraded, as a cluster upgraded from before the feature starts) each
// is replicated and refused by every node at apply, as before. Either way
// the client gets CORRUPT_MESSAGE, and the good records produced under
// both levels are all read back once from every node.
func TestClusterCheckedAppendsFollowRegentRaftVersion(t *testing.T) {
	skipClusterInShort(t)
	c := brokertest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), clusterTestTimeout)
	defer cancel()
	const topic = "checked-appends"
	adm := kadm.NewClient(newClient(t, kgo.SeedBrokers(c.Seeds()...)))
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	leader := c.LeaderID(t)
	leaderClient := newClient(t, kgo.SeedBrokers(c.Node(leader).Addr))
	var topicID [16]byte
	testwait.For(t, "the leader knows the topic", time.Minute, func() bool {
		md, err := adm.Metadata(ctx, topic)
		if err != nil || md.Topics[topic].Err != nil {
			return false
		}
		topicID = md.Topics[topic].ID
		return true
	})

	// produce sends one batch to the leader's partition 0 and returns
	// its answer's error.
	produce := func(records []byte) error {
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 10000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic, rt.TopicID = topic, topicID
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = 0, records
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, leaderClient.Broker(int(leader)))
		if err != nil {
			return err
		}
		rp0 := resp.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(rp0.ErrorCode); err != nil && rp0.ErrorMessage != nil {
			return fmt.Errorf("%w: %s", err, *rp0.ErrorMessage)
		}
		return kerr.ErrorForCode(rp0.ErrorCode)
	}
	corrupt := func(i int) []byte {
		b := plainBatch([]string{fmt.Sprintf("corrupt-%d", i)})
		b[len(b)-1] ^= 0xff // the value changes under the CRC
		return b
	}
	// entriesFor is how far the leader's commit index moves while n
	// corrupt batches are produced one after the other.
	entriesFor := func(n int) uint64 {
		t.Helper()
		before, err := c.Status(leader)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if err := produce(corrupt(i)); !errors.Is(err, kerr.CorruptMessage) {
				t.Fatalf("corrupt batch %d: %v, want CORRUPT_MESSAGE", i, err)
			}
		}
		after, err := c.Status(leader)
		if err != nil {
			t.Fatal(err)
		}
		return after.CommitIndex - before.CommitIndex
	}
	setLevel := func(level int16, upgradeType int8) {
		t.Helper()
		req := kmsg.NewPtrUpdateFeaturesRequest()
		u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
		u.Feature, u.MaxVersionLevel, u.UpgradeType = "regent.raft.version", level, upgradeType
		req.FeatureUpdates = append(req.FeatureUpdates, u)
		resp, err := req.RequestWith(ctx, leaderClient.Broker(int(leader)))
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err != nil {
			t.Fatalf("regent.raft.version=%d: %v", level, err)
		}
		// The leader applies the change before it answers.
	}
	const n = 20
	var good []string
	produceGood := func(prefix string) {
		t.Helper()
		for i := range 5 {
			v := fmt.Sprintf("%s-%d", prefix, i)
			if err := produce(plainBatch([]string{v})); err != nil {
				t.Fatalf("batch %s: %v", v, err)
			}
			good = append(good, v)
		}
	}

	produceGood("level1")
	moved := entriesFor(n)
	t.Logf("regent.raft.version 1: %d corrupt produces, commit index +%d", n, moved)
	if moved >= n/2 {
		t.Fatalf("at regent.raft.version 1, %d corrupt produces moved the commit index by %d: they were replicated", n, moved)
	}
	setLevel(0, 2) // a safe downgrade
	produceGood("level0")
	moved = entriesFor(n)
	t.Logf("regent.raft.version 0: %d corrupt produces, commit index +%d", n, moved)
	if moved < n {
		t.Fatalf("at regent.raft.version 0, %d corrupt produces moved the commit index by only %d: they were not replicated", n, moved)
	}
	setLevel(1, 1)
	produceGood("level1-again")

	// The good records are read back once, in order, and every node
	// holds the same batches at the same offsets.
	got := readLog(t, ctx, c, topic, 1)[0]
	if len(got) != len(good) {
		t.Fatalf("read back %d records, want %d: %v", len(got), len(good), got)
	}
	for i, v := range good {
		if got[int64(i)] != v {
			t.Fatalf("offset %d holds %q, want %q", i, got[int64(i)], v)
		}
	}
	settled(t, c)
	for _, id := range c.IDs() {
		c.Kill(id)
	}
	first := readPartitionDir(t, filepath.Join(c.Node(c.IDs()[0]).Dir, "state", topic+"-0"))
	for _, id := range c.IDs()[1:] {
		other := readPartitionDir(t, filepath.Join(c.Node(id).Dir, "state", topic+"-0"))
		if !maps.EqualFunc(first, other, bytes.Equal) {
			t.Fatalf("node %d's partition differs from the first node's: %d and %d batches", id, len(other), len(first))
		}
	}
}
