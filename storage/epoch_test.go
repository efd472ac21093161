package storage

import (
	"os"
	"path/filepath"
	"testing"
)

func TestEpochCache(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{})
	for range 30 {
		mustAppend(t, l, simpleBatch(t, 1, 10, 1))
	}
	if e, off := l.EndOffsetForEpoch(0); e != -1 || off != -1 {
		t.Fatalf("empty cache: %d %d", e, off)
	}
	steps := []struct {
		epoch int32
		start int64
	}{{2, 0}, {2, 5}, {4, 10}, {5, 20}}
	for _, s := range steps {
		if err := l.AssignEpoch(s.epoch, s.start); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		req       int32
		wantEpoch int32
		wantEnd   int64
	}{
		{-1, -1, -1},
		{1, 1, 0},  // older than every epoch: requested epoch, first start
		{2, 2, 10}, // re-assigning epoch 2 at 5 was a no-op
		{3, 2, 10}, // unknown epoch in between: floor epoch, next start
		{4, 4, 20},
		{5, 5, 30},  // latest: log end
		{6, -1, -1}, // newer than any
	}
	check := func(l *Log) {
		t.Helper()
		for _, c := range cases {
			if e, end := l.EndOffsetForEpoch(c.req); e != c.wantEpoch || end != c.wantEnd {
				t.Errorf("EndOffsetForEpoch(%d) = %d,%d want %d,%d", c.req, e, end, c.wantEpoch, c.wantEnd)
			}
		}
	}
	check(l)
	if l.LatestEpoch() != 5 {
		t.Fatalf("latest %d", l.LatestEpoch())
	}
	l.Close()
	l = openLog(t, dir, Options{})
	check(l)
	data, _ := os.ReadFile(filepath.Join(dir, epochFile))
	if string(data) != "0\n3\n2 0\n4 10\n5 20\n" {
		t.Fatalf("checkpoint format: %q", data)
	}
	// A new epoch below existing starts evicts the conflicting entries.
	if err := l.AssignEpoch(6, 15); err != nil {
		t.Fatal(err)
	}
	if e, end := l.EndOffsetForEpoch(4); e != 4 || end != 15 {
		t.Fatalf("after conflicting assign: %d %d", e, end)
	}
	if e, end := l.EndOffsetForEpoch(5); e != 4 || end != 15 {
		t.Fatalf("evicted epoch 5: %d %d", e, end)
	}
	// Moving the log start folds older entries into one at the start.
	if err := l.DeleteRecordsBefore(12); err != nil {
		t.Fatal(err)
	}
	l.mu.RLock()
	got := append([]epochEntry(nil), l.mu.epochs...)
	l.mu.RUnlock()
	if len(got) != 2 || got[0] != (epochEntry{4, 12}) || got[1] != (epochEntry{6, 15}) {
		t.Fatalf("after DeleteRecordsBefore: %+v", got)
	}
	if err := l.AssignEpoch(-1, 0); err == nil {
		t.Fatal("negative epoch accepted")
	}
	l.Close()
}

func TestEpochTruncationHelpers(t *testing.T) {
	es := []epochEntry{{1, 0}, {3, 10}, {4, 20}}
	if got := truncateEpochsFromEnd(es, 20); len(got) != 2 {
		t.Fatalf("from end 20: %+v", got)
	}
	if got := truncateEpochsFromEnd(es, 5); len(got) != 1 {
		t.Fatalf("from end 5: %+v", got)
	}
	if got := truncateEpochsFromStart(es, 10); len(got) != 2 || got[0] != (epochEntry{3, 10}) {
		t.Fatalf("from start 10: %+v", got)
	}
	if got := truncateEpochsFromStart(es, 0); len(got) != 3 {
		t.Fatalf("from start 0: %+v", got)
	}
	if got := truncateEpochsFromStart(es, 25); len(got) != 1 || got[0] != (epochEntry{4, 25}) {
		t.Fatalf("from start 25: %+v", got)
	}
}
