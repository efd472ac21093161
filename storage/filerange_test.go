package storage

import (
	"bytes"
	"slices"
	"testing"
)

// TestReadRangeMatchesRead: for every offset and a spread of byte limits,
// the range holds exactly the bytes Read returns, batch by batch; small
// and large batches (headers read in chunks, or one by one).
func TestReadRangeMatchesRead(t *testing.T) {
	for _, vsize := range []int{10, 3000} {
		l := openLog(t, t.TempDir(), Options{SegmentBytes: 40000, IndexIntervalBytes: 500, Files: NewFileCache(64)})
		for i := range 80 {
			mustAppend(t, l, simpleBatch(t, 1+i%3, vsize, int64(1000+i)))
		}
		next := l.NextOffset()
		for off := int64(0); off <= next; off++ {
			for _, maxBytes := range []int{1, 100, 5000, 17000, 1 << 20} {
				for _, strict := range []bool{false, true} {
					want, err := l.Read(off, maxBytes, strict)
					if err != nil {
						t.Fatal(err)
					}
					r, err := l.ReadRange(off, maxBytes, strict)
					if err != nil {
						t.Fatal(err)
					}
					if (r == nil) != (len(want) == 0) {
						t.Fatalf("offset %d max %d strict %v: range %v, read %d bytes", off, maxBytes, strict, r != nil, len(want))
					}
					if r == nil {
						continue
					}
					got, err := r.AppendTo(nil)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got, want) {
						t.Fatalf("offset %d max %d: range of %d bytes differs from read of %d", off, maxBytes, len(got), len(want))
					}
					var end int64
					for _, s := range r.Batches() {
						h := mustHeader(t, got[end:])
						if h.BaseOffset != s.BaseOffset || h.LastOffset() != s.LastOffset || end+int64(h.TotalSize()) != s.End {
							t.Fatalf("span %+v, batch %d..%d at %d", s, h.BaseOffset, h.LastOffset(), end)
						}
						end = s.End
					}
					r.Release()
				}
			}
		}
		l.Close()
		if n := l.files.Open(); n != 0 {
			t.Fatalf("%d descriptors open after close", n)
		}
	}
}

// TestFileRangeOutlivesDeletion: a range taken before retention deletes
// its segment still reads the old bytes, and its descriptor closes when
// the range is released.
func TestFileRangeOutlivesDeletion(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{SegmentBytes: 2000, IndexIntervalBytes: 300, Files: NewFileCache(64)})
	defer l.Close()
	for i := range 60 {
		mustAppend(t, l, simpleBatch(t, 3, 40, int64(1000+i)))
	}
	want, err := l.Read(0, 1<<20, false)
	if err != nil {
		t.Fatal(err)
	}
	r, err := l.ReadRange(0, 1<<20, false)
	if err != nil || r == nil {
		t.Fatalf("range %v, %v", r, err)
	}
	cut := r.CutBefore(3)
	if cut != 3 || len(r.Batches()) != 1 {
		t.Fatalf("CutBefore(3): end %d, %d batches", cut, len(r.Batches()))
	}
	open := l.files.Open()
	if err := l.DeleteRecordsBefore(l.NextOffset() - 3); err != nil {
		t.Fatal(err)
	}
	if _, err := l.EnforceRetention(); err != nil {
		t.Fatal(err)
	}
	got, err := r.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want[:r.Len()]) {
		t.Fatal("range over a deleted segment reads other bytes")
	}
	r.Release()
	r.Release() // twice is harmless
	if after := l.files.Open(); after >= open {
		t.Fatalf("descriptors open: %d before the deletion, %d after the release", open, after)
	}
}

// TestCacheProbes: a range within one page is probed once, a range that
// crosses a page boundary at both ends.
func TestCacheProbes(t *testing.T) {
	for _, c := range []struct {
		pos, size int64
		want      []int64
	}{
		{0, 1, []int64{0}},
		{0, 4096, []int64{0}},
		{100, 1100, []int64{100}},
		{4095, 1, []int64{4095}},
		{4095, 2, []int64{4095, 4096}},
		{4000, 200, []int64{4000, 4199}},
		{8192, 1 << 20, []int64{8192, 8192 + 1<<20 - 1}},
	} {
		probes, n := cacheProbes(c.pos, c.size)
		if got := probes[:n]; !slices.Equal(got, c.want) {
			t.Errorf("cacheProbes(%d, %d) = %v, want %v", c.pos, c.size, probes[:n], c.want)
		}
	}
}
