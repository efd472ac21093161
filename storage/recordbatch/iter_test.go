package recordbatch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/pierrec/lz4/v4"
)

// forge builds a batch around an arbitrary (possibly lying) records section:
// raw is compressed with codec as given, the header says what the caller
// says, and the CRC is right, so only content checks can catch the lie.
func forge(t testing.TB, codec int8, numRecords, lastOffsetDelta int32, section []byte) []byte {
	t.Helper()
	h := sampleHeader(codec)
	h.Magic = 2
	h.NumRecords, h.LastOffsetDelta = numRecords, lastOffsetDelta
	b := make([]byte, HeaderSize, HeaderSize+len(section))
	b = append(b, section...)
	h.Length = int32(len(b) - logOverhead)
	putHeader(b, h)
	binary.BigEndian.PutUint32(b[crcOffset:], checksum(b))
	return b
}

func rawRecords(recs []Record) []byte {
	var raw []byte
	for i := range recs {
		raw = AppendRecord(raw, &recs[i])
	}
	return raw
}

func compressed(t testing.TB, codec int8, raw []byte) []byte {
	t.Helper()
	c, err := Compress(codec, raw)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestEachMatchesRecords(t *testing.T) {
	for _, codec := range codecs {
		for _, n := range []int{1, 7, 300} {
			b := mustBuild(t, sampleHeader(codec), sampleRecords(n))
			want, err := Records(b)
			if err != nil {
				t.Fatal(err)
			}
			var got []Record
			err = Each(b, IterOptions{}, func(_ int32, r *Record) error {
				c := *r
				c.Key, c.Value = bytes.Clone(r.Key), bytes.Clone(r.Value)
				c.Headers = nil
				for _, h := range r.Headers {
					c.Headers = append(c.Headers, RecordHeader{Key: h.Key, Value: bytes.Clone(h.Value)})
				}
				got = append(got, c)
				return nil
			})
			if err != nil {
				t.Fatalf("codec %d n %d: %v", codec, n, err)
			}
			equalRecords(t, got, want)
			if err := ValidateProduce(b, ProduceOptions{MaxDecompressedBytes: DecompressLimit(1 << 20)}); err != nil {
				t.Fatalf("codec %d n %d: good batch refused: %v", codec, n, err)
			}
		}
	}
}

func TestValidateProduceRefusesLies(t *testing.T) {
	one := rawRecords(sampleRecords(1))
	four := rawRecords(sampleRecords(4))
	gap := rawRecords([]Record{{OffsetDelta: 0, Key: []byte("a")}, {OffsetDelta: 2, Key: []byte("b")}})
	backwards := rawRecords([]Record{{OffsetDelta: 1, Key: []byte("a")}, {OffsetDelta: 0, Key: []byte("b")}})
	cases := []struct {
		name      string
		numRecs   int32
		lastDelta int32
		raw       []byte
		recordErr bool // a *RecordError is expected
	}{
		{"claims 1e9 records", 1_000_000_000, 999_999_999, one, false},
		{"one record, 1e9 offset slots", 1, 1_000_000_000, one, false},
		{"claims more than present", 5, 4, four, false},
		{"claims fewer than present", 3, 2, four, false},
		{"zero records", 0, 0, nil, false},
		{"offset gap", 2, 1, gap, true},
		{"offsets backwards", 2, 1, backwards, true},
		{"garbage records", 2, 1, bytes.Repeat([]byte{0x7f}, 40), true},
	}
	for _, codec := range codecs {
		for _, c := range cases {
			b := forge(t, codec, c.numRecs, c.lastDelta, compressed(t, codec, c.raw))
			if _, err := Split(b); err != nil {
				// Refused already by the header checks: it must say
				// INVALID_RECORD, not CORRUPT_MESSAGE.
				if !errors.Is(err, ErrInvalidRecord) {
					t.Errorf("codec %d %s: Split: %v, want ErrInvalidRecord", codec, c.name, err)
				}
				continue
			}
			err := ValidateProduce(b, ProduceOptions{})
			if !errors.Is(err, ErrInvalidRecord) {
				t.Errorf("codec %d %s: got %v, want ErrInvalidRecord", codec, c.name, err)
				continue
			}
			var re *RecordError
			if errors.As(err, &re) != c.recordErr {
				t.Errorf("codec %d %s: record error %v, want %v (%v)", codec, c.name, re, c.recordErr, err)
			}
		}
	}
}

// The 78-byte batch of the issue: uncompressed, one tiny record, a header
// claiming 1e9 records.
func TestLyingCountUncompressed(t *testing.T) {
	b := forge(t, CodecNone, 1_000_000_000, 999_999_999, rawRecords([]Record{{Value: []byte("x")}}))
	if _, err := Split(b); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("Split of a %d-byte batch claiming 1e9 records: %v", len(b), err)
	}
}

