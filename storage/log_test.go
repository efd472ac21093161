package storage

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/regent-broker/regent/storage/recordbatch"
)

func TestAppendReadAcrossRolls(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{SegmentBytes: 2000, IndexIntervalBytes: 300})
	defer l.Close()
	var bases []int64
	for i := range 60 {
		b := simpleBatch(t, 3, 40, int64(1000+i))
		base, last := mustAppend(t, l, b)
		if base != int64(i*3) || last != base+2 {
			t.Fatalf("batch %d: offsets %d..%d", i, base, last)
		}
		bases = append(bases, base)
	}
	if l.NextOffset() != 180 || l.StartOffset() != 0 {
		t.Fatalf("next %d start %d", l.NextOffset(), l.StartOffset())
	}
	if n := len(segmentFiles(t, dir, logSuffix)); n < 5 {
		t.Fatalf("expected several segments, have %d", n)
	}
	var total int64
	for _, f := range segmentFiles(t, dir, logSuffix) {
		total += fileSizeOf(t, f)
	}
	if total != l.Size() {
		t.Fatalf("Size %d, files %d", l.Size(), total)
	}
	// Every offset, including mid-batch ones, reads from its own batch.
	for off := int64(0); off < 180; off++ {
		data, err := l.Read(off, 1<<20, false)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		h, err := recordbatch.Validate(data[:mustHeader(t, data).TotalSize()])
		if err != nil {
			t.Fatal(err)
		}
		if want := off / 3 * 3; h.BaseOffset != want {
			t.Fatalf("Read(%d) starts at batch %d, want %d", off, h.BaseOffset, want)
		}
	}
	got := readAll(t, l, 0)
	if len(got) != 180 {
		t.Fatalf("read %d records", len(got))
	}
	for i, r := range got {
		if r.off != int64(i) || r.key != fmt.Sprintf("k%d", i%3) {
			t.Fatalf("record %d: %+v", i, r)
		}
	}
}

func fileSizeOf(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := osStat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func mustHeader(t testing.TB, b []byte) recordbatch.Header {
	t.Helper()
	h, err := recordbatch.ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestReadLimits(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	defer l.Close()
	var sizes []int
	for i := range 5 {
		b := simpleBatch(t, 2, 100, int64(i))
		sizes = append(sizes, len(b))
		mustAppend(t, l, b)
	}
	cases := []struct {
		name     string
		offset   int64
		max      int
		strict   bool
		wantSize int
	}{
		{"fits two and a half", 0, sizes[0] + sizes[1] + sizes[2]/2, false, sizes[0] + sizes[1]},
		{"exact two", 2, sizes[1] + sizes[2], true, sizes[1] + sizes[2]},
		{"first too big, lenient", 3, 10, false, sizes[1]},
		{"first too big, strict", 3, 10, true, 0},
		{"zero max lenient", 0, 0, false, sizes[0]},
		{"everything", 0, 1 << 20, false, sizes[0] + sizes[1] + sizes[2] + sizes[3] + sizes[4]},
		{"at end", 10, 1 << 20, false, 0},
	}
	for _, tc := range cases {
		data, err := l.Read(tc.offset, tc.max, tc.strict)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(data) != tc.wantSize {
			t.Fatalf("%s: got %d bytes, want %d", tc.name, len(data), tc.wantSize)
		}
		if len(data) > 0 {
			if _, err := recordbatch.Split(data); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
		}
	}
	for _, off := range []int64{11, -1} {
		if _, err := l.Read(off, 100, false); !isOutOfRange(err) {
			t.Fatalf("Read(%d): %v", off, err)
		}
	}
}

func TestReadReturnsCallerOwnedCopy(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	defer l.Close()
	mustAppend(t, l, simpleBatch(t, 1, 10, 1))
	a, _ := l.Read(0, 1000, false)
	for i := range a {
		a[i] = 0
	}
	b, _ := l.Read(0, 1000, false)
	if _, err := recordbatch.Validate(b); err != nil {
		t.Fatalf("second read affected by mutating the first: %v", err)
	}
}

func TestAppendMany(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{SegmentBytes: 1500})
	var batches [][]byte
	for i := range 20 {
		batches = append(batches, simpleBatch(t, 2, 50, int64(i)))
	}
	firsts, err := l.AppendMany(batches)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range firsts {
		if f != int64(2*i) {
			t.Fatalf("batch %d at %d", i, f)
		}
	}
	if got := readAll(t, l, 0); len(got) != 40 {
		t.Fatalf("read %d records", len(got))
	}
	if len(segmentFiles(t, dir, logSuffix)) < 2 {
		t.Fatal("AppendMany did not roll")
	}
	bad := simpleBatch(t, 1, 1, 1)
	if _, err := l.AppendMany([][]byte{bad[:len(bad)-1]}); err == nil {
		t.Fatal("short batch accepted")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Append(simpleBatch(t, 1, 1, 1)); err == nil {
		t.Fatal("append after close")
	}
	if _, err := l.Read(0, 10, false); err == nil {
		t.Fatal("read after close")
	}
}

func TestRollBySegmentMs(t *testing.T) {
	clk := newClock(1_000_000)
	dir := t.TempDir()
	l := openLog(t, dir, Options{SegmentMs: 1000, Now: clk.Now})
	defer l.Close()
	mustAppend(t, l, simpleBatch(t, 1, 10, clk.Ms()))
	clk.Advance(500 * 1e6)
	mustAppend(t, l, simpleBatch(t, 1, 10, clk.Ms()))
	if n := len(segmentFiles(t, dir, logSuffix)); n != 1 {
		t.Fatalf("rolled too early: %d segments", n)
	}
	clk.Advance(600 * 1e6)
	mustAppend(t, l, simpleBatch(t, 1, 10, clk.Ms()))
	if n := len(segmentFiles(t, dir, logSuffix)); n != 2 {
		t.Fatalf("want roll after segment.ms: %d segments", n)
	}
}

func TestOversizedBatchGetsOwnSegment(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{SegmentBytes: 500})
	defer l.Close()
	mustAppend(t, l, simpleBatch(t, 1, 10, 1))
	mustAppend(t, l, simpleBatch(t, 1, 2000, 2)) // larger than a segment
	mustAppend(t, l, simpleBatch(t, 1, 10, 3))
	if got := readAll(t, l, 0); len(got) != 3 || len(got[1].value) != 2000 {
		t.Fatalf("records %v", len(got))
	}
	if n := len(segmentFiles(t, dir, logSuffix)); n != 3 {
		t.Fatalf("segments %d", n)
	}
}

func TestCompressedBatchesStored(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	defer l.Close()
	for _, c := range []int8{1, 2, 3, 4} {
		mustAppend(t, l, batch(t, c, rec{key: "a", value: "x", ts: 5}, rec{key: "b", value: "y", ts: 6}))
	}
	got := readAll(t, l, 0)
	if len(got) != 8 || got[7].value != "y" || got[7].off != 7 {
		t.Fatalf("got %+v", got)
	}
	if !bytes.Equal([]byte(got[0].key), []byte("a")) {
		t.Fatal("key mismatch")
	}
}
