package recordbatch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
)

var codecs = []int8{CodecNone, CodecGzip, CodecSnappy, CodecLz4, CodecZstd}

// sampleRecords covers the encoding corners: null/empty keys and values,
// headers with null and empty values, negative timestamp deltas.
func sampleRecords(n int) []Record {
	recs := make([]Record, n)
	for i := range recs {
		r := Record{
			OffsetDelta:    int32(i),
			TimestampDelta: int64((i%5)*1000 - 2000),
			Key:            []byte(fmt.Sprintf("key-%d", i%7)),
			Value:          bytes.Repeat([]byte{byte(i)}, i%300),
		}
		switch i % 6 {
		case 1:
			r.Key, r.KeyNull = nil, true
		case 2:
			r.Value, r.ValueNull = nil, true
		case 3:
			r.Key = []byte{}
			r.Headers = []RecordHeader{{Key: "h1", Value: []byte("v1")}, {Key: "", Value: nil}, {Key: "e", Value: []byte{}}}
		}
		recs[i] = r
	}
	return recs
}

func sampleHeader(codec int8) Header {
	return Header{
		BaseOffset:           0,
		PartitionLeaderEpoch: 3,
		Attributes:           int16(codec),
		FirstTimestamp:       1_700_000_000_000,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		BaseSequence:         -1,
	}
}

func mustBuild(t testing.TB, h Header, recs []Record) []byte {
	t.Helper()
	b, err := Build(h, recs)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return b
}

// equalRecords compares decoded records with the input, treating a nil and
// an empty non-null slice as equal for keys/values (the wire cannot tell).
func equalRecords(t *testing.T, got, want []Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.OffsetDelta != w.OffsetDelta || g.TimestampDelta != w.TimestampDelta ||
			g.KeyNull != w.KeyNull || g.ValueNull != w.ValueNull ||
			!bytes.Equal(g.Key, w.Key) || !bytes.Equal(g.Value, w.Value) || len(g.Headers) != len(w.Headers) {
			t.Fatalf("record %d: got %+v, want %+v", i, g, w)
		}
		for j := range w.Headers {
			gh, wh := g.Headers[j], w.Headers[j]
			if gh.Key != wh.Key || (gh.Value == nil) != (wh.Value == nil) || !bytes.Equal(gh.Value, wh.Value) {
				t.Fatalf("record %d header %d: got %+v, want %+v", i, j, gh, wh)
			}
		}
	}
}

func TestBuildRoundTrip(t *testing.T) {
	for _, codec := range codecs {
		for _, n := range []int{0, 1, 50, 2000} {
			t.Run(fmt.Sprintf("codec%d/n%d", codec, n), func(t *testing.T) {
				recs := sampleRecords(n)
				b := mustBuild(t, sampleHeader(codec), recs)
				h, err := Validate(b)
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				if h.Compression() != codec || h.NumRecords != int32(n) || h.TotalSize() != len(b) || h.Magic != 2 {
					t.Fatalf("header %+v", h)
				}
				if n > 0 && h.LastOffsetDelta != int32(n-1) {
					t.Fatalf("lastOffsetDelta %d", h.LastOffsetDelta)
				}
				got, err := Records(b)
				if err != nil {
					t.Fatalf("Records: %v", err)
				}
				equalRecords(t, got, recs)
			})
		}
	}
}

func TestBuildDerivedFields(t *testing.T) {
	h := sampleHeader(CodecNone)
	h.LastOffsetDelta = 9 // compaction kept only some records of 10 slots
	h.MaxTimestamp = 1
	recs := []Record{{OffsetDelta: 2, TimestampDelta: 50}, {OffsetDelta: 7, TimestampDelta: -5}}
	got, err := Validate(mustBuild(t, h, recs))
	if err != nil {
		t.Fatal(err)
	}
	if got.LastOffsetDelta != 9 || got.NumRecords != 2 || got.MaxTimestamp != h.FirstTimestamp+50 {
		t.Fatalf("derived header wrong: %+v", got)
	}
	if _, err := Build(h, []Record{{OffsetDelta: 3}, {OffsetDelta: 3}}); err == nil {
		t.Fatal("duplicate offset deltas accepted")
	}
	h.Attributes |= AttrLogAppendTime
	got, _ = Validate(mustBuild(t, h, recs))
	if got.MaxTimestamp != 1 {
		t.Fatalf("LogAppendTime max timestamp overwritten: %d", got.MaxTimestamp)
	}
	if err := got.CheckProduce(); err == nil {
		t.Fatal("CheckProduce accepted a thinned batch")
	}
}

func TestHeaderAccessors(t *testing.T) {
	h := Header{BaseOffset: 100, LastOffsetDelta: 4, Length: 49,
		Attributes: int16(CodecZstd) | AttrLogAppendTime | AttrTransactional | AttrControl}
	if h.Compression() != CodecZstd || h.TimestampType() != 1 || !h.IsTransactional() ||
		!h.IsControl() || h.LastOffset() != 104 || h.TotalSize() != 61 || h.HasDeleteHorizon() {
		t.Fatalf("accessors wrong for %+v", h)
	}
	if (Header{}).TimestampType() != 0 || (Header{}).IsControl() {
		t.Fatal("zero header flags")
	}
}

