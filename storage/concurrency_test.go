package storage

import (
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/regent-broker/regent/storage/recordbatch"
)

// TestConcurrentReaders runs fetch-style readers against an owner that
// appends, rolls, enforces retention, compacts and truncates. Readers may
// see ErrOffsetOutOfRange when retention overtakes them, nothing else, and
// every batch they get must be intact.
//
// With a tiny file cache every read races descriptor eviction and reopening,
// and segments are deleted or swapped under readers whose descriptors were
// evicted.
func TestConcurrentReaders(t *testing.T) {
	t.Run("default-cache", func(t *testing.T) { testConcurrentReaders(t, nil) })
	t.Run("tiny-cache", func(t *testing.T) { testConcurrentReaders(t, NewFileCache(minOpenFiles)) })
}

func testConcurrentReaders(t *testing.T, files *FileCache) {
	clk := newClock(1_000_000)
	l := openLog(t, t.TempDir(), Options{SegmentBytes: 2000, IndexIntervalBytes: 256,
		RetentionBytes: 20_000, RetentionMs: -1, Compact: true, Now: clk.Now, Files: files})
	defer l.Close()
	var stop atomic.Bool
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 1))
			for !stop.Load() {
				start, next := l.StartOffset(), l.NextOffset()
				off := start
				if next > start {
					off += rng.Int64N(next - start + 1)
				}
				data, err := l.Read(off, 1+rng.IntN(8000), rng.IntN(2) == 0)
				if err != nil && !errors.Is(err, ErrOffsetOutOfRange) {
					errc <- err
					return
				}
				if len(data) > 0 {
					if _, err := recordbatch.Split(data); err != nil {
						errc <- err
						return
					}
				}
				if _, _, _, err := l.OffsetForTimestamp(int64(rng.IntN(3000))); err != nil {
					errc <- err
					return
				}
				l.MaxTimestamp()
				l.EndOffsetForEpoch(1)
				l.Size()
				l.DirtyRatio()
			}
		}()
	}
	deadline := time.Now().Add(1500 * time.Millisecond)
	for i := 0; time.Now().Before(deadline); i++ {
		ts := int64(i % 3000)
		b := batch(t, int8(i%5), rec{key: string(rune('a' + i%20)), value: "v", ts: ts}, rec{key: "x", value: "y", ts: ts + 1})
		mustAppend(t, l, b)
		switch i % 200 {
		case 50:
			if _, err := l.EnforceRetention(); err != nil {
				t.Fatal(err)
			}
		case 100:
			if err := l.Compact(); err != nil {
				t.Fatal(err)
			}
		case 150:
			if err := l.Truncate(l.NextOffset() - 3); err != nil {
				t.Fatal(err)
			}
		case 199:
			if err := l.AssignEpoch(int32(i), l.NextOffset()); err != nil {
				t.Fatal(err)
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
}
