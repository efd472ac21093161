package storage

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/regent-broker/regent/storage/recordbatch"
)

// Read returns whole batches starting with the batch that contains offset,
// at most maxBytes in total. If the first batch alone exceeds maxBytes it is
// returned by itself unless strictMax (Kafka's "at least one batch" rule
// for the first partition of a fetch); with strictMax it yields nothing.
// offset == NextOffset yields nothing; offsets outside [StartOffset,
// NextOffset] fail with ErrOffsetOutOfRange. The result is a fresh slice
// owned by the caller. Batches come from one segment per call.
func (l *Log) Read(offset int64, maxBytes int, strictMax bool) ([]byte, error) {
	return readAt(l, offset, func(v segView, _ uint64, offset int64) ([]byte, bool, error) {
		data, found, err := v.read(offset, maxBytes, strictMax)
		v.s.release()
		return data, found, err
	}, nil)
}

// readAt serves Read and ReadRange: it finds the segment holding offset
// (or the next one, where compaction left nothing at or after offset in
// it), takes a reference to it and calls read with a view of it and the
// offset (and the Log's generation the view belongs to, for read hints).
// read must release the reference unless its result holds it.
// When the segments changed meanwhile (retention, compaction, Truncate),
// the result is dropped (drop, unless nil) and the read is done again on
// a fresh snapshot.
func readAt[T any](l *Log, offset int64, read func(v segView, gen uint64, offset int64) (T, bool, error), drop func(T)) (T, error) {
	var none T
	for {
		l.mu.RLock()
		if l.mu.closed {
			l.mu.RUnlock()
			return none, ErrClosed
		}
		if offset < l.mu.start || offset > l.mu.next {
			start, next := l.mu.start, l.mu.next
			l.mu.RUnlock()
			return none, fmt.Errorf("%w: %d not in [%d, %d]", ErrOffsetOutOfRange, offset, start, next)
		}
		if offset == l.mu.next {
			l.mu.RUnlock()
			return none, nil
		}
		i := max(l.segmentFor(offset), 0)
		s := l.mu.segs[i]
		v := s.view()
		nextBase := int64(-1)
		if i+1 < len(l.mu.segs) {
			nextBase = l.mu.segs[i+1].base
		}
		gen := l.mu.gen
		ok := s.acquire()
		l.mu.RUnlock()
		if !ok {
			continue // removed meanwhile; the fresh snapshot will tell
		}
		res, found, err := read(v, gen, offset)
		if l.genChanged(gen) {
			if drop != nil {
				drop(res)
			}
			continue
		}
		if err != nil {
			return none, fmt.Errorf("reading offset %d: %w", offset, err)
		}
		if found {
			return res, nil
		}
		if nextBase < 0 {
			return none, nil // a hole at the log end (Truncate to mid-batch)
		}
		// Nothing at or after offset in this segment (compaction removed
		// its tail): continue at the next segment.
		offset = nextBase
	}
}

func (l *Log) genChanged(gen uint64) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.gen != gen
}

func (v segView) read(offset int64, maxBytes int, strictMax bool) ([]byte, bool, error) {
	h, pos, found, err := v.locate(offset)
	if err != nil || !found {
		return nil, found, err
	}
	first := h.TotalSize()
	if first > maxBytes {
		if strictMax {
			return nil, true, nil
		}
		b, err := v.readBatch(pos, first)
		return b, true, err
	}
	buf := make([]byte, min(int64(maxBytes), v.size-pos))
	if _, err := v.s.log.ReadAt(buf, pos); err != nil {
		return nil, true, fmt.Errorf("reading segment %d at %d: %w", v.s.base, pos, err)
	}
	// Trim to whole batches; the first one is known to fit.
	end := first
	for end+12 <= len(buf) {
		n := 12 + int(int32(binary.BigEndian.Uint32(buf[end+8:])))
		if n < recordbatch.HeaderSize || end+n > len(buf) {
			break
		}
		end += n
	}
	return buf[:end:end], true, nil
}

