package recordlog

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func open(t testing.TB, path string, o Options) *Log {
	t.Helper()
	l, err := Open(path, o)
	must(t, err)
	t.Cleanup(func() { l.Close() })
	return l
}

// contents is the live records as "key=value" in Range order.
func contents(l *Log) []string {
	var out []string
	l.Range(func(r Record) bool {
		out = append(out, fmt.Sprintf("%s=%s", r.Key, r.Value))
		return true
	})
	return out
}

func TestRoundTripBothLayouts(t *testing.T) {
	for _, ly := range []Layout{LayoutKV, LayoutKey16} {
		t.Run(ly.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.log")
			l := open(t, path, Options{Layout: ly})
			must(t, l.Put([]byte("b"), []byte("1")))
			must(t, l.PutBatch([]Entry{{Key: []byte("a"), Value: []byte("2")}, {Key: []byte("c"), Value: []byte("3")}, {Key: []byte("b"), Value: []byte("4")}}))
			must(t, l.Delete([]byte("c")))
			want := []string{"a=2", "b=4"}
			if got := contents(l); !slices.Equal(got, want) {
				t.Fatalf("live %v, want %v", got, want)
			}
			size := l.Size()
			must(t, l.Close())
			if err := l.Put([]byte("z"), []byte("z")); err == nil {
				t.Fatal("put after close succeeded")
			}
			l2 := open(t, path, Options{Layout: ly})
			if got := contents(l2); !slices.Equal(got, want) {
				t.Fatalf("reopened %v, want %v", got, want)
			}
			if l2.Size() != size {
				t.Fatalf("reopened size %d, want %d", l2.Size(), size)
			}
			if _, ok := l2.AppliedIndex(); ok {
				t.Fatal("applied index without one written")
			}
		})
	}
}

// LayoutKV tells an empty value from a tombstone; LayoutKey16 cannot.
func TestEmptyValue(t *testing.T) {
	dir := t.TempDir()
	kv := open(t, filepath.Join(dir, "kv.log"), Options{})
	must(t, kv.Put([]byte("k"), []byte{}))
	if got := contents(kv); !slices.Equal(got, []string{"k="}) {
		t.Fatalf("kv: %v", got)
	}
	k16 := open(t, filepath.Join(dir, "k16.log"), Options{Layout: LayoutKey16})
	must(t, k16.Put([]byte("k"), []byte("v")))
	must(t, k16.Put([]byte("k"), nil))
	if got := contents(k16); len(got) != 0 {
		t.Fatalf("key16: empty value did not delete: %v", got)
	}
}

// writeRecords writes n records k0..k(n-1) one write each and returns
// where each frame starts and the file's end.
func writeRecords(t *testing.T, path string, o Options, n int) (starts []int64, end int64) {
	l := open(t, path, o)
	for i := range n {
		starts = append(starts, l.Size())
		must(t, l.Put(fmt.Appendf(nil, "k%d", i), bytes.Repeat([]byte{byte('a' + i)}, 10+i)))
	}
	end = l.Size()
	must(t, l.Close())
	return starts, end
}

// A write cut at any byte of the last frame loses that frame only; the
// log is truncated and appends go on from there.
func TestTornTailEveryOffset(t *testing.T) {
	for _, ly := range []Layout{LayoutKV, LayoutKey16} {
		t.Run(ly.String(), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "x.log")
			o := Options{Layout: ly}
			starts, end := writeRecords(t, path, o, 4)
			full, err := os.ReadFile(path)
			must(t, err)
			last := starts[3]
			for cut := last; cut < end; cut++ {
				must(t, os.WriteFile(path, full[:cut], 0o644))
				l, err := Open(path, o)
				if err != nil {
					t.Fatalf("cut at %d: %v", cut, err)
				}
				if got := contents(l); len(got) != 3 || got[2] != "k2=cccccccccccc" {
					t.Fatalf("cut at %d: %v", cut, got)
				}
				if l.Size() != last {
					t.Fatalf("cut at %d: size %d, want %d", cut, l.Size(), last)
				}
				must(t, l.Put([]byte("k9"), []byte("after")))
				must(t, l.Close())
				l = open(t, path, o)
				if got := contents(l); len(got) != 4 || got[3] != "k9=after" {
					t.Fatalf("cut at %d, after append: %v", cut, got)
				}
				must(t, l.Close())
			}
		})
	}
}

