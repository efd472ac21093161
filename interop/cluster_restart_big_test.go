package interop_test

import (
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

// TestClusterRestartTimeIndependentOfData (REGENT_BIG_RESTART=1; sizes in
// REGENT_BIG_RESTART_MB, default "200,2048"): a follower holding 200 MiB
// and then 2 GiB of partition data (4 partitions, 64 MiB segments), each
// time just after it took a snapshot, is killed with SIGKILL and started
// again, twice; its start-to-listening and start-to-caught-up times at
// the largest size stay within 1.5x of those at the smallest. Before
// state persisted, a start untarred the whole snapshot.
func TestClusterRestartTimeIndependentOfData(t *testing.T) {
	if os.Getenv("REGENT_BIG_RESTART") != "1" {
		t.Skip("writes gigabytes on three nodes: set REGENT_BIG_RESTART=1")
	}
	sizes := []int{200, 2048}
	if v := os.Getenv("REGENT_BIG_RESTART_MB"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("REGENT_BIG_RESTART_MB: %v", err)
			}
			sizes = append(sizes, n)
		}
	}
	const (
		topic      = "cluster-big-restart"
		partitions = 4
	)
	c := brokertest.StartCluster(t, 3, "--raft-snapshot-threshold", "64", "--raft-snapshot-interval", "500ms")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	createRetentionTopic(t, ctx, clusterAdmin(t, c), topic, partitions, map[string]string{"segment.bytes": strconv.Itoa(64 << 20)})
	c.WaitTopic(t, topic, partitions, 3, time.Minute)
	cl := newClusterClient(t, c, kgo.DefaultProduceTopic(topic))
	defer cl.Close()

	type timing struct{ listen, caughtUp time.Duration }
	best := map[int]timing{}
	produced := 0
	for _, mb := range sizes {
		start := time.Now()
		produceBulk(t, ctx, c, topic, int64(mb-produced)<<20, false)
		t.Logf("produced %d MiB more in %s", mb-produced, time.Since(start).Round(time.Millisecond))
		produced = mb
		leader := c.LeaderID(t)
		var follower int32
		for _, id := range c.IDs() {
			if id != leader {
				follower = id
			}
		}
		for round := range 2 {
			// Right after a snapshot: small entries until the follower
			// took one holding everything it applied so far.
			st, err := c.Status(follower)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; snapshotIndex(c.Node(follower).Dir) < st.StateIndex; i++ {
				if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("tick-" + strconv.Itoa(i))}).FirstErr(); err != nil {
					t.Fatalf("produce: %v", err)
				}
				if i > 10000 {
					t.Fatalf("node %d took no snapshot at state index %d", follower, st.StateIndex)
				}
			}
			dir := c.Node(follower).Dir
			size := dirBytes(t, filepath.Join(dir, "state"))
			c.Kill(follower)
			t0 := time.Now()
			c.Restart(follower)
			listen := time.Since(t0)
			c.WaitCaughtUp(t, follower, 5*time.Minute)
			caught := time.Since(t0)
			since := sinceRestart(c.Node(follower).LogTail(1 << 30))
			t.Logf("%d MiB, round %d: node %d holding %.0f MiB: listening after %s, caught up after %s; %s; %s", mb, round, follower,
				float64(size)/(1<<20), listen.Round(time.Millisecond), caught.Round(time.Millisecond),
				logField(since, "restored the state from a snapshot"), logField(since, "recovered topics"))
			if strings.Contains(since, "restarting the node") {
				t.Fatalf("node %d restarted itself", follower)
			}
			b, ok := best[mb]
			if !ok || listen < b.listen {
				b.listen = listen
			}
			if !ok || caught < b.caughtUp {
				b.caughtUp = caught
			}
			best[mb] = b
		}
	}
	small, big := best[sizes[0]], best[sizes[len(sizes)-1]]
	t.Logf("best of 2: %d MiB listening %s, caught up %s; %d MiB listening %s, caught up %s; ratios %.2f, %.2f",
		sizes[0], small.listen.Round(time.Millisecond), small.caughtUp.Round(time.Millisecond),
		sizes[len(sizes)-1], big.listen.Round(time.Millisecond), big.caughtUp.Round(time.Millisecond),
		big.listen.Seconds()/small.listen.Seconds(), big.caughtUp.Seconds()/small.caughtUp.Seconds())
	if big.caughtUp.Seconds() > 1.5*small.caughtUp.Seconds() {
		t.Errorf("start-to-caught-up with %d MiB is over 1.5x that with %d MiB", sizes[len(sizes)-1], sizes[0])
	}
}

// logField is the last log line containing msg, without its timestamp.
func logField(log, msg string) string {
	lines := strings.Split(log, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], msg) {
			line := strings.TrimSpace(lines[i])
			if j := strings.Index(line, "msg="); j >= 0 {
				return line[j:]
			}
			return line
		}
	}
	return "(no " + msg + ")"
}
