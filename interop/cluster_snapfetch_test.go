package interop_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/regent-broker/regent/interop/brokertest"
)

// TestClusterFollowerPullsOnlyWhatItLacks: a follower holding
// REGENT_SNAPFETCH_HELD_MB MiB (default 96) of a topic is killed; the
// leader takes REGENT_SNAPFETCH_LACK_MB MiB more (default 80: past the
// raft log's 64 MiB segments, so its compaction really drops what the
// follower would need), snapshots and truncates its log. The restarted
// follower installs the leader's snapshot in place, receiving from the
// leader about the bytes it lacked (the segments rolled since, 16 MiB
// each, and the tails of the ones it held the start of), not the whole
// snapshot: its "snapshot files received" log line says how many bytes
// it pulled, linked and copied locally. It then holds the leader's logs
// byte for byte, and serves every acknowledged record once it leads.
// Above 256 MiB in all the records are not checked one by one (the
// measurement runs: REGENT_SNAPFETCH_HELD_MB=1843 REGENT_SNAPFETCH_LACK_MB=205).
func TestClusterFollowerPullsOnlyWhatItLacks(t *testing.T) {
	skipClusterInShort(t)
	heldMB, lackMB := envMB(t, "REGENT_SNAPFETCH_HELD_MB", 96), envMB(t, "REGENT_SNAPFETCH_LACK_MB", 80)
	track := heldMB+lackMB <= 256
	const (
		topic      = "cluster-snapfetch"
		partitions = 3
	)
	c := brokertest.StartCluster(t, 3, "--raft-snapshot-threshold", "64", "--raft-trailing-logs", "16", "--raft-snapshot-interval", "300ms")
	ctx, cancel := context.WithTimeout(context.Background(), clusterTestTimeout+time.Duration(heldMB+lackMB)*200*time.Millisecond)
	defer cancel()
	createRetentionTopic(t, ctx, clusterAdmin(t, c), topic, partitions, map[string]string{"segment.bytes": strconv.Itoa(16 << 20)})
	c.WaitTopic(t, topic, partitions, 3, time.Minute)
	leader := c.LeaderID(t)
	var follower int32
	for _, id := range c.IDs() {
		if id != leader {
			follower = id
		}
	}
	start := time.Now()
	acks := produceBulkAs(t, ctx, c, topic, "held", int64(heldMB)<<20, track)
	t.Logf("produced %d MiB in %s", heldMB, time.Since(start).Round(time.Millisecond))
	cl := newClusterClient(t, c, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer cl.Close()
	// Small entries until node snapshotted all it applied so far: a node
	// restarts from its last snapshot (what it applied after that is cut
	// off at start, and the leader's snapshot arrives before it could
	// apply it again), so that is what it holds.
	small := 0
	snapshotAll := func(node int32) {
		t.Helper()
		st, err := c.Status(node)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; publishedSnapshotIndex(c.Node(node).Dir) < st.StateIndex; i++ {
			rec := &kgo.Record{Partition: int32(small % partitions), Value: []byte("small-" + strconv.Itoa(small))}
			small++
			if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
				t.Fatalf("produce %s: %v", rec.Value, err)
			}
			acks = append(acks, acked{rec.Partition, rec.Offset, string(rec.Value)})
			if i > 10000 {
				t.Fatalf("node %d took no snapshot at state index %d", node, st.StateIndex)
			}
		}
	}
	c.WaitCaughtUp(t, follower, 5*time.Minute)
	snapshotAll(follower)
	c.Kill(follower)
	dir := c.Node(follower).Dir
	held := segmentBytes(t, dir, topic, partitions)

	start = time.Now()
	acks = append(acks, produceBulkAs(t, ctx, c, topic, "lacked", int64(lackMB)<<20, track)...)
	t.Logf("produced %d MiB more with node %d down in %s", lackMB, follower, time.Since(start).Round(time.Millisecond))
	// The leader snapshots past all of it and compacts its log after it.
	snapshotAll(leader)
	if l := c.LeaderID(t); l != leader {
		t.Fatalf("leadership moved from %d to %d", leader, l)
	}
	total := segmentBytes(t, c.Node(leader).Dir, topic, partitions)

	start = time.Now()
	c.Restart(follower)
	c.WaitCaughtUp(t, follower, 5*time.Minute)
	caughtUp := time.Since(start)
	since := sinceRestart(c.Node(follower).LogTail(1 << 30))
	line := ""
	for _, l := range strings.Split(since, "\n") {
		if strings.Contains(l, "snapshot files received") {
			line = l
		}
		if strings.Contains(l, "snapshot files received") || strings.Contains(l, "installed a snapshot from the leader in place") {
			t.Logf("node %d: %s", follower, l)
		}
	}
	if line == "" {
		t.Fatalf("node %d caught up without receiving a snapshot (the leader still had its log?):\n%s", follower, since)
	}
	if strings.Contains(since, "restarting the node") || strings.Count(since, "starting regent") != 1 {
		t.Fatalf("node %d restarted itself to load the snapshot:\n%s", follower, since)
	}
	pulled, data := logInt(t, line, "pulled_bytes"), logInt(t, line, "data_bytes")
	linked, copied := logInt(t, line, "linked_bytes"), logInt(t, line, "copied_bytes")
	lacked := total - held
	t.Logf("node %d held %.1f MiB of the topic's %.1f MiB (lacked %.1f MiB); the snapshot named %.1f MiB: pulled %.1f MiB, linked %.1f MiB, copied locally %.1f MiB; caught up %s after the restart",
		follower, mibf(held), mibf(total), mibf(lacked), mibf(data), mibf(pulled), mibf(linked), mibf(copied), caughtUp.Round(time.Millisecond))
	// What it lacked of the topic, its other state files (a few KiB), and
	// slack for the records the snapshot holds beyond what total counted.
	if pulled > lacked+lacked/4+(4<<20) || pulled < lacked/2 {
		t.Fatalf("node %d pulled %d bytes; it lacked %d", follower, pulled, lacked)
	}
	if linked+copied < held/2 {
		t.Fatalf("node %d reused %d bytes of the %d it held", follower, linked+copied, held)
	}

	for p := 0; p < partitions; p++ {
		part := topic + "-" + strconv.Itoa(p)
		if want, got := logDigest(t, c.Node(leader).Dir, part), logDigest(t, dir, part); want != got {
			t.Fatalf("%s: follower %d's log (%s) differs from leader %d's (%s)", part, follower, got, leader, want)
		}
	}
	// Its reads: the other two nodes down, then one of them back, until
	// it is elected with that one (it was running first, so its election
	// timer usually fires first).
	var other int32
	for _, id := range c.IDs() {
		if id != leader && id != follower {
			other = id
		}
	}
	c.Kill(leader)
	c.Kill(other)
	next, downs := int32(-1), []int32{other, leader}
	for round := 0; next != follower && round < 4; round++ {
		back := downs[round%2]
		c.Restart(back)
		next = c.WaitLeader(t, time.Minute)
		t.Logf("nodes %d and %d up: node %d leads", follower, back, next)
		if next != follower {
			c.Kill(back)
		}
	}
	if next != follower {
		t.Logf("note: node %d never led: its reads were not checked on their own", follower)
		return
	}
	c.WaitTopic(t, topic, partitions, 2, time.Minute)
	if track {
		verifyAcked(t, fmt.Sprintf("read from node %d, which pulled what it lacked", follower), readLog(t, ctx, c, topic, partitions), acks)
	}
}

