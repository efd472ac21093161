package group

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// harness drives one Group through scripted steps with a fake clock,
// applying effects as the actor would and checking that every request is
// answered at most once and that the group's invariants hold.
type harness struct {
	t       *testing.T
	cfg     Config
	g       *Group
	now     time.Time
	nextRef Ref
	open    map[Ref]bool
	replies map[Ref]kmsg.Response
	records []Record
	ids     int
}

func testConfig() Config {
	c := DefaultConfig()
	c.InitialRebalanceDelay = 3 * time.Second
	return c
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	h := &harness{t: t, cfg: cfg, now: time.Unix(1_700_000_000, 0), open: map[Ref]bool{}, replies: map[Ref]kmsg.Response{}}
	h.cfg.NewMemberID = func(prefix string) string {
		h.ids++
		return fmt.Sprintf("%s-%d", prefix, h.ids)
	}
	h.g = NewGroup("g", &h.cfg)
	return h
}

func (h *harness) ref() Ref {
	h.nextRef++
	h.open[h.nextRef] = true
	return h.nextRef
}

func (h *harness) apply(e Effects) {
	h.t.Helper()
	h.g.Applied(e.Records)
	h.records = append(h.records, e.Records...)
	for _, r := range e.Replies {
		if !h.open[r.To] {
			h.t.Fatalf("reply to ref %d that is not waiting (answered twice?)", r.To)
		}
		delete(h.open, r.To)
		h.replies[r.To] = r.Resp
	}
	checkInvariants(h.t, h.g)
}

// advance moves the clock by d, ticking at every deadline on the way.
func (h *harness) advance(d time.Duration) {
	h.t.Helper()
	end := h.now.Add(d)
	for {
		next := h.g.NextDeadline()
		if next.IsZero() || next.After(end) {
			break
		}
		if next.After(h.now) {
			h.now = next
		}
		h.apply(h.g.Tick(h.now))
	}
	h.now = end
	h.apply(h.g.Tick(h.now))
}

type joinOpt func(*kmsg.JoinGroupRequest)

func withVersion(v int16) joinOpt { return func(r *kmsg.JoinGroupRequest) { r.Version = v } }
func withInstance(id string) joinOpt {
	return func(r *kmsg.JoinGroupRequest) { r.InstanceID = &id }
}
func withProtocols(ps ...string) joinOpt {
	return func(r *kmsg.JoinGroupRequest) {
		r.Protocols = nil
		for _, p := range ps {
			r.Protocols = append(r.Protocols, kmsg.JoinGroupRequestProtocol{Name: p, Metadata: []byte("md-" + p)})
		}
	}
}
func withMetadata(md string) joinOpt {
	return func(r *kmsg.JoinGroupRequest) {
		for i := range r.Protocols {
			r.Protocols[i].Metadata = []byte(md)
		}
	}
}
func withType(pt string) joinOpt { return func(r *kmsg.JoinGroupRequest) { r.ProtocolType = pt } }
func withTimeouts(session, rebalance time.Duration) joinOpt {
	return func(r *kmsg.JoinGroupRequest) {
		r.SessionTimeoutMillis = int32(session / time.Millisecond)
		r.RebalanceTimeoutMillis = int32(rebalance / time.Millisecond)
	}
}

func (h *harness) join(memberID string, opts ...joinOpt) Ref {
	h.t.Helper()
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = 3 // no MEMBER_ID_REQUIRED handshake unless asked
	req.Group = "g"
	req.MemberID = memberID
	req.SessionTimeoutMillis = 10_000
	req.RebalanceTimeoutMillis = 20_000
	req.ProtocolType = "consumer"
	withProtocols("range")(req)
	for _, o := range opts {
		o(req)
	}
	ref := h.ref()
	h.apply(h.g.Join(h.now, ref, req, Client{ID: "client", Host: "/127.0.0.1"}))
	return ref
}

func (h *harness) joinResp(ref Ref) *kmsg.JoinGroupResponse {
	h.t.Helper()
	r, ok := h.replies[ref]
	if !ok {
		h.t.Fatalf("join ref %d not answered", ref)
	}
	return r.(*kmsg.JoinGroupResponse)
}

func (h *harness) waiting(ref Ref) {
	h.t.Helper()
	if !h.open[ref] {
		h.t.Fatalf("ref %d answered, want it waiting: %+v", ref, h.replies[ref])
	}
}

func (h *harness) sync(memberID string, gen int32, assign map[string]string) Ref {
	h.t.Helper()
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group, req.MemberID, req.Generation = "g", memberID, gen
	for m, a := range assign {
		req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: m, MemberAssignment: []byte(a)})
	}
	ref := h.ref()
	h.apply(h.g.Sync(h.now, ref, req))
	return ref
}

func (h *harness) syncResp(ref Ref) *kmsg.SyncGroupResponse {
	h.t.Helper()
	r, ok := h.replies[ref]
	if !ok {
		h.t.Fatalf("sync ref %d not answered", ref)
	}
	return r.(*kmsg.SyncGroupResponse)
}

func (h *harness) heartbeat(memberID string, gen int32, instance ...string) int16 {
	h.t.Helper()
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.MemberID, req.Generation = "g", memberID, gen
	if len(instance) > 0 {
		req.InstanceID = &instance[0]
	}
	ref := h.ref()
	h.apply(h.g.Heartbeat(h.now, ref, req))
	return h.replies[ref].(*kmsg.HeartbeatResponse).ErrorCode
}

