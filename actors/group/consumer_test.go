package group

import (
	"fmt"
	"math/rand"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type fakeTopics map[string]topicMeta

func (f fakeTopics) Topic(name string) ([16]byte, int32, bool) {
	t, ok := f[name]
	return t.id, t.partitions, ok
}

func (f fakeTopics) TopicNames() []string {
	var out []string
	for n := range f {
		out = append(out, n)
	}
	return out
}

func (f fakeTopics) add(name string, partitions int32) {
	id := [16]byte{byte(len(f) + 1)}
	if t, ok := f[name]; ok {
		id = t.id
	}
	f[name] = topicMeta{name: name, id: id, partitions: partitions}
}

// cgClient is a scripted KIP-848 member: it remembers its epoch and owned
// partitions, as a client would.
type cgClient struct {
	h        *harness
	topics   fakeTopics
	id       string
	instance *string
	subs     []string
	assignor *string
	epoch    int32
	owned    assignment
}

func (h *harness) cgMember(topics fakeTopics, id string, subs ...string) *cgClient {
	return &cgClient{h: h, topics: topics, id: id, subs: subs}
}

// beat sends a full heartbeat (subscriptions and owned partitions) and
// adopts the assignment it gets back.
func (c *cgClient) beat() *kmsg.ConsumerGroupHeartbeatResponse {
	c.h.t.Helper()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID, req.MemberEpoch = "g", c.id, c.epoch
	req.InstanceID = c.instance
	req.RebalanceTimeoutMillis = 30_000
	req.SubscribedTopicNames = c.subs
	req.ServerAssignor = c.assignor
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if c.epoch != 0 {
		for _, t := range topicsOf(c.owned) {
			req.Topics = append(req.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: t, Partitions: c.owned[t]})
		}
	}
	resp := c.send(req)
	if resp.ErrorCode == 0 {
		c.epoch = resp.MemberEpoch
		if resp.Assignment != nil {
			c.owned = nil
			for _, t := range resp.Assignment.Topics {
				for _, p := range t.Partitions {
					c.owned = c.owned.add(t.TopicID, p)
				}
			}
		}
	}
	return resp
}

func (c *cgClient) send(req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	c.h.t.Helper()
	ref := c.h.ref()
	c.h.apply(c.h.g.ConsumerGroupHeartbeat(c.h.now, ref, req, Client{ID: "cl", Host: "/h"}, c.topics))
	return c.h.replies[ref].(*kmsg.ConsumerGroupHeartbeatResponse)
}

func (c *cgClient) leave(epoch int32) *kmsg.ConsumerGroupHeartbeatResponse {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID, req.MemberEpoch, req.InstanceID = "g", c.id, epoch, c.instance
	return c.send(req)
}

func mustOK(t *testing.T, what string, r *kmsg.ConsumerGroupHeartbeatResponse) {
	t.Helper()
	if r.ErrorCode != 0 {
		msg := ""
		if r.ErrorMessage != nil {
			msg = *r.ErrorMessage
		}
		t.Fatalf("%s: %v %s", what, kerr.ErrorForCode(r.ErrorCode), msg)
	}
}

func (c *consumerGroup) checkInvariants(t *testing.T) {
	t.Helper()
	var held assignment
	for id, m := range c.members {
		if m.id != id {
			t.Fatalf("member %s stored under %s", m.id, id)
		}
		both := m.assigned.union(m.pendingRevoke)
		if both.count() != m.assigned.count()+m.pendingRevoke.count() {
			t.Fatalf("member %s has a partition both assigned and pending revocation", id)
		}
		if held.overlaps(both) {
			t.Fatalf("member %s holds a partition another member holds", id)
		}
		held = held.union(both)
		if m.instanceID != nil && c.static[*m.instanceID] != id {
			t.Fatalf("static member %s not mapped", id)
		}
		if m.epoch > c.epoch {
			t.Fatalf("member %s epoch %d above the group's %d", id, m.epoch, c.epoch)
		}
	}
	for inst, id := range c.static {
		if m := c.members[id]; m == nil || *m.instanceID != inst {
			t.Fatalf("static %s -> %s dangles", inst, id)
		}
	}
	for id := range c.target {
		if c.members[id] == nil {
			t.Fatalf("target for departed member %s", id)
		}
	}
	if c.assignmentEpoch > c.epoch {
		t.Fatalf("assignment epoch %d above group epoch %d", c.assignmentEpoch, c.epoch)
	}
}

