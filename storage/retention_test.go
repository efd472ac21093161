package storage

import (
	"testing"
	"time"
)

func TestTimeRetention(t *testing.T) {
	clk := newClock(10_000_000)
	dir := t.TempDir()
	opts := Options{SegmentBytes: 1000, RetentionMs: 5000, RetentionBytes: -1, Now: clk.Now}
	l := openLog(t, dir, opts)
	defer l.Close()
	// Old data: timestamps 1..15 s before now; then fresh data.
	for i := range 30 {
		mustAppend(t, l, simpleBatch(t, 1, 100, clk.Ms()-int64(15000-i*500)))
	}
	before := len(segmentFiles(t, dir, logSuffix))
	n, err := l.EnforceRetention()
	if err != nil {
		t.Fatal(err)
	}
	after := len(segmentFiles(t, dir, logSuffix))
	if n == 0 || after != before-n {
		t.Fatalf("deleted %d segments: %d -> %d files", n, before, after)
	}
	// Every remaining segment holds a record newer than the cutoff, except
	// possibly the active one.
	cutoff := clk.Ms() - 5000
	l.mu.RLock()
	for _, s := range l.mu.segs[:len(l.mu.segs)-1] {
		if s.maxTS < cutoff {
			t.Fatalf("expired segment %d kept (max %d < %d)", s.base, s.maxTS, cutoff)
		}
	}
	first := l.mu.segs[0].base
	l.mu.RUnlock()
	if l.StartOffset() != first {
		t.Fatalf("start %d, first segment %d", l.StartOffset(), first)
	}
	if _, err := l.Read(0, 100, false); !isOutOfRange(err) {
		t.Fatalf("read below start: %v", err)
	}
	// Later everything expires, including the active segment, which is
	// rolled and deleted; the log stays usable at the same end offset.
	clk.Advance(time.Hour)
	next := l.NextOffset()
	if _, err := l.EnforceRetention(); err != nil {
		t.Fatal(err)
	}
	if l.StartOffset() != next || l.NextOffset() != next || l.Size() != 0 {
		t.Fatalf("after full expiry start %d next %d size %d", l.StartOffset(), l.NextOffset(), l.Size())
	}
	base, _ := mustAppend(t, l, simpleBatch(t, 1, 1, clk.Ms()))
	if base != next {
		t.Fatalf("append at %d, want %d", base, next)
	}
	// Persisted: reopen keeps the start offset.
	l.Close()
	l = openLog(t, dir, opts)
	if l.StartOffset() != next {
		t.Fatalf("start after reopen %d", l.StartOffset())
	}
}

func TestInfiniteRetention(t *testing.T) {
	clk := newClock(1 << 40)
	l := openLog(t, t.TempDir(), Options{SegmentBytes: 500, RetentionMs: -1, RetentionBytes: -1, Now: clk.Now})
	defer l.Close()
	for i := range 20 {
		mustAppend(t, l, simpleBatch(t, 1, 100, int64(i)))
	}
	if n, err := l.EnforceRetention(); n != 0 || err != nil {
		t.Fatalf("deleted %d, %v", n, err)
	}
}

func TestSizeRetention(t *testing.T) {
	clk := newClock(1000)
	dir := t.TempDir()
	l := openLog(t, dir, Options{SegmentBytes: 1000, RetentionMs: -1, RetentionBytes: 2500, Now: clk.Now})
	defer l.Close()
	for i := range 40 {
		mustAppend(t, l, simpleBatch(t, 1, 100, clk.Ms()+int64(i)))
	}
	total := l.Size()
	n, err := l.EnforceRetention()
	if err != nil || n == 0 {
		t.Fatalf("deleted %d, %v", n, err)
	}
	if l.Size() < 2500 {
		t.Fatalf("size retention went below retention.bytes: %d", l.Size())
	}
	l.mu.RLock()
	oldest := l.mu.segs[0].size
	l.mu.RUnlock()
	if l.Size()-oldest >= 2500 {
		t.Fatalf("could have deleted more: size %d oldest %d (was %d)", l.Size(), oldest, total)
	}
}

