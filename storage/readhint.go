package storage

import (
	"sync/atomic"
	"unsafe"
	"weak"
)

// Read hints let a consumer's next fetch skip the offset index. A consumer
// reads forward: its next fetch asks for the offset right after the last
// batch of the range it was just sent, and that batch starts at the file
// position right after the range. Without the hint, locate binary-searches
// the .index file with one small pread per probe (its in-memory tail holds
// only the newest entries; a segment of 64 KiB batches has thousands) and
// scans from the floor entry: in BenchmarkReadRange that search was 14% of
// the read path's CPU (issue 13).
//
// A hint is exact, not a guess to verify: it is keyed by the segment
// object and the Log's generation, and below a view's size a segment's
// bytes change only by Truncate, which bumps the generation (compaction and
// retention install new segment objects). A hint recorded from a read whose
// generation changed under it carries the old generation and never matches
// again. locate still checks the header it reads there and falls back to
// the index on any surprise.

// readHint says: in segment seg at generation gen, the first batch whose
// last offset is >= next starts at file position pos. Immutable once
// published.
type readHint struct {
	seg  weak.Pointer[segment]
	gen  uint64
	next int64
	pos  int64
}

// readHints is a fixed table shared by every Log (no per-Log state, no
// cleanup: a slot is overwritten by the next hint hashing to it, and the
// weak pointer keeps no segment alive). Slots are read and replaced
// atomically by any goroutine.
var readHints [1024]atomic.Pointer[readHint]

func hintSlot(s *segment, next int64) *atomic.Pointer[readHint] {
	h := uint64(uintptr(unsafe.Pointer(s)))>>4 ^ uint64(next)*0x9e3779b97f4a7c15
	h ^= h >> 29
	return &readHints[h%uint64(len(readHints))]
}

// rememberNext records that the batch holding offset next starts at pos
// (gen is the generation the caller's view was taken at).
func rememberNext(s *segment, gen uint64, next, pos int64) {
	hintSlot(s, next).Store(&readHint{seg: weak.Make(s), gen: gen, next: next, pos: pos})
}

// hintFor returns the position recorded for target in s at gen, if any.
func hintFor(s *segment, gen uint64, target int64) (int64, bool) {
	h := hintSlot(s, target).Load()
	if h == nil || h.next != target || h.gen != gen || h.seg != weak.Make(s) {
		return 0, false
	}
	return h.pos, true
}
