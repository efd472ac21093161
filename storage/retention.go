package storage

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// DeleteRecordsBefore advances the log start offset to offset (DeleteRecords
// API), persists it, and deletes the closed segments wholly below it (owner).
// offset > NextOffset fails with ErrOffsetOutOfRange; offsets at or below
// the current start are a no-op.
func (l *Log) DeleteRecordsBefore(offset int64) error {
	if l.isClosed() {
		return ErrClosed
	}
	if offset > l.mu.next || offset < 0 {
		return fmt.Errorf("%w: delete before %d, log end %d", ErrOffsetOutOfRange, offset, l.mu.next)
	}
	if offset <= l.mu.start {
		return nil
	}
	// Persist first: after a crash the start must not move backwards.
	if err := l.persistStart(offset); err != nil {
		return err
	}
	l.mu.Lock()
	l.mu.start = offset
	before := l.mu.epochs
	l.clampState()
	epochs := l.mu.epochs
	l.mu.Unlock()
	_, err := l.deleteOldest(func(s, next *segment) bool { return next.base <= offset })
	if !slices.Equal(before, epochs) {
		err = errors.Join(err, l.persistEpochs(epochs))
	}
	return err
}

// EnforceRetention applies time and size retention to closed segments
// (owner). Like Kafka, an active segment that is entirely past retention.ms
// is rolled first so it can go too; size retention deletes the oldest
// segments only while the log stays at or above RetentionBytes, which with
// RetentionBytes == 0 includes the active segment (rolled first). Nothing
// is deleted when Options.DeleteDisabled (cleanup.policy=compact).
func (l *Log) EnforceRetention() (deletedSegments int, err error) {
	if l.isClosed() {
		return 0, ErrClosed
	}
	opts := l.opts()
	if opts.DeleteDisabled {
		return 0, nil
	}
	nowMs := opts.Now().UnixMilli()
	if opts.RetentionMs >= 0 {
		cutoff := nowMs - opts.RetentionMs
		expired := func(s *segment) bool { return l.largestTimestamp(s) < cutoff }
		act := l.active()
		if act.size > 0 && !slices.ContainsFunc(l.mu.segs, func(s *segment) bool { return !expired(s) }) {
			if err := l.roll(); err != nil {
				return 0, err
			}
		}
		n, err := l.deleteOldest(func(s, _ *segment) bool { return expired(s) })
		deletedSegments += n
		if err != nil {
			return deletedSegments, err
		}
	}
	if opts.RetentionBytes >= 0 {
		excess := l.mu.size - opts.RetentionBytes
		// Like Kafka, the active segment goes too when even it may
		// (retention.bytes=0): roll so that an empty one remains.
		if act := l.active(); act.size > 0 && excess >= l.mu.size {
			if err := l.roll(); err != nil {
				return deletedSegments, err
			}
		}
		n, err := l.deleteOldest(func(s, _ *segment) bool {
			if excess-s.size < 0 {
				return false
			}
			excess -= s.size
			return true
		})
		deletedSegments += n
		if err != nil {
			return deletedSegments, err
		}
	}
	return deletedSegments, nil
}

// deleteOldest removes the longest prefix of closed segments for which pred
// (given the segment and its successor) holds, then moves the log start up
// to the first remaining segment (owner).
func (l *Log) deleteOldest(pred func(s, next *segment) bool) (int, error) {
	segs := l.mu.segs
	n := 0
	for n < len(segs)-1 && pred(segs[n], segs[n+1]) {
		n++
	}
	if n == 0 {
		return 0, nil
	}
	newStart := max(l.mu.start, segs[n].base)
	var errs []error
	if newStart != l.mu.start {
		if err := l.persistStart(newStart); err != nil {
			return 0, err
		}
	}
	l.mu.Lock()
	removed := slices.Clone(segs[:n])
	l.mu.segs = slices.Clone(segs[n:])
	for _, s := range removed {
		l.mu.size -= s.size
	}
	l.mu.start = newStart
	before := l.mu.epochs
	l.clampState()
	epochs := l.mu.epochs
	l.mu.Unlock()
	errs = append(errs, l.removeSegments(removed))
	if !slices.Equal(before, epochs) {
		errs = append(errs, l.persistEpochs(epochs))
	}
	return n, errors.Join(errs...)
}

