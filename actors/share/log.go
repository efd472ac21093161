package share

// Reading a partition for a share-partition: the adapter from the
// partition actor's read side, and the batch headers an acquisition needs.

import (
	"encoding/binary"

	"github.com/regent-broker/regent/actors/partition"
)

type partitionLog struct{ p *partition.Partition }

// FromPartition adapts a partition to Log: the plain Fetch's read path
// (Read never passes the high watermark) and one ReadView for the bounds.
func FromPartition(p *partition.Partition) Log { return partitionLog{p} }

func (l partitionLog) Read(offset int64, maxBytes int) ([]byte, error) {
	return l.p.Read(offset, maxBytes, false)
}

func (l partitionLog) Bounds(from int64) (int64, int64, int64, []AbortedTxn) {
	v := l.p.View()
	start := l.p.LogStartOffset()
	var out []AbortedTxn
	if from < v.LastStable {
		for _, a := range v.AbortedIn(from, v.LastStable) {
			out = append(out, AbortedTxn(a))
		}
	}
	return start, v.HighWatermark, v.LastStable, out
}

func (l partitionLog) OffsetForTimestamp(ts int64) (int64, bool, error) {
	off, _, found, err := l.p.Log().OffsetForTimestamp(ts)
	return off, found, err
}

// Record batch v2 header fields used here (offsets in the batch).
const (
	batchHeaderLen   = 61
	attrTransaction  = 0x10
	attrControl      = 0x20
	offLength        = 8
	offMagic         = 16
	offAttributes    = 21
	offLastDelta     = 23
	offProducerID    = 43
	batchLengthExtra = 12 // baseOffset and length precede the counted bytes
)

// storedBatch is one batch in a read buffer.
type storedBatch struct {
	Batch
	start, end    int // bytes in the buffer
	producerID    int64
	transactional bool
}

// parseBatches splits a read into its batches; a cut or unreadable tail
// ends the list (the next read starts there again).
func parseBatches(buf []byte) []storedBatch {
	var out []storedBatch
	for pos := 0; len(buf)-pos >= batchHeaderLen; {
		b := buf[pos:]
		size := int(int32(binary.BigEndian.Uint32(b[offLength:]))) + batchLengthExtra
		if size < batchHeaderLen || size > len(b) || b[offMagic] != 2 {
			break
		}
		base := int64(binary.BigEndian.Uint64(b))
		attrs := binary.BigEndian.Uint16(b[offAttributes:])
		last := base + int64(int32(binary.BigEndian.Uint32(b[offLastDelta:])))
		out = append(out, storedBatch{
			Batch:         Batch{Base: base, Last: last, Control: attrs&attrControl != 0},
			start:         pos,
			end:           pos + size,
			producerID:    int64(binary.BigEndian.Uint64(b[offProducerID:])),
			transactional: attrs&attrTransaction != 0,
		})
		pos += size
	}
	return out
}

// markAborted sets Aborted on the transactional batches of aborted
// transactions (read_committed): those of the producer from its
// transaction's first offset up to its ABORT marker.
func markAborted(bs []storedBatch, aborted []AbortedTxn) {
	for i := range bs {
		b := &bs[i]
		if !b.transactional || b.Control {
			continue
		}
		for _, a := range aborted {
			if a.ProducerID == b.producerID && a.FirstOffset <= b.Base && b.Base <= a.LastOffset {
				b.Aborted = true
				break
			}
		}
	}
}
