package topics

import (
	"errors"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestMaxPartitions: with MaxPartitions 10, creations and growth that fit
// are made, and one that would pass the bound is refused with
// POLICY_VIOLATION and leaves nothing behind.
func TestMaxPartitions(t *testing.T) {
	r, err := Open(Options{DataDir: t.TempDir(), Root: actor.NewActorSystem().Root, MaxPartitions: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Create(CreateSpec{Name: "six", Partitions: 6, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Create(CreateSpec{Name: "five", Partitions: 5, ReplicationFactor: 1}); !errors.Is(err, kerr.PolicyViolation) {
		t.Fatalf("6 + 5 partitions under a bound of 10: %v", err)
	}
	if r.Get("five") != nil {
		t.Fatal("the refused topic exists")
	}
	if _, err := r.Create(CreateSpec{Name: "four", Partitions: 4, ReplicationFactor: 1}); err != nil {
		t.Fatalf("6 + 4 partitions under a bound of 10: %v", err)
	}
	if err := r.AddPartitions("four", 5, nil, false); !errors.Is(err, kerr.PolicyViolation) {
		t.Fatalf("growing past the bound: %v", err)
	}
	if held, limit := r.Held(); held != 10 || limit != 10 {
		t.Fatalf("held %d of %d, want 10 of 10", held, limit)
	}
	if err := r.Delete("six"); err != nil {
		t.Fatal(err)
	}
	if err := r.AddPartitions("four", 8, nil, false); err != nil {
		t.Fatalf("growing within the bound after a delete: %v", err)
	}
}
