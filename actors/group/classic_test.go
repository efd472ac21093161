package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestDelayedFirstJoin(t *testing.T) {
	h := newHarness(t, testConfig())
	r1 := h.join("")
	h.waiting(r1)
	if h.g.state != PreparingRebalance {
		t.Fatalf("state %v", h.g.state)
	}
	h.advance(time.Second)
	r2 := h.join("")
	h.advance(2 * time.Second) // t=3s: the first delay ends, a member came: wait again
	h.waiting(r1)
	h.waiting(r2)
	h.advance(3*time.Second - time.Millisecond)
	h.waiting(r1)
	h.advance(time.Millisecond) // t=6s
	j1, j2 := h.joinResp(r1), h.joinResp(r2)
	if j1.Generation != 1 || j2.Generation != 1 {
		t.Fatalf("generations %d %d", j1.Generation, j2.Generation)
	}
	if j1.LeaderID != j1.MemberID || j2.LeaderID != j1.MemberID {
		t.Fatalf("leader %q/%q, want %q", j1.LeaderID, j2.LeaderID, j1.MemberID)
	}
	if len(j1.Members) != 2 || len(j2.Members) != 0 {
		t.Fatalf("leader got %d members, follower %d", len(j1.Members), len(j2.Members))
	}
	if string(j1.Members[1].ProtocolMetadata) != "md-range" || *j1.Protocol != "range" || *j1.ProtocolType != "consumer" {
		t.Fatalf("leader response %+v", j1)
	}
	if h.g.state != CompletingRebalance {
		t.Fatalf("state %v", h.g.state)
	}
}

func TestInitialDelayBoundedByRebalanceTimeout(t *testing.T) {
	h := newHarness(t, testConfig())
	// Rebalance timeout 10s, delay 3s: new members every 2s keep
	// extending the delay until the rebalance timeout (10s) is used up.
	first := h.join("", withTimeouts(10*time.Second, 10*time.Second))
	for i := 0; i < 4; i++ {
		h.advance(2 * time.Second)
		h.join("", withTimeouts(10*time.Second, 10*time.Second))
	}
	h.advance(2*time.Second - time.Millisecond) // t=9.999s... 10s deadline
	h.waiting(first)
	h.advance(time.Millisecond)
	if h.joinResp(first).ErrorCode != 0 || h.g.generation != 1 || len(h.g.members) != 5 {
		t.Fatalf("gen %d members %d", h.g.generation, len(h.g.members))
	}
}

func TestZeroInitialDelayCompletesAtOnce(t *testing.T) {
	cfg := testConfig()
	cfg.InitialRebalanceDelay = 0
	h := newHarness(t, cfg)
	r := h.join("")
	if resp := h.joinResp(r); resp.ErrorCode != 0 || resp.Generation != 1 {
		t.Fatalf("join: %+v", resp)
	}
}

func TestMemberIDRequired(t *testing.T) {
	cfg := testConfig()
	cfg.InitialRebalanceDelay = 0
	h := newHarness(t, cfg)
	r := h.join("", withVersion(4))
	resp := h.joinResp(r)
	wantCode(t, "first join", resp.ErrorCode, kerr.MemberIDRequired)
	if resp.MemberID == "" {
		t.Fatal("no member id handed out")
	}
	if !h.g.Live() || h.g.state != Empty {
		t.Fatalf("live %v state %v", h.g.Live(), h.g.state)
	}
	r2 := h.join(resp.MemberID, withVersion(4))
	if j := h.joinResp(r2); j.ErrorCode != 0 || j.MemberID != resp.MemberID || j.LeaderID != resp.MemberID {
		t.Fatalf("second join %+v", j)
	}

	// An id handed out but never used expires after the session timeout.
	r3 := h.join("", withVersion(6))
	id := h.joinResp(r3).MemberID
	if _, ok := h.g.pending[id]; !ok {
		t.Fatal("not pending")
	}
	h.advance(10 * time.Second)
	if _, ok := h.g.pending[id]; ok {
		t.Fatal("pending member did not expire")
	}
	wantCode(t, "expired id", h.joinResp(h.join(id, withVersion(6))).ErrorCode, kerr.UnknownMemberID)
}

