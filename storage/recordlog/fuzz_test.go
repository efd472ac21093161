package recordlog

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// FuzzRecordlogOpen opens arbitrary bytes as a log (the first byte picks
// the layout): Open never panics, and it never loses a good frame that
// comes before the first damage. It either keeps exactly the good prefix
// (truncating the rest) or refuses with a CorruptError at its end; what
// it keeps reopens the same and takes appends.
func FuzzRecordlogOpen(f *testing.F) {
	kv := LayoutKV.AppendFrame(nil, []byte("k"), []byte("v"), false)
	kv = LayoutKV.AppendFrame(kv, []byte("k"), nil, true)
	f.Add(append([]byte{0}, kv...))
	k16 := LayoutKey16.AppendFrame(nil, []byte("id"), []byte{0, 1, 2}, false)
	f.Add(append([]byte{1}, k16...))
	// One file per fuzz worker, rewritten by every input: a directory
	// per input would cost more than the test itself.
	path := filepath.Join(f.TempDir(), "x.log")
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		ly := Layout(data[0] & 1)
		raw := data[1:]
		// The good prefix, read frame by frame.
		var want []string
		good := 0
		for {
			r, n, err := ly.ReadFrame(raw[good:], 4096)
			if err != nil {
				break
			}
			if string(r.Key) != appliedKey {
				want = append(want, string(r.Frame))
			}
			good += n
		}
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		x := &framesIndex{}
		o := Options{Layout: ly, MaxFrameBytes: 4096, CompactMinBytes: -1, Index: x}
		l, err := Open(path, o)
		if err != nil {
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.Offset != int64(good) || ce.Next <= ce.Offset {
				t.Fatalf("open: %v; good prefix %d bytes", err, good)
			}
			return
		}
		if !slices.Equal(x.frames, want) || l.Size() != int64(good) {
			t.Fatalf("kept %d records, size %d; good prefix %d records, %d bytes", len(x.frames), l.Size(), len(want), good)
		}
		if err := l.Put([]byte("new"), []byte("value")); err != nil {
			t.Fatal(err)
		}
		closeNoSync(l)
		y := &framesIndex{}
		o.Index = y
		l, err = Open(path, o)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		defer closeNoSync(l)
		if len(y.frames) != len(want)+1 || !slices.Equal(y.frames[:len(want)], want) {
			t.Fatalf("reopened %d records, want %d+1", len(y.frames), len(want))
		}
	})
}

// framesIndex keeps every record's frame, in order.
type framesIndex struct{ frames []string }

func (x *framesIndex) Add(r Record)                 { x.frames = append(x.frames, string(r.Frame)) }
func (x *framesIndex) Live(yield func(Record) bool) {}
func (x *framesIndex) LiveBytes() int64             { return 0 }

// closeNoSync closes l's file without the fsync of Close: a fuzz run
// does thousands of opens, and fsync would make it wait on the disk.
func closeNoSync(l *Log) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.f != nil {
		l.mu.f.Close()
		l.mu.f = nil
	}
}