// A flipped bit in the last frame is a damaged tail (dropped); in an
// earlier frame, with good frames after it, it is an error naming the
// damaged frame's offset.
func TestCRCFlip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.log")
	starts, end := writeRecords(t, path, Options{}, 4)
	full, err := os.ReadFile(path)
	must(t, err)
	for at := int64(0); at < end; at++ {
		raw := bytes.Clone(full)
		raw[at] ^= 0x10
		must(t, os.WriteFile(path, raw, 0o644))
		l, err := Open(path, Options{})
		frame := 0
		for frame+1 < len(starts) && starts[frame+1] <= at {
			frame++
		}
		if frame == len(starts)-1 {
			if err != nil {
				t.Fatalf("flip at %d (last frame): %v", at, err)
			}
			if got := contents(l); len(got) != 3 || l.Size() != starts[3] {
				t.Fatalf("flip at %d: %v, size %d", at, got, l.Size())
			}
			l.Close()
			continue
		}
		var ce *CorruptError
		if !errors.As(err, &ce) {
			t.Fatalf("flip at %d (frame %d): got %v, want a CorruptError", at, frame, err)
		}
		if ce.Offset != starts[frame] || ce.Path != path {
			t.Fatalf("flip at %d: error %v, want offset %d", at, ce, starts[frame])
		}
	}
}

func TestRefusedWrites(t *testing.T) {
	l := open(t, filepath.Join(t.TempDir(), "x.log"), Options{Layout: LayoutKey16, MaxFrameBytes: 1024})
	if err := l.Put([]byte(appliedKey), []byte("x")); err == nil {
		t.Fatal("reserved key accepted")
	}
	if err := l.Put(make([]byte, 70000), []byte("x")); err == nil {
		t.Fatal("key over 65535 bytes accepted in key16")
	}
	if err := l.Put([]byte("k"), make([]byte, 2000)); err == nil {
		t.Fatal("frame over MaxFrameBytes accepted")
	}
	b := l.NewBatch()
	if err := b.AppendFrames(LayoutKey16.AppendFrame(nil, []byte(appliedKey), []byte("x"), false)); err == nil {
		t.Fatal("reserved key accepted in frames")
	}
	good := LayoutKey16.AppendFrame(nil, []byte("k"), []byte("v"), false)
	if err := b.AppendFrames(append(bytes.Clone(good), good[:5]...)); err == nil {
		t.Fatal("cut frame accepted")
	}
	must(t, b.AppendFrames(good))
	must(t, l.Write(b))
	// The refusals wrote nothing and did not break the log.
	if got := contents(l); !slices.Equal(got, []string{"k=v"}) || l.Size() != int64(len(good)) {
		t.Fatalf("%v size %d", got, l.Size())
	}
}

func TestAppliedIndex(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.log")
	o := Options{CompactMinBytes: 1}
	l := open(t, path, o)
	b := l.NewBatch()
	b.Put([]byte("a"), []byte("1"))
	b.SetAppliedIndex(7)
	must(t, l.Write(b))
	must(t, l.SetAppliedIndex(9))
	if err := l.SetAppliedIndex(8); err == nil {
		t.Fatal("applied index went backwards")
	}
	if i, ok := l.AppliedIndex(); !ok || i != 9 {
		t.Fatalf("applied %d %v", i, ok)
	}
	// The applied record is not a live record.
	if got := contents(l); !slices.Equal(got, []string{"a=1"}) {
		t.Fatalf("live %v", got)
	}
	before := l.Size()
	must(t, l.Compact())
	if l.Size() >= before {
		t.Fatalf("compaction kept %d of %d bytes", l.Size(), before)
	}
	must(t, l.Close())
	l = open(t, path, o)
	if i, ok := l.AppliedIndex(); !ok || i != 9 {
		t.Fatalf("after compaction and reopen: applied %d %v", i, ok)
	}
	// A write cut inside the applied record keeps the records before
	// it but not the index: a restart re-applies, never skips.
	b = l.NewBatch()
	b.Put([]byte("b"), []byte("2"))
	b.SetAppliedIndex(10)
	must(t, l.Write(b))
	size := l.Size()
	must(t, l.Close())
	must(t, os.Truncate(path, size-3))
	l = open(t, path, o)
	if i, _ := l.AppliedIndex(); i != 9 {
		t.Fatalf("cut applied record: applied %d, want 9", i)
	}
	if got := contents(l); !slices.Equal(got, []string{"a=1", "b=2"}) {
		t.Fatalf("live %v", got)
	}
}

