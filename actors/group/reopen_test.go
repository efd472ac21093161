package group

import (
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/regent-broker/regent/actors/replication"
)

// TestReopenAfterClose: a closed manager reopens from its directory on
// standby, in the same *Manager: requests answer NOT_COORDINATOR until
// Activate, which serves what the store held; its store is registered
// again, so new commits persist.
func TestReopenAfterClose(t *testing.T) {
	sys := actor.NewActorSystem()
	m := openReplManager(t, sys, replication.NewLocal(), false)
	if err := m.Reopen(); err == nil {
		t.Fatal("reopen of an open manager succeeded")
	}
	if code := commit(t, m, commitReq("solo", "", -1, 42)); code != 0 {
		t.Fatalf("commit: error %d", code)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Reopen(); err != nil {
		t.Fatal(err)
	}
	if got := fetch(t, m, "solo"); got.ErrorCode == 0 {
		t.Fatalf("a reopened manager serves before Activate: %+v", got)
	}
	if err := m.Activate(); err != nil {
		t.Fatal(err)
	}
	if got := fetch(t, m, "solo").Topics[0].Partitions[0].Offset; got != 42 {
		t.Fatalf("offset after reopen: %d, want 42", got)
	}
	if code := commit(t, m, commitReq("solo", "", -1, 43)); code != 0 {
		t.Fatalf("commit after reopen: error %d", code)
	}
	if got := fetch(t, m, "solo").Topics[0].Partitions[0].Offset; got != 43 {
		t.Fatalf("offset committed after reopen: %d, want 43", got)
	}
}
