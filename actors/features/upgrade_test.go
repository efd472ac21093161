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

// openInit opens a single node's store and fixes its first levels, as the
// broker does.
func openInit(t *testing.T, o Options) *Store {
	t.Helper()
	s := openStore(t, o)
	if err := s.Init(); err != nil {
		t.Fatal(err)
	}
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
// levels for a new cluster (transaction.version 2), written by Init, so
// that the decision holds when topics appear later.
func TestFreshDirStartsAtLatest(t *testing.T) {
	dir := t.TempDir()
	s := openInit(t, Options{DataDir: dir, NodeID: 1})
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

// TestLeaderGuessesBeforeRequests: a cluster's leader guesses the first
// levels as it begins leading (Guess) and proposes that guess at Init: a
// topic a client created in between (a new cluster's first, made before
// the leader's Init) does not make the new cluster look like one from
// before finalized features.
func TestLeaderGuessesBeforeRequests(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, Options{DataDir: dir, NodeID: 1})
	s.Guess()
	markExisting(t, dir, "topics.json") // a client's CreateTopics, before Init
	if err := s.Init(); err != nil {
		t.Fatal(err)
	}
	if f := s.Finalized(); f.Level(TransactionVersion) != 2 || f.Level(RegentRaftVersion) != 1 {
		t.Fatalf("new cluster's levels %+v, want the latest", f)
	}

	// Without the guess, the same directory reads as one that predates
	// finalized features.
	dir = t.TempDir()
	s = openStore(t, Options{DataDir: dir, NodeID: 1})
	markExisting(t, dir, "topics.json")
	if err := s.Init(); err != nil {
		t.Fatal(err)
	}
	if f := s.Finalized(); f.Level(TransactionVersion) != 0 || f.Level(RegentRaftVersion) != 0 {
		t.Fatalf("pre-features directory's levels %+v, want transaction.version and regent.raft.version unset", f)
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
			s := openInit(t, Options{DataDir: dir, NodeID: 1})
			f := s.Finalized()
			if _, listed := f.Levels[TransactionVersion]; listed || f.Epoch != 0 || f.Level(MetadataVersion) != 30 ||
				f.Level(GroupVersion) != 1 || f.Level(KRaftVersion) != 1 {
				t.Fatalf("upgraded directory's levels %+v, want transaction.version unset", f)
			}
			if err := updateWait(t, s, Update{Feature: TransactionVersion, Level: 2, Type: Upgrade}); err != nil {
				t.Fatal(err)
			}
			s.Close()
			s2 := openInit(t, Options{DataDir: dir, NodeID: 1})
			if f := s2.Finalized(); f.Epoch != 1 || f.Level(TransactionVersion) != 2 {
				t.Fatalf("after kafka-features upgrade and a restart %+v", f)
			}
		})
	}
}

// TestUpgradedClusterDecidesAlike: in cluster mode the leader's decision
// is replicated (Init): a node that replays the log into an empty state
// directory guesses "new" but ends at the leader's legacy levels, the
// first init in the log wins, and the operator's upgrade is one replicated
// change applied on each node.
func TestUpgradedClusterDecidesAlike(t *testing.T) {
	r := clustertest.New(t, 2)
	leaderDir := t.TempDir()
	markExisting(t, leaderDir, "topics.json")
	leader := openStore(t, Options{DataDir: leaderDir, NodeID: 0, Repl: r.Node(0)})
	replaying := openStore(t, Options{DataDir: t.TempDir(), NodeID: 1, Repl: r.Node(1)})
	if f := replaying.Finalized(); f.Level(TransactionVersion) != 2 {
		t.Fatalf("an empty directory's guess %+v", f)
	}
	if err := replaying.Init(); err == nil {
		t.Fatal("a follower's Init was applied")
	}
	if err := leader.Init(); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the follower applies the leader's first levels", testwait.Default, func() bool {
		_, listed := replaying.Finalized().Levels[TransactionVersion]
		return !listed
	})
	// A later leader's Init changes nothing: the levels are fixed.
	r.SetLeader(1)
	if err := replaying.Init(); err != nil {
		t.Fatal(err)
	}
	if err := updateWait(t, replaying, Update{Feature: TransactionVersion, Level: 2, Type: Upgrade}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the other node applies the upgrade", testwait.Default, func() bool {
		return leader.Finalized().Level(TransactionVersion) == 2
	})
	if a, b := leader.Finalized(), replaying.Finalized(); a.Epoch != b.Epoch || a.Epoch != 1 {
		t.Fatalf("epochs %d and %d, want 1", a.Epoch, b.Epoch)
	}
}
