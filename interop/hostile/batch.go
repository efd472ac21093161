// Package hostile builds the inputs of the hostile-client test: raw Kafka
// frames, record batches that lie or inflate, connections that never read,
// never finish or never speak, and a watch on the broker's resident memory.
// Everything here talks only to the address it is given (loopback in tests)
// and is bounded by its caller's counts and deadlines.
package hostile

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// Compression codecs as the batch attributes name them.
const (
	CodecNone int8 = 0
	CodecGzip int8 = 1
	CodecZstd int8 = 4
)

// batchHeaderLen is the size of a magic-2 batch header: base offset (8),
// length (4), leader epoch (4), magic (1), crc (4), attributes (2), last
// offset delta (4), first and max timestamp (8+8), producer id (8),
// producer epoch (2), base sequence (4), record count (4).
const batchHeaderLen = 61

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// BatchSpec describes a magic-2 record batch of identical records whose
// values are zero bytes (so they compress to almost nothing).
type BatchSpec struct {
	Codec     int8
	Records   int    // records actually encoded
	Declared  int32  // record count written in the header; 0: Records
	Key       []byte // nil: null key (a compacted topic refuses those)
	ValueSize int    // bytes of zeros in each value
}

// Batch encodes the spec. The header's CRC-32C is correct, so a broker can
// only refuse the batch by looking at what the records say or how much they
// inflate to. The records are streamed into the compressor, so a batch
// inflating to hundreds of MiB costs its compressed size in memory here.
func Batch(spec BatchSpec) ([]byte, error) {
	declared := spec.Declared
	if declared == 0 {
		declared = int32(spec.Records)
	}
	var body bytes.Buffer
	var w io.Writer = &body
	var closer io.Closer
	switch spec.Codec {
	case CodecNone:
	case CodecGzip:
		gw, err := gzip.NewWriterLevel(&body, gzip.BestCompression)
		if err != nil {
			return nil, fmt.Errorf("gzip writer: %w", err)
		}
		w, closer = gw, gw
	case CodecZstd:
		zw, err := zstd.NewWriter(&body, zstd.WithEncoderConcurrency(1))
		if err != nil {
			return nil, fmt.Errorf("zstd writer: %w", err)
		}
		w, closer = zw, zw
	default:
		return nil, fmt.Errorf("codec %d not built here", spec.Codec)
	}
	zeros := make([]byte, min(spec.ValueSize, 1<<20))
	for i := 0; i < spec.Records; i++ {
		if err := writeRecord(w, int32(i), spec.Key, spec.ValueSize, zeros); err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
	}
	if closer != nil {
		if err := closer.Close(); err != nil {
			return nil, fmt.Errorf("close compressor: %w", err)
		}
	}

	now := time.Now().UnixMilli()
	b := make([]byte, 0, batchHeaderLen+body.Len())
	b = binary.BigEndian.AppendUint64(b, 0)                  // base offset
	b = binary.BigEndian.AppendUint32(b, 0)                  // length, patched below
	b = binary.BigEndian.AppendUint32(b, 0xFFFFFFFF)         // leader epoch -1
	b = append(b, 2)                                         // magic
	b = binary.BigEndian.AppendUint32(b, 0)                  // crc, patched below
	b = binary.BigEndian.AppendUint16(b, uint16(spec.Codec)) // attributes
	b = binary.BigEndian.AppendUint32(b, uint32(declared-1)) // last offset delta
	b = binary.BigEndian.AppendUint64(b, uint64(now))        // first timestamp
	b = binary.BigEndian.AppendUint64(b, uint64(now))        // max timestamp
	b = binary.BigEndian.AppendUint64(b, 0xFFFFFFFFFFFFFFFF) // producer id -1
	b = binary.BigEndian.AppendUint16(b, 0xFFFF)             // producer epoch -1
	b = binary.BigEndian.AppendUint32(b, 0xFFFFFFFF)         // base sequence -1
	b = binary.BigEndian.AppendUint32(b, uint32(declared))   // record count
	b = append(b, body.Bytes()...)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
	return b, nil
}

// writeRecord writes one magic-2 record: length, attributes, timestamp
// delta, offset delta, key, value of valueSize zeros, no headers.
func writeRecord(w io.Writer, offsetDelta int32, key []byte, valueSize int, zeros []byte) error {
	var head []byte
	head = append(head, 0)              // attributes
	head = binary.AppendVarint(head, 0) // timestamp delta
	head = binary.AppendVarint(head, int64(offsetDelta))
	if key == nil {
		head = binary.AppendVarint(head, -1)
	} else {
		head = binary.AppendVarint(head, int64(len(key)))
		head = append(head, key...)
	}
	head = binary.AppendVarint(head, int64(valueSize))
	length := len(head) + valueSize + 1 // + the headers count
	out := binary.AppendVarint(nil, int64(length))
	out = append(out, head...)
	if _, err := w.Write(out); err != nil {
		return err
	}
	for left := valueSize; left > 0; {
		n := min(left, len(zeros))
		if _, err := w.Write(zeros[:n]); err != nil {
			return err
		}
		left -= n
	}
	_, err := w.Write(binary.AppendVarint(nil, 0)) // no headers
	return err
}
