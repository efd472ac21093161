package storage

import (
	"testing"

	"github.com/regent-broker/regent/storage/recordbatch"
)

// bench16K is a 16 KiB-ish batch of 16 x 1 KiB records.
func bench16K(b *testing.B) []byte {
	recs := make([]rec, 16)
	for i := range recs {
		recs[i] = rec{key: "key", value: string(make([]byte, 1000)), ts: 1}
	}
	return batch(b, recordbatch.CodecNone, recs...)
}

func BenchmarkAppend(b *testing.B) {
	l := openLog(b, b.TempDir(), Options{SegmentBytes: 64 << 20})
	defer l.Close()
	tmpl := bench16K(b)
	buf := make([]byte, len(tmpl))
	b.SetBytes(int64(len(tmpl)))
	b.ResetTimer()
	for b.Loop() {
		copy(buf, tmpl)
		if _, _, err := l.Append(buf); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRead(b *testing.B) {
	l := openLog(b, b.TempDir(), Options{SegmentBytes: 64 << 20})
	defer l.Close()
	tmpl := bench16K(b)
	const n = 2000 // ~32 MiB over a few segments
	for range n {
		if _, _, err := l.Append(append([]byte(nil), tmpl...)); err != nil {
			b.Fatal(err)
		}
	}
	end := l.NextOffset()
	b.SetBytes(1 << 20)
	b.ResetTimer()
	off := int64(0)
	for b.Loop() {
		data, err := l.Read(off, 1<<20, false)
		if err != nil || len(data) == 0 {
			b.Fatalf("Read(%d): %d bytes, %v", off, len(data), err)
		}
		off = (off + 16*61) % end // jump around, mid-batch offsets included
	}
}

// BenchmarkAppendEvicting appends round-robin to 64 logs through a cache of
// 16 descriptors, so nearly every append reopens its segment file: the
// worst case of the bounded file cache (compare BenchmarkAppend).
func BenchmarkAppendEvicting(b *testing.B) {
	files := NewFileCache(minOpenFiles)
	logs := make([]*Log, 64)
	for i := range logs {
		logs[i] = openLog(b, b.TempDir(), Options{SegmentBytes: 64 << 20, Files: files})
		defer logs[i].Close()
	}
	tmpl := bench16K(b)
	buf := make([]byte, len(tmpl))
	b.SetBytes(int64(len(tmpl)))
	b.ResetTimer()
	i := 0
	for b.Loop() {
		copy(buf, tmpl)
		if _, _, err := logs[i%len(logs)].Append(buf); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
