// Package recordbatch implements the Kafka v2 (magic 2) record-batch format:
// parsing and validating batch headers, patching the fields a broker owns
// (base offset, leader epoch, LogAppendTime), decoding and encoding records,
// and the four compression codecs Kafka supports.
//
// Batch layout (big endian, offsets in bytes):
//
//	 0 baseOffset           int64
//	 8 batchLength          int32  (bytes after this field)
//	12 partitionLeaderEpoch int32
//	16 magic                int8   (2)
//	17 crc                  uint32 (CRC-32C of bytes 21..end)
//	21 attributes           int16
//	23 lastOffsetDelta      int32
//	27 firstTimestamp       int64
//	35 maxTimestamp         int64
//	43 producerId           int64
//	51 producerEpoch        int16
//	53 baseSequence         int32
//	57 numRecords           int32
//	61 records...
package recordbatch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// HeaderSize is the fixed size of a v2 batch header, up to the first record.
const HeaderSize = 61

// Byte offsets of header fields. The CRC covers everything from
// attributesOffset to the end, so baseOffset, length, leader epoch and magic
// can be patched without recomputing it.
const (
	baseOffsetOffset      = 0
	lengthOffset          = 8
	leaderEpochOffset     = 12
	magicOffset           = 16
	crcOffset             = 17
	attributesOffset      = 21
	lastOffsetDeltaOffset = 23
	firstTimestampOffset  = 27
	maxTimestampOffset    = 35
	producerIDOffset      = 43
	producerEpochOffset   = 51
	baseSequenceOffset    = 53
	numRecordsOffset      = 57

	// logOverhead is baseOffset + length: the bytes not counted in Length.
	logOverhead = 12
	// minLength is the smallest legal Length (a header with zero records).
	minLength = HeaderSize - logOverhead
)

// Compression codecs, as stored in attributes bits 0-2.
const (
	CodecNone   int8 = 0
	CodecGzip   int8 = 1
	CodecSnappy int8 = 2
	CodecLz4    int8 = 3
	CodecZstd   int8 = 4
)

// Attribute bits.
const (
	AttrCompressionMask int16 = 0x07
	AttrLogAppendTime   int16 = 0x08
	AttrTransactional   int16 = 0x10
	AttrControl         int16 = 0x20
	// AttrDeleteHorizon (KIP-534) marks that FirstTimestamp holds the time
	// after which the cleaner may drop this batch's tombstones and markers.
	AttrDeleteHorizon int16 = 0x40
)

// Errors returned by the parsing functions; wrapped with context.
var (
	ErrTruncated = errors.New("recordbatch: truncated batch")
	ErrBadMagic  = errors.New("recordbatch: unsupported magic")
	ErrBadLength = errors.New("recordbatch: invalid batch length")
	ErrBadCRC    = errors.New("recordbatch: CRC mismatch")
	ErrCorrupt   = errors.New("recordbatch: corrupt batch")
	ErrBadCodec  = errors.New("recordbatch: unknown compression codec")
	ErrTooLarge  = errors.New("recordbatch: decompressed size exceeds limit")
)

// Header is a decoded v2 batch header.
type Header struct {
	BaseOffset           int64
	Length               int32
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	FirstTimestamp       int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	NumRecords           int32
}

// Compression returns the codec: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.
func (h Header) Compression() int8 { return int8(h.Attributes & AttrCompressionMask) }

// TimestampType returns 0 for CreateTime and 1 for LogAppendTime.
func (h Header) TimestampType() int8 {
	if h.Attributes&AttrLogAppendTime != 0 {
		return 1
	}
	return 0
}

// IsTransactional reports attribute bit 4.
func (h Header) IsTransactional() bool { return h.Attributes&AttrTransactional != 0 }

// IsControl reports attribute bit 5 (transaction markers).
func (h Header) IsControl() bool { return h.Attributes&AttrControl != 0 }

// HasDeleteHorizon reports attribute bit 6; when set, FirstTimestamp is the
// delete horizon set by a previous compaction pass (record timestamps are
// still FirstTimestamp + TimestampDelta).
func (h Header) HasDeleteHorizon() bool { return h.Attributes&AttrDeleteHorizon != 0 }

