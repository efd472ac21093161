package group

// Scripted tests of KIP-1071 streams groups (StreamsGroupHeartbeat): a
// word-count application whose subtopology "0" reads the user topic
// "input" and writes a repartition topic, read by the stateful
// subtopology "1" (which has a changelog). Every step checks the streams
// group's invariants; clients marked strict also check that what each
// client believes it owns is what the coordinator says, and that no two
// clients process the same active task.

import (
	"fmt"
	"maps"
	"math/rand"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	stRepartition = "app-words-repartition"
	stChangelog   = "app-counts-changelog"
)

// stWordCount is the test application's topology: "0" reads input and
// writes the repartition topic, "1" reads that and keeps a store backed by
// the changelog; the broker decides both internal topics' counts.
func stWordCount() *kmsg.StreamsGroupHeartbeatRequestTopology {
	t := kmsg.NewStreamsGroupHeartbeatRequestTopology()
	s0 := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
	s0.SubtopologyID = "0"
	s0.SourceTopics = []string{"input"}
	s0.RepartitionSinkTopics = []string{stRepartition}
	s1 := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
	s1.SubtopologyID = "1"
	rep := kmsg.NewTopicInfo()
	rep.Topic = stRepartition
	cl := kmsg.NewTopicInfo()
	cl.Topic = stChangelog
	cl.Configs = []kmsg.TopicInfoConfig{{Key: "cleanup.policy", Value: "compact"}}
	s1.RepartitionSourceTopics = []kmsg.TopicInfo{rep}
	s1.StateChangelogTopics = []kmsg.TopicInfo{cl}
	t.Subtopologies = []kmsg.StreamsGroupHeartbeatRequestTopologySubtopology{s0, s1}
	return &t
}

// stAll is every task of the word count with n input partitions.
func stAll(n int32) streamsTasks {
	var out streamsTasks
	for p := int32(0); p < n; p++ {
		out = out.add("0", p).add("1", p)
	}
	return out
}

// stEnv is a harness with the broker's topics and the clients of one
// streams group.
type stEnv struct {
	t       *testing.T
	h       *harness
	topics  fakeTopics
	clients []*stClient
	// strict: after every heartbeat, a client that is a member at the
	// epoch the coordinator knows holds exactly what the coordinator
	// says, and no two member clients hold the same active task.
	strict bool
}

func newSTEnv(t *testing.T, cfg Config) *stEnv {
	t.Helper()
	return &stEnv{t: t, h: newHarness(t, cfg), topics: fakeTopics{}, strict: true}
}

// ready makes the input topic (n partitions) and both internal topics.
func (e *stEnv) ready(n int32) {
	e.topics.add("input", n)
	e.topics.add(stRepartition, n)
	e.topics.add(stChangelog, n)
}

// stClient is a scripted Kafka Streams member (one stream thread): it
// remembers its member id, epoch and owned tasks, as a client would, and
// drops revoked tasks as soon as it is told.
type stClient struct {
	env           *stEnv
	id            string
	process       string
	topology      *kmsg.StreamsGroupHeartbeatRequestTopology
	epoch         int32
	active        streamsTasks
	standby       streamsTasks
	endpointEpoch int32
	shutdown      bool
	// The last response's status codes and topics to create.
	status []int8
	create []StreamsTopicToCreate
}

func (e *stEnv) member(id, process string) *stClient {
	c := &stClient{env: e, id: id, process: process, topology: stWordCount()}
	e.clients = append(e.clients, c)
	return c
}

// request is a full heartbeat: the topology when joining, else the tasks
// the client owns.
func (c *stClient) request() *kmsg.StreamsGroupHeartbeatRequest {
	req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch = "g", c.id, c.epoch
	req.EndpointInformationEpoch = c.endpointEpoch
	proc := c.process
	req.ProcessID = &proc
	req.ShutdownApplication = c.shutdown
	if c.epoch == 0 {
		req.RebalanceTimeoutMillis = 30_000
		req.Topology = c.topology
	} else {
		req.ActiveTasks = tasksWire(c.active)
		req.StandbyTasks = tasksWire(c.standby)
		req.WarmupTasks = []kmsg.TaskIDs{}
	}
	return req
}

// beat sends a full heartbeat and adopts what comes back.
func (c *stClient) beat() *kmsg.StreamsGroupHeartbeatResponse {
	c.env.t.Helper()
	resp, create := c.send(c.request())
	c.status, c.create = stStatuses(resp), create
	if resp.ErrorCode == 0 {
		c.epoch = resp.MemberEpoch
		c.endpointEpoch = resp.EndpointInformationEpoch
		if resp.ActiveTasks != nil {
			c.active = streamsTasksFrom(resp.ActiveTasks)
		}
		if resp.StandbyTasks != nil {
			c.standby = streamsTasksFrom(resp.StandbyTasks)
		}
	}
	c.env.checkClients()
	return resp
}

// leave sends epoch -1; the client forgets its tasks.
func (c *stClient) leave() *kmsg.StreamsGroupHeartbeatResponse {
	c.env.t.Helper()
	req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch = "g", c.id, leaveEpoch
	resp, create := c.send(req)
	if len(create) > 0 {
		c.env.t.Fatalf("leave asks for topics: %+v", create)
	}
	if resp.ErrorCode == 0 {
		c.epoch, c.active, c.standby = 0, nil, nil
	}
	c.env.checkClients()
	return resp
}

// rejoin is what a fenced client does: drop everything and join again.
func (c *stClient) rejoin() *kmsg.StreamsGroupHeartbeatResponse {
	c.env.t.Helper()
	c.epoch, c.active, c.standby, c.endpointEpoch = 0, nil, nil, 0
	return c.beat()
}

// send delivers one heartbeat and returns its answer.
func (c *stClient) send(req *kmsg.StreamsGroupHeartbeatRequest) (*kmsg.StreamsGroupHeartbeatResponse, []StreamsTopicToCreate) {
	e := c.env
	e.t.Helper()
	ref := e.h.ref()
	e.h.apply(e.h.g.StreamsGroupHeartbeat(e.h.now, ref, req, Client{ID: "cl-" + c.id, Host: "/h-" + c.process}, e.topics))
	if e.h.g.st != nil {
		e.h.g.st.checkInvariants(e.t)
	}
	switch r := e.h.replies[ref].(type) {
	case *StreamsReply:
		return r.StreamsGroupHeartbeatResponse, r.Create
	case *kmsg.StreamsGroupHeartbeatResponse:
		return r, nil
	default:
		e.t.Fatalf("heartbeat answered with %T", r)
		return nil, nil
	}
}

// checkClients is the clients' view of the invariants (when strict).
func (e *stEnv) checkClients() {
	e.t.Helper()
	s := e.h.g.st
	if !e.strict || s == nil {
		return
	}
	held := map[stTask]string{}
	for _, c := range e.clients {
		m := s.members[c.id]
		if m == nil {
			continue
		}
		if c.epoch == m.epoch && (!c.active.equal(m.active) || !c.standby.equal(m.standby)) {
			e.t.Fatalf("client %s at epoch %d holds %v/%v, the coordinator says %v/%v", c.id, c.epoch, c.active, c.standby, m.active, m.standby)
		}
		for sub, ps := range c.active {
			for _, p := range ps {
				k := stTask{sub, p}
				if other, ok := held[k]; ok {
					e.t.Fatalf("clients %s and %s both process active task %s_%d", other, c.id, sub, p)
				}
				held[k] = c.id
			}
		}
	}
}

// settle heartbeats the clients in turn until the group is Stable with
// every one of them at the assignment epoch.
func (e *stEnv) settle(cs ...*stClient) {
	e.t.Helper()
	for round := 0; round < 10; round++ {
		for _, c := range cs {
			stOK(e.t, c.id, c.beat())
		}
		s := e.h.g.st
		if s.state() != Stable {
			continue
		}
		done := true
		for _, c := range cs {
			done = done && c.epoch == s.assignmentEpoch
		}
		if done {
			return
		}
	}
	e.t.Fatalf("group not Stable after 10 rounds: %v", e.h.g.st.state())
}

