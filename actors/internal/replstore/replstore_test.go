package replstore

import (
	"errors"
	"testing"

	"github.com/regent-broker/regent/actors/replication"
)

type nop struct{}

func (nop) Apply(replication.Command) any { return nil }

// TestRegistrationCycle: Close unregisters once; Reopen refuses an open
// store, keeps a store whose load failed closed, and registers again.
func TestRegistrationCycle(t *testing.T) {
	r := Register(nil, "k", "test", nop{})
	if r.Closed() || r.Repl() == nil {
		t.Fatal("a new registration is closed or has no replicator")
	}
	if err := r.Reopen(nop{}, func() error { return nil }); err == nil {
		t.Fatal("reopen of an open store")
	}
	r.Close()
	r.Close()
	if !r.Closed() {
		t.Fatal("not closed")
	}
	boom := errors.New("boom")
	if err := r.Reopen(nop{}, func() error { return boom }); !errors.Is(err, boom) || !r.Closed() {
		t.Fatalf("failed load: %v, closed %v", err, r.Closed())
	}
	if err := r.Reopen(nop{}, func() error { return nil }); err != nil || r.Closed() {
		t.Fatalf("reopen: %v, closed %v", err, r.Closed())
	}
}
