package storage

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/regent-broker/regent/storage/recordbatch"
)

// load builds the in-memory state from dir (Open only; nothing runs
// concurrently yet).
func (l *Log) load() error {
	bases, forceRebuild, err := prepareDir(l.dir)
	if err != nil {
		return err
	}
	start, err := readOffsetCheckpoint(l.dir, startOffsetFile)
	if err != nil {
		l.logger.Warn("ignoring unreadable log start checkpoint", "err", err)
		start = -1
	}
	markerPath := join(l.dir, cleanShutdownFile)
	clean := fileExists(markerPath)
	if clean {
		// Remove it before any append so a later crash is never mistaken
		// for a clean shutdown.
		if err := os.Remove(markerPath); err != nil {
			return fmt.Errorf("removing clean-shutdown marker: %w", err)
		}
	}

	prevEnd := int64(0)
	for i, base := range bases {
		s, err := openSegment(l.files, l.dir, base, false)
		if err != nil {
			return err
		}
		l.mu.segs = append(l.mu.segs, s)
		active := i == len(bases)-1
		if base < prevEnd {
			l.logger.Warn("segment overlaps its predecessor", "segment", base, "previousEnd", prevEnd)
		}
		quick := !forceRebuild[base] && (!active || clean)
		if err := l.loadSegment(s, active, quick); err != nil {
			return err
		}
		prevEnd = s.end
	}
	if len(l.mu.segs) == 0 {
		s, err := l.createSegment(max(start, 0))
		if err != nil {
			return err
		}
		l.mu.segs = []*segment{s}
	}
	for _, s := range l.mu.segs {
		l.mu.size += s.size
	}
	l.mu.next = l.active().end
	l.mu.start = max(start, l.mu.segs[0].base)

	epochs, err := readEpochs(l.dir)
	if err != nil {
		l.logger.Warn("ignoring unreadable leader epoch checkpoint", "err", err)
	}
	l.mu.epochs = epochs
	dirty, err := readOffsetCheckpoint(l.dir, cleanerFile)
	if err != nil {
		l.logger.Warn("ignoring unreadable cleaner checkpoint", "err", err)
	}
	l.mu.firstDirty = dirty

	if l.mu.start > l.mu.next {
		// The tail below the persisted start offset was lost (torn tail
		// after DeleteRecordsBefore): like Kafka, start over at the start.
		l.logger.Warn("log end below log start after recovery; resetting", "start", l.mu.start, "end", l.mu.next)
		return l.truncateFullyAndStartAt(l.mu.start)
	}
	l.clampState()
	return l.persistEpochsIfChanged(epochs)
}

// clampState keeps derived state inside [start, next] after structural
// changes (caller holds mu or is in Open).
func (l *Log) clampState() {
	l.mu.firstDirty = min(max(l.mu.firstDirty, l.mu.start), l.mu.next)
	l.mu.epochs = truncateEpochsFromEnd(l.mu.epochs, l.mu.next)
	l.mu.epochs = truncateEpochsFromStart(l.mu.epochs, l.mu.start)
}

// prepareDir finishes or discards interrupted compaction swaps, removes temp
// files and returns the segment base offsets in order. Segments whose swap
// was completed here must have their indexes rebuilt.
func prepareDir(dir string) ([]int64, map[int64]bool, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("listing log dir: %w", err)
	}
	force := map[int64]bool{}
	var bases []int64
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasSuffix(name, cleanedSuffix), strings.HasSuffix(name, tmpSuffix):
			// Incomplete output: the originals are still in place.
			if err := os.Remove(join(dir, name)); err != nil {
				return nil, nil, fmt.Errorf("removing leftover %s: %w", name, err)
			}
		case strings.HasSuffix(name, logSuffix+swapSuffix):
			// Finished output whose swap was interrupted: complete it.
			base, ok := parseSegmentName(strings.TrimSuffix(name, swapSuffix), logSuffix)
			if !ok {
				continue
			}
			if err := os.Rename(join(dir, name), segmentFile(dir, base, logSuffix)); err != nil {
				return nil, nil, fmt.Errorf("completing swap of %s: %w", name, err)
			}
			force[base] = true
			bases = append(bases, base)
		}
	}
	for _, e := range entries {
		if base, ok := parseSegmentName(e.Name(), logSuffix); ok && !e.IsDir() {
			bases = append(bases, base)
		}
	}
	slices.Sort(bases)
	return slices.Compact(bases), force, nil
}