func TestCRCCorruptionDetected(t *testing.T) {
	for _, codec := range codecs {
		b := mustBuild(t, sampleHeader(codec), sampleRecords(5))
		for i := attributesOffset; i < len(b); i++ {
			c := bytes.Clone(b)
			c[i] ^= 0x40
			if _, err := Validate(c); err == nil {
				t.Fatalf("codec %d: flipping byte %d not detected", codec, i)
			}
		}
		c := bytes.Clone(b)
		c[crcOffset] ^= 1
		if _, err := Validate(c); !errors.Is(err, ErrBadCRC) {
			t.Fatalf("codec %d: corrupt CRC field: %v", codec, err)
		}
		if _, err := Records(c); err == nil {
			t.Fatal("Records accepted a bad CRC")
		}
	}
}

func TestHeaderErrors(t *testing.T) {
	b := mustBuild(t, sampleHeader(CodecNone), sampleRecords(3))
	cases := []struct {
		name  string
		patch func([]byte)
		want  error
	}{
		{"magic", func(c []byte) { c[magicOffset] = 1 }, ErrBadMagic},
		{"length small", func(c []byte) { binary.BigEndian.PutUint32(c[lengthOffset:], 10) }, ErrBadLength},
		{"length big", func(c []byte) { binary.BigEndian.PutUint32(c[lengthOffset:], uint32(len(c))) }, ErrBadLength},
		{"length negative", func(c []byte) { binary.BigEndian.PutUint32(c[lengthOffset:], 0xffffffff) }, ErrBadLength},
	}
	for _, tc := range cases {
		c := bytes.Clone(b)
		tc.patch(c)
		if _, err := Validate(c); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
	// Fields outside the CRC may change freely.
	c := bytes.Clone(b)
	SetBaseOffset(c, 1<<40)
	SetPartitionLeaderEpoch(c, 77)
	h, err := Validate(c)
	if err != nil || h.BaseOffset != 1<<40 || h.PartitionLeaderEpoch != 77 {
		t.Fatalf("after patching: %+v, %v", h, err)
	}
}

// headerSanity checks rejected even with a correct CRC.
func TestSanityChecks(t *testing.T) {
	cases := []struct {
		name  string
		patch func(*Header)
	}{
		{"negative count", func(h *Header) { h.NumRecords = -1 }},
		{"negative lastOffsetDelta", func(h *Header) { h.LastOffsetDelta = -1 }},
		{"more records than slots", func(h *Header) { h.NumRecords = 5; h.LastOffsetDelta = 3 }},
		{"unknown codec", func(h *Header) { h.Attributes = 5 }},
		{"count too big for bytes", func(h *Header) { h.NumRecords = 1000; h.LastOffsetDelta = 1000 }},
		{"negative base offset", func(h *Header) { h.BaseOffset = -5 }},
	}
	for _, tc := range cases {
		b := mustBuild(t, sampleHeader(CodecNone), sampleRecords(3))
		h, _ := ParseHeader(b)
		tc.patch(&h)
		putHeader(b, h)
		binary.BigEndian.PutUint32(b[crcOffset:], checksum(b))
		if _, err := Validate(b); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
}

func TestRecordsRejectsCountMismatch(t *testing.T) {
	b := mustBuild(t, sampleHeader(CodecGzip), sampleRecords(4))
	h, _ := ParseHeader(b)
	h.NumRecords = 3
	putHeader(b, h)
	binary.BigEndian.PutUint32(b[crcOffset:], checksum(b))
	if _, err := Validate(b); err != nil {
		t.Fatalf("header-level validation should pass: %v", err)
	}
	if _, err := Records(b); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Records with wrong count: %v", err)
	}
}

func TestTruncationDetected(t *testing.T) {
	b := mustBuild(t, sampleHeader(CodecLz4), sampleRecords(20))
	for n := 0; n < len(b); n++ {
		if _, err := Validate(b[:n]); err == nil {
			t.Fatalf("prefix of %d/%d bytes validated", n, len(b))
		}
		two := append(bytes.Clone(b), b[:n]...)
		if _, err := Split(two); err == nil && n > 0 {
			t.Fatalf("Split accepted partial trailing batch of %d bytes", n)
		}
	}
}

func TestSplit(t *testing.T) {
	var all []byte
	var want [][]byte
	for i, codec := range codecs {
		b := mustBuild(t, sampleHeader(codec), sampleRecords(i*3+1))
		want = append(want, b)
		all = append(all, b...)
	}
	got, err := Split(all)
	if err != nil || len(got) != len(want) {
		t.Fatalf("Split: %d batches, %v", len(got), err)
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("batch %d differs", i)
		}
	}
	if got, err := Split(nil); err != nil || len(got) != 0 {
		t.Fatalf("empty Split: %v %v", got, err)
	}
	if _, err := Split(append(bytes.Clone(all), 0, 0, 0)); !errors.Is(err, ErrTruncated) {
		t.Fatalf("trailing garbage: %v", err)
	}
	bad := bytes.Clone(all)
	bad[len(want[0])+HeaderSize+2] ^= 0xff // corrupt the second batch's records
	if _, err := Split(bad); !errors.Is(err, ErrBadCRC) {
		t.Fatalf("corrupt second batch: %v", err)
	}

	// SplitChecked trusts the CRC (the proposer checked it) but not the
	// framing or the header's sanity.
	if got, err := SplitChecked(bad); err != nil || len(got) != len(want) {
		t.Fatalf("SplitChecked of a bad CRC: %d batches, %v", len(got), err)
	}
	if _, err := SplitChecked(append(bytes.Clone(all), 0, 0, 0)); !errors.Is(err, ErrTruncated) {
		t.Fatalf("SplitChecked, trailing garbage: %v", err)
	}
	insane := bytes.Clone(want[0])
	binary.BigEndian.PutUint32(insane[lastOffsetDeltaOffset:], 0xffffffff) // negative lastOffsetDelta
	if _, err := SplitChecked(insane); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("SplitChecked, negative lastOffsetDelta: %v", err)
	}
}

