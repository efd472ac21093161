package storage

import (
	"slices"
	"testing"
	"time"
)

// segmentBases lists the log's segment base offsets.
func segmentBases(l *Log) []int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var out []int64
	for _, s := range l.mu.segs {
		out = append(out, s.base)
	}
	return out
}

// rollTimes are append times (and record timestamps) 0..1000 ms apart; with
// segment.ms=1000 they roll at offsets 3 (1000 after 0), 5 (1500 after
// 1000) and 7 (1500 after 2500).
var (
	rollTimes = []int64{0, 500, 999, 1000, 1001, 2500, 2600, 4000}
	rollBases = []int64{0, 3, 5, 7}
)

// TestRollsFollowRecordTimestamps: segment.ms compares record timestamps
// (Kafka's rule), so logs whose clocks and append times disagree by hours,
// and one closed and reopened in the middle of a segment, roll at the
// same offsets.
func TestRollsFollowRecordTimestamps(t *testing.T) {
	const t0 = int64(1_000_000)
	opts := func(clk *clock) Options { return Options{SegmentMs: 1000, Now: clk.Now} }
	a := openLog(t, t.TempDir(), opts(newClock(t0)))
	defer a.Close()
	bClock := newClock(t0 + 3*3600*1000)
	b := openLog(t, t.TempDir(), opts(bClock))
	defer b.Close()
	cDir := t.TempDir()
	c := openLog(t, cDir, opts(newClock(t0)))
	for i, rel := range rollTimes {
		ts := t0 + rel
		for _, l := range []*Log{a, c} {
			if _, _, err := l.AppendAt(simpleBatch(t, 1, 10, ts), ts); err != nil {
				t.Fatalf("append %d: %v", i, err)
			}
		}
		// b appends late, on a clock hours ahead.
		if _, _, err := b.AppendAt(simpleBatch(t, 1, 10, ts), bClock.Ms()); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		bClock.Advance(time.Hour)
		if i == 1 || i == 4 {
			c.Close()
			c = openLog(t, cDir, opts(newClock(t0+7*24*3600*1000)))
		}
	}
	defer c.Close()
	for name, l := range map[string]*Log{"a": a, "b (clock ahead)": b, "c (reopened)": c} {
		if got := segmentBases(l); !slices.Equal(got, rollBases) {
			t.Fatalf("log %s segments %v, want %v", name, got, rollBases)
		}
	}
}

// TestAppendAtRollsOnGivenTimeWithoutTimestamps: records without
// timestamps fall back to the time since the segment's first append, on
// the time AppendAt is given, never the log's own clock.
func TestAppendAtRollsOnGivenTimeWithoutTimestamps(t *testing.T) {
	const t0 = int64(1_000_000)
	clk := newClock(t0 + 3*3600*1000) // on its own clock every append would roll
	l := openLog(t, t.TempDir(), Options{SegmentMs: 1000, Now: clk.Now})
	defer l.Close()
	for i, rel := range rollTimes {
		if _, _, err := l.AppendAt(simpleBatch(t, 1, 10, -1), t0+rel); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		clk.Advance(time.Hour)
	}
	if got := segmentBases(l); !slices.Equal(got, rollBases) {
		t.Fatalf("segments %v, want %v (the log's clock leaked into the roll)", got, rollBases)
	}
}

// TestOldTimestampsRollOnTheirSpan: records stamped long ago (mirrored
// data) roll when their own timestamps span segment.ms, not at every batch.
func TestOldTimestampsRollOnTheirSpan(t *testing.T) {
	clk := newClock(100 * 24 * 3600 * 1000)
	l := openLog(t, t.TempDir(), Options{SegmentMs: 1000, Now: clk.Now})
	defer l.Close()
	old := int64(1_000_000)
	for i := range 10 {
		mustAppend(t, l, simpleBatch(t, 1, 10, old+int64(i)*100))
	}
	if got := segmentBases(l); !slices.Equal(got, []int64{0}) {
		t.Fatalf("segments %v: old timestamps 900 ms apart rolled", got)
	}
}