// loadSegment recovers one segment's in-memory state; quick trusts the index
// files after sanity checks and falls back to a full, validating rebuild.
func (l *Log) loadSegment(s *segment, active, quick bool) error {
	fi, err := s.log.Stat()
	if err != nil {
		return fmt.Errorf("stat segment %d: %w", s.base, err)
	}
	if quick {
		err := s.quickLoad(fi.Size(), active, l.nowMs(), int64(l.mu.opts.IndexIntervalBytes))
		if err == nil {
			return nil
		}
		l.logger.Warn("segment index unusable; rebuilding", "segment", s.base, "err", err)
	}
	return l.rebuild(s, fi.Size(), active)
}

func (l *Log) nowMs() int64 { return l.mu.opts.Now().UnixMilli() }

// quickLoad restores a segment's state from its index files, scanning only
// the batches after the last offset-index entry (a few KiB). It fails, so the
// caller rebuilds, when the files are inconsistent with the log.
//
// A batch after the last entry that starts IndexIntervalBytes or more past
// it would have received an entry, so finding one means entries are missing
// (e.g. a deleted index file) and the index is rebuilt. A changed interval
// setting can trigger one needless rebuild; that is harmless.
func (s *segment) quickLoad(logSize int64, active bool, nowMs, interval int64) error {
	isz, err := fileSize(s.off.f)
	if err != nil {
		return err
	}
	tsz, err := fileSize(s.tim.f)
	if err != nil {
		return err
	}
	if isz%int64(offsetCodec.size) != 0 || tsz%int64(timeCodec.size) != 0 {
		return fmt.Errorf("index sizes %d/%d not whole entries", isz, tsz)
	}
	nOff, nTim := isz/int64(offsetCodec.size), tsz/int64(timeCodec.size)
	s.off.mem, s.off.flushed, s.off.total = nil, nOff, nOff
	s.tim.mem, s.tim.flushed, s.tim.total = nil, nTim, nTim
	s.size, s.end, s.maxTS, s.maxTSOff, s.firstTS = logSize, s.base, -1, -1, -1
	s.lastTimeTS, s.rollStartMs, s.bytesSinceIndex = math.MinInt64, -1, 0

	scanFrom, wantBase := int64(0), int64(-1)
	if e, ok, err := s.off.last(); err != nil {
		return err
	} else if ok {
		if int64(e.pos) >= logSize {
			return fmt.Errorf("last index entry position %d beyond log size %d", e.pos, logSize)
		}
		scanFrom, wantBase = int64(e.pos), s.base+int64(e.rel)
	}
	if e, ok, err := s.tim.last(); err != nil {
		return err
	} else if ok {
		s.maxTS, s.maxTSOff, s.lastTimeTS = e.ts, s.base+int64(e.rel), e.ts
	}
	sc := newHeaderScanner(s.log, scanFrom, logSize)
	for {
		h, pos, err := sc.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if pos == scanFrom && wantBase >= 0 && h.BaseOffset != wantBase {
			return fmt.Errorf("index entry says offset %d at %d, log has %d", wantBase, pos, h.BaseOffset)
		}
		if pos > scanFrom && s.bytesSinceIndex >= interval {
			return fmt.Errorf("index lacks an entry for the batch at %d", pos)
		}
		if h.BaseOffset < max(s.end, s.base) || h.LastOffset()-s.base > maxRelOffset {
			return fmt.Errorf("batch offsets %d..%d out of order at %d", h.BaseOffset, h.LastOffset(), pos)
		}
		if h.MaxTimestamp > s.maxTS || s.maxTSOff < 0 {
			s.maxTS, s.maxTSOff = h.MaxTimestamp, h.BaseOffset
		}
		s.end = h.LastOffset() + 1
		s.bytesSinceIndex += int64(h.TotalSize())
	}
	if logSize > 0 && s.maxTSOff >= s.end {
		return fmt.Errorf("time index points past the data (%d >= %d)", s.maxTSOff, s.end)
	}
	if logSize > 0 {
		h, _, err := newHeaderScanner(s.log, 0, logSize).next()
		if err != nil {
			return err
		}
		s.firstTS = h.MaxTimestamp
		if active {
			s.rollStartMs = rollStart(h, nowMs)
		}
	}
	if !active {
		return nil
	}
	if err := s.off.loadTail(nOff); err != nil {
		return err
	}
	return s.tim.loadTail(nTim)
}

