package interop_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
	"github.com/regent-broker/regent/storage"
	"github.com/regent-broker/regent/storage/recordbatch"
)

// TestClusterCompactionSameSurvivorsAfterFailover: compaction goes through
// the raft log (the leader plans a pass in offsets with its clock, every
// node applies it), so after compaction under the first leader, a kill -9
// of it, compaction under the next leader and the old leader's return,
// every node's log holds the same batches, byte for byte (tombstones'
// delete horizons included), at the same offsets. The logs are read from
// the nodes' data directories once the cluster has settled and stopped.
func TestClusterCompactionSameSurvivorsAfterFailover(t *testing.T) {
	const (
		topic      = "cluster-compaction"
		partitions = 2
		perRound   = 1500 // records per round, over the partitions
		keys       = 40   // per partition
	)
	skipClusterInShort(t)
	c := brokertest.StartCluster(t, 3, "--retention-check-interval", "200ms")
	ctx, cancel := context.WithTimeout(context.Background(), clusterTestTimeout)
	defer cancel()
	adm := clusterAdmin(t, c)
	createRetentionTopic(t, ctx, adm, topic, partitions, map[string]string{
		"cleanup.policy":            "compact",
		"segment.ms":                "100", // record timestamps 10 ms apart: a segment per 10 records or so
		"min.cleanable.dirty.ratio": "0.01",
		// Tombstones stay, stamped with their delete horizon: the
		// proposer's clock, so the same bytes on every node.
		"delete.retention.ms": "3600000",
	})
	c.WaitTopic(t, topic, partitions, 3, time.Minute)

	// Record timestamps are set, 10 ms apart, so segments roll by them
	// (segment.ms) and not by how fast the producer goes.
	ts := time.Now().Add(-30 * time.Minute)
	produce := func(round int) {
		t.Helper()
		cl := newClusterClient(t, c, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0))
		defer cl.Close()
		// Small requests: batches of five records per partition, so that
		// many survive compaction in part.
		for chunk := 0; chunk < perRound; chunk += 10 {
			recs := make([]*kgo.Record, 0, 10)
			for i := chunk; i < chunk+10; i++ {
				ts = ts.Add(10 * time.Millisecond)
				r := &kgo.Record{Partition: int32(i % partitions), Key: fmt.Appendf(nil, "k%02d", (i/partitions)%keys),
					Value: fmt.Appendf(nil, "r%d-%d", round, i), Timestamp: ts}
				if i%13 == 5 {
					r.Value = nil // a tombstone
				}
				recs = append(recs, r)
			}
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatalf("produce round %d: %v", round, err)
			}
		}
		// Each round ends with a record of a key of its own in every
		// partition: never superseded, so a reader knows where the round
		// ends even once everything else before it is compacted away.
		for p := range int32(partitions) {
			r := &kgo.Record{Partition: p, Key: fmt.Appendf(nil, "end-%d", round), Value: []byte("end"), Timestamp: ts}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("produce round %d: %v", round, err)
			}
		}
	}
	// compacted waits until the leader serves fewer than half the records
	// of every partition's [from, to).
	compacted := func(what string, from, to map[int32]int64) {
		t.Helper()
		var counts map[int32]int
		testwait.For(t, what, time.Minute, func() bool {
			counts = countRecords(t, ctx, c, topic, from, to)
			for p, n := range counts {
				if int64(n)*2 >= to[p]-from[p] {
					return false
				}
			}
			return len(counts) == partitions
		})
		t.Logf("%s: records served in %v..%v: %v", what, from, to, counts)
	}

	produce(1)
	end1 := endOffsets(t, ctx, adm, topic)
	compacted("compaction under the first leader", map[int32]int64{0: 0, 1: 0}, end1)

	old := c.LeaderID(t)
	c.Kill(old)
	next := c.WaitLeader(t, time.Minute)
	t.Logf("leader %d killed; node %d leads", old, next)
	produce(2)
	end2 := endOffsets(t, ctx, adm, topic)
	compacted("compaction under the next leader", end1, end2)

	c.Restart(old)
	c.WaitCaughtUp(t, old, 2*time.Minute)

	// No further passes: the topic stops being compacted (retention stays
	// off), then every node's state reaches the same index and stays.
	alterTopic(t, ctx, adm, topic, map[string]string{"cleanup.policy": "delete", "retention.ms": "-1"})
	settled(t, c)
	for _, id := range c.IDs() {
		c.Kill(id)
	}

	for p := range int32(partitions) {
		var first map[int64][]byte
		var firstID int32
		for _, id := range c.IDs() {
			got := readPartitionDir(t, filepath.Join(c.Node(id).Dir, "state", fmt.Sprintf("%s-%d", topic, p)))
			if first == nil {
				first, firstID = got, id
				continue
			}
			if a, b := batchOffsets(first), batchOffsets(got); !slices.Equal(a, b) {
				t.Fatalf("partition %d: node %d holds batches at %v, node %d at %v", p, firstID, a, id, b)
			}
			for off, b := range first {
				if !bytes.Equal(got[off], b) {
					t.Fatalf("partition %d: the batch at %d differs between node %d and node %d", p, off, firstID, id)
				}
			}
		}
		recs, tombstones := 0, 0
		for _, b := range first {
			rs, err := recordbatch.Records(b)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rs {
				recs++
				if r.ValueNull {
					tombstones++
				}
			}
		}
		if tombstones == 0 {
			t.Fatalf("partition %d: no tombstone left to compare horizons by", p)
		}
		t.Logf("partition %d: %d batches (%d records, %d tombstones) alike on every node, of %d offsets produced", p, len(first), recs, tombstones, end2[p])
	}
}

