package share

import (
	"fmt"
	"testing"
	"time"

	"github.com/regent-broker/regent/interop/testwait"
)

// TestDeletedShareGroupsLeaveNoActors: 10k share groups each initialised
// (an acquisition) and deleted leave no share-partition actor; a group
// used again after its deletion starts afresh.
func TestDeletedShareGroupsLeaveNoActors(t *testing.T) {
	h := newHarness(t, Config{AutoOffsetReset: "earliest"})
	h.log.append(3, false, false, -1)
	const groups = 10000
	const inFlight = 200 // bounds the requests outstanding at once
	acquired := make(chan AcquireResult, inFlight)
	deleted := make(chan int16, inFlight)
	for start := 0; start < groups; start += inFlight {
		for i := start; i < start+inFlight; i++ {
			k := Key{Group: fmt.Sprintf("g%d", i), Topic: "t", Partition: 0}
			h.m.Acquire(AcquireRequest{Key: k, Member: "a"}, func(r AcquireResult) { acquired <- r })
		}
		for range inFlight {
			if r := <-acquired; r.ErrorCode != 0 || len(r.Acquired) != 1 {
				t.Fatalf("acquire: %+v", r)
			}
		}
		for i := start; i < start+inFlight; i++ {
			h.m.DeleteGroup(fmt.Sprintf("g%d", i), func(c int16) { deleted <- c })
		}
		for range inFlight {
			if c := <-deleted; c != 0 {
				t.Fatalf("delete: %d", c)
			}
		}
	}
	testwait.For(t, "no share-partition actors", 30*time.Second, func() bool { return h.m.actorCount() == 0 })
	// and none left in the actor system's registry (but its own two:
	// deadletter and eventstream).
	if !testwait.Until(30*time.Second, func() bool { return registered(h) == 2 }) {
		for _, m := range h.sys.ProcessRegistry.LocalPIDs.LocalPIDs {
			for k := range m.Items() {
				t.Logf("registered: %s", k)
			}
		}
		t.Fatalf("%d processes registered", registered(h))
	}

	// A deleted group's share-partition comes back fresh.
	k := Key{Group: "g7", Topic: "t", Partition: 0}
	r := wait(t, func(reply func(AcquireResult)) { h.m.Acquire(AcquireRequest{Key: k, Member: "b"}, reply) })
	if len(r.Acquired) != 1 || r.Acquired[0] != (AcquiredRange{0, 2, 1}) {
		t.Fatalf("after deletion: %+v", r)
	}
	if n := h.m.actorCount(); n != 1 {
		t.Fatalf("%d actors, want 1", n)
	}
}

// TestRetireLosesNoRequest: requests sent to a share-partition with no
// state while its actor retires are all served (by it or by a new one).
func TestRetireLosesNoRequest(t *testing.T) {
	h := newHarness(t, Config{AutoOffsetReset: "earliest"})
	h.log.append(1, false, false, -1)
	unknown := Key{Group: "g", Topic: "t", Partition: 9} // no such partition: never initialised
	const n = 5000
	got := make(chan AcquireResult, n)
	for range n {
		h.m.Acquire(AcquireRequest{Key: unknown, Member: "a"}, func(r AcquireResult) { got <- r })
	}
	for i := range n {
		select {
		case <-got:
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d requests answered", i, n)
		}
	}
	testwait.For(t, "no share-partition actors", 10*time.Second, func() bool { return h.m.actorCount() == 0 })
}

// registered counts the processes in the harness's actor system.
func registered(h *harness) int {
	n := 0
	for _, m := range h.sys.ProcessRegistry.LocalPIDs.LocalPIDs {
		n += m.Count()
	}
	return n
}
