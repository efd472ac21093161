package storage

import (
	"errors"
	"fmt"

	"github.com/regent-broker/regent/storage/recordbatch"
)

// Append writes one v2 batch at the log end (owner), with roll decisions
// (segment.ms) taken on the log's own clock, Options.Now. See AppendAt.
func (l *Log) Append(batch []byte) (baseOffset, lastOffset int64, err error) {
	return l.AppendAt(batch, l.opts().Now().UnixMilli())
}

// AppendAt writes one v2 batch at the log end (owner). The batch must
// already be validated and have its leader epoch / LogAppendTime patched;
// AppendAt sets its base offset in place to NextOffset. The write is a
// single pwrite(2) into the page cache, without fsync (see Sync).
//
// nowMs is the time the segment.ms roll check compares against, instead of
// the log's clock: a replicated partition passes the proposer's clock from
// the command, so that every node applying the same commands rolls at the
// same offsets whatever its own clock says.
func (l *Log) AppendAt(batch []byte, nowMs int64) (baseOffset, lastOffset int64, err error) {
	return l.appendOne(nil, batch, nowMs)
}

// AppendPatchedAt is AppendAt for a batch that must not be written to:
// head is a patched copy of its first recordbatch.HeaderSize bytes (leader
// epoch, LogAppendTime), and the log writes head followed by the rest of
// batch, setting the base offset in head. A replicated partition appends
// this way from the raft entry itself, which replication may still be
// reading, instead of from a copy of it.
func (l *Log) AppendPatchedAt(head, batch []byte, nowMs int64) (baseOffset, lastOffset int64, err error) {
	if len(head) != recordbatch.HeaderSize {
		return -1, -1, fmt.Errorf("append patched batch: head of %d bytes, want %d", len(head), recordbatch.HeaderSize)
	}
	return l.appendOne(head, batch, nowMs)
}

func (l *Log) appendOne(head, batch []byte, nowMs int64) (baseOffset, lastOffset int64, err error) {
	var heads [][]byte
	if head != nil {
		heads = [][]byte{head}
	}
	firsts, err := l.appendMany([][]byte{batch}, heads, nowMs)
	if len(firsts) == 0 {
		return -1, -1, err
	}
	h, _ := recordbatch.ParseHeader(batch)
	return firsts[0], firsts[0] + int64(h.LastOffsetDelta), err
}

// maxRunBytes caps how much AppendManyAt gathers into one write, bounding
// the temporary copy.
const maxRunBytes = 4 << 20

// AppendMany is AppendManyAt on the log's own clock, Options.Now.
func (l *Log) AppendMany(batches [][]byte) (firsts []int64, err error) {
	return l.AppendManyAt(batches, l.opts().Now().UnixMilli())
}

// AppendManyAt appends batches in order, writing each run of batches that
// lands in one segment with a single pwrite(2) or pwritev(2). It returns the base offset
// assigned to each batch written; on error, firsts covers the batches that
// were written before the failure. nowMs is the roll check's time, as for
// AppendAt: a roll depends only on the bytes appended and nowMs.
func (l *Log) AppendManyAt(batches [][]byte, nowMs int64) (firsts []int64, err error) {
	return l.appendMany(batches, nil, nowMs)
}

// appendMany is AppendManyAt where heads, if not nil, holds for each batch
// nil or a patched copy of its header, written (and given its base
// offset) in place of the batch's own (AppendPatchedAt).
func (l *Log) appendMany(batches, heads [][]byte, nowMs int64) (firsts []int64, err error) {
	hs := make([]recordbatch.Header, len(batches))
	for i, b := range batches {
		h, err := recordbatch.ParseHeader(headOf(batches, heads, i))
		if err == nil && h.TotalSize() != len(b) {
			err = fmt.Errorf("%w: header says %d bytes, have %d", recordbatch.ErrBadLength, h.TotalSize(), len(b))
		}
		if err != nil {
			return nil, fmt.Errorf("append batch %d: %w", i, err)
		}
		hs[i] = h
	}
	if l.isClosed() {
		return nil, ErrClosed
	}
	if err := CurrentReserve().appendsRefused(); err != nil {
		return nil, err
	}
	opts := l.opts()
	firsts = make([]int64, 0, len(batches))
	for i := 0; i < len(batches); {
		// Owner-only reads of fields it alone writes need no lock.
		seg := l.active()
		next := l.mu.next
		if l.shouldRoll(seg, hs[i], next, nowMs, opts) {
			if err := l.roll(); err != nil {
				return firsts, err
			}
			continue
		}
		// Gather the run of batches that fit this segment without a roll.
		j, size := i, seg.size
		for j < len(batches) {
			if j > i && (size+int64(len(batches[j])) > opts.SegmentBytes ||
				size+int64(len(batches[j]))-seg.size > maxRunBytes ||
				next+int64(hs[j].LastOffsetDelta)-seg.base > maxRelOffset) {
				break
			}
			hs[j].BaseOffset = next
			recordbatch.SetBaseOffset(headOf(batches, heads, j), next)
			next = hs[j].LastOffset() + 1
			size += int64(len(batches[j]))
			j++
		}
		var runHeads [][]byte
		if heads != nil {
			runHeads = heads[i:j]
		}
		if err := l.writeRun(seg, batches[i:j], runHeads, hs[i:j], size, opts, nowMs); err != nil {
			return firsts, err
		}
		for k := i; k < j; k++ {
			firsts = append(firsts, hs[k].BaseOffset)
		}
		i = j
	}
	return firsts, nil
}

