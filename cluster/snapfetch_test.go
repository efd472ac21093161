package cluster

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// fetchPeer is a snapshot store serving fetches on 127.0.0.1 through a
// muxStream, as NewRaft sets one up.
type fetchPeer struct {
	store *snapStore
	mux   *muxStream
	addr  string
	state string
	raft  string
}

func newFetchPeer(t *testing.T) *fetchPeer {
	t.Helper()
	root := t.TempDir()
	p := &fetchPeer{state: filepath.Join(root, "state"), raft: filepath.Join(root, "raft")}
	p.store = newTestStore(t, filepath.Join(p.raft, "snapshots"), 2)
	inner, err := newTCPStream("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	p.addr = inner.Addr().String()
	p.store.setFetch(p.addr, p.state, nil)
	p.mux = newMuxStream(inner, slog.New(slog.DiscardHandler), p.store.server.serve)
	p.store.dialFetch = p.mux.dialFetch
	t.Cleanup(func() { _ = p.mux.Close() })
	return p
}

// install streams snapshot id from leader into follower's store as raft
// does (Open, Create, copy meta.Size bytes, Close) and returns the sink.
func install(t *testing.T, leader, follower *snapStore, id string) (raft.SnapshotSink, error) {
	t.Helper()
	meta, rc, err := leader.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	sink, err := follower.Create(1, meta.Index, meta.Term, meta.Configuration, meta.ConfigurationIndex, nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(sink, io.LimitReader(rc, meta.Size))
	if err != nil || n != meta.Size {
		t.Fatalf("streamed %d of %d bytes: %v", n, meta.Size, err)
	}
	return sink, sink.Close()
}

func pattern(seed byte, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i%251)
	}
	return string(b)
}

const mib = 1 << 20

// TestSnapshotPullOnlyWhatFollowerLacks: a follower holding most of the
// leader's files receives a manifest-only stream and pulls only what it
// lacks: a sealed segment it holds is hard-linked, an active segment it
// holds the start of is copied locally and only its tail pulled, a file of
// the same name and size but other bytes (in its middle) is pulled whole,
// a file it lacks is pulled. The leader serves exactly those bytes, and
// the state restored from the received snapshot is the leader's.
func TestSnapshotPullOnlyWhatFollowerLacks(t *testing.T) {
	leader, follower := newFetchPeer(t), newFetchPeer(t)
	sealed := pattern(1, 3*mib)
	active := pattern(2, 2*mib)
	other := pattern(3, mib)
	fresh := pattern(4, mib)
	files := map[string]string{
		"p-0/00000000000000000000.log": sealed,
		"p-0/00000000000000001000.log": active,
		"p-1/00000000000000000000.log": other,
		"p-2/00000000000000000000.log": fresh,
		"topics.json":                  `{"p":3}`,
	}
	for rel, data := range files {
		writeFile(t, filepath.Join(leader.state, rel), data)
	}
	id := takeSnapshot(t, leader.store, leader.state, leader.raft, 50)

	writeFile(t, filepath.Join(follower.state, "p-0/00000000000000000000.log"), sealed)
	writeFile(t, filepath.Join(follower.state, "p-0/00000000000000001000.log"), active[:mib])
	differs := []byte(other)
	differs[len(differs)/2] ^= 0xff // same name, same size, other bytes
	writeFile(t, filepath.Join(follower.state, "p-1/00000000000000000000.log"), string(differs))
	writeFile(t, filepath.Join(follower.state, "stale-0/00000000000000000000.log"), "gone")

	sink, err := install(t, leader.store, follower.store, id)
	if err != nil {
		t.Fatalf("install: %v", err)
	}
	st := follower.store.transfers()
	wantPulled := int64(mib + len(other) + len(fresh) + len(files["topics.json"]))
	if served := leader.store.transfers().ServedBytes; served != wantPulled || st.PulledBytes != wantPulled {
		t.Fatalf("leader served %d bytes, follower pulled %d; want the %d it lacked", served, st.PulledBytes, wantPulled)
	}
	if st.LinkedFiles != 1 || st.LinkedBytes != int64(len(sealed)) || st.CopiedBytes != mib || st.PulledFiles != 4 {
		t.Fatalf("transfer stats %+v", st)
	}
	m, err := readManifest(filepath.Join(follower.raft, "snapshots", sink.ID()))
	if err != nil || m.Source != "" {
		t.Fatalf("stored manifest: %v, source %q", err, m.Source)
	}
	held, _ := os.Stat(filepath.Join(follower.state, "p-0/00000000000000000000.log"))
	linked, _ := os.Stat(filepath.Join(follower.store.filesDir(sink.ID()), "p-0/00000000000000000000.log"))
	if !os.SameFile(held, linked) {
		t.Fatal("the sealed segment the follower held was not hard-linked")
	}
	if _, err := restoreFromLinks(follower.state, follower.store.filesDir(sink.ID()), m); err != nil {
		t.Fatal(err)
	}
	for rel, data := range files {
		if got := readFile(t, filepath.Join(follower.state, rel)); got != data {
			t.Fatalf("%s after the install: %d bytes, not the leader's %d", rel, len(got), len(data))
		}
	}
	if exists(filepath.Join(follower.state, "stale-0")) {
		t.Fatal("a directory the snapshot does not hold survived")
	}

	// A follower holding nothing pulls everything.
	empty := newFetchPeer(t)
	before := leader.store.transfers().ServedBytes
	if _, err := install(t, leader.store, empty.store, id); err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, data := range files {
		total += int64(len(data))
	}
	if served := leader.store.transfers().ServedBytes - before; served != total {
		t.Fatalf("an empty follower pulled %d bytes, want all %d", served, total)
	}
}