func TestValidateProduceRequiresKeys(t *testing.T) {
	for _, codec := range codecs {
		recs := []Record{{OffsetDelta: 0, KeyNull: true}, {OffsetDelta: 1, Key: []byte("k")}, {OffsetDelta: 2, KeyNull: true, Value: []byte("v")}}
		b := mustBuild(t, sampleHeader(codec), recs)
		if err := ValidateProduce(b, ProduceOptions{}); err != nil {
			t.Fatalf("codec %d: plain topic: %v", codec, err)
		}
		err := ValidateProduce(b, ProduceOptions{RequireKeys: true})
		var re *RecordErrors
		if !errors.As(err, &re) || !errors.Is(err, ErrInvalidRecord) || re.Timestamp {
			t.Fatalf("codec %d: compacted topic: %v", codec, err)
		}
		if len(re.Records) != 2 || re.Records[0].Index != 0 || re.Records[1].Index != 2 || !errors.Is(re.Records[1].Err, ErrKeyRequired) {
			t.Fatalf("codec %d: record errors %+v, want records 0 and 2", codec, re.Records)
		}
	}
}

// Every record out of the timestamp range is named, with a keyless one on
// a compacted topic in the same batch; a record without a timestamp (-1)
// is never refused.
func TestValidateProduceTimestamps(t *testing.T) {
	for _, codec := range codecs {
		h := sampleHeader(codec)
		h.FirstTimestamp = 1000
		recs := []Record{
			{OffsetDelta: 0, Key: []byte("a"), TimestampDelta: 0},     // 1000: in range
			{OffsetDelta: 1, Key: []byte("b"), TimestampDelta: -500},  // 500: too old
			{OffsetDelta: 2, KeyNull: true, TimestampDelta: 100},      // 1100: keyless
			{OffsetDelta: 3, Key: []byte("d"), TimestampDelta: 9000},  // 10000: too new
			{OffsetDelta: 4, Key: []byte("e"), TimestampDelta: -1001}, // -1: none
		}
		b := mustBuild(t, h, recs)
		opt := ProduceOptions{RequireKeys: true, CheckTimestamps: true, MinTimestamp: 900, MaxTimestamp: 2000}
		err := ValidateProduce(b, opt)
		var re *RecordErrors
		if !errors.As(err, &re) || !re.Timestamp {
			t.Fatalf("codec %d: %v", codec, err)
		}
		var idx []int32
		for _, r := range re.Records {
			idx = append(idx, r.Index)
		}
		if fmt.Sprint(idx) != "[1 2 3]" {
			t.Fatalf("codec %d: refused %v, want [1 2 3]: %v", codec, idx, err)
		}
		opt.RequireKeys = false
		if err := ValidateProduce(b, opt); !errors.As(err, &re) || len(re.Records) != 2 {
			t.Fatalf("codec %d: timestamps only: %v", codec, err)
		}
		opt.MinTimestamp, opt.MaxTimestamp = 0, 20000
		if err := ValidateProduce(b, opt); err != nil {
			t.Fatalf("codec %d: all in range: %v", codec, err)
		}
	}
}

