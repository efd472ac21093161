package cluster

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
)

// hashicorp/raft-wal#31 (fixed in v0.4.1): a follower's raft clears a log suffix it got from a deposed leader
// (DeleteRange of the tail), appends the new leader's entries, and is
// killed; it must read its log back.
func TestWALTailTruncationSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := openWALStore(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	var logs []*raft.Log
	for i := uint64(1); i <= 10; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Data: []byte("x")})
	}
	if err := s.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRange(8, 10); err != nil {
		t.Fatal(err)
	}
	logs = nil
	for i := uint64(8); i <= 12; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 2, Data: []byte("y")})
	}
	if err := s.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	// Not closed: the process is killed. (The wal's meta db stays locked in
	// this process, so reopen a copy of the directory.)
	copyDir(t, dir, dir+".copy")
	s2, err := openWALStore(dir+".copy", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	for i := uint64(1); i <= 12; i++ {
		var l raft.Log
		if err := s2.GetLog(i, &l); err != nil {
			t.Fatalf("GetLog(%d) after reopen: %v", i, err)
		}
	}
}

// copyDir copies src's regular files into dst (one level: the wal keeps
// its segments and meta db side by side).
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
