package storage

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// DeleteRecordsBefore advances the log start offset to offset (DeleteRecords
// API, and retention decided by a replicated partition's leader), persists
// it, and deletes the closed segments wholly below it (owner). offset >
// NextOffset fails with ErrOffsetOutOfRange; offsets at or below the current
// start leave it where it is. When offset is the log end the active segment
// is rolled first, so that its records can go too.
//
// Deterministic: applied at the same point of the same command sequence,
// it leaves every log with the same start and end offsets (and rolls at
// the same offset), whatever segment boundaries each log had before.
func (l *Log) DeleteRecordsBefore(offset int64) error {
	_, err := l.moveStart(offset)
	return err
}

// moveStart is DeleteRecordsBefore, reporting how many segments went.
func (l *Log) moveStart(offset int64) (deletedSegments int, err error) {
	if l.isClosed() {
		return 0, ErrClosed
	}
	if offset > l.mu.next || offset < 0 {
		return 0, fmt.Errorf("%w: delete before %d, log end %d", ErrOffsetOutOfRange, offset, l.mu.next)
	}
	// Like Kafka's retention of an expired active segment: the active
	// segment is never deleted, so roll when it holds only records below
	// the new start. The roll depends only on offset and the log end, the
	// same on every node.
	if offset == l.mu.next && l.active().size > 0 {
		if err := l.roll(); err != nil {
			return 0, err
		}
	}
	var errs []error
	if offset > l.mu.start {
		// Persist first: after a crash the start must not move backwards.
		if err := l.persistStart(offset); err != nil {
			return 0, err
		}
		l.mu.Lock()
		l.mu.start = offset
		before := l.mu.epochs
		l.clampState()
		epochs := l.mu.epochs
		l.mu.Unlock()
		if !slices.Equal(before, epochs) {
			errs = append(errs, l.persistEpochs(epochs))
		}
	}
	// Segments wholly below the start go even when it did not move (one
	// rolled above, or left by an earlier pass that failed to delete).
	start := l.mu.start
	n, err := l.deleteOldest(func(_, next *segment) bool { return next.base <= start })
	return n, errors.Join(append(errs, err)...)
}

// EnforceRetention applies time and size retention on the log's own clock
// (owner): it moves the start to RetentionOffset's answer as
// DeleteRecordsBefore does. Nothing is deleted when Options.DeleteDisabled
// (cleanup.policy=compact).
func (l *Log) EnforceRetention() (deletedSegments int, err error) {
	if l.isClosed() {
		return 0, ErrClosed
	}
	off, ok := l.RetentionOffset(l.opts().Now().UnixMilli())
	if !ok {
		return 0, nil
	}
	return l.moveStart(off)
}

// RetentionOffset is the log start offset that retention.ms (against
// nowMs) and retention.bytes call for, and whether applying it with
// DeleteRecordsBefore would delete anything (owner; it changes nothing).
// A replicated partition's leader evaluates it on its own log and clock
// and proposes the offset, so that every node moves its start to the same
// offset even where its segment boundaries differ.
//
// Like Kafka: segments go oldest first, whole; time retention deletes the
// closed segments whose largest timestamp is older than nowMs-RetentionMs,
// and the active segment too (the answer is then the log end) when every
// segment has expired; size retention then deletes the oldest segments
// while the log stays at or above RetentionBytes, which with
// RetentionBytes == 0 includes the active segment.
func (l *Log) RetentionOffset(nowMs int64) (offset int64, ok bool) {
	opts := l.opts()
	if opts.DeleteDisabled || l.isClosed() {
		return 0, false
	}
	// Owner-only reads of fields it alone writes need no lock.
	segs := l.mu.segs
	last := len(segs) - 1
	n := 0 // the prefix of segs retention deletes; len(segs): all records
	if opts.RetentionMs >= 0 {
		cutoff := nowMs - opts.RetentionMs
		for n < last && l.largestTimestamp(segs[n]) < cutoff {
			n++
		}
		if n == last && segs[last].size > 0 && l.largestTimestamp(segs[last]) < cutoff {
			n = len(segs)
		}
	}
	if opts.RetentionBytes >= 0 && n < len(segs) {
		remaining := l.mu.size
		for _, s := range segs[:n] {
			remaining -= s.size
		}
		excess := remaining - opts.RetentionBytes
		limit := last
		if segs[last].size > 0 && excess >= remaining {
			limit = len(segs)
		}
		for n < limit && excess-segs[n].size >= 0 {
			excess -= segs[n].size
			n++
		}
	}
	if n == 0 {
		return 0, false
	}
	offset = l.mu.next
	if n < len(segs) {
		offset = segs[n].base
	}
	return max(offset, l.mu.start), true
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
	s.reserved = min(s.reserved, cut) // truncate freed the blocks past cut
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
