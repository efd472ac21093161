package interop_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
)

const shareGroupCommand = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"

// shareToolTable parses a table the Kafka tools print: the header line holding
// column, then one map per row (columns split on blanks, as the tools pad
// them; the last column takes the rest of the line).
func shareToolTable(out, column string) []map[string]string {
	var header []string
	var rows []map[string]string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if header == nil {
			for _, h := range f {
				if h == column {
					header = f
					break
				}
			}
			continue
		}
		if f[0] == header[0] { // the next group's header
			continue
		}
		if len(f) < len(header) {
			continue
		}
		row := map[string]string{}
		for i, h := range header {
			row[h] = f[i]
		}
		row[header[len(header)-1]] = strings.Join(f[len(header)-1:], " ")
		rows = append(rows, row)
	}
	return rows
}

// TestShareGroupsTool runs kafka-share-groups.sh's class against a share
// group that two Java KafkaShareConsumer members have drained: --list lists
// it, --describe shows each partition's start offset at the end of the log,
// --describe --members shows both members; once they have left,
// --reset-offsets --to-earliest moves the start offsets back to 0,
// --delete-offsets drops the topic's state and --delete the group.
func TestShareGroupsTool(t *testing.T) {
	lib := kafkaLib(t)
	b := brokertest.Start(t, "--broker-config", shareBrokerConfig)
	requireShareGroups(t, b.Addr)
	shareGroupsTool(t, lib, b.Addr, "share-tools", 1)
}

// TestClusterShareGroupsTool is TestShareGroupsTool against a 3-node
// cluster, every client and tool bootstrapped from a follower: the share
// APIs are served or forwarded wherever a client sends them.
func TestClusterShareGroupsTool(t *testing.T) {
	if testing.Short() {
		t.Skip("3-node cluster: not in -short")
	}
	lib := kafkaLib(t)
	c := brokertest.StartCluster(t, 3, "--broker-config", shareBrokerConfig)
	leader := c.WaitLeader(t, time.Minute)
	requireShareGroups(t, c.Seeds()[0])
	follower := c.Node(followerOf(c, leader))
	shareGroupsTool(t, lib, follower.Addr, "share-tools-cluster", 3)
}

