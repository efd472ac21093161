package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestPendingIDsExpireInOrder: many pending member ids with different
// session timeouts; some are used and one is withdrawn (LeaveGroup) before
// their deadlines. The group's next deadline is always the earliest id
// still pending, each expires at its own deadline and no earlier, and the
// queue ends empty.
func TestPendingIDsExpireInOrder(t *testing.T) {
	cfg := testConfig()
	cfg.InitialRebalanceDelay = 0
	cfg.MinSessionTimeout = time.Second
	h := newHarness(t, cfg)
	const n = 2000
	ids := make([]string, n)
	for i := range ids {
		// Timeouts from 6 s to 8 s, out of order.
		timeout := 6*time.Second + time.Duration((i*7919)%2000)*time.Millisecond
		ids[i] = h.joinResp(h.join("", withVersion(4), withTimeouts(timeout, 20*time.Second))).MemberID
	}
	if len(h.g.pending) != n {
		t.Fatalf("%d pending, want %d", len(h.g.pending), n)
	}
	// The first comes back and joins; another is withdrawn.
	if resp := h.joinResp(h.join(ids[0], withVersion(4))); resp.ErrorCode != 0 {
		t.Fatalf("pending id's join: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	h.leave(kmsg.LeaveGroupRequestMember{MemberID: ids[1]})
	start := h.now
	for len(h.g.pending) > 0 {
		next, ok := h.g.nextPending()
		if !ok {
			t.Fatalf("%d pending, no next deadline", len(h.g.pending))
		}
		for _, at := range h.g.pending {
			if at.Before(next.at) {
				t.Fatalf("next deadline %v, yet one pending expires at %v", next.at.Sub(start), at.Sub(start))
			}
		}
		before := len(h.g.pending)
		h.advance(next.at.Sub(h.now) - time.Millisecond)
		if len(h.g.pending) != before {
			t.Fatalf("%d pending ids expired before the earliest deadline", before-len(h.g.pending))
		}
		h.advance(time.Millisecond)
		if _, ok := h.g.pending[next.id]; ok {
			t.Fatalf("%s not expired at its deadline", next.id)
		}
	}
	if len(h.g.pendingQ) != 0 {
		t.Fatalf("queue holds %d entries after every id expired", len(h.g.pendingQ))
	}
}

// TestPendingBudget: pending ids of every group count against one
// budget. At the bound a group gives up its own oldest pending id for the
// new one (that id's join is then UNKNOWN_MEMBER_ID); a group holding none
// is refused with COORDINATOR_NOT_AVAILABLE until ids are released (they
// join, expire or the actor stops).
func TestPendingBudget(t *testing.T) {
	cfg := testConfig()
	cfg.InitialRebalanceDelay = 0
	cfg.Pending = NewPendingBudget(5)
	a, b := newHarness(t, cfg), newHarness(t, cfg)
	var ids []string
	for range 5 {
		ids = append(ids, a.joinResp(a.join("", withVersion(4))).MemberID)
	}
	if held, limit := cfg.Pending.Held(); held != 5 || limit != 5 {
		t.Fatalf("held %d", held)
	}
	wantCode(t, "b at the bound", b.joinResp(b.join("", withVersion(4))).ErrorCode, kerr.CoordinatorNotAvailable)
	sixth := a.joinResp(a.join("", withVersion(4)))
	wantCode(t, "a's sixth", sixth.ErrorCode, kerr.MemberIDRequired)
	if held, _ := cfg.Pending.Held(); len(a.g.pending) != 5 || held != 5 {
		t.Fatalf("the oldest id was not given up: %d pending, %d held", len(a.g.pending), held)
	}
	if _, ok := a.g.pending[ids[0]]; ok {
		t.Fatal("the oldest id is still pending")
	}
	wantCode(t, "the given-up id", a.joinResp(a.join(ids[0], withVersion(4))).ErrorCode, kerr.UnknownMemberID)
	// One joins: its id leaves the budget, and b gets one.
	if resp := a.joinResp(a.join(ids[1], withVersion(4))); resp.ErrorCode != 0 {
		t.Fatalf("join with a pending id: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	wantCode(t, "b with room", b.joinResp(b.join("", withVersion(4))).ErrorCode, kerr.MemberIDRequired)
	// Expiry releases the rest.
	a.advance(time.Minute)
	b.advance(time.Minute)
	if held, _ := cfg.Pending.Held(); held != 0 {
		t.Fatalf("after expiry: %d held", held)
	}
}

// TestPendingQueueStaysBounded: ids handed out and withdrawn at once
// (JoinGroup, then LeaveGroup of its id) leave no more queue entries than
// a small multiple of the ids still pending.
func TestPendingQueueStaysBounded(t *testing.T) {
	cfg := testConfig()
	cfg.InitialRebalanceDelay = 0
	h := newHarness(t, cfg)
	kept := h.joinResp(h.join("", withVersion(4))).MemberID
	for range 10000 {
		id := h.joinResp(h.join("", withVersion(4))).MemberID
		h.leave(kmsg.LeaveGroupRequestMember{MemberID: id})
	}
	if len(h.g.pending) != 1 || len(h.g.pendingQ) > 2*len(h.g.pending)+64 {
		t.Fatalf("%d pending, %d queued", len(h.g.pending), len(h.g.pendingQ))
	}
	if next, ok := h.g.nextPending(); !ok || next.id != kept {
		t.Fatalf("next pending %+v %v, want %s", next, ok, kept)
	}
}
