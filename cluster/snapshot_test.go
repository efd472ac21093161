package cluster

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
)

// snapshotOf captures stateDir into the bytes a snapshot holds.
func snapshotOf(t *testing.T, stateDir string) []byte {
	t.Helper()
	s, err := captureState(stateDir, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	var buf bytes.Buffer
	if err := s.write(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestRestoreOnlyIntoAnUnopenedStateDir: a snapshot restores into the state
// directory only until NewRaft hands the directory to its caller; after
// that an install must restart the node, and never rewrites files the
// broker has opened.
func TestRestoreOnlyIntoAnUnopenedStateDir(t *testing.T) {
	src := t.TempDir()
	if err := os.MkdirAll(filepath.Join(src, "orders-0"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "orders-0", "00000000000000000000.log"), []byte("from the leader"), 0o644); err != nil {
		t.Fatal(err)
	}
	snap := snapshotOf(t, src)

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

	// The broker opens the state (and writes to it); from now on an
	// install cannot replace it in place. Without a way to restart, the
	// install fails and the files stay as they are.
	f.markOpened()
	if err := os.WriteFile(seg, []byte("opened by the broker"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.Restore(io.NopCloser(bytes.NewReader(snap))); err == nil {
		t.Fatal("an install into an opened state directory, with no restart hook, succeeded")
	}
	if got, err := os.ReadFile(seg); err != nil || string(got) != "opened by the broker" {
		t.Fatalf("an install rewrote an opened state directory: %q %v", got, err)
	}
	if f.restarting.Load() {
		t.Fatal("a refused install marked the node restarting")
	}
}
