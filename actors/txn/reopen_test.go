package txn

import (
	"testing"
)

// TestReopenAfterClose: a closed coordinator reopens from its directory on
// standby, in the same *Coordinator: requests answer NOT_COORDINATOR until
// Activate, which resumes the transaction the store held; its store is
// registered again, so the transaction can end.
func TestReopenAfterClose(t *testing.T) {
	h := newHarness(t, nil)
	if err := h.c.Reopen(); err == nil {
		t.Fatal("reopen of an open coordinator succeeded")
	}
	r := h.init("x", 60000)
	mustOK(t, "init", r)
	mustOK(t, "add", h.add("x", r.ProducerID, r.ProducerEpoch, TopicPartition{"t", 0}))
	if err := h.c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Reopen(); err != nil {
		t.Fatal(err)
	}
	checkNotCoordinator(t, h.c)
	if err := h.c.Activate(); err != nil {
		t.Fatal(err)
	}
	if got := h.state("x"); got != StateOngoing {
		t.Fatalf("state after reopen: %v, want ongoing", got)
	}
	mustOK(t, "end after reopen", h.end("x", r.ProducerID, r.ProducerEpoch, true))
}
