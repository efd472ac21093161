//go:build linux

package interop_test

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
)

// TestClusterDiskFullNode: one node of 3 (the leader or a follower, as
// the election goes) keeps its data on a 100 MiB tmpfs, and an idempotent
// producer (acks=all) writes until that disk is full. The node must not
// go on without what it could not write (a partition missing committed
// records would take the next ones at other offsets than the other
// nodes): it stops (exit status 74) or, when its
// raft log is what filled, stays behind, while the other two go on
// acknowledging. Then its disk grows (the "fix"), it is restarted if it
// stopped, and it catches up: every acknowledged record is read back once,
// and its partition files are byte for byte the other nodes'.
func TestClusterDiskFullNode(t *testing.T) {
	const (
		topic      = "disk-full"
		partitions = 3
		valueBytes = 16 << 10
		maxRecords = 6000 // ~96 MiB: past the small disk whatever it holds
	)
	skipClusterInShort(t)
	small := smallDisk(t, "100m")
	const sick = int32(3)
	c := brokertest.StartClusterPrepared(t, 3, func(n *brokertest.Node) {
		if n.ID == sick {
			n.Dir = filepath.Join(small, "node")
			if err := os.MkdirAll(n.Dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), clusterTestTimeout)
	defer cancel()
	createClusterTopic(t, ctx, c, topic, partitions, 3)
	c.WaitTopic(t, topic, partitions, 3, time.Minute)

	cl := newClusterClient(t, c, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordDeliveryTimeout(time.Minute),
		kgo.ProduceRequestTimeout(5*time.Second), kgo.MetadataMaxAge(time.Second))
	var got ackLog
	leaderAtStart := c.LeaderID(t)
	sem := make(chan struct{}, 64)
	pad := make([]byte, valueBytes/2)
	stoppedAt := -1
	var stopStatus string
	for i := 0; i < maxRecords; i++ {
		if stopStatus == "" {
			if gone, st := c.Node(sick).Exited(); gone {
				stoppedAt, stopStatus = i, st
			}
		}
		_, _ = crand.Read(pad)
		v := fmt.Sprintf("rec-%06d-%s", i, hex.EncodeToString(pad))
		sem <- struct{}{}
		cl.Produce(ctx, &kgo.Record{Partition: int32(i % partitions), Value: []byte(v)}, func(r *kgo.Record, err error) {
			defer func() { <-sem }()
			got.add(r, err)
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	acks, firstErrs := got.get()
	nAcked := len(acks)
	var free syscall.Statfs_t
	_ = syscall.Statfs(small, &free)
	gone, st := c.Node(sick).Exited()
	if gone && stopStatus == "" {
		stopStatus = st
	}
	t.Logf("leader at the start: node %d; %d of %d records acknowledged (errors: %v); node %d's disk has %d KiB free; node %d stopped: %v (%s, after %d records sent)",
		leaderAtStart, nAcked, maxRecords, firstErrs, sick, free.Bavail*uint64(free.Bsize)>>10, sick, gone, stopStatus, stoppedAt)
	if nAcked != maxRecords {
		t.Errorf("the two nodes with room acknowledged %d of %d records", nAcked, maxRecords)
	}
	if gone {
		if !strings.Contains(stopStatus, "exit status 74") {
			t.Errorf("node %d exited with %q, want exit status 74 (a storage failure)", sick, stopStatus)
		}
		if !strings.Contains(c.Node(sick).LogTail(20000), "could not be applied on this node's storage") {
			t.Errorf("node %d's log does not say why it stopped:\n%s", sick, c.Node(sick).LogTail(4000))
		}
	}

	// The disk grows; the node, restarted if it stopped, catches up.
	if err := syscall.Mount("tmpfs", small, "tmpfs", syscall.MS_REMOUNT, "size=1g"); err != nil {
		t.Fatalf("grow the tmpfs: %v", err)
	}
	if gone {
		c.Restart(sick)
	}
	c.WaitCaughtUp(t, sick, 2*time.Minute)

	log := readLog(t, ctx, c, topic, partitions, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	verifyAcked(t, "records produced while a node's disk filled", log, acks)
	testwait.For(t, fmt.Sprintf("node %d's partition files to match node 1's", sick), time.Minute, func() bool {
		return samePartitionFiles(t, c.Node(1).Dir, c.Node(sick).Dir, topic, partitions) == ""
	})
}

// TestDiskFullSingleNode: a single node keeps its data on a 40 MiB tmpfs
// and an idempotent producer (acks=all) sends more than fits. Once the
// disk is full the node answers KAFKA_STORAGE_ERROR (the producer retries),
// says so in its log, and stays up, serving reads; once the disk grows the
// retried records are taken, and after a restart every acknowledged record
// is there, once, at its offset.
func TestDiskFullSingleNode(t *testing.T) {
	const (
		topic      = "disk-full-single"
		partitions = 3
		valueBytes = 16 << 10
		records    = 4000 // ~64 MiB
	)
	dir := smallDisk(t, "40m")
	b := brokertest.StartIn(t, filepath.Join(dir, "data"), fmt.Sprintf("127.0.0.1:%d", brokertest.FreePort(t)))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	newClient := clientsOf(t, b.Addr)
	admCl := newClient()
	defer admCl.Close()
	if _, err := kadm.NewClient(admCl).CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	cl := newClient(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordDeliveryTimeout(2*time.Minute))
	defer cl.Close()
	var got ackLog
	pad := make([]byte, valueBytes/2)
	for i := range records {
		_, _ = crand.Read(pad)
		v := fmt.Sprintf("rec-%06d-%s", i, hex.EncodeToString(pad))
		cl.Produce(ctx, &kgo.Record{Partition: int32(i % partitions), Value: []byte(v)}, got.add)
	}
	testwait.For(t, "the broker to log that its storage refused appends", time.Minute, func() bool {
		return strings.Contains(b.LogTail(1<<20), "append failed on this node's storage")
	})
	acked0, _ := got.get()
	before := len(acked0)
	// Full, it stays up and serves: the acknowledged records' end offsets.
	if gone, st := b.Exited(); gone {
		t.Fatalf("the broker exited with its disk full: %s", st)
	}
	ends, err := kadm.NewClient(admCl).ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("list end offsets with the disk full: %v", err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT, "size=1g"); err != nil {
		t.Fatalf("grow the tmpfs: %v", err)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	all, errs := got.get()
	t.Logf("%d records acknowledged when the disk filled, %d of %d once it grew (errors: %v)", before, len(all), records, errs)
	if len(all) != records {
		t.Errorf("%d of %d records acknowledged after the disk grew", len(all), records)
	}
	b.Kill()
	b.Restart()
	verifyAcked(t, "records produced while the disk filled, after a restart", readLogWith(t, ctx, newClient, topic, partitions), all)
}

// clientsOf returns a maker of kgo clients seeded with addr (a test fails
// if one cannot be made); the caller closes them.
func clientsOf(t *testing.T, addr string) func(...kgo.Opt) *kgo.Client {
	return func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
}

// ackLog collects a producer's acknowledgements and its first errors;
// add is a kgo promise, safe from any goroutine.
type ackLog struct {
	mu   sync.Mutex
	acks []acked
	errs []string
}

func (l *ackLog) add(r *kgo.Record, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		if len(l.errs) < 5 {
			l.errs = append(l.errs, err.Error())
		}
		return
	}
	l.acks = append(l.acks, acked{partition: r.Partition, offset: r.Offset, value: string(r.Value)})
}

// get returns copies of what add collected.
func (l *ackLog) get() ([]acked, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.acks), slices.Clone(l.errs)
}

// smallDisk mounts a tmpfs of size (mount's size= option) on a new
// directory, unmounted when the test ends (after its brokers, whose
// cleanups it precedes), and returns the directory. It skips the test
// where mounting is not allowed (not root).
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	dir := filepath.Join(t.TempDir(), "small")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("mount a tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// samePartitionFiles compares the segment files of topic's partitions in
// two nodes' data directories and describes the first difference ("" if
// none).
func samePartitionFiles(t *testing.T, a, b, topic string, partitions int) string {
	t.Helper()
	for p := range partitions {
		pa := filepath.Join(a, "state", fmt.Sprintf("%s-%d", topic, p))
		pb := filepath.Join(b, "state", fmt.Sprintf("%s-%d", topic, p))
		files, err := filepath.Glob(filepath.Join(pa, "*.log"))
		if err != nil || len(files) == 0 {
			return fmt.Sprintf("%s: no segment files (%v)", pa, err)
		}
		for _, f := range files {
			x, err := os.ReadFile(f)
			if err != nil {
				return err.Error()
			}
			y, err := os.ReadFile(filepath.Join(pb, filepath.Base(f)))
			if err != nil {
				return err.Error()
			}
			if string(x) != string(y) {
				return fmt.Sprintf("%s: %d bytes here, %d there, not the same", filepath.Base(f), len(x), len(y))
			}
		}
	}
	return ""
}
