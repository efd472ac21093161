package storage

import (
	"os"
	"path/filepath"
	"testing"
)

// fillLog appends n single-batch records over several segments.
func fillLog(t *testing.T, dir string, n int) (next int64, size int64) {
	t.Helper()
	l := openLog(t, dir, Options{SegmentBytes: 1200, IndexIntervalBytes: 200})
	for i := range n {
		mustAppend(t, l, simpleBatch(t, 2, 30, int64(100+i)))
	}
	next, size = l.NextOffset(), l.Size()
	crashLog(l)
	return next, size
}

func TestRecoveryTruncatesTornTail(t *testing.T) {
	tail := simpleBatch(t, 2, 30, 1)
	corrupt := append([]byte(nil), tail...)
	corrupt[len(corrupt)-1] ^= 0xff // bad CRC
	cases := []struct {
		name    string
		garbage []byte
	}{
		{"half a batch", tail[:len(tail)/2]},
		{"a few bytes", []byte{0, 0, 0}},
		{"random garbage", []byte("this is not a record batch at all, not even close....................")},
		{"corrupt batch", corrupt},
		{"zero fill", make([]byte, 4096)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			next, size := fillLog(t, dir, 40)
			appendToFile(t, lastSegmentLog(t, dir), tc.garbage)
			l := openLog(t, dir, Options{SegmentBytes: 1200, IndexIntervalBytes: 200})
			defer l.Close()
			if l.NextOffset() != next || l.Size() != size {
				t.Fatalf("after recovery next %d size %d, want %d %d", l.NextOffset(), l.Size(), next, size)
			}
			if got := readAll(t, l, 0); len(got) != int(next) {
				t.Fatalf("read %d records, want %d", len(got), next)
			}
			base, _ := mustAppend(t, l, simpleBatch(t, 1, 5, 9))
			if base != next {
				t.Fatalf("append after recovery at %d, want %d", base, next)
			}
			if got := readAll(t, l, next); len(got) != 1 {
				t.Fatalf("new record not readable: %v", got)
			}
		})
	}
}

func TestRecoveryCorruptMiddleOfActiveSegment(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{})
	var positions []int64
	for i := range 10 {
		positions = append(positions, l.Size())
		mustAppend(t, l, simpleBatch(t, 1, 20, int64(i)))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, cleanShutdownFile)) // force validation
	path := lastSegmentLog(t, dir)
	data, _ := os.ReadFile(path)
	data[positions[6]+70] ^= 0x55
	os.WriteFile(path, data, 0o644)
	l = openLog(t, dir, Options{})
	defer l.Close()
	if l.NextOffset() != 6 || l.Size() != positions[6] {
		t.Fatalf("next %d size %d", l.NextOffset(), l.Size())
	}
}

func TestRecoveryRebuildsIndexes(t *testing.T) {
	for _, mode := range []string{"deleted", "garbage", "truncated-entry"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{SegmentBytes: 1200, IndexIntervalBytes: 200}
			l := openLog(t, dir, opts)
			for i := range 60 {
				mustAppend(t, l, simpleBatch(t, 2, 30, int64(100+i)))
			}
			wantTS, _, _, _ := l.OffsetForTimestamp(130)
			wantMaxOff, wantMaxTS := l.MaxTimestamp()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			for _, f := range append(segmentFiles(t, dir, indexSuffix), segmentFiles(t, dir, timeIndexSuffix)...) {
				switch mode {
				case "deleted":
					os.Remove(f)
				case "garbage":
					os.WriteFile(f, []byte("0123456789abcdefghijklmnopqrstuvwxyz0123456789ab"), 0o644)
				case "truncated-entry":
					if fi, _ := os.Stat(f); fi.Size() > 0 {
						os.Truncate(f, fi.Size()-3)
					}
				}
			}
			l = openLog(t, dir, opts)
			defer l.Close()
			if l.NextOffset() != 120 {
				t.Fatalf("next %d", l.NextOffset())
			}
			for off := int64(0); off < 120; off++ {
				data, err := l.Read(off, 100, false)
				if err != nil {
					t.Fatalf("Read(%d): %v", off, err)
				}
				if h := mustHeader(t, data); h.BaseOffset != off/2*2 {
					t.Fatalf("Read(%d) got batch %d", off, h.BaseOffset)
				}
			}
			if got, _, _, _ := l.OffsetForTimestamp(130); got != wantTS {
				t.Fatalf("OffsetForTimestamp after rebuild %d, want %d", got, wantTS)
			}
			if off, ts := l.MaxTimestamp(); off != wantMaxOff || ts != wantMaxTS {
				t.Fatalf("MaxTimestamp after rebuild %d/%d, want %d/%d", off, ts, wantMaxOff, wantMaxTS)
			}
			// Rebuilt indexes are non-empty again.
			if fi, _ := os.Stat(segmentFiles(t, dir, indexSuffix)[0]); fi.Size() == 0 {
				t.Fatal("index not rebuilt")
			}
		})
	}
}

func TestCleanReopenKeepsState(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentBytes: 1200, IndexIntervalBytes: 200}
	l := openLog(t, dir, opts)
	for i := range 50 {
		ts := int64(1000 + (i*37)%50) // non-monotonic
		mustAppend(t, l, simpleBatch(t, 2, 30, ts))
	}
	next, size := l.NextOffset(), l.Size()
	mo, mt := l.MaxTimestamp()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, cleanShutdownFile)); err != nil {
		t.Fatal("no clean shutdown marker")
	}
	l = openLog(t, dir, opts)
	defer l.Close()
	if _, err := os.Stat(filepath.Join(dir, cleanShutdownFile)); err == nil {
		t.Fatal("marker must be removed on open")
	}
	if l.NextOffset() != next || l.Size() != size {
		t.Fatalf("state changed across clean reopen")
	}
	if o, ts := l.MaxTimestamp(); o != mo || ts != mt {
		t.Fatalf("MaxTimestamp %d/%d, want %d/%d", o, ts, mo, mt)
	}
	mustAppend(t, l, simpleBatch(t, 1, 5, 2000))
	if o, ts := l.MaxTimestamp(); ts != 2000 || o != next {
		t.Fatalf("MaxTimestamp after append %d/%d", o, ts)
	}
}

func TestLeftoverCompactionFiles(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{SegmentBytes: 1000})
	for i := range 20 {
		mustAppend(t, l, simpleBatch(t, 1, 50, int64(i)))
	}
	l.Close()
	logs := segmentFiles(t, dir, logSuffix)
	first := logs[0]
	// An unfinished .cleaned output is discarded.
	os.WriteFile(first+cleanedSuffix, []byte("partial"), 0o644)
	// A committed swap is completed: here the swap holds the same bytes.
	data, _ := os.ReadFile(logs[1])
	os.Rename(logs[1], logs[1]+swapSuffix)
	l = openLog(t, dir, Options{SegmentBytes: 1000})
	defer l.Close()
	if _, err := os.Stat(first + cleanedSuffix); err == nil {
		t.Fatal(".cleaned leftover not removed")
	}
	if got, _ := os.ReadFile(logs[1]); string(got) != string(data) {
		t.Fatal("swap not completed")
	}
	if got := readAll(t, l, 0); len(got) != 20 {
		t.Fatalf("read %d", len(got))
	}
}
