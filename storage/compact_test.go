package storage

import (
	"fmt"
	"testing"
	"time"

	"github.com/regent-broker/regent/storage/recordbatch"
)

type written struct {
	key, value string
	tombstone  bool
	ts         int64
}

func TestCompaction(t *testing.T) {
	clk := newClock(1_000_000)
	dir := t.TempDir()
	opts := Options{Compact: true, SegmentBytes: 700, IndexIntervalBytes: 128, RetentionMs: -1,
		DeleteRetentionMs: 1000, Now: clk.Now}
	l := openLog(t, dir, opts)
	var log []written // by offset
	add := func(codec int8, recs ...rec) {
		for i := range recs {
			recs[i].ts = int64(1000 + len(log) + i)
		}
		mustAppend(t, l, batch(t, codec, recs...))
		for _, r := range recs {
			log = append(log, written{r.key, r.value, r.tombstone, r.ts})
		}
	}
	for i := range 120 {
		k := fmt.Sprintf("k%d", i%7)
		if i%10 == 3 {
			// Multi-record compressed batches get rebuilt, not copied.
			add(recordbatch.CodecZstd, rec{key: k, value: fmt.Sprint("v", i)}, rec{key: "z" + k, value: fmt.Sprint("w", i)})
			continue
		}
		add(recordbatch.CodecNone, rec{key: k, value: fmt.Sprint("v", i)})
	}
	add(recordbatch.CodecGzip, rec{key: "k3", tombstone: true})
	add(recordbatch.CodecNone, rec{key: "dead", value: "x"})
	add(recordbatch.CodecNone, rec{key: "dead", tombstone: true})
	for i := range 3 { // pushes everything above into closed segments
		add(recordbatch.CodecNone, rec{key: fmt.Sprintf("tail%d", i), value: string(make([]byte, 300))})
	}
	next, sizeBefore := l.NextOffset(), l.Size()
	if r := l.DirtyRatio(); r != 1 {
		t.Fatalf("dirty ratio before first pass %v", r)
	}
	if !l.NeedsCompaction() {
		t.Fatal("NeedsCompaction false on a fully dirty log")
	}
	if err := l.Compact(); err != nil {
		t.Fatal(err)
	}
	if l.NextOffset() != next || l.Size() >= sizeBefore {
		t.Fatalf("next %d (want %d) size %d (was %d)", l.NextOffset(), next, l.Size(), sizeBefore)
	}
	if r := l.DirtyRatio(); r != 0 {
		t.Fatalf("dirty ratio after pass %v", r)
	}
	l.mu.RLock()
	activeBase := l.active().base
	l.mu.RUnlock()
	latest := map[string]int{}
	for off, w := range log {
		if int64(off) < activeBase {
			latest[w.key] = off
		}
	}
	check := func(stage string, tombstonesGone bool) {
		t.Helper()
		got := readAll(t, l, 0)
		seen := map[int64]bool{}
		prev := int64(-1)
		for _, g := range got {
			if g.off <= prev {
				t.Fatalf("%s: offsets not increasing at %d", stage, g.off)
			}
			prev = g.off
			seen[g.off] = true
			w := log[g.off]
			if g.key != w.key || g.value != w.value || g.null != w.tombstone || g.ts != w.ts {
				t.Fatalf("%s: offset %d changed: got %+v want %+v", stage, g.off, g, w)
			}
		}
		for off, w := range log {
			o := int64(off)
			want := o >= activeBase || latest[w.key] == off
			if w.tombstone && tombstonesGone && o < activeBase {
				want = false
			}
			if seen[o] != want {
				t.Fatalf("%s: offset %d (%+v) present=%v want %v", stage, off, w, seen[o], want)
			}
		}
	}
	check("first pass", false)

	// Tombstones survive the first pass; once the delete horizon passes a
	// pass runs even though nothing is dirty, and drops them.
	if l.NeedsCompaction() {
		t.Fatal("NeedsCompaction before the horizon")
	}
	clk.Advance(1500 * time.Millisecond)
	if !l.NeedsCompaction() {
		t.Fatal("NeedsCompaction false after the delete horizon")
	}
	if err := l.Compact(); err != nil {
		t.Fatal(err)
	}
	check("after horizon", true)

	// Reopen: the swapped segments and rebuilt indexes load cleanly.
	l.Close()
	l = openLog(t, dir, opts)
	defer l.Close()
	check("reopened", true)
	for off := int64(0); off < next; off++ {
		if _, err := l.Read(off, 1<<16, false); err != nil {
			t.Fatalf("Read(%d) after compaction: %v", off, err)
		}
	}
	if off, _, found, _ := l.OffsetForTimestamp(1000); !found || off != int64(firstPresent(t, l)) {
		t.Fatalf("OffsetForTimestamp after compaction: %d", off)
	}
}