func (e *stEnv) commit(memberID string, epoch int32, topic string, parts ...int32) map[int32]int16 {
	e.t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.MemberID, req.Generation = 9, "g", memberID, epoch
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	for _, p := range parts {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p, 100+int64(p)
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	ref := e.h.ref()
	e.h.apply(e.h.g.CommitOffsets(e.h.now, ref, req))
	out := map[int32]int16{}
	for _, rp := range e.h.replies[ref].(*kmsg.OffsetCommitResponse).Topics[0].Partitions {
		out[rp.Partition] = rp.ErrorCode
	}
	return out
}

func (e *stEnv) describe() kmsg.StreamsGroupDescribeResponseGroup {
	e.t.Helper()
	ref := e.h.ref()
	e.h.apply(e.h.g.StreamsGroupDescribe(e.h.now, ref))
	return e.h.replies[ref].(*kmsg.StreamsGroupDescribeResponse).Groups[0]
}

// restored rebuilds the group from the harness's records, through the
// store's codec.
func (e *stEnv) restored() *Group {
	e.t.Helper()
	var recs []Record
	for _, r := range e.h.records {
		key, value := r.encode()
		d, err := decodeRecord(key, value)
		if err != nil {
			e.t.Fatal(err)
		}
		recs = append(recs, d)
	}
	g := NewGroup("g", &e.h.cfg)
	g.Restore(recs, e.h.now)
	checkInvariants(e.t, g)
	if g.st != nil {
		g.st.checkInvariants(e.t)
	}
	return g
}

// stNoErrors expects every partition accepted.
func stNoErrors(parts ...int32) map[int32]*kerr.Error {
	out := map[int32]*kerr.Error{}
	for _, p := range parts {
		out[p] = nil
	}
	return out
}

func stStatuses(r *kmsg.StreamsGroupHeartbeatResponse) []int8 {
	var out []int8
	for _, s := range r.Status {
		out = append(out, s.StatusCode)
	}
	return out
}

func stOK(t *testing.T, what string, r *kmsg.StreamsGroupHeartbeatResponse) {
	t.Helper()
	stWant(t, what, r, nil)
}

func stWant(t *testing.T, what string, r *kmsg.StreamsGroupHeartbeatResponse, want *kerr.Error) {
	t.Helper()
	var wc int16
	if want != nil {
		wc = want.Code
	}
	if r.ErrorCode != wc {
		msg := ""
		if r.ErrorMessage != nil {
			msg = *r.ErrorMessage
		}
		t.Fatalf("%s: got %v (%s), want %v", what, kerr.ErrorForCode(r.ErrorCode), msg, want)
	}
}

// checkInvariants checks a streams group's invariants.
func (s *streamsGroup) checkInvariants(t *testing.T) {
	t.Helper()
	if s.assignmentEpoch > s.epoch {
		t.Fatalf("assignment epoch %d above group epoch %d", s.assignmentEpoch, s.epoch)
	}
	activeOwner := map[stTask]string{}
	copies := map[stTask]map[string]int{}
	count := func(k stTask, proc string) {
		if copies[k] == nil {
			copies[k] = map[string]int{}
		}
		copies[k][proc]++
	}
	for id, m := range s.members {
		if m.id != id {
			t.Fatalf("member %s stored under %s", m.id, id)
		}
		if m.epoch <= 0 || m.epoch > s.epoch {
			t.Fatalf("member %s at epoch %d, group at %d", id, m.epoch, s.epoch)
		}
		if m.sessionDeadline.IsZero() {
			t.Fatalf("member %s has no session deadline: it never expires", id)
		}
		if m.active.overlaps(m.pendingActive) || m.standby.overlaps(m.pendingStandby) {
			t.Fatalf("member %s has a task both assigned and pending revocation", id)
		}
		allA, allS := m.active.union(m.pendingActive), m.standby.union(m.pendingStandby)
		if allA.overlaps(allS) {
			t.Fatalf("member %s holds a task both as active and standby", id)
		}
		pending := m.pendingActive.count()+m.pendingStandby.count() > 0
		if (m.state == msUnrevoked) != pending {
			t.Fatalf("member %s in state %v with pending %v/%v", id, m.state, m.pendingActive, m.pendingStandby)
		}
		if m.state == msUnrevoked && m.rebalanceDeadline.IsZero() {
			t.Fatalf("member %s revoking without a rebalance deadline", id)
		}
		if len(m.activeAt) != allA.count() {
			t.Fatalf("member %s: %d assignment epochs for %d active tasks", id, len(m.activeAt), allA.count())
		}
		for sub, ps := range allA {
			for _, p := range ps {
				k := stTask{sub, p}
				if other, ok := activeOwner[k]; ok {
					t.Fatalf("members %s and %s both hold active task %s_%d", other, id, sub, p)
				}
				activeOwner[k] = id
				if at, ok := m.activeAt[k]; !ok || at > m.epoch {
					t.Fatalf("member %s: task %s_%d assigned at epoch %d (known %v), member epoch %d", id, sub, p, at, ok, m.epoch)
				}
				count(k, m.processID)
			}
		}
		for sub, ps := range allS {
			for _, p := range ps {
				count(stTask{sub, p}, m.processID)
			}
		}
	}
	for k, procs := range copies {
		for proc, n := range procs {
			if n > 1 {
				t.Fatalf("process %s holds %d copies of task %s_%d", proc, n, k.sub, k.part)
			}
		}
	}
	for id := range s.target {
		if s.members[id] == nil {
			t.Fatalf("target for departed member %s", id)
		}
	}
}

// 1. The first member's topology names internal topics that do not
// exist: the group asks for them and assigns nothing until they do.
func TestStreamsGroupMissingInternalTopics(t *testing.T) {
	e := newSTEnv(t, testConfig())
	e.topics.add("input", 4)
	a := e.member("a", "p1")
	r := a.beat()
	stOK(t, "join", r)
	if !slices.Equal(a.status, []int8{streamsStatusMissingInternalTopics}) {
		t.Fatalf("status %v, want [MISSING_INTERNAL_TOPICS]", a.status)
	}
	want := []StreamsTopicToCreate{
		{Name: stChangelog, Partitions: 4, ReplicationFactor: -1, Configs: map[string]string{"cleanup.policy": "compact"}},
		{Name: stRepartition, Partitions: 4, ReplicationFactor: -1, Configs: map[string]string{}},
	}
	if len(a.create) != len(want) {
		t.Fatalf("create %+v", a.create)
	}
	for i := range want {
		g, w := a.create[i], want[i]
		if g.Name != w.Name || g.Partitions != w.Partitions || g.ReplicationFactor != w.ReplicationFactor || !maps.Equal(g.Configs, w.Configs) {
			t.Fatalf("create[%d] = %+v, want %+v", i, g, w)
		}
	}
	if r.ActiveTasks == nil || a.active.count() != 0 || a.standby.count() != 0 || a.epoch != 1 {
		t.Fatalf("joined at %d with %v (wire %v)", a.epoch, a.active, r.ActiveTasks)
	}
	if r.HeartbeatIntervalMillis != 5000 || r.MemberID != "a" {
		t.Fatalf("response %+v", r)
	}
	if st := e.h.g.st.state(); st != NotReady {
		t.Fatalf("state %v, want NotReady", st)
	}
	if s, _ := e.h.g.Summary(); s.State != "NotReady" || s.Type != "streams" {
		t.Fatalf("summary %+v", s)
	}
	// Until the protocol layer has created them, every heartbeat asks
	// again, and the epoch stays.
	stOK(t, "again", a.beat())
	if len(a.create) != 2 || a.epoch != 1 || !slices.Equal(a.status, []int8{streamsStatusMissingInternalTopics}) {
		t.Fatalf("second heartbeat: epoch %d status %v create %v", a.epoch, a.status, a.create)
	}
	e.topics.add(stRepartition, 4)
	e.topics.add(stChangelog, 4)
	stOK(t, "topics exist", a.beat())
	if len(a.status) != 0 || len(a.create) != 0 {
		t.Fatalf("ready: status %v create %v", a.status, a.create)
	}
	if !a.active.equal(stAll(4)) || a.standby.count() != 0 || a.epoch != 2 {
		t.Fatalf("ready: epoch %d active %v standby %v", a.epoch, a.active, a.standby)
	}
	if st := e.h.g.st.state(); st != Stable {
		t.Fatalf("state %v, want Stable", st)
	}
}

// 2. Missing or wrongly partitioned topics: a status, nothing to create,
// nothing assigned.
func TestStreamsGroupMissingSourceTopics(t *testing.T) {
	e := newSTEnv(t, testConfig())
	a := e.member("a", "p1")
	stOK(t, "join", a.beat())
	if !slices.Equal(a.status, []int8{streamsStatusMissingSourceTopics}) || len(a.create) != 0 || a.active.count() != 0 {
		t.Fatalf("no input: status %v create %v active %v", a.status, a.create, a.active)
	}
	if e.h.g.st.state() != NotReady {
		t.Fatalf("state %v", e.h.g.st.state())
	}
	// The changelog was created by hand with the wrong count.
	e.topics.add("input", 4)
	e.topics.add(stRepartition, 4)
	e.topics.add(stChangelog, 2)
	stOK(t, "wrong changelog", a.beat())
	if !slices.Equal(a.status, []int8{streamsStatusIncorrectlyPartitioned}) || len(a.create) != 0 || a.active.count() != 0 {
		t.Fatalf("wrong changelog: status %v create %v active %v", a.status, a.create, a.active)
	}
	if e.h.g.st.state() != NotReady {
		t.Fatalf("state %v", e.h.g.st.state())
	}
	e.topics.add(stChangelog, 4)
	stOK(t, "fixed", a.beat())
	if len(a.status) != 0 || !a.active.equal(stAll(4)) {
		t.Fatalf("fixed: status %v active %v", a.status, a.active)
	}
	// The input topic goes away: the tasks are taken back.
	delete(e.topics, "input")
	stOK(t, "input deleted", a.beat())
	if !slices.Equal(a.status, []int8{streamsStatusMissingSourceTopics}) || a.active.count() != 0 {
		t.Fatalf("input deleted: status %v active %v", a.status, a.active)
	}
}

// 3. A second member on another process: the first revokes half its
// tasks before the second gets them; no task is ever active twice.
func TestStreamsGroupHandOver(t *testing.T) {
	e := newSTEnv(t, testConfig())
	e.ready(4)
	s := func() *streamsGroup { return e.h.g.st }
	a, b := e.member("a", "p1"), e.member("b", "p2")
	stOK(t, "a joins", a.beat())
	if a.epoch != 1 || !a.active.equal(stAll(4)) {
		t.Fatalf("a: epoch %d active %v", a.epoch, a.active)
	}
	stOK(t, "b joins", b.beat())
	if b.epoch != 2 || b.active.count() != 0 || s().members["b"].state != msUnreleased {
		t.Fatalf("b: epoch %d active %v state %v", b.epoch, b.active, s().members["b"].state)
	}
	if s().state() != Reconciling {
		t.Fatalf("state %v", s().state())
	}
	bTarget := s().target["b"].active
	if bTarget.count() != 4 || bTarget.overlaps(s().target["a"].active) {
		t.Fatalf("targets a %v b %v", s().target["a"], s().target["b"])
	}
	stOK(t, "b waits", b.beat())
	if b.active.count() != 0 || s().members["b"].state != msUnreleased {
		t.Fatalf("b got %v while a holds them", b.active)
	}
	stOK(t, "a told to revoke", a.beat())
	if a.epoch != 1 || a.active.count() != 4 || a.active.overlaps(bTarget) || s().members["a"].state != msUnrevoked {
		t.Fatalf("a: epoch %d active %v state %v", a.epoch, a.active, s().members["a"].state)
	}
	if !s().members["a"].pendingActive.equal(bTarget) {
		t.Fatalf("a pending %v, b's target %v", s().members["a"].pendingActive, bTarget)
	}
	// a has not reported the revocation yet: b still waits.
	stOK(t, "b still waits", b.beat())
	if b.active.count() != 0 || s().members["b"].state != msUnreleased {
		t.Fatalf("b got %v before a revoked", b.active)
	}
	stOK(t, "a revoked", a.beat())
	if a.epoch != 2 || a.active.count() != 4 || s().members["a"].state != msStable {
		t.Fatalf("a after revoking: epoch %d active %v", a.epoch, a.active)
	}
	stOK(t, "b gets its tasks", b.beat())
	if !b.active.equal(bTarget) || b.epoch != 2 || !a.active.union(b.active).equal(stAll(4)) {
		t.Fatalf("b: epoch %d active %v, a %v", b.epoch, b.active, a.active)
	}
	if s().state() != Stable {
		t.Fatalf("state %v", s().state())
	}
	// Sticky: another heartbeat round changes nothing.
	epoch := s().epoch
	e.settle(a, b)
	if s().epoch != epoch || !b.active.equal(bTarget) {
		t.Fatalf("moved without a reason: epoch %d→%d", epoch, s().epoch)
	}

	// A third member on a's process (another thread): 8 tasks over three
	// members, two processes.
	c := e.member("c", "p1")
	stOK(t, "c joins", c.beat())
	e.settle(a, b, c)
	all := a.active.union(b.active).union(c.active)
	if !all.equal(stAll(4)) || a.active.count()+b.active.count()+c.active.count() != 8 {
		t.Fatalf("a %v b %v c %v", a.active, b.active, c.active)
	}
	for _, x := range []*stClient{a, b, c} {
		if n := x.active.count(); n < 2 || n > 3 {
			t.Fatalf("%s holds %d tasks: %v", x.id, n, x.active)
		}
	}
}

// 4. A leaving member's tasks go to the others; a silent one is fenced at
// the session timeout; one that never revokes at its rebalance timeout.
func TestStreamsGroupLeaveAndTimeouts(t *testing.T) {
	e := newSTEnv(t, testConfig())
	e.ready(3)
	a, b := e.member("a", "p1"), e.member("b", "p2")
	e.settle(a, b)
	if a.active.count() != 3 || b.active.count() != 3 {
		t.Fatalf("a %v b %v", a.active, b.active)
	}
	epoch := e.h.g.st.epoch
	r := b.leave()
	stOK(t, "b leaves", r)
	if r.MemberEpoch != -1 || r.MemberID != "b" || e.h.g.st.members["b"] != nil || e.h.g.st.epoch != epoch+1 {
		t.Fatalf("leave: %+v, epoch %d", r, e.h.g.st.epoch)
	}
	stWant(t, "leave again", b.leave(), kerr.UnknownMemberID)
	stOK(t, "a", a.beat())
	if !a.active.equal(stAll(3)) || e.h.g.st.state() != Stable {
		t.Fatalf("a after b left: %v, state %v", a.active, e.h.g.st.state())
	}

	// c joins and goes silent: fenced at the session timeout (45s) while
	// a keeps heartbeating; a gets everything back.
	c := e.member("c", "p2")
	e.settle(a, c)
	if c.active.count() != 3 {
		t.Fatalf("c %v", c.active)
	}
	for i := 0; i < 8; i++ {
		e.h.advance(5 * time.Second)
		stOK(t, "a", a.beat())
		if i < 7 && e.h.g.st.members["c"] == nil {
			t.Fatalf("c fenced after %ds", 5*(i+1))
		}
	}
	e.h.advance(5 * time.Second) // 45s since c's last heartbeat
	if e.h.g.st.members["c"] != nil {
		t.Fatal("silent member not fenced at the session timeout")
	}
	stOK(t, "a", a.beat())
	if !a.active.equal(stAll(3)) {
		t.Fatalf("a after c was fenced: %v", a.active)
	}
	stWant(t, "fenced member", c.beat(), kerr.UnknownMemberID)
	stOK(t, "c rejoins", c.rejoin())

	// a never gives its tasks up (it keeps reporting them all): fenced
	// 30s (its rebalance timeout) after it was told to revoke.
	e.settle(a, c)
	d := e.member("d", "p3")
	stOK(t, "d joins", d.beat())
	stOK(t, "a told to revoke", a.beat())
	if e.h.g.st.members["a"].state != msUnrevoked {
		t.Fatalf("a %v", e.h.g.st.members["a"].state)
	}
	e.strict = false
	kept := stAll(3).minus(c.active)
	for i := 0; ; i++ {
		e.h.advance(5 * time.Second)
		if e.h.g.st.members["a"] == nil {
			if i != 5 {
				t.Fatalf("a fenced after %ds, want 30s", 5*(i+1))
			}
			break
		}
		if i > 6 {
			t.Fatal("member that never revoked was not fenced")
		}
		a.active = kept
		stOK(t, "a keeps its tasks", a.beat())
		stOK(t, "c", c.beat())
		stOK(t, "d", d.beat())
	}
	e.strict = true
	stWant(t, "a after its rebalance timeout", a.beat(), kerr.UnknownMemberID)
	a.epoch, a.active, a.standby = 0, nil, nil
	e.settle(c, d)
	if !c.active.union(d.active).equal(stAll(3)) {
		t.Fatalf("c %v d %v", c.active, d.active)
	}
	stOK(t, "c leaves", c.leave())
	stOK(t, "d leaves", d.leave())
	if st := e.h.g.st.state(); st != Empty || len(e.h.g.st.members) != 0 {
		t.Fatalf("state %v with %d members", st, len(e.h.g.st.members))
	}
	if s, _ := e.h.g.Summary(); s.State != "Empty" {
		t.Fatalf("summary %+v", s)
	}
	wantCode(t, "delete the empty streams group", e.h.deleteGroup(), nil)
	if e.h.g.Live() {
		t.Fatal("deleted group still live")
	}
}

// 5. Member epochs: ahead is fenced; the previous epoch owning a subset
// of the assignment (a lost response) is taken; an unknown member is
// refused.
func TestStreamsGroupEpochValidation(t *testing.T) {
	e := newSTEnv(t, testConfig())
	e.ready(2)
	e.strict = false
	a, b := e.member("a", "p1"), e.member("b", "p2")
	stOK(t, "a joins", a.beat())
	a.epoch = 7
	stWant(t, "greater epoch", a.beat(), kerr.FencedMemberEpoch)
	a.epoch = 1
	e.settle(a, b)
	ma := e.h.g.st.members["a"]
	if ma.epoch != 2 || ma.prevEpoch != 1 {
		t.Fatalf("a at %d (previous %d)", ma.epoch, ma.prevEpoch)
	}
	own := a.active.clone()
	// The response that moved a to epoch 2 was lost: it comes back at 1
	// with what it kept.
	a.epoch = 1
	r := a.beat()
	stOK(t, "previous epoch, subset", r)
	if r.MemberEpoch != 2 || !e.h.g.st.members["a"].active.equal(own) {
		t.Fatalf("previous epoch: %+v", r)
	}
	a.epoch, a.active = 1, nil
	stOK(t, "previous epoch, nothing owned", a.beat())
	a.active = own
	// The previous epoch owning b's tasks too: fenced.
	a.epoch, a.active = 1, stAll(2)
	stWant(t, "previous epoch, too much", a.beat(), kerr.FencedMemberEpoch)
	// The previous epoch without saying what it owns: fenced.
	if ma.prevEpoch != 1 {
		t.Fatalf("previous epoch %d", ma.prevEpoch)
	}
	a.epoch = 1
	req := a.request()
	req.ActiveTasks, req.StandbyTasks, req.WarmupTasks = nil, nil, nil
	resp, _ := a.send(req)
	stWant(t, "previous epoch without owned tasks", resp, kerr.FencedMemberEpoch)
	a.epoch, a.active = 2, own
	stOK(t, "current epoch", a.beat())
	// Tasks the topology does not have.
	a.active = own.clone().add("9", 0)
	stWant(t, "unknown subtopology", a.beat(), kerr.InvalidRequest)
	a.active = own.clone().add("1", 9)
	stWant(t, "task out of range", a.beat(), kerr.InvalidRequest)
	a.active = own
	// An unknown member at a positive epoch.
	z := e.member("z", "p9")
	z.epoch = 2
	stWant(t, "unknown member", z.beat(), kerr.UnknownMemberID)
	if e.h.g.st.members["z"] != nil {
		t.Fatal("unknown member added")
	}
	// A fenced client rejoins in place with epoch 0: it is told what it
	// has.
	r = a.rejoin()
	stOK(t, "rejoin", r)
	if a.epoch != 2 || !a.active.equal(own) {
		t.Fatalf("rejoined at %d with %v (had %v)", a.epoch, a.active, own)
	}
	e.strict = true
	e.settle(a, b)
}

// 6. Request validation: unsupported features and malformed requests are
// INVALID_REQUEST and create nothing.
func TestStreamsGroupValidation(t *testing.T) {
	e := newSTEnv(t, testConfig())
	e.ready(2)
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name string
		mod  func(*kmsg.StreamsGroupHeartbeatRequest)
	}{
		{"instance id", func(r *kmsg.StreamsGroupHeartbeatRequest) { r.InstanceID = str("i") }},
		{"warmup tasks", func(r *kmsg.StreamsGroupHeartbeatRequest) {
			r.WarmupTasks = []kmsg.TaskIDs{{SubtopologyID: "1", Partitions: []int32{0}}}
		}},
		{"task offsets", func(r *kmsg.StreamsGroupHeartbeatRequest) { r.TaskOffsets = []kmsg.TaskOffset{} }},
		{"task end offsets", func(r *kmsg.StreamsGroupHeartbeatRequest) { r.TaskEndOffsets = []kmsg.TaskOffset{} }},
		{"source topic regex", func(r *kmsg.StreamsGroupHeartbeatRequest) {
			r.Topology = stWordCount()
			r.Topology.Subtopologies[0].SourceTopicRegex = []string{"in.*"}
		}},
		{"no topology on join", func(r *kmsg.StreamsGroupHeartbeatRequest) { r.Topology = nil }},
		{"topology over 1 MiB", func(r *kmsg.StreamsGroupHeartbeatRequest) {
			r.Topology = stWordCount()
			for i := range 20000 {
				r.Topology.Subtopologies[0].SourceTopics = append(r.Topology.Subtopologies[0].SourceTopics, fmt.Sprintf("%050d", i))
			}
		}},
		{"no rebalance timeout on join", func(r *kmsg.StreamsGroupHeartbeatRequest) { r.RebalanceTimeoutMillis = -1 }},
		{"owned tasks on join", func(r *kmsg.StreamsGroupHeartbeatRequest) {
			r.ActiveTasks = []kmsg.TaskIDs{{SubtopologyID: "0", Partitions: []int32{0}}}
			r.StandbyTasks, r.WarmupTasks = []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
		}},
		{"topology on a heartbeat", func(r *kmsg.StreamsGroupHeartbeatRequest) {
			r.MemberEpoch = 1
			r.ActiveTasks, r.StandbyTasks, r.WarmupTasks = []kmsg.TaskIDs{}, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
		}},
		{"some task lists null", func(r *kmsg.StreamsGroupHeartbeatRequest) {
			r.MemberEpoch, r.Topology = 1, nil
			r.ActiveTasks = []kmsg.TaskIDs{}
		}},
		{"no member id", func(r *kmsg.StreamsGroupHeartbeatRequest) { r.MemberID = "" }},
		{"empty rack", func(r *kmsg.StreamsGroupHeartbeatRequest) { r.RackID = str("") }},
		{"static leave", func(r *kmsg.StreamsGroupHeartbeatRequest) { r.MemberEpoch, r.Topology = -2, nil }},
		{"epoch below -2", func(r *kmsg.StreamsGroupHeartbeatRequest) { r.MemberEpoch, r.Topology = -3, nil }},
		{"duplicate subtopology", func(r *kmsg.StreamsGroupHeartbeatRequest) {
			r.Topology = stWordCount()
			r.Topology.Subtopologies[1].SubtopologyID = "0"
		}},
		{"subtopology without sources", func(r *kmsg.StreamsGroupHeartbeatRequest) {
			r.Topology = stWordCount()
			r.Topology.Subtopologies[0].SourceTopics = nil
		}},
		{"copartition index out of range", func(r *kmsg.StreamsGroupHeartbeatRequest) {
			r.Topology = stWordCount()
			r.Topology.Subtopologies[0].CopartitionGroups = []kmsg.StreamsGroupHeartbeatRequestTopologySubtopologyCopartitionGroup{{SourceTopics: []int16{3}}}
		}},
	} {
		c := e.member("m", "p")
		req := c.request()
		tc.mod(req)
		resp, create := c.send(req)
		stWant(t, tc.name, resp, kerr.InvalidRequest)
		if len(create) != 0 || resp.ErrorMessage == nil {
			t.Fatalf("%s: create %v, message %v", tc.name, create, resp.ErrorMessage)
		}
	}
	if e.h.g.Live() || e.h.g.st != nil || len(e.h.records) != 0 {
		t.Fatal("invalid heartbeats created the group")
	}
	// Heartbeats and leaves of a group that does not exist.
	z := e.member("z", "p")
	z.epoch = 1
	stWant(t, "heartbeat of a missing group", z.beat(), kerr.GroupIDNotFound)
	stWant(t, "leave of a missing group", z.leave(), kerr.GroupIDNotFound)
	if e.h.g.Live() {
		t.Fatal("group created")
	}
	// Another topology while the group's first member is there. (What
	// the refusal leaves behind: TestStreamsGroupDifferentTopologyRefused.)
	e2 := newSTEnv(t, testConfig())
	e2.ready(2)
	stOK(t, "a", e2.member("a", "p1").beat())
	b := e2.member("b", "p2")
	b.topology = stWordCount()
	b.topology.Subtopologies[0].SourceTopics = []string{"input", "other"}
	ref := e2.h.ref()
	e2.h.apply(e2.h.g.StreamsGroupHeartbeat(e2.h.now, ref, b.request(), Client{ID: "cl-b"}, e2.topics))
	stWant(t, "different topology", e2.h.replies[ref].(*StreamsReply).StreamsGroupHeartbeatResponse, kerr.InvalidRequest)
}