// LastOffset is the offset of the last offset slot of the batch.
func (h Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// TotalSize is the size of the whole batch on the wire.
func (h Header) TotalSize() int { return logOverhead + int(h.Length) }

// ParseHeader decodes the header at the start of b. It checks only what the
// header itself can tell: magic 2 and a Length large enough for a header.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("%w: %d bytes, header needs %d", ErrTruncated, len(b), HeaderSize)
	}
	be := binary.BigEndian
	h := Header{
		BaseOffset:           int64(be.Uint64(b[baseOffsetOffset:])),
		Length:               int32(be.Uint32(b[lengthOffset:])),
		PartitionLeaderEpoch: int32(be.Uint32(b[leaderEpochOffset:])),
		Magic:                int8(b[magicOffset]),
		CRC:                  be.Uint32(b[crcOffset:]),
		Attributes:           int16(be.Uint16(b[attributesOffset:])),
		LastOffsetDelta:      int32(be.Uint32(b[lastOffsetDeltaOffset:])),
		FirstTimestamp:       int64(be.Uint64(b[firstTimestampOffset:])),
		MaxTimestamp:         int64(be.Uint64(b[maxTimestampOffset:])),
		ProducerID:           int64(be.Uint64(b[producerIDOffset:])),
		ProducerEpoch:        int16(be.Uint16(b[producerEpochOffset:])),
		BaseSequence:         int32(be.Uint32(b[baseSequenceOffset:])),
		NumRecords:           int32(be.Uint32(b[numRecordsOffset:])),
	}
	if h.Magic != 2 {
		return h, fmt.Errorf("%w: %d", ErrBadMagic, h.Magic)
	}
	if h.Length < minLength {
		return h, fmt.Errorf("%w: %d < %d", ErrBadLength, h.Length, minLength)
	}
	return h, nil
}

// putHeader writes h into b[:HeaderSize] without touching the CRC rule;
// callers compute the CRC afterwards.
func putHeader(b []byte, h Header) {
	be := binary.BigEndian
	be.PutUint64(b[baseOffsetOffset:], uint64(h.BaseOffset))
	be.PutUint32(b[lengthOffset:], uint32(h.Length))
	be.PutUint32(b[leaderEpochOffset:], uint32(h.PartitionLeaderEpoch))
	b[magicOffset] = byte(h.Magic)
	be.PutUint32(b[crcOffset:], h.CRC)
	be.PutUint16(b[attributesOffset:], uint16(h.Attributes))
	be.PutUint32(b[lastOffsetDeltaOffset:], uint32(h.LastOffsetDelta))
	be.PutUint64(b[firstTimestampOffset:], uint64(h.FirstTimestamp))
	be.PutUint64(b[maxTimestampOffset:], uint64(h.MaxTimestamp))
	be.PutUint64(b[producerIDOffset:], uint64(h.ProducerID))
	be.PutUint16(b[producerEpochOffset:], uint16(h.ProducerEpoch))
	be.PutUint32(b[baseSequenceOffset:], uint32(h.BaseSequence))
	be.PutUint32(b[numRecordsOffset:], uint32(h.NumRecords))
}

// SetBaseOffset patches the base offset in place. The field is outside the
// CRC, so the batch stays valid.
func SetBaseOffset(b []byte, off int64) {
	binary.BigEndian.PutUint64(b[baseOffsetOffset:], uint64(off))
}

// SetPartitionLeaderEpoch patches the leader epoch in place (outside the CRC).
func SetPartitionLeaderEpoch(b []byte, e int32) {
	binary.BigEndian.PutUint32(b[leaderEpochOffset:], uint32(e))
}

// SetLogAppendTimeHead is SetLogAppendTime on head, a copy of batch's
// first HeaderSize bytes: it patches head alone, with the CRC computed
// over head and the rest of batch, which is not written to.
func SetLogAppendTimeHead(head, batch []byte, ts int64) {
	be := binary.BigEndian
	attrs := be.Uint16(head[attributesOffset:]) | uint16(AttrLogAppendTime)
	be.PutUint16(head[attributesOffset:], attrs)
	be.PutUint64(head[maxTimestampOffset:], uint64(ts))
	crc := crc32.Update(crc32.Checksum(head[attributesOffset:HeaderSize], castagnoli), castagnoli, batch[HeaderSize:])
	be.PutUint32(head[crcOffset:], crc)
}

// SetLogAppendTime converts a batch to LogAppendTime the way Kafka's
// DefaultRecordBatch.setMaxTimestamp does: it sets the timestamp-type bit and
// MaxTimestamp = ts, leaves FirstTimestamp and the record deltas untouched
// (readers report MaxTimestamp for every record of such a batch), and
// recomputes the CRC in place. b must be one whole batch.
func SetLogAppendTime(b []byte, ts int64) {
	SetLogAppendTimeHead(b[:HeaderSize], b, ts)
}
