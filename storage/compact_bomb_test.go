package storage

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"runtime"
	"testing"

	"github.com/klauspost/compress/gzip"

	"github.com/regent-broker/regent/storage/recordbatch"
)

// gzipBombBatch is a gzip batch of one record (key "bomb") whose value is
// mib MiB of zeros, written as repeated gzip members so the test never
// holds the zeros.
func gzipBombBatch(t *testing.T, mib int, ts int64) []byte {
	t.Helper()
	member := func(p []byte) []byte {
		var b bytes.Buffer
		w, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
		w.Write(p)
		w.Close()
		return b.Bytes()
	}
	valueLen := mib << 20
	body := []byte{0, 0, 0} // attributes, timestamp and offset deltas
	body = binary.AppendVarint(body, 4)
	body = append(body, "bomb"...)
	body = binary.AppendVarint(body, int64(valueLen))
	rec := binary.AppendVarint(nil, int64(len(body)+valueLen+1))
	rec = append(rec, body...)
	h := recordbatch.Header{Magic: 2, Attributes: int16(recordbatch.CodecGzip), FirstTimestamp: ts, MaxTimestamp: ts,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, NumRecords: 1}
	b, err := recordbatch.Build(h, []recordbatch.Record{{Key: []byte("x")}})
	if err != nil {
		t.Fatal(err)
	}
	b = b[:recordbatch.HeaderSize]
	b = append(b, member(rec)...)
	zeros := member(make([]byte, 1<<20))
	for range mib {
		b = append(b, zeros...)
	}
	b = append(b, member([]byte{0})...)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// A decompression bomb already in a compacted log (Produce refuses them;
// an older broker did not) costs the cleaner a bounded stream, not its
// inflated size, and is kept verbatim while the rest is compacted.
func TestCompactionBoundsBombs(t *testing.T) {
	clk := newClock(1_000_000)
	dir := t.TempDir()
	l := openLog(t, dir, Options{Compact: true, SegmentBytes: 4 << 10, IndexIntervalBytes: 128, RetentionMs: -1, Now: clk.Now})
	mustAppend(t, l, batch(t, recordbatch.CodecNone, rec{key: "a", value: "old", ts: 1000}))
	bombAt, _ := mustAppend(t, l, gzipBombBatch(t, 300, 1001))
	mustAppend(t, l, batch(t, recordbatch.CodecZstd, rec{key: "a", value: "new", ts: 1002}))
	for i := range 3 { // closes the segments above
		mustAppend(t, l, batch(t, recordbatch.CodecNone, rec{key: "tail", value: string(make([]byte, 3000)), ts: int64(1003 + i)}))
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := l.Compact(); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("compaction over a 300 MiB gzip bomb allocated %d bytes", alloc)
	if alloc > 64<<20 {
		t.Errorf("compaction allocated %d bytes", alloc)
	}
	data, err := l.Read(0, 1<<20, false)
	if err != nil {
		t.Fatal(err)
	}
	batches, err := recordbatch.Split(data)
	if err != nil {
		t.Fatal(err)
	}
	var offsets []int64
	for _, b := range batches {
		h, _ := recordbatch.ParseHeader(b)
		offsets = append(offsets, h.BaseOffset)
	}
	if len(offsets) == 0 || offsets[0] != bombAt {
		t.Fatalf("batches at %v after compaction; want the old \"a\" gone and the bomb (at %d) kept", offsets, bombAt)
	}
}
