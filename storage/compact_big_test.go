package storage

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/regent-broker/regent/storage/recordbatch"
)

// TestCompactionPassDuration measures how long one compaction pass holds
// the partition actor (Compact runs on the log's owner) on a compacted
// partition of about 100 MB whose keys were each written five times, with
// 1 KiB values (100k records) and with 100-byte values (about 800k
// records). It writes 200 MB, so it runs only with REGENT_BIG_COMPACT=1 and
// reports the times; it fails only if a pass does not shrink the log.
func TestCompactionPassDuration(t *testing.T) {
	if os.Getenv("REGENT_BIG_COMPACT") == "" {
		t.Skip("set REGENT_BIG_COMPACT=1 to write and compact 2 x 100 MB")
	}
	for _, valueSize := range []int{1 << 10, 100} {
		t.Run(fmt.Sprintf("value-%dB", valueSize), func(t *testing.T) { compactionPass(t, valueSize) })
	}
}

func compactionPass(t *testing.T, valueSize int) {
	const (
		perBatch = 100
		total    = 100 << 20
	)
	keys := total / (valueSize + 30) / 5
	clk := newClock(1_000_000)
	l := openLog(t, t.TempDir(), Options{Compact: true, DeleteDisabled: true, SegmentBytes: 16 << 20,
		IndexIntervalBytes: DefaultIndexIntervalBytes, RetentionMs: -1, RetentionBytes: -1,
		DeleteRetentionMs: DefaultDeleteRetentionMs, Now: clk.Now})
	defer l.Close()
	value := string(make([]byte, valueSize))
	recs := make([]rec, perBatch)
	start := time.Now()
	for n := 0; l.Size() < total; n += perBatch {
		for i := range recs {
			recs[i] = rec{key: fmt.Sprintf("key-%06d", (n+i)%keys), value: value, ts: clk.Ms()}
		}
		if _, _, err := l.Append(batch(t, recordbatch.CodecNone, recs...)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %d MB, %d records, in %v", l.Size()>>20, l.NextOffset(), time.Since(start).Round(time.Millisecond))
	clk.Advance(time.Hour)
	before := l.Size()
	start = time.Now()
	if err := l.Compact(); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("one pass over %d keys: %d MB -> %d MB in %v (%.0f MB/s of input)", keys, before>>20, l.Size()>>20,
		took.Round(time.Millisecond), float64(before)/(1<<20)/took.Seconds())
	if l.Size() >= before {
		t.Fatalf("the pass did not shrink the log: %d -> %d", before, l.Size())
	}
}