// Truncate removes every record at and above offset (replication
// divergence), like Kafka's truncateTo: the log end becomes offset, a batch
// straddling offset is removed whole, and truncating below the first
// segment empties the log and restarts it at offset. No-op when offset >=
// NextOffset. Readers are blocked while the truncated segment is re-indexed
// (a short tail scan).
func (l *Log) Truncate(offset int64) error {
	if l.isClosed() {
		return ErrClosed
	}
	if offset < 0 {
		return fmt.Errorf("truncate to negative offset %d", offset)
	}
	if offset >= l.mu.next {
		return nil
	}
	if offset < l.mu.segs[0].base {
		return l.truncateFullyAndStartAt(offset)
	}
	startMoved := offset < l.mu.start
	if startMoved {
		// Kafka lowers the log start to the truncation point; persist it
		// first so a reopen does not find start > end.
		if err := l.persistStart(offset); err != nil {
			return err
		}
	}
	l.mu.Lock()
	i := l.segmentFor(offset)
	removed := slices.Clone(l.mu.segs[i+1:])
	s := l.mu.segs[i]
	l.mu.segs = l.mu.segs[: i+1 : i+1]
	l.mu.gen++
	err := l.truncateSegment(s, offset)
	l.mu.size = 0
	for _, seg := range l.mu.segs {
		l.mu.size += seg.size
	}
	l.mu.next = offset
	l.mu.start = min(l.mu.start, offset)
	before := l.mu.epochs
	l.clampState()
	epochs := l.mu.epochs
	l.mu.Unlock()
	err = errors.Join(err, l.removeSegments(removed))
	if !slices.Equal(before, epochs) {
		err = errors.Join(err, l.persistEpochs(epochs))
	}
	if err != nil {
		return fmt.Errorf("truncating to %d: %w", offset, err)
	}
	return nil
}

// truncateSegment cuts s at the batch containing offset and makes it the
// active segment again (owner, mu held for writing).
func (l *Log) truncateSegment(s *segment, offset int64) error {
	if err := s.flushIndexes(); err != nil {
		return err
	}
	v := s.view()
	h, cut, found, err := v.locate(offset)
	if err != nil {
		return err
	}
	cutBase := h.BaseOffset // first offset removed from this segment
	if !found {
		cut, cutBase = s.size, offset
	}
	if err := s.log.Truncate(cut); err != nil {
		return fmt.Errorf("truncating segment %d: %w", s.base, err)
	}
	s.needsSync.Store(true)
	// Drop index entries that point at or past the cut, then reload the
	// segment state from what remains (a tail scan).
	if err := truncateIndexFile(&s.off, func(e idxEntry) bool { return int64(e.pos) < cut }); err != nil {
		return err
	}
	if err := truncateIndexFile(&s.tim, func(e timeEntry) bool { return s.base+int64(e.rel) < cutBase }); err != nil {
		return err
	}
	if err := s.quickLoad(cut, true, l.nowMs(), int64(l.mu.opts.IndexIntervalBytes)); err != nil {
		// Fall back to a full rebuild of this one segment.
		l.logger.Warn("reindexing truncated segment", "segment", s.base, "err", err)
		return l.rebuild(s, cut, true)
	}
	return nil
}

// truncateIndexFile keeps the (sorted) prefix of entries satisfying keep.
func truncateIndexFile[E any](t *tailIndex[E], keep func(E) bool) error {
	v := t.view()
	lo, hi := int64(0), v.flushed
	for lo < hi {
		mid := (lo + hi) / 2
		e, _, err := t.fileEntry(mid)
		if err != nil {
			return err
		}
		if keep(e) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if err := t.f.Truncate(lo * int64(t.c.size)); err != nil {
		return fmt.Errorf("truncating index %s: %w", t.f.Name(), err)
	}
	t.mem, t.flushed, t.total = nil, lo, lo
	return nil
}

// largestTimestamp is the segment's max record timestamp, or, like Kafka,
// the file's modification time when its records carry no timestamps (-1).
func (l *Log) largestTimestamp(s *segment) int64 {
	if s.maxTS >= 0 {
		return s.maxTS
	}
	fi, err := s.log.Stat()
	if err != nil {
		l.logger.Warn("stat for retention failed", "segment", s.base, "err", err)
		return math.MaxInt64 // keep it rather than delete on a guess
	}
	return fi.ModTime().UnixMilli()
}
