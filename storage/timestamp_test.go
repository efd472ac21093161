package storage

import (
	"testing"

	"github.com/regent-broker/regent/storage/recordbatch"
)

func TestOffsetForTimestamp(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{SegmentBytes: 400, IndexIntervalBytes: 100})
	defer l.Close()
	// Offsets:        0    1    2  | 3    4  | 5   | 6    7    8
	mustAppend(t, l, batch(t, 0, rec{"a", "1", 100, false}, rec{"b", "2", 300, false}, rec{"c", "3", 200, false}))
	mustAppend(t, l, batch(t, 1, rec{"d", "4", 150, false}, rec{"e", "5", 250, false}))
	mustAppend(t, l, batch(t, 0, rec{"f", "6", 500, false}))
	mustAppend(t, l, batch(t, 4, rec{"g", "7", 400, false}, rec{"h", "8", 450, false}, rec{"i", "9", 420, false}))
	cases := []struct {
		ts      int64
		wantOff int64
		wantTS  int64
		found   bool
	}{
		{0, 0, 100, true},
		{100, 0, 100, true},
		{101, 1, 300, true}, // first record >= 101 by offset, not by time
		{200, 1, 300, true}, // offset 2 (200) comes after offset 1 (300)
		{301, 5, 500, true}, // batches 0,1 max out at 300/250
		{420, 5, 500, true},
		{501, -1, -1, false},
	}
	for _, tc := range cases {
		off, ts, found, err := l.OffsetForTimestamp(tc.ts)
		if err != nil {
			t.Fatal(err)
		}
		if off != tc.wantOff || ts != tc.wantTS || found != tc.found {
			t.Errorf("OffsetForTimestamp(%d) = %d,%d,%v want %d,%d,%v", tc.ts, off, ts, found, tc.wantOff, tc.wantTS, tc.found)
		}
	}
	if off, ts := l.MaxTimestamp(); off != 5 || ts != 500 {
		t.Fatalf("MaxTimestamp %d %d", off, ts)
	}
}

func TestOffsetForTimestampAcrossSegments(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{SegmentBytes: 600, IndexIntervalBytes: 64})
	defer l.Close()
	// Timestamps zig-zag: 0, 1000, 10, 1010, 20, ... over many segments.
	for i := range 80 {
		ts := int64(i / 2 * 10)
		if i%2 == 1 {
			ts += 1000
		}
		mustAppend(t, l, batch(t, 0, rec{"k", "v", ts, false}))
	}
	for target := int64(0); target < 1400; target += 7 {
		want := int64(-1)
		for i := range 80 {
			ts := int64(i / 2 * 10)
			if i%2 == 1 {
				ts += 1000
			}
			if ts >= target {
				want = int64(i)
				break
			}
		}
		got, _, found, err := l.OffsetForTimestamp(target)
		if err != nil || got != want || found != (want >= 0) {
			t.Fatalf("target %d: got %d (%v, %v), want %d", target, got, found, err, want)
		}
	}
}

func TestLogAppendTimeBatches(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	defer l.Close()
	b := batch(t, 0, rec{"a", "1", 5, false}, rec{"b", "2", 7, false})
	recordbatch.SetLogAppendTime(b, 1000)
	mustAppend(t, l, b)
	mustAppend(t, l, batch(t, 0, rec{"c", "3", 900, false}))
	if off, ts, _, _ := l.OffsetForTimestamp(6); off != 0 || ts != 1000 {
		t.Fatalf("LogAppendTime record reports %d@%d", off, ts)
	}
	if off, ts := l.MaxTimestamp(); off != 0 || ts != 1000 {
		t.Fatalf("MaxTimestamp %d %d", off, ts)
	}
}

func TestMaxTimestampEmptyAndTies(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{SegmentBytes: 300})
	defer l.Close()
	if off, ts := l.MaxTimestamp(); off != -1 || ts != -1 {
		t.Fatalf("empty log: %d %d", off, ts)
	}
	mustAppend(t, l, batch(t, 0, rec{"a", "1", 5, false}, rec{"b", "2", 9, false}, rec{"c", "3", 9, false}))
	for range 10 {
		mustAppend(t, l, batch(t, 0, rec{"d", "4", 9, false}))
	}
	if off, ts := l.MaxTimestamp(); off != 1 || ts != 9 {
		t.Fatalf("ties must pick the earliest record: %d %d", off, ts)
	}
}
