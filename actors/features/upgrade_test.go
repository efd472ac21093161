package features

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/regent-broker/regent/cluster/clustertest"
	"github.com/regent-broker/regent/interop/testwait"
)

func openStore(t *testing.T, o Options) *Store {
	t.Helper()
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// markExisting makes dir look like a state directory that served before
// features.json existed: its topic registry (or producer id reservation).
func markExisting(t *testing.T, dir, name string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "meta"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "meta", name), []byte("[]"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func updateWait(t *testing.T, s *Store, ups ...Update) error {
	t.Helper()
	ch := make(chan error, 1)
	s.Update(ups, func(err error) { ch <- err })
	select {
	case err := <-ch:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("update not answered")
		return nil
	}
}

// TestFreshDirStartsAtLatest: a new state directory starts at Kafka 4.3's
// levels for a new cluster (transaction.version 2), written at once, so
// that the decision holds when topics appear later.
func TestFreshDirStartsAtLatest(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, Options{DataDir: dir, NodeID: 1})
	if f := s.Finalized(); f.Epoch != 0 || f.Level(TransactionVersion) != 2 || f.Level(MetadataVersion) != 30 {
		t.Fatalf("fresh levels %+v", f)
	}
	if _, err := os.Stat(filepath.Join(dir, "meta", FileName)); err != nil {
		t.Fatalf("first levels not written: %v", err)
	}
	s.Close()
	markExisting(t, dir, "topics.json")
	if err := s.Reopen(); err != nil {
		t.Fatal(err)
	}
	if f := s.Finalized(); f.Level(TransactionVersion) != 2 {
		t.Fatalf("after topics appeared %+v", f)
	}
}

// TestPreFeaturesDirKeepsServedLevels: a directory that served before
// features.json existed starts at the levels it served: no finalized
// transaction.version (clients saw none and ran transactions version 1),
// as Kafka keeps an upgraded cluster's levels, until an operator raises
// it; the raise is kept across restarts.
func TestPreFeaturesDirKeepsServedLevels(t *testing.T) {
	for _, marker := range legacyMarkers {
		t.Run(marker, func(t *testing.T) {
			dir := t.TempDir()
			markExisting(t, dir, marker)
			s := openStore(t, Options{DataDir: dir, NodeID: 1})
			f := s.Finalized()
			if _, listed := f.Levels[TransactionVersion]; listed || f.Epoch != 0 || f.Level(MetadataVersion) != 30 ||
				f.Level(GroupVersion) != 1 || f.Level(KRaftVersion) != 1 {
				t.Fatalf("upgraded directory's levels %+v, want transaction.version unset", f)
			}
			if err := updateWait(t, s, Update{Feature: TransactionVersion, Level: 2, Type: Upgrade}); err != nil {
				t.Fatal(err)
			}
			s.Close()
			s2 := openStore(t, Options{DataDir: dir, NodeID: 1})
			if f := s2.Finalized(); f.Epoch != 1 || f.Level(TransactionVersion) != 2 {
				t.Fatalf("after kafka-features upgrade and a restart %+v", f)
			}
		})
	}
}

// TestUpgradedClusterDecidesAlike: in cluster mode every node's directory
// holds the same replicated topic registry, so every node of an upgraded
// cluster starts at the legacy levels, and the operator's upgrade is one
// replicated change applied on each.
func TestUpgradedClusterDecidesAlike(t *testing.T) {
	r := clustertest.New(t, 2)
	var nodes []*Store
	for i := range 2 {
		dir := t.TempDir()
		markExisting(t, dir, "topics.json")
		nodes = append(nodes, openStore(t, Options{DataDir: dir, NodeID: int32(i), Repl: r.Node(i)}))
	}
	for i, s := range nodes {
		if f := s.Finalized(); f.Level(TransactionVersion) != 0 {
			t.Fatalf("node %d: %+v", i, f)
		}
	}
	if err := updateWait(t, nodes[0], Update{Feature: TransactionVersion, Level: 2, Type: Upgrade}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the follower applies the upgrade", testwait.Default, func() bool {
		return nodes[1].Finalized().Level(TransactionVersion) == 2
	})
	if a, b := nodes[0].Finalized(), nodes[1].Finalized(); a.Epoch != b.Epoch || a.Epoch != 1 {
		t.Fatalf("epochs %d and %d, want 1", a.Epoch, b.Epoch)
	}
}