// 6b. A second member with another topology is refused while the first
// is there, and leaves no trace.
func TestStreamsGroupDifferentTopologyRefused(t *testing.T) {
	e := newSTEnv(t, testConfig())
	e.ready(2)
	a := e.member("a", "p1")
	stOK(t, "a", a.beat())
	epoch, records := e.h.g.st.epoch, len(e.h.records)
	other := e.member("b", "p2")
	other.topology = stWordCount()
	other.topology.Subtopologies[1].StateChangelogTopics[0].Topic = "app-other-changelog"
	// Sent by hand: the invariant checks of send would stop at the ghost.
	ref := e.h.ref()
	e.h.apply(e.h.g.StreamsGroupHeartbeat(e.h.now, ref, other.request(), Client{ID: "cl-b"}, e.topics))
	stWant(t, "different topology", e.h.replies[ref].(*StreamsReply).StreamsGroupHeartbeatResponse, kerr.InvalidRequest)
	if e.h.g.st.members["b"] != nil || e.h.g.st.epoch != epoch || len(e.h.records) != records {
		t.Fatalf("refused member in the group: members %d, epoch %d→%d, %d new records",
			len(e.h.g.st.members), epoch, e.h.g.st.epoch, len(e.h.records)-records)
	}
	if st := e.h.g.st.state(); st != Stable {
		t.Fatalf("state %v after a refused join", st)
	}
	// A rebalance shares the tasks between the real members only.
	c := e.member("c", "p3")
	stOK(t, "c", c.beat())
	e.settle(a, c)
	if !a.active.union(c.active).equal(stAll(2)) {
		t.Fatalf("a %v c %v", a.active, c.active)
	}
}