func envMB(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive number of MiB", name, v)
	}
	return n
}

func mibf(n int64) float64 { return float64(n) / (1 << 20) }

// logInt reads key=N (or "key":N) from a log line.
func logInt(t *testing.T, line, key string) int64 {
	t.Helper()
	m := regexp.MustCompile(`"?` + regexp.QuoteMeta(key) + `"?[=:](\d+)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no %s in %q", key, line)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}

// segmentBytes sums the sizes of a topic's segment files in a node's
// state directory.
func segmentBytes(t *testing.T, dataDir, topic string, partitions int) int64 {
	t.Helper()
	var n int64
	for p := 0; p < partitions; p++ {
		segs, err := filepath.Glob(filepath.Join(dataDir, "state", topic+"-"+strconv.Itoa(p), "*.log"))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range segs {
			fi, err := os.Stat(s)
			if err != nil {
				t.Fatal(err)
			}
			n += fi.Size()
		}
	}
	return n
}

// logDigest hashes a partition's segment files in a node's state
// directory, in name (base offset) order, without holding them in memory.
func logDigest(t *testing.T, dataDir, partition string) string {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dataDir, "state", partition, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	var n int64
	for _, s := range segs {
		f, err := os.Open(s)
		if err != nil {
			t.Fatal(err)
		}
		w, err := io.Copy(h, f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		n += w
	}
	return fmt.Sprintf("%d bytes, sha256 %x", n, h.Sum(nil)[:8])
}

// publishedSnapshotIndex is the highest state index of the snapshots
// dataDir's node has published (0: none); one being written (its .tmp
// directory already holds its manifest) does not count.
func publishedSnapshotIndex(dataDir string) uint64 {
	snaps := filepath.Join(dataDir, "raft", "snapshots")
	ents, _ := os.ReadDir(snaps)
	var best uint64
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		m, err := os.ReadFile(filepath.Join(snaps, e.Name(), "manifest.json"))
		if err != nil {
			continue
		}
		var v struct {
			StateIndex uint64 `json:"state_index"`
		}
		if json.Unmarshal(m, &v) == nil && v.StateIndex > best {
			best = v.StateIndex
		}
	}
	return best
}

// produceBulkAs is produceBulk with values named after prefix, so two
// rounds into one topic do not repeat values.
func produceBulkAs(t *testing.T, ctx context.Context, c *brokertest.Cluster, topic, prefix string, total int64, track bool) []acked {
	t.Helper()
	cl := newClusterClient(t, c, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(1<<16), kgo.ProducerBatchCompression(kgo.NoCompression()))
	defer cl.Close()
	pad := bytes.Repeat([]byte("x"), 1000)
	var mu sync.Mutex
	var acks []acked
	var firstErr error
	for i := int64(0); i < total/1024; i++ {
		val := append(fmt.Appendf(make([]byte, 0, 1024), "%s-%012d-", prefix, i), pad...)
		cl.Produce(ctx, &kgo.Record{Value: val}, func(r *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil && firstErr == nil:
				firstErr = err
			case err == nil && track:
				acks = append(acks, acked{r.Partition, r.Offset, string(r.Value)})
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("bulk produce: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if firstErr != nil {
		t.Fatalf("bulk produce: %v", firstErr)
	}
	return acks
}
