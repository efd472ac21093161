package interop_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
)

const streamsGroupCommand = "org.apache.kafka.tools.streams.StreamsGroupCommand"

// rawStreamsMember drives StreamsGroupHeartbeat by hand, sent to the
// group's coordinator (kgo does not route this key itself), reporting
// back exactly the tasks it was given, as a Streams client that revokes
// at once would.
type rawStreamsMember struct {
	t              *testing.T
	cl             *kgo.Broker
	group, id, pid string
	epoch          int32
	active         []kmsg.TaskIDs
	standby        []kmsg.TaskIDs
	status         []kmsg.StreamsGroupHeartbeatResponseStatus
}

func streamsTopology(source, changelog string) *kmsg.StreamsGroupHeartbeatRequestTopology {
	t := kmsg.NewStreamsGroupHeartbeatRequestTopology()
	st := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
	st.SubtopologyID = "0"
	st.SourceTopics = []string{source}
	cl := kmsg.NewTopicInfo()
	cl.Topic = changelog
	cl.Configs = []kmsg.TopicInfoConfig{{Key: "cleanup.policy", Value: "compact"}}
	st.StateChangelogTopics = []kmsg.TopicInfo{cl}
	t.Subtopologies = []kmsg.StreamsGroupHeartbeatRequestTopologySubtopology{st}
	return &t
}

func (m *rawStreamsMember) beat(ctx context.Context, topology *kmsg.StreamsGroupHeartbeatRequestTopology, epoch int32) *kmsg.StreamsGroupHeartbeatResponse {
	m.t.Helper()
	req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch = m.group, m.id, epoch
	req.ProcessID = kmsg.StringPtr(m.pid)
	req.Topology = topology
	if epoch == 0 {
		req.RebalanceTimeoutMillis = 30000
	} else {
		req.ActiveTasks, req.StandbyTasks, req.WarmupTasks = m.active, m.standby, []kmsg.TaskIDs{}
		if req.ActiveTasks == nil {
			req.ActiveTasks = []kmsg.TaskIDs{}
		}
		if req.StandbyTasks == nil {
			req.StandbyTasks = []kmsg.TaskIDs{}
		}
	}
	resp, err := req.RequestWith(ctx, m.cl)
	if err != nil {
		m.t.Fatalf("member %s heartbeat: %v", m.id, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		m.t.Fatalf("member %s heartbeat: %v (%v)", m.id, err, resp.ErrorMessage)
	}
	m.epoch = resp.MemberEpoch
	if resp.ActiveTasks != nil {
		m.active, m.standby = resp.ActiveTasks, resp.StandbyTasks
	}
	m.status = resp.Status
	return resp
}

func taskCount(ts []kmsg.TaskIDs) int {
	n := 0
	for _, t := range ts {
		n += len(t.Partitions)
	}
	return n
}

// TestStreamsGroupsTool: two hand-driven KIP-1071 members of one streams
// group; the broker creates the changelog topic the topology asks for,
// splits the three tasks between the two processes, and Kafka's
// kafka-streams-groups.sh lists the group, describes its state, members
// and assignments, and deletes it once the members have left.
func TestStreamsGroupsTool(t *testing.T) {
	lib := kafkaLib(t)
	b := brokertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const source, group = "st-tool-in", "st-tool-app"
	changelog := group + "-store-changelog"
	adm := newAdmin(t, b.Addr)
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, source); err != nil {
		t.Fatal(err)
	}
	client, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKeys = []string{group}
	fr, err := fc.RequestWith(ctx, client)
	if err != nil || len(fr.Coordinators) != 1 || fr.Coordinators[0].ErrorCode != 0 {
		t.Fatalf("FindCoordinator: %v %+v", err, fr)
	}
	cl := client.Broker(int(fr.Coordinators[0].NodeID))
	a := &rawStreamsMember{t: t, cl: cl, group: group, id: "member-a", pid: "process-a"}
	bm := &rawStreamsMember{t: t, cl: cl, group: group, id: "member-b", pid: "process-b"}

	// The first join: the changelog topic is missing and the broker
	// creates it, with the topology's config.
	resp := a.beat(ctx, streamsTopology(source, changelog), 0)
	if len(resp.Status) == 0 || resp.Status[0].StatusCode != 3 {
		t.Fatalf("first join: status %+v, want MISSING_INTERNAL_TOPICS", resp.Status)
	}
	testwait.For(t, "the changelog topic created by the broker", time.Minute, func() bool {
		d, err := adm.ListTopics(ctx, changelog)
		return err == nil && d[changelog].Err == nil && len(d[changelog].Partitions) == 3
	})
	rc, err := adm.DescribeTopicConfigs(ctx, changelog)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := rc.On(changelog, nil); err != nil || !slices.ContainsFunc(v.Configs, func(c kadm.Config) bool { return c.Key == "cleanup.policy" && c.MaybeValue() == "compact" }) {
		t.Fatalf("changelog configs: %+v, %v", v, err)
	}
	testwait.For(t, "member a assigned all three tasks", time.Minute, func() bool {
		a.beat(ctx, nil, a.epoch)
		return taskCount(a.active) == 3 && len(a.status) == 0
	})

	// The second process joins: a revokes, then b gains.
	bm.beat(ctx, streamsTopology(source, changelog), 0)
	testwait.For(t, "the tasks split between the two processes", time.Minute, func() bool {
		a.beat(ctx, nil, a.epoch)
		bm.beat(ctx, nil, bm.epoch)
		return taskCount(a.active)+taskCount(bm.active) == 3 && taskCount(a.active) >= 1 && taskCount(bm.active) >= 1 && a.epoch == bm.epoch
	})

	tool := func(args ...string) string {
		return kafkaTool(t, ctx, lib, streamsGroupCommand, append([]string{"--bootstrap-server", b.Addr}, args...)...)
	}
	if out := tool("--list"); !strings.Contains(out, group) {
		t.Fatalf("--list does not list %s:\n%s", group, out)
	}
	out := tool("--describe", "--group", group, "--state")
	if !strings.Contains(out, "Stable") {
		t.Fatalf("--describe --state: want Stable:\n%s", out)
	}
	out = tool("--describe", "--group", group, "--members", "--verbose")
	for _, want := range []string{"member-a", "member-b", "process-a", "process-b"} {
		if !strings.Contains(out, want) {
			t.Fatalf("--describe --members lacks %s:\n%s", want, out)
		}
	}
	t.Logf("kafka-streams-groups --describe --members --verbose:\n%s", out)

	// A group with members cannot be deleted; once both leave it can.
	if out := tool("--delete", "--group", group); !strings.Contains(out, "GroupNotEmptyException") {
		t.Fatalf("--delete of a group with members:\n%s", out)
	}
	for _, m := range []*rawStreamsMember{a, bm} {
		req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
		req.Group, req.MemberID, req.MemberEpoch = group, m.id, -1
		if r, err := req.RequestWith(ctx, cl); err != nil || r.ErrorCode != 0 {
			t.Fatalf("leave %s: %v %+v", m.id, err, r)
		}
	}
	if out := tool("--describe", "--group", group, "--state"); !strings.Contains(out, "Empty") {
		t.Fatalf("--describe --state after both left: want Empty:\n%s", out)
	}
	out = tool("--delete", "--group", group)
	if !strings.Contains(out, "Deletion of requested streams groups ('"+group+"') was successful") {
		t.Fatalf("--delete:\n%s", out)
	}
	if out := tool("--list"); strings.Contains(out, group) {
		t.Fatalf("--list still lists %s after --delete:\n%s", group, out)
	}
}