// TestRetentionOffsetIsPure checks RetentionOffset deletes nothing and that
// EnforceRetention moves the start exactly where it said.
func TestRetentionOffsetIsPure(t *testing.T) {
	clk := newClock(10_000_000)
	dir := t.TempDir()
	l := openLog(t, dir, Options{SegmentBytes: 1000, RetentionMs: 5000, RetentionBytes: -1, Now: clk.Now})
	defer l.Close()
	for i := range 30 {
		mustAppend(t, l, simpleBatch(t, 1, 100, clk.Ms()-int64(15000-i*500)))
	}
	files := len(segmentFiles(t, dir, logSuffix))
	off, ok := l.RetentionOffset(clk.Ms())
	if !ok || off <= 0 {
		t.Fatalf("RetentionOffset = %d, %v", off, ok)
	}
	if l.StartOffset() != 0 || len(segmentFiles(t, dir, logSuffix)) != files {
		t.Fatal("RetentionOffset changed the log")
	}
	if _, err := l.EnforceRetention(); err != nil {
		t.Fatal(err)
	}
	if l.StartOffset() != off {
		t.Fatalf("EnforceRetention start %d, RetentionOffset said %d", l.StartOffset(), off)
	}
	if _, ok := l.RetentionOffset(clk.Ms()); ok {
		t.Fatal("retention still due right after it ran")
	}
	// Everything expired: the answer is the log end, and applying it
	// rolls the active segment and leaves an empty log there.
	clk.Advance(time.Hour)
	off, ok = l.RetentionOffset(clk.Ms())
	if !ok || off != l.NextOffset() {
		t.Fatalf("after full expiry RetentionOffset = %d, %v; log end %d", off, ok, l.NextOffset())
	}
	if err := l.DeleteRecordsBefore(off); err != nil {
		t.Fatal(err)
	}
	if l.StartOffset() != off || l.Size() != 0 {
		t.Fatalf("start %d size %d", l.StartOffset(), l.Size())
	}
}

// TestRetentionSameStartAcrossSegmentLayouts is the replicated case: the
// leader evaluates retention on its log and every node applies the offset
// with DeleteRecordsBefore. Logs holding the same records in different
// segments end with the same start offset and the same readable records.
func TestRetentionSameStartAcrossSegmentLayouts(t *testing.T) {
	clk := newClock(1_000)
	leader := openLog(t, t.TempDir(), Options{SegmentBytes: 1000, RetentionMs: -1, RetentionBytes: 3000, Now: clk.Now})
	defer leader.Close()
	follower := openLog(t, t.TempDir(), Options{SegmentBytes: 2300, RetentionMs: -1, RetentionBytes: 3000, Now: clk.Now})
	defer follower.Close()
	for round := range 3 {
		for i := range 25 {
			for _, l := range []*Log{leader, follower} {
				mustAppend(t, l, simpleBatch(t, 2, 100, clk.Ms()+int64(i)))
			}
		}
		if slices.Equal(segmentBases(leader), segmentBases(follower)) {
			t.Fatal("test needs different segment layouts")
		}
		off, ok := leader.RetentionOffset(clk.Ms())
		if !ok {
			t.Fatalf("round %d: retention not due (size %d)", round, leader.Size())
		}
		for _, l := range []*Log{leader, follower} {
			if err := l.DeleteRecordsBefore(off); err != nil {
				t.Fatal(err)
			}
		}
		if leader.StartOffset() != off || follower.StartOffset() != off {
			t.Fatalf("round %d: starts %d and %d, proposed %d", round, leader.StartOffset(), follower.StartOffset(), off)
		}
		// Only segments wholly below the start went on the follower.
		if bases := segmentBases(follower); bases[0] > off || (len(bases) > 1 && bases[1] <= off) {
			t.Fatalf("round %d: follower segments %v around start %d", round, bases, off)
		}
		la, lf := readAll(t, leader, off), readAll(t, follower, off)
		if len(la) != len(lf) || la[0].off != off || lf[0].off != off {
			t.Fatalf("round %d: leader reads %d records from %d, follower %d", round, len(la), off, len(lf))
		}
	}
	// The proposal is for the leader's layout: the follower, holding more
	// bytes below off in its partly deleted segment, is not asked again.
	if _, ok := leader.RetentionOffset(clk.Ms()); ok {
		t.Fatal("leader retention due right after applying it")
	}
}

// TestDeleteRecordsToEndRollsActive checks that moving the start to the log
// end rolls the active segment so its records go too, and that a repeat
// changes nothing.
func TestDeleteRecordsToEndRollsActive(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{SegmentBytes: 1 << 20})
	defer l.Close()
	for i := range 10 {
		mustAppend(t, l, simpleBatch(t, 1, 100, int64(i)))
	}
	if err := l.DeleteRecordsBefore(10); err != nil {
		t.Fatal(err)
	}
	if l.StartOffset() != 10 || l.Size() != 0 || !slices.Equal(segmentBases(l), []int64{10}) {
		t.Fatalf("start %d size %d segments %v", l.StartOffset(), l.Size(), segmentBases(l))
	}
	if err := l.DeleteRecordsBefore(10); err != nil || !slices.Equal(segmentBases(l), []int64{10}) {
		t.Fatalf("repeat: %v, segments %v", err, segmentBases(l))
	}
}
