package interop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
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

// TestClusterFollowerRejoinsWithDeletedData: a follower whose data
// directory was deleted comes back with the same command line; the leader,
// which snapshotted and dropped the log it would need, sends it a
// snapshot, which it loads before opening its state: no restart of the
// process. It then holds the leader's logs byte for byte and, with the
// old leader killed, every acknowledged record.
//
// It first writes REGENT_BIG_REJOIN_MB MiB (default 80) of 1 KiB records:
// past the raft log's 64 MiB segments, so the leader's compaction really
// drops the log's head (raft-wal keeps serving compacted entries of its
// tail segment) and the follower needs the snapshot. The catch-up rate is
// logged; above 256 MiB the records are not checked one by one.
// REGENT_TEST_REJOIN_LOG=1 logs the nodes' raft and snapshot lines.
func TestClusterFollowerRejoinsWithDeletedData(t *testing.T) { testFollowerRejoin(t, true) }

// TestClusterRestartedFollowerLoadsSnapshot: a follower killed while the
// leader took 80 MiB and snapshotted past what it has comes back with its
// data; it opens its own (persisted) state at start, and the leader's
// snapshot installs on the running node in place: it closes its state,
// re-links the received files and reopens it, without restarting (one
// start in its log, the same pid), then catches up as above.
func TestClusterRestartedFollowerLoadsSnapshot(t *testing.T) { testFollowerRejoin(t, false) }

