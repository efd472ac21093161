package cluster

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/segment"
)

// TestDirectFileAppends appends frames of awkward sizes the way raft-wal
// does (each at the end of the last), reopens the file mid-block and goes
// on, and checks the file holds exactly the bytes written, zeros after.
func TestDirectFileAppends(t *testing.T) {
	dir := t.TempDir()
	vfs := newDirectVFS()
	const size = 8 << 20
	f, err := vfs.Create(dir, "seg.wal", size)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.(*directFile); !ok {
		t.Logf("%s refuses O_DIRECT: checking raft-wal's buffered files instead", dir)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var want []byte
	appendFrame := func(f interface {
		WriteAt([]byte, int64) (int, error)
		ReadAt([]byte, int64) (int, error)
	}, n int) {
		t.Helper()
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(rng.IntN(255) + 1)
		}
		off := int64(len(want))
		if w, err := f.WriteAt(p, off); err != nil || w != n {
			t.Fatalf("WriteAt(%d bytes at %d) = %d, %v", n, off, w, err)
		}
		want = append(want, p...)
		got := make([]byte, n)
		if _, err := f.ReadAt(got, off); err != nil || !bytes.Equal(got, p) {
			t.Fatalf("read back %d bytes at %d: %v, equal %v", n, off, err, bytes.Equal(got, p))
		}
	}
	// Sizes that start and end inside a block, end on a boundary, span
	// many blocks, and are smaller than a block.
	for _, n := range []int{32, 8, 4056, 4096, 1, 8191, 65536 + 40, 3, 12288, 700} {
		appendFrame(f, n)
	}
	for range 200 {
		appendFrame(f, rng.IntN(20000)+1)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopen: the first write continues inside a block whose prefix is on
	// disk only.
	if len(want)%directBlock == 0 {
		t.Fatal("the script should leave the tail mid-block")
	}
	f, err = vfs.OpenWriter(dir, "seg.wal")
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		appendFrame(f, rng.IntN(9000)+1)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "seg.wal"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != size {
		t.Fatalf("file is %d bytes, want the preallocated %d", len(got), size)
	}
	if !bytes.Equal(got[:len(want)], want) {
		t.Fatal("file content differs from what was written")
	}
	if i := bytes.IndexFunc(got[len(want):], func(r rune) bool { return r != 0 }); i >= 0 {
		t.Fatalf("non-zero byte %d bytes after the written end", i)
	}
}

// TestDirectVFSRaftWAL runs raft-wal on directVFS across segment rolls and
// reopens, and reads every entry back.
func TestDirectVFSRaftWAL(t *testing.T) {
	dir := t.TempDir()
	open := func() *raftwal.WAL {
		t.Helper()
		w, err := raftwal.Open(dir, raftwal.WithSegmentFiler(segment.NewFiler(dir, newDirectVFS())),
			raftwal.WithSegmentSize(256<<10))
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	rng := rand.New(rand.NewPCG(3, 4))
	data := map[uint64][]byte{}
	next := uint64(1)
	store := func(w *raftwal.WAL, count int) {
		t.Helper()
		for count > 0 {
			batch := min(count, rng.IntN(8)+1)
			logs := make([]*raft.Log, batch)
			for i := range logs {
				d := make([]byte, rng.IntN(30000)+1)
				for j := range d {
					d[j] = byte(rng.Uint32())
				}
				logs[i] = &raft.Log{Index: next, Term: 1, Type: raft.LogCommand, Data: d}
				data[next] = d
				next++
			}
			if err := w.StoreLogs(logs); err != nil {
				t.Fatal(err)
			}
			count -= batch
		}
	}
	check := func(w *raftwal.WAL) {
		t.Helper()
		last, err := w.LastIndex()
		if err != nil || last != next-1 {
			t.Fatalf("LastIndex = %d, %v; want %d", last, err, next-1)
		}
		for i := uint64(1); i < next; i++ {
			var l raft.Log
			if err := w.GetLog(i, &l); err != nil {
				t.Fatalf("GetLog(%d): %v", i, err)
			}
			if !bytes.Equal(l.Data, data[i]) {
				t.Fatalf("entry %d differs", i)
			}
		}
	}
	w := open()
	store(w, 300)
	check(w)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		w = open()
		check(w)
		store(w, 100+round)
		check(w)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	names, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	segs := 0
	for _, n := range names {
		if filepath.Ext(n.Name()) == ".wal" {
			segs++
		}
	}
	if segs < 3 {
		t.Fatalf("%d segment files: the test meant to roll segments", segs)
	}
	t.Logf("%d entries over %d segments", next-1, segs)
}
