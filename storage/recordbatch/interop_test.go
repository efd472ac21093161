package recordbatch

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kmsgRecords encodes recs the way franz-go does, independently of this
// package's encoder.
func kmsgRecords(recs []Record) []byte {
	var raw []byte
	for _, r := range recs {
		kr := kmsg.Record{TimestampDelta64: r.TimestampDelta, OffsetDelta: r.OffsetDelta}
		if !r.KeyNull {
			kr.Key = append([]byte{}, r.Key...) // non-nil: kmsg writes nil as null
		}
		if !r.ValueNull {
			kr.Value = append([]byte{}, r.Value...)
		}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
		}
		body := kr.AppendTo(nil)
		// AppendTo writes the Length field as given; fix it up.
		_, n := binary.Varint(body)
		kr.Length = int32(len(body) - n)
		raw = kr.AppendTo(raw)
	}
	return raw
}

// Batches framed and compressed by franz-go must be accepted by Validate and
// decoded by Records (this also covers raw, unframed snappy, which franz-go's
// compressor emits).
func TestFranzGoBatchesAccepted(t *testing.T) {
	for _, codec := range codecs {
		t.Run(fmt.Sprint(codec), func(t *testing.T) {
			recs := sampleRecords(300)
			payload := kmsgRecords(recs)
			if codec != CodecNone {
				comp, err := kgo.DefaultCompressor(kgoCodec(codec))
				if err != nil {
					t.Fatal(err)
				}
				var used kgo.CompressionCodecType
				payload, used = comp.Compress(new(bytes.Buffer), payload)
				if int8(used) != codec {
					t.Fatalf("kgo used codec %d", used)
				}
			}
			kb := kmsg.RecordBatch{
				FirstOffset: 10, PartitionLeaderEpoch: 2, Magic: 2, Attributes: int16(codec),
				LastOffsetDelta: int32(len(recs) - 1), FirstTimestamp: 1000, MaxTimestamp: 5000,
				ProducerID: 7, ProducerEpoch: 1, FirstSequence: 0, NumRecords: int32(len(recs)),
				Records: append([]byte{}, payload...),
			}
			b := kb.AppendTo(nil)
			binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
			binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
			h, err := Validate(b)
			if err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if h.BaseOffset != 10 || h.ProducerID != 7 || h.NumRecords != 300 || h.Compression() != codec {
				t.Fatalf("header %+v", h)
			}
			got, err := Records(b)
			if err != nil {
				t.Fatalf("Records: %v", err)
			}
			equalRecords(t, got, recs)
		})
	}
}

// Batches built here must parse with franz-go's decoder and decompressor.
func TestBuiltBatchesReadByFranzGo(t *testing.T) {
	dec := kgo.DefaultDecompressor()
	for _, codec := range codecs {
		recs := sampleRecords(100)
		b := mustBuild(t, sampleHeader(codec), recs)
		var kb kmsg.RecordBatch
		if err := kb.ReadFrom(b); err != nil {
			t.Fatalf("codec %d: kmsg ReadFrom: %v", codec, err)
		}
		if uint32(kb.CRC) != crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)) {
			t.Fatalf("codec %d: CRC mismatch per franz-go", codec)
		}
		raw, err := dec.Decompress(kb.Records, kgo.CompressionCodecType(codec))
		if err != nil {
			t.Fatalf("codec %d: kgo decompress: %v", codec, err)
		}
		for i := range recs {
			var kr kmsg.Record
			if err := kr.ReadFrom(raw); err != nil {
				t.Fatalf("codec %d record %d: %v", codec, i, err)
			}
			if kr.OffsetDelta != recs[i].OffsetDelta || !bytes.Equal(kr.Value, recs[i].Value) ||
				(kr.Key == nil) != recs[i].KeyNull || len(kr.Headers) != len(recs[i].Headers) {
				t.Fatalf("codec %d record %d: %+v vs %+v", codec, i, kr, recs[i])
			}
			_, n := binary.Varint(raw)
			raw = raw[n+int(kr.Length):]
		}
		if len(raw) != 0 {
			t.Fatalf("codec %d: %d trailing bytes", codec, len(raw))
		}
	}
}

func kgoCodec(c int8) kgo.CompressionCodec {
	switch c {
	case CodecGzip:
		return kgo.GzipCompression()
	case CodecSnappy:
		return kgo.SnappyCompression()
	case CodecLz4:
		return kgo.Lz4Compression()
	case CodecZstd:
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}
