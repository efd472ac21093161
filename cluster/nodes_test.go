package cluster

import (
	"testing"
)

// TestCoordinatorShardsFixedOnce: the coordinator shard count is unset
// until a command fixes it, the first command wins, it survives a reopen
// and a reload, and it travels as its command kind.
func TestCoordinatorShardsFixedOnce(t *testing.T) {
	dir := t.TempDir()
	n, err := OpenNodes(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c, set := n.CoordinatorShards(); set || c != 0 {
		t.Fatalf("new directory: shards %d set %v, want unset", c, set)
	}
	roundTrip := func(cmd Command) Command {
		t.Helper()
		e := cmd.(interface {
			CommandKind() string
			AppendCommand([]byte) []byte
		})
		got, err := DecodeCommand(e.CommandKind(), e.AppendCommand(nil))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if res := n.Apply(roundTrip(SetCoordinatorShards(6))); res != nil {
		t.Fatalf("apply: %v", res)
	}
	if res := n.Apply(roundTrip(SetCoordinatorShards(3))); res != nil {
		t.Fatalf("second apply: %v", res)
	}
	if c, set := n.CoordinatorShards(); !set || c != 6 {
		t.Fatalf("shards %d set %v, want 6 (the first command wins)", c, set)
	}
	again, err := OpenNodes(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c, set := again.CoordinatorShards(); !set || c != 6 {
		t.Fatalf("reopened: shards %d set %v, want 6", c, set)
	}
	// 0 is a count too: coordinators stay on the metadata group.
	other := t.TempDir()
	z, err := OpenNodes(other)
	if err != nil {
		t.Fatal(err)
	}
	if res := z.Apply(roundTrip(SetCoordinatorShards(0))); res != nil {
		t.Fatal(res)
	}
	if err := z.Reload(); err != nil {
		t.Fatal(err)
	}
	if c, set := z.CoordinatorShards(); !set || c != 0 {
		t.Fatalf("after reload: shards %d set %v, want 0 and set", c, set)
	}
	if _, err := DecodeCommand("nodes.coordinator_shards", []byte("-1")); err == nil {
		t.Fatal("a negative count decoded")
	}
}
