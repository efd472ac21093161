package recordlog

import (
	"errors"
	"fmt"
)

// Batch is records to write with one write(2) (Log.Write), and optionally
// the applied index they bring the log to. Not safe for concurrent use;
// not reusable after Write.
type Batch struct {
	ly        Layout
	maxLength int
	buf       []byte
	n         int
	// err is the first refused record: Write returns it and writes
	// nothing.
	err        error
	applied    uint64
	hasApplied bool
}

// NewBatch starts a batch for l.
func (l *Log) NewBatch() *Batch {
	return &Batch{ly: l.o.Layout, maxLength: l.o.MaxFrameBytes}
}

// Len is the number of records in the batch.
func (b *Batch) Len() int { return b.n }

// Put adds key's value. In LayoutKey16 an empty value is a tombstone.
func (b *Batch) Put(key, value []byte) { b.add(key, value, false) }

// Delete adds a tombstone for key.
func (b *Batch) Delete(key []byte) { b.add(key, nil, true) }

func (b *Batch) add(key, value []byte, tombstone bool) {
	if b.err != nil {
		return
	}
	if string(key) == appliedKey {
		b.err = errors.New("recordlog: the applied-index key is reserved")
		return
	}
	if err := b.ly.checkKey(key); err != nil {
		b.err = err
		return
	}
	start := len(b.buf)
	b.buf = b.ly.AppendFrame(b.buf, key, value, tombstone)
	if n := len(b.buf) - start - 4; n > b.maxLength {
		b.buf = b.buf[:start]
		b.err = fmt.Errorf("recordlog: record of %d bytes over the %d-byte frame bound", n, b.maxLength)
		return
	}
	b.n++
}

// AppendFrames adds frames already encoded in the log's layout (the
// bytes a replicated command carries, written verbatim so that every
// node's file holds the same bytes). It checks every frame and refuses
// the whole of frames, adding nothing, if one does not read or uses the
// reserved key. The batch keeps a copy.
func (b *Batch) AppendFrames(frames []byte) error {
	if b.err != nil {
		return b.err
	}
	n := 0
	for pos := 0; pos < len(frames); {
		r, size, err := b.ly.ReadFrame(frames[pos:], b.maxLength)
		if err != nil {
			return fmt.Errorf("recordlog: frame %d at byte %d: %w", n, pos, err)
		}
		if string(r.Key) == appliedKey {
			return fmt.Errorf("recordlog: frame %d uses the reserved applied-index key", n)
		}
		pos += size
		n++
	}
	b.buf = append(b.buf, frames...)
	b.n += n
	return nil
}

// SetAppliedIndex makes the batch record idx as the log's applied index,
// written after its records. It must not be below the log's current one.
func (b *Batch) SetAppliedIndex(idx uint64) { b.applied, b.hasApplied = idx, true }
