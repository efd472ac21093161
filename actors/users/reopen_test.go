package users

import "testing"

// TestReopenAfterClose: a closed store reloads its file in the same *Store
// and applies changes again.
func TestReopenAfterClose(t *testing.T) {
	s, err := Open(Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Reopen(); err == nil {
		t.Fatal("reopen of an open store succeeded")
	}
	if _, err := s.Alter([]Upsert{upsert(t, "alice", "pw", ScramSHA256, 4096)}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Reopen(); err != nil {
		t.Fatal(err)
	}
	if c, ok := s.Lookup("alice", ScramSHA256); !ok || !c.Verify("pw") {
		t.Fatal("alice's credential is gone after reopen")
	}
	if _, err := s.Alter([]Upsert{upsert(t, "bob", "pw", ScramSHA512, 4096)}, nil); err != nil {
		t.Fatalf("alter after reopen: %v", err)
	}
	if _, ok := s.Lookup("bob", ScramSHA512); !ok {
		t.Fatal("a credential added after reopen is missing")
	}
}