// rebuild re-reads every batch of the segment, validating CRCs, truncates
// the file at the first torn or corrupt batch, and rewrites both indexes.
func (l *Log) rebuild(s *segment, logSize int64, active bool) error {
	if err := s.resetIndex(); err != nil {
		return err
	}
	interval := int64(l.mu.opts.IndexIntervalBytes)
	br := newBatchReader(s.log, logSize)
	for {
		b, pos, err := br.next()
		if err == io.EOF {
			break
		}
		var h recordbatch.Header
		if err == nil {
			h, err = recordbatch.Validate(b)
		}
		if err == nil && (h.BaseOffset < s.end || h.LastOffset()-s.base > maxRelOffset) {
			err = fmt.Errorf("batch offsets %d..%d out of order", h.BaseOffset, h.LastOffset())
		}
		if err != nil {
			l.logger.Warn("truncating segment at invalid batch", "segment", s.base,
				"position", pos, "droppedBytes", logSize-pos, "err", err)
			break
		}
		if pos == 0 {
			s.rollStartMs = rollStart(h, l.nowMs())
		}
		if err := s.noteBatch(h, pos, interval); err != nil {
			return err
		}
	}
	if s.size < logSize {
		if err := s.log.Truncate(s.size); err != nil {
			return fmt.Errorf("truncating segment %d to %d: %w", s.base, s.size, err)
		}
		s.needsSync.Store(true)
	}
	if active {
		return s.flushIndexes()
	}
	return s.seal()
}

// rollStart is when a reopened segment's age counts from: its first batch's
// timestamp, as Kafka does, unless that is implausible.
func rollStart(first recordbatch.Header, nowMs int64) int64 {
	if first.MaxTimestamp < 0 || first.MaxTimestamp > nowMs {
		return nowMs
	}
	return first.MaxTimestamp
}

func fileSize(f *lazyFile) (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("stat %s: %w", f.Name(), err)
	}
	return fi.Size(), nil
}

// truncateFullyAndStartAt drops every segment and starts an empty log at
// off (owner; Open or Truncate below the first segment).
func (l *Log) truncateFullyAndStartAt(off int64) error {
	// The new segment may take an old one's file names, and the old files
	// are unlinked below: readers still on them need their descriptors.
	for _, o := range l.mu.segs {
		pinFiles(l.logger, o)
	}
	s, err := l.createSegment(off)
	if err != nil {
		return err
	}
	l.mu.Lock()
	old := l.mu.segs
	// The new segment may reuse a base of an old one (same file names):
	// createSegment already unlinked those, so exclude it from removal.
	l.mu.segs = []*segment{s}
	l.mu.start, l.mu.next, l.mu.size = off, off, 0
	l.mu.gen++
	l.mu.epochs = nil
	l.mu.firstDirty = off
	l.mu.Unlock()
	var errs []error
	for _, o := range old {
		if o.base != off {
			if err := o.removeFiles(); err != nil {
				errs = append(errs, err)
			}
		}
		o.release()
	}
	errs = append(errs, l.persistStart(off), l.persistEpochs(nil))
	return errors.Join(errs...)
}