// A member alone may replace the topology (everyone else left); a member
// with an older topology epoch is told its topology is stale.
func TestStreamsGroupTopologyEpochs(t *testing.T) {
	e := newSTEnv(t, testConfig())
	e.ready(2)
	a := e.member("a", "p1")
	a.topology.Epoch = 1
	stOK(t, "a", a.beat())
	b := e.member("b", "p2") // an older instance of the application
	stOK(t, "b, older topology", b.beat())
	if !slices.Contains(b.status, streamsStatusStaleTopology) {
		t.Fatalf("b status %v", b.status)
	}
	if slices.Contains(a.status, streamsStatusStaleTopology) {
		t.Fatalf("a status %v", a.status)
	}
	stOK(t, "b leaves", b.leave())
	stOK(t, "a leaves", a.leave())
	// A fresh application with another topology (at the same topology
	// epoch) takes the empty group.
	c := e.member("c", "p3")
	c.topology = stWordCount()
	c.topology.Epoch = 1
	c.topology.Subtopologies = c.topology.Subtopologies[:1]
	c.topology.Subtopologies[0].RepartitionSinkTopics = nil
	stOK(t, "c", c.beat())
	if len(e.h.g.st.topology.subtopologies) != 1 || !c.active.equal(stAll(2).minus(streamsTasks{"1": {0, 1}})) || len(c.status) != 0 {
		t.Fatalf("topology %+v, c %v status %v", e.h.g.st.topology, c.active, c.status)
	}
}

