package interop_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
)

// groupCoordinators is the node FindCoordinator names for each group id.
func groupCoordinators(ctx context.Context, adm *kadm.Client, ids []string) (map[string]int32, error) {
	res := adm.FindGroupCoordinators(ctx, ids...)
	out := map[string]int32{}
	for _, id := range ids {
		r, ok := res[id]
		if !ok || r.Err != nil {
			return nil, fmt.Errorf("group %s: %v", id, r.Err)
		}
		out[id] = r.NodeID
	}
	return out, nil
}

// txnCoordinator is the node FindCoordinator names for a transactional id.
func txnCoordinator(ctx context.Context, adm *kadm.Client, id string) (int32, error) {
	r, ok := adm.FindTxnCoordinators(ctx, id)[id]
	if !ok || r.Err != nil {
		return -1, fmt.Errorf("transactional id %s: %v", id, r.Err)
	}
	return r.NodeID, nil
}

// TestClusterCoordinatorsSharded: with partition raft groups the group
// and transaction coordinators are spread over the groups by key, so every
// node coordinates some groups. A consume-transform-produce session whose
// transactional id and consumer group are coordinated by different nodes
// commits and aborts its offsets with its transactions (the group's
// coordinator checks with the transaction's; the transaction's completes
// the group's offsets on the other node). kill -9 of the node coordinating
// the group moves its coordinator within 5 s with its committed offsets,
// and the session goes on: every input record is in the output once,
// nothing aborted is read.
func TestClusterCoordinatorsSharded(t *testing.T) {
	skipClusterInShort(t)
	c := brokertest.StartCluster(t, 3, groupsArgs...)
	ctx, cancel := context.WithTimeout(context.Background(), clusterTestTimeout)
	defer cancel()
	adm := kadm.NewClient(newClusterClient(t, c))
	const in, out, partitions = "coord-in", "coord-out", 6
	for _, topic := range []string{in, out} {
		if _, err := adm.CreateTopic(ctx, partitions, 3, nil, topic); err != nil {
			t.Fatal(err)
		}
		c.WaitTopic(t, topic, partitions, 3, time.Minute)
	}

	// 48 group ids: once the raft groups sit on their preferred nodes,
	// each node coordinates some of them (and no rebalance moves them
	// during the test).
	waitGroupsPreferred(t, c)
	var ids []string
	for i := range 48 {
		ids = append(ids, fmt.Sprintf("cg-%d", i))
	}
	var coords map[string]int32
	testwait.For(t, "every node coordinates groups", time.Minute, func() bool {
		var err error
		if coords, err = groupCoordinators(ctx, adm, ids); err != nil {
			return false
		}
		per := map[int32]int{}
		for _, n := range coords {
			per[n]++
		}
		for _, id := range c.IDs() {
			if per[id] == 0 {
				return false
			}
		}
		return true
	})
	per := map[int32]int{}
	for _, n := range coords {
		per[n]++
	}
	t.Logf("groups coordinated per node: %v", per)

	// A transactional id and a group coordinated by different nodes.
	var group, tid string
	var groupNode, txnNode int32
	for i := 0; group == ""; i++ {
		if i > 200 {
			t.Fatal("no transactional id found whose coordinator differs from the group's")
		}
		g, id := ids[i%len(ids)], fmt.Sprintf("etl-%d", i)
		tn, err := txnCoordinator(ctx, adm, id)
		if err != nil {
			t.Fatal(err)
		}
		if tn != coords[g] {
			group, tid, groupNode, txnNode = g, id, coords[g], tn
		}
	}
	t.Logf("group %s coordinated by node %d, transactional id %s by node %d", group, groupNode, tid, txnNode)

	producer := newClusterClient(t, c, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	defer producer.Close()
	sent := map[string]bool{}
	produceInput := func(prefix string, n int) {
		t.Helper()
		for i := range n {
			v := fmt.Sprintf("%s-%d", prefix, i)
			if err := producer.ProduceSync(ctx, &kgo.Record{Topic: in, Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("produce %s: %v", v, err)
			}
			sent[v] = true
		}
	}

	newSession := func() *kgo.GroupTransactSession {
		t.Helper()
		sess, err := kgo.NewGroupTransactSession(clusterOpts(c, kgo.TransactionalID(tid), kgo.ConsumerGroup(group), kgo.ConsumeTopics(in),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets())...)
		if err != nil {
			t.Fatal(err)
		}
		return sess
	}
	// round consumes n input records in one transaction and ends it; it
	// reports whether the transaction committed.
	round := func(sess *kgo.GroupTransactSession, n int, commit bool) bool {
		t.Helper()
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		for got := 0; got < n; {
			fs := sess.PollRecords(ctx, n-got)
			if ctx.Err() != nil {
				t.Fatalf("session consumed %d of %d: %v", got, n, ctx.Err())
			}
			fs.EachRecord(func(r *kgo.Record) {
				got++
				sess.Produce(ctx, &kgo.Record{Topic: out, Value: r.Value}, nil)
			})
		}
		end := kgo.TryAbort
		if commit {
			end = kgo.TryCommit
		}
		committed, err := sess.End(ctx, end)
		if err != nil {
			t.Fatalf("End (commit %v): %v", commit, err)
		}
		if committed && !commit {
			t.Fatal("End (abort): committed")
		}
		return committed
	}
	mustCommit := func(sess *kgo.GroupTransactSession, n int) {
		t.Helper()
		if !round(sess, n, true) {
			t.Fatal("End (commit): aborted")
		}
	}
	// committedSum is what the group's coordinator answers for its
	// offsets, asked with a fresh client until it answers (a coordinator
	// may be moving: kgo keeps the one it found, and FindCoordinator
	// answers COORDINATOR_NOT_AVAILABLE while a raft group elects).
	committedSum := func() int64 {
		t.Helper()
		var sum int64
		var last error
		testwait.For(t, fmt.Sprintf("%s's committed offsets", group), time.Minute, func() bool {
			fresh := newClusterClient(t, c)
			defer fresh.Close()
			offs, err := kadm.NewClient(fresh).FetchOffsets(ctx, group)
			if err == nil {
				err = offs.Error()
			}
			if last = err; err != nil {
				return false
			}
			sum = 0
			offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
			return true
		})
		if last != nil {
			t.Fatalf("fetch %s's offsets: %v", group, last)
		}
		return sum
	}

	produceInput("a", 60)
	sess := newSession()
	mustCommit(sess, 60)
	if got := committedSum(); got != 60 {
		t.Fatalf("after a committed transaction %s's offsets sum to %d, want 60", group, got)
	}
	produceInput("b", 30)
	round(sess, 30, false) // aborted: offsets stay, output aborted
	if got := committedSum(); got != 60 {
		t.Fatalf("after an aborted transaction %s's offsets sum to %d, want 60", group, got)
	}
	sess.Close()
	sess = newSession() // starts from the committed offsets again
	mustCommit(sess, 30)
	if got := committedSum(); got != 90 {
		t.Fatalf("%s's offsets sum to %d, want 90", group, got)
	}

	// kill -9 the group's coordinator: another node coordinates it
	// within 5 s, with its offsets.
	if m, err := groupCoordinators(ctx, adm, []string{group}); err != nil || m[group] != groupNode {
		t.Fatalf("group %s's coordinator is %v (%v), want node %d still", group, m, err, groupNode)
	}
	c.Kill(groupNode)
	killed := time.Now()
	var moved time.Duration
	last := ""
	defer func() {
		if moved == 0 {
			t.Logf("last look: %s", last)
		}
	}()
	testwait.For(t, fmt.Sprintf("group %s coordinated by a live node with its offsets", group), time.Minute, func() bool {
		m, err := groupCoordinators(ctx, adm, []string{group})
		if err != nil || m[group] == groupNode || m[group] < 0 {
			last = fmt.Sprintf("coordinator %v, %v", m, err)
			return false
		}
		// A fresh client: kgo keeps a coordinator it found until the
		// coordinator answers NOT_COORDINATOR, and a dead one answers
		// nothing.
		fresh := newClusterClient(t, c)
		defer fresh.Close()
		offs, err := kadm.NewClient(fresh).FetchOffsets(ctx, group)
		if err == nil {
			err = offs.Error()
		}
		if err != nil {
			last = fmt.Sprintf("offsets: %v", err)
			return false
		}
		var sum int64
		offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
		if sum != 90 {
			last = fmt.Sprintf("offsets sum to %d", sum)
			return false
		}
		moved = time.Since(killed)
		return true
	})
	t.Logf("group %s's coordinator moved off killed node %d %v after the kill", group, groupNode, moved.Round(time.Millisecond))
	if moved > 5*time.Second {
		t.Errorf("coordinator moved %v after the kill, want within 5s", moved)
	}
	produceInput("c", 30)
	// The member meets the group's new coordinator: kgo aborts a
	// transaction during which its group rebalanced (the records are
	// consumed again from the committed offsets), so a few tries.
	for try := 1; !round(sess, 30, true); try++ {
		t.Logf("transaction %d after the kill aborted by the client (group rebalanced)", try)
		if try == 5 {
			t.Fatal("no transaction committed after the coordinator moved")
		}
	}
	sess.Close()
	c.Restart(groupNode)
	if got := committedSum(); got != 120 {
		t.Fatalf("%s's offsets sum to %d, want 120", group, got)
	}

	// The output, read_committed: every input record once, nothing of
	// the aborted transaction.
	consumer := newClusterClient(t, c, kgo.ConsumeTopics(out), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	defer consumer.Close()
	seen := map[string]int{}
	for n := 0; n < len(sent); {
		fs := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d output records: %v", n, len(sent), ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			seen[string(r.Value)]++
			n++
		})
	}
	for _, v := range slices.Sorted(maps.Keys(seen)) {
		if !sent[v] || seen[v] != 1 {
			t.Errorf("output record %q read %d times (sent: %v)", v, seen[v], sent[v])
		}
	}
	if len(seen) != len(sent) {
		t.Errorf("output has %d distinct records, want %d", len(seen), len(sent))
	}
}

// waitGroupsPreferred waits until every node sees each partition raft
// group led by its preferred node (the g-th node in id order, in turn).
func waitGroupsPreferred(t *testing.T, c *brokertest.Cluster) {
	t.Helper()
	ids := slices.Sorted(slices.Values(c.IDs()))
	testwait.For(t, "every partition raft group led by its preferred node", 2*time.Minute, func() bool {
		for _, id := range ids {
			st, err := c.Status(id)
			if err != nil || len(st.Groups) == 0 {
				return false
			}
			for _, g := range st.Groups {
				if g.LeaderID != ids[(int(g.Group)-1)%len(ids)] {
					return false
				}
			}
		}
		return true
	})
}