func TestConsumerGroupJoinAndReconcile(t *testing.T) {
	h := newHarness(t, testConfig())
	topics := fakeTopics{}
	topics.add("t", 6)
	a := h.cgMember(topics, "a", "t")
	mustOK(t, "a joins", a.beat())
	if a.epoch != 1 || a.owned.count() != 6 || h.g.cg.state() != Stable {
		t.Fatalf("a: epoch %d owns %d state %v", a.epoch, a.owned.count(), h.g.cg.state())
	}
	b := h.cgMember(topics, "b", "t")
	mustOK(t, "b joins", b.beat())
	// b's partitions are still a's: it waits, at the new epoch.
	if b.epoch != 2 || b.owned.count() != 0 || h.g.cg.members["b"].state != msUnreleased {
		t.Fatalf("b: epoch %d owns %d", b.epoch, b.owned.count())
	}
	mustOK(t, "a heartbeats", a.beat())
	// a must give three back before moving on; it stays at epoch 1.
	if a.epoch != 1 || a.owned.count() != 3 || h.g.cg.members["a"].state != msUnrevoked {
		t.Fatalf("a: epoch %d owns %d state %v", a.epoch, a.owned.count(), h.g.cg.members["a"].state)
	}
	if h.g.cg.state() != Reconciling {
		t.Fatalf("group %v", h.g.cg.state())
	}
	mustOK(t, "a revoked", a.beat())
	if a.epoch != 2 || a.owned.count() != 3 {
		t.Fatalf("a after revoking: epoch %d owns %d", a.epoch, a.owned.count())
	}
	mustOK(t, "b heartbeats", b.beat())
	if b.epoch != 2 || b.owned.count() != 3 || a.owned.overlaps(b.owned) || h.g.cg.state() != Stable {
		t.Fatalf("b: epoch %d owns %d; group %v", b.epoch, b.owned.count(), h.g.cg.state())
	}
	if s, _ := h.g.Summary(); s.Type != "consumer" || s.State != "Stable" || s.ProtocolType != "consumer" {
		t.Fatalf("summary %+v", s)
	}
}

func TestConsumerGroupEpochValidation(t *testing.T) {
	h := newHarness(t, testConfig())
	topics := fakeTopics{}
	topics.add("t", 2)
	a := h.cgMember(topics, "a", "t")
	mustOK(t, "join", a.beat())
	a.epoch = 5
	wantCode(t, "ahead", a.beat().ErrorCode, kerr.FencedMemberEpoch)
	b := h.cgMember(topics, "b", "t")
	mustOK(t, "b joins", b.beat()) // group epoch 2
	a.epoch = 1
	mustOK(t, "a at epoch 1", a.beat())
	mustOK(t, "a revoked", a.beat()) // now at 2, previous 1
	if a.epoch != 2 {
		t.Fatalf("epoch %d", a.epoch)
	}
	// The previous epoch with a subset of the assignment: a lost response.
	a.epoch = 1
	mustOK(t, "previous epoch", a.beat())
	if a.epoch != 2 {
		t.Fatalf("not moved back to 2: %d", a.epoch)
	}
	// The previous epoch owning partitions it should not: fenced.
	a.epoch = 1
	a.owned = a.owned.add(topics["t"].id, 0).add(topics["t"].id, 1)
	wantCode(t, "previous epoch, too much", a.beat().ErrorCode, kerr.FencedMemberEpoch)
	// A fenced member rejoins in place with epoch 0 (KAFKA-19233).
	a.epoch, a.owned = 0, nil
	mustOK(t, "rejoin", a.beat())
	if a.epoch != 2 || a.owned.count() != 1 {
		t.Fatalf("rejoined at %d owning %d", a.epoch, a.owned.count())
	}
	unknown := h.cgMember(topics, "z", "t")
	unknown.epoch = 3
	wantCode(t, "unknown member", unknown.beat().ErrorCode, kerr.UnknownMemberID)
}

