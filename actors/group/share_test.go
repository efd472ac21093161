package group

import (
	"fmt"
	"math/rand"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// sgClient is a scripted share consumer: it remembers its epoch and
// assignment, as a client would.
type sgClient struct {
	h      *harness
	topics fakeTopics
	id     string
	subs   []string
	epoch  int32
	owned  assignment
}

func (h *harness) sgMember(topics fakeTopics, id string, subs ...string) *sgClient {
	return &sgClient{h: h, topics: topics, id: id, subs: subs}
}

// beat heartbeats (subscriptions on a join only, as Kafka's client sends
// them when they change) and adopts the assignment it gets back.
func (c *sgClient) beat() *kmsg.ShareGroupHeartbeatResponse {
	c.h.t.Helper()
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.Version = 1
	req.GroupID, req.MemberID, req.MemberEpoch = "g", c.id, c.epoch
	if c.epoch == 0 {
		req.SubscribedTopicNames = c.subs
	}
	resp := c.send(req)
	if resp.ErrorCode == 0 {
		c.epoch = resp.MemberEpoch
		if resp.Assignment != nil {
			c.owned = nil
			for _, t := range resp.Assignment.TopicPartitions {
				for _, p := range t.Partitions {
					c.owned = c.owned.add(t.TopicID, p)
				}
			}
		}
	}
	return resp
}

func (c *sgClient) send(req *kmsg.ShareGroupHeartbeatRequest) *kmsg.ShareGroupHeartbeatResponse {
	c.h.t.Helper()
	ref := c.h.ref()
	c.h.apply(c.h.g.ShareGroupHeartbeat(c.h.now, ref, req, Client{ID: "cl", Host: "/h"}, c.topics))
	return c.h.replies[ref].(*kmsg.ShareGroupHeartbeatResponse)
}

func (c *sgClient) leave() *kmsg.ShareGroupHeartbeatResponse {
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.Version = 1
	req.GroupID, req.MemberID, req.MemberEpoch = "g", c.id, -1
	return c.send(req)
}

func sgOK(t *testing.T, what string, r *kmsg.ShareGroupHeartbeatResponse) {
	t.Helper()
	sgWant(t, what, r, nil)
}

func sgWant(t *testing.T, what string, r *kmsg.ShareGroupHeartbeatResponse, want *kerr.Error) {
	t.Helper()
	var code int16
	if want != nil {
		code = want.Code
	}
	if r.ErrorCode != code {
		msg := ""
		if r.ErrorMessage != nil {
			msg = *r.ErrorMessage
		}
		t.Fatalf("%s: got %v %q, want %v", what, kerr.ErrorForCode(r.ErrorCode), msg, want)
	}
}

func (s *shareGroup) checkInvariants(t *testing.T) {
	t.Helper()
	if s.assignmentEpoch != s.epoch {
		t.Fatalf("assignment epoch %d, group epoch %d", s.assignmentEpoch, s.epoch)
	}
	for id, m := range s.members {
		if m.id != id {
			t.Fatalf("member %s stored under %s", m.id, id)
		}
		if m.epoch > s.epoch {
			t.Fatalf("member %s at epoch %d past the group's %d", id, m.epoch, s.epoch)
		}
	}
	for id := range s.target {
		if s.members[id] == nil {
			t.Fatalf("target for non-member %s", id)
		}
	}
}

// shareCoverage checks that the target assigns every partition of the
// group's subscribed topics, each only to members subscribed to it.
func shareCoverage(t *testing.T, s *shareGroup) map[sharePart]int {
	t.Helper()
	holders := map[sharePart]int{}
	byID := map[[16]byte]string{}
	for _, tm := range s.topics {
		byID[tm.id] = tm.name
	}
	for id, a := range s.target {
		for tid, ps := range a {
			if !slices.Contains(s.members[id].subscribed, byID[tid]) {
				t.Fatalf("member %s got topic %s it does not subscribe to", id, byID[tid])
			}
			for _, p := range ps {
				holders[sharePart{tid, p}]++
			}
		}
	}
	for _, tm := range s.topics {
		for p := int32(0); p < tm.partitions; p++ {
			if holders[sharePart{tm.id, p}] == 0 {
				t.Fatalf("%s-%d assigned to nobody: %v", tm.name, p, s.target)
			}
		}
	}
	return holders
}

func TestShareGroupJoinAndAssign(t *testing.T) {
	h := newHarness(t, testConfig())
	topics := fakeTopics{}
	topics.add("t", 4)
	a, b := h.sgMember(topics, "a", "t"), h.sgMember(topics, "b", "t")
	r := a.beat()
	sgOK(t, "a joins", r)
	if *r.MemberID != "a" || r.MemberEpoch != 1 || r.HeartbeatIntervalMillis != 5000 || a.owned.count() != 4 {
		t.Fatalf("a's join: %+v owned %v", r, a.owned)
	}
	sgOK(t, "b joins", b.beat())
	if b.epoch != 2 || b.owned.count() != 2 {
		t.Fatalf("b: epoch %d owned %v", b.epoch, b.owned)
	}
	// a learns the new epoch and its half on its next heartbeat.
	r = a.beat()
	sgOK(t, "a beats", r)
	if a.epoch != 2 || r.Assignment == nil || a.owned.count() != 2 || a.owned.overlaps(b.owned) {
		t.Fatalf("a after b joined: epoch %d owned %v, b %v", a.epoch, a.owned, b.owned)
	}
	// Nothing changes: no assignment in the answer, epochs stay.
	r = a.beat()
	sgOK(t, "a beats again", r)
	if r.Assignment != nil || r.MemberEpoch != 2 || len(h.records) == 0 {
		t.Fatalf("steady heartbeat: %+v", r)
	}
	if s, ok := h.g.Summary(); !ok || s.Type != "share" || s.ProtocolType != "share" || s.State != "Stable" {
		t.Fatalf("summary %+v", s)
	}
	d := h.ref()
	h.apply(h.g.ShareGroupDescribe(h.now, d))
	desc := h.replies[d].(*kmsg.ShareGroupDescribeResponse).Groups[0]
	if desc.ErrorCode != 0 || desc.GroupState != "Stable" || desc.GroupEpoch != 2 || desc.AssignmentEpoch != 2 || desc.Assignor != "simple" ||
		len(desc.Members) != 2 || desc.Members[0].MemberID != "a" || desc.Members[0].ClientID != "cl" ||
		desc.Members[0].Assignment.TopicPartitions[0].Topic != "t" || len(desc.Members[0].Assignment.TopicPartitions[0].Partitions) != 2 ||
		!slices.Equal(desc.Members[1].SubscribedTopicNames, []string{"t"}) {
		t.Fatalf("describe %+v", desc)
	}
}

// With more members than partitions, every member gets one and the
// partitions are shared evenly; the assignment is stable across
// heartbeats.
func TestShareGroupMoreMembersThanPartitions(t *testing.T) {
	h := newHarness(t, testConfig())
	topics := fakeTopics{}
	topics.add("t", 2)
	var cs []*sgClient
	for i := 0; i < 5; i++ {
		c := h.sgMember(topics, fmt.Sprintf("m%d", i), "t")
		sgOK(t, c.id, c.beat())
		cs = append(cs, c)
	}
	for _, c := range cs {
		sgOK(t, c.id, c.beat())
	}
	holders := shareCoverage(t, h.g.sg)
	counts := []int{}
	for _, c := range cs {
		if c.owned.count() != 1 || c.epoch != h.g.sg.epoch {
			t.Fatalf("%s owns %v at epoch %d", c.id, c.owned, c.epoch)
		}
	}
	for _, n := range holders {
		counts = append(counts, n)
	}
	slices.Sort(counts)
	if !slices.Equal(counts, []int{2, 3}) {
		t.Fatalf("partition sharing %v, want [2 3]", counts)
	}
	before := map[string]assignment{}
	for _, c := range cs {
		before[c.id] = c.owned.clone()
	}
	for round := 0; round < 3; round++ {
		for _, c := range cs {
			if r := c.beat(); r.ErrorCode != 0 || r.Assignment != nil {
				t.Fatalf("round %d %s: %+v", round, c.id, r)
			}
		}
	}
	// A sixth member: the others keep what they had (sticky).
	f := h.sgMember(topics, "m5", "t")
	sgOK(t, "m5", f.beat())
	moved := 0
	for _, c := range cs {
		sgOK(t, c.id, c.beat())
		if !c.owned.equal(before[c.id]) {
			moved++
		}
	}
	if moved != 0 || f.owned.count() != 1 {
		t.Fatalf("%d members moved when m5 joined; m5 owns %v", moved, f.owned)
	}
}

// TestShareAssignorProperties runs the assignor on random groups:
// homogeneous ones must be exactly balanced, any must cover every
// subscribed partition with subscribed members only. SHARE_SEED
// reproduces a run.
func TestShareAssignorProperties(t *testing.T) {
	seed := time.Now().UnixNano()
	if s := os.Getenv("SHARE_SEED"); s != "" {
		seed, _ = strconv.ParseInt(s, 10, 64)
	}
	rng := rand.New(rand.NewSource(seed))
	t.Logf("SHARE_SEED=%d", seed)
	for run := 0; run < 300; run++ {
		nTopics := 1 + rng.Intn(3)
		topics := map[string]topicMeta{}
		var names []string
		for i := 0; i < nTopics; i++ {
			n := fmt.Sprintf("t%d", i)
			names = append(names, n)
			topics[n] = topicMeta{name: n, id: [16]byte{byte(i + 1)}, partitions: int32(1 + rng.Intn(7))}
		}
		nMembers := 1 + rng.Intn(12)
		homogeneous := rng.Intn(2) == 0
		var members []string
		subs := map[string][]string{}
		for i := 0; i < nMembers; i++ {
			id := fmt.Sprintf("m%02d", i)
			members = append(members, id)
			if homogeneous {
				subs[id] = names
				continue
			}
			for _, n := range names {
				if rng.Intn(2) == 0 {
					subs[id] = append(subs[id], n)
				}
			}
		}
		var prev map[string]assignment
		for step := 0; step < 2; step++ {
			out := assignShare(members, subs, topics, prev)
			s := &shareGroup{members: map[string]*shareMember{}, target: out, topics: map[string]topicMeta{}}
			for _, id := range members {
				s.members[id] = &shareMember{id: id, subscribed: subs[id]}
			}
			for _, n := range names {
				for _, id := range members {
					if slices.Contains(subs[id], n) {
						s.topics[n] = topics[n]
					}
				}
			}
			holders := shareCoverage(t, s)
			again := assignShare(members, subs, topics, prev)
			for _, id := range members {
				if !again[id].equal(out[id]) {
					t.Fatalf("seed %d run %d: not deterministic", seed, run)
				}
			}
			if homogeneous {
				parts := 0
				for _, tm := range topics {
					parts += int(tm.partitions)
				}
				lo, hi := 1<<30, 0
				for _, id := range members {
					n := out[id].count()
					lo, hi = min(lo, n), max(hi, n)
				}
				hlo, hhi := 1<<30, 0
				for _, n := range holders {
					hlo, hhi = min(hlo, n), max(hhi, n)
				}
				if parts >= nMembers && (hi-lo > 1 || hhi != 1) {
					t.Fatalf("seed %d run %d: %d partitions, %d members: member loads %d..%d, holders %d..%d", seed, run, parts, nMembers, lo, hi, hlo, hhi)
				}
				if parts < nMembers && (lo != 1 || hi != 1 || hhi-hlo > 1) {
					t.Fatalf("seed %d run %d: %d partitions, %d members: member loads %d..%d, holders %d..%d", seed, run, parts, nMembers, lo, hi, hlo, hhi)
				}
			}
			if step == 1 {
				// Fed its own output, the assignor changes nothing.
				for _, id := range members {
					if !prev[id].equal(out[id]) {
						t.Fatalf("seed %d run %d: %s moved from %v to %v with nothing changed", seed, run, id, prev[id], out[id])
					}
				}
			}
			prev = out
		}
	}
}

func TestShareGroupLeaveAndExpiry(t *testing.T) {
	cfg := testConfig()
	cfg.GroupShareTimeouts = func(g string) (time.Duration, time.Duration) { return 10 * time.Second, time.Second }
	h := newHarness(t, cfg)
	topics := fakeTopics{}
	topics.add("t", 3)
	a, b, c := h.sgMember(topics, "a", "t"), h.sgMember(topics, "b", "t"), h.sgMember(topics, "c", "t")
	for _, m := range []*sgClient{a, b, c, a, b} {
		r := m.beat()
		sgOK(t, m.id, r)
		if r.HeartbeatIntervalMillis != 1000 {
			t.Fatalf("heartbeat interval %d, want the group's 1000", r.HeartbeatIntervalMillis)
		}
	}
	// b leaves: told to the listener, the epoch moves.
	ref := h.ref()
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID, req.MemberEpoch = "g", "b", -1
	eff := h.g.ShareGroupHeartbeat(h.now, ref, req, Client{}, topics)
	if !slices.Equal(eff.ShareMembersGone, []string{"b"}) {
		t.Fatalf("leave effects name %v", eff.ShareMembersGone)
	}
	h.apply(eff)
	if r := h.replies[ref].(*kmsg.ShareGroupHeartbeatResponse); r.ErrorCode != 0 || r.MemberEpoch != -1 || *r.MemberID != "b" {
		t.Fatalf("leave answer %+v", r)
	}
	sgWant(t, "b leaves again", b.leave(), kerr.UnknownMemberID)
	sgWant(t, "b heartbeats after leaving", b.beat(), kerr.UnknownMemberID)
	// a keeps heartbeating, c goes silent: its session ends.
	for i := 0; i < 3; i++ {
		h.now = h.now.Add(4 * time.Second)
		h.apply(h.g.Tick(h.now))
		sgOK(t, "a", a.beat())
	}
	if h.g.sg.members["c"] != nil {
		t.Fatal("c outlived its session")
	}
	if a.owned.count() != 3 {
		t.Fatalf("a owns %v after the others went", a.owned)
	}
	// The expiry was an effect for the listener too: run it again on a
	// fresh member to see it.
	d := h.sgMember(topics, "d", "t")
	sgOK(t, "d", d.beat())
	deadline := h.g.NextDeadline()
	h.now = deadline.Add(time.Second)
	eff = h.g.Tick(h.now)
	if !slices.Contains(eff.ShareMembersGone, "d") || !slices.Contains(eff.ShareMembersGone, "a") {
		t.Fatalf("expiry effects name %v", eff.ShareMembersGone)
	}
	h.apply(eff)
	if s, _ := h.g.Summary(); s.State != "Empty" {
		t.Fatalf("state %s after everyone expired", s.State)
	}
}

func TestShareGroupEpochFencing(t *testing.T) {
	h := newHarness(t, testConfig())
	topics := fakeTopics{}
	topics.add("t", 2)
	a, b := h.sgMember(topics, "a", "t"), h.sgMember(topics, "b", "t")
	sgOK(t, "a", a.beat())
	sgOK(t, "b", b.beat())
	sgOK(t, "a", a.beat())
	a.epoch++
	sgWant(t, "epoch ahead", a.beat(), kerr.FencedMemberEpoch)
	// One behind: the answer that moved a on was lost; it is told its
	// assignment again.
	a.epoch -= 2
	if r := a.beat(); r.ErrorCode != 0 || r.Assignment == nil || r.MemberEpoch != 2 {
		t.Fatalf("previous epoch %+v", r)
	}
	a.epoch = 0
	sgOK(t, "a rejoins", a.beat())
	sgOK(t, "c", h.sgMember(topics, "c", "t").beat())
	sgOK(t, "a moves on", a.beat())
	a.epoch -= 2
	sgWant(t, "epoch behind", a.beat(), kerr.FencedMemberEpoch)
	// A fenced member rejoins with epoch 0 and gets its assignment.
	a.epoch = 0
	r := a.beat()
	sgOK(t, "rejoin", r)
	if r.Assignment == nil || a.owned.count() != 1 || a.epoch != h.g.sg.epoch {
		t.Fatalf("rejoin %+v", r)
	}
	ghost := h.sgMember(topics, "ghost", "t")
	ghost.epoch = 3
	sgWant(t, "unknown member", ghost.beat(), kerr.UnknownMemberID)
}

func TestShareGroupValidation(t *testing.T) {
	h := newHarness(t, testConfig())
	topics := fakeTopics{}
	topics.add("t", 1)
	for _, tc := range []struct {
		name string
		mod  func(*kmsg.ShareGroupHeartbeatRequest)
		msg  string
	}{
		{"no member id", func(r *kmsg.ShareGroupHeartbeatRequest) { r.MemberID = "" }, ""},
		{"long member id", func(r *kmsg.ShareGroupHeartbeatRequest) { r.MemberID = strings.Repeat("x", 37) }, ""},
		{"blank member id", func(r *kmsg.ShareGroupHeartbeatRequest) { r.MemberID = "  " }, "MemberId can't be empty."},
		{"no group", func(r *kmsg.ShareGroupHeartbeatRequest) { r.GroupID = "" }, "GroupId can't be empty."},
		{"blank rack", func(r *kmsg.ShareGroupHeartbeatRequest) { s := " "; r.RackID = &s }, "RackId can't be empty."},
		{"join without topics", func(r *kmsg.ShareGroupHeartbeatRequest) { r.SubscribedTopicNames = nil }, "SubscribedTopicNames must be set in first request."},
		{"bad epoch", func(r *kmsg.ShareGroupHeartbeatRequest) { r.MemberEpoch = -2 }, "MemberEpoch is invalid."},
	} {
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.GroupID, req.MemberID, req.SubscribedTopicNames = "g", "m", []string{"t"}
		tc.mod(req)
		ref := h.ref()
		h.apply(h.g.ShareGroupHeartbeat(h.now, ref, req, Client{}, topics))
		r := h.replies[ref].(*kmsg.ShareGroupHeartbeatResponse)
		sgWant(t, tc.name, r, kerr.InvalidRequest)
		if got := ""; r.ErrorMessage != nil {
			got = *r.ErrorMessage
			if got != tc.msg {
				t.Fatalf("%s: message %q, want %q", tc.name, got, tc.msg)
			}
		} else if tc.msg != "" {
			t.Fatalf("%s: no message, want %q", tc.name, tc.msg)
		}
	}
	if h.g.Live() || len(h.records) != 0 {
		t.Fatal("invalid heartbeats created the group")
	}
	// A heartbeat or leave for a group nobody created.
	m := h.sgMember(topics, "m", "t")
	m.epoch = 1
	sgWant(t, "heartbeat to no group", m.beat(), kerr.GroupIDNotFound)
	sgWant(t, "leave from no group", m.leave(), kerr.GroupIDNotFound)
	if h.g.Live() {
		t.Fatal("a heartbeat with an epoch created the group")
	}
}

func TestShareGroupMaxSize(t *testing.T) {
	cfg := testConfig()
	cfg.ShareMaxSize = 2
	h := newHarness(t, cfg)
	topics := fakeTopics{}
	topics.add("t", 1)
	sgOK(t, "a", h.sgMember(topics, "a", "t").beat())
	sgOK(t, "b", h.sgMember(topics, "b", "t").beat())
	sgWant(t, "c", h.sgMember(topics, "c", "t").beat(), kerr.GroupMaxSizeReached)
}

// Share, consumer and classic groups share one id namespace: each refuses
// the others' protocols as Kafka does.
func TestShareGroupClashes(t *testing.T) {
	topics := fakeTopics{}
	topics.add("t", 2)
	notShare := func(t *testing.T, r *kmsg.ShareGroupHeartbeatResponse) {
		t.Helper()
		sgWant(t, "share heartbeat", r, kerr.GroupIDNotFound)
		if r.ErrorMessage == nil || *r.ErrorMessage != "Group g is not a share group." {
			t.Fatalf("message %v", r.ErrorMessage)
		}
	}
	t.Run("consumer group", func(t *testing.T) {
		h := newHarness(t, testConfig())
		mustOK(t, "cg", h.cgMember(topics, "c", "t").beat())
		notShare(t, h.sgMember(topics, "s", "t").beat())
		d := h.ref()
		h.apply(h.g.ShareGroupDescribe(h.now, d))
		if g := h.replies[d].(*kmsg.ShareGroupDescribeResponse).Groups[0]; g.ErrorCode != kerr.GroupIDNotFound.Code || *g.ErrorMessage != "Group g is not a share group." {
			t.Fatalf("describe %+v", g)
		}
	})
	t.Run("simple group", func(t *testing.T) {
		h := newHarness(t, testConfig())
		h.commit("", -1, 9, map[string]int64{"t": 1})
		notShare(t, h.sgMember(topics, "s", "t").beat())
	})
	t.Run("share group", func(t *testing.T) {
		h := newHarness(t, testConfig())
		s := h.sgMember(topics, "s", "t")
		sgOK(t, "share", s.beat())
		if r := h.cgMember(topics, "c", "t").beat(); r.ErrorCode != kerr.GroupIDNotFound.Code {
			t.Fatalf("consumer heartbeat to a share group: %v", kerr.ErrorForCode(r.ErrorCode))
		}
		j := h.join("")
		if r := h.replies[j].(*kmsg.JoinGroupResponse); r.ErrorCode != kerr.InconsistentGroupProtocol.Code {
			t.Fatalf("join a share group: %v", kerr.ErrorForCode(r.ErrorCode))
		}
		wantCode(t, "commit to a share group", commitCode(t, h.commit("", -1, 9, map[string]int64{"t": 1})), kerr.GroupIDNotFound)
		d := h.ref()
		h.apply(h.g.Describe(h.now, d))
		if g := h.replies[d].(*kmsg.DescribeGroupsResponse).Groups[0]; g.ErrorCode != kerr.GroupIDNotFound.Code || *g.ErrorMessage != "group g is not a classic group" {
			t.Fatalf("classic describe of a share group %+v", g)
		}
		if h.g.offsets.Len() != 0 || h.g.sg == nil || len(h.g.sg.members) != 1 {
			t.Fatal("a refused request changed the share group")
		}
		// Expiry never deletes a share group, even an empty one.
		sgOK(t, "leave", s.leave())
		h.now = h.now.Add(30 * 24 * time.Hour)
		h.apply(h.g.ExpireOffsets(h.now))
		if !h.g.Live() {
			t.Fatal("offset expiry deleted an empty share group")
		}
	})
}

// Subscribed topics created, grown and deleted move the epoch and the
// assignment.
func TestShareGroupTopicChanges(t *testing.T) {
	h := newHarness(t, testConfig())
	topics := fakeTopics{}
	topics.add("t", 2)
	a := h.sgMember(topics, "a", "t", "u")
	sgOK(t, "a", a.beat())
	if a.owned.count() != 2 {
		t.Fatalf("owned %v", a.owned)
	}
	topics.add("t", 4)
	sgOK(t, "grown", a.beat())
	if a.owned.count() != 4 || a.epoch != 2 {
		t.Fatalf("after growth: epoch %d owned %v", a.epoch, a.owned)
	}
	topics.add("u", 1)
	sgOK(t, "created", a.beat())
	if a.owned.count() != 5 || len(a.owned) != 2 {
		t.Fatalf("after creation: owned %v", a.owned)
	}
	delete(topics, "t")
	r := a.beat()
	sgOK(t, "deleted", r)
	if a.owned.count() != 1 || r.Assignment == nil {
		t.Fatalf("after deletion: owned %v", a.owned)
	}
}

func TestShareGroupRestoreAndDelete(t *testing.T) {
	h := newHarness(t, testConfig())
	topics := fakeTopics{}
	topics.add("t", 3)
	a, b := h.sgMember(topics, "a", "t"), h.sgMember(topics, "b", "t")
	rack := "r1"
	for _, c := range []*sgClient{a, b, a} {
		sgOK(t, c.id, c.beat())
	}
	h.g.sg.members["b"].rackID = &rack
	h.g.sg.dirty = true
	h.g.recordSG()
	h.apply(h.g.take())
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
	if g.sg == nil || g.sg.epoch != h.g.sg.epoch || len(g.sg.members) != 2 || !g.sg.members["a"].assigned.equal(a.owned) ||
		*g.sg.members["b"].rackID != "r1" || g.sg.members["a"].clientHost != "/h" || len(g.sg.topics) != 1 {
		t.Fatalf("restored %+v", g.sg)
	}
	if next := g.NextDeadline(); !next.Equal(h.now.Add(45 * time.Second)) {
		t.Fatalf("restored sessions end at %v", next)
	}
	h.g = g
	epoch := g.sg.epoch
	sgOK(t, "a after restore", a.beat())
	sgOK(t, "b after restore", b.beat())
	if g.sg.epoch != epoch {
		t.Fatal("the epoch moved after a restore")
	}
	// DeleteGroups: refused while members remain; then the group goes
	// and the deletion is an effect for the share-partitions' listener.
	del := func() (Effects, int16) {
		ref := h.ref()
		eff := h.g.Delete(h.now, ref)
		h.apply(eff)
		return eff, h.replies[ref].(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode
	}
	if eff, code := del(); code != kerr.NonEmptyGroup.Code || eff.ShareGroupDeleted {
		t.Fatalf("delete of a group with members: %v", kerr.ErrorForCode(code))
	}
	sgOK(t, "a leaves", a.leave())
	sgOK(t, "b leaves", b.leave())
	eff, code := del()
	if code != 0 || !eff.ShareGroupDeleted || h.g.Live() || h.g.sg != nil {
		t.Fatalf("delete of an empty share group: %v deleted=%v live=%v", kerr.ErrorForCode(code), eff.ShareGroupDeleted, h.g.Live())
	}
	// Restored from every record, the group is gone.
	recs = recs[:0]
	for _, r := range h.records {
		key, value := r.encode()
		d, _ := decodeRecord(key, value)
		recs = append(recs, d)
	}
	g = NewGroup("g", &h.cfg)
	g.Restore(recs, h.now)
	if g.Live() {
		t.Fatal("a deleted share group came back")
	}
}

func TestShareSnapshotCorrupt(t *testing.T) {
	s := newShareGroup()
	s.epoch, s.assignmentEpoch = 3, 3
	s.topics["t"] = topicMeta{name: "t", id: [16]byte{1}, partitions: 2}
	s.members["m"] = &shareMember{id: "m", subscribed: []string{"t"}, epoch: 3, assigned: assignment{{1}: {0, 1}}}
	s.target["m"] = assignment{{1}: {0, 1}}
	raw := s.encode()
	if _, err := decodeShareGroup(raw); err != nil {
		t.Fatal(err)
	}
	for cut := 0; cut < len(raw); cut++ {
		if _, err := decodeShareGroup(raw[:cut]); err == nil {
			t.Fatalf("a snapshot cut at %d of %d bytes decoded", cut, len(raw))
		}
	}
}

// EnsureShareGroup (AlterShareGroupOffsets on a group nobody made):
// an empty share group appears, durable; members or another type refuse.
func TestShareGroupEnsure(t *testing.T) {
	h := newHarness(t, testConfig())
	topics := fakeTopics{}
	topics.add("t", 1)
	ensure := func() int16 {
		ref := h.ref()
		h.apply(h.g.EnsureShareGroup(h.now, ref))
		return h.replies[ref].(*kmsg.ShareGroupHeartbeatResponse).ErrorCode
	}
	wantCode(t, "ensure on nothing", ensure(), nil)
	if s, ok := h.g.Summary(); !ok || s.Type != "share" || s.State != "Empty" || len(h.records) != 1 {
		t.Fatalf("summary %+v, %d records", s, len(h.records))
	}
	wantCode(t, "ensure again", ensure(), nil)
	if len(h.records) != 1 {
		t.Fatal("ensuring an existing share group wrote again")
	}
	a := h.sgMember(topics, "a", "t")
	sgOK(t, "a joins the made group", a.beat())
	if a.epoch != 1 {
		t.Fatalf("first member's epoch %d", a.epoch)
	}
	wantCode(t, "ensure with a member", ensure(), kerr.NonEmptyGroup)

	other := newHarness(t, testConfig())
	mustOK(t, "cg", other.cgMember(topics, "c", "t").beat())
	ref := other.ref()
	other.apply(other.g.EnsureShareGroup(other.now, ref))
	wantCode(t, "ensure on a consumer group", other.replies[ref].(*kmsg.ShareGroupHeartbeatResponse).ErrorCode, kerr.GroupIDNotFound)
}