func firstPresent(t *testing.T, l *Log) int64 {
	got := readAll(t, l, 0)
	return got[0].off
}

func TestCompactionRespectsMinLagAndPolicy(t *testing.T) {
	clk := newClock(10_000)
	l := openLog(t, t.TempDir(), Options{Compact: false, SegmentBytes: 300, RetentionMs: -1, Now: clk.Now})
	defer l.Close()
	for i := range 30 {
		mustAppend(t, l, batch(t, 0, rec{key: "same", value: fmt.Sprint(i), ts: 9000 + int64(i)}))
	}
	size := l.Size()
	if err := l.Compact(); err != nil || l.Size() != size {
		t.Fatalf("compacted without cleanup.policy=compact: %v", err)
	}
	l.SetOptions(Options{Compact: true, SegmentBytes: 300, RetentionMs: -1, MinCompactionLagMs: 5000, Now: clk.Now})
	if err := l.Compact(); err != nil || l.Size() != size {
		t.Fatalf("compacted records younger than min lag: %v", err)
	}
	if l.DirtyRatio() != 0 {
		t.Fatal("nothing should be cleanable yet")
	}
	clk.Advance(10 * time.Second)
	if err := l.Compact(); err != nil || l.Size() >= size {
		t.Fatalf("did not compact after min lag: %v", err)
	}
	got := readAll(t, l, 0)
	// One survivor from the cleaned range plus the active segment's records.
	if got[len(got)-1].value != "29" {
		t.Fatalf("latest value lost: %+v", got[len(got)-1])
	}
}

func TestCompactionKeepsControlAndProducerBatches(t *testing.T) {
	clk := newClock(1_000_000)
	l := openLog(t, t.TempDir(), Options{Compact: true, SegmentBytes: 400, RetentionMs: -1, Now: clk.Now})
	defer l.Close()
	mk := func(attrs int16, pid int64, key, value string) []byte {
		b, err := recordbatch.Build(recordbatch.Header{Attributes: attrs, FirstTimestamp: 1, ProducerID: pid, BaseSequence: 0},
			[]recordbatch.Record{{Key: []byte(key), Value: []byte(value)}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	mustAppend(t, l, mk(0, 7, "k", "old-idempotent"))                                      // 0: superseded, but producer 7's last batch
	mustAppend(t, l, mk(recordbatch.AttrTransactional, 8, "k", "txn"))                     // 1: kept verbatim
	mustAppend(t, l, mk(recordbatch.AttrTransactional|recordbatch.AttrControl, 8, "", "")) // 2: marker kept
	mustAppend(t, l, mk(0, -1, "k", "plain-old"))                                          // 3: dropped entirely
	mustAppend(t, l, mk(0, -1, "k", "new"))                                                // 4: latest
	for range 5 {
		mustAppend(t, l, mk(0, -1, "other", string(make([]byte, 200))))
	}
	if err := l.Compact(); err != nil {
		t.Fatal(err)
	}
	var bases []int64
	var counts []int32
	for off := int64(0); off < 5; {
		data, err := l.Read(off, 1<<20, false)
		if err != nil {
			t.Fatal(err)
		}
		bs, _ := recordbatch.Split(data)
		for _, b := range bs {
			h := mustHeader(t, b)
			if h.BaseOffset < 5 {
				bases = append(bases, h.BaseOffset)
				counts = append(counts, h.NumRecords)
			}
			off = h.LastOffset() + 1
		}
	}
	if fmt.Sprint(bases) != "[0 1 2 4]" || fmt.Sprint(counts) != "[0 1 1 1]" {
		t.Fatalf("batches %v with record counts %v", bases, counts)
	}
}