// OffsetForTimestamp implements ListOffsets by timestamp: the first offset
// (>= StartOffset) whose record timestamp is >= ts, and that timestamp.
// LogAppendTime batches report MaxTimestamp for every record. found is false
// when no record qualifies.
func (l *Log) OffsetForTimestamp(ts int64) (offset int64, timestamp int64, found bool, err error) {
	for {
		l.mu.RLock()
		if l.mu.closed {
			l.mu.RUnlock()
			return -1, -1, false, ErrClosed
		}
		start, gen := l.mu.start, l.mu.gen
		var views []segView
		for _, s := range l.mu.segs {
			// A segment whose largest timestamp is below ts cannot hold
			// the answer; Kafka skips it the same way.
			if s.maxTS >= ts && s.end > start {
				views = append(views, s.view())
			}
		}
		l.mu.RUnlock()
		off, rts, ok, err := l.searchTimestamp(views, ts, start)
		if l.genChanged(gen) {
			continue
		}
		return off, rts, ok, err
	}
}

func (l *Log) searchTimestamp(views []segView, ts, start int64) (int64, int64, bool, error) {
	for _, v := range views {
		if !v.s.acquire() {
			continue // deleted by retention: its records are gone
		}
		off, rts, ok, err := v.offsetForTimestamp(ts, start)
		v.s.release()
		if err != nil || ok {
			return off, rts, ok, err
		}
	}
	return -1, -1, false, nil
}

func (v segView) offsetForTimestamp(ts, start int64) (int64, int64, bool, error) {
	// Every batch before the time-index floor entry's batch has a max
	// timestamp below that entry's, hence below ts: start scanning there.
	from := int64(0)
	if e, ok, err := v.tim.floor(ts); err != nil {
		return 0, 0, false, err
	} else if ok {
		_, pos, found, err := v.locate(v.s.base + int64(e.rel))
		if err != nil {
			return 0, 0, false, err
		}
		if found {
			from = pos
		}
	}
	sc := newHeaderScanner(v.s.log, from, v.size)
	defer sc.done()
	for {
		h, pos, err := sc.next()
		if err == io.EOF {
			return -1, -1, false, nil
		}
		if err != nil {
			return 0, 0, false, fmt.Errorf("segment %d: %w", v.s.base, err)
		}
		if h.MaxTimestamp < ts || h.LastOffset() < start || h.NumRecords == 0 {
			continue
		}
		off, rts, ok, err := v.firstRecordAtOrAfter(h, pos, ts, start)
		if err != nil || ok {
			return off, rts, ok, err
		}
	}
}

// firstRecordAtOrAfter decodes one batch and returns its first record at
// offset >= start with timestamp >= ts.
func (v segView) firstRecordAtOrAfter(h recordbatch.Header, pos, ts, start int64) (int64, int64, bool, error) {
	b, err := v.readBatch(pos, h.TotalSize())
	if err != nil {
		return 0, 0, false, err
	}
	recs, err := recordbatch.Records(b)
	if err != nil {
		return 0, 0, false, fmt.Errorf("segment %d batch at %d: %w", v.s.base, pos, err)
	}
	for _, r := range recs {
		off := h.BaseOffset + int64(r.OffsetDelta)
		rts := recordTimestamp(h, r)
		if off >= start && rts >= ts {
			return off, rts, true, nil
		}
	}
	return -1, -1, false, nil
}

func recordTimestamp(h recordbatch.Header, r recordbatch.Record) int64 {
	if h.TimestampType() == 1 {
		return h.MaxTimestamp
	}
	return h.FirstTimestamp + r.TimestampDelta
}

// MaxTimestamp returns the offset and timestamp of the record with the
// largest timestamp (ListOffsets MAX_TIMESTAMP, KIP-734); among equal
// timestamps the earliest record. (-1, -1) for an empty log. Segments
// count whole even when partly below StartOffset.
func (l *Log) MaxTimestamp() (offset int64, timestamp int64) {
	l.mu.RLock()
	if l.mu.closed {
		l.mu.RUnlock()
		return -1, -1
	}
	var best *segment
	for _, s := range l.mu.segs {
		if s.maxTSOff >= 0 && (best == nil || s.maxTS > best.maxTS) {
			best = s
		}
	}
	if best == nil {
		l.mu.RUnlock()
		return -1, -1
	}
	v, maxTS, batchOff := best.view(), best.maxTS, best.maxTSOff
	ok := best.acquire()
	l.mu.RUnlock()
	if !ok {
		return batchOff, maxTS
	}
	defer best.release()
	// The segment tracks the batch; find the exact record within it.
	h, pos, found, err := v.locate(batchOff)
	if err != nil || !found {
		return batchOff, maxTS
	}
	off, rts, ok, err := v.firstRecordAtOrAfter(h, pos, maxTS, 0)
	if err != nil || !ok {
		return batchOff, maxTS
	}
	return off, rts
}