func (h *harness) leave(members ...kmsg.LeaveGroupRequestMember) *kmsg.LeaveGroupResponse {
	h.t.Helper()
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group, req.Members = "g", members
	ref := h.ref()
	h.apply(h.g.Leave(h.now, ref, req))
	return h.replies[ref].(*kmsg.LeaveGroupResponse)
}

func (h *harness) commit(memberID string, gen int32, version int16, offsets map[string]int64) *kmsg.OffsetCommitResponse {
	h.t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.MemberID, req.Generation = version, "g", memberID, gen
	for topic, off := range offsets {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = 0, off, 7
		md := "md-" + topic
		rp.Metadata = &md
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	ref := h.ref()
	h.apply(h.g.CommitOffsets(h.now, ref, req))
	return h.replies[ref].(*kmsg.OffsetCommitResponse)
}

func commitCode(t *testing.T, r *kmsg.OffsetCommitResponse) int16 {
	t.Helper()
	var code int16
	for _, rt := range r.Topics {
		for i, rp := range rt.Partitions {
			if i == 0 && rt.Topic == r.Topics[0].Topic {
				code = rp.ErrorCode
			} else if rp.ErrorCode != code {
				t.Fatalf("mixed commit codes: %+v", r)
			}
		}
	}
	return code
}

func (h *harness) fetch(q FetchQuery) kmsg.OffsetFetchResponseGroup {
	h.t.Helper()
	ref := h.ref()
	h.apply(h.g.FetchOffsets(h.now, ref, q))
	return h.replies[ref].(*kmsg.OffsetFetchResponse).Groups[0]
}

// stableGroup joins n dynamic members within one initial delay (of a
// second) and syncs them; it returns the member ids in join order (the
// first leads).
func (h *harness) stableGroup(n int, opts ...joinOpt) []string {
	h.t.Helper()
	saved := h.cfg.InitialRebalanceDelay
	h.cfg.InitialRebalanceDelay = time.Second
	var refs []Ref
	for i := 0; i < n; i++ {
		refs = append(refs, h.join("", opts...))
	}
	// Joins during the delay extend it once more.
	h.advance(2 * time.Second)
	h.cfg.InitialRebalanceDelay = saved
	var ids []string
	for _, r := range refs {
		resp := h.joinResp(r)
		if resp.ErrorCode != 0 {
			h.t.Fatalf("join: %v", kerr.ErrorForCode(resp.ErrorCode))
		}
		ids = append(ids, resp.MemberID)
	}
	gen := h.g.generation
	assign := map[string]string{}
	for _, id := range ids {
		assign[id] = "assign-" + id
	}
	var syncs []Ref
	syncs = append(syncs, h.sync(ids[0], gen, assign))
	for _, id := range ids[1:] {
		syncs = append(syncs, h.sync(id, gen, nil))
	}
	for i, r := range syncs {
		if resp := h.syncResp(r); resp.ErrorCode != 0 || string(resp.MemberAssignment) != "assign-"+ids[i] {
			h.t.Fatalf("sync %s: code %d assignment %q", ids[i], resp.ErrorCode, resp.MemberAssignment)
		}
	}
	if h.g.state != Stable {
		h.t.Fatalf("state %v, want Stable", h.g.state)
	}
	return ids
}

func wantCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	var wc int16
	if want != nil {
		wc = want.Code
	}
	if got != wc {
		t.Fatalf("%s: got %v, want %v", what, kerr.ErrorForCode(got), want)
	}
}

// checkInvariants checks the Group's documented invariants.
func checkInvariants(t *testing.T, g *Group) {
	t.Helper()
	if g.cg != nil {
		g.cg.checkInvariants(t)
		return
	}
	if g.sg != nil {
		g.sg.checkInvariants(t)
		return
	}
	awaiting := 0
	for _, m := range g.order {
		if g.members[m.id] != m {
			t.Fatalf("member %s in order but not in members", m.id)
		}
		if m.joinRef != 0 {
			awaiting++
		}
		if m.instanceID != nil && g.static[*m.instanceID] != m.id {
			t.Fatalf("static member %s not mapped", m.id)
		}
	}
	if len(g.order) != len(g.members) {
		t.Fatalf("order has %d members, map %d", len(g.order), len(g.members))
	}
	if awaiting != g.awaitingJoin {
		t.Fatalf("awaitingJoin %d, counted %d", g.awaitingJoin, awaiting)
	}
	for inst, id := range g.static {
		if m := g.members[id]; m == nil || m.instanceID == nil || *m.instanceID != inst {
			t.Fatalf("static %s -> %s dangles", inst, id)
		}
	}
	if (g.leader == "") != (len(g.members) == 0) {
		t.Fatalf("leader %q with %d members", g.leader, len(g.members))
	}
	if g.leader != "" && g.members[g.leader] == nil {
		t.Fatalf("leader %s is not a member", g.leader)
	}
	if g.state == Empty && len(g.members) > 0 {
		t.Fatalf("Empty with %d members", len(g.members))
	}
	if (g.state == Stable || g.state == CompletingRebalance) && len(g.members) == 0 {
		t.Fatalf("%v without members", g.state)
	}
}