func testFollowerRejoin(t *testing.T, wipe bool) {
	const partitions = 3
	topic := "cluster-rejoin"
	if !wipe {
		topic = "cluster-restart"
	}
	skipClusterInShort(t)
	bigMB := 80
	if v, err := strconv.Atoi(os.Getenv("REGENT_BIG_REJOIN_MB")); err == nil && v > 0 {
		bigMB = v
	}
	track := bigMB <= 256
	c := brokertest.StartCluster(t, 3, "--raft-snapshot-threshold", "64", "--raft-trailing-logs", "16", "--raft-snapshot-interval", "300ms")
	ctx, cancel := context.WithTimeout(context.Background(), clusterTestTimeout+time.Duration(bigMB)*100*time.Millisecond)
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
	if !wipe {
		c.Kill(follower)
	}
	start := time.Now()
	acks = append(acks, produceBulk(t, ctx, c, topic, int64(bigMB)<<20, track)...)
	t.Logf("produced %d MiB in %s", bigMB, time.Since(start).Round(time.Millisecond))
	// Many small entries (each synchronous produce is at least one), so
	// the leader snapshots and drops its log's head.
	cl := newClusterClient(t, c, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer cl.Close()
	for i := range 200 {
		rec := &kgo.Record{Partition: int32(i % partitions), Value: []byte("small-" + strconv.Itoa(i))}
		if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatalf("produce small-%d: %v", i, err)
		}
		acks = append(acks, acked{rec.Partition, rec.Offset, string(rec.Value)})
	}
	if l := c.LeaderID(t); l != leader {
		t.Fatalf("leadership moved from %d to %d", leader, l)
	}
	// Any snapshot: the leader compacts its log after it, so a node with
	// nothing needs the snapshot.
	waitSnapshotAt(t, c.Node(leader).Dir, 1, time.Minute)

	dir := c.Node(follower).Dir
	if wipe {
		c.Kill(follower)
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	start = time.Now()
	c.Restart(follower)
	listening := time.Since(start)
	pid := c.Node(follower).PID()
	c.WaitCaughtUp(t, follower, 5*time.Minute)
	caughtUp := time.Since(start)
	size := dirBytes(t, filepath.Join(dir, "state"))
	t.Logf("node %d (data deleted: %v): listening after %s, caught up after %s; state %.1f MiB, %.1f MiB/s from the restart",
		follower, wipe, listening.Round(time.Millisecond), caughtUp.Round(time.Millisecond), float64(size)/(1<<20), float64(size)/(1<<20)/caughtUp.Seconds())
	since := sinceRestart(c.Node(follower).LogTail(1 << 30))
	for _, line := range strings.Split(since, "\n") {
		if strings.Contains(line, "waiting for the leader") || strings.Contains(line, "heard from the leader") ||
			strings.Contains(line, "restored the state") || strings.Contains(line, "copied to local snapshot") ||
			strings.Contains(line, "snapshot files received") || (os.Getenv("REGENT_TEST_REJOIN_LOG") != "" && strings.Contains(line, "raft")) {
			t.Logf("node %d: %s", follower, line)
		}
	}
	// A re-exec keeps the pid: the log says whether the process started
	// again.
	restarted := strings.Contains(since, "restarting the node") || strings.Count(since, "starting regent") != 1
	if restarted || c.Node(follower).PID() != pid {
		t.Fatalf("node %d restarted itself to load the snapshot (pid %d, now %d):\n%s", follower, pid, c.Node(follower).PID(), since)
	}
	if !wipe {
		// Its state was open: the leader's snapshot must have been
		// installed on the running node.
		if !strings.Contains(since, "installed a snapshot from the leader in place") {
			t.Fatalf("node %d did not install the leader's snapshot in place:\n%s", follower, since)
		}
		for _, line := range strings.Split(since, "\n") {
			if strings.Contains(line, "installed a snapshot from the leader in place") || strings.Contains(line, "state reopened on the installed snapshot") {
				t.Logf("node %d: %s", follower, line)
			}
		}
	}
	if os.Getenv("REGENT_TEST_REJOIN_LOG") != "" {
		for _, line := range strings.Split(c.Node(leader).LogTail(1<<30), "\n") {
			if strings.Contains(line, "snapshot") || strings.Contains(line, "compacting") {
				t.Logf("leader %d: %s", leader, line)
			}
		}
	}
	if !strings.Contains(since, "restored the state from a snapshot") && !strings.Contains(since, "installed a snapshot from the leader in place") {
		t.Logf("note: node %d caught up from the log, without a snapshot (the leader still had its log)", follower)
	}
	if m := regexp.MustCompile(`copied to local snapshot.{0,40}bytes\S*?(\d+)`).FindStringSubmatch(since); m != nil {
		t.Logf("snapshot received: %s bytes", m[1])
	}
	for p := 0; p < partitions; p++ {
		part := topic + "-" + strconv.Itoa(p)
		want, got := logBytes(t, c.Node(leader).Dir, part), logBytes(t, dir, part)
		if !bytes.Equal(want, got) {
			t.Fatalf("%s: follower %d holds %d log bytes, leader %d holds %d, and they differ", part, follower, len(got), leader, len(want))
		}
	}
	c.Kill(leader)
	next := c.WaitLeader(t, time.Minute)
	t.Logf("leader %d killed; node %d leads", leader, next)
	if next == leader {
		t.Fatalf("killed leader %d still leads", leader)
	}
	c.WaitTopic(t, topic, partitions, 2, time.Minute)
	if track {
		verifyAcked(t, fmt.Sprintf("after the follower rejoined (data deleted: %v)", wipe), readLog(t, ctx, c, topic, partitions), acks)
	}
	// The rejoined node must serve what it loaded: until it leads (each
	// election is between it and one other node, so a few rounds), bring
	// the killed leader back and kill the one leading instead.
	down := leader
	for round := 0; next != follower && round < 4; round++ {
		c.Restart(down)
		c.WaitCaughtUp(t, down, time.Minute)
		c.Kill(next)
		down = next
		next = c.WaitLeader(t, time.Minute)
		t.Logf("node %d killed; node %d leads", down, next)
	}
	if next != follower {
		t.Logf("note: node %d never led: its reads were not checked on their own", follower)
		return
	}
	c.WaitTopic(t, topic, partitions, 2, time.Minute)
	if track {
		verifyAcked(t, fmt.Sprintf("read from node %d, which rejoined (data deleted: %v)", follower, wipe), readLog(t, ctx, c, topic, partitions), acks)
	}
}

// produceBulk writes about total bytes of 1 KiB records (each value
// unique), spread over the topic's partitions, at acks=all, and returns
// their acks if track.
func produceBulk(t *testing.T, ctx context.Context, c *brokertest.Cluster, topic string, total int64, track bool) []acked {
	t.Helper()
	cl := newClusterClient(t, c, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(1<<16), kgo.ProducerBatchCompression(kgo.NoCompression()))
	defer cl.Close()
	pad := bytes.Repeat([]byte("x"), 1000)
	errc := make(chan error, 1)
	var mu sync.Mutex
	var acks []acked
	for i := int64(0); i < total/1024; i++ {
		val := append(fmt.Appendf(make([]byte, 0, 1024), "bulk-%012d-", i), pad...)
		cl.Produce(ctx, &kgo.Record{Value: val}, func(r *kgo.Record, err error) {
			if err != nil {
				select {
				case errc <- err:
				default:
				}
				return
			}
			if track {
				mu.Lock()
				acks = append(acks, acked{r.Partition, r.Offset, string(r.Value)})
				mu.Unlock()
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("bulk produce: %v", err)
	}
	select {
	case err := <-errc:
		t.Fatalf("bulk produce: %v", err)
	default:
	}
	return acks
}

// waitSnapshotAt waits until the node in dataDir stored a snapshot holding
// state index index or later.
func waitSnapshotAt(t *testing.T, dataDir string, index uint64, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if snapshotIndex(dataDir) >= index {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no snapshot at state index %d or later in %s within %s", index, dataDir, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// snapshotIndex is the highest state index of the snapshots stored in
// dataDir (0: none).
func snapshotIndex(dataDir string) uint64 {
	snaps := filepath.Join(dataDir, "raft", "snapshots")
	ents, _ := os.ReadDir(snaps)
	var best uint64
	for _, e := range ents {
		raw, err := os.ReadFile(filepath.Join(snaps, e.Name(), "manifest.json"))
		if err != nil {
			continue
		}
		var m struct {
			StateIndex uint64 `json:"state_index"`
		}
		if json.Unmarshal(raw, &m) == nil && m.StateIndex > best {
			best = m.StateIndex
		}
	}
	return best
}

func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// sinceRestart is a node's log after its last restart.
func sinceRestart(log string) string {
	if i := strings.LastIndex(log, "===== brokertest: restarted at"); i >= 0 {
		return log[i:]
	}
	return log
}
