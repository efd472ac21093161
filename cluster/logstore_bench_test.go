package cluster

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/regent-broker/regent/interop/testwait"
)

// The raft log store comparison (go test ./cluster/ -run XXX -bench LogStore).
// Each store runs with its default durability, as raft uses it: every
// StoreLogs is on disk when it returns (bolt: one commit, two fsyncs; the
// wal: one fsync).

type storeKind struct {
	name string
	open func(b testing.TB, dir string) logStore
}

var storeKinds = []storeKind{
	{"bolt", func(b testing.TB, dir string) logStore {
		s, err := openBoltStore(filepath.Join(dir, boltFileName))
		if err != nil {
			b.Fatal(err)
		}
		return s
	}},
	{"wal", func(b testing.TB, dir string) logStore {
		s, err := openWALStore(filepath.Join(dir, walDirName), nil)
		if err != nil {
			b.Fatal(err)
		}
		return s
	}},
}

// entryShape is one kind of StoreLogs call: perBatch entries of size bytes.
type entryShape struct {
	name     string
	size     int
	perBatch int
}

var entryShapes = []entryShape{
	{"small-256B-x64", 256, 64},
	{"64KiB-x16", 64 << 10, 16},
	{"1MiB-x4", 1 << 20, 4},
}

func makeBatch(next *uint64, sh entryShape, data []byte) []*raft.Log {
	logs := make([]*raft.Log, sh.perBatch)
	for i := range logs {
		*next++
		logs[i] = &raft.Log{Index: *next, Term: 1, Type: raft.LogCommand, Data: data, AppendedAt: time.Now()}
	}
	return logs
}

func BenchmarkLogStoreStoreLogs(b *testing.B) {
	for _, k := range storeKinds {
		for _, sh := range entryShapes {
			b.Run(k.name+"/"+sh.name, func(b *testing.B) {
				s := k.open(b, b.TempDir())
				defer s.Close()
				data := bytes.Repeat([]byte{'r'}, sh.size)
				var next uint64
				b.SetBytes(int64(sh.size * sh.perBatch))
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := s.StoreLogs(makeBatch(&next, sh, data)); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N*sh.perBatch)/b.Elapsed().Seconds(), "entries/s")
			})
		}
	}
}

// BenchmarkLogStoreSteady is the store's life under raft: append 1 MiB
// batches of 64 KiB entries and, once more than trailing entries are held,
// delete the head as raft's compaction does after a snapshot. DeleteRange
// is timed separately (ns/delete) as well as in the whole.
func BenchmarkLogStoreSteady(b *testing.B) {
	const trailing = 1024 // 64 MiB of 64 KiB entries
	sh := entryShape{"64KiB-x16", 64 << 10, 16}
	for _, k := range storeKinds {
		b.Run(k.name, func(b *testing.B) {
			s := k.open(b, b.TempDir())
			defer s.Close()
			data := bytes.Repeat([]byte{'r'}, sh.size)
			var next uint64
			var delTime time.Duration
			deletes := 0
			b.SetBytes(int64(sh.size * sh.perBatch))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := s.StoreLogs(makeBatch(&next, sh, data)); err != nil {
					b.Fatal(err)
				}
				first, err := s.FirstIndex()
				if err != nil {
					b.Fatal(err)
				}
				// Delete in chunks of 256 entries, as snapshots do: a
				// range, not entry by entry.
				if next-first+1 > trailing+256 {
					t0 := time.Now()
					if err := s.DeleteRange(first, first+255); err != nil {
						b.Fatal(err)
					}
					delTime += time.Since(t0)
					deletes++
				}
			}
			if deletes > 0 {
				b.ReportMetric(float64(delTime.Nanoseconds())/float64(deletes), "ns/delete")
			}
		})
	}
}

// countFSM is the benchmark cluster's state machine: it only counts.
type countFSM struct{ n atomic.Uint64 }

func (f *countFSM) Apply(l *raft.Log) any {
	f.n.Add(1)
	return nil
}
func (f *countFSM) Snapshot() (raft.FSMSnapshot, error) { return countSnap{}, nil }
func (f *countFSM) Restore(rc io.ReadCloser) error      { return rc.Close() }

type countSnap struct{}

func (countSnap) Persist(s raft.SnapshotSink) error { return s.Close() }
func (countSnap) Release()                          {}

type benchNode struct {
	raft  *raft.Raft
	store logStore
	trans *raft.NetworkTransport
	dir   string
}