// shareGroupsTool runs TestShareGroupsTool against the broker at addr
// with a topic (replication factor rf) and group named after name.
func shareGroupsTool(t *testing.T, lib, addr, name string, rf int16) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	topic, group := name, name+"-group"
	const n = 100
	adm := newAdmin(t, addr)
	testwait.For(t, "topic created", time.Minute, func() bool {
		r, err := adm.CreateTopic(ctx, 2, rf, nil, topic)
		return err == nil && r.Err == nil
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := 0; i < n; i++ {
		cl.Produce(ctx, &kgo.Record{Key: []byte(fmt.Sprintf("plain-%d", i)), Value: []byte("v")}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	setShareGroupConfigs(t, ctx, cl, group, map[string]string{"share.auto.offset.reset": "earliest"})
	// Both partitions' end offsets: a listing can carry a per-topic
	// error (partition -1) while the node asked catches up, which once
	// left the wait below looking for partition -1 (1 run in ~15).
	hwm := map[int32]int64{}
	var endsErr error
	testwait.For(t, "both end offsets listed", 30*time.Second, func() bool {
		ends, err := adm.ListEndOffsets(ctx, topic)
		clear(hwm)
		endsErr = err
		for p, o := range ends[topic] {
			if o.Err != nil {
				endsErr = fmt.Errorf("partition %d: %w", p, o.Err)
			}
			hwm[p] = o.Offset
		}
		if endsErr != nil {
			t.Logf("listing end offsets: %v", endsErr)
		}
		return endsErr == nil && len(hwm) == 2 && hwm[0]+hwm[1] == n
	})

	l := newShareLedger()
	procs := []*shareProc{
		startShareMember(t, ctx, lib, addr, group, topic, "share-tools-member-0", l),
		startShareMember(t, ctx, lib, addr, group, topic, "share-tools-member-1", l),
	}
	testwait.For(t, "both members in the group and every record delivered", 2*time.Minute, func() bool {
		_, ids, err := shareGroupMembers(ctx, cl, group)
		return err == nil && len(ids) == 2 && l.distinct() == n
	})
	testwait.For(t, "nothing left to deliver in both partitions", time.Minute, func() bool {
		so, err := shareStartOffsets(ctx, cl, group, topic, []int32{0, 1})
		return err == nil && shareSettled(so, hwm)
	})

	tool := func(args ...string) string {
		return kafkaTool(t, ctx, lib, shareGroupCommand, append([]string{"--bootstrap-server", addr}, args...)...)
	}
	if out := tool("--list"); !strings.Contains(out, group) {
		t.Fatalf("--list does not list %s:\n%s", group, out)
	}
	// startOffsets parses --describe: partition -> start offset and lag.
	startOffsets := func(out string) map[int32][2]string {
		got := map[int32][2]string{}
		for _, r := range shareToolTable(out, "START-OFFSET") {
			if r["GROUP"] != group || r["TOPIC"] != topic {
				continue
			}
			p, err := strconv.Atoi(r["PARTITION"])
			if err != nil {
				t.Fatalf("--describe: partition %q:\n%s", r["PARTITION"], out)
			}
			got[int32(p)] = [2]string{r["START-OFFSET"], r["LAG"]}
		}
		return got
	}
	// Every record accepted: lag 0 (the start offset is where the
	// share-partition began or the log end; Kafka 4.3 shows the former).
	out := tool("--describe", "--group", group)
	t.Logf("kafka-share-groups --describe:\n%s", out)
	got := startOffsets(out)
	for p, o := range hwm {
		so, err := strconv.ParseInt(got[p][0], 10, 64)
		if err != nil || so < 0 || so > o || got[p][1] != "0" {
			t.Errorf("--describe: partition %d start offset %q lag %q, want a start offset in 0..%d and lag 0:\n%s", p, got[p][0], got[p][1], o, out)
		}
	}
	out = tool("--describe", "--group", group, "--members")
	for _, p := range procs {
		if !strings.Contains(out, p.name) {
			t.Errorf("--describe --members does not show %s:\n%s", p.name, out)
		}
	}
	t.Logf("kafka-share-groups --describe --members:\n%s", out)

	// The members leave (close sends the leave heartbeat); the group is
	// then empty, which --reset-offsets and --delete require.
	for _, p := range procs {
		_ = p.stdin.Close()
		select {
		case <-p.done:
		case <-ctx.Done():
			t.Fatalf("%s did not stop", p.name)
		}
	}
	testwait.For(t, "the group empty", time.Minute, func() bool {
		state, ids, err := shareGroupMembers(ctx, cl, group)
		return err == nil && len(ids) == 0 && state == "Empty"
	})
	tool("--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute")
	out = tool("--describe", "--group", group)
	t.Logf("after --reset-offsets --to-earliest:\n%s", out)
	got = startOffsets(out)
	for p, o := range hwm {
		if got[p] != [2]string{"0", strconv.FormatInt(o, 10)} {
			t.Errorf("after --reset-offsets --to-earliest: partition %d start offset %q lag %q, want 0 and %d:\n%s", p, got[p][0], got[p][1], o, out)
		}
	}
	tool("--delete-offsets", "--group", group, "--topic", topic)
	out = tool("--describe", "--group", group)
	t.Logf("after --delete-offsets:\n%s", out)
	for p, o := range startOffsets(out) {
		if _, err := strconv.ParseInt(o[0], 10, 64); err == nil {
			t.Errorf("after --delete-offsets: partition %d still has start offset %s:\n%s", p, o[0], out)
		}
	}
	tool("--delete", "--group", group)
	if out := tool("--list"); strings.Contains(out, group) {
		t.Errorf("--list still lists %s after --delete:\n%s", group, out)
	}
}
