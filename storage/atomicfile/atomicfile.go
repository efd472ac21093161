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

// Write writes data to path via a synced temporary file, a rename and a
// sync of the directory. It waits while maxConcurrentWrites other writes
// are in progress.
func Write(path string, data []byte) error {
	writeSlots <- struct{}{}
	defer func() { <-writeSlots }()
	tmp := path + ".tmp"
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
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename to %s: %w", path, err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