// The log compacts itself once mostly dead, tombstoned keys do not come
// back, and the live records and applied index survive.
func TestSelfCompaction(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.log")
	o := Options{CompactMinBytes: 4096}
	l := open(t, path, o)
	for i := range 3000 {
		b := l.NewBatch()
		b.Put(fmt.Appendf(nil, "k%d", i%10), fmt.Appendf(nil, "v%d", i))
		if i%7 == 0 {
			b.Delete(fmt.Appendf(nil, "k%d", (i+3)%10))
		}
		b.SetAppliedIndex(uint64(i + 1))
		must(t, l.Write(b))
	}
	if l.Size() > 3*4096 {
		t.Fatalf("log is %d bytes: never compacted", l.Size())
	}
	want := contents(l)
	if _, err := os.Stat(path + ".tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temp file left: %v", err)
	}
	must(t, l.Close())
	l = open(t, path, o)
	if got := contents(l); !slices.Equal(got, want) {
		t.Fatalf("reopened %v, want %v", got, want)
	}
	if i, _ := l.AppliedIndex(); i != 3000 {
		t.Fatalf("applied %d", i)
	}
}

// A crash at any step of a compaction leaves the old file or the new
// one: reopening gives the same records and applied index.
func TestCompactionCrashSafety(t *testing.T) {
	for _, stage := range []string{"written", "synced", "renamed"} {
		t.Run(stage, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.log")
			crash := errors.New("crash")
			o := Options{CompactMinBytes: -1, compactHook: func(s string) error {
				if s == stage {
					return crash
				}
				return nil
			}}
			l, err := Open(path, o)
			must(t, err)
			for i := range 100 {
				b := l.NewBatch()
				b.Put(fmt.Appendf(nil, "k%d", i%7), fmt.Appendf(nil, "v%d", i))
				b.SetAppliedIndex(uint64(i + 1))
				must(t, l.Write(b))
			}
			must(t, l.Delete([]byte("k3")))
			want := contents(l)
			oldSize := l.Size()
			if err := l.Compact(); !errors.Is(err, crash) {
				t.Fatalf("compact: %v", err)
			}
			// The "process" is dead: nothing more reaches the file.
			if err := l.Put([]byte("late"), []byte("x")); err == nil {
				t.Fatal("write after a failed compaction succeeded")
			}
			l.Close()
			_, tmpErr := os.Stat(path + ".tmp")
			if (stage == "renamed") != errors.Is(tmpErr, os.ErrNotExist) {
				t.Fatalf("temp file after %s: %v", stage, tmpErr)
			}
			l2 := open(t, path, Options{CompactMinBytes: -1})
			if got := contents(l2); !slices.Equal(got, want) {
				t.Fatalf("reopened %v, want %v", got, want)
			}
			if i, _ := l2.AppliedIndex(); i != 100 {
				t.Fatalf("applied %d", i)
			}
			if stage == "renamed" && l2.Size() >= oldSize {
				t.Fatalf("renamed file is %d bytes, old %d", l2.Size(), oldSize)
			}
			if _, err := os.Stat(path + ".tmp"); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("open left the temp file: %v", err)
			}
			must(t, l2.Put([]byte("after"), []byte("y")))
		})
	}
}

// recordingIndex is a caller's Index: it sees every record in order.
type recordingIndex struct {
	keyIndex
	seen []string
}

func (x *recordingIndex) Add(r Record) {
	x.seen = append(x.seen, string(r.Key))
	x.keyIndex.Add(r)
}

func TestCustomIndex(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.log")
	x := &recordingIndex{keyIndex: *newKeyIndex()}
	l := open(t, path, Options{Index: x})
	b := l.NewBatch()
	b.Put([]byte("b"), []byte("1"))
	b.Delete([]byte("a"))
	b.SetAppliedIndex(3)
	must(t, l.Write(b))
	must(t, l.Close())
	y := &recordingIndex{keyIndex: *newKeyIndex()}
	l = open(t, path, Options{Index: y})
	for _, seen := range [][]string{x.seen, y.seen} {
		if !slices.Equal(seen, []string{"b", "a"}) {
			t.Fatalf("index saw %q", seen)
		}
	}
}