func TestConsumerGroupSessionAndLeave(t *testing.T) {
	h := newHarness(t, testConfig())
	topics := fakeTopics{}
	topics.add("t", 4)
	a, b := h.cgMember(topics, "a", "t"), h.cgMember(topics, "b", "t")
	mustOK(t, "a", a.beat())
	mustOK(t, "b", b.beat())
	mustOK(t, "a", a.beat())
	mustOK(t, "a", a.beat())
	mustOK(t, "b", b.beat())
	epoch := h.g.cg.epoch
	// b goes silent: fenced at its session timeout; a takes everything.
	for i := 0; i < 10; i++ {
		h.advance(5 * time.Second)
		mustOK(t, "a", a.beat())
	}
	if _, ok := h.g.cg.members["b"]; ok {
		t.Fatal("silent member not fenced")
	}
	if h.g.cg.epoch != epoch+1 || a.owned.count() != 4 {
		t.Fatalf("epoch %d (was %d), a owns %d", h.g.cg.epoch, epoch, a.owned.count())
	}
	r := a.leave(-1)
	mustOK(t, "leave", r)
	if r.MemberEpoch != -1 || len(h.g.cg.members) != 0 || h.g.cg.state() != Empty {
		t.Fatalf("after leave: %+v", r)
	}
	wantCode(t, "leave again", a.leave(-1).ErrorCode, kerr.UnknownMemberID)
	wantCode(t, "delete empty consumer group", h.deleteGroup(), nil)
}

func TestConsumerGroupRebalanceTimeout(t *testing.T) {
	h := newHarness(t, testConfig())
	topics := fakeTopics{}
	topics.add("t", 2)
	a, b := h.cgMember(topics, "a", "t"), h.cgMember(topics, "b", "t")
	mustOK(t, "a", a.beat())
	mustOK(t, "b", b.beat())
	mustOK(t, "a", a.beat()) // must revoke one
	if h.g.cg.members["a"].state != msUnrevoked {
		t.Fatal("a not revoking")
	}
	// a keeps heartbeating but never gives the partition up (it reports
	// it still owns it): fenced at its 30s rebalance timeout.
	p := topics["t"].id
	for i := 0; i < 7; i++ {
		h.advance(5 * time.Second)
		a.owned = a.owned.add(p, 0).add(p, 1)
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version, req.Group, req.MemberID, req.MemberEpoch = 1, "g", "a", a.epoch
		req.RebalanceTimeoutMillis = -1
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: p, Partitions: []int32{0, 1}}}
		if r := a.send(req); r.ErrorCode != 0 {
			wantCode(t, "after the rebalance timeout", r.ErrorCode, kerr.UnknownMemberID)
			mustOK(t, "b", b.beat())
			if b.owned.count() != 2 {
				t.Fatalf("b owns %d", b.owned.count())
			}
			return
		}
		mustOK(t, "b", b.beat())
	}
	t.Fatal("member that never revoked was not fenced")
}

func TestConsumerGroupStaticMember(t *testing.T) {
	h := newHarness(t, testConfig())
	topics := fakeTopics{}
	topics.add("t", 4)
	inst := "i1"
	a, b := h.cgMember(topics, "a", "t"), h.cgMember(topics, "b", "t")
	a.instance = &inst
	for _, c := range []*cgClient{a, b, a, a, b} {
		mustOK(t, c.id, c.beat())
	}
	kept := a.owned.clone()
	epoch := h.g.cg.epoch
	// Another process with the same instance id while a is active.
	a2 := h.cgMember(topics, "a2", "t")
	a2.instance = &inst
	wantCode(t, "instance in use", a2.beat().ErrorCode, kerr.UnreleasedInstanceID)
	// a leaves for a while (-2), then restarts as a2: it gets a's
	// partitions back with no reassignment.
	r := a.leave(-2)
	mustOK(t, "static leave", r)
	if h.g.cg.members["a"] == nil {
		t.Fatal("static member removed on a temporary leave")
	}
	mustOK(t, "a2 joins", a2.beat())
	if !a2.owned.equal(kept) || h.g.cg.epoch != epoch {
		t.Fatalf("a2 owns %v (a owned %v), epoch %d (was %d)", a2.owned, kept, h.g.cg.epoch, epoch)
	}
	if h.g.cg.members["a"] != nil {
		t.Fatal("old member still there")
	}
	wantCode(t, "old id", a.beat().ErrorCode, kerr.FencedInstanceID)
	mustOK(t, "b", b.beat())
	if h.g.cg.state() != Stable {
		t.Fatalf("state %v", h.g.cg.state())
	}
}