func TestRejoinRebalancesAndBumpsGeneration(t *testing.T) {
	cfg := testConfig()
	cfg.InitialRebalanceDelay = 0
	h := newHarness(t, cfg)
	ids := h.stableGroup(1)
	r2 := h.join("")
	h.waiting(r2)
	if h.g.state != PreparingRebalance {
		t.Fatalf("state %v", h.g.state)
	}
	wantCode(t, "heartbeat in rebalance", h.heartbeat(ids[0], 1), kerr.RebalanceInProgress)
	r1 := h.join(ids[0])
	j1, j2 := h.joinResp(r1), h.joinResp(r2)
	if j1.Generation != 2 || j2.Generation != 2 || j1.LeaderID != ids[0] {
		t.Fatalf("rejoin: %+v %+v", j1, j2)
	}
	wantCode(t, "old generation", h.heartbeat(ids[0], 1), kerr.IllegalGeneration)
	wantCode(t, "completing", h.heartbeat(ids[0], 2), nil)
}

func TestRebalanceTimeoutDropsSilentMembers(t *testing.T) {
	cfg := testConfig()
	cfg.InitialRebalanceDelay = 0
	h := newHarness(t, cfg)
	ids := h.stableGroup(2)
	r3 := h.join("")
	r1 := h.join(ids[0])
	// ids[1] heartbeats (its session stays alive) but does not rejoin.
	for i := 0; i < 4; i++ {
		h.advance(19 * time.Second / 4)
		wantCode(t, "heartbeat", h.heartbeat(ids[1], 1), kerr.RebalanceInProgress)
	}
	h.waiting(r1)
	h.advance(time.Second) // the 20s rebalance timeout
	if h.joinResp(r1).Generation != 2 || h.joinResp(r3).Generation != 2 {
		t.Fatal("join phase did not end at the rebalance timeout")
	}
	if _, ok := h.g.members[ids[1]]; ok || len(h.g.members) != 2 {
		t.Fatalf("silent member kept: %d members", len(h.g.members))
	}
	wantCode(t, "removed member", h.heartbeat(ids[1], 2), kerr.UnknownMemberID)
}

func TestSessionExpiryRemovesMember(t *testing.T) {
	cfg := testConfig()
	cfg.InitialRebalanceDelay = 0
	h := newHarness(t, cfg)
	ids := h.stableGroup(2)
	for i := 0; i < 2; i++ {
		h.advance(4 * time.Second)
		wantCode(t, "heartbeat", h.heartbeat(ids[0], 1), nil)
	}
	h.advance(3 * time.Second)
	// ids[1] has been silent for 11s > its 10s session.
	if _, ok := h.g.members[ids[1]]; ok {
		t.Fatal("member not expired")
	}
	if h.g.state != PreparingRebalance {
		t.Fatalf("state %v", h.g.state)
	}
	wantCode(t, "heartbeat", h.heartbeat(ids[0], 1), kerr.RebalanceInProgress)
	r := h.join(ids[0])
	if j := h.joinResp(r); j.Generation != 2 || len(j.Members) != 1 {
		t.Fatalf("rejoin %+v", j)
	}
}

func TestSyncDistributesAssignments(t *testing.T) {
	cfg := testConfig()
	cfg.InitialRebalanceDelay = 0
	h := newHarness(t, cfg)
	h.cfg.InitialRebalanceDelay = time.Second
	r1, r2, r3 := h.join(""), h.join(""), h.join("")
	h.advance(2 * time.Second)
	h.cfg.InitialRebalanceDelay = 0
	a, b, c := h.joinResp(r1).MemberID, h.joinResp(r2).MemberID, h.joinResp(r3).MemberID
	if h.joinResp(r1).LeaderID != a {
		t.Fatal("first member should lead")
	}
	sb := h.sync(b, 1, nil)
	h.waiting(sb)
	sa := h.sync(a, 1, map[string]string{a: "A", b: "B"}) // c is left out
	if got := h.syncResp(sb); got.ErrorCode != 0 || string(got.MemberAssignment) != "B" || *got.Protocol != "range" {
		t.Fatalf("follower sync %+v", got)
	}
	if got := h.syncResp(sa); string(got.MemberAssignment) != "A" {
		t.Fatalf("leader sync %+v", got)
	}
	if h.g.state != Stable {
		t.Fatalf("state %v", h.g.state)
	}
	// A member syncing after the group is stable gets its assignment at
	// once; one the leader left out gets an empty one.
	if got := h.syncResp(h.sync(c, 1, nil)); got.ErrorCode != 0 || len(got.MemberAssignment) != 0 {
		t.Fatalf("late sync %+v", got)
	}
	if got := h.syncResp(h.sync(b, 1, nil)); string(got.MemberAssignment) != "B" {
		t.Fatalf("repeat sync %+v", got)
	}
	if n := len(h.records); n == 0 || h.records[n-1].Kind != RecGroup || len(h.records[n-1].Meta.Members) != 3 {
		t.Fatal("assignment not persisted")
	}
}

