package interop_test

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
)

// shareKey is the key of record i of the share tests' stream: one in ten
// rejected, one in ten released once, one in fifty poison (released at
// every delivery), the rest plain.
func shareKey(i int) string {
	switch {
	case i%10 == 0:
		return fmt.Sprintf("reject-%d", i)
	case i%10 == 1:
		return fmt.Sprintf("release-%d", i)
	case i%50 == 2:
		return fmt.Sprintf("poison-%d", i)
	default:
		return fmt.Sprintf("plain-%d", i)
	}
}

// TestShareJavaMembersKill9 is the must-show for share groups with
// Kafka's own client: three KafkaShareConsumer processes share a
// 2-partition topic, one is killed with SIGKILL mid-stream, and the
// acknowledgements each record's key asks for are honoured: every plain
// record accepted at least once and none lost, rejected records not
// redelivered, released records redelivered and then accepted, poison
// records delivered share.delivery.count.limit times and then archived. A
// record is delivered again after a confirmed ACCEPT or REJECT never; after
// an unconfirmed one (the killed member's) it may be.
func TestShareJavaMembersKill9(t *testing.T) {
	lib := kafkaLib(t)
	b := brokertest.Start(t, "--broker-config", shareBrokerConfig)
	requireShareGroups(t, b.Addr)
	shareJavaMembersKill9(t, lib, b.Addr, "share-java", 1, nil)
}

// TestClusterShareJavaMembersKill9 is TestShareJavaMembersKill9 on a
// 3-node cluster where the raft leader is killed with SIGKILL together
// with the member: the members carry on against the new leader, and the
// acknowledged state they left on the old one holds. An acquisition whose
// answer dies with the leader is a delivery nobody sees, so here a
// release- record may reach the limit unseen (shareVerdict's answersLost).
func TestClusterShareJavaMembersKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("3-node cluster: not in -short")
	}
	lib := kafkaLib(t)
	c := brokertest.StartCluster(t, 3, "--broker-config", shareBrokerConfig)
	c.WaitLeader(t, time.Minute)
	requireShareGroups(t, c.Seeds()[0])
	shareJavaMembersKill9(t, lib, strings.Join(c.Seeds(), ","), "share-java-cluster", 3, func() {
		leader := c.LeaderID(t)
		c.Kill(leader)
		t.Logf("killed the leader, node %d; node %d leads", leader, c.WaitLeader(t, time.Minute))
	})
}

