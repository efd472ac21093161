package cluster

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
)

// snapshotOf captures stateDir, at state index index, into the bytes a
// snapshot holds.
func snapshotOf(t *testing.T, stateDir string, index uint64) []byte {
	t.Helper()
	s, err := captureState(stateDir, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s.index = index
	defer s.Release()
	var buf bytes.Buffer
	if err := s.write(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestRestoreOnlyIntoAnUnopenedStateDir: a snapshot restores into the state
// directory only until NewRaft hands the directory to its caller (and the
// node's state index becomes the one the snapshot recorded); after that an
// install must restart the node, and never rewrites files the broker has
// opened.
func TestRestoreOnlyIntoAnUnopenedStateDir(t *testing.T) {
	src := t.TempDir()
	if err := os.MkdirAll(filepath.Join(src, "orders-0"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "orders-0", "00000000000000000000.log"), []byte("from the leader"), 0o644); err != nil {
		t.Fatal(err)
	}
	snap := snapshotOf(t, src, 42)

	state := t.TempDir()
	r := &Raft{o: RaftOptions{StateDir: state}, log: slog.New(slog.DiscardHandler)}
	f := &fsm{r: r, readyCh: make(chan struct{})}
	r.fsm = f

	// While NewRaft runs: restored in place.
	if err := f.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatalf("restore before the state is opened: %v", err)
	}
	seg := filepath.Join(state, "orders-0", "00000000000000000000.log")
	if got, err := os.ReadFile(seg); err != nil || string(got) != "from the leader" {
		t.Fatalf("restored segment: %q %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(state, stateIndexEntry)); err == nil {
		t.Fatal("the state index was written as a state file")
	}
	if got := f.lastApplied.Load(); got != 42 {
		t.Fatalf("state index after the restore: %d, want the snapshot's 42", got)
	}

	// The broker opens the state (and writes to it); from now on an
	// install cannot replace it in place.
	f.markOpened()
	if err := os.WriteFile(seg, []byte("opened by the broker"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A snapshot of what the state already holds (the same state index)
	// is accepted as it is: no restart (the hook is nil, so one would
	// fail), nothing rewritten.
	if err := f.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatalf("install of the state this node holds: %v", err)
	}
	// Any other snapshot needs a restart; without a way to restart, the
	// install fails and the files stay as they are.
	if err := f.Restore(io.NopCloser(bytes.NewReader(snapshotOf(t, src, 43)))); err == nil {
		t.Fatal("an install into an opened state directory, with no restart hook, succeeded")
	}
	if got, err := os.ReadFile(seg); err != nil || string(got) != "opened by the broker" {
		t.Fatalf("an install rewrote an opened state directory: %q %v", got, err)
	}
	// With a hook, the node restarts from inside Restore (before raft
	// answers the leader); a hook that returns means the restart failed.
	restarts := 0
	r.o.OnRuntimeRestore = func() {
		restarts++
		if !f.restarting.Load() {
			t.Error("restarting without the restarting mark")
		}
	}
	if err := f.Restore(io.NopCloser(bytes.NewReader(snapshotOf(t, src, 43)))); err == nil || restarts != 1 {
		t.Fatalf("install with a restart that returned: %v, %d restarts", err, restarts)
	}
	if err := f.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil || restarts != 1 {
		t.Fatalf("install of the state this node holds, with a hook: %v, %d restarts", err, restarts)
	}
	if f.restarting.Load() {
		t.Fatal("an install that did not restart left the node marked restarting")
	}
	if got := f.lastApplied.Load(); got != 42 {
		t.Fatalf("state index after installs that changed nothing: %d, want 42", got)
	}
}