func TestSyncErrors(t *testing.T) {
	cfg := testConfig()
	cfg.InitialRebalanceDelay = 0
	h := newHarness(t, cfg)
	ids := h.stableGroup(2)
	wantCode(t, "unknown member", h.syncResp(h.sync("nobody", 1, nil)).ErrorCode, kerr.UnknownMemberID)
	wantCode(t, "old generation", h.syncResp(h.sync(ids[1], 0, nil)).ErrorCode, kerr.IllegalGeneration)
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group, req.MemberID, req.Generation = "g", ids[1], 1
	other := "roundrobin"
	req.Protocol = &other
	ref := h.ref()
	h.apply(h.g.Sync(h.now, ref, req))
	wantCode(t, "protocol", h.syncResp(ref).ErrorCode, kerr.InconsistentGroupProtocol)
	h.join("")
	wantCode(t, "rebalancing", h.syncResp(h.sync(ids[1], 1, nil)).ErrorCode, kerr.RebalanceInProgress)

	fresh := newHarness(t, cfg)
	wantCode(t, "no group", fresh.syncResp(fresh.sync("x", 1, nil)).ErrorCode, kerr.UnknownMemberID)
}

func TestRebalanceAnswersWaitingSyncs(t *testing.T) {
	cfg := testConfig()
	cfg.InitialRebalanceDelay = 0
	h := newHarness(t, cfg)
	h.cfg.InitialRebalanceDelay = time.Second
	r1, r2 := h.join(""), h.join("")
	h.advance(2 * time.Second)
	h.cfg.InitialRebalanceDelay = 0
	b := h.joinResp(r2).MemberID
	sb := h.sync(b, 1, nil)
	h.join("") // a new member: back to PreparingRebalance
	wantCode(t, "waiting sync", h.syncResp(sb).ErrorCode, kerr.RebalanceInProgress)
	_ = r1
}

func TestPendingSyncExpiry(t *testing.T) {
	cfg := testConfig()
	cfg.InitialRebalanceDelay = 0
	h := newHarness(t, cfg)
	h.cfg.InitialRebalanceDelay = time.Second
	r1, r2 := h.join(""), h.join("")
	h.advance(2 * time.Second)
	h.cfg.InitialRebalanceDelay = 0
	a, b := h.joinResp(r1).MemberID, h.joinResp(r2).MemberID
	h.sync(a, 1, map[string]string{a: "A", b: "B"})
	// b heartbeats but never syncs: dropped at the rebalance timeout.
	for i := 0; i < 4; i++ {
		h.advance(5 * time.Second)
		h.heartbeat(b, 1)
		h.heartbeat(a, 1)
	}
	if _, ok := h.g.members[b]; ok {
		t.Fatal("member that never synced is still in the group")
	}
	if h.g.state != PreparingRebalance {
		t.Fatalf("state %v, want a rebalance after the sync deadline", h.g.state)
	}
	wantCode(t, "survivor", h.heartbeat(a, 1), kerr.RebalanceInProgress)
}

