package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// TestConcurrentWrites: many goroutines writing at once, more than the
// write slots, all land their content and leave no temporary file. (The
// descriptor bound itself is measured by interop's
// TestManyPartitionsBoundedDescriptors.)
func TestConcurrentWrites(t *testing.T) {
	dir := t.TempDir()
	const writers = 200
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := filepath.Join(dir, fmt.Sprintf("f%d", i))
			if err := Write(path, []byte(fmt.Sprint(i))); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i := range writers {
		got, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("f%d", i)))
		if err != nil || string(got) != fmt.Sprint(i) {
			t.Fatalf("file %d: %q, %v", i, got, err)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(left) > 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

// TestFailedWriteLeavesOldContent: a write whose rename fails (the target
// is a directory) leaves no temporary file; SyncDir of a missing
// directory fails.
func TestFailedWriteLeavesOldContent(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "d")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(target, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(target, []byte("new")); err == nil {
		t.Fatal("a write renamed over a non-empty directory succeeded")
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(left) > 0 {
		t.Fatalf("temporary files left: %v", left)
	}
	if err := SyncDir(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("SyncDir of a missing directory succeeded")
	}
	if err := SyncDir(dir); err != nil {
		t.Fatal(err)
	}
}