func BenchmarkPut(b *testing.B) {
	for _, size := range []int{64, 1024} {
		b.Run(fmt.Sprintf("value=%d", size), func(b *testing.B) {
			l := open(b, filepath.Join(b.TempDir(), "x.log"), Options{})
			value := bytes.Repeat([]byte{'v'}, size)
			keys := make([][]byte, 1000)
			for i := range keys {
				keys[i] = fmt.Appendf(nil, "group-%03d/topic/%d", i/10, i%10)
			}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if err := l.Put(keys[i%len(keys)], value); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPutBatch: 100 records per write, so the cost per record
// without a write(2) each.
func BenchmarkPutBatch(b *testing.B) {
	l := open(b, filepath.Join(b.TempDir(), "x.log"), Options{})
	value := bytes.Repeat([]byte{'v'}, 64)
	entries := make([]Entry, 100)
	for i := range entries {
		entries[i] = Entry{Key: fmt.Appendf(nil, "group-%03d/topic/%d", i/10, i%10), Value: value}
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := l.PutBatch(entries); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(entries)), "ns/record")
}

// heldSync opens a log whose Sync stops before its fsync until release
// is called; entered is closed when a Sync got there. A failed test
// releases it before closing the log.
func heldSync(t *testing.T, o Options) (l *Log, entered chan struct{}, release func()) {
	t.Helper()
	entered, held := make(chan struct{}), make(chan struct{})
	o.syncHook = func() {
		close(entered)
		<-held
	}
	l = open(t, filepath.Join(t.TempDir(), "x.log"), o)
	release = sync.OnceFunc(func() { close(held) })
	t.Cleanup(release) // runs before open's Close
	return l, entered, release
}

// within fails the test unless fn returns within a deadline.
func within(t *testing.T, what string, fn func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		must(t, err)
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no return within 10s", what)
	}
}

// A write does not wait for a Sync in progress.
func TestSyncDoesNotHoldWrites(t *testing.T) {
	l, entered, release := heldSync(t, Options{})
	must(t, l.Put([]byte("a"), []byte("1")))
	synced := make(chan error, 1)
	go func() { synced <- l.Sync() }()
	<-entered
	within(t, "put during a sync", func() error { return l.Put([]byte("b"), []byte("2")) })
	release()
	must(t, <-synced)
	if got := contents(l); !slices.Equal(got, []string{"a=1", "b=2"}) {
		t.Fatalf("records %v", got)
	}
}

// A compaction that replaces the file during a Sync fsynced the records
// into the new file: the Sync's fsync of the closed old file is no
// failure, and the log goes on.
func TestSyncAcrossCompaction(t *testing.T) {
	l, entered, release := heldSync(t, Options{CompactMinBytes: -1})
	for i := range 50 {
		must(t, l.Put([]byte("k"), fmt.Appendf(nil, "v%d", i)))
	}
	synced := make(chan error, 1)
	go func() { synced <- l.Sync() }()
	<-entered
	within(t, "compaction during a sync", l.Compact)
	release()
	if err := <-synced; err != nil {
		t.Fatalf("sync across a compaction: %v", err)
	}
	must(t, l.Put([]byte("k"), []byte("last")))
	if got := contents(l); !slices.Equal(got, []string{"k=last"}) {
		t.Fatalf("records %v", got)
	}
}

// A Sync with nothing written since the last one does not fsync (on most
// disks an fsync is a cache flush even with no dirty page); the first Sync
// after Open does, for what an earlier process may have left unsynced.
func TestSyncSkipsWhenNothingWritten(t *testing.T) {
	fsyncs := 0
	path := filepath.Join(t.TempDir(), "x.log")
	l := open(t, path, Options{syncHook: func() { fsyncs++ }})
	step := func(what string, fn func() error, want int) {
		t.Helper()
		must(t, fn())
		if fsyncs != want {
			t.Fatalf("%s: %d fsyncs, want %d", what, fsyncs, want)
		}
	}
	step("first Sync after Open", l.Sync, 1)
	step("Sync with nothing written", l.Sync, 1)
	step("Put", func() error { return l.Put([]byte("k"), []byte("v")) }, 1)
	step("Sync after a Put", l.Sync, 2)
	step("Sync again", l.Sync, 2)
	step("SetAppliedIndex", func() error { return l.SetAppliedIndex(7) }, 2)
	step("Sync after SetAppliedIndex", l.Sync, 3)
	must(t, l.Close())

	l2 := open(t, path, Options{Fsync: true, syncHook: func() { fsyncs++ }})
	step("first Sync after reopening", l2.Sync, 4)
	step("Put with Fsync (fsynced by the write)", func() error { return l2.Delete([]byte("k")) }, 4)
	step("Sync after a fsynced write", l2.Sync, 4)
}
