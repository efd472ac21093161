package storage

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/regent-broker/regent/storage/recordbatch"
)

// planTestBatches are the records every log in the plan tests holds: many
// updates of few keys, multi-record compressed batches, tombstones, an
// idempotent producer and a transaction with its marker.
func planTestBatches(t *testing.T, round, n int) [][]byte {
	t.Helper()
	var out [][]byte
	ts := int64(1000 + round*10_000)
	for i := range n {
		k := fmt.Sprintf("k%d", i%9)
		ts++
		switch {
		case i%11 == 5:
			out = append(out, batch(t, recordbatch.CodecZstd,
				rec{key: k, value: fmt.Sprint("z", round, i), ts: ts}, rec{key: "y" + k, value: fmt.Sprint("y", round, i), ts: ts}))
		case i%13 == 7:
			out = append(out, batch(t, recordbatch.CodecNone, rec{key: k, tombstone: true, ts: ts}))
		case i%17 == 3:
			b, err := recordbatch.Build(recordbatch.Header{FirstTimestamp: ts, ProducerID: 7, BaseSequence: int32(i)},
				[]recordbatch.Record{{Key: []byte(k), Value: []byte(fmt.Sprint("p", round, i))}})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, b)
		case i == 20:
			for _, attrs := range []int16{recordbatch.AttrTransactional, recordbatch.AttrTransactional | recordbatch.AttrControl} {
				b, err := recordbatch.Build(recordbatch.Header{Attributes: attrs, FirstTimestamp: ts, ProducerID: 8, BaseSequence: 0},
					[]recordbatch.Record{{Key: []byte(k), Value: []byte("txn")}})
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, b)
			}
		default:
			out = append(out, batch(t, recordbatch.CodecNone, rec{key: k, value: fmt.Sprint("v", round, i, string(make([]byte, i%40))), ts: ts}))
		}
	}
	return out
}

// appendSame appends the same batches to every log, at the same times.
func appendSame(t *testing.T, batches [][]byte, logs ...*Log) {
	t.Helper()
	for i, b := range batches {
		for _, l := range logs {
			// Append patches the offset in place: each log its own copy.
			if _, _, err := l.AppendAt(slices.Clone(b), 5000+int64(i)); err != nil {
				t.Fatalf("append %d: %v", i, err)
			}
		}
	}
}

// logBatches maps each batch's base offset to its bytes, over the whole
// log.
func logBatches(t *testing.T, l *Log) map[int64][]byte {
	t.Helper()
	out := map[int64][]byte{}
	for off := l.StartOffset(); off < l.NextOffset(); {
		data, err := l.Read(off, 1<<20, false)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		bs, err := recordbatch.Split(data)
		if err != nil || len(bs) == 0 {
			t.Fatalf("Read(%d): %d batches, %v", off, len(bs), err)
		}
		for _, b := range bs {
			h := mustHeader(t, b)
			out[h.BaseOffset] = slices.Clone(b)
			off = h.LastOffset() + 1
		}
	}
	return out
}

// sameBatches fails unless every log holds the same batches (offsets and
// bytes) as the first.
func sameBatches(t *testing.T, stage string, logs ...*Log) map[int64][]byte {
	t.Helper()
	want := logBatches(t, logs[0])
	for i, l := range logs[1:] {
		got := logBatches(t, l)
		if len(got) != len(want) {
			t.Fatalf("%s: log %d holds %d batches, log 0 %d", stage, i+1, len(got), len(want))
		}
		for off, b := range want {
			if !bytes.Equal(got[off], b) {
				t.Fatalf("%s: log %d's batch at %d differs from log 0's (%d vs %d bytes)", stage, i+1, off, len(got[off]), len(b))
			}
		}
	}
	return want
}

// TestCompactRangeSameOnDifferentLayouts: logs holding the same records in
// differently cut segments (one with everything in its active segment),
// applying the same plans, keep the same batches, byte for byte, at the
// same offsets, before and after a reopen; a plan's end that falls inside
// another log's segment leaves that segment's upper part as it was.
func TestCompactRangeSameOnDifferentLayouts(t *testing.T) {
	opts := func(segBytes int64) Options {
		return Options{Compact: true, SegmentBytes: segBytes, IndexIntervalBytes: 100, RetentionMs: -1, DeleteRetentionMs: 1000}
	}
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	sizes := []int64{600, 1700, 1 << 30}
	logs := make([]*Log, 3)
	for i := range logs {
		logs[i] = openLog(t, dirs[i], opts(sizes[i]))
	}
	defer func() {
		for _, l := range logs {
			l.Close()
		}
	}()
	appendSame(t, planTestBatches(t, 0, 150), logs...)
	if slices.Equal(segmentBases(logs[0]), segmentBases(logs[1])) {
		t.Fatal("test needs different segment layouts")
	}

	// The first leader plans on its clock; the end is its active base.
	const now = 1_000_000
	p, ok := logs[0].PlanCompaction(now, logs[0].NextOffset())
	if !ok || p.End <= 0 || p.DirtyStart != 0 || p.NowMs != now || p.DeleteRetentionMs != 1000 {
		t.Fatalf("plan %+v %v", p, ok)
	}
	if slices.Contains(segmentBases(logs[1]), p.End) {
		t.Fatalf("end %d is a segment base of log 1 too: the straddle is not exercised", p.End)
	}
	before := logBatches(t, logs[0])
	sizeBefore := logs[0].Size()
	for _, l := range logs {
		if _, err := l.CompactRange(p, nil); err != nil {
			t.Fatal(err)
		}
	}
	after := sameBatches(t, "first pass", logs...)
	if logs[0].Size() >= sizeBefore {
		t.Fatalf("first pass removed nothing (%d bytes, was %d)", logs[0].Size(), sizeBefore)
	}
	for off, b := range before {
		if off >= p.End && !bytes.Equal(after[off], b) {
			t.Fatalf("batch at %d, above the plan's end %d, changed", off, p.End)
		}
	}
	if bases := segmentBases(logs[2]); len(bases) != 2 || bases[1] != logs[2].NextOffset() {
		t.Fatalf("log 2 did not roll its active segment before cleaning it: %v", bases)
	}

	// More records; the next leader (another layout) plans past the
	// tombstones' delete horizon.
	appendSame(t, planTestBatches(t, 1, 120), logs...)
	p2, ok := logs[1].PlanCompaction(now+5000, logs[1].NextOffset())
	if !ok || p2.DirtyStart != p.End || p2.End <= p.End {
		t.Fatalf("second plan %+v %v after first %+v", p2, ok, p)
	}
	for _, l := range logs {
		if _, err := l.CompactRange(p2, nil); err != nil {
			t.Fatal(err)
		}
	}
	want := sameBatches(t, "second pass", logs...)
	tombstones := 0
	for off, b := range want {
		if off >= p2.End {
			continue
		}
		recs, err := recordbatch.Records(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if r.ValueNull {
				tombstones++
			}
		}
	}
	if tombstones != 0 {
		t.Fatalf("%d tombstones below %d survived their horizon", tombstones, p2.End)
	}

	for i := range logs {
		logs[i].Close()
		logs[i] = openLog(t, dirs[i], opts(sizes[i]))
	}
	sameBatches(t, "reopened", logs...)
}