func TestHeartbeatErrors(t *testing.T) {
	cfg := testConfig()
	cfg.InitialRebalanceDelay = 0
	for _, tc := range []struct {
		name     string
		member   string
		gen      int32
		instance []string
		want     *kerr.Error
	}{
		{"ok", "client-1", 1, nil, nil},
		{"unknown member", "client-99", 1, nil, kerr.UnknownMemberID},
		{"old generation", "client-1", 0, nil, kerr.IllegalGeneration},
		{"future generation", "client-1", 2, nil, kerr.IllegalGeneration},
		{"unknown instance", "client-1", 1, []string{"nope"}, kerr.UnknownMemberID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, cfg)
			h.stableGroup(1)
			wantCode(t, tc.name, h.heartbeat(tc.member, tc.gen, tc.instance...), tc.want)
		})
	}
	h := newHarness(t, cfg)
	wantCode(t, "no group", h.heartbeat("x", 1), kerr.UnknownMemberID)
}

func TestLeave(t *testing.T) {
	cfg := testConfig()
	cfg.InitialRebalanceDelay = 0
	h := newHarness(t, cfg)
	ids := h.stableGroup(3)
	resp := h.leave(
		kmsg.LeaveGroupRequestMember{MemberID: ids[0]},
		kmsg.LeaveGroupRequestMember{MemberID: "nobody"},
	)
	wantCode(t, "leader leaves", resp.Members[0].ErrorCode, nil)
	wantCode(t, "unknown leaves", resp.Members[1].ErrorCode, kerr.UnknownMemberID)
	if h.g.leader != ids[1] {
		t.Fatalf("leader %s, want %s", h.g.leader, ids[1])
	}
	if h.g.state != PreparingRebalance {
		t.Fatalf("state %v", h.g.state)
	}
	r1, r2 := h.join(ids[1]), h.join(ids[2])
	if h.joinResp(r1).Generation != 2 || h.joinResp(r2).LeaderID != ids[1] {
		t.Fatal("rebalance after leave")
	}
	h.leave(kmsg.LeaveGroupRequestMember{MemberID: ids[1]}, kmsg.LeaveGroupRequestMember{MemberID: ids[2]})
	if h.g.state != Empty || h.g.generation != 3 {
		t.Fatalf("after everyone left: %v gen %d", h.g.state, h.g.generation)
	}
}

func TestLeaveAnswersWaitingJoin(t *testing.T) {
	h := newHarness(t, testConfig())
	r := h.join("")
	// v5 join: the member is in the group (waiting for the delay).
	id := ""
	for mid := range h.g.members {
		id = mid
	}
	h.leave(kmsg.LeaveGroupRequestMember{MemberID: id})
	wantCode(t, "waiting join", h.joinResp(r).ErrorCode, kerr.UnknownMemberID)
	h.advance(time.Minute)
	if h.g.state != Empty || len(h.open) != 0 {
		t.Fatalf("state %v, %d requests waiting", h.g.state, len(h.open))
	}
}

func TestProtocolSelection(t *testing.T) {
	cfg := testConfig()
	cfg.InitialRebalanceDelay = 0
	h := newHarness(t, cfg)
	h.cfg.InitialRebalanceDelay = time.Second
	h.join("", withProtocols("range", "roundrobin", "sticky"))
	h.join("", withProtocols("roundrobin", "range"))
	r := h.join("", withProtocols("roundrobin", "cooperative-sticky", "range"))
	h.advance(2 * time.Second)
	if p := *h.joinResp(r).Protocol; p != "roundrobin" {
		t.Fatalf("selected %q, want roundrobin (two first choices)", p)
	}
	// No protocol in common with the group: refused.
	wantCode(t, "no common protocol", h.joinResp(h.join("", withProtocols("sticky"))).ErrorCode, kerr.InconsistentGroupProtocol)
	wantCode(t, "other type", h.joinResp(h.join("", withType("connect"))).ErrorCode, kerr.InconsistentGroupProtocol)
}

func TestOpaqueProtocolTypes(t *testing.T) {
	cfg := testConfig()
	cfg.InitialRebalanceDelay = 0
	for _, pt := range []string{"connect", "consumer", "my-streams-thing"} {
		h := newHarness(t, cfg)
		h.cfg.InitialRebalanceDelay = time.Second
		r1 := h.join("", withType(pt), withProtocols("sessioned"), withMetadata("\x00\x01opaque"))
		h.join("", withType(pt), withProtocols("sessioned"), withMetadata("\xff\xfe"))
		h.advance(2 * time.Second)
		j := h.joinResp(r1)
		if j.ErrorCode != 0 || *j.ProtocolType != pt || len(j.Members) != 2 || string(j.Members[0].ProtocolMetadata) != "\x00\x01opaque" || string(j.Members[1].ProtocolMetadata) != "\xff\xfe" {
			t.Fatalf("%s: %+v", pt, j)
		}
	}
}

