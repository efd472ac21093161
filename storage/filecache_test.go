//go:build linux

package storage

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/regent-broker/regent/storage/recordbatch"
)

// openFDs counts the process's open descriptors (Linux), or skips.
func openFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count descriptors: %v", err)
	}
	return len(ents)
}

// TestManyLogsBoundedDescriptors opens 3,000 logs (9,000 segment files)
// through a cache of 64 descriptors under an RLIMIT_NOFILE of 256, appends
// to and reads from every one of them twice over, and checks the process
// never holds more descriptors than the cache bound plus what it held
// before (and a small slack for the runtime and the directory fsyncs in
// flight). The count is kept where closing the logs (several fsyncs each)
// stays within a few seconds; the bound does not depend on it.
func TestManyLogsBoundedDescriptors(t *testing.T) {
	n := 3_000
	if testing.Short() {
		n = 1_000
	}
	const cacheMax, slack, rlimit = 64, 16, 256
	files := NewFileCache(cacheMax)
	base := openFDs(t)
	limit := base + cacheMax + slack
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	if old.Cur > rlimit && base+cacheMax+slack < rlimit {
		low := old
		low.Cur = rlimit
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })
	}
	peak := 0
	check := func(stage string, i int) {
		if i%500 != 0 {
			return
		}
		fds := openFDs(t)
		peak = max(peak, fds)
		if fds > limit {
			t.Fatalf("%s %d: %d descriptors open, bound %d (%d before, cache %d)", stage, i, fds, limit, base, cacheMax)
		}
	}
	root := t.TempDir()
	start := time.Now()
	logs := make([]*Log, n)
	defer func() {
		for _, l := range logs {
			if l != nil {
				_ = l.Close()
			}
		}
	}()
	for i := range logs {
		l, err := Open(filepath.Join(root, fmt.Sprintf("t-%d", i)), Options{Files: files, SegmentBytes: 4096})
		if err != nil {
			t.Fatalf("Open log %d: %v", i, err)
		}
		logs[i] = l
		check("open", i)
	}
	for round := range 2 {
		for i, l := range logs {
			mustAppend(t, l, simpleBatch(t, 2, 10, int64(1000+round)))
			check("append", i)
		}
		for i, l := range logs {
			data, err := l.Read(int64(round*2), 1<<10, false)
			if err != nil {
				t.Fatalf("Read log %d: %v", i, err)
			}
			bs, err := recordbatch.Split(data)
			if err != nil || len(bs) != 1 {
				t.Fatalf("Read log %d round %d: %d batches, %v", i, round, len(bs), err)
			}
			check("read", i)
		}
	}
	if got := files.Open(); got > cacheMax {
		t.Fatalf("cache holds %d descriptors, bound %d", got, cacheMax)
	}
	t.Logf("%d logs: peak %d descriptors (%d before, cache bound %d, RLIMIT_NOFILE %d), %s",
		n, peak, base, cacheMax, rlimit, time.Since(start).Round(time.Millisecond))
}

