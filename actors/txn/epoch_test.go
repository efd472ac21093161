package txn

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/regent-broker/regent/interop/testwait"
)

func (p *fakePartition) epochs() []int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.coordEpochs)
}

// commitOne runs one transaction of id over tp to its commit.
func (h *harness) commitOne(id string, tp TopicPartition) {
	h.t.Helper()
	r := h.init(id, 60000)
	mustOK(h.t, "init", r)
	mustOK(h.t, "add", h.add(id, r.ProducerID, r.ProducerEpoch, tp))
	mustOK(h.t, "end", h.end(id, r.ProducerID, r.ProducerEpoch, true))
}

// TestCoordinatorEpochRises: the coordinator epoch starts at 0 in a new
// data directory, rises by one every time the coordinator loads its state
// (a restart, an activation after standby), is persisted so it never goes
// backwards, and every marker carries the activation's epoch.
func TestCoordinatorEpochRises(t *testing.T) {
	h := newHarness(t, nil)
	if e := h.c.CoordinatorEpoch(); e != 0 {
		t.Fatalf("first coordinator epoch %d, want 0", e)
	}
	h.commitOne("a", t0)
	h.reopen()
	if e := h.c.CoordinatorEpoch(); e != 1 {
		t.Fatalf("after a restart: epoch %d, want 1", e)
	}
	h.commitOne("a", t0)
	h.c.Deactivate()
	if e := h.c.CoordinatorEpoch(); e != -1 {
		t.Fatalf("on standby: epoch %d, want -1", e)
	}
	must(t, h.c.Activate())
	if e := h.c.CoordinatorEpoch(); e != 2 {
		t.Fatalf("after reactivating: epoch %d, want 2", e)
	}
	h.commitOne("a", t0)
	if got := h.parts[t0].epochs(); !slices.Equal(got, []int32{0, 1, 2}) {
		t.Fatalf("markers' coordinator epochs %v, want [0 1 2]", got)
	}
	// The store survives a restart with the epoch and without an id for
	// it: nothing lists or describes the epoch record.
	h.reopen()
	if e := h.c.CoordinatorEpoch(); e != 3 {
		t.Fatalf("after a second restart: epoch %d, want 3", e)
	}
	if got := h.c.List(ListFilter{}); len(got) != 1 || got[0].ID != "a" {
		t.Fatalf("listed %+v, want only a", got)
	}
	if _, err := h.describe(""); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("describe of the empty id: %v", err)
	}
}

// deletePart deletes tp's topic: the coordinator's lookup no longer finds it.
func (h *harness) deletePart(tp TopicPartition) {
	h.partsMu.Lock()
	defer h.partsMu.Unlock()
	delete(h.parts, tp)
}

// TestCoordinatorMarkerRefusals: a transaction completes only once every
// partition has its marker. A retriable refusal is sent again; a
// partition whose topic was deleted (UNKNOWN_TOPIC_OR_PARTITION until it
// is gone at a resend) is dropped; a fenced coordinator stops sending and
// the transaction stays pending (EndTxn answered, never complete); so does
// an unexpected error, until the coordinator reloads and sends again.
func TestCoordinatorMarkerRefusals(t *testing.T) {
	h := newHarness(t, nil)
	deleted := TopicPartition{"gone", 0}
	gone := &fakePartition{}
	for range 1000 {
		gone.refuse = append(gone.refuse, kerr.UnknownTopicOrPartition)
	}
	h.parts[deleted] = gone
	r := h.init("a", 60000)
	mustOK(t, "init", r)
	mustOK(t, "add", h.add("a", r.ProducerID, r.ProducerEpoch, t0, deleted))
	h.parts[t0].refuse = []error{kerr.NotLeaderForPartition}
	mustOK(t, "end", h.end("a", r.ProducerID, r.ProducerEpoch, true))
	if s := h.state("a"); s != StatePrepareCommit {
		t.Fatalf("a is %s while a partition lacks its marker", s)
	}
	h.deletePart(deleted)
	testwait.For(t, "a complete", testwait.Default, func() bool { return h.state("a") == StateCompleteCommit })
	if got := h.parts[t0].got(); len(got) != 1 {
		t.Fatalf("t0 markers %v, want one after the retry", got)
	}

	for i, refusal := range []error{kerr.TransactionCoordinatorFenced, kerr.InvalidProducerEpoch, kerr.CorruptMessage} {
		id := fmt.Sprintf("b%d", i)
		r := h.init(id, 60000)
		mustOK(t, "init", r)
		mustOK(t, "add", h.add(id, r.ProducerID, r.ProducerEpoch, t0, t1))
		h.parts[t1].refuse = []error{refusal}
		// EndTxn is answered once every answer is in (the decision is
		// durable); the transaction is not complete.
		mustOK(t, "end", h.end(id, r.ProducerID, r.ProducerEpoch, true))
		if s := h.state(id); s != StatePrepareCommit {
			t.Fatalf("%s: state %s after %v, want PrepareCommit", id, s, refusal)
		}
		// A reload sends the markers again, under a higher epoch.
		h.reopen()
		testwait.For(t, id+" complete after the reload", testwait.Default, func() bool { return h.state(id) == StateCompleteCommit })
		want := fmt.Sprintf("commit %d/%d", r.ProducerID, r.ProducerEpoch)
		if got := h.parts[t1].got(); got[len(got)-1] != want {
			t.Fatalf("%s: t1 markers %v, want %s last", id, got, want)
		}
	}
}