func TestSessionTimeoutBounds(t *testing.T) {
	h := newHarness(t, testConfig())
	wantCode(t, "too short", h.joinResp(h.join("", withTimeouts(time.Second, time.Second))).ErrorCode, kerr.InvalidSessionTimeout)
	wantCode(t, "too long", h.joinResp(h.join("", withTimeouts(time.Hour, time.Hour))).ErrorCode, kerr.InvalidSessionTimeout)
	if h.g.Live() {
		t.Fatal("a refused join created the group")
	}
	wantCode(t, "unknown member on new group", h.joinResp(h.join("someone")).ErrorCode, kerr.UnknownMemberID)
}

func TestStaticMemberRejoinWithoutRebalance(t *testing.T) {
	cfg := testConfig()
	cfg.InitialRebalanceDelay = 0
	h := newHarness(t, cfg)
	h.cfg.InitialRebalanceDelay = time.Second
	ra := h.join("", withInstance("a"))
	rb := h.join("", withInstance("b"))
	h.advance(2 * time.Second)
	a, b := h.joinResp(ra).MemberID, h.joinResp(rb).MemberID
	h.sync(a, 1, map[string]string{a: "A", b: "B"})
	h.sync(b, 1, nil)
	nrec := len(h.records)

	// b restarts: same instance id, no member id, same protocols.
	rb2 := h.join("", withInstance("b"))
	j := h.joinResp(rb2)
	if j.ErrorCode != 0 || j.MemberID == b || j.Generation != 1 || j.LeaderID != a {
		t.Fatalf("static rejoin %+v", j)
	}
	if h.g.state != Stable {
		t.Fatalf("static rejoin rebalanced: %v", h.g.state)
	}
	if len(h.records) != nrec+1 || h.records[nrec].Meta.Members[1].MemberID != j.MemberID {
		t.Fatal("the new member id was not persisted")
	}
	if got := h.syncResp(h.sync(j.MemberID, 1, nil)); string(got.MemberAssignment) != "B" {
		t.Fatalf("new id lost the assignment: %+v", got)
	}
	wantCode(t, "old id fenced", h.heartbeat(b, 1, "b"), kerr.FencedInstanceID)
	wantCode(t, "old id, no instance", h.heartbeat(b, 1), kerr.UnknownMemberID)
	wantCode(t, "new id", h.heartbeat(j.MemberID, 1, "b"), nil)
	wantCode(t, "old id join", h.joinResp(h.join(b, withInstance("b"))).ErrorCode, kerr.FencedInstanceID)

	// The leader restarting: before v9 it is told the old leader id so
	// that it does not assign; v9+ says SkipAssignment.
	ra2 := h.join("", withInstance("a"))
	if j := h.joinResp(ra2); j.LeaderID != a || j.MemberID == a || len(j.Members) != 0 {
		t.Fatalf("leader static rejoin v5 %+v", j)
	}
	ra3 := h.join("", withInstance("a"), withVersion(9))
	if j := h.joinResp(ra3); !j.SkipAssignment || j.LeaderID != j.MemberID || len(j.Members) != 2 {
		t.Fatalf("leader static rejoin v9 %+v", j)
	}
	if h.g.state != Stable || h.g.generation != 1 {
		t.Fatal("static rejoins rebalanced")
	}
}

func TestStaticMemberProtocolChangeRebalances(t *testing.T) {
	cfg := testConfig()
	cfg.InitialRebalanceDelay = 0
	h := newHarness(t, cfg)
	r := h.join("", withInstance("a"), withProtocols("range", "roundrobin"))
	a := h.joinResp(r).MemberID
	h.sync(a, 1, map[string]string{a: "A"})
	r2 := h.join("", withInstance("a"), withProtocols("roundrobin", "range"))
	if j := h.joinResp(r2); j.Generation != 2 || *j.Protocol != "roundrobin" {
		t.Fatalf("protocol change: %+v", j)
	}
}

