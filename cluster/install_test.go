package cluster

import (
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
)

// TestInstallInPlace: a snapshot installed once the state is open goes
// through OnInstall: the hook closes what reads the state, the restore it
// is given makes the directory the snapshot's, and the hook reopens; the
// node does not restart and its state index is the snapshot's. A hook that
// fails, before or after restoring, or returns without restoring, falls
// back to the restart.
func TestInstallInPlace(t *testing.T) {
	root := t.TempDir()
	src, raftDir := filepath.Join(root, "leader-state"), filepath.Join(root, "raft")
	writeFile(t, filepath.Join(src, "orders-0", "00000000000000000000.log"), "from the leader")
	writeFile(t, filepath.Join(src, "meta", "topics.json"), "leader topics")
	store := newTestStore(t, filepath.Join(raftDir, "snapshots"), 3)
	snap43 := takeSnapshot(t, store, src, raftDir, 43)
	open := func(id string) io.ReadCloser {
		_, rc, err := store.Open(id)
		if err != nil {
			t.Fatal(err)
		}
		return rc
	}

	state := filepath.Join(root, "state")
	seg := filepath.Join(state, "orders-0", "00000000000000000000.log")
	stale := filepath.Join(state, "stale-0", "00000000000000000000.log")
	r := &Raft{o: RaftOptions{StateDir: state}, log: slog.New(slog.DiscardHandler), snaps: store}
	f := &fsm{r: r, readyCh: make(chan struct{})}
	r.fsm = f
	f.lastApplied.Store(7)
	f.markOpened()
	writeFile(t, seg, "the follower's own")
	writeFile(t, stale, "a topic the leader deleted")

	restarts := 0
	r.o.OnRuntimeRestore = func() { restarts++ }

	// Failing hooks: the node restarts (here: the restart returns, so the
	// install fails).
	var calls []string
	for _, tc := range []struct {
		name string
		hook func(restore func() error) error
	}{
		{"fails before restoring", func(func() error) error { return errors.New("close failed") }},
		{"returns without restoring", func(func() error) error { return nil }},
	} {
		r.o.OnInstall = tc.hook
		before := restarts
		if err := f.Restore(open(snap43)); err == nil || restarts != before+1 {
			t.Fatalf("hook that %s: %v, %d restarts", tc.name, err, restarts-before)
		}
		if got := readFile(t, seg); got != "the follower's own" {
			t.Fatalf("hook that %s: the state changed: %q", tc.name, got)
		}
		if f.lastApplied.Load() != 7 {
			t.Fatalf("hook that %s: state index %d, want 7", tc.name, f.lastApplied.Load())
		}
	}

	// The hook closes, restores, reopens.
	r.o.OnInstall = func(restore func() error) error {
		calls = append(calls, "close")
		if got := readFile(t, seg); got != "the follower's own" {
			t.Errorf("the state changed before the hook closed it: %q", got)
		}
		if err := restore(); err != nil {
			return err
		}
		calls = append(calls, "restored")
		if got := readFile(t, seg); got != "from the leader" {
			t.Errorf("after restore: %q", got)
		}
		if exists(stale) {
			t.Error("after restore: a file the snapshot does not hold is still there")
		}
		calls = append(calls, "reopen")
		return nil
	}
	before := restarts
	if err := f.Restore(open(snap43)); err != nil {
		t.Fatalf("install in place: %v", err)
	}
	if restarts != before || f.restarting.Load() {
		t.Fatalf("install in place restarted the node (%d restarts, marked %v)", restarts-before, f.restarting.Load())
	}
	if want := []string{"close", "restored", "reopen"}; !slices.Equal(calls, want) {
		t.Fatalf("hook steps %v, want %v", calls, want)
	}
	if got := f.lastApplied.Load(); got != 43 {
		t.Fatalf("state index after the install: %d, want the snapshot's 43", got)
	}
	if got := readFile(t, filepath.Join(state, "meta", "topics.json")); got != "leader topics" {
		t.Fatalf("restored topics: %q", got)
	}

	// The same snapshot again (the leader missed the answer): nothing to
	// do, the hook is not called.
	calls = nil
	if err := f.Restore(open(snap43)); err != nil || len(calls) != 0 {
		t.Fatalf("install of the state this node holds: %v, hook steps %v", err, calls)
	}

	// A hook that fails after restoring (a reopen failed): restart.
	writeFile(t, filepath.Join(src, "orders-0", "00000000000000000001.log"), "more")
	snap50 := takeSnapshot(t, store, src, raftDir, 50)
	r.o.OnInstall = func(restore func() error) error {
		if err := restore(); err != nil {
			return err
		}
		return errors.New("reopen failed")
	}
	before = restarts
	if err := f.Restore(open(snap50)); err == nil || restarts != before+1 {
		t.Fatalf("hook whose reopen failed: %v, %d restarts", err, restarts-before)
	}
	if f.lastApplied.Load() != 43 {
		t.Fatalf("a failed install moved the state index to %d", f.lastApplied.Load())
	}
}

// TestNodesReload: the node directory reloads what a restore wrote, in the
// same *Nodes; an unreadable file leaves it as it was.
func TestNodesReload(t *testing.T) {
	state := t.TempDir()
	n, err := OpenNodes(state)
	if err != nil {
		t.Fatal(err)
	}
	n.Apply(UpsertNode(Peer{ID: 1, Kafka: "127.0.0.1:1"}))
	writeFile(t, filepath.Join(state, "meta", "nodes.json"), `[{"id":2,"kafka":"127.0.0.1:2"}]`)
	writeFile(t, filepath.Join(state, "meta", clusterIDFile), "restored-id")
	if err := n.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, ok := n.Get(1); ok {
		t.Fatal("a node the restored directory does not hold is still known")
	}
	if p, ok := n.Get(2); !ok || p.Kafka != "127.0.0.1:2" || n.ClusterID() != "restored-id" {
		t.Fatalf("after reload: %+v %v, cluster id %q", p, ok, n.ClusterID())
	}
	writeFile(t, filepath.Join(state, "meta", "nodes.json"), `not json`)
	if err := n.Reload(); err == nil {
		t.Fatal("reload of an unreadable directory succeeded")
	}
	if _, ok := n.Get(2); !ok {
		t.Fatal("a failed reload changed the directory")
	}
}