// TestSnapshotFetchRefusesEscapes: the fetch server serves only files a
// snapshot it holds names, within their recorded size: an id or path that
// escapes, a file the manifest does not name (the meta file, an index), a
// range past the size are refused, and the server goes on serving.
func TestSnapshotFetchRefusesEscapes(t *testing.T) {
	leader := newFetchPeer(t)
	writeFile(t, filepath.Join(leader.state, "p-0", "00000000000000000000.log"), "segment bytes")
	writeFile(t, filepath.Join(leader.state, "p-0", "00000000000000000000.index"), "index")
	id := takeSnapshot(t, leader.store, leader.state, leader.raft, 5)
	writeFile(t, filepath.Join(leader.raft, "secret"), "not served")

	client := func(id string) *fetchClient {
		return &fetchClient{addr: leader.addr, id: id, dial: leader.mux.dialFetch, deadline: time.Now().Add(time.Minute), budget: time.Minute}
	}
	for _, tc := range []struct{ id, path string }{
		{id, "../../secret"},
		{id, "/etc/passwd"},
		{id, "p-0/../../meta.json"},
		{id, `p-0\..\..\meta.json`},
		{id, "p-0/00000000000000000000.index"},
		{id, ""},
		{"../snapshots/" + id, "p-0/00000000000000000000.log"},
		{"..", "snapshots/" + id + "/files/p-0/00000000000000000000.log"},
		{id + snapTmpSuffix, "p-0/00000000000000000000.log"},
		{"no-such-snapshot", "p-0/00000000000000000000.log"},
	} {
		fc := client(tc.id)
		f, _ := os.CreateTemp(t.TempDir(), "pull")
		err := fc.pull(tc.path, 0, 4, f)
		f.Close()
		fc.close()
		if !errors.Is(err, errFetchRefused) {
			t.Errorf("id %q path %q: %v, want a refusal", tc.id, tc.path, err)
		}
	}
	fc := client(id)
	defer fc.close()
	f, err := os.Create(filepath.Join(t.TempDir(), "seg"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := fc.pull("p-0/00000000000000000000.log", 5, 100, f); !errors.Is(err, errFetchRefused) {
		t.Fatalf("a range past the recorded size: %v, want a refusal", err)
	}
	if err := fc.pull("p-0/00000000000000000000.log", 0, int64(len("segment bytes")), f); err != nil {
		t.Fatalf("a listed file after refusals: %v", err)
	}
	if got := readFile(t, f.Name()); got != "segment bytes" {
		t.Fatalf("pulled %q", got)
	}

	// An unknown op is refused and closes that connection only.
	c, err := leader.mux.dialFetch(leader.addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = c.Write(appendFetchRequest(nil, 9, id, "p-0/00000000000000000000.log", 0, 1))
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if b, err := bufio.NewReader(c).ReadByte(); err == nil && b == 0 {
		t.Fatal("an unknown op was answered ok")
	}
	c.Close()
	if _, err := fc.sum("p-0/00000000000000000000.log", 4, nil); err != nil {
		t.Fatalf("sum after a bad connection: %v", err)
	}

	// Closing the stream layer closes the fetch connections it serves.
	if err := leader.mux.Close(); err != nil {
		t.Fatal(err)
	}
	_ = fc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := fc.br.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a fetch connection after the close: %v, want it closed", err)
	}
}

// cutConn fails its reads once limit bytes were read through it.
type cutConn struct {
	net.Conn
	left int64
}

func (c *cutConn) Read(p []byte) (int, error) {
	if c.left <= 0 {
		_ = c.Conn.Close()
		return 0, errors.New("test: connection cut")
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.Conn.Read(p)
	c.left -= int64(n)
	return n, err
}

// TestSnapshotPullInterrupted: a pull whose connections keep breaking
// mid-file fails the install, leaving no snapshot and no partial file; an
// install whose connection breaks once resumes at the byte it reached
// (the follower receives each byte once) and succeeds.
func TestSnapshotPullInterrupted(t *testing.T) {
	leader, follower := newFetchPeer(t), newFetchPeer(t)
	data := pattern(7, 3*mib)
	writeFile(t, filepath.Join(leader.state, "p-0", "00000000000000000000.log"), data)
	id := takeSnapshot(t, leader.store, leader.state, leader.raft, 9)

	var cuts atomic.Int32
	follower.store.dialFetch = func(addr string, timeout time.Duration) (net.Conn, error) {
		c, err := leader.mux.dialFetch(addr, timeout)
		if err != nil || cuts.Add(-1) < 0 {
			return c, err
		}
		return &cutConn{Conn: c, left: 256<<10 + 12345}, nil
	}
	cuts.Store(maxFetchReconnects + 1) // every connection breaks
	if _, err := install(t, leader.store, follower.store, id); err == nil || !strings.Contains(err.Error(), "connection cut") {
		t.Fatalf("install over connections that break: %v", err)
	}
	ents, _ := os.ReadDir(filepath.Join(follower.raft, "snapshots"))
	if len(ents) != 0 {
		t.Fatalf("a failed install left %v", ents)
	}

	cuts.Store(1) // one break: resumed
	before := follower.store.transfers().PulledBytes
	sink, err := install(t, leader.store, follower.store, id)
	if err != nil {
		t.Fatalf("install after a break: %v", err)
	}
	// What the follower received: the bytes before the cut and the rest
	// from there, once (the leader may have written more into the socket
	// before the cut).
	if got := follower.store.transfers().PulledBytes - before; got != int64(len(data)) {
		t.Fatalf("the follower received %d bytes for a %d-byte file cut once", got, len(data))
	}
	if got := readFile(t, filepath.Join(follower.store.filesDir(sink.ID()), "p-0", "00000000000000000000.log")); got != data {
		t.Fatal("the resumed file differs from the leader's")
	}
}

// TestSnapshotPullBudget: a pull that runs past the install's budget
// fails with an error saying so, and its files go.
func TestSnapshotPullBudget(t *testing.T) {
	if d := installDeadline(1 << 30 / snapPadUnit); d < 1000*time.Second {
		t.Fatalf("raft's deadline for a 1 GiB snapshot is %s, under 1 MiB/s", d)
	}
	if b := installBudget(100); b <= 0 || b >= raftIOTimeout {
		t.Fatalf("budget of a small snapshot %s: not inside raft's %s", b, raftIOTimeout)
	}
	leader, follower := newFetchPeer(t), newFetchPeer(t)
	writeFile(t, filepath.Join(leader.state, "p-0", "00000000000000000000.log"), pattern(1, mib))
	id := takeSnapshot(t, leader.store, leader.state, leader.raft, 9)
	meta, rc, err := leader.store.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	sink, err := follower.store.Create(1, meta.Index, meta.Term, meta.Configuration, meta.ConfigurationIndex, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(sink, io.LimitReader(rc, meta.Size)); err != nil {
		t.Fatal(err)
	}
	sink.(*snapSink).created = time.Now().Add(-time.Hour) // as if the stream took an hour
	if err := sink.Close(); err == nil || !strings.Contains(err.Error(), "the install may take") {
		t.Fatalf("a pull past its budget: %v", err)
	}
	if metas, _ := follower.store.List(); len(metas) != 0 {
		t.Fatal("a pull past its budget stored a snapshot")
	}
}
