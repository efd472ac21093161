package interop_test

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
)

// metadataQuorumCommand is kafka-metadata-quorum's class.
const metadataQuorumCommand = "org.apache.kafka.tools.MetadataQuorumCommand"

// quorumStatus is what kafka-metadata-quorum describe --status prints.
type quorumStatus struct {
	LeaderID, LeaderEpoch, HighWatermark, MaxFollowerLag int64
	// Voters maps each voter's id to its endpoints.
	Voters map[int32][]string
	raw    string
}

var (
	statusLine = regexp.MustCompile(`(?m)^(LeaderId|LeaderEpoch|HighWatermark|MaxFollowerLag|MaxFollowerLagTimeMs|CurrentVoters|CurrentObservers):\s+(.*)$`)
	voterEntry = regexp.MustCompile(`\{"id": (\d+)(?:, "directoryId": (?:null|"[^"]*"))?(?:, "endpoints": \[([^\]]*)\])?\}`)
)

func parseQuorumStatus(t *testing.T, out string) quorumStatus {
	t.Helper()
	st := quorumStatus{Voters: map[int32][]string{}, raw: out}
	seen := map[string]bool{}
	for _, m := range statusLine.FindAllStringSubmatch(out, -1) {
		seen[m[1]] = true
		n, _ := strconv.ParseInt(strings.TrimSpace(m[2]), 10, 64)
		switch m[1] {
		case "LeaderId":
			st.LeaderID = n
		case "LeaderEpoch":
			st.LeaderEpoch = n
		case "HighWatermark":
			st.HighWatermark = n
		case "MaxFollowerLag":
			st.MaxFollowerLag = n
		case "CurrentVoters":
			for _, v := range voterEntry.FindAllStringSubmatch(m[2], -1) {
				id, _ := strconv.Atoi(v[1])
				var eps []string
				for _, e := range strings.Split(v[2], ",") {
					if e = strings.Trim(strings.TrimSpace(e), `"`); e != "" {
						eps = append(eps, e)
					}
				}
				st.Voters[int32(id)] = eps
			}
		case "CurrentObservers":
			if strings.TrimSpace(m[2]) != "[]" {
				t.Fatalf("observers listed:\n%s", out)
			}
		}
	}
	if len(seen) != 7 {
		t.Fatalf("describe --status printed %d of its 7 lines:\n%s", len(seen), out)
	}
	return st
}

// replicaRow is one row of kafka-metadata-quorum describe --replication.
type replicaRow struct {
	ID                      int32
	LogEndOffset, Lag       int64
	LastFetch, LastCaughtUp int64
	Status                  string
}

func parseReplication(t *testing.T, out string) map[int32]replicaRow {
	t.Helper()
	rows := map[int32]replicaRow{}
	header := false
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 7 && f[0] == "NodeId" {
			header = true
			continue
		}
		if !header || len(f) != 7 {
			continue
		}
		var r replicaRow
		id, err := strconv.Atoi(f[0])
		if err != nil {
			t.Fatalf("row %q:\n%s", line, out)
		}
		r.ID, r.Status = int32(id), f[6]
		for i, p := range []*int64{&r.LogEndOffset, &r.Lag, &r.LastFetch, &r.LastCaughtUp} {
			if *p, err = strconv.ParseInt(f[2+i], 10, 64); err != nil {
				t.Fatalf("row %q:\n%s", line, out)
			}
		}
		rows[r.ID] = r
	}
	if !header {
		t.Fatalf("describe --replication printed no table:\n%s", out)
	}
	return rows
}

// TestKafkaMetadataQuorumSingleNode: kafka-metadata-quorum describes a
// single node as the leader and only voter of a quorum with no log.
func TestKafkaMetadataQuorumSingleNode(t *testing.T) {
	lib := kafkaLib(t)
	b := brokertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := kafkaTool(t, ctx, lib, metadataQuorumCommand, "--bootstrap-server", b.Addr, "describe", "--status")
	t.Logf("describe --status:\n%s", out)
	st := parseQuorumStatus(t, out)
	ids := slices.Collect(maps.Keys(st.Voters))
	if len(ids) != 1 || int64(ids[0]) != st.LeaderID || st.LeaderEpoch != 0 || st.HighWatermark != 0 || st.MaxFollowerLag != 0 ||
		!slices.Equal(st.Voters[ids[0]], []string{"PLAINTEXT://" + b.Addr}) {
		t.Fatalf("single node: %+v", st)
	}
	out = kafkaTool(t, ctx, lib, metadataQuorumCommand, "--bootstrap-server", b.Addr, "describe", "--replication")
	t.Logf("describe --replication:\n%s", out)
	rows := parseReplication(t, out)
	if r, ok := rows[ids[0]]; len(rows) != 1 || !ok || r.Status != "Leader" || r.Lag != 0 || r.LogEndOffset != 0 {
		t.Fatalf("single node replication: %+v", rows)
	}
}

