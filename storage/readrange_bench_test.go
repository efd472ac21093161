package storage

import (
	"syscall"
	"testing"

	"github.com/regent-broker/regent/storage/recordbatch"
)

// BenchmarkReadRange is a consumer's fetch path as ConsumerPerformance
// drives it (issue 13): ~64 KiB batches of 1 KiB records, 1 MiB per fetch,
// each fetch starting where the previous one ended. The bytes are not sent;
// what is measured is finding the batches (locate and extend).
func BenchmarkReadRange(b *testing.B) {
	l := openLog(b, b.TempDir(), Options{SegmentBytes: 256 << 20})
	defer l.Close()
	recs := make([]rec, 63)
	for i := range recs {
		recs[i] = rec{key: "key", value: string(make([]byte, 1024)), ts: 1}
	}
	tmpl := batch(b, recordbatch.CodecNone, recs...)
	for range 1600 { // ~100 MiB
		if _, _, err := l.Append(append([]byte(nil), tmpl...)); err != nil {
			b.Fatal(err)
		}
	}
	end := l.NextOffset()
	b.SetBytes(1 << 20)
	cpu0 := processCPU(b)
	b.ResetTimer()
	off := int64(0)
	for b.Loop() {
		r, err := l.ReadRange(off, 1<<20, false)
		if err != nil || r == nil {
			b.Fatalf("ReadRange(%d): %v", off, err)
		}
		off = r.Batches()[len(r.Batches())-1].LastOffset + 1
		r.Release()
		if off >= end {
			off = 0
		}
	}
	b.StopTimer()
	// Wall time swings with the machine's load; CPU time is the figure
	// issue 13 is about.
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// processCPU is the process's user+system CPU time in ns.
func processCPU(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
