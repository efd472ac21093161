package cluster

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/regent-broker/regent/interop/testwait"
)

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func appendFile(t *testing.T, path, data string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(data); err != nil {
		t.Fatal(err)
	}
}

// replaceFile rewrites path as the stores do: a new file renamed over it.
func replaceFile(t *testing.T, path, data string) {
	t.Helper()
	writeFile(t, path+".tmp", data)
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// takeSnapshot captures stateDir at state index index into store, as raft
// does (Snapshot, Create, Persist, Close twice), and returns its id.
func takeSnapshot(t *testing.T, store *snapStore, stateDir, raftDir string, index uint64) string {
	t.Helper()
	s, err := captureState(stateDir, raftDir)
	if err != nil {
		t.Fatal(err)
	}
	s.index = index
	defer s.Release()
	sink, err := store.Create(1, index, 1, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Persist(sink); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	return sink.ID()
}

// openManifest opens a snapshot as fsm.Restore does and reads its manifest.
func openManifest(t *testing.T, store *snapStore, id string) (*raft.SnapshotMeta, *manifest) {
	t.Helper()
	meta, rc, err := store.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	m, err := readManifestHead(rc)
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != id {
		t.Fatalf("manifest opened from %s names %s", id, m.ID)
	}
	return meta, m
}

func newTestStore(t *testing.T, dir string, retain int) *snapStore {
	t.Helper()
	s, err := newSnapStore(dir, retain, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSnapshotManifestAndRestore: a snapshot is a manifest of links and
// sizes (no indexes, no markers); restoring it brings the state directory
// back to the capture without copying: the same inode truncated, a file
// replaced by rename linked back, files and directories made after the
// capture removed, indexes of touched segments dropped (those of untouched
// ones kept), clean-shutdown markers kept only where nothing changed. A
// second restore changes nothing.
func TestSnapshotManifestAndRestore(t *testing.T) {
	root := t.TempDir()
	state, raftDir := filepath.Join(root, "state"), filepath.Join(root, "raft")
	seg := filepath.Join(state, "orders-0", "00000000000000000000.log")
	writeFile(t, seg, "batch-1;")
	writeFile(t, filepath.Join(state, "orders-0", "00000000000000000000.index"), "idx")
	writeFile(t, filepath.Join(state, "orders-0", "producer-state.json"), `{"v":1}`)
	sealed := filepath.Join(state, "orders-1", "00000000000000000000.log")
	writeFile(t, sealed, "sealed")
	writeFile(t, filepath.Join(state, "orders-1", "00000000000000000000.index"), "idx1")
	writeFile(t, filepath.Join(state, "topics.json"), `{"orders":2}`)
	if err := os.MkdirAll(filepath.Join(state, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	store := newTestStore(t, filepath.Join(raftDir, "snapshots"), 2)
	id := takeSnapshot(t, store, state, raftDir, 42)
	if exists(filepath.Join(raftDir, "snapshot-staging")) {
		if ents, _ := os.ReadDir(filepath.Join(raftDir, "snapshot-staging")); len(ents) > 0 {
			t.Fatalf("staging left behind: %v", ents)
		}
	}

	meta, m := openManifest(t, store, id)
	if m.StateIndex != 42 || meta.Index != 42 {
		t.Fatalf("state index %d, raft index %d; want 42", m.StateIndex, meta.Index)
	}
	var paths []string
	var data int64
	for _, f := range m.Files {
		paths = append(paths, f.Path)
		data += f.Size
	}
	want := []string{"orders-0/00000000000000000000.log", "orders-0/producer-state.json", "orders-1/00000000000000000000.log", "topics.json"}
	if !slices.Equal(paths, want) {
		t.Fatalf("manifest files %v, want %v (no indexes)", paths, want)
	}
	if !slices.Contains(m.Dirs, "empty") {
		t.Fatalf("manifest dirs %v lack the empty one", m.Dirs)
	}
	head, err := encodeManifestHead(m, snapMagic)
	if err != nil {
		t.Fatal(err)
	}
	if meta.Size != int64(len(head))+data {
		t.Fatalf("meta.Size %d, want head %d + data %d", meta.Size, len(head), data)
	}

	// The broker goes on after the capture.
	segIno, _ := os.Stat(seg)
	appendFile(t, seg, "batch-2;")
	writeFile(t, filepath.Join(state, "orders-0", "00000000000000000000.index"), "idx+more")
	replaceFile(t, filepath.Join(state, "orders-0", "producer-state.json"), `{"v":2}`)
	writeFile(t, filepath.Join(state, "orders-0", "00000000000000000008.log"), "batch-3;")
	writeFile(t, filepath.Join(state, "orders-0", "00000000000000000008.index"), "idx8")
	writeFile(t, filepath.Join(state, "orders-0", cleanShutdownMark), "")
	writeFile(t, filepath.Join(state, "orders-1", cleanShutdownMark), "")
	writeFile(t, filepath.Join(state, "later-0", "00000000000000000000.log"), "new topic")
	if err := os.Remove(filepath.Join(state, "topics.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(state, "empty")); err != nil {
		t.Fatal(err)
	}

	st, err := restoreFromLinks(state, store.filesDir(id), m)
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, seg); got != "batch-1;" {
		t.Fatalf("segment after restore %q, want the capture's %q", got, "batch-1;")
	}
	if fi, _ := os.Stat(seg); !os.SameFile(fi, segIno) {
		t.Fatal("the segment was replaced, not truncated in place")
	}
	if got := readFile(t, filepath.Join(state, "orders-0", "producer-state.json")); got != `{"v":1}` {
		t.Fatalf("replaced file after restore %q", got)
	}
	if got := readFile(t, filepath.Join(state, "topics.json")); got != `{"orders":2}` {
		t.Fatalf("removed file after restore %q", got)
	}
	for _, gone := range []string{
		"orders-0/00000000000000000008.log", "orders-0/00000000000000000008.index",
		"orders-0/00000000000000000000.index", "orders-0/" + cleanShutdownMark, "later-0",
	} {
		if exists(filepath.Join(state, gone)) {
			t.Errorf("%s survived the restore", gone)
		}
	}
	for _, kept := range []string{"orders-1/00000000000000000000.index", "orders-1/" + cleanShutdownMark, "empty"} {
		if !exists(filepath.Join(state, kept)) {
			t.Errorf("%s was removed by the restore", kept)
		}
	}
	if st.truncated != 1 || st.linked != 2 || st.kept != 1 {
		t.Errorf("restore stats %+v, want 1 truncated, 2 linked, 1 kept", st)
	}
	again, err := restoreFromLinks(state, store.filesDir(id), m)
	if err != nil {
		t.Fatal(err)
	}
	if again != (restoreStats{kept: 4}) {
		t.Fatalf("second restore changed something: %+v", again)
	}
}

// TestRestoreUsesItsSnapshotsLinks: with two snapshots stored, each restore
// uses its own links and sizes.
func TestRestoreUsesItsSnapshotsLinks(t *testing.T) {
	root := t.TempDir()
	state, raftDir := filepath.Join(root, "state"), filepath.Join(root, "raft")
	seg := filepath.Join(state, "p-0", "00000000000000000000.log")
	meta := filepath.Join(state, "topics.json")
	writeFile(t, seg, "a;")
	writeFile(t, meta, "one")
	store := newTestStore(t, filepath.Join(raftDir, "snapshots"), 2)
	first := takeSnapshot(t, store, state, raftDir, 10)
	appendFile(t, seg, "b;")
	replaceFile(t, meta, "two")
	second := takeSnapshot(t, store, state, raftDir, 20)
	appendFile(t, seg, "c;")
	replaceFile(t, meta, "three")

	metas, err := store.List()
	if err != nil || len(metas) != 2 || metas[0].ID != second {
		t.Fatalf("list: %v %v, want %s first", metas, err, second)
	}
	_, m := openManifest(t, store, second)
	if _, err := restoreFromLinks(state, store.filesDir(second), m); err != nil {
		t.Fatal(err)
	}
	if readFile(t, seg) != "a;b;" || readFile(t, meta) != "two" {
		t.Fatalf("restored the second snapshot: %q %q", readFile(t, seg), readFile(t, meta))
	}
	_, m = openManifest(t, store, first)
	if _, err := restoreFromLinks(state, store.filesDir(first), m); err != nil {
		t.Fatal(err)
	}
	if readFile(t, seg) != "a;" || readFile(t, meta) != "one" {
		t.Fatalf("restored the first snapshot: %q %q", readFile(t, seg), readFile(t, meta))
	}
	// The second snapshot's segment link shares the inode the first
	// restore cut: the store notices instead of restoring a short file.
	_, m = openManifest(t, store, second)
	if _, err := restoreFromLinks(state, store.filesDir(second), m); err == nil {
		t.Fatal("restored a snapshot whose file was cut below its manifest size")
	}
}

// TestSnapshotReaping: only the newest retain snapshots stay, and the
// links of reaped ones go with them; unfinished ones are dropped on open.
func TestSnapshotReaping(t *testing.T) {
	root := t.TempDir()
	state, raftDir := filepath.Join(root, "state"), filepath.Join(root, "raft")
	writeFile(t, filepath.Join(state, "p-0", "00000000000000000000.log"), "x")
	dir := filepath.Join(raftDir, "snapshots")
	store := newTestStore(t, dir, 2)
	var ids []string
	for i := range 3 {
		ids = append(ids, takeSnapshot(t, store, state, raftDir, uint64(10*(i+1))))
	}
	if exists(filepath.Join(dir, ids[0])) {
		t.Fatalf("the oldest snapshot %s and its links were not reaped", ids[0])
	}
	for _, id := range ids[1:] {
		if !exists(filepath.Join(store.filesDir(id), "p-0", "00000000000000000000.log")) {
			t.Fatalf("snapshot %s lost its links", id)
		}
	}
	sink, err := store.Create(1, 99, 1, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = sink // a crash before Close
	store = newTestStore(t, dir, 2)
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 {
		t.Fatalf("snapshot dir after reopening holds %d entries, want the 2 finished snapshots", len(ents))
	}
}

// TestSnapshotStreamedToAFollower: what Open streams is exactly meta.Size
// bytes, and a store receiving it through a sink holds files a restore
// links into a fresh state directory.
func TestSnapshotStreamedToAFollower(t *testing.T) {
	root := t.TempDir()
	state, raftDir := filepath.Join(root, "state"), filepath.Join(root, "raft")
	big := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	writeFile(t, filepath.Join(state, "p-0", "00000000000000000000.log"), string(big))
	writeFile(t, filepath.Join(state, "p-0", "empty.json"), "")
	writeFile(t, filepath.Join(state, "meta", "nodes.json"), "[1,2,3]")
	if err := os.MkdirAll(filepath.Join(state, "nothing"), 0o755); err != nil {
		t.Fatal(err)
	}
	leader := newTestStore(t, filepath.Join(raftDir, "snapshots"), 2)
	id := takeSnapshot(t, leader, state, raftDir, 7)
	// Appends after the capture are not streamed.
	appendFile(t, filepath.Join(state, "p-0", "00000000000000000000.log"), "later")

	meta, rc, err := leader.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	followerRoot := t.TempDir()
	follower := newTestStore(t, filepath.Join(followerRoot, "raft", "snapshots"), 2)
	sink, err := follower.Create(1, meta.Index, meta.Term, meta.Configuration, meta.ConfigurationIndex, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Small writes: the head and files split across them.
	n, err := io.CopyBuffer(sink, io.LimitReader(rc, meta.Size), make([]byte, 1000))
	rc.Close()
	if err != nil || n != meta.Size {
		t.Fatalf("streamed %d of %d bytes: %v", n, meta.Size, err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	_, m := openManifest(t, follower, sink.ID())
	if m.StateIndex != 7 || len(m.Files) != 3 {
		t.Fatalf("received manifest %+v", m)
	}
	fstate := filepath.Join(followerRoot, "state")
	if _, err := restoreFromLinks(fstate, follower.filesDir(sink.ID()), m); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(fstate, "p-0", "00000000000000000000.log")); got != string(big) {
		t.Fatalf("follower segment: %d bytes, want %d", len(got), len(big))
	}
	if readFile(t, filepath.Join(fstate, "meta", "nodes.json")) != "[1,2,3]" || !exists(filepath.Join(fstate, "nothing")) {
		t.Fatal("follower state lacks the small files or the empty directory")
	}

	// A stream cut short is refused at Close and leaves nothing behind.
	_, rc, err = leader.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	sink, err = follower.Create(1, meta.Index+1, meta.Term, meta.Configuration, meta.ConfigurationIndex, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(sink, io.LimitReader(rc, meta.Size/2)); err != nil {
		t.Fatal(err)
	}
	rc.Close()
	if err := sink.Close(); err == nil {
		t.Fatal("a short snapshot stream was stored")
	}
	if metas, _ := follower.List(); len(metas) != 1 {
		t.Fatalf("follower lists %d snapshots after a short stream, want 1", len(metas))
	}
}

// TestRestoreOnlyIntoAnUnopenedStateDir: a snapshot restores into the state
// directory only until NewRaft hands the directory to its caller (and the
// node's state index becomes the one the snapshot recorded); after that an
// install must restart the node, and never rewrites files the broker has
// opened.
func TestRestoreOnlyIntoAnUnopenedStateDir(t *testing.T) {
	root := t.TempDir()
	src, raftDir := filepath.Join(root, "leader-state"), filepath.Join(root, "raft")
	writeFile(t, filepath.Join(src, "orders-0", "00000000000000000000.log"), "from the leader")
	store := newTestStore(t, filepath.Join(raftDir, "snapshots"), 3)
	snap42 := takeSnapshot(t, store, src, raftDir, 42)
	snap43 := takeSnapshot(t, store, src, raftDir, 43)
	open := func(id string) io.ReadCloser {
		_, rc, err := store.Open(id)
		if err != nil {
			t.Fatal(err)
		}
		return rc
	}

	state := filepath.Join(root, "state")
	r := &Raft{o: RaftOptions{StateDir: state}, log: slog.New(slog.DiscardHandler), snaps: store}
	f := &fsm{r: r, readyCh: make(chan struct{})}
	r.fsm = f

	// While NewRaft runs: restored in place.
	if err := f.Restore(open(snap42)); err != nil {
		t.Fatalf("restore before the state is opened: %v", err)
	}
	seg := filepath.Join(state, "orders-0", "00000000000000000000.log")
	if got := readFile(t, seg); got != "from the leader" {
		t.Fatalf("restored segment: %q", got)
	}
	if got := f.lastApplied.Load(); got != 42 {
		t.Fatalf("state index after the restore: %d, want the snapshot's 42", got)
	}
	if !r.restoredBeforeOpen() {
		t.Fatal("the restore before opening was not noted")
	}

	// The broker opens the state (and writes to it); from now on an
	// install cannot replace it in place.
	f.markOpened()
	replaceFile(t, seg, "opened by the broker")
	// A snapshot of what the state already holds (the same state index)
	// is accepted as it is: no restart (the hook is nil, so one would
	// fail), nothing rewritten.
	if err := f.Restore(open(snap42)); err != nil {
		t.Fatalf("install of the state this node holds: %v", err)
	}
	// Any other snapshot needs a restart; without a way to restart, the
	// install fails and the files stay as they are.
	if err := f.Restore(open(snap43)); err == nil {
		t.Fatal("an install into an opened state directory, with no restart hook, succeeded")
	}
	if got := readFile(t, seg); got != "opened by the broker" {
		t.Fatalf("an install rewrote an opened state directory: %q", got)
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
	if err := f.Restore(open(snap43)); err == nil || restarts != 1 {
		t.Fatalf("install with a restart that returned: %v, %d restarts", err, restarts)
	}
	if err := f.Restore(open(snap42)); err != nil || restarts != 1 {
		t.Fatalf("install of the state this node holds, with a hook: %v, %d restarts", err, restarts)
	}
	if f.restarting.Load() {
		t.Fatal("an install that did not restart left the node marked restarting")
	}
	if got := f.lastApplied.Load(); got != 42 {
		t.Fatalf("state index after installs that changed nothing: %d, want 42", got)
	}
}

// TestTarSnapshotRefused: a snapshot of the tar format (raft's file store,
// before manifests) stops the node instead of being skipped: the log
// before it may be gone.
func TestTarSnapshotRefused(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "2-100-1700000000000", "meta.json"), "{}")
	writeFile(t, filepath.Join(dir, "2-100-1700000000000", "state.bin"), "tar")
	if _, err := newSnapStore(dir, 2, slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("a tar snapshot was skipped silently")
	}
}

// TestSnapshotByAppliedBytes: past SnapshotBytes of applied entries a
// snapshot is taken, though the entry threshold and the interval are far
// off; a node restarted afterwards restores it and applies only the
// entries after it.
func TestSnapshotByAppliedBytes(t *testing.T) {
	base := t.TempDir()
	self := Peer{ID: 1, Raft: freeAddr(t)}
	o := RaftOptions{Self: self, Peers: []Peer{self}, Dir: filepath.Join(base, "raft"), StateDir: filepath.Join(base, "state"),
		SnapshotThreshold: 1 << 30, SnapshotInterval: time.Hour, SnapshotBytes: 2000, StartWait: 10 * time.Second}
	n := startNode(t, o, true)
	defer func() { _ = n.r.Shutdown() }()
	testwait.For(t, "leadership", 15*time.Second, func() bool { return n.r.Ready() })
	for v := uint64(0); v < 200; v++ {
		if err := propose(t, n, v); err != nil {
			t.Fatal(err)
		}
	}
	testwait.For(t, "a snapshot by bytes", 15*time.Second, func() bool {
		metas, err := n.r.snaps.List()
		return err == nil && len(metas) > 0
	})
	metas, _ := n.r.snaps.List()
	_, m := openManifest(t, n.r.snaps, metas[0].ID)
	if m.StateIndex == 0 {
		t.Fatal("snapshot without a state index")
	}
	want := fmt.Sprint(n.list.snapshot())
	if err := n.r.Shutdown(); err != nil {
		t.Fatal(err)
	}
	n = startNode(t, o, true)
	testwait.For(t, "leadership after the restart", 15*time.Second, func() bool { return n.r.Ready() })
	testwait.For(t, "the restarted node to hold every value", 15*time.Second, func() bool {
		return fmt.Sprint(n.list.snapshot()) == want
	})
}

// TestSnapshotBeingReadIsNotReaped: a snapshot opened (to send it to a
// follower) keeps its files until its reader closes; the next reap then
// takes it.
func TestSnapshotBeingReadIsNotReaped(t *testing.T) {
	root := t.TempDir()
	state, raftDir := filepath.Join(root, "state"), filepath.Join(root, "raft")
	writeFile(t, filepath.Join(state, "p-0", "00000000000000000000.log"), "data")
	dir := filepath.Join(raftDir, "snapshots")
	store := newTestStore(t, dir, 1)
	first := takeSnapshot(t, store, state, raftDir, 10)
	meta, rc, err := store.Open(first)
	if err != nil {
		t.Fatal(err)
	}
	takeSnapshot(t, store, state, raftDir, 20)
	n, err := io.Copy(io.Discard, rc)
	if err != nil || n != meta.Size {
		t.Fatalf("read %d of %d bytes of a snapshot reaped while open: %v", n, meta.Size, err)
	}
	rc.Close()
	takeSnapshot(t, store, state, raftDir, 30)
	if exists(filepath.Join(dir, first)) {
		t.Fatalf("snapshot %s outlived its reader and a later reap", first)
	}
}

// TestStagingLeftoversRemoved: links of a capture a crash left behind are
// removed when the store opens.
func TestStagingLeftoversRemoved(t *testing.T) {
	root := t.TempDir()
	state, raftDir := filepath.Join(root, "state"), filepath.Join(root, "raft")
	writeFile(t, filepath.Join(state, "p-0", "00000000000000000000.log"), "data")
	s, err := captureState(state, raftDir)
	if err != nil {
		t.Fatal(err)
	}
	newTestStore(t, filepath.Join(raftDir, "snapshots"), 2)
	if exists(s.dir) {
		t.Fatalf("capture %s survived the store's opening", s.dir)
	}
}