// TestCompactRangeMapBoundSameOnEveryLayout: a pass whose key map fills
// ends at the same batch on every log, whatever its segments, and the
// next pass picks up from there alike.
func TestCompactRangeMapBoundSameOnEveryLayout(t *testing.T) {
	defer func(n int) { maxMapKeys = n }(maxMapKeys)
	maxMapKeys = 6
	mk := func(segBytes int64) *Log {
		return openLog(t, t.TempDir(), Options{Compact: true, SegmentBytes: segBytes, RetentionMs: -1})
	}
	a, b := mk(500), mk(2100)
	defer a.Close()
	defer b.Close()
	var bs [][]byte
	for i := range 200 {
		bs = append(bs, batch(t, recordbatch.CodecNone, rec{key: fmt.Sprint("k", i%40), value: fmt.Sprint("v", i), ts: int64(1000 + i)}))
	}
	appendSame(t, bs, a, b)
	p, ok := a.PlanCompaction(1_000_000, a.NextOffset())
	if !ok {
		t.Fatal("no plan")
	}
	for _, l := range []*Log{a, b} {
		if _, err := l.CompactRange(p, nil); err != nil {
			t.Fatal(err)
		}
	}
	sameBatches(t, "bounded pass", a, b)
	if a.mu.firstDirty != b.mu.firstDirty || a.mu.firstDirty >= p.End || a.mu.firstDirty <= p.DirtyStart {
		t.Fatalf("first dirty offsets %d and %d, plan [%d, %d)", a.mu.firstDirty, b.mu.firstDirty, p.DirtyStart, p.End)
	}
	// Passes from where the last stopped, until the whole range is clean.
	for pass := 0; a.mu.firstDirty < p.End; pass++ {
		if pass > 100 {
			t.Fatal("compaction does not progress")
		}
		q := p
		q.DirtyStart = a.mu.firstDirty
		for _, l := range []*Log{a, b} {
			if _, err := l.CompactRange(q, nil); err != nil {
				t.Fatal(err)
			}
		}
		sameBatches(t, fmt.Sprint("pass ", pass), a, b)
	}
}

// TestCompactRangeRefusesPlanPastLogEnd: a plan beyond the log is an error,
// not a silent partial pass.
func TestCompactRangeRefusesPlanPastLogEnd(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{Compact: true, RetentionMs: -1})
	defer l.Close()
	appendSame(t, planTestBatches(t, 0, 5), l)
	for _, p := range []CompactionPlan{{End: l.NextOffset() + 1}, {DirtyStart: 3, End: 2}, {End: -1}} {
		if _, err := l.CompactRange(p, nil); err == nil {
			t.Fatalf("plan %+v applied", p)
		}
	}
}

// TestPlanCompactionOnGivenClock: the plan's policy (min.compaction.lag.ms
// here) reads the clock it is given, not the log's own, and the plan
// carries that clock and delete.retention.ms.
func TestPlanCompactionOnGivenClock(t *testing.T) {
	const t0 = int64(1_000_000_000)
	own := newClock(t0 + 3*3600*1000) // the log's clock: hours ahead
	l := openLog(t, t.TempDir(), Options{Compact: true, SegmentBytes: 300, RetentionMs: -1,
		MinCompactionLagMs: 3600 * 1000, DeleteRetentionMs: 777, Now: own.Now})
	defer l.Close()
	for i := range 30 {
		mustAppend(t, l, batch(t, recordbatch.CodecNone, rec{key: fmt.Sprint("k", i%3), value: "v", ts: t0 + int64(i)}))
	}
	if !l.NeedsCompaction() {
		t.Fatal("on its own clock the log is due")
	}
	if p, ok := l.PlanCompaction(t0+60_000, l.NextOffset()); ok {
		t.Fatalf("a minute after the records, within the lag: planned %+v", p)
	}
	p, ok := l.PlanCompaction(t0+2*3600*1000, l.NextOffset())
	if !ok || p.NowMs != t0+2*3600*1000 || p.DeleteRetentionMs != 777 || p.End <= 0 {
		t.Fatalf("past the lag: %+v %v", p, ok)
	}
}