// shouldRoll reports whether the batch must go into a new segment. An empty
// segment always accepts one batch (even one larger than SegmentBytes).
func (l *Log) shouldRoll(seg *segment, h recordbatch.Header, next, nowMs int64, opts Options) bool {
	if seg.size == 0 {
		return next+int64(h.LastOffsetDelta)-seg.base > maxRelOffset && next != seg.base
	}
	return seg.size+int64(h.TotalSize()) > opts.SegmentBytes ||
		segmentAged(seg, h, nowMs, opts.rollMs()) ||
		next+int64(h.LastOffsetDelta)-seg.base > maxRelOffset
}

// segmentAged is segment.ms's test, Kafka's rule: the segment's age is the
// incoming batch's max timestamp minus the segment's first batch's, the
// records alone deciding, so that every node, and one that reopened the
// segment since, rolls at the same offset. Without timestamps it is the
// time since the segment's first append, on nowMs (the command's clock
// when replicated; a reopened segment's start is then a guess).
func segmentAged(seg *segment, h recordbatch.Header, nowMs, rollMs int64) bool {
	if seg.firstTS >= 0 && h.MaxTimestamp >= 0 {
		return h.MaxTimestamp-seg.firstTS >= rollMs
	}
	return seg.rollStartMs >= 0 && nowMs-seg.rollStartMs >= rollMs
}

// writeRun writes batches contiguously at the end of seg and publishes them;
// end is where they end (seg.size plus their lengths, which the caller summed).
func (l *Log) writeRun(seg *segment, batches, heads [][]byte, hs []recordbatch.Header, end int64, opts Options, nowMs int64) error {
	pos := seg.size
	if !opts.NoReserve {
		seg.reserve(end, opts.SegmentBytes)
	}
	if err := writeAll(seg, batches, heads, pos); err != nil {
		// Drop any partial write so the next append starts clean; if even
		// that fails, recovery truncates the torn tail on restart.
		if terr := seg.log.Truncate(pos); terr != nil {
			err = errors.Join(err, fmt.Errorf("undoing partial write: %w", terr))
		}
		return fmt.Errorf("appending to segment %d: %w", seg.base, err)
	}
	seg.needsSync.Store(true)
	if seg.rollStartMs < 0 {
		seg.rollStartMs = nowMs
	}
	interval := int64(opts.IndexIntervalBytes)
	l.mu.Lock()
	for k, b := range batches {
		if err := seg.noteBatch(hs[k], pos, interval); err != nil {
			// The index only speeds lookups up; a lost entry costs a
			// longer scan, never a wrong answer.
			l.logger.Warn("index write failed", "segment", seg.base, "err", err)
		}
		pos += int64(len(b))
		l.mu.size += int64(len(b))
	}
	l.mu.next = hs[len(hs)-1].LastOffset() + 1
	l.mu.Unlock()
	if l.files.DropBehind() {
		seg.dropBehind(pos)
	} else if l.files.writeBehind.Load() {
		seg.writeBehind(pos)
	}
	return nil
}

// headOf is the bytes batch i's header is read from and patched in: its
// patched copy if heads has one, else the batch itself.
func headOf(batches, heads [][]byte, i int) []byte {
	if heads != nil && heads[i] != nil {
		return heads[i]
	}
	return batches[i]
}

// writeAll writes batches contiguously at off, each with its patched
// header from heads if it has one: one pwrite(2) for a single whole
// batch, else one pwritev(2) of all the pieces, which are not copied.
func writeAll(seg *segment, batches, heads [][]byte, off int64) error {
	if len(batches) == 1 && (heads == nil || heads[0] == nil) {
		_, err := seg.log.WriteAt(batches[0], off)
		return err
	}
	parts := make([][]byte, 0, 2*len(batches))
	for i, b := range batches {
		if heads != nil && heads[i] != nil {
			parts = append(parts, heads[i], b[recordbatch.HeaderSize:])
			continue
		}
		parts = append(parts, b)
	}
	return seg.log.writevAt(parts, off)
}

// roll seals the active segment and starts a new one at NextOffset (owner).
func (l *Log) roll() error {
	next := l.mu.next
	ns, err := l.createSegment(next)
	if err != nil {
		return fmt.Errorf("rolling segment at %d: %w", next, err)
	}
	old := l.active()
	l.mu.Lock()
	if err := old.seal(); err != nil {
		l.logger.Warn("sealing segment index failed", "segment", old.base, "err", err)
	}
	l.mu.segs = append(l.mu.segs, ns)
	l.mu.Unlock()
	if err := old.releaseReserved(); err != nil {
		// Only space: the blocks go when the segment is deleted.
		l.logger.Warn("releasing a rolled segment's reserved blocks failed", "segment", old.base, "err", err)
	}
	return nil
}

func (l *Log) isClosed() bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.closed
}
