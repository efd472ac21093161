package protocol

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestShareSessionEpochs(t *testing.T) {
	c := newShareSessions(2)
	k := shareSessionKey{group: "g", member: "m1"}
	p0 := sharePart{topicID: [16]byte{1}, topic: "t", partition: 0}
	p1 := sharePart{topicID: [16]byte{1}, topic: "t", partition: 1}

	if _, _, err := c.next(k, 1, nil, nil); err != kerr.ShareSessionNotFound {
		t.Fatalf("next without a session: %v, want SHARE_SESSION_NOT_FOUND", err)
	}
	if rel, err := c.open(k, []sharePart{p0, p0}, 0); err != nil || rel != nil {
		t.Fatalf("open: released %v, err %v", rel, err)
	}
	if _, _, err := c.next(k, 2, nil, nil); err != kerr.InvalidShareSessionEpoch {
		t.Fatalf("epoch 2 after open: %v, want INVALID_SHARE_SESSION_EPOCH", err)
	}
	parts, forgotten, err := c.next(k, 1, []sharePart{p1}, nil)
	if err != nil || len(parts) != 2 || forgotten != nil {
		t.Fatalf("epoch 1: parts %v forgotten %v err %v", parts, forgotten, err)
	}
	if _, _, err := c.next(k, 1, nil, nil); err != kerr.InvalidShareSessionEpoch {
		t.Fatalf("epoch 1 again: %v, want INVALID_SHARE_SESSION_EPOCH", err)
	}
	// Forgotten partitions come by id only; the session's own entry (with
	// the topic's name) is handed back.
	parts, forgotten, err = c.next(k, 2, nil, []sharePart{{topicID: p0.topicID, partition: 0}, {topicID: [16]byte{9}}})
	if err != nil || len(parts) != 1 || parts[0] != p1 || len(forgotten) != 1 || forgotten[0] != p0 {
		t.Fatalf("forget: parts %v forgotten %v err %v", parts, forgotten, err)
	}
	if err := c.check(k, 3); err != nil {
		t.Fatalf("check 3: %v", err)
	}
	if err := c.check(k, -1); err != nil {
		t.Fatalf("check -1: %v", err)
	}
	// Opening again replaces the session and hands back its partitions.
	rel, err := c.open(k, []sharePart{p0}, 0)
	if err != nil || len(rel) != 1 || rel[0] != p1 {
		t.Fatalf("reopen: released %v err %v", rel, err)
	}
	if _, _, err := c.next(k, 1, nil, nil); err != nil {
		t.Fatalf("epoch 1 after reopen: %v", err)
	}
	closed, err := c.close(k)
	if err != nil || len(closed) != 1 || closed[0] != p0 {
		t.Fatalf("close: %v %v", closed, err)
	}
	if _, err := c.close(k); err != kerr.ShareSessionNotFound {
		t.Fatalf("close twice: %v", err)
	}
}

func TestShareSessionEpochWraps(t *testing.T) {
	if got := nextShareEpoch(1<<31 - 1); got != 1 {
		t.Fatalf("next of max int32 = %d, want 1", got)
	}
	if got := nextShareEpoch(7); got != 8 {
		t.Fatalf("next of 7 = %d", got)
	}
}

func TestShareSessionLimit(t *testing.T) {
	c := newShareSessions(2)
	for _, m := range []string{"a", "b"} {
		if _, err := c.open(shareSessionKey{group: "g", member: m}, nil, 0); err != nil {
			t.Fatalf("open %s: %v", m, err)
		}
	}
	if _, err := c.open(shareSessionKey{group: "g", member: "c"}, nil, 0); err != kerr.ShareSessionLimitReached {
		t.Fatalf("third session: %v, want SHARE_SESSION_LIMIT_REACHED", err)
	}
	// A member reopening its own session is not a new one.
	if _, err := c.open(shareSessionKey{group: "g", member: "a"}, nil, 0); err != nil {
		t.Fatalf("reopen within the limit: %v", err)
	}
	if got := c.closeMember("g", "b"); got != nil {
		t.Fatalf("closeMember of a session without parts: %v", got)
	}
	if c.len() != 1 {
		t.Fatalf("len %d, want 1", c.len())
	}
	if _, err := c.open(shareSessionKey{group: "h", member: "c"}, nil, 0); err != nil {
		t.Fatalf("open after a close: %v", err)
	}
	if got := c.closeGroup("g"); len(got) != 1 {
		t.Fatalf("closeGroup: %v", got)
	}
	if c.len() != 1 {
		t.Fatalf("len %d after closeGroup, want 1", c.len())
	}
}

func TestShareSessionsByConnection(t *testing.T) {
	c := newShareSessions(10)
	p := sharePart{topicID: [16]byte{1}, topic: "t"}
	a, b, d := shareSessionKey{group: "g", member: "a"}, shareSessionKey{group: "g", member: "b"}, shareSessionKey{group: "g", member: "d"}
	for _, o := range []struct {
		k    shareSessionKey
		conn uint64
	}{{a, 7}, {b, 7}, {d, 8}} {
		if _, err := c.open(o.k, []sharePart{p}, o.conn); err != nil {
			t.Fatal(err)
		}
	}
	// a reopens on connection 9: connection 7's close no longer ends it.
	if _, err := c.open(a, []sharePart{p}, 9); err != nil {
		t.Fatal(err)
	}
	got := c.closeConn(7)
	if len(got) != 1 || got[b] == nil {
		t.Fatalf("closeConn(7) = %v, want b's session", got)
	}
	if got := c.closeConn(7); got != nil {
		t.Fatalf("closeConn(7) again = %v", got)
	}
	if _, err := c.close(d); err != nil {
		t.Fatal(err)
	}
	if got := c.closeConn(8); got != nil {
		t.Fatalf("closeConn(8) after d closed = %v", got)
	}
	if got := c.closeConn(9); len(got) != 1 || got[a] == nil {
		t.Fatalf("closeConn(9) = %v, want a's session", got)
	}
	if c.len() != 0 || len(c.mu.byConn) != 0 {
		t.Fatalf("left %d sessions, %d connections indexed", c.len(), len(c.mu.byConn))
	}
}