func TestConsumerGroupTopicChanges(t *testing.T) {
	h := newHarness(t, testConfig())
	topics := fakeTopics{}
	topics.add("t", 2)
	a := h.cgMember(topics, "a", "t", "later")
	mustOK(t, "a", a.beat())
	if a.owned.count() != 2 {
		t.Fatalf("owns %d", a.owned.count())
	}
	epoch := h.g.cg.epoch
	topics.add("t", 3)
	topics.add("later", 2)
	mustOK(t, "a", a.beat())
	if a.owned.count() != 5 || h.g.cg.epoch != epoch+1 {
		t.Fatalf("after topic changes: owns %d epoch %d", a.owned.count(), h.g.cg.epoch)
	}
	// A regex subscription.
	rx := h.cgMember(topics, "rx", "")
	rx.subs = nil
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version, req.Group, req.MemberID, req.RebalanceTimeoutMillis = 1, "g", "rx", 30_000
	re := "la.*"
	req.SubscribedTopicRegex = &re
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	mustOK(t, "regex join", rx.send(req))
	if got := h.g.cg.members["rx"].resolved; !slices.Equal(got, []string{"later"}) {
		t.Fatalf("regex resolved to %v", got)
	}
	bad := "("
	req.SubscribedTopicRegex = &bad
	req.MemberID = "rx2"
	wantCode(t, "bad regex", rx.send(req).ErrorCode, kerr.InvalidRegularExpression)
}

func TestConsumerGroupRangeAssignor(t *testing.T) {
	h := newHarness(t, testConfig())
	topics := fakeTopics{}
	topics.add("x", 5)
	topics.add("y", 5)
	rng := "range"
	var ms []*cgClient
	for _, id := range []string{"m1", "m2"} {
		c := h.cgMember(topics, id, "x", "y")
		c.assignor = &rng
		ms = append(ms, c)
	}
	for i := 0; i < 3; i++ {
		for _, c := range ms {
			mustOK(t, c.id, c.beat())
		}
	}
	// Ranges line up across co-partitioned topics: m1 0-2, m2 3-4.
	x, y := topics["x"].id, topics["y"].id
	if !slices.Equal(ms[0].owned[x], []int32{0, 1, 2}) || !slices.Equal(ms[0].owned[y], []int32{0, 1, 2}) || !slices.Equal(ms[1].owned[x], []int32{3, 4}) {
		t.Fatalf("m1 %v m2 %v", ms[0].owned, ms[1].owned)
	}
	other := "sticky"
	ms[0].assignor = &other
	wantCode(t, "unknown assignor", ms[0].beat().ErrorCode, kerr.UnsupportedAssignor)
}

func TestConsumerGroupValidation(t *testing.T) {
	h := newHarness(t, testConfig())
	topics := fakeTopics{}
	for _, tc := range []struct {
		name string
		mod  func(*kmsg.ConsumerGroupHeartbeatRequest)
	}{
		{"no member id (v1)", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberID = "" }},
		{"owned partitions on join", func(r *kmsg.ConsumerGroupHeartbeatRequest) {
			r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{Partitions: []int32{0}}}
		}},
		{"no subscription", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicNames = nil }},
		{"no rebalance timeout", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.RebalanceTimeoutMillis = -1 }},
		{"bad epoch", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -3 }},
		{"empty instance id", func(r *kmsg.ConsumerGroupHeartbeatRequest) { e := ""; r.InstanceID = &e }},
	} {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version, req.Group, req.MemberID, req.RebalanceTimeoutMillis = 1, "g", "m", 1000
		req.SubscribedTopicNames = []string{"t"}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		tc.mod(req)
		c := h.cgMember(topics, "m")
		wantCode(t, tc.name, c.send(req).ErrorCode, kerr.InvalidRequest)
	}
	if h.g.Live() {
		t.Fatal("invalid heartbeats created the group")
	}
}