func TestDeleteRecordsBefore(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentBytes: 1000}
	l := openLog(t, dir, opts)
	for i := range 30 {
		mustAppend(t, l, simpleBatch(t, 2, 100, int64(i)))
	}
	segsBefore := len(segmentFiles(t, dir, logSuffix))
	if err := l.DeleteRecordsBefore(25); err != nil {
		t.Fatal(err)
	}
	if l.StartOffset() != 25 {
		t.Fatalf("start %d", l.StartOffset())
	}
	if len(segmentFiles(t, dir, logSuffix)) >= segsBefore {
		t.Fatal("no segment deleted")
	}
	if _, err := l.Read(24, 100, false); !isOutOfRange(err) {
		t.Fatalf("Read(24): %v", err)
	}
	// Reading at the new start returns the batch containing it (24..25).
	data, err := l.Read(25, 100, false)
	if err != nil || mustHeader(t, data).BaseOffset != 24 {
		t.Fatalf("Read(25): %v", err)
	}
	if err := l.DeleteRecordsBefore(10); err != nil || l.StartOffset() != 25 {
		t.Fatalf("moving start backwards: %v, start %d", err, l.StartOffset())
	}
	if err := l.DeleteRecordsBefore(61); !isOutOfRange(err) {
		t.Fatalf("beyond end: %v", err)
	}
	l.Close()
	l = openLog(t, dir, opts)
	defer l.Close()
	if l.StartOffset() != 25 {
		t.Fatalf("start after reopen %d", l.StartOffset())
	}
	if got := readAll(t, l, 25); len(got) != 35 || got[0].off != 25 {
		t.Fatalf("records after start: %d", len(got))
	}
	if off, _, found, _ := l.OffsetForTimestamp(0); !found || off != 25 {
		t.Fatalf("OffsetForTimestamp(0) below start: %d %v", off, found)
	}
	// Deleting up to the end leaves an empty, appendable log.
	if err := l.DeleteRecordsBefore(60); err != nil {
		t.Fatal(err)
	}
	if base, _ := mustAppend(t, l, simpleBatch(t, 1, 1, 1)); base != 60 {
		t.Fatalf("append at %d", base)
	}
}

func TestTruncate(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentBytes: 1000, IndexIntervalBytes: 200}
	l := openLog(t, dir, opts)
	for i := range 40 {
		mustAppend(t, l, simpleBatch(t, 2, 60, int64(i)))
	}
	if err := l.AssignEpoch(1, 0); err != nil {
		t.Fatal(err)
	}
	if err := l.AssignEpoch(2, 50); err != nil {
		t.Fatal(err)
	}
	// Mid-batch offset: the straddling batch goes, the end becomes 31.
	if err := l.Truncate(31); err != nil {
		t.Fatal(err)
	}
	if l.NextOffset() != 31 {
		t.Fatalf("next %d", l.NextOffset())
	}
	if got := readAll(t, l, 0); len(got) != 30 {
		t.Fatalf("records after truncate %d", len(got))
	}
	if e, end := l.EndOffsetForEpoch(2); e != -1 || end != -1 {
		t.Fatalf("epoch 2 should be gone: %d %d", e, end)
	}
	if e, end := l.EndOffsetForEpoch(1); e != 1 || end != 31 {
		t.Fatalf("epoch 1 end %d %d", e, end)
	}
	base, _ := mustAppend(t, l, simpleBatch(t, 2, 60, 99))
	if base != 31 {
		t.Fatalf("append after truncate at %d", base)
	}
	if err := l.Truncate(100); err != nil || l.NextOffset() != 33 {
		t.Fatalf("truncate beyond end: %v", err)
	}
	// Exact batch boundary in an earlier segment.
	if err := l.Truncate(10); err != nil {
		t.Fatal(err)
	}
	if l.NextOffset() != 10 || len(readAll(t, l, 0)) != 10 {
		t.Fatalf("after truncate(10): next %d", l.NextOffset())
	}
	for i := range 10 {
		mustAppend(t, l, simpleBatch(t, 2, 60, int64(i)))
	}
	l.Close()
	l = openLog(t, dir, opts)
	defer l.Close()
	if l.NextOffset() != 30 || len(readAll(t, l, 0)) != 30 {
		t.Fatalf("after reopen next %d", l.NextOffset())
	}
	// Below the first segment: the log restarts empty at that offset.
	if err := l.DeleteRecordsBefore(20); err != nil {
		t.Fatal(err)
	}
	l.mu.RLock()
	firstBase := l.mu.segs[0].base
	l.mu.RUnlock()
	if err := l.Truncate(firstBase - 1); err != nil {
		t.Fatal(err)
	}
	if l.NextOffset() != firstBase-1 || l.StartOffset() != firstBase-1 || l.Size() != 0 {
		t.Fatalf("full truncate: start %d next %d size %d", l.StartOffset(), l.NextOffset(), l.Size())
	}
}

func TestDeleteDisabled(t *testing.T) {
	clk := newClock(1 << 40)
	l := openLog(t, t.TempDir(), Options{SegmentBytes: 500, RetentionMs: 1, RetentionBytes: 1, DeleteDisabled: true, Now: clk.Now})
	defer l.Close()
	for i := range 20 {
		mustAppend(t, l, simpleBatch(t, 1, 100, int64(i)))
	}
	if n, err := l.EnforceRetention(); n != 0 || err != nil || l.StartOffset() != 0 {
		t.Fatalf("compact-only log lost segments: %d, %v", n, err)
	}
}
