package protocol

import (
	"os"
	"path/filepath"
	"testing"
)

// TestProducerIDsReload: a reservation rewritten on disk (a snapshot
// restore) is read again; ids handed out after Resume are past it, and a
// file behind the memory state does not move the reservation back.
func TestProducerIDsReload(t *testing.T) {
	dir := t.TempDir()
	p, err := OpenProducerIDs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Next(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "meta", "producer-ids")
	if err := os.WriteFile(path, []byte("50000"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := p.Reload(); err != nil {
		t.Fatal(err)
	}
	p.Resume()
	if id, err := p.Next(); err != nil || id < 50000 {
		t.Fatalf("next after reload: %d, %v; want at least 50000", id, err)
	}
	if err := os.WriteFile(path, []byte("10"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := p.Reload(); err != nil {
		t.Fatal(err)
	}
	p.Resume()
	if id, err := p.Next(); err != nil || id < 50000 {
		t.Fatalf("next after reloading an older file: %d, %v; want at least 50000", id, err)
	}
	if err := os.WriteFile(path, []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := p.Reload(); err == nil {
		t.Fatal("reload of an unreadable reservation succeeded")
	}
}
