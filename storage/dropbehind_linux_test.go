package storage

import (
	"os"
	"testing"
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