// shareJavaMembersKill9 runs TestShareJavaMembersKill9 against the brokers
// at addr (comma-separated; Regent's, or to check the test itself, Kafka's)
// with a topic (replication factor rf) and group named after name; also,
// when set, is called right after the member is killed.
func shareJavaMembersKill9(t *testing.T, lib, addr, name string, rf int16, also func()) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	topic, group := name, name+"-group"
	const n = 3000
	const limit = 3
	seeds := strings.Split(addr, ",")
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	testwait.For(t, "topic created", time.Minute, func() bool {
		r, err := adm.CreateTopic(ctx, 2, rf, nil, topic)
		return err == nil && r.Err == nil
	})
	// The group's limit set the way an operator sets it: kafka-configs on
	// the GROUP resource. Earliest, so records produced before a member's
	// first fetch are delivered; short lock and session so the killed
	// member's records come back within seconds.
	kafkaTool(t, ctx, lib, "kafka.admin.ConfigCommand", "--bootstrap-server", addr, "--alter", "--entity-type", "groups", "--entity-name", group,
		"--add-config", fmt.Sprintf("share.delivery.count.limit=%d,share.auto.offset.reset=earliest,share.record.lock.duration.ms=5000,share.session.timeout.ms=6000,share.heartbeat.interval.ms=1000", limit))

	l := newShareLedger()
	var procs []*shareProc
	for i := 0; i < 3; i++ {
		procs = append(procs, startShareMember(t, ctx, lib, addr, group, topic, fmt.Sprintf("share-member-%d", i), l))
	}
	testwait.For(t, "three share members in the group", 90*time.Second, func() bool {
		_, ids, err := shareGroupMembers(ctx, cl, group)
		return err == nil && len(ids) == 3
	})

	// The stream, paced; the kill comes once a third of it has been
	// processed, while records still flow (the stream waits for the kill
	// at two thirds, so records are produced after it too).
	killed := make(chan struct{})
	streamed := make(chan error, 1)
	go func() {
		for i := 0; i < n; i += 50 {
			if i == 2*n/3 {
				select {
				case <-killed:
				case <-ctx.Done():
					streamed <- ctx.Err()
					return
				}
			}
			for j := i; j < i+50; j++ {
				cl.Produce(ctx, &kgo.Record{Key: []byte(shareKey(j)), Value: []byte(fmt.Sprint(j))}, nil)
			}
			if err := cl.Flush(ctx); err != nil {
				streamed <- err
				return
			}
			time.Sleep(10 * time.Millisecond) // pacing the load, not synchronization
		}
		streamed <- nil
	}()

	testwait.For(t, "a third of the records processed, by every member", 2*time.Minute, func() bool {
		if l.distinct() < n/3 {
			return false
		}
		for _, p := range procs {
			if l.printed(p.name) == 0 {
				return false
			}
		}
		return true
	})
	victim := procs[0]
	for _, p := range procs[1:] {
		if l.printed(p.name) > l.printed(victim.name) {
			victim = p
		}
	}
	l.markKilled()
	_ = victim.cmd.Process.Signal(syscall.SIGKILL)
	<-victim.done
	t.Logf("killed %s after it printed %d deliveries (%d distinct records processed so far)", victim.name, l.printed(victim.name), l.distinct())
	if also != nil {
		also()
	}
	close(killed)
	if err := <-streamed; err != nil {
		t.Fatalf("produce: %v", err)
	}

	// Done when every record has been delivered and the broker's start
	// offset has passed every record of both partitions: all are
	// acknowledged or archived, none can be delivered again.
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	hwm := map[int32]int64{}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { hwm[o.Partition] = o.Offset; total += o.Offset })
	if total != n {
		t.Fatalf("end offsets %v, want %d records", hwm, n)
	}
	var lastSPSO map[int32]shareOffset
	var lastErr error
	ok := testwait.Until(3*time.Minute, func() bool {
		if l.distinct() < n {
			return false
		}
		lastSPSO, lastErr = shareStartOffsets(ctx, cl, group, topic, []int32{0, 1})
		return lastErr == nil && shareSettled(lastSPSO, hwm)
	})
	if !ok {
		t.Fatalf("not settled: %d of %d records delivered; start offsets and lags %v (err %v), end offsets %v", l.distinct(), n, lastSPSO, lastErr, hwm)
	}
	for _, p := range procs {
		if p != victim {
			_ = p.stdin.Close()
		}
	}
	for _, p := range procs {
		select {
		case <-p.done:
		case <-ctx.Done():
			t.Fatalf("%s did not stop", p.name)
		}
	}

	keys := make([]string, n)
	for i := range keys {
		keys[i] = shareKey(i)
	}
	problems, gaps, redelivered := l.shareVerdict(keys, limit, also != nil)
	after := l.countAfterKill()
	t.Logf("%d records, %d redelivered at least once, %d deliveries printed after the kill, %d deliveries to %s unconfirmed when it was killed, %d acquisitions never printed (the killed member's, or answers lost with a killed leader)",
		n, redelivered, after, l.unconfirmed(victim.name), victim.name, gaps)
	if after == 0 {
		t.Errorf("no member processed anything after %s was killed", victim.name)
	}
	// What the killed member acquired and did not print: at most a few
	// fetches' worth (max.poll.records is 100, per partition).
	if gaps > 400 {
		t.Errorf("%d deliveries never printed: more than the killed member could have held", gaps)
	}
	if len(problems) > 0 {
		t.Errorf("%d problems:\n%s", len(problems), strings.Join(problems[:min(len(problems), 40)], "\n"))
	}
}
