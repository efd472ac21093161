package storage

import (
	"os"
	"path/filepath"
	"testing"
)

// TestReopenRacesRetiringSegment: a reader whose descriptor was evicted
// reads the file's name; before it reopens, the owner retires the segment:
// pins the file (opening it) and unlinks it, or renames compaction's
// output over it. The reader must get the pinned descriptor and the old
// bytes. (Before, the unlink case failed with ENOENT: seen once in
// TestConcurrentReaders/tiny-cache.)
func TestReopenRacesRetiringSegment(t *testing.T) {
	t.Cleanup(func() { testHookReopen = nil })
	for _, retire := range []string{"unlink", "rename over"} {
		t.Run(retire, func(t *testing.T) {
			c := NewFileCache(minOpenFiles)
			dir := t.TempDir()
			path := filepath.Join(dir, "00000000000000000000.log")
			if err := os.WriteFile(path, []byte("old bytes"), 0o644); err != nil {
				t.Fatal(err)
			}
			lf, err := c.openLazy(path, false, false)
			if err != nil {
				t.Fatal(err)
			}
			defer lf.close()
			c.mu.Lock()
			f := lf.dropLocked() // evicted
			c.mu.Unlock()
			_ = f.Close()
			hooked := false
			testHookReopen = func(x *lazyFile) {
				if x != lf || hooked {
					return // pin's own reopen
				}
				hooked = true
				if err := lf.pin(); err != nil {
					t.Errorf("pin: %v", err)
					return
				}
				var err error
				switch retire {
				case "unlink":
					err = os.Remove(path)
				default:
					repl := path + ".cleaned"
					if err = os.WriteFile(repl, []byte("new bytes"), 0o644); err == nil {
						err = os.Rename(repl, path)
					}
				}
				if err != nil {
					t.Error(err)
				}
			}
			buf := make([]byte, 9)
			n, err := lf.ReadAt(buf, 0)
			testHookReopen = nil
			if !hooked {
				t.Fatal("the reader did not reopen the file")
			}
			if err != nil || string(buf[:n]) != "old bytes" {
				t.Fatalf("read %q, %v: want the retiring file's bytes", buf[:n], err)
			}
		})
	}
}