// countRecords counts the records the leader serves in every partition's
// [from, to); to-1 must hold a record that compaction keeps.
func countRecords(t *testing.T, ctx context.Context, c *brokertest.Cluster, topic string, from, to map[int32]int64) map[int32]int {
	t.Helper()
	start := map[int32]kgo.Offset{}
	for p, off := range from {
		start[p] = kgo.NewOffset().At(off)
	}
	cl := newClusterClient(t, c, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: start}))
	defer cl.Close()
	counts, done := map[int32]int{}, map[int32]bool{}
	logged := 0
	for len(done) < len(to) {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			t.Fatalf("reading %s: %v", topic, ctx.Err())
		}
		fs.EachError(func(tp string, p int32, err error) { fetchErr(t, &logged, tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < to[r.Partition] {
				counts[r.Partition]++
			}
			if r.Offset >= to[r.Partition]-1 {
				done[r.Partition] = true
			}
		})
	}
	return counts
}

// endOffsets is ListOffsets(latest) of every partition of topic.
func endOffsets(t *testing.T, ctx context.Context, adm *kadm.Client, topic string) map[int32]int64 {
	t.Helper()
	for {
		lo, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = lo.Error()
		}
		if err == nil {
			out := map[int32]int64{}
			lo.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
			return out
		}
		if ctx.Err() != nil || !retriable(err) {
			t.Fatalf("list end offsets of %s: %v", topic, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// alterTopic sets topic configs (IncrementalAlterConfigs), retrying
// retriable errors.
func alterTopic(t *testing.T, ctx context.Context, adm *kadm.Client, topic string, configs map[string]string) {
	t.Helper()
	var alters []kadm.AlterConfig
	for k, v := range configs {
		alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: &v})
	}
	for {
		res, err := adm.AlterTopicConfigs(ctx, alters, topic)
		if err == nil {
			for _, r := range res {
				if r.Err != nil {
					err = r.Err
				}
			}
		}
		if err == nil {
			return
		}
		if ctx.Err() != nil || !retriable(err) {
			t.Fatalf("alter %s: %v", topic, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// settled waits until every node's state has reached the same raft index
// and no node's has moved for a second (commands proposed before it, a
// maintenance pass's included, are applied everywhere).
func settled(t *testing.T, c *brokertest.Cluster) {
	t.Helper()
	var index uint64
	var since time.Time
	var why string
	if !testwait.Until(time.Minute, func() bool {
		var idx uint64
		for i, id := range c.IDs() {
			st, err := c.Status(id)
			if err != nil {
				why = fmt.Sprintf("node %d: %v", id, err)
				return false
			}
			if i > 0 && st.StateIndex != idx {
				why = fmt.Sprintf("node %d at state index %d, node %d at %d", id, st.StateIndex, c.IDs()[0], idx)
				since = time.Time{}
				return false
			}
			idx = st.StateIndex
		}
		if idx != index || since.IsZero() {
			index, since = idx, time.Now()
		}
		why = fmt.Sprintf("every node at %d since %v", index, since)
		return time.Since(since) >= time.Second
	}) {
		t.Fatalf("the cluster did not settle: %s", why)
	}
	t.Logf("cluster settled at state index %d", index)
}

// readPartitionDir reads a stopped node's partition log from its
// directory: every batch's bytes by base offset.
func readPartitionDir(t *testing.T, dir string) map[int64][]byte {
	t.Helper()
	lg, err := storage.Open(dir, storage.Options{RetentionMs: -1, RetentionBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	out := map[int64][]byte{}
	for off := lg.StartOffset(); off < lg.NextOffset(); {
		data, err := lg.Read(off, 1<<20, false)
		if err != nil {
			t.Fatalf("%s: read %d: %v", dir, off, err)
		}
		bs, err := recordbatch.Split(data)
		if err != nil || len(bs) == 0 {
			t.Fatalf("%s: read %d: %d batches, %v", dir, off, len(bs), err)
		}
		for _, b := range bs {
			h, err := recordbatch.ParseHeader(b)
			if err != nil {
				t.Fatal(err)
			}
			out[h.BaseOffset] = slices.Clone(b)
			off = h.LastOffset() + 1
		}
	}
	return out
}

// batchOffsets lists a log's batch base offsets in order.
func batchOffsets(m map[int64][]byte) []int64 {
	out := make([]int64, 0, len(m))
	for off := range m {
		out = append(out, off)
	}
	slices.Sort(out)
	return out
}
