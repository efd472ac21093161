package protocol

import (
	"slices"

	"github.com/regent-broker/regent/actors/share"
	"github.com/regent-broker/regent/storage/recordbatch"
)

// mergeShareAcquired adds one acquisition's records and ranges to what a
// ShareFetch already acquired on the same partition in an earlier round.
// A later round may hand out records below the earlier ones (released or
// expired meanwhile) and records of a stored batch an earlier round
// already sent part of: the answer must still list its batches once each,
// in offset order, and its acquired ranges sorted (franz-go reports
// anything else as malformed and has to repair it).
func mergeShareAcquired(records []byte, acquired []share.AcquiredRange, addRecords []byte, addAcquired []share.AcquiredRange) ([]byte, []share.AcquiredRange) {
	acquired = append(acquired, addAcquired...)
	slices.SortFunc(acquired, func(a, b share.AcquiredRange) int {
		switch {
		case a.First < b.First:
			return -1
		case a.First > b.First:
			return 1
		}
		return 0
	})
	if len(records) == 0 {
		return append(records, addRecords...), acquired
	}
	return mergeBatches(records, addRecords), acquired
}

// mergeBatches merges two runs of whole record batches, each in offset
// order, into one in offset order holding a batch (by base offset) once.
// Bytes that do not parse as a whole batch end their run.
func mergeBatches(a, b []byte) []byte {
	out := make([]byte, 0, len(a)+len(b))
	next := func(buf []byte) (base int64, size int, ok bool) {
		if len(buf) < recordbatch.HeaderSize {
			return 0, 0, false
		}
		h, err := recordbatch.ParseHeader(buf)
		if err != nil || h.TotalSize() > len(buf) {
			return 0, 0, false
		}
		return h.BaseOffset, h.TotalSize(), true
	}
	for {
		ba, sa, okA := next(a)
		bb, sb, okB := next(b)
		switch {
		case !okA && !okB:
			return out
		case okA && (!okB || ba < bb):
			out, a = append(out, a[:sa]...), a[sa:]
		case okB && (!okA || bb < ba):
			out, b = append(out, b[:sb]...), b[sb:]
		default: // the same batch in both
			out, a, b = append(out, a[:sa]...), a[sa:], b[sb:]
		}
	}
}