// bombSection is a records section holding one record whose value is
// valueLen zero bytes, compressed with codec without ever materialising it:
// gzip and zstd as repeated members/frames, snappy as repeated xerial
// blocks, lz4 streamed.
func bombSection(t testing.TB, codec int8, valueLen int) []byte {
	t.Helper()
	const chunk = 1 << 20
	if valueLen%chunk != 0 {
		t.Fatal("valueLen must be a multiple of 1 MiB")
	}
	// Record: length, attributes, timestampDelta, offsetDelta, key (null),
	// value length; then the value; then the header count.
	var body []byte
	body = append(body, 0)
	body = binary.AppendVarint(body, 0)
	body = binary.AppendVarint(body, 0)
	body = binary.AppendVarint(body, -1)
	body = binary.AppendVarint(body, int64(valueLen))
	prefix := binary.AppendVarint(nil, int64(len(body)+valueLen+1))
	prefix = append(prefix, body...)
	trailer := []byte{0} // no headers
	zeros := make([]byte, chunk)
	var out bytes.Buffer
	switch codec {
	case CodecGzip, CodecZstd:
		member := func(p []byte) []byte {
			if codec == CodecZstd {
				enc, _, err := zstdCodecs()
				if err != nil {
					t.Fatal(err)
				}
				return enc.EncodeAll(p, nil)
			}
			var b bytes.Buffer
			w, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
			w.Write(p)
			w.Close()
			return b.Bytes()
		}
		out.Write(member(prefix))
		z := member(zeros)
		for range valueLen / chunk {
			out.Write(z)
		}
		out.Write(member(trailer))
	case CodecSnappy:
		out.Write(xerialMagic)
		out.Write([]byte{0, 0, 0, 1, 0, 0, 0, 1})
		block := func(p []byte) {
			enc := s2.EncodeSnappy(nil, p)
			out.Write(binary.BigEndian.AppendUint32(nil, uint32(len(enc))))
			out.Write(enc)
		}
		block(prefix)
		enc := s2.EncodeSnappy(nil, zeros[:xerialBlockSize])
		for range valueLen / xerialBlockSize {
			out.Write(binary.BigEndian.AppendUint32(nil, uint32(len(enc))))
			out.Write(enc)
		}
		block(trailer)
	case CodecLz4:
		w := lz4.NewWriter(&out)
		_ = w.Apply(lz4.BlockSizeOption(lz4.Block4Mb), lz4.CompressionLevelOption(lz4.Fast))
		w.Write(prefix)
		for range valueLen / chunk {
			w.Write(zeros)
		}
		w.Write(trailer)
		w.Close()
	}
	return out.Bytes()
}

// Bombs of every codec are refused at the decompression bound, and
// refusing them costs a small buffer, not the bomb's size.
func TestDecompressionBombs(t *testing.T) {
	const inflated = 64 << 20
	limit := DecompressLimit(1 << 20)
	for _, codec := range codecs[1:] {
		sec := bombSection(t, codec, inflated)
		b := forge(t, codec, 1, 0, sec)
		if _, err := Split(b); err != nil {
			t.Fatalf("codec %d: %v", codec, err)
		}
		// Under a bound above its size the bomb is a valid batch: the
		// test bombs are well formed, only big.
		if err := ValidateProduce(b, ProduceOptions{MaxDecompressedBytes: 2 * inflated}); err != nil {
			t.Fatalf("codec %d: bomb under a large bound: %v", codec, err)
		}
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err := ValidateProduce(b, ProduceOptions{MaxDecompressedBytes: limit})
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrTooLarge) || !errors.Is(err, ErrInvalidRecord) {
			t.Fatalf("codec %d: %d-byte bomb inflating to %d: %v", codec, len(b), inflated, err)
		}
		alloc := after.TotalAlloc - before.TotalAlloc
		t.Logf("codec %d: %d-byte bomb refused after %d allocated bytes: %v", codec, len(b), alloc, err)
		if alloc > 8<<20 {
			t.Errorf("codec %d: refusing the bomb allocated %d bytes", codec, alloc)
		}
	}
}

