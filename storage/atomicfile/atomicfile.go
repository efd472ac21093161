// Package atomicfile replaces small files whole: a reader (or a restart
// after a crash) sees the old content or the new, never a mix.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// maxConcurrentWrites bounds the writes in progress in the process. Each
// holds two descriptors (the temporary file, then the directory) across
// an fsync; without a bound, thousands of partitions snapshotting on the
// same maintenance tick held that many at once (930 descriptors for 2,000
// partitions when fsyncs were slow), past a broker's RLIMIT_NOFILE budget.
const maxConcurrentWrites = 16

// writeSlots is the semaphore for maxConcurrentWrites; any goroutine.
var writeSlots = make(chan struct{}, maxConcurrentWrites)

// Write writes data to path via a synced temporary file (path + ".tmp"),
// a rename and a sync of the directory. It waits while
// maxConcurrentWrites other writes are in progress. On an error before
// the rename the temporary file is removed and path keeps its old
// content; an error syncing the directory means the new content is in
// place but may not survive a crash.
func Write(path string, data []byte) error {
	writeSlots <- struct{}{}
	defer func() { <-writeSlots }()
	tmp := path + ".tmp"
	if err := writeTemp(tmp, data); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("rename to %s: %w", path, err)
	}
	return syncDir(filepath.Dir(path))
}

func writeTemp(tmp string, data []byte) error {
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	return nil
}

// SyncDir fsyncs dir, making the creations, renames and removals in it
// durable. It holds a write slot (its descriptor is held across the
// fsync), so it too waits while maxConcurrentWrites writes are in
// progress.
func SyncDir(dir string) error {
	writeSlots <- struct{}{}
	defer func() { <-writeSlots }()
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open dir %s for fsync: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync dir %s: %w", dir, err)
	}
	return nil
}
