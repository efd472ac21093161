package storage

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestSyncLeavesActiveIndexesToRecovery: Sync fsyncs only the active
// segment's log file and keeps it marked needsSync (its indexes are still
// to be fsynced); a segment rolled since gets its indexes fsynced by the
// next Sync. After a crash that lost the active segment's unsynced
// indexes entirely, recovery rebuilds them from the log: every offset and
// timestamp is found again.
func TestSyncLeavesActiveIndexesToRecovery(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{SegmentBytes: 1200, IndexIntervalBytes: 200})
	for i := range 30 {
		mustAppend(t, l, simpleBatch(t, 2, 30, int64(100+i)))
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	l.mu.RLock()
	segs := append([]*segment(nil), l.mu.segs...)
	l.mu.RUnlock()
	if len(segs) < 3 {
		t.Fatalf("%d segments, want several", len(segs))
	}
	for _, s := range segs[:len(segs)-1] {
		if s.needsSync.Load() {
			t.Fatalf("closed segment %d still needs a sync after Sync", s.base)
		}
	}
	active := segs[len(segs)-1]
	if !active.indexesNeedSync.Load() {
		t.Fatal("active segment not left indexesNeedSync: Close would skip its indexes")
	}
	if active.needsSync.Load() {
		t.Fatal("active segment still needsSync after Sync: an idle partition would be fsynced on every Sync")
	}
	want := readAll(t, l, 0)

	// Roll: the segment that was active is fsynced whole by the next Sync.
	for l.active() == active {
		mustAppend(t, l, simpleBatch(t, 2, 30, 200))
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if active.needsSync.Load() || active.indexesNeedSync.Load() {
		t.Fatal("the segment rolled away from was not fsynced whole")
	}
	want = readAll(t, l, 0)

	// Crash: no Close, and the active segment's indexes lost.
	l.mu.Lock()
	last := l.active()
	for _, s := range l.mu.segs {
		s.release()
	}
	l.mu.closed = true
	l.mu.Unlock()
	for _, f := range []string{segmentFile(dir, last.base, indexSuffix), segmentFile(dir, last.base, timeIndexSuffix)} {
		if err := os.Truncate(f, 0); err != nil {
			t.Fatal(err)
		}
	}

	l2 := openLog(t, dir, Options{SegmentBytes: 1200, IndexIntervalBytes: 200})
	defer l2.Close()
	got := readAll(t, l2, 0)
	if len(got) != len(want) {
		t.Fatalf("%d records after recovery, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("record %d after recovery: %+v, want %+v", i, got[i], want[i])
		}
	}
	first := int64(-1)
	for _, r := range want {
		if r.ts >= 200 {
			first = r.off
			break
		}
	}
	if off, _, found, err := l2.OffsetForTimestamp(200); err != nil || !found || off != first {
		t.Fatalf("OffsetForTimestamp(200) = %d, %v, %v; want %d", off, found, err, first)
	}
}

// TestCloseAfterFailedSyncIsNotClean: once an fsync has failed, Close
// reports it and leaves no clean-shutdown marker, even though its own
// fsyncs succeed (the kernel may have dropped the unsynced pages), so the
// next Open validates the active segment.
func TestCloseAfterFailedSyncIsNotClean(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{})
	mustAppend(t, l, simpleBatch(t, 2, 30, 100))
	l.syncMu.Lock()
	l.syncFailed = errors.New("injected fsync failure")
	l.syncMu.Unlock()
	if err := l.Close(); err == nil {
		t.Fatal("Close after a failed fsync returned nil")
	}
	if _, err := os.Stat(filepath.Join(dir, cleanShutdownFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("clean-shutdown marker after a failed fsync: stat = %v", err)
	}
}

// TestDirtyFollowsSync: a log is dirty after an append and after a roll,
// and clean once synced, so the interval flush skips idle partitions
// without skipping anything Sync would have written.
func TestDirtyFollowsSync(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{SegmentBytes: 1200, IndexIntervalBytes: 200})
	defer l.Close()
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if l.Dirty() {
		t.Fatal("an empty log, synced, is dirty")
	}
	mustAppend(t, l, simpleBatch(t, 2, 30, 100))
	if !l.Dirty() {
		t.Fatal("not dirty after an append")
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if l.Dirty() {
		t.Fatal("dirty after Sync")
	}
	active := l.active()
	for l.active() == active {
		mustAppend(t, l, simpleBatch(t, 2, 30, 200))
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if l.Dirty() {
		t.Fatal("dirty after the Sync that followed a roll")
	}
	// A Sync in progress counts as dirty.
	l.syncMu.Lock()
	dirty := l.Dirty()
	l.syncMu.Unlock()
	if !dirty {
		t.Fatal("a log being synced reported clean")
	}
}
