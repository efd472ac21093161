package storage

import (
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// residentPages counts the pages of the file's [from, to) that are in the
// page cache, and all its pages there.
func residentPages(t *testing.T, path string, from, to int64) (in, all int) {
	t.Helper()
	cached, err := cachedRange(path, from, to)
	if err != nil {
		t.Fatal(err)
	}
	page := int64(os.Getpagesize())
	return int(cached / page), int((to - from + page - 1) / page)
}

// TestDropBehindLetsAppendsGo: with drop-behind on, what a log appended
// more than a window ago leaves the page cache while the last window stays;
// off, everything appended stays cached. Every record reads back either
// way.
func TestDropBehindLetsAppendsGo(t *testing.T) {
	for _, on := range []bool{false, true} {
		dir := t.TempDir()
		files := NewFileCache(64)
		files.SetDropBehind(on)
		l := openLog(t, dir, Options{SegmentBytes: 1 << 30, IndexIntervalBytes: 4096, RetentionMs: -1, RetentionBytes: -1, Files: files})
		b := simpleBatch(t, 16, 4000, 1) // about 64 KiB
		for l.Size() < 40<<20 {
			mustAppend(t, l, b)
		}
		seg := lastSegmentLog(t, dir)
		size := l.Size()
		behind := size - dropWindow - 2*dropStep // passes come every step
		oldIn, oldAll := residentPages(t, seg, 0, behind/4096*4096)
		newIn, newAll := residentPages(t, seg, (size-dropWindow/2)/4096*4096, size)
		t.Logf("drop-behind %v: %d of %d pages more than a window back cached, %d of %d of the last half window", on, oldIn, oldAll, newIn, newAll)
		if newIn < newAll*9/10 {
			t.Errorf("drop-behind %v: %d of %d pages of the last half window cached, want nearly all", on, newIn, newAll)
		}
		if on && oldIn > oldAll/100 {
			t.Errorf("drop-behind on: %d of %d pages more than a window back still cached", oldIn, oldAll)
		}
		if !on && oldIn < oldAll*9/10 {
			t.Errorf("drop-behind off: %d of %d pages cached, want nearly all", oldIn, oldAll)
		}
		if got := readAll(t, l, 0); int64(len(got)) != l.NextOffset() {
			t.Errorf("drop-behind %v: read %d records back, want %d", on, len(got), l.NextOffset())
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// dirtyPages is how many pages of the file at path are dirty (written,
// not yet written back), by cachestat(2); ok false where the kernel has
// no cachestat (before Linux 6.5).
func dirtyPages(t *testing.T, path string) (dirty int64, ok bool) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rng struct{ off, len uint64 } // whole file: len 0
	var st struct{ cache, dirty, writeback, evicted, recentlyEvicted uint64 }
	if _, _, errno := unix.Syscall6(unix.SYS_CACHESTAT, f.Fd(), uintptr(unsafe.Pointer(&rng)), uintptr(unsafe.Pointer(&st)), 0, 0, 0); errno != 0 {
		return 0, false
	}
	return int64(st.dirty), true
}

// TestWriteBehindStartsWriteback: with write-behind on (a cluster node
// that keeps its appends cached), what a log appends is written back as
// it goes, so no more than a step or two of it stays dirty for a later
// fsync (a raft snapshot) to flush at once.
func TestWriteBehindStartsWriteback(t *testing.T) {
	dir := t.TempDir()
	files := NewFileCache(64)
	files.SetWriteBehind(true)
	l := openLog(t, dir, Options{SegmentBytes: 1 << 30, IndexIntervalBytes: 4096, RetentionMs: -1, RetentionBytes: -1, Files: files})
	defer l.Close()
	b := simpleBatch(t, 16, 4000, 1) // about 64 KiB
	for l.Size() < 40<<20 {
		mustAppend(t, l, b)
	}
	dirty, ok := dirtyPages(t, lastSegmentLog(t, dir))
	if !ok {
		t.Skip("no cachestat(2) on this kernel")
	}
	page := int64(os.Getpagesize())
	t.Logf("write-behind: %d KiB of %d KiB appended still dirty", dirty*page>>10, l.Size()>>10)
	if dirty*page > 2*writeBehindStep {
		t.Fatalf("write-behind left %d KiB dirty, want at most %d KiB", dirty*page>>10, 2*writeBehindStep>>10)
	}
	if got := readAll(t, l, 0); int64(len(got)) != l.NextOffset() {
		t.Errorf("read %d records back, want %d", len(got), l.NextOffset())
	}
}