// startBenchCluster starts 3 raft nodes on 127.0.0.1 with NewRaft's
// tuning and the given store; tracked gives raft NewRaft's transport
// wrapper (quorum.go), as nodes run.
func startBenchCluster(b *testing.B, k storeKind, tracked bool) []*benchNode {
	base := b.TempDir()
	hlog := hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Warn, Output: io.Discard})
	nodes := make([]*benchNode, 3)
	var servers []raft.Server
	for i := range nodes {
		dir := filepath.Join(base, strconv.Itoa(i+1))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		trans, err := raft.NewTCPTransportWithLogger("127.0.0.1:0", nil, 4, 10*time.Second, hlog)
		if err != nil {
			b.Fatal(err)
		}
		nodes[i] = &benchNode{store: k.open(b, dir), trans: trans, dir: dir}
		servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: serverID(int32(i + 1)), Address: trans.LocalAddr()})
	}
	for i, n := range nodes {
		cfg := raft.DefaultConfig()
		cfg.LocalID = serverID(int32(i + 1))
		cfg.Logger = hlog
		tuneRaftConfig(cfg)
		cfg.HeartbeatTimeout = 1000 * time.Millisecond
		cfg.ElectionTimeout = 1000 * time.Millisecond
		cfg.LeaderLeaseTimeout = 500 * time.Millisecond
		cfg.CommitTimeout = commitTimeout
		// Snapshots and compaction stay out of this figure.
		cfg.SnapshotThreshold = 1 << 40
		cfg.SnapshotInterval = time.Hour
		snaps, err := raft.NewFileSnapshotStoreWithLogger(filepath.Join(n.dir, "snapshots"), 2, hlog)
		if err != nil {
			b.Fatal(err)
		}
		logs, err := raft.NewLogCache(4096, n.store)
		if err != nil {
			b.Fatal(err)
		}
		var trans raft.Transport = n.trans
		var progress *progressTracker
		if tracked {
			progress = newProgressTracker(time.Now)
			trans = &trackingTransport{NetworkTransport: n.trans, progress: progress}
		}
		if n.raft, err = raft.NewRaft(cfg, &countFSM{}, logs, n.store, snaps, trans); err != nil {
			b.Fatal(err)
		}
		if progress != nil {
			progress.setLastIndex(n.raft.LastIndex)
		}
		if err := n.raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
			b.Fatal(err)
		}
	}
	return nodes
}

func stopBenchCluster(nodes []*benchNode) {
	for _, n := range nodes {
		if n.raft != nil {
			_ = n.raft.Shutdown().Error()
		}
		_ = n.trans.Close()
		_ = n.store.Close()
	}
}

// BenchmarkLogStoreRaft3 is the figure that matters: a 3-node cluster on
// loopback committing produce-sized entries (entry bytes of 1 KiB
// records, as the batcher coalesces them) with up to maxInflightEntries
// entries in flight, as the batcher keeps them.
func BenchmarkLogStoreRaft3(b *testing.B) {
	for _, k := range storeKinds {
		for _, entry := range []int{256 << 10, maxEntryBytes} {
			b.Run(fmt.Sprintf("%s/entry-%dKiB", k.name, entry>>10), func(b *testing.B) { benchRaft3(b, k, entry, true) })
		}
	}
}

// BenchmarkTrackedTransport is BenchmarkLogStoreRaft3 on the wal with and
// without the transport wrapper that tracks the voters' progress, small
// entries included (the most AppendEntries per byte).
func BenchmarkTrackedTransport(b *testing.B) {
	wal := storeKinds[slices.IndexFunc(storeKinds, func(k storeKind) bool { return k.name == "wal" })]
	for _, entry := range []int{1 << 10, 64 << 10, maxEntryBytes} {
		for _, tracked := range []bool{false, true} {
			b.Run(fmt.Sprintf("entry-%dKiB/tracked=%v", entry>>10, tracked), func(b *testing.B) { benchRaft3(b, wal, entry, tracked) })
		}
	}
}

func benchRaft3(b *testing.B, k storeKind, entry int, tracked bool) {
	nodes := startBenchCluster(b, k, tracked)
	defer stopBenchCluster(nodes)
	var leader *raft.Raft
	testwait.For(b, "a leader", 20*time.Second, func() bool {
		for _, n := range nodes {
			if n.raft.State() == raft.Leader {
				leader = n.raft
				return true
			}
		}
		return false
	})
	data := bytes.Repeat([]byte{'r'}, entry)
	inflight := make(chan raft.ApplyFuture, maxInflightEntries)
	errs := make(chan error, 1)
	go func() {
		var first error
		for f := range inflight {
			if err := f.Error(); err != nil && first == nil {
				first = err
			}
		}
		errs <- first
	}()
	b.SetBytes(int64(entry))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		inflight <- leader.Apply(data, 0)
	}
	close(inflight)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*entry/1024)/b.Elapsed().Seconds(), "records/s")
}

// TestOpenLogStoreMigratesBolt: a raft directory written by an earlier
// version (raft.db) opens as a wal holding the same entries and votes,
// and the bolt file is kept aside, not read again.
func TestOpenLogStoreMigratesBolt(t *testing.T) {
	dir := t.TempDir()
	old, err := openBoltStore(filepath.Join(dir, boltFileName))
	if err != nil {
		t.Fatal(err)
	}
	var logs []*raft.Log
	for i := uint64(5); i <= 40; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 3, Type: raft.LogCommand, Data: []byte(fmt.Sprint("entry-", i))})
	}
	if err := old.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := old.SetUint64([]byte("CurrentTerm"), 3); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := openLogStore(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	if first != 5 || last != 40 {
		t.Fatalf("migrated log holds [%d, %d], want [5, 40]", first, last)
	}
	var l raft.Log
	if err := s.GetLog(17, &l); err != nil || string(l.Data) != "entry-17" || l.Term != 3 {
		t.Fatalf("entry 17 after migration: %+v %v", l, err)
	}
	if term, err := s.GetUint64([]byte("CurrentTerm")); err != nil || term != 3 {
		t.Fatalf("term after migration: %d %v", term, err)
	}
	// Never voted: no vote keys, and none invented.
	if v, err := s.Get([]byte("LastVoteCand")); err == nil && len(v) > 0 {
		t.Fatalf("vote after migration: %q", v)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, boltFileName)); !os.IsNotExist(err) {
		t.Fatalf("raft.db still in place after migration: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, boltFileName+".migrated")); err != nil {
		t.Fatalf("raft.db.migrated: %v", err)
	}
	// The second open takes the wal as it is.
	s, err = openLogStore(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if last, _ := s.LastIndex(); last != 40 {
		t.Fatalf("reopened wal ends at %d, want 40", last)
	}
}