func TestConsumerAndClassicDoNotMix(t *testing.T) {
	cfg := testConfig()
	cfg.InitialRebalanceDelay = 0
	h := newHarness(t, cfg)
	topics := fakeTopics{}
	topics.add("t", 1)
	h.stableGroup(1)
	wantCode(t, "consumer heartbeat to a classic group", h.cgMember(topics, "a", "t").beat().ErrorCode, kerr.GroupIDNotFound)

	h2 := newHarness(t, cfg)
	h2.commit("", -1, 8, map[string]int64{"t": 3}) // a simple group: empty
	a := h2.cgMember(topics, "a", "t")
	mustOK(t, "an empty classic group becomes a consumer group", a.beat())
	if o, ok := h2.g.Committed("t", 0); !ok || o.Offset != 3 {
		t.Fatal("offsets lost in the conversion")
	}
	wantCode(t, "classic join to a consumer group", h2.joinResp(h2.join("")).ErrorCode, kerr.InconsistentGroupProtocol)
	wantCode(t, "classic heartbeat", h2.heartbeat("a", 1), kerr.UnknownMemberID)
}

func TestConsumerGroupOffsets(t *testing.T) {
	h := newHarness(t, testConfig())
	topics := fakeTopics{}
	topics.add("t", 1)
	a := h.cgMember(topics, "a", "t")
	mustOK(t, "join", a.beat())
	wantCode(t, "member commit", commitCode(t, h.commit("a", a.epoch, 9, map[string]int64{"t": 10})), nil)
	wantCode(t, "stale epoch", commitCode(t, h.commit("a", a.epoch-1, 9, map[string]int64{"t": 11})), kerr.StaleMemberEpoch)
	wantCode(t, "unknown member", commitCode(t, h.commit("zz", a.epoch, 9, map[string]int64{"t": 11})), kerr.UnknownMemberID)
	wantCode(t, "v8 from a consumer member", commitCode(t, h.commit("a", a.epoch, 8, map[string]int64{"t": 11})), kerr.UnsupportedVersion)
	wantCode(t, "admin commit to an active group", commitCode(t, h.commit("", -1, 9, map[string]int64{"t": 11})), kerr.UnknownMemberID)
	id := "a"
	got := h.fetch(FetchQuery{MemberID: &id, MemberEpoch: a.epoch})
	if got.ErrorCode != 0 || got.Topics[0].Partitions[0].Offset != 10 {
		t.Fatalf("member fetch %+v", got)
	}
	wantCode(t, "stale fetch", h.fetch(FetchQuery{MemberID: &id, MemberEpoch: a.epoch + 1}).ErrorCode, kerr.StaleMemberEpoch)
	wantCode(t, "admin fetch", h.fetch(FetchQuery{MemberEpoch: -1}).ErrorCode, nil)
	wantCode(t, "offset delete of a subscribed topic", h.deleteOffsets("t").Topics[0].Partitions[0].ErrorCode, kerr.GroupSubscribedToTopic)
	wantCode(t, "delete active", h.deleteGroup(), kerr.NonEmptyGroup)
	mustOK(t, "leave", a.leave(-1))
	wantCode(t, "admin commit to an empty group", commitCode(t, h.commit("", -1, 9, map[string]int64{"t": 12})), nil)
}

