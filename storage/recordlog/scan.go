package recordlog

import (
	"errors"
	"fmt"
)

// CorruptError is damage in the middle of a log: a frame that does not
// read, with a good frame after it. Opening refuses such a log rather
// than drop the good frames; an operator who accepts the loss can cut
// the file at Offset.
type CorruptError struct {
	Path string
	// Offset is where the damaged frame starts: every frame before it
	// is good.
	Offset int64
	// Next is where a good frame was found after the damage.
	Next int64
	Err  error
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("recordlog %s: corrupt frame at byte %d (%v) followed by a good frame at byte %d", e.Path, e.Offset, e.Err, e.Next)
}

func (e *CorruptError) Unwrap() error { return e.Err }

// scan reads the frames of raw in order, handing each to fn, and returns
// how many leading bytes are good frames. A damaged or cut tail ends the
// scan (the caller truncates it); damage followed by a good frame is a
// *CorruptError (with no Path).
//
// Telling a cut tail from damage in the middle:
//   - fewer bytes than a header, or a length that runs past the end, is
//     the shape of a write that was cut: the tail is dropped unless a run
//     of good frames starting inside it ends exactly at the end of the
//     data (then the length itself was damaged). The run must reach the
//     end exactly because a cut frame's payload may carry client bytes
//     (offset metadata) that look like frames;
//   - a length out of range, a bad checksum or a malformed body is
//     damage: if a good frame follows (at the frame's declared end, or,
//     searching byte by byte, one starting a run of good frames to the
//     end or to a cut frame), the log is corrupt in the middle.
func scan(raw []byte, ly Layout, maxLength int, fn func(Record)) (int64, error) {
	pos := 0
	for pos < len(raw) {
		r, n, err := ly.ReadFrame(raw[pos:], maxLength)
		if err == nil {
			fn(r)
			pos += n
			continue
		}
		var next int
		switch {
		case errors.Is(err, ErrShortFrame):
			next = findRun(raw, pos+frameHeader, ly, maxLength, true)
		case errors.Is(err, ErrBadLength):
			next = findRun(raw, pos+1, ly, maxLength, false)
		default:
			// The length fits: the frame's end is probably where the
			// next one starts.
			end := pos + 4 + int(uint32(raw[pos])<<24|uint32(raw[pos+1])<<16|uint32(raw[pos+2])<<8|uint32(raw[pos+3]))
			if _, _, err := ly.ReadFrame(raw[end:], maxLength); err == nil {
				next = end
			} else {
				next = findRun(raw, end, ly, maxLength, false)
			}
		}
		if next >= 0 {
			return int64(pos), &CorruptError{Offset: int64(pos), Next: int64(next), Err: err}
		}
		return int64(pos), nil
	}
	return int64(pos), nil
}

// findRun returns the first offset at or after from where a run of good
// frames starts that reaches the end of raw exactly (or, unless strict,
// ends in a cut frame); -1 if there is none.
func findRun(raw []byte, from int, ly Layout, maxLength int, strict bool) int {
	for q := from; q+frameHeader <= len(raw); q++ {
		if _, _, err := ly.ReadFrame(raw[q:], maxLength); err != nil {
			continue
		}
		if runReachesEnd(raw[q:], ly, maxLength, strict) {
			return q
		}
	}
	return -1
}

func runReachesEnd(b []byte, ly Layout, maxLength int, strict bool) bool {
	for len(b) > 0 {
		_, n, err := ly.ReadFrame(b, maxLength)
		if err != nil {
			return !strict && errors.Is(err, ErrShortFrame)
		}
		b = b[n:]
	}
	return true
}
