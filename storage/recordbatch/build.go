package recordbatch

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Build encodes a batch holding recs with h's fields and codec
// (h.Compression()), computing Length, NumRecords and CRC; Magic is always 2.
//
// Derived fields, so compaction can rebuild a batch with fewer records while
// keeping its offset range:
//   - LastOffsetDelta is max(h.LastOffsetDelta, largest record OffsetDelta).
//   - For CreateTime batches with records, MaxTimestamp is the largest record
//     timestamp (FirstTimestamp + TimestampDelta), as Kafka computes it; for
//     LogAppendTime batches and empty batches h.MaxTimestamp is kept.
//
// Record offset deltas must be strictly increasing and non-negative.
func Build(h Header, recs []Record) ([]byte, error) {
	if len(recs) > math.MaxInt32 {
		return nil, fmt.Errorf("build: %d records", len(recs))
	}
	h.Magic = 2
	h.NumRecords = int32(len(recs))
	maxTS := int64(math.MinInt64)
	prev := int32(-1)
	rawLen := 0
	for i := range recs {
		r := &recs[i]
		if r.OffsetDelta <= prev {
			return nil, fmt.Errorf("build: record %d offset delta %d not above %d", i, r.OffsetDelta, prev)
		}
		prev = r.OffsetDelta
		maxTS = max(maxTS, h.FirstTimestamp+r.TimestampDelta)
		n := bodyLen(r)
		rawLen += varintLen(int64(n)) + n
	}
	h.LastOffsetDelta = max(h.LastOffsetDelta, prev)
	if h.TimestampType() == 0 && len(recs) > 0 {
		h.MaxTimestamp = maxTS
	}

	var b []byte
	if h.Compression() == CodecNone {
		// Encode records directly after the header: one allocation.
		b = make([]byte, HeaderSize, HeaderSize+rawLen)
		for i := range recs {
			b = AppendRecord(b, &recs[i])
		}
	} else {
		raw := make([]byte, 0, rawLen)
		for i := range recs {
			raw = AppendRecord(raw, &recs[i])
		}
		comp, err := Compress(h.Compression(), raw)
		if err != nil {
			return nil, fmt.Errorf("build: %w", err)
		}
		b = make([]byte, HeaderSize, HeaderSize+len(comp))
		b = append(b, comp...)
	}
	if len(b)-logOverhead > math.MaxInt32 {
		return nil, fmt.Errorf("build: batch of %d bytes too large", len(b))
	}
	h.Length = int32(len(b) - logOverhead)
	h.CRC = 0
	putHeader(b, h)
	binary.BigEndian.PutUint32(b[crcOffset:], checksum(b))
	return b, nil
}

// CheckProduce applies the stricter rules Kafka's LogValidator enforces on
// batches arriving in a Produce request (as opposed to batches already in a
// log, which compaction may have thinned): at least one record, and exactly
// one record per offset slot.
func (h Header) CheckProduce() error {
	if h.NumRecords <= 0 {
		return fmt.Errorf("%w: produce batch with %d records", ErrCorrupt, h.NumRecords)
	}
	if int64(h.LastOffsetDelta)+1 != int64(h.NumRecords) {
		return fmt.Errorf("%w: inconsistent offset range (lastOffsetDelta %d) and record count %d",
			ErrCorrupt, h.LastOffsetDelta, h.NumRecords)
	}
	return nil
}