// TestCompactedSegmentReopensByNewName compacts through a tiny cache, then
// evicts every descriptor and reads the log back: the swapped-in segment
// must be reopened under its final name, not the ".cleaned" one it was
// written as.
func TestCompactedSegmentReopensByNewName(t *testing.T) {
	files := NewFileCache(minOpenFiles)
	clk := newClock(1_000_000)
	dir := t.TempDir()
	l := openLog(t, dir, Options{SegmentBytes: 300, Compact: true, Now: clk.Now, Files: files})
	defer l.Close()
	for i := range 40 {
		mustAppend(t, l, batch(t, recordbatch.CodecNone, rec{key: fmt.Sprintf("k%d", i%4), value: fmt.Sprintf("v%d", i), ts: 1000}))
	}
	if err := l.Compact(); err != nil {
		t.Fatal(err)
	}
	if got := segmentFiles(t, dir, cleanedSuffix); len(got) != 0 {
		t.Fatalf("leftover compaction output: %v", got)
	}
	// Evict everything of l by cycling other files through the cache.
	other := openLog(t, t.TempDir(), Options{SegmentBytes: 100, Files: files})
	defer other.Close()
	for i := range 2 * minOpenFiles {
		mustAppend(t, other, simpleBatch(t, 1, 100, int64(i)))
	}
	recs := readAll(t, l, l.StartOffset())
	latest := map[string]string{}
	for _, r := range recs {
		latest[r.key] = r.value
	}
	for k := range 4 {
		key := fmt.Sprintf("k%d", k)
		if want := fmt.Sprintf("v%d", 36+k); latest[key] != want {
			t.Fatalf("after compaction and reopen: %s=%q, want %q", key, latest[key], want)
		}
	}
	if len(recs) >= 40 {
		t.Fatalf("compaction removed nothing: %d records", len(recs))
	}
}

// TestRetiredSegmentStaysReadable: a reader holding a segment that
// retention deletes keeps reading it, although the cache had evicted its
// descriptor before the unlink.
func TestRetiredSegmentStaysReadable(t *testing.T) {
	files := NewFileCache(minOpenFiles)
	dir := t.TempDir()
	l := openLog(t, dir, Options{SegmentBytes: 200, RetentionBytes: 1, RetentionMs: -1, Files: files})
	defer l.Close()
	for i := range 10 {
		mustAppend(t, l, simpleBatch(t, 1, 100, int64(i)))
	}
	l.mu.RLock()
	s := l.mu.segs[0]
	v := s.view()
	if !s.acquire() {
		t.Fatal("acquire")
	}
	l.mu.RUnlock()
	defer s.release()
	other := openLog(t, t.TempDir(), Options{SegmentBytes: 100, Files: files})
	defer other.Close()
	for i := range 2 * minOpenFiles {
		mustAppend(t, other, simpleBatch(t, 1, 100, int64(i)))
	}
	if n, err := l.EnforceRetention(); err != nil || n == 0 {
		t.Fatalf("EnforceRetention: %d, %v", n, err)
	}
	if _, err := os.Stat(segmentFile(dir, s.base, logSuffix)); !os.IsNotExist(err) {
		t.Fatalf("segment %d still on disk: %v", s.base, err)
	}
	data, found, err := v.read(s.base, 1<<10, false)
	if err != nil || !found || len(data) == 0 {
		t.Fatalf("read of a deleted segment held by a reader: %d bytes, found %v, %v", len(data), found, err)
	}
}

// TestFailedOpenLeavesNothing: when Open creates the log directory and then
// fails (here: no descriptor left), the directory is removed again; an
// existing log directory is never removed by a failed Open.
func TestFailedOpenLeavesNothing(t *testing.T) {
	root := t.TempDir()
	existing := filepath.Join(root, "existing")
	if err := os.Mkdir(existing, 0o755); err != nil {
		t.Fatal(err)
	}
	fresh := filepath.Join(root, "fresh")
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	// No descriptor can be opened below this limit: the process already
	// holds more. Restored before anything else runs.
	low := old
	low.Cur = 3
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Skipf("cannot lower RLIMIT_NOFILE: %v", err)
	}
	_, errFresh := Open(fresh, Options{Files: NewFileCache(minOpenFiles)})
	_, errExisting := Open(existing, Options{Files: NewFileCache(minOpenFiles)})
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	if errFresh == nil || errExisting == nil {
		t.Fatalf("Open succeeded without descriptors: %v, %v", errFresh, errExisting)
	}
	if _, err := os.Stat(fresh); !os.IsNotExist(err) {
		t.Fatalf("failed Open left its new directory behind: %v", err)
	}
	if _, err := os.Stat(existing); err != nil {
		t.Fatalf("failed Open removed an existing directory: %v", err)
	}
}