func TestConsumerGroupRestore(t *testing.T) {
	h := newHarness(t, testConfig())
	topics := fakeTopics{}
	topics.add("t", 4)
	inst := "i"
	a, b := h.cgMember(topics, "a", "t"), h.cgMember(topics, "b", "t")
	b.instance = &inst
	for _, c := range []*cgClient{a, b, a, a, b} {
		mustOK(t, c.id, c.beat())
	}
	h.commit("a", a.epoch, 9, map[string]int64{"t": 7})
	// Through the store's codec, into a fresh group.
	var recs []Record
	for _, r := range h.records {
		key, value := r.encode()
		d, err := decodeRecord(key, value)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, d)
	}
	g := NewGroup("g", &h.cfg)
	g.Restore(recs, h.now)
	checkInvariants(t, g)
	if g.cg == nil || g.cg.epoch != h.g.cg.epoch || len(g.cg.members) != 2 || g.cg.state() != Stable {
		t.Fatalf("restored %+v", g.cg)
	}
	if !g.cg.members["a"].assigned.equal(a.owned) || *g.cg.members["b"].instanceID != "i" {
		t.Fatal("members not restored")
	}
	if o, _ := g.Committed("t", 0); o.Offset != 7 {
		t.Fatal("offsets not restored")
	}
	h.g = g
	mustOK(t, "a after restore", a.beat())
	mustOK(t, "b after restore", b.beat())
	if g.cg.epoch != h.g.cg.epoch || g.cg.state() != Stable {
		t.Fatalf("rebalanced after restore: %v", g.cg.state())
	}
	d := h.ref()
	h.apply(g.ConsumerGroupDescribe(h.now, d))
	desc := h.replies[d].(*kmsg.ConsumerGroupDescribeResponse).Groups[0]
	if desc.State != "Stable" || len(desc.Members) != 2 || desc.Members[0].Assignment.TopicPartitions[0].Topic != "t" || desc.AssignorName != "uniform" {
		t.Fatalf("describe %+v", desc)
	}
}

// TestConsumerGroupRandomized drives random joins, leaves, restarts and
// topic growth through many members that heartbeat with what they own,
// checking after every step that no partition is held twice, and at the
// end that the group converges to every partition owned exactly once.
// KIP848_SEED reproduces a run.
func TestConsumerGroupRandomized(t *testing.T) {
	seed := time.Now().UnixNano()
	if s := os.Getenv("KIP848_SEED"); s != "" {
		seed, _ = strconv.ParseInt(s, 10, 64)
	}
	t.Logf("seed %d (KIP848_SEED=%d reproduces)", seed, seed)
	rnd := rand.New(rand.NewSource(seed))
	for run := 0; run < 20; run++ {
		h := newHarness(t, testConfig())
		topics := fakeTopics{}
		topics.add("a", int32(1+rnd.Intn(8)))
		topics.add("b", int32(1+rnd.Intn(8)))
		var clients []*cgClient
		for step := 0; step < 200; step++ {
			switch r := rnd.Intn(20); {
			case r == 0 || len(clients) == 0:
				subs := []string{"a", "b"}
				if rnd.Intn(3) == 0 {
					subs = []string{"a"}
				}
				c := h.cgMember(topics, fmt.Sprintf("m%d-%d", run, step), subs...)
				if rnd.Intn(3) == 0 {
					rng := "range"
					c.assignor = &rng
				}
				clients = append(clients, c)
				mustOK(t, "join", c.beat())
			case r == 1:
				i := rnd.Intn(len(clients))
				clients[i].leave(-1)
				clients = append(clients[:i], clients[i+1:]...)
			case r == 2:
				topics.add("a", topics["a"].partitions+1)
			case r == 3:
				h.advance(time.Second)
			default:
				c := clients[rnd.Intn(len(clients))]
				if resp := c.beat(); resp.ErrorCode != 0 {
					// Fenced (by a rebalance timeout, say): rejoin.
					c.epoch, c.owned = 0, nil
					mustOK(t, "rejoin", c.beat())
				}
			}
		}
		for round := 0; round < 10 && len(clients) > 0; round++ {
			for _, c := range clients {
				if c.beat().ErrorCode != 0 {
					c.epoch, c.owned = 0, nil
					mustOK(t, "rejoin", c.beat())
				}
			}
		}
		if len(clients) == 0 {
			continue
		}
		if st := h.g.cg.state(); st != Stable {
			t.Fatalf("run %d: group %v after converging rounds", run, st)
		}
		var all assignment
		for _, c := range clients {
			if all.overlaps(c.owned) {
				t.Fatalf("run %d: partition owned twice", run)
			}
			all = all.union(c.owned)
		}
		want := 0
		subsA, subsB := false, false
		for _, c := range clients {
			subsA = subsA || slices.Contains(c.subs, "a")
			subsB = subsB || slices.Contains(c.subs, "b")
		}
		if subsA {
			want += int(topics["a"].partitions)
		}
		if subsB {
			want += int(topics["b"].partitions)
		}
		if all.count() != want {
			t.Fatalf("run %d: %d partitions owned, want %d", run, all.count(), want)
		}
	}
}
