package storage

import (
	"os"
	"testing"
	"time"
)

// Many index entries in one segment exercise the bounded in-memory tail
// cache: older entries are served from the file, newer from memory.
func TestIndexTailCacheAndFileLookups(t *testing.T) {
	dir := t.TempDir()
	opts := Options{IndexIntervalBytes: 1} // an entry for every batch
	l := openLog(t, dir, opts)
	const n = 3000
	for i := range n {
		mustAppend(t, l, simpleBatch(t, 1, 1, int64(i)))
	}
	l.mu.RLock()
	act := l.active()
	memLen, flushed, total := len(act.off.mem), act.off.flushed, act.off.total
	l.mu.RUnlock()
	if memLen > memIndexMax || flushed < total-int64(memLen) || total != n-1 {
		t.Fatalf("cache invariant broken: mem %d flushed %d total %d", memLen, flushed, total)
	}
	check := func() {
		for _, off := range []int64{0, 1, 7, 500, 1500, 2400, 2998, 2999} {
			data, err := l.Read(off, 10, false)
			if err != nil || mustHeader(t, data).BaseOffset != off {
				t.Fatalf("Read(%d): %v", off, err)
			}
			if got, _, _, _ := l.OffsetForTimestamp(off); got != off {
				t.Fatalf("OffsetForTimestamp(%d) = %d", off, got)
			}
		}
	}
	check()
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	l.mu.RLock()
	flushed = act.off.flushed
	l.mu.RUnlock()
	if flushed != n-1 {
		t.Fatalf("Sync left %d of %d entries unflushed", n-1-flushed, n-1)
	}
	if fi, _ := os.Stat(segmentFile(dir, 0, indexSuffix)); fi.Size() != (n-1)*8 {
		t.Fatalf("index file %d bytes", fi.Size())
	}
	l.Close()
	l = openLog(t, dir, opts)
	defer l.Close()
	check()
}

func TestDeleteRemovesDirectory(t *testing.T) {
	dir := t.TempDir() + "/topic-0"
	l := openLog(t, dir, Options{})
	mustAppend(t, l, simpleBatch(t, 1, 1, 1))
	if l.Dir() != dir {
		t.Fatal("Dir")
	}
	if err := l.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("dir still there: %v", err)
	}
	if err := l.Sync(); err == nil {
		t.Fatal("Sync after Delete")
	}
}

func TestNeedsCompactionTriggers(t *testing.T) {
	clk := newClock(1_000_000)
	opts := Options{Compact: true, SegmentBytes: 300, RetentionMs: -1, MinCleanableDirtyRatio: 0.9,
		MaxCompactionLagMs: 60_000, Now: clk.Now}
	l := openLog(t, t.TempDir(), opts)
	defer l.Close()
	if l.NeedsCompaction() {
		t.Fatal("empty log needs compaction")
	}
	for i := range 10 {
		mustAppend(t, l, batch(t, 0, rec{key: "k", value: "v", ts: clk.Ms() - 1000 + int64(i)}))
	}
	if err := l.Compact(); err != nil { // learns horizons, cleans everything
		t.Fatal(err)
	}
	for i := range 3 {
		mustAppend(t, l, batch(t, 0, rec{key: "k", value: "w", ts: clk.Ms() - 500 + int64(i)}))
	}
	if r := l.DirtyRatio(); r <= 0 || r >= 0.9 {
		t.Fatalf("dirty ratio %v", r)
	}
	if l.NeedsCompaction() {
		t.Fatal("below the dirty ratio and younger than max lag")
	}
	clk.Advance(2 * time.Minute)
	if !l.NeedsCompaction() {
		t.Fatal("dirty data older than max.compaction.lag.ms must trigger")
	}
	l.SetOptions(Options{Compact: false})
	if l.NeedsCompaction() {
		t.Fatal("non-compacted log")
	}
}

func TestRetentionUsesMtimeWithoutTimestamps(t *testing.T) {
	clk := newClock(time.Now().UnixMilli())
	l := openLog(t, t.TempDir(), Options{SegmentBytes: 300, RetentionMs: 60_000, RetentionBytes: -1, Now: clk.Now})
	defer l.Close()
	for range 10 {
		mustAppend(t, l, batch(t, 0, rec{key: "k", value: "v", ts: -1}))
	}
	if n, err := l.EnforceRetention(); n != 0 || err != nil {
		t.Fatalf("fresh files without timestamps deleted: %d %v", n, err)
	}
	clk.Advance(time.Hour)
	if n, err := l.EnforceRetention(); n == 0 || err != nil {
		t.Fatalf("old files not deleted: %d %v", n, err)
	}
}