func TestSetLogAppendTime(t *testing.T) {
	for _, codec := range codecs {
		b := mustBuild(t, sampleHeader(codec), sampleRecords(10))
		before, _ := ParseHeader(b)
		SetLogAppendTime(b, 42)
		h, err := Validate(b)
		if err != nil {
			t.Fatalf("codec %d: %v", codec, err)
		}
		if h.TimestampType() != 1 || h.MaxTimestamp != 42 || h.FirstTimestamp != before.FirstTimestamp ||
			h.Compression() != codec {
			t.Fatalf("codec %d: header after SetLogAppendTime: %+v", codec, h)
		}
	}
}

func TestSnappyRawAndXerial(t *testing.T) {
	raw := bytes.Repeat([]byte("snappy data "), 10_000) // > one xerial block
	x, err := Compress(CodecSnappy, raw)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(x, xerialMagic) {
		t.Fatal("Compress(snappy) is not xerial framed")
	}
	got, err := decompress(CodecSnappy, x)
	if err != nil || !bytes.Equal(got, raw) {
		t.Fatalf("xerial round trip: %v", err)
	}
	block, _ := snappyBlock(nil, nil) // empty input decodes to error, not panic
	_ = block
	// A truncated xerial stream must fail cleanly.
	if _, err := decompress(CodecSnappy, x[:len(x)-3]); err == nil {
		t.Fatal("truncated xerial accepted")
	}
}

func TestCompressUnknownCodec(t *testing.T) {
	if _, err := Compress(7, []byte("x")); !errors.Is(err, ErrBadCodec) {
		t.Fatalf("got %v", err)
	}
}

// Highly compressible data must still round-trip under the expansion
// bounds that guard against lying headers.
func TestCompressibleExtremes(t *testing.T) {
	zeros := make([]byte, 8<<20)
	for _, codec := range codecs[1:] {
		c, err := Compress(codec, zeros)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decompress(codec, c)
		if err != nil || !bytes.Equal(got, zeros) {
			t.Fatalf("codec %d: %d compressed bytes did not round-trip: %v", codec, len(c), err)
		}
	}
	// A zstd frame header claiming far more than its input can hold.
	lying := []byte{0x28, 0xb5, 0x2f, 0xfd, 0xa4, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00}
	if _, err := decompress(CodecZstd, lying); err == nil {
		t.Fatal("lying zstd header accepted")
	}
	if _, err := decompress(CodecSnappy, []byte{0xff, 0xff, 0xff, 0x7f, 0}); err == nil {
		t.Fatal("lying snappy length accepted")
	}
}

// SetLogAppendTimeHead on a header copy gives the bytes SetLogAppendTime
// gives in place, and leaves the batch alone.
func TestSetLogAppendTimeHeadMatchesInPlace(t *testing.T) {
	b, err := Build(Header{FirstTimestamp: 100, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
		[]Record{{Key: []byte("k"), Value: []byte("v1")}, {OffsetDelta: 1, TimestampDelta: 5, Value: []byte("v2")}})
	if err != nil {
		t.Fatal(err)
	}
	orig := bytes.Clone(b)
	head := bytes.Clone(b[:HeaderSize])
	SetLogAppendTimeHead(head, b, 9999)
	if !bytes.Equal(b, orig) {
		t.Fatal("SetLogAppendTimeHead wrote to the batch")
	}
	SetLogAppendTime(b, 9999)
	if !bytes.Equal(head, b[:HeaderSize]) {
		t.Fatalf("head %x, in place %x", head, b[:HeaderSize])
	}
	if _, err := Validate(append(head, orig[HeaderSize:]...)); err != nil {
		t.Fatalf("patched batch does not validate: %v", err)
	}
}