// 7. Standby replicas: the stateful subtopology's tasks get a standby on
// another process; the stateless one none; never on the active's process.
func TestStreamsGroupStandbys(t *testing.T) {
	cfg := testConfig()
	cfg.StreamsStandbyReplicas = 1
	standbys := -1
	cfg.GroupStreamsConfigs = func(string) (time.Duration, time.Duration, int) { return 0, 0, standbys }
	e := newSTEnv(t, cfg)
	e.ready(4)
	a, b := e.member("a", "p1"), e.member("b", "p2")
	stOK(t, "a", a.beat())
	if !a.active.equal(stAll(4)) || a.standby.count() != 0 {
		t.Fatalf("one process: active %v standby %v", a.active, a.standby)
	}
	e.settle(a, b)
	check := func(clients ...*stClient) {
		t.Helper()
		activeProc := map[stTask]string{}
		standbyProcs := map[stTask][]string{}
		for _, c := range clients {
			for sub, ps := range c.active {
				for _, p := range ps {
					activeProc[stTask{sub, p}] = c.process
				}
			}
			for sub, ps := range c.standby {
				if sub != "1" {
					t.Fatalf("%s has standbys of stateless subtopology %s: %v", c.id, sub, c.standby)
				}
				for _, p := range ps {
					standbyProcs[stTask{sub, p}] = append(standbyProcs[stTask{sub, p}], c.process)
				}
			}
		}
		if len(activeProc) != 8 {
			t.Fatalf("%d active tasks", len(activeProc))
		}
		for p := int32(0); p < 4; p++ {
			k := stTask{"1", p}
			if procs := standbyProcs[k]; len(procs) != 1 || procs[0] == activeProc[k] {
				t.Fatalf("task 1_%d active on %s, standbys on %v", p, activeProc[k], procs)
			}
		}
	}
	check(a, b)
	// A second thread on p1: still one standby per stateful task, never
	// on the process of its active.
	c := e.member("c", "p1")
	e.settle(a, b, c)
	check(a, b, c)
	// b leaves: p1 is the only process; its standbys go.
	stOK(t, "b leaves", b.leave())
	e.settle(a, c)
	if a.standby.count()+c.standby.count() != 0 || !a.active.union(c.active).equal(stAll(4)) {
		t.Fatalf("one process left: a %v/%v c %v/%v", a.active, a.standby, c.active, c.standby)
	}
	b.epoch = 0
	stOK(t, "b back", b.beat())
	e.settle(a, b, c)
	check(a, b, c)
	// The group's own streams.num.standby.replicas=0 drops them.
	epoch := e.h.g.st.epoch
	standbys = 0
	e.settle(a, b, c)
	if e.h.g.st.epoch != epoch+1 || a.standby.count()+b.standby.count()+c.standby.count() != 0 {
		t.Fatalf("standbys 0: epoch %d (was %d), standbys %v %v %v", e.h.g.st.epoch, epoch, a.standby, b.standby, c.standby)
	}
}

// A task moves to the member that held it as a standby: that member must
// give up the standby before taking the active.
func TestStreamsGroupStandbyPromoted(t *testing.T) {
	cfg := testConfig()
	cfg.StreamsStandbyReplicas = 1
	e := newSTEnv(t, cfg)
	e.ready(2)
	a, b := e.member("a", "p1"), e.member("b", "p2")
	e.settle(a, b)
	if a.standby.count() != 1 || b.standby.count() != 1 {
		t.Fatalf("standbys a %v b %v", a.standby, b.standby)
	}
	was := b.standby.clone()
	stOK(t, "a leaves", a.leave())
	stOK(t, "b told to drop the standby", b.beat())
	if e.h.g.st.members["b"].state != msUnrevoked || b.standby.count() != 0 || b.active.overlaps(was) {
		t.Fatalf("b: state %v active %v standby %v", e.h.g.st.members["b"].state, b.active, b.standby)
	}
	stOK(t, "b takes the active", b.beat())
	if !b.active.equal(stAll(2)) {
		t.Fatalf("b %v", b.active)
	}
}

