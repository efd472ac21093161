package cluster

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/segment"

	"github.com/regent-broker/regent/interop/testwait"
)

// openLazyWAL opens a wal in dir whose fsyncs are deferred by every, with
// small segments so a test seals several.
func openLazyWAL(t *testing.T, dir string, every time.Duration, segSize int) (*raftwal.WAL, *lazySyncFS) {
	t.Helper()
	fs := newLazySyncFS(every, slog.Default())
	w, err := raftwal.Open(dir, raftwal.WithSegmentFiler(segment.NewFiler(dir, fs)), raftwal.WithSegmentSize(segSize))
	if err != nil {
		_ = fs.close()
		t.Fatal(err)
	}
	return w, fs
}

func countSegments(t *testing.T, dir string) int {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".wal") {
			n++
		}
	}
	return n
}

// Stores are not fsynced one by one; a segment's first write (its header)
// and the write that seals it are, before raft-wal relies on them; every entry is in the files when
// StoreLogs returns (a copy of the directory, as a killed process leaves
// it, reads them all), and after Close.
func TestLazySyncSealIsDurable(t *testing.T) {
	dir := t.TempDir()
	w, fs := openLazyWAL(t, dir, time.Hour, 64<<10) // the pass never runs
	data := bytes.Repeat([]byte("r"), 1000)
	const n = 200 // about 3 segments of 64 KiB
	for i := uint64(1); i <= n; i++ {
		if err := w.StoreLogs([]*raft.Log{{Index: i, Term: 1, Data: data}}); err != nil {
			t.Fatal(err)
		}
	}
	// Rotation runs in the background: wait until every sealed segment's
	// successor exists. Two fsyncs per sealed segment (its first write and
	// its seal), one for the tail's first write if it has one: none for
	// the other stores.
	var segs int
	testwait.For(t, "two fsyncs per sealed segment", 5*time.Second, func() bool {
		segs = countSegments(t, dir)
		got := fs.fsyncs.Load()
		return segs >= 3 && (got == int64(2*(segs-1)) || got == int64(2*(segs-1)+1))
	})
	synced := fs.fsyncs.Load()

	copyDir(t, dir, dir+".copy")
	c, err := openWALStore(dir+".copy", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkEntries(t, c, n, data)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fs.close(); err != nil {
		t.Fatal(err)
	}
	if got := fs.fsyncs.Load(); got <= synced {
		t.Fatalf("Close made no fsync of the open tail (%d fsyncs before, %d after)", synced, got)
	}
	s, err := openWALStore(dir, time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkEntries(t, s, n, data)
}

func checkEntries(t *testing.T, s raft.LogStore, n uint64, data []byte) {
	t.Helper()
	for i := uint64(1); i <= n; i++ {
		var l raft.Log
		if err := s.GetLog(i, &l); err != nil {
			t.Fatalf("GetLog(%d): %v", i, err)
		}
		if !bytes.Equal(l.Data, data) {
			t.Fatalf("entry %d: %d bytes, want %d", i, len(l.Data), len(data))
		}
	}
}

// The background pass fsyncs what was written since the last one.
func TestLazySyncPass(t *testing.T) {
	dir := t.TempDir()
	w, fs := openLazyWAL(t, dir, 5*time.Millisecond, 1<<20)
	defer func() {
		_ = w.Close()
		_ = fs.close()
	}()
	if err := w.StoreLogs([]*raft.Log{{Index: 1, Term: 1, Data: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "background fsync", 5*time.Second, func() bool { return fs.fsyncs.Load() >= 1 })
	before := fs.fsyncs.Load()
	if err := w.StoreLogs([]*raft.Log{{Index: 2, Term: 1, Data: []byte("y")}}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "fsync of the second store", 5*time.Second, func() bool { return fs.fsyncs.Load() > before })
}

// The node's store with a sync interval: votes and terms are raft-wal's
// meta store's (fsynced by it); entries read back after a reopen.
func TestLazyWALStoreReopens(t *testing.T) {
	dir := t.TempDir()
	s, err := openLogStore(dir, time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	if err := s.StoreLogs([]*raft.Log{{Index: 1, Term: 7, Data: []byte("a")}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The same directory opens with fsync per store too (no format change).
	s, err = openLogStore(dir, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != 7 {
		t.Fatalf("CurrentTerm = %d, %v", v, err)
	}
	checkEntries(t, s, 1, []byte("a"))
	if _, err := os.Stat(filepath.Join(dir, walDirName)); err != nil {
		t.Fatal(err)
	}
}

func TestSealsSegment(t *testing.T) {
	frame := func(typ byte, payload int) []byte {
		b := make([]byte, walFrameHeaderLen)
		b[0] = typ
		binary.LittleEndian.PutUint32(b[4:], uint32(payload))
		pad := (walFrameHeaderLen - payload%walFrameHeaderLen) % walFrameHeaderLen
		return append(b, make([]byte, payload+pad)...)
	}
	commit := frame(walFrameCommit, 0)[:walFrameHeaderLen]
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	header := make([]byte, walFileHeaderLen)
	for _, c := range []struct {
		name string
		p    []byte
		off  int64
		want bool
	}{
		{"entries and commit", cat(frame(walFrameEntry, 13), frame(walFrameEntry, 16), commit), 4096, false},
		{"sealing", cat(frame(walFrameEntry, 1001), frame(walFrameIndex, 8), commit), 4096, true},
		{"seal only", cat(frame(walFrameIndex, 4), commit), 4096, true},
		{"header then entries", cat(header, frame(walFrameEntry, 5), commit), 0, false},
		{"header then seal", cat(header, frame(walFrameEntry, 5), frame(walFrameIndex, 4), commit), 0, true},
		{"not frames", []byte{9, 9, 9, 9, 9, 9, 9, 9, 2}, 8, false},
		{"empty", nil, 8, false},
	} {
		if got := sealsSegment(c.p, c.off); got != c.want {
			t.Errorf("%s: sealsSegment = %v, want %v", c.name, got, c.want)
		}
	}
}
