package acls

import "testing"

// TestReopenAfterClose: a closed store reloads its file in the same *Store
// and applies changes again.
func TestReopenAfterClose(t *testing.T) {
	s, err := Open(Options{DataDir: t.TempDir(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Reopen(); err == nil {
		t.Fatal("reopen of an open store succeeded")
	}
	a := allow(Topic, Literal, "t", "User:a", "*", Read)
	b := deny(Group, Prefixed, "g", "User:*", "*", All)
	if err := s.Create([]ACL{a}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := s.Create([]ACL{b}); err == nil {
		t.Fatal("a closed store applied a change")
	}
	if err := s.Reopen(); err != nil {
		t.Fatal(err)
	}
	if n := s.Set().Len(); n != 1 {
		t.Fatalf("bindings after reopen: %d, want 1", n)
	}
	if err := s.Create([]ACL{b}); err != nil {
		t.Fatalf("create after reopen: %v", err)
	}
	if n := s.Set().Len(); n != 2 {
		t.Fatalf("bindings after a change: %d, want 2", n)
	}
}