// 8. The group's state survives a restore from its records, mid
// reconciliation, and members carry on at their epochs.
func TestStreamsGroupRestore(t *testing.T) {
	cfg := testConfig()
	cfg.StreamsStandbyReplicas = 1
	e := newSTEnv(t, cfg)
	e.ready(4)
	a, b, c := e.member("a", "p1"), e.member("b", "p2"), e.member("c", "p3")
	e.settle(a, b)
	wantCodes(t, "commit", e.commit("a", a.epoch, "input", a.active["0"]...), stNoErrors(a.active["0"]...))
	stOK(t, "c joins", c.beat())
	stOK(t, "a told to revoke", a.beat())
	old := e.h.g.st
	if old.members["a"].state != msUnrevoked && old.members["b"].state != msUnrevoked {
		t.Fatalf("nobody revoking: a %v b %v", old.members["a"].state, old.members["b"].state)
	}
	g := e.restored()
	s := g.st
	if s == nil || !g.Live() {
		t.Fatal("streams group not restored")
	}
	if s.epoch != old.epoch || s.assignmentEpoch != old.assignmentEpoch || s.metaFingerprint != old.metaFingerprint ||
		s.standbys != old.standbys || s.endpointEpoch != old.endpointEpoch || s.shutdownBy != old.shutdownBy {
		t.Fatalf("restored epochs %d/%d fp %q standbys %d, want %d/%d %q %d",
			s.epoch, s.assignmentEpoch, s.metaFingerprint, s.standbys, old.epoch, old.assignmentEpoch, old.metaFingerprint, old.standbys)
	}
	if s.topology.epoch != old.topology.epoch || !s.topology.equal(old.topology) {
		t.Fatalf("topology %+v, want %+v", s.topology, old.topology)
	}
	if len(s.members) != len(old.members) || len(s.target) != len(old.target) {
		t.Fatalf("%d members %d targets, want %d %d", len(s.members), len(s.target), len(old.members), len(old.target))
	}
	for id, o := range old.members {
		m := s.members[id]
		if m == nil {
			t.Fatalf("member %s lost", id)
		}
		if m.epoch != o.epoch || m.prevEpoch != o.prevEpoch || m.state != o.state || m.processID != o.processID ||
			m.clientID != o.clientID || m.clientHost != o.clientHost || m.topologyEpoch != o.topologyEpoch ||
			m.rebalanceTimeout != o.rebalanceTimeout {
			t.Fatalf("member %s restored as %+v, was %+v", id, m, o)
		}
		if !m.active.equal(o.active) || !m.standby.equal(o.standby) || !m.pendingActive.equal(o.pendingActive) ||
			!m.pendingStandby.equal(o.pendingStandby) || !maps.Equal(m.activeAt, o.activeAt) {
			t.Fatalf("member %s tasks restored as %v/%v/%v/%v %v, were %v/%v/%v/%v %v", id,
				m.active, m.standby, m.pendingActive, m.pendingStandby, m.activeAt,
				o.active, o.standby, o.pendingActive, o.pendingStandby, o.activeAt)
		}
		if (m.state == msUnrevoked) != !m.rebalanceDeadline.IsZero() {
			t.Fatalf("member %s: rebalance deadline %v in state %v", id, m.rebalanceDeadline, m.state)
		}
		if !s.target[id].active.equal(old.target[id].active) || !s.target[id].standby.equal(old.target[id].standby) {
			t.Fatalf("target of %s restored as %v, was %v", id, s.target[id], old.target[id])
		}
	}
	if o, ok := g.Committed("input", a.active["0"][0]); !ok || o.Offset != 100+int64(a.active["0"][0]) {
		t.Fatalf("offset not restored: %+v %v", o, ok)
	}
	e.h.g = g
	epoch := s.epoch
	stOK(t, "a after restore", a.beat())
	stOK(t, "b after restore", b.beat())
	stOK(t, "c after restore", c.beat())
	if s.epoch != epoch {
		t.Fatalf("restore moved the group epoch %d→%d", epoch, s.epoch)
	}
	e.settle(a, b, c)
	if !a.active.union(b.active).union(c.active).equal(stAll(4)) {
		t.Fatalf("a %v b %v c %v", a.active, b.active, c.active)
	}
	// And once more, now Stable.
	g2 := e.restored()
	if g2.st.epoch != s.epoch || len(g2.st.members) != 3 {
		t.Fatalf("second restore: %+v", g2.st)
	}
	e.h.g = g2
	e.settle(a, b, c)
	if g2.st.epoch != s.epoch {
		t.Fatalf("epoch moved after the second restore")
	}
}

// After a restore, until some member heartbeats, the restored group's
// state is the one it was persisted in.
func TestStreamsGroupRestoredState(t *testing.T) {
	e := newSTEnv(t, testConfig())
	e.ready(2)
	a, b := e.member("a", "p1"), e.member("b", "p2")
	e.settle(a, b)
	if st := e.h.g.st.state(); st != Stable {
		t.Fatalf("state %v", st)
	}
	kept := a.active["0"]
	wantCodes(t, "previous epoch, live", e.commit("a", a.epoch-1, "input", kept...), stNoErrors(kept...))
	g := e.restored()
	if s, _ := g.Summary(); s.State != "Stable" {
		t.Errorf("restored Stable group reports %q", s.State)
	}
	e.h.g = g
	wantCodes(t, "previous epoch, restored", e.commit("a", a.epoch-1, "input", kept...), stNoErrors(kept...))
}

// A member of a streams group commits with OffsetCommit v9+, as the
// consumer path requires of its members.
func TestStreamsGroupCommitVersion(t *testing.T) {
	e := newSTEnv(t, testConfig())
	e.ready(2)
	a := e.member("a", "p1")
	stOK(t, "a", a.beat())
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.MemberID, req.Generation = 8, "g", "a", a.epoch
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "input", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 5}}}}
	ref := e.h.ref()
	e.h.apply(e.h.g.CommitOffsets(e.h.now, ref, req))
	wantCode(t, "v8 from a streams member", e.h.replies[ref].(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode, kerr.UnsupportedVersion)
}

// 9. Commits through the group: at the member's epoch; at an older epoch
// only for tasks held since then; unknown members refused.
func TestStreamsGroupCommits(t *testing.T) {
	e := newSTEnv(t, testConfig())
	e.ready(4)
	a, b := e.member("a", "p1"), e.member("b", "p2")
	e.settle(a, b) // a: epoch 1 → 2 (kept half), b: 2
	kept := a.active.clone()
	stOK(t, "b leaves", b.leave())
	stOK(t, "a takes all", a.beat())
	if !a.active.equal(stAll(4)) {
		t.Fatalf("a %v", a.active)
	}
	gained := stAll(4).minus(kept)
	old := a.epoch - 1
	if e.h.g.st.members["a"].prevEpoch != old {
		t.Fatalf("a at %d, previous %d", a.epoch, e.h.g.st.members["a"].prevEpoch)
	}
	all := []int32{0, 1, 2, 3}
	wantCodes(t, "current epoch, input", e.commit("a", a.epoch, "input", all...), stNoErrors(all...))
	wantCodes(t, "current epoch, repartition", e.commit("a", a.epoch, stRepartition, all...), stNoErrors(all...))
	for _, tc := range []struct{ topic, sub string }{{"input", "0"}, {stRepartition, "1"}} {
		want := map[int32]*kerr.Error{}
		for _, p := range all {
			if gained.has(tc.sub, p) {
				want[p] = kerr.StaleMemberEpoch
			} else {
				want[p] = nil
			}
		}
		wantCodes(t, "previous epoch, "+tc.topic, e.commit("a", old, tc.topic, all...), want)
	}
	stale := map[int32]*kerr.Error{0: kerr.StaleMemberEpoch, 1: kerr.StaleMemberEpoch}
	wantCodes(t, "epoch ahead", e.commit("a", a.epoch+1, "input", 0, 1), stale)
	wantCodes(t, "epoch 0", e.commit("a", 0, "input", 0, 1), stale)
	unknown := map[int32]*kerr.Error{0: kerr.UnknownMemberID}
	wantCodes(t, "unknown member", e.commit("zz", a.epoch, "input", 0), unknown)
	wantCodes(t, "departed member", e.commit("b", a.epoch, "input", 0), unknown)
	wantCodes(t, "admin commit to an active group", e.commit("", -1, "input", 0), unknown)
	if o, _ := e.h.g.Committed("input", 3); o.Offset != 103 {
		t.Fatalf("committed %+v", o)
	}
	id := "a"
	wantCode(t, "member fetch", e.h.fetch(FetchQuery{MemberID: &id, MemberEpoch: a.epoch}).ErrorCode, nil)
	wantCode(t, "stale fetch", e.h.fetch(FetchQuery{MemberID: &id, MemberEpoch: old}).ErrorCode, kerr.StaleMemberEpoch)
	wantCode(t, "admin fetch", e.h.fetch(FetchQuery{MemberEpoch: -1}).ErrorCode, nil)
	wantCode(t, "offset delete of a source topic", e.h.deleteOffsets("input").Topics[0].Partitions[0].ErrorCode, kerr.GroupSubscribedToTopic)
	wantCode(t, "offset delete of a repartition topic", e.h.deleteOffsets(stRepartition).Topics[0].Partitions[0].ErrorCode, kerr.GroupSubscribedToTopic)
	wantCode(t, "delete the active group", e.h.deleteGroup(), kerr.NonEmptyGroup)
	stOK(t, "a leaves", a.leave())
	wantCodes(t, "admin commit to the empty group", e.commit("", -1, "input", 0), map[int32]*kerr.Error{0: nil})
}