// nodeISR asks node addr alone for topic's partition 0 and returns its
// ISR (nil when the node did not answer).
func nodeISR(ctx context.Context, addr, topic string) []int32 {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return nil
	}
	defer cl.Close()
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(rctx, cl.SeedBrokers()[0])
	if err != nil || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) == 0 {
		return nil
	}
	return resp.Topics[0].Partitions[0].ISR
}

// TestClusterMetadataQuorum runs kafka-metadata-quorum against a 3-node
// cluster through a follower (which forwards DescribeQuorum to the raft
// leader): the leader and its term as leader and epoch, the commit index
// as high watermark, every voter caught up after a produce. A follower
// paused (its heartbeats hang rather than fail, for raft's 10 s I/O
// timeout) leaves the leader's ISR after replica.lag.time.max.ms (2 s
// here), its LastCaughtUpTimestamp standing still while the other
// follower's advances; resumed, it is back in sync; killed, it leaves the
// ISR again and stays where it was.
func TestClusterMetadataQuorum(t *testing.T) {
	skipClusterInShort(t)
	lib := kafkaLib(t)
	const lagMax = 2 * time.Second
	c := brokertest.StartCluster(t, 3, "--broker-config", fmt.Sprintf("replica.lag.time.max.ms=%d", lagMax.Milliseconds()))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	leader := c.LeaderID(t)
	var ask, other int32 // the follower asked, the one paused and killed
	for _, id := range c.IDs() {
		switch {
		case id == leader:
		case ask == 0:
			ask = id
		default:
			other = id
		}
	}
	askAddr := c.Node(ask).Addr
	quorum := func(args ...string) string {
		t.Helper()
		return kafkaTool(t, ctx, lib, metadataQuorumCommand, append([]string{"--bootstrap-server", askAddr, "describe"}, args...)...)
	}
	createClusterTopic(t, ctx, c, "dq", 1, -1)
	produceSync(t, ctx, c, "dq", 1, "a", 50)

	// Settled: every voter holds the leader's log.
	var st quorumStatus
	testwait.For(t, "describe --status to show the leader, its term and no lag", time.Minute, func() bool {
		before, err := c.Status(leader)
		if err != nil {
			return false
		}
		st = parseQuorumStatus(t, quorum("--status"))
		after, err := c.Status(leader)
		if err != nil || before.Term != after.Term {
			return false // an election meanwhile: ask again
		}
		return st.LeaderID == int64(leader) && st.LeaderEpoch == int64(after.Term) && st.HighWatermark > 0 &&
			uint64(st.HighWatermark) <= after.CommitIndex && st.MaxFollowerLag == 0
	})
	t.Logf("describe --status:\n%s", st.raw)
	for _, n := range c.Nodes() {
		if eps := st.Voters[n.ID]; !slices.Equal(eps, []string{"PLAINTEXT://" + n.Addr}) {
			t.Fatalf("voter %d endpoints %v, want PLAINTEXT://%s:\n%s", n.ID, eps, n.Addr, st.raw)
		}
	}
	var rows map[int32]replicaRow
	var out string
	testwait.For(t, "describe --replication to show every voter at lag 0", time.Minute, func() bool {
		out = quorum("--replication")
		rows = parseReplication(t, out)
		for _, id := range c.IDs() {
			r, ok := rows[id]
			if !ok || r.Lag != 0 || r.LogEndOffset <= 0 || r.LastFetch <= 0 || r.LastCaughtUp <= 0 {
				return false
			}
		}
		return len(rows) == 3
	})
	t.Logf("describe --replication:\n%s", out)
	for id, r := range rows {
		if want := map[bool]string{true: "Leader", false: "Follower"}[id == leader]; r.Status != want {
			t.Fatalf("node %d listed as %s, want %s:\n%s", id, r.Status, want, out)
		}
	}

	// Paused: no answers, and no heartbeat failure yet: out of the
	// leader's ISR by lag. Asked in Go, not with the tool: its admin
	// client could pick the paused node, which accepts and never answers.
	// The ISR is the leader's, asked where it is now (see the kill below
	// for why it may move).
	leaderISR := func() []int32 { return nodeISR(ctx, c.Node(c.LeaderID(t)).Addr, "dq") }
	heartbeatFailures := func() int {
		return strings.Count(c.Node(leader).LogTail(64<<20), `failed to heartbeat to`)
	}
	failedBefore := heartbeatFailures()
	c.Pause(other)
	paused := time.Now()
	testwait.For(t, fmt.Sprintf("the leader to drop paused node %d from the ISR", other), time.Minute, func() bool {
		isr := leaderISR()
		return isr != nil && !slices.Contains(isr, other)
	})
	if took, failed := time.Since(paused), heartbeatFailures(); failed != failedBefore {
		// Possible only on a machine stalled for raft's I/O timeout.
		t.Logf("the leader's heartbeats to node %d failed before it left the ISR (%v after the pause)", other, took)
	} else {
		t.Logf("node %d left the ISR by lag %v after its pause, its heartbeats not failing", other, took)
	}
	if isr := leaderISR(); !slices.Contains(isr, ask) || !slices.Contains(isr, leader) {
		t.Fatalf("ISR %v: node %d or %d left it", isr, leader, ask)
	}
	first := quorumVoters(t, ctx, askAddr)
	var second map[int32]kmsg.DescribeQuorumResponseTopicPartitionReplicaState
	testwait.For(t, fmt.Sprintf("node %d caught up again (heartbeats of an idle log)", ask), time.Minute, func() bool {
		second = quorumVoters(t, ctx, askAddr)
		return second[ask].LastCaughtUpTimestamp > first[ask].LastCaughtUpTimestamp
	})
	if f, s := first[other], second[other]; s.LastCaughtUpTimestamp > f.LastCaughtUpTimestamp || s.LastFetchTimestamp > f.LastFetchTimestamp || s.LogEndOffset > f.LogEndOffset {
		t.Fatalf("paused node %d moved from %+v to %+v", other, f, s)
	}

	// Resumed: it catches up and is back in the ISR.
	c.Resume(other)
	testwait.For(t, fmt.Sprintf("node %d back in the leader's ISR", other), time.Minute, func() bool {
		return slices.Contains(leaderISR(), other)
	})

	// Killed: out of the ISR on the leader and on the follower asked;
	// its progress stands where it was while the others' moves on. With
	// one follower left, a leader starved of CPU for its lease (500 ms)
	// steps down and is elected again: a new leader has heard nothing of
	// the dead node, which it reports unknown (-1), standing still too.
	c.Kill(other)
	for _, addr := range []string{c.Node(leader).Addr, askAddr} {
		testwait.For(t, fmt.Sprintf("%s to drop killed node %d from the ISR", addr, other), time.Minute, func() bool {
			isr := nodeISR(ctx, addr, "dq")
			return isr != nil && !slices.Contains(isr, other)
		})
	}
	before := parseReplication(t, quorum("--replication"))
	produceSync(t, ctx, c, "dq", 1, "b", 20)
	var after map[int32]replicaRow
	testwait.For(t, fmt.Sprintf("node %d caught up past the new records", ask), time.Minute, func() bool {
		out = quorum("--replication")
		after = parseReplication(t, out)
		return after[ask].LastCaughtUp > before[ask].LastCaughtUp && after[ask].Lag == 0 && after[ask].LogEndOffset > before[ask].LogEndOffset
	})
	t.Logf("after node %d's kill, describe --replication:\n%s", other, out)
	if b, a := before[other], after[other]; a.LastCaughtUp > b.LastCaughtUp || a.LastFetch > b.LastFetch || a.LogEndOffset > b.LogEndOffset || a.Lag <= 0 {
		t.Fatalf("killed node %d moved from %+v to %+v:\n%s", other, b, a, out)
	}
	out = quorum("--status")
	t.Logf("after node %d's kill, describe --status:\n%s", other, out)
	if st = parseQuorumStatus(t, out); st.LeaderID != int64(c.LeaderID(t)) || st.MaxFollowerLag <= 0 || len(st.Voters) != 3 {
		t.Fatalf("after the kill: %+v", st)
	}
}

// quorumVoters sends DescribeQuorum to node addr alone (a follower
// forwards it to the leader) and returns the voters by id.
func quorumVoters(t *testing.T, ctx context.Context, addr string) map[int32]kmsg.DescribeQuorumResponseTopicPartitionReplicaState {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	req := kmsg.NewPtrDescribeQuorumRequest()
	req.Version = 2
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(rctx, cl.SeedBrokers()[0])
	if err != nil {
		t.Fatalf("DescribeQuorum at %s: %v", addr, err)
	}
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("DescribeQuorum at %s: %+v", addr, resp)
	}
	out := map[int32]kmsg.DescribeQuorumResponseTopicPartitionReplicaState{}
	for _, v := range resp.Topics[0].Partitions[0].CurrentVoters {
		out[v.ReplicaID] = v
	}
	return out
}