// A record claiming a value far bigger than what follows costs memory only
// for the bytes present, in the keeping (non-skipping) mode too.
func TestLyingRecordLengthKept(t *testing.T) {
	var rec []byte
	rec = binary.AppendVarint(rec, 1<<30) // record length
	rec = append(rec, 0, 0, 0, 1)         // attrs, ts, offset, null key
	rec = binary.AppendVarint(rec, 1<<30-10)
	rec = append(rec, "short"...)
	for _, codec := range codecs[1:] {
		b := forge(t, codec, 1, 0, compressed(t, codec, rec))
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err := Each(b, IterOptions{}, func(int32, *Record) error { return nil })
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrInvalidRecord) {
			t.Fatalf("codec %d: %v", codec, err)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
			t.Errorf("codec %d: allocated %d bytes for a 5-byte value", codec, alloc)
		}
	}
}

// A zstd frame may declare a window (history the decoder keeps) of up to
// 3.75 TiB; past zstdStreamWindow it is refused before anything is kept.
func TestZstdWindowBound(t *testing.T) {
	raw := rawRecords(sampleRecords(3))
	// Frame header: magic, descriptor 0 (no content size, no checksum),
	// window descriptor 2^(10+16) = 64 MiB; then one last raw block.
	frame := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 16 << 3}
	hdr := uint32(len(raw))<<3 | 1
	frame = append(frame, byte(hdr), byte(hdr>>8), byte(hdr>>16))
	frame = append(frame, raw...)
	b := forge(t, CodecZstd, 3, 2, frame)
	if err := Each(b, IterOptions{}, func(int32, *Record) error { return nil }); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("frame declaring a 64 MiB window: %v", err)
	}
	// The same frame with a 1 MiB window is fine.
	frame[5] = 10 << 3
	b = forge(t, CodecZstd, 3, 2, frame)
	if err := Each(b, IterOptions{}, func(int32, *Record) error { return nil }); err != nil {
		t.Fatalf("frame declaring a 1 MiB window: %v", err)
	}
}

// BenchmarkProduceChecks compares what a plain topic's produce checked
// before ValidateProduce (Split: framing and CRC) with Split plus
// ValidateProduce, for a batch of 200 records of ~490 bytes.
func BenchmarkProduceChecks(b *testing.B) {
	for _, codec := range codecs {
		recs := make([]Record, 200)
		for i := range recs {
			v := bytes.Repeat([]byte("value-"), 80)
			binary.BigEndian.PutUint64(v, uint64(i)*0x9e3779b97f4a7c15)
			recs[i] = Record{OffsetDelta: int32(i), Key: []byte("key"), Value: v}
		}
		batch := mustBuild(b, sampleHeader(codec), recs)
		raw := int64(len(rawRecords(recs)))
		b.Run(codecName(codec)+"/split", func(b *testing.B) {
			b.SetBytes(raw)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Split(batch); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(codecName(codec)+"/split+validate", func(b *testing.B) {
			b.SetBytes(raw)
			b.ReportAllocs()
			opt := ProduceOptions{MaxDecompressedBytes: DecompressLimit(1 << 20)}
			for b.Loop() {
				if _, err := Split(batch); err != nil {
					b.Fatal(err)
				}
				if err := ValidateProduce(batch, opt); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func codecName(c int8) string {
	return [...]string{"none", "gzip", "snappy", "lz4", "zstd"}[c]
}

// A bad xerial block in the middle stops the stream for good: the blocks
// after it must not be read as if nothing happened.
func TestXerialBadMiddleBlock(t *testing.T) {
	raw := rawRecords(sampleRecords(300)) // several 32 KiB blocks
	sec := compressed(t, CodecSnappy, raw)
	first := binary.BigEndian.Uint32(sec[xerialHeaderLen:])
	second := xerialHeaderLen + 4 + int(first)
	if second+8 >= len(sec) {
		t.Fatal("want at least two blocks")
	}
	bad := bytes.Clone(sec)
	for i := second + 4; i < second+12; i++ {
		bad[i] = 0xff
	}
	b := forge(t, CodecSnappy, 300, 299, bad)
	if err := ValidateProduce(b, ProduceOptions{}); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("corrupt second block: %v", err)
	}
	if _, err := Records(b); err == nil {
		t.Fatal("Records accepted it")
	}
}
