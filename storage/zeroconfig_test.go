package storage

import (
	"fmt"
	"testing"
	"time"
)

// Topic config values of 0 mean what Kafka means by them, not "default".

func TestRetentionMsZeroDeletesEverythingOlderThanNow(t *testing.T) {
	clk := newClock(10_000_000)
	dir := t.TempDir()
	l := openLog(t, dir, Options{SegmentBytes: 500, RetentionMs: 0, RetentionBytes: -1, Now: clk.Now})
	defer l.Close()
	for i := range 10 {
		mustAppend(t, l, simpleBatch(t, 1, 100, clk.Ms()-int64(10-i)))
	}
	// A record stamped exactly now is not older than now - 0: kept, with
	// its segment.
	mustAppend(t, l, simpleBatch(t, 1, 100, clk.Ms()))
	next := l.NextOffset()
	if _, err := l.EnforceRetention(); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, l, l.StartOffset()); len(got) == 0 || got[len(got)-1].off != next-1 {
		t.Fatalf("record stamped now was deleted: %d records left", len(got))
	}
	if l.StartOffset() == 0 {
		t.Fatal("retention.ms=0 deleted nothing older than now")
	}
	clk.Advance(time.Millisecond)
	if _, err := l.EnforceRetention(); err != nil {
		t.Fatal(err)
	}
	if l.StartOffset() != next || l.NextOffset() != next || l.Size() != 0 {
		t.Fatalf("retention.ms=0 one ms later: start %d next %d size %d, want everything gone at %d",
			l.StartOffset(), l.NextOffset(), l.Size(), next)
	}
	if base, _ := mustAppend(t, l, simpleBatch(t, 1, 1, clk.Ms())); base != next {
		t.Fatalf("append after full deletion at %d, want %d", base, next)
	}
}

func TestRetentionBytesZeroDeletesEverySegment(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{SegmentBytes: 500, RetentionMs: -1, RetentionBytes: 0})
	defer l.Close()
	for i := range 10 {
		mustAppend(t, l, simpleBatch(t, 1, 100, int64(i)))
	}
	next := l.NextOffset()
	n, err := l.EnforceRetention()
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 || l.StartOffset() != next || l.Size() != 0 {
		t.Fatalf("retention.bytes=0: deleted %d segments, start %d (want %d), size %d", n, l.StartOffset(), next, l.Size())
	}
	if got := segmentFiles(t, dir, logSuffix); len(got) != 1 {
		t.Fatalf("want only the new empty active segment on disk, have %v", got)
	}
	// An empty log has nothing to delete and stays put.
	if n, err := l.EnforceRetention(); err != nil || n != 0 {
		t.Fatalf("second pass on an empty log: %d, %v", n, err)
	}
}

func TestRetentionBytesNegativeIsUnlimited(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{SegmentBytes: 500, RetentionMs: -1, RetentionBytes: -1})
	defer l.Close()
	for i := range 10 {
		mustAppend(t, l, simpleBatch(t, 1, 100, int64(i)))
	}
	if n, err := l.EnforceRetention(); err != nil || n != 0 || l.StartOffset() != 0 {
		t.Fatalf("retention.bytes=-1 deleted %d segments (start %d): %v", n, l.StartOffset(), err)
	}
}

// compactedWithTombstone writes k=v, then a tombstone for k, then enough
// other keys to close the tombstone's segment.
func compactedWithTombstone(t *testing.T, opts Options) *Log {
	l := openLog(t, t.TempDir(), opts)
	mustAppend(t, l, batch(t, 0, rec{key: "k", value: "v", ts: 1000}))
	mustAppend(t, l, batch(t, 0, rec{key: "k", tombstone: true, ts: 1001}))
	for i := range 10 {
		mustAppend(t, l, batch(t, 0, rec{key: fmt.Sprintf("o%d", i), value: "x", ts: int64(1002 + i)}))
	}
	return l
}

func hasTombstone(t *testing.T, l *Log) bool {
	for _, r := range readAll(t, l, l.StartOffset()) {
		if r.key == "k" && r.null {
			return true
		}
	}
	return false
}

func TestDeleteRetentionMsZeroDropsTombstonesAtTheNextPass(t *testing.T) {
	clk := newClock(1_000_000)
	base := Options{Compact: true, SegmentBytes: 200, RetentionMs: -1, RetentionBytes: -1, Now: clk.Now}
	for _, tc := range []struct {
		deleteRetentionMs int64
		wantTombstone     bool
	}{{0, false}, {DefaultDeleteRetentionMs, true}} {
		opts := base
		opts.DeleteRetentionMs = tc.deleteRetentionMs
		l := compactedWithTombstone(t, opts)
		// First pass stamps the horizon (now + delete.retention.ms); the
		// second, at the same instant, is past it only when that is 0.
		for range 2 {
			if err := l.Compact(); err != nil {
				t.Fatal(err)
			}
		}
		if got := hasTombstone(t, l); got != tc.wantTombstone {
			t.Errorf("delete.retention.ms=%d: tombstone kept %v, want %v", tc.deleteRetentionMs, got, tc.wantTombstone)
		}
		l.Close()
	}
}

func TestMinCleanableDirtyRatioZero(t *testing.T) {
	clk := newClock(1_000_000)
	l := openLog(t, t.TempDir(), Options{Compact: true, SegmentBytes: 200, RetentionMs: -1, RetentionBytes: -1,
		MinCleanableDirtyRatio: 0, Now: clk.Now})
	defer l.Close()
	if l.NeedsCompaction() {
		t.Fatal("empty log needs compaction")
	}
	for i := range 10 {
		mustAppend(t, l, batch(t, 0, rec{key: fmt.Sprintf("k%d", i%3), value: "v", ts: int64(1000 + i)}))
	}
	if err := l.Compact(); err != nil {
		t.Fatal(err)
	}
	// Everything closed is clean now; learn horizons once more so only the
	// ratio decides.
	if l.NeedsCompaction() {
		if err := l.Compact(); err != nil {
			t.Fatal(err)
		}
	}
	if l.NeedsCompaction() {
		t.Fatalf("nothing dirty (ratio %v), yet ratio 0 asks for compaction", l.DirtyRatio())
	}
	// One more closed segment of dirty data, however small a share.
	for i := range 3 {
		mustAppend(t, l, batch(t, 0, rec{key: "k0", value: "w", ts: int64(2000 + i)}))
	}
	if r := l.DirtyRatio(); r <= 0 {
		t.Fatalf("dirty ratio %v after new closed data", r)
	}
	if !l.NeedsCompaction() {
		t.Fatalf("min.cleanable.dirty.ratio=0 with dirty ratio %v: must compact", l.DirtyRatio())
	}
}

func TestIndexIntervalBytesZeroIndexesEveryBatch(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{SegmentBytes: 100_000, IndexIntervalBytes: 0, RetentionMs: -1, RetentionBytes: -1})
	for i := range 20 {
		mustAppend(t, l, simpleBatch(t, 1, 10, int64(i)))
	}
	l.mu.RLock()
	entries := l.active().off.total
	l.mu.RUnlock()
	// Every batch but the first (position 0 needs no entry) has one.
	if entries != 19 {
		t.Fatalf("index.interval.bytes=0: %d index entries for 20 batches, want 19", entries)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, Options{IndexIntervalBytes: 0})
	defer l.Close()
	if got := readAll(t, l, 0); len(got) != 20 {
		t.Fatalf("after reopen: %d records", len(got))
	}
}
