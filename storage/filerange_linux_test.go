package storage

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestFileRangeCached: a range just written is in the page cache; once
// its pages are dropped it is not (the fetch then reads it off the loop).
func TestFileRangeCached(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{SegmentBytes: 1 << 20, Files: NewFileCache(64)})
	defer l.Close()
	for i := range 40 {
		mustAppend(t, l, simpleBatch(t, 3, 2000, int64(1000+i)))
	}
	r, err := l.ReadRange(0, 1<<20, false)
	if err != nil || r == nil {
		t.Fatalf("range %v, %v", r, err)
	}
	defer r.Release()
	if !r.Cached() {
		t.Fatal("a range just written is not cached")
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(r.Fd(), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Skipf("cannot drop the pages: %v", err)
	}
	if r.Cached() {
		t.Skip("pages still cached after FADV_DONTNEED (filesystem keeps them)")
	}
	if _, err := r.AppendTo(nil); err != nil {
		t.Fatal(err)
	}
}
