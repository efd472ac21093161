package txn

import (
	"testing"
	"time"

	"github.com/regent-broker/regent/interop/testwait"
)

// counts reads how many ids have an actor and how many rest.
func (h *harness) counts() (actors, resting int) {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	return len(h.c.mu.actors), len(h.c.mu.resting)
}

func (h *harness) waitCounts(what string, actors, resting int) {
	h.t.Helper()
	testwait.For(h.t, what, testwait.Default, func() bool {
		a, r := h.counts()
		return a == actors && r == resting
	})
}

// TestIdleIDsRest: an idle id's actor hands its state back and stops; the
// id stays listed and held, a request wakes it and it rests again; an id
// with a transaction open keeps its actor until the transaction is over;
// a reopen loads idle ids resting and open ones with actors; the sweeper
// expires resting ids at their expiry.
func TestIdleIDsRest(t *testing.T) {
	h := newHarness(t, nil)
	a := h.init("a", 60000)
	mustOK(t, "init a", a)
	h.waitCounts("a rests", 0, 1)
	if l := h.c.List(ListFilter{}); len(l) != 1 || l[0].ID != "a" || l[0].State != StateEmpty {
		t.Fatalf("list %+v", l)
	}
	if held, _ := h.c.Held(); held != 1 {
		t.Fatalf("held %d", held)
	}
	if tx, err := h.describe("a"); err != nil || tx.ProducerID != a.ProducerID {
		t.Fatalf("describe a resting: %+v %v", tx, err)
	}
	h.waitCounts("a rests after describe", 0, 1)

	// A transaction keeps its actor until it is over.
	mustOK(t, "add a", h.add("a", a.ProducerID, a.ProducerEpoch, t0))
	if ac, r := h.counts(); ac != 1 || r != 0 {
		t.Fatalf("ongoing: %d actors, %d resting", ac, r)
	}
	b := h.init("b", 60000)
	mustOK(t, "init b", b)
	mustOK(t, "add b", h.add("b", b.ProducerID, b.ProducerEpoch, t1))
	mustOK(t, "end a", h.end("a", a.ProducerID, a.ProducerEpoch, true))
	h.waitCounts("a rests after its commit", 1, 1)
	if got := h.parts[t0].got(); len(got) != 1 || got[0] != "commit 101/0" {
		t.Fatalf("a's markers %v", got)
	}
	// A resting id starts a new transaction: woken, and its producer
	// keeps its id and epoch.
	a2 := h.init("a", 60000)
	mustOK(t, "init a again", a2)
	if a2.ProducerID != a.ProducerID || a2.ProducerEpoch != a.ProducerEpoch+1 {
		t.Fatalf("re-init of a resting id: %+v after %+v", a2, a)
	}
	h.waitCounts("a rests again", 1, 1)

	h.reopen()
	h.waitCounts("after reopen: b ongoing, a resting", 1, 1)
	if h.state("b") != StateOngoing || h.state("a") != StateEmpty {
		t.Fatalf("after reopen: a %v, b %v", h.state("a"), h.state("b"))
	}
}

// TestRestingIDsExpire: the sweeper wakes a resting id at its expiry and
// its actor expires it.
func TestRestingIDsExpire(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.IDExpiration = 200 * time.Millisecond })
	mustOK(t, "init", h.init("x", 60000))
	h.waitCounts("x rests", 0, 1)
	testwait.For(t, "x expired", testwait.Default, func() bool {
		a, r := h.counts()
		return a == 0 && r == 0 && len(h.c.List(ListFilter{})) == 0
	})
}
