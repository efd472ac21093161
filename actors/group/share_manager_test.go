package group

import (
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/interop/testwait"
)

func shareBeat(t *testing.T, m *Manager, topics TopicSource, group, member string, epoch int32, subs ...string) *kmsg.ShareGroupHeartbeatResponse {
	t.Helper()
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.Version = 1
	req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = group, member, epoch, subs
	return await(t, func(r func(*kmsg.ShareGroupHeartbeatResponse)) {
		m.ShareGroupHeartbeat(req, Client{ID: "cl", Host: "/127.0.0.1"}, topics, r)
	})
}

// shareEvents records what the Manager's share listeners are told.
type shareEvents struct {
	mu      sync.Mutex
	gone    []string // group/member
	deleted []string
}

func (e *shareEvents) listen(m *Manager) {
	m.SetShareMemberListener(func(group, member string) {
		e.mu.Lock()
		e.gone = append(e.gone, group+"/"+member)
		e.mu.Unlock()
	})
	m.SetShareGroupDeletedListener(func(group string) {
		e.mu.Lock()
		e.deleted = append(e.deleted, group)
		e.mu.Unlock()
	})
}

func (e *shareEvents) has(gone, deleted string) func() bool {
	return func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return (gone == "" || slices.Contains(e.gone, gone)) && (deleted == "" || slices.Contains(e.deleted, deleted))
	}
}

// TestManagerShareGroupLifecycle: a share group through the actors: the
// membership query, the listeners on leave, expiry and deletion, and the
// group surviving a restart of the coordinator.
func TestManagerShareGroupLifecycle(t *testing.T) {
	sys := quietSystem(t)
	dir := t.TempDir()
	open := func() *Manager {
		cfg := DefaultConfig()
		cfg.ShareSessionTimeout, cfg.ShareHeartbeatInterval = 300*time.Millisecond, 100*time.Millisecond
		m, err := NewManager(Options{DataDir: dir, Root: sys.Root, Config: &cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := open()
	ev := &shareEvents{}
	ev.listen(m)
	topics := fakeTopics{}
	topics.add("t", 2)

	code := func(group, member string) int16 {
		return await(t, func(r func(int16)) { m.ShareMember(group, member, r) })
	}
	if c := code("sg", "a"); c != kerr.GroupIDNotFound.Code {
		t.Fatalf("member of a missing group: %v", kerr.ErrorForCode(c))
	}
	if r := shareBeat(t, m, topics, "sg", "a", 0, "t"); r.ErrorCode != 0 || r.MemberEpoch != 1 || r.HeartbeatIntervalMillis != 100 {
		t.Fatalf("join %+v", r)
	}
	if r := shareBeat(t, m, topics, "sg", "b", 0, "t"); r.ErrorCode != 0 || r.MemberEpoch != 2 {
		t.Fatalf("join %+v", r)
	}
	if c := code("sg", "a"); c != 0 {
		t.Fatalf("a is not a member: %v", kerr.ErrorForCode(c))
	}
	if c := code("sg", "z"); c != kerr.UnknownMemberID.Code {
		t.Fatalf("z: %v", kerr.ErrorForCode(c))
	}
	if c := await(t, func(r func(int16)) { m.ShareGroupEmpty("sg", r) }); c != kerr.NonEmptyGroup.Code {
		t.Fatalf("empty? %v", kerr.ErrorForCode(c))
	}
	if l := m.ListGroups(); len(l) != 1 || l[0].Type != "share" || l[0].State != "Stable" {
		t.Fatalf("list %+v", l)
	}

	// b leaves: the listener hears of it.
	if r := shareBeat(t, m, topics, "sg", "b", -1); r.ErrorCode != 0 {
		t.Fatalf("leave %+v", r)
	}
	testwait.For(t, "the member listener told of b", 5*time.Second, ev.has("sg/b", ""))

	// Restart: the group, its epoch and a come back.
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m = open()
	defer m.Close()
	ev.listen(m)
	d := await(t, func(r func(kmsg.ShareGroupDescribeResponseGroup)) { m.ShareGroupDescribe("sg", r) })
	if d.ErrorCode != 0 || d.GroupEpoch != 3 || len(d.Members) != 1 || d.Members[0].MemberID != "a" || d.GroupState != "Stable" {
		t.Fatalf("after restart %+v", d)
	}
	// a goes silent: its session ends and the listener hears of it.
	testwait.For(t, "the member listener told of a's expiry", 10*time.Second, ev.has("sg/a", ""))
	d = await(t, func(r func(kmsg.ShareGroupDescribeResponseGroup)) { m.ShareGroupDescribe("sg", r) })
	if d.GroupState != "Empty" || d.GroupEpoch != 4 {
		t.Fatalf("after expiry %+v", d)
	}
	if c := await(t, func(r func(int16)) { m.ShareGroupEmpty("sg", r) }); c != 0 {
		t.Fatalf("empty? %v", kerr.ErrorForCode(c))
	}
	del := await(t, func(r func(kmsg.DeleteGroupsResponseGroup)) { m.DeleteGroup("sg", r) })
	if del.ErrorCode != 0 {
		t.Fatalf("delete %v", kerr.ErrorForCode(del.ErrorCode))
	}
	testwait.For(t, "the deleted listener told of sg", 5*time.Second, ev.has("", "sg"))
	if l := m.ListGroups(); len(l) != 0 {
		t.Fatalf("list after delete %+v", l)
	}

	// An empty share group made for the admin APIs is durable.
	if c := await(t, func(r func(int16)) { m.EnsureShareGroup("made", r) }); c != 0 {
		t.Fatalf("ensure: %v", kerr.ErrorForCode(c))
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m = open()
	defer m.Close()
	if c := await(t, func(r func(int16)) { m.ShareGroupEmpty("made", r) }); c != 0 {
		t.Fatalf("the made share group after a restart: %v", kerr.ErrorForCode(c))
	}
}

// On standby (a raft follower) the share methods answer NOT_COORDINATOR.
func TestManagerShareStandby(t *testing.T) {
	sys := actor.NewActorSystem()
	cfg := DefaultConfig()
	m, err := NewManager(Options{DataDir: t.TempDir(), Root: sys.Root, Config: &cfg, Standby: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if c := await(t, func(r func(int16)) { m.ShareMember("sg", "a", r) }); c != kerr.NotCoordinator.Code {
		t.Fatalf("standby member query: %v", kerr.ErrorForCode(c))
	}
	if r := shareBeat(t, m, fakeTopics{}, "sg", "a", 0, "t"); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("standby heartbeat: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}
