package interop_test

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
	"github.com/regent-broker/regent/storage"
)

// TestClusterFollowersDropAppendedPages: on a 3-node cluster, 40 MiB
// produced to one partition stay in the leader's page cache, while each
// follower, which serves no reads, keeps only about the last 8 MiB of it
// cached (storage/dropbehind.go); every node holds all the bytes on disk.
// After the leader is killed and restarts as a follower, and 40 MiB more
// are produced, the new leader keeps what it appended and the old one
// keeps only the last window.
func TestClusterFollowersDropAppendedPages(t *testing.T) {
	const (
		topic = "cluster-drop-behind"
		total = 40 << 20
		value = 64 << 10
	)
	skipClusterInShort(t)
	c := brokertest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), clusterTestTimeout)
	defer cancel()
	adm := clusterAdmin(t, c)
	createRetentionTopic(t, ctx, adm, topic, 1, map[string]string{"retention.ms": "-1"})
	c.WaitTopic(t, topic, 1, 3, time.Minute)

	cl := newClusterClient(t, c, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchMaxBytes(1<<20),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	defer cl.Close()
	val := bytes.Repeat([]byte{'d'}, value)
	produce := func() {
		t.Helper()
		for sent := 0; sent < total; sent += 16 * value {
			recs := make([]*kgo.Record, 16)
			for i := range recs {
				recs[i] = &kgo.Record{Value: val}
			}
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
	}
	produce()
	leader := c.LeaderID(t)

	// segmentBytes sums the sizes and cached bytes of the partition's
	// segment files on a node (each file once: snapshots hard-link them).
	segmentBytes := func(id int32) (cached, size int64) {
		var seen []os.FileInfo
		_ = filepath.WalkDir(c.Node(id).Dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".log") || filepath.Base(filepath.Dir(path)) != topic+"-0" {
				return nil
			}
			info, err := d.Info()
			if err != nil {
				return nil
			}
			for _, s := range seen {
				if os.SameFile(s, info) {
					return nil
				}
			}
			seen = append(seen, info)
			in, n, err := storage.CachedBytes(path)
			if err != nil {
				t.Errorf("node %d: %v", id, err)
				return nil
			}
			cached += in
			size += n
			return nil
		})
		return cached, size
	}
	// check waits until every node's segments hold want bytes, then
	// wants the leader to keep at least leaderKeeps of them cached and a
	// follower at most the last window (16 MiB with slack).
	check := func(leader int32, want, leaderKeeps int64) {
		t.Helper()
		for _, id := range c.IDs() {
			// Followers apply what is committed a little later.
			testwait.For(t, "every node's segments hold what was produced", time.Minute, func() bool {
				_, size := segmentBytes(id)
				return size >= want
			})
			cached, size := segmentBytes(id)
			t.Logf("node %d (leader %v): %d of %d segment bytes cached", id, id == leader, cached, size)
			if id == leader && cached < leaderKeeps {
				t.Errorf("leader %d: %d of %d segment bytes cached, want at least %d", id, cached, size, leaderKeeps)
			}
			if id != leader && cached > 16<<20 {
				t.Errorf("follower %d: %d of %d segment bytes cached, want at most the last window", id, cached, size)
			}
		}
	}
	check(leader, total, total*9/10)

	c.Kill(leader)
	c.Restart(leader)
	c.WaitCaughtUp(t, leader, 2*time.Minute)
	newLeader := c.WaitLeader(t, time.Minute)
	produce()
	check(newLeader, 2*total, total*9/10)
}
