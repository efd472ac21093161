package storage

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/regent-broker/regent/storage/recordbatch"
)

// checkRangeMatchesRead fails unless ReadRange(off, maxBytes, strict)
// holds exactly Read's bytes with spans matching their headers. It returns
// the offset after the range (off when empty).
func checkRangeMatchesRead(t *testing.T, l *Log, off int64, maxBytes int, strict bool) int64 {
	t.Helper()
	want, err := l.Read(off, maxBytes, strict)
	if err != nil {
		t.Fatalf("Read(%d, %d, %v): %v", off, maxBytes, strict, err)
	}
	r, err := l.ReadRange(off, maxBytes, strict)
	if err != nil {
		t.Fatalf("ReadRange(%d, %d, %v): %v", off, maxBytes, strict, err)
	}
	if (r == nil) != (len(want) == 0) {
		t.Fatalf("offset %d max %d strict %v: range %v, read %d bytes", off, maxBytes, strict, r != nil, len(want))
	}
	if r == nil {
		return off
	}
	defer r.Release()
	got, err := r.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("offset %d max %d strict %v: range of %d bytes differs from read of %d", off, maxBytes, strict, len(got), len(want))
	}
	var end int64
	for _, s := range r.Batches() {
		h := mustHeader(t, got[end:])
		if h.BaseOffset != s.BaseOffset || h.LastOffset() != s.LastOffset || end+int64(h.TotalSize()) != s.End {
			t.Fatalf("span %+v, batch %d..%d at %d", s, h.BaseOffset, h.LastOffset(), end)
		}
		end = s.End
	}
	if end != int64(len(got)) {
		t.Fatalf("spans end at %d of %d bytes", end, len(got))
	}
	return r.Batches()[len(r.Batches())-1].LastOffset + 1
}

// hintHit reports whether off has a read hint for the segment
// holding it at the current generation.
func hintHit(l *Log, off int64) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if off >= l.mu.next {
		return false
	}
	s := l.mu.segs[max(l.segmentFor(off), 0)]
	_, ok := hintFor(s, l.mu.gen, off)
	return ok
}

// TestReadHintsMatchRead: consumers walking forward over batches of mixed
// sizes (100 B to 70 KiB, so headers are read both in chunks and one by
// one) with mixed fetch sizes get exactly Read's bytes from the hinted
// path, including cuts at max bytes and at segment ends, while the log
// grows under them, after a Truncate that rewrites the same file positions
// with different batches, and when jumping to arbitrary offsets.
func TestReadHintsMatchRead(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 5))
	l := openLog(t, t.TempDir(), Options{SegmentBytes: 600 << 10, IndexIntervalBytes: 4096, Files: NewFileCache(64)})
	defer l.Close()
	appendSome := func(n int) {
		for range n {
			var vsize, recs int
			switch rng.IntN(3) {
			case 0:
				vsize, recs = 50+rng.IntN(100), 1+rng.IntN(3)
			case 1:
				vsize, recs = 1000, 1+rng.IntN(8)
			default:
				vsize, recs = 1000+rng.IntN(100), 40+rng.IntN(30)
			}
			mustAppend(t, l, simpleBatch(t, recs, vsize, 1000))
		}
	}
	limits := []int{1, 500, 4096, 70 << 10, 256 << 10, 1 << 20}
	walk := func() (fetches, hits int) {
		off := l.StartOffset()
		for off < l.NextOffset() {
			maxBytes := limits[rng.IntN(len(limits))]
			strict := rng.IntN(4) == 0
			if hintHit(l, off) {
				hits++
			}
			fetches++
			next := checkRangeMatchesRead(t, l, off, maxBytes, strict)
			if next == off { // strict and the first batch too big
				next = checkRangeMatchesRead(t, l, off, maxBytes, false)
			}
			off = next
			if rng.IntN(10) == 0 {
				appendSome(1 + rng.IntN(3)) // the log grows under the consumer
			}
		}
		return fetches, hits
	}
	appendSome(200)
	fetches, hits := walk()
	if hits < fetches/2 {
		t.Errorf("first walk: %d of %d fetches had a hint", hits, fetches)
	}
	if len(l.mu.segs) < 3 {
		t.Fatalf("want several segments, have %d", len(l.mu.segs))
	}

	// Rewrite the tail with batches of other sizes at the same file
	// positions: hints taken before must not be used.
	mid := l.NextOffset() / 2
	if err := l.Truncate(mid); err != nil {
		t.Fatal(err)
	}
	appendSome(150)
	walk()

	// Arbitrary offsets, mid-batch ones included.
	for range 300 {
		off := l.StartOffset() + rng.Int64N(l.NextOffset()-l.StartOffset()+1)
		checkRangeMatchesRead(t, l, off, limits[rng.IntN(len(limits))], rng.IntN(2) == 0)
	}
}

// TestReadHintStale: a hint for a segment at an older generation, for
// another segment, or for another offset is not returned.
func TestReadHintStale(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{SegmentBytes: 2000, Files: NewFileCache(64)})
	defer l.Close()
	for range 10 {
		mustAppend(t, l, simpleBatch(t, 2, 300, 1000))
	}
	s0, s1 := l.mu.segs[0], l.mu.segs[1]
	rememberNext(s0, 7, 4, 1234)
	if pos, ok := hintFor(s0, 7, 4); !ok || pos != 1234 {
		t.Fatalf("hintFor = %d, %v", pos, ok)
	}
	if _, ok := hintFor(s0, 8, 4); ok {
		t.Error("hint of generation 7 used at 8")
	}
	if _, ok := hintFor(s1, 7, 4); ok {
		t.Error("hint of another segment used")
	}
	if _, ok := hintFor(s0, 7, 5); ok {
		t.Error("hint of another offset used")
	}
}

// TestReadHintAfterTruncate: Truncate then appends that put other batches
// at the very file positions hints were taken for, with offsets that make
// those hints look plausible (the batch there holds later offsets), must
// not change what a fetch returns.
func TestReadHintAfterTruncate(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{SegmentBytes: 1 << 20, Files: NewFileCache(64)})
	defer l.Close()
	one := simpleBatch(t, 1, 400, 1000)
	var two []byte
	for v := 1; v < 400 && len(two) != len(one); v++ {
		two = batch(t, recordbatch.CodecNone, rec{value: strings.Repeat("v", v), ts: 1000},
			rec{value: strings.Repeat("w", v+1), ts: 1000})
	}
	if len(two) != len(one) {
		t.Skip("no two-record batch of the one-record batch's size")
	}
	for range 20 {
		mustAppend(t, l, one)
	}
	// Hints: offset i+1 at position (i+1)*size, for every i.
	for off := int64(0); off < 20; off++ {
		checkRangeMatchesRead(t, l, off, len(one), true)
	}
	if err := l.Truncate(1); err != nil {
		t.Fatal(err)
	}
	for range 19 {
		mustAppend(t, l, two) // offsets 2k-1, 2k at position k*size
	}
	for off := l.NextOffset() - 1; off >= 1; off-- {
		checkRangeMatchesRead(t, l, off, len(one), true)
	}
}