// 10. One member asks the application to shut down: every member is told.
func TestStreamsGroupShutdownApplication(t *testing.T) {
	e := newSTEnv(t, testConfig())
	e.ready(2)
	a, b := e.member("a", "p1"), e.member("b", "p2")
	e.settle(a, b)
	if slices.Contains(a.status, streamsStatusShutdownApplication) {
		t.Fatal("shutdown before anyone asked")
	}
	a.shutdown = true
	stOK(t, "a asks", a.beat())
	a.shutdown = false
	for i := 0; i < 2; i++ {
		for _, c := range []*stClient{a, b} {
			stOK(t, c.id, c.beat())
			if !slices.Equal(c.status, []int8{streamsStatusShutdownApplication}) {
				t.Fatalf("%s status %v", c.id, c.status)
			}
		}
	}
	// It survives a restore.
	e.h.g = e.restored()
	stOK(t, "b after restore", b.beat())
	if !slices.Contains(b.status, streamsStatusShutdownApplication) {
		t.Fatalf("after restore: status %v", b.status)
	}
	// A new member joining meanwhile is told too.
	c := e.member("c", "p3")
	stOK(t, "c", c.beat())
	if !slices.Contains(c.status, streamsStatusShutdownApplication) {
		t.Fatalf("c status %v", c.status)
	}
	// Everyone leaves, the requester last; a restarted application
	// runs.
	for _, x := range []*stClient{b, c, a} {
		stOK(t, x.id+" leaves", x.leave())
	}
	d := e.member("d", "p1")
	stOK(t, "d", d.beat())
	if slices.Contains(d.status, streamsStatusShutdownApplication) {
		t.Fatalf("a fresh application told to shut down: %v", d.status)
	}
}

// 10b. The member that asked for the shutdown leaves first (it hit the
// fatal error), then the others: the empty group forgets the request.
func TestStreamsGroupShutdownForgottenWhenEmpty(t *testing.T) {
	e := newSTEnv(t, testConfig())
	e.ready(2)
	a, b := e.member("a", "p1"), e.member("b", "p2")
	e.settle(a, b)
	a.shutdown = true
	stOK(t, "a asks", a.beat())
	stOK(t, "b", b.beat())
	if !slices.Contains(b.status, streamsStatusShutdownApplication) {
		t.Fatalf("b status %v", b.status)
	}
	stOK(t, "a leaves", a.leave())
	stOK(t, "b leaves", b.leave())
	if e.h.g.st.state() != Empty {
		t.Fatalf("state %v", e.h.g.st.state())
	}
	a.shutdown = false
	stOK(t, "restarted a", a.beat())
	if slices.Contains(a.status, streamsStatusShutdownApplication) {
		t.Fatalf("a restarted application told to shut down: %v", a.status)
	}
}

// 11. StreamsGroupDescribe and Summary.
func TestStreamsGroupDescribe(t *testing.T) {
	cfg := testConfig()
	cfg.StreamsStandbyReplicas = 1
	e := newSTEnv(t, cfg)
	if d := e.describe(); d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("describe of a missing group: %+v", d)
	}
	e.ready(2)
	a, b := e.member("a", "p1"), e.member("b", "p2")
	e.settle(a, b)
	d := e.describe()
	s := e.h.g.st
	if d.ErrorCode != 0 || d.Group != "g" || d.State != "Stable" || d.Epoch != s.epoch || d.AssignmentEpoch != s.assignmentEpoch ||
		d.AssignorName == nil || *d.AssignorName != "sticky" {
		t.Fatalf("describe %+v", d)
	}
	if d.Topology == nil || d.Topology.Epoch != 0 || len(d.Topology.Subtopologies) != 2 {
		t.Fatalf("topology %+v", d.Topology)
	}
	s0, s1 := d.Topology.Subtopologies[0], d.Topology.Subtopologies[1]
	if s0.SubtopologyID != "0" || !slices.Equal(s0.SourceTopics, []string{"input"}) || !slices.Equal(s0.RepartitionSinkTopics, []string{stRepartition}) ||
		len(s0.StateChangelogTopics) != 0 {
		t.Fatalf("subtopology 0 %+v", s0)
	}
	if s1.SubtopologyID != "1" || len(s1.SourceTopics) != 0 || len(s1.RepartitionSourceTopics) != 1 || s1.RepartitionSourceTopics[0].Topic != stRepartition ||
		len(s1.StateChangelogTopics) != 1 || s1.StateChangelogTopics[0].Topic != stChangelog ||
		len(s1.StateChangelogTopics[0].Configs) != 1 || s1.StateChangelogTopics[0].Configs[0].Value != "compact" {
		t.Fatalf("subtopology 1 %+v", s1)
	}
	if len(d.Members) != 2 {
		t.Fatalf("members %+v", d.Members)
	}
	for i, c := range []*stClient{a, b} {
		m := d.Members[i]
		if m.MemberID != c.id || m.MemberEpoch != c.epoch || m.ProcessID != c.process || m.ClientID != "cl-"+c.id || m.ClientHost != "/h-"+c.process ||
			m.TopologyEpoch != 0 || m.InstanceID != nil {
			t.Fatalf("member %d %+v", i, m)
		}
		if !streamsTasksFrom(m.Assignment.ActiveTasks).equal(c.active) || !streamsTasksFrom(m.Assignment.StandbyTasks).equal(c.standby) ||
			!streamsTasksFrom(m.TargetAssignment.ActiveTasks).equal(c.active) || !streamsTasksFrom(m.TargetAssignment.StandbyTasks).equal(c.standby) {
			t.Fatalf("member %s: assignment %+v target %+v, client %v/%v", c.id, m.Assignment, m.TargetAssignment, c.active, c.standby)
		}
	}
	if sum, ok := e.h.g.Summary(); !ok || sum.Type != "streams" || sum.ProtocolType != "streams" || sum.State != "Stable" {
		t.Fatalf("summary %+v", sum)
	}
	// Mid-handover: the newcomer's target differs from what it has.
	c := e.member("c", "p3")
	stOK(t, "c", c.beat())
	d = e.describe()
	if d.State != "Reconciling" || len(d.Members) != 3 || d.Members[2].MemberID != "c" {
		t.Fatalf("describe %+v", d)
	}
	if len(d.Members[2].Assignment.ActiveTasks) != 0 || len(d.Members[2].TargetAssignment.ActiveTasks) == 0 {
		t.Fatalf("c: assignment %+v target %+v", d.Members[2].Assignment, d.Members[2].TargetAssignment)
	}
}

