package protocol

import (
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/group"
	"github.com/regent-broker/regent/actors/txn"
)

// fakeCoords places keys on shards from a table; unknown keys are on the
// metadata group. Shard 2 shares shard 1's coordinator, so only 0 and 1
// are listed.
type fakeCoords struct {
	shard  map[string]uint8
	groups map[uint8]*group.Manager
}

func (f fakeCoords) Shard(key string) uint8        { return f.shard[key] }
func (f fakeCoords) Groups(g uint8) *group.Manager { return f.groups[g] }
func (f fakeCoords) Txns(uint8) *txn.Coordinator   { return nil }
func (f fakeCoords) Shards() []uint8               { return []uint8{0, 1} }

// TestCoordinatorsSharded: FindCoordinator names the leader of the raft
// group a key is placed on (COORDINATOR_NOT_AVAILABLE while it has none),
// group requests reach the key's shard's coordinator, and ListGroups
// lists the groups of every shard this node coordinates.
func TestCoordinatorsSharded(t *testing.T) {
	s := groupServer(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := group.DefaultConfig()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	other, err := group.NewManager(group.Options{DataDir: t.TempDir(), Root: sys.Root, Config: &cfg, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		other.Close()
		sys.Shutdown()
	})
	s.SetCoordinators(fakeCoords{
		shard:  map[string]uint8{"on-meta": 0, "on-one": 1, "on-two": 2},
		groups: map[uint8]*group.Manager{0: s.groups, 1: other, 2: other},
	})
	s.cluster = groupsView{staticGroup: staticGroup{leader: 1, epoch: 3, serving: true}, groups: map[uint8]staticGroup{
		1: {leader: 2, epoch: 5},
		2: {leader: -1},
	}}

	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version = 4
	fc.CoordinatorKeys = []string{"on-meta", "on-one", "on-two"}
	resp := call[*kmsg.FindCoordinatorResponse](t, s, fc)
	want := map[string]struct {
		node int32
		code int16
	}{"on-meta": {1, 0}, "on-one": {2, 0}, "on-two": {-1, kerr.CoordinatorNotAvailable.Code}}
	for _, c := range resp.Coordinators {
		if w := want[c.Key]; c.NodeID != w.node || c.ErrorCode != w.code {
			t.Errorf("FindCoordinator %s: node %d code %d, want node %d code %d", c.Key, c.NodeID, c.ErrorCode, w.node, w.code)
		}
	}
	fc = kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorKey = 3, "on-one"
	if r := call[*kmsg.FindCoordinatorResponse](t, s, fc); r.NodeID != 2 || r.Port != 9093 || r.ErrorCode != 0 {
		t.Errorf("FindCoordinator v3 on-one: %+v", r)
	}

	// Offsets committed for groups on two shards land in their shard's
	// coordinator; ListGroups lists both.
	for _, g := range []string{"on-meta", "on-one"} {
		oc := kmsg.NewPtrOffsetCommitRequest()
		oc.Version, oc.Group, oc.Generation = 8, g, -1
		oc.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 5, LeaderEpoch: -1}}}}
		if r := call[*kmsg.OffsetCommitResponse](t, s, oc); r.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("commit for %s: %v", g, kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
		}
	}
	names := func(sums []group.Summary) []string {
		var out []string
		for _, g := range sums {
			out = append(out, g.Group)
		}
		return out
	}
	if got := names(other.ListGroups()); !slices.Equal(got, []string{"on-one"}) {
		t.Errorf("shard 1's coordinator holds %v, want [on-one]", got)
	}
	if got := names(s.groups.ListGroups()); !slices.Equal(got, []string{"on-meta"}) {
		t.Errorf("the metadata group's coordinator holds %v, want [on-meta]", got)
	}
	lg := kmsg.NewPtrListGroupsRequest()
	lg.Version = 4
	var listed []string
	for _, g := range call[*kmsg.ListGroupsResponse](t, s, lg).Groups {
		listed = append(listed, g.Group)
	}
	if !slices.Equal(listed, []string{"on-meta", "on-one"}) {
		t.Errorf("ListGroups: %v, want [on-meta on-one]", listed)
	}
}
