package hostile

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestBatchIsWellFormed checks that the batches the hostile test sends are
// valid but for what they mean to be: correct length and CRC, and records
// that inflate to the size asked for.
func TestBatchIsWellFormed(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec BatchSpec
	}{
		{"none", BatchSpec{Codec: CodecNone, Records: 3, Key: []byte("k"), ValueSize: 100}},
		{"gzip", BatchSpec{Codec: CodecGzip, Records: 8, Key: []byte("k"), ValueSize: 1 << 20}},
		{"zstd", BatchSpec{Codec: CodecZstd, Records: 8, ValueSize: 1 << 20}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Batch(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			var rb kmsg.RecordBatch
			if err := rb.ReadFrom(b); err != nil {
				t.Fatal(err)
			}
			if int(rb.Length) != len(b)-12 {
				t.Fatalf("length %d, batch %d bytes", rb.Length, len(b))
			}
			if want := int32(crc32.Checksum(b[21:], castagnoli)); rb.CRC != want {
				t.Fatalf("crc %x, want %x", rb.CRC, want)
			}
			if rb.NumRecords != int32(tc.spec.Records) || rb.LastOffsetDelta != int32(tc.spec.Records-1) {
				t.Fatalf("records %d, last delta %d", rb.NumRecords, rb.LastOffsetDelta)
			}
			var r io.Reader = bytes.NewReader(rb.Records)
			switch tc.spec.Codec {
			case CodecGzip:
				if r, err = gzip.NewReader(r); err != nil {
					t.Fatal(err)
				}
			case CodecZstd:
				zr, err := zstd.NewReader(r)
				if err != nil {
					t.Fatal(err)
				}
				defer zr.Close()
				r = zr
			}
			raw, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < tc.spec.Records; i++ {
				var rec kmsg.Record
				length, n := binary.Varint(raw)
				if n <= 0 || int(length)+n > len(raw) {
					t.Fatalf("record %d: bad length", i)
				}
				if err := rec.ReadFrom(raw[:n+int(length)]); err != nil {
					t.Fatalf("record %d: %v", i, err)
				}
				if rec.OffsetDelta != int32(i) || len(rec.Value) != tc.spec.ValueSize || !bytes.Equal(rec.Key, tc.spec.Key) {
					t.Fatalf("record %d: delta %d, value %d bytes, key %q", i, rec.OffsetDelta, len(rec.Value), rec.Key)
				}
				raw = raw[n+int(length):]
			}
			if len(raw) != 0 {
				t.Fatalf("%d bytes after the records", len(raw))
			}
			t.Logf("%s: %d bytes on the wire, %d bytes of values", tc.name, len(b), tc.spec.Records*tc.spec.ValueSize)
		})
	}
}

// TestLyingBatchIs78Bytes pins the shape the issue reports: 78 bytes on
// the wire, one record present, 1e9 declared.
func TestLyingBatchIs78Bytes(t *testing.T) {
	b, err := Batch(BatchSpec{Codec: CodecNone, Records: 1, Declared: 1e9, ValueSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 78 {
		t.Fatalf("%d bytes", len(b))
	}
	if got := int32(binary.BigEndian.Uint32(b[57:])); got != 1e9 {
		t.Fatalf("declared %d", got)
	}
}
