package recordbatch

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checksum is the v2 batch CRC: CRC-32C over attributes..end.
func checksum(b []byte) uint32 {
	return crc32.Checksum(b[attributesOffset:], castagnoli)
}

// minRecordSize is the smallest encoding of one record: length, attributes,
// timestampDelta, offsetDelta, keyLength, valueLength, headerCount, one byte
// each. It bounds NumRecords for uncompressed batches before decoding.
const minRecordSize = 7

// Validate checks that b is exactly one whole, intact v2 batch and returns its
// header. It does not decode records (see Records), so it is cheap enough for
// every Produce and for recovery scans.
func Validate(b []byte) (Header, error) { return validate(b, true) }

// validate is Validate, without the CRC unless crc. The CRC comes before
// the header's sanity: contradictions under a bad CRC are damage
// (ErrBadCRC), under a good one a client's fault (ErrInvalidRecord).
func validate(b []byte, crc bool) (Header, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, err
	}
	if h.TotalSize() != len(b) {
		return h, fmt.Errorf("%w: header says %d bytes, have %d", ErrBadLength, h.TotalSize(), len(b))
	}
	if crc {
		if got := checksum(b); got != h.CRC {
			return h, fmt.Errorf("%w: stored %#08x, computed %#08x", ErrBadCRC, h.CRC, got)
		}
	}
	if err := checkSane(h, len(b)); err != nil {
		return h, err
	}
	return h, nil
}

// checkSane applies the header invariants that hold for every legal batch,
// including ones rewritten by compaction (which may hold fewer records than
// offset slots, or none).
func checkSane(h Header, size int) error {
	switch {
	case h.NumRecords < 0:
		return invalidf("negative record count %d", h.NumRecords)
	case h.LastOffsetDelta < 0:
		return invalidf("negative lastOffsetDelta %d", h.LastOffsetDelta)
	case int64(h.NumRecords) > int64(h.LastOffsetDelta)+1:
		// Each record has a distinct offset delta in [0, lastOffsetDelta].
		return invalidf("%d records but lastOffsetDelta %d", h.NumRecords, h.LastOffsetDelta)
	case h.BaseOffset < 0 || h.BaseOffset > h.BaseOffset+int64(h.LastOffsetDelta):
		return fmt.Errorf("%w: base offset %d with lastOffsetDelta %d", ErrCorrupt, h.BaseOffset, h.LastOffsetDelta)
	case h.Compression() > CodecZstd:
		return fmt.Errorf("%w: %d", ErrBadCodec, h.Compression())
	case h.Compression() == CodecNone && int64(h.NumRecords)*minRecordSize > int64(size-HeaderSize):
		return invalidf("%d records cannot fit in %d bytes", h.NumRecords, size-HeaderSize)
	}
	return nil
}

// invalidError is a header whose fields contradict each other (or the
// batch's size) under an intact CRC. It is ErrCorrupt to readers of a log
// and ErrInvalidRecord to Produce, which refuses it with INVALID_RECORD.
type invalidError struct{ msg string }

func (e *invalidError) Error() string { return "recordbatch: invalid batch: " + e.msg }
func (e *invalidError) Is(target error) bool {
	return target == ErrCorrupt || target == ErrInvalidRecord
}

func invalidf(format string, args ...any) error {
	return &invalidError{msg: fmt.Sprintf(format, args...)}
}

// Split cuts a concatenation of batches (e.g. a Produce request's records
// field) into whole batches, validating each. The returned slices alias b.
// Trailing bytes that do not form a whole batch are an error.
func Split(b []byte) ([][]byte, error) { return split(b, true) }

// SplitChecked is Split without the CRC, for batches Split already passed
// (a replicated produce the proposing node validated: every node applies
// it, and the CRC was most of what Split costs them). Framing and header
// sanity are still checked, so a mistake fails here, not later.
func SplitChecked(b []byte) ([][]byte, error) { return split(b, false) }

func split(b []byte, crc bool) ([][]byte, error) {
	var batches [][]byte
	for pos := 0; pos < len(b); {
		rest := b[pos:]
		if len(rest) < logOverhead {
			return batches, fmt.Errorf("%w: %d trailing bytes at position %d", ErrTruncated, len(rest), pos)
		}
		length := int64(int32(binary.BigEndian.Uint32(rest[lengthOffset:])))
		if length < minLength {
			return batches, fmt.Errorf("%w: %d at position %d", ErrBadLength, length, pos)
		}
		size := logOverhead + length
		if size > int64(len(rest)) {
			return batches, fmt.Errorf("%w: batch at position %d needs %d bytes, have %d", ErrTruncated, pos, size, len(rest))
		}
		one := rest[:size:size]
		if _, err := validate(one, crc); err != nil {
			return batches, fmt.Errorf("batch at position %d: %w", pos, err)
		}
		batches = append(batches, one)
		pos += int(size)
	}
	return batches, nil
}
