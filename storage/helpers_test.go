package storage

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/regent-broker/regent/storage/recordbatch"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock(ms int64) *clock { return &clock{t: time.UnixMilli(ms)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func (c *clock) Ms() int64 { return c.Now().UnixMilli() }

// rec is a record spec for batch builders: a nil value is a tombstone.
type rec struct {
	key, value string
	ts         int64
	tombstone  bool
}

// batch builds a CreateTime batch of recs (timestamps absolute).
func batch(t testing.TB, codec int8, recs ...rec) []byte {
	t.Helper()
	if len(recs) == 0 {
		t.Fatal("batch needs records")
	}
	first := recs[0].ts
	h := recordbatch.Header{Attributes: int16(codec), FirstTimestamp: first, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	rs := make([]recordbatch.Record, len(recs))
	for i, r := range recs {
		rs[i] = recordbatch.Record{OffsetDelta: int32(i), TimestampDelta: r.ts - first,
			Key: []byte(r.key), Value: []byte(r.value), ValueNull: r.tombstone}
	}
	b, err := recordbatch.Build(h, rs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// simpleBatch has n records with value size vsize, all at timestamp ts.
func simpleBatch(t testing.TB, n, vsize int, ts int64) []byte {
	t.Helper()
	recs := make([]rec, n)
	for i := range recs {
		recs[i] = rec{key: fmt.Sprintf("k%d", i), value: string(bytes.Repeat([]byte{'v'}, vsize)), ts: ts}
	}
	return batch(t, recordbatch.CodecNone, recs...)
}

func openLog(t testing.TB, dir string, opts Options) *Log {
	t.Helper()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l
}

func mustAppend(t testing.TB, l *Log, b []byte) (int64, int64) {
	t.Helper()
	base, last, err := l.Append(b)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	return base, last
}

// readAll follows the log from offset to its end, returning every decoded
// record with its absolute offset.
type gotRec struct {
	off   int64
	key   string
	value string
	null  bool
	ts    int64
}

func readAll(t testing.TB, l *Log, from int64) []gotRec {
	t.Helper()
	var out []gotRec
	off := from
	for off < l.NextOffset() {
		data, err := l.Read(off, 64<<10, false)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		if len(data) == 0 {
			break
		}
		batches, err := recordbatch.Split(data)
		if err != nil {
			t.Fatalf("Read(%d) returned bad batches: %v", off, err)
		}
		for _, b := range batches {
			h, _ := recordbatch.ParseHeader(b)
			recs, err := recordbatch.Records(b)
			if err != nil {
				t.Fatalf("Records at %d: %v", h.BaseOffset, err)
			}
			for _, r := range recs {
				o := h.BaseOffset + int64(r.OffsetDelta)
				if o >= from {
					out = append(out, gotRec{off: o, key: string(r.Key), value: string(r.Value),
						null: r.ValueNull, ts: recordTimestamp(h, r)})
				}
			}
			off = h.LastOffset() + 1
		}
	}
	return out
}

func segmentFiles(t testing.TB, dir, suffix string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+suffix))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func lastSegmentLog(t testing.TB, dir string) string {
	t.Helper()
	logs := segmentFiles(t, dir, logSuffix)
	if len(logs) == 0 {
		t.Fatal("no segments")
	}
	return logs[len(logs)-1]
}

func appendToFile(t testing.TB, path string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
}

func isOutOfRange(err error) bool { return errors.Is(err, ErrOffsetOutOfRange) }

var osStat = os.Stat

// crashLog leaves l as a crash would: indexes written out, files let go,
// but no Close, so no clean-shutdown marker.
func crashLog(l *Log) {
	l.mu.Lock()
	for _, s := range l.mu.segs {
		_ = s.flushIndexes()
		s.release()
	}
	l.mu.closed = true
	l.mu.Unlock()
}