func TestStaticMemberKeptThroughRebalance(t *testing.T) {
	cfg := testConfig()
	cfg.InitialRebalanceDelay = 0
	h := newHarness(t, cfg)
	h.cfg.InitialRebalanceDelay = time.Second
	ra := h.join("", withInstance("a"))
	rb := h.join("")
	h.advance(2 * time.Second)
	a, b := h.joinResp(ra).MemberID, h.joinResp(rb).MemberID
	h.sync(b, 1, map[string]string{a: "A", b: "B"})
	h.sync(a, 1, nil)
	h.join("") // new member; a (static) does not rejoin, b does
	h.join(b)
	for i := 0; i < 4; i++ {
		h.advance(5 * time.Second)
		h.heartbeat(a, 1, "a")
	}
	if _, ok := h.g.members[a]; !ok {
		t.Fatal("static member dropped at the end of the join phase")
	}
	// ...but it must sync: it is dropped at the sync deadline otherwise.
	h.advance(20 * time.Second)
	if _, ok := h.g.members[a]; ok {
		t.Fatal("silent static member never dropped")
	}
}

func TestStaticLeaveByInstanceID(t *testing.T) {
	cfg := testConfig()
	cfg.InitialRebalanceDelay = 0
	h := newHarness(t, cfg)
	r := h.join("", withInstance("a"))
	a := h.joinResp(r).MemberID
	h.sync(a, 1, nil)
	inst := "a"
	resp := h.leave(kmsg.LeaveGroupRequestMember{InstanceID: &inst})
	wantCode(t, "admin leave", resp.Members[0].ErrorCode, nil)
	if h.g.state != Empty || len(h.g.static) != 0 {
		t.Fatalf("state %v", h.g.state)
	}
	wantCode(t, "again", h.leave(kmsg.LeaveGroupRequestMember{InstanceID: &inst}).Members[0].ErrorCode, kerr.UnknownMemberID)
}

func TestDuplicateJoinAnswersTheOldOne(t *testing.T) {
	h := newHarness(t, testConfig())
	r1 := h.join("")
	id := h.g.order[0].id
	r2 := h.join(id)
	wantCode(t, "replaced join", h.joinResp(r1).ErrorCode, kerr.RebalanceInProgress)
	h.advance(3 * time.Second)
	if h.joinResp(r2).ErrorCode != 0 {
		t.Fatal("second join failed")
	}
}

func TestNewMemberJoinTimeout(t *testing.T) {
	cfg := testConfig()
	cfg.InitialRebalanceDelay = 0
	h := newHarness(t, cfg)
	ids := h.stableGroup(1)
	// A new member joins; the old one keeps heartbeating but never
	// rejoins, and has a huge rebalance timeout: the new member's join is
	// bounded by NewMemberJoinTimeout.
	h.g.members[ids[0]].rebalanceTimeout = time.Hour
	r := h.join("", withTimeouts(10*time.Second, time.Hour))
	for i := 0; i < 59; i++ {
		h.advance(5 * time.Second)
		wantCode(t, "heartbeat", h.heartbeat(ids[0], 1), kerr.RebalanceInProgress)
	}
	h.waiting(r)
	h.advance(5 * time.Second)
	wantCode(t, "timed out join", h.joinResp(r).ErrorCode, kerr.UnknownMemberID)
}

func TestAllMembersExpireToEmpty(t *testing.T) {
	cfg := testConfig()
	cfg.InitialRebalanceDelay = 0
	h := newHarness(t, cfg)
	h.stableGroup(2)
	h.advance(time.Minute)
	if h.g.state != Empty || len(h.g.members) != 0 || h.g.generation != 2 {
		t.Fatalf("state %v members %d gen %d", h.g.state, len(h.g.members), h.g.generation)
	}
	last := h.records[len(h.records)-1]
	if last.Kind != RecGroup || last.Meta.Generation != 2 || len(last.Meta.Members) != 0 {
		t.Fatalf("empty group not persisted: %+v", last)
	}
}