// 12. Streams groups and the other protocols do not mix.
func TestStreamsGroupOtherProtocols(t *testing.T) {
	e := newSTEnv(t, testConfig())
	e.ready(2)
	a := e.member("a", "p1")
	stOK(t, "a", a.beat())
	wantCodes(t, "commit", e.commit("a", a.epoch, "input", 0), map[int32]*kerr.Error{0: nil})
	wantCode(t, "classic join to a streams group", e.h.joinResp(e.h.join("")).ErrorCode, kerr.InconsistentGroupProtocol)
	wantCode(t, "classic heartbeat", e.h.heartbeat("a", a.epoch), kerr.UnknownMemberID)
	wantCode(t, "consumer heartbeat to a streams group", e.h.cgMember(e.topics, "x", "input").beat().ErrorCode, kerr.GroupIDNotFound)
	if len(e.h.g.st.members) != 1 || e.h.g.cg != nil {
		t.Fatal("other protocols changed the streams group")
	}
	// Empty, it becomes a classic group; its offsets stay.
	stOK(t, "a leaves", a.leave())
	ref := e.h.join("")
	e.h.advance(5 * time.Second)
	if r := e.h.joinResp(ref); r.ErrorCode != 0 {
		t.Fatalf("classic join to the empty streams group: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if e.h.g.st != nil {
		t.Fatal("streams state kept")
	}
	if o, ok := e.h.g.Committed("input", 0); !ok || o.Offset != 100 {
		t.Fatal("offsets lost in the conversion")
	}
	if g := e.restored(); g.st != nil || g.cg != nil {
		t.Fatal("restored a converted group as a streams group")
	}
	stWant(t, "streams join to a classic group with members", a.rejoin(), kerr.GroupIDNotFound)

	// A consumer group with members.
	e2 := newSTEnv(t, testConfig())
	e2.ready(2)
	mustOK(t, "consumer member", e2.h.cgMember(e2.topics, "x", "input").beat())
	stWant(t, "streams join to a consumer group", e2.member("a", "p1").beat(), kerr.GroupIDNotFound)

	// A simple group (offsets only) becomes a streams group.
	e3 := newSTEnv(t, testConfig())
	e3.ready(2)
	wantCodes(t, "admin commit", e3.commit("", -1, "input", 1), map[int32]*kerr.Error{1: nil})
	s := e3.member("s", "p1")
	stOK(t, "streams join to a simple group", s.beat())
	if e3.h.g.st == nil || !s.active.equal(stAll(2)) {
		t.Fatal("not a streams group")
	}
	if o, ok := e3.h.g.Committed("input", 1); !ok || o.Offset != 101 {
		t.Fatal("offsets lost")
	}
	wantCode(t, "consumer heartbeat", e3.h.cgMember(e3.topics, "x", "input").beat().ErrorCode, kerr.GroupIDNotFound)
}

// TestStreamsGroupRandomized drives random joins (threads of up to three
// processes), leaves, silences, clock moves, coordinator failovers
// (restores from the records) and the late creation of the internal
// topics, checking every invariant after every step; at the end
// the live members must converge to every task active exactly once and
// every stateful task with its standbys. STREAMS_SEED reproduces a run.
func TestStreamsGroupRandomized(t *testing.T) {
	seed := time.Now().UnixNano()
	if s := os.Getenv("STREAMS_SEED"); s != "" {
		seed, _ = strconv.ParseInt(s, 10, 64)
	}
	t.Logf("seed %d (STREAMS_SEED=%d reproduces)", seed, seed)
	rnd := rand.New(rand.NewSource(seed))
	for run := 0; run < 30; run++ {
		cfg := testConfig()
		replicas := rnd.Intn(3)
		cfg.StreamsStandbyReplicas = replicas
		e := newSTEnv(t, cfg)
		n := int32(1 + rnd.Intn(6))
		e.topics.add("input", n)
		internal := false
		if rnd.Intn(2) == 0 {
			e.ready(n)
			internal = true
		}
		var live []*stClient
		beat := func(c *stClient) {
			t.Helper()
			r := c.beat()
			if r.ErrorCode == 0 {
				return
			}
			// Fenced by a timeout while it was not looking: rejoin.
			stWant(t, fmt.Sprintf("run %d: %s", run, c.id), r, kerr.UnknownMemberID)
			stOK(t, "rejoin", c.rejoin())
		}
		for step := 0; step < 250; step++ {
			switch r := rnd.Intn(24); {
			case r == 0 || len(live) == 0:
				c := e.member(fmt.Sprintf("m%d", step), fmt.Sprintf("p%d", rnd.Intn(3)))
				live = append(live, c)
				stOK(t, "join", c.beat())
			case r == 1:
				i := rnd.Intn(len(live))
				if resp := live[i].leave(); resp.ErrorCode != 0 {
					stWant(t, "leave", resp, kerr.UnknownMemberID)
				}
				live = slices.Delete(live, i, i+1)
			case r == 2:
				// Goes silent for good (a crashed instance).
				i := rnd.Intn(len(live))
				live = slices.Delete(live, i, i+1)
			case r == 3:
				e.h.advance(time.Duration(1+rnd.Intn(8)) * time.Second)
			case r == 4 && !internal:
				e.ready(n)
				internal = true
			case r == 5 && e.h.g.st != nil:
				// The coordinator moves: the group is rebuilt from
				// its records.
				e.h.g = e.restored()
			default:
				beat(live[rnd.Intn(len(live))])
			}
		}
		if !internal {
			e.ready(n)
		}
		for round := 0; round < 12; round++ {
			e.h.advance(5 * time.Second)
			for _, c := range live {
				beat(c)
			}
		}
		s := e.h.g.st
		if len(live) == 0 {
			if s != nil && len(s.members) != 0 {
				t.Fatalf("run %d: %d members without live clients", run, len(s.members))
			}
			continue
		}
		if len(s.members) != len(live) {
			t.Fatalf("run %d: %d members, %d live clients", run, len(s.members), len(live))
		}
		if st := s.state(); st != Stable {
			t.Fatalf("run %d: group %v after converging rounds", run, st)
		}
		var all streamsTasks
		procs := map[string]bool{}
		standbys := map[stTask]int{}
		for _, c := range live {
			if all.overlaps(c.active) {
				t.Fatalf("run %d: task active twice", run)
			}
			all = all.union(c.active)
			procs[c.process] = true
			for sub, ps := range c.standby {
				for _, p := range ps {
					standbys[stTask{sub, p}]++
				}
			}
		}
		if !all.equal(stAll(n)) {
			t.Fatalf("run %d: active %v, want all of %d partitions", run, all, n)
		}
		want := min(replicas, len(procs)-1)
		for p := int32(0); p < n; p++ {
			if got := standbys[stTask{"1", p}]; got != want {
				t.Fatalf("run %d: task 1_%d has %d standbys, want %d (%d processes, %d replicas)", run, p, got, want, len(procs), replicas)
			}
			if standbys[stTask{"0", p}] != 0 {
				t.Fatalf("run %d: standby of stateless task 0_%d", run, p)
			}
		}
	}
}

// TestStreamsGroupWritesWhatChanged: the topology is written once, a
// steady heartbeat writes nothing, a member's change writes that member
// (not the group's other members), and a leave writes its tombstone.
func TestStreamsGroupWritesWhatChanged(t *testing.T) {
	e := newSTEnv(t, testConfig())
	e.ready(4)
	var cs []*stClient
	for i := range 6 {
		cs = append(cs, e.member(fmt.Sprintf("m%d", i), fmt.Sprintf("p%d", i)))
	}
	e.settle(cs...)
	kinds := func(from int) map[RecordKind]int {
		n := map[RecordKind]int{}
		for _, r := range e.h.records[from:] {
			n[r.Kind]++
		}
		return n
	}
	if n := kinds(0)[RecStreamsTopology]; n != 1 {
		t.Fatalf("topology written %d times, want once", n)
	}
	from := len(e.h.records)
	stOK(t, "steady heartbeat", cs[2].beat())
	if len(e.h.records) != from {
		t.Fatalf("a steady heartbeat wrote %v", kinds(from))
	}
	from = len(e.h.records)
	stOK(t, "m5 leaves", cs[5].leave())
	n := kinds(from)
	if n[RecStreamsTopology] != 0 || n[RecStreamsMember] == 0 || n[RecStreamsMember] > 6 {
		t.Fatalf("a leave wrote %v", n)
	}
	tomb := false
	for _, r := range e.h.records[from:] {
		tomb = tomb || (r.Kind == RecStreamsMember && r.Member == "m5" && r.ST == nil)
	}
	if !tomb {
		t.Fatal("no tombstone for the member that left")
	}
	g := e.restored()
	if g.st == nil || len(g.st.members) != 5 || g.st.topology == nil || g.st.epoch != e.h.g.st.epoch {
		t.Fatalf("restored %+v", g.st)
	}
}

// TestStreamsGroupInvalidTopology: a topology no topics can make ready is
// refused with STREAMS_INVALID_TOPOLOGY (130) and leaves no trace: a
// changelog with a fixed partition count, and a repartition topic nothing
// writes.
func TestStreamsGroupInvalidTopology(t *testing.T) {
	e := newSTEnv(t, testConfig())
	e.ready(3)
	fixed := e.member("a", "p1")
	fixed.topology = stWordCount()
	fixed.topology.Subtopologies[1].StateChangelogTopics[0].NumPartitions = 3
	orphan := e.member("b", "p2")
	orphan.topology = stWordCount()
	orphan.topology.Subtopologies[0].RepartitionSinkTopics = nil
	for _, c := range []*stClient{fixed, orphan} {
		r, _ := c.send(c.request())
		if r.ErrorCode != 130 || r.ErrorMessage == nil {
			t.Fatalf("%s: error %d %v, want STREAMS_INVALID_TOPOLOGY", c.id, r.ErrorCode, r.ErrorMessage)
		}
		t.Logf("%s: %s", c.id, *r.ErrorMessage)
	}
	if e.h.g.st != nil || e.h.g.Live() || len(e.h.records) != 0 {
		t.Fatalf("refused joiners left a group (%v) or records (%d)", e.h.g.st, len(e.h.records))
	}
	// A valid topology still initializes the group.
	ok := e.member("c", "p3")
	stOK(t, "valid join", ok.beat())
}
