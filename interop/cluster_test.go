package interop_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
)

// The cluster tests run three or five regent nodes in raft cluster mode
// (brokertest.StartCluster) and SIGKILL leaders under kgo clients. Each
// runs for up to clusterTestTimeout; none runs in -short.

const clusterTestTimeout = 3 * time.Minute

func skipClusterInShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("cluster failover scenarios take minutes: not in -short")
	}
}

// TestClusterFailoverLosesNoAckedRecord: a producer writes continuously
// (acks=all, idempotent) to a 6-partition RF-3 topic on 3 nodes; the
// leader is SIGKILLed mid-stream and the producer carries on against the
// new leader. Every acknowledged record must then be in the log exactly at
// its acknowledged offset, and no value twice. The killed node is
// restarted and catches up; the current leader is killed in turn, and the
// remaining two (one of them the restarted node) must still serve the
// same log, and take new writes.
func TestClusterFailoverLosesNoAckedRecord(t *testing.T) {
	const (
		topic      = "cluster-failover"
		partitions = 6
		beforeKill = 10_000
		afterKill  = 20_000
	)
	skipClusterInShort(t)
	c := brokertest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), clusterTestTimeout)
	defer cancel()
	createClusterTopic(t, ctx, c, topic, partitions, 3)
	c.WaitTopic(t, topic, partitions, 3, time.Minute)

	pr := startProducer(t, ctx, c, topic, partitions, "failover")
	defer pr.abort()
	pr.waitAcks(t, ctx, beforeKill)
	first := c.LeaderID(t)
	killedAt := pr.acked()
	c.Kill(first)
	second := c.WaitLeader(t, time.Minute)
	if second == first {
		t.Fatalf("node %d still leads after its kill", first)
	}
	t.Logf("leader %d killed after %d acks; node %d leads", first, killedAt, second)
	pr.waitAcks(t, ctx, killedAt+afterKill)
	acks := pr.finish(t)
	t.Logf("%d records acknowledged, %d after the kill", len(acks), int64(len(acks))-killedAt)

	c.WaitTopic(t, topic, partitions, 2, time.Minute)
	verifyAcked(t, "after the first failover", readLog(t, ctx, c, topic, partitions), acks)

	c.Restart(first)
	c.WaitCaughtUp(t, first, time.Minute)
	leader := c.LeaderID(t)
	c.Kill(leader)
	third := c.WaitLeader(t, time.Minute)
	if third == leader {
		t.Fatalf("node %d still leads after its kill", leader)
	}
	t.Logf("leader %d killed; node %d leads (the restarted node is %d)", leader, third, first)
	c.WaitTopic(t, topic, partitions, 2, time.Minute)
	verifyAcked(t, "after the second failover", readLog(t, ctx, c, topic, partitions), acks)

	// Two of three voters are a majority: acks=all writes still commit.
	more := produceSync(t, ctx, c, topic, partitions, "two-of-three", 600)
	verifyAcked(t, "after writing to two of three", readLog(t, ctx, c, topic, partitions), append(acks, more...))
}

// TestClusterMetadataAndCoordinator: Metadata shows the three voters as
// brokers and as every partition's replicas and ISR, led by the raft
// leader, which is also the group coordinator; RF 4 on three voters is
// INVALID_REPLICATION_FACTOR. A group consumer commits part of the topic,
// reads on without committing, and the leader is killed: the new
// coordinator has the commits, the consumer carries on (each partition
// either where it was or back at exactly its committed offset, never
// earlier), and a new member of the group later resumes exactly at the
// offsets committed on the new coordinator.
func TestClusterMetadataAndCoordinator(t *testing.T) {
	const (
		topic           = "cluster-groups"
		group           = "cluster-group"
		partitions      = 4
		records         = 3000
		committedRead   = 1200
		uncommittedRead = 300
		later           = 1000
	)
	skipClusterInShort(t)
	c := brokertest.StartCluster(t, 3, "--broker-config", "group.initial.rebalance.delay.ms=0")
	ctx, cancel := context.WithTimeout(context.Background(), clusterTestTimeout)
	defer cancel()
	createClusterTopic(t, ctx, c, topic, partitions, 3)
	td := c.WaitTopic(t, topic, partitions, 3, time.Minute)
	leader := c.LeaderID(t)
	voters := c.IDs()

	md := c.WaitMetadata(t, 30*time.Second, []string{topic}, brokersAre(c, voters...))
	t.Logf("metadata: brokers %v, controller %d, raft leader %d", md.Brokers, md.Controller, leader)
	for _, p := range td.Partitions.Sorted() {
		if p.Leader != leader || !sameIDs(p.Replicas, voters) || !sameIDs(p.ISR, voters) {
			t.Fatalf("%s/%d: leader %d replicas %v isr %v; want leader %d, replicas and isr %v",
				topic, p.Partition, p.Leader, p.Replicas, p.ISR, leader, voters)
		}
	}
	adm := clusterAdmin(t, c)
	if err := createTopicErr(ctx, adm, "cluster-rf4", 1, 4); !errors.Is(err, kerr.InvalidReplicationFactor) {
		t.Fatalf("create with RF 4 on 3 voters: %v, want INVALID_REPLICATION_FACTOR", err)
	}
	for _, id := range c.LiveIDs() {
		if id != leader {
			followerRefuses(t, ctx, c, id, topic, group)
		}
	}

	produceSync(t, ctx, c, topic, partitions, "group", records)
	perPartition := int64(records / partitions)

	c1 := newClusterClient(t, c, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.SessionTimeout(10*time.Second), kgo.HeartbeatInterval(time.Second))
	defer c1.Close()
	cur := newGroupCursor(topic, nil, true)
	cur.poll(t, ctx, c1, func() bool { return cur.delivered >= committedRead })
	cur.commit(t, ctx, c1)
	waitCoordinator(t, ctx, adm, group, false, leader)
	cur.poll(t, ctx, c1, func() bool { return cur.delivered >= committedRead+uncommittedRead })
	t.Logf("committed %v, consumed up to %v", cur.committed, cur.next)

	c.Kill(leader)
	newLeader := c.WaitLeader(t, time.Minute)
	if newLeader == leader {
		t.Fatalf("node %d still leads after its kill", leader)
	}
	waitCoordinator(t, ctx, adm, group, false, newLeader)
	checkCommitted(t, ctx, adm, group, topic, partitions, cur.committed)
	for _, id := range c.LiveIDs() {
		if id != newLeader {
			followerRefuses(t, ctx, c, id, topic, group)
		}
	}

	// The cursor may already be at the end of a partition the client
	// rewinds to its committed offset when it rejoins the new
	// coordinator: wait until the client itself has consumed to the end
	// of every partition too, or its commit would carry the rewound offset.
	cur.poll(t, ctx, c1, func() bool {
		return cur.allAt(partitions, perPartition) && clientConsumedTo(c1, topic, partitions, perPartition)
	})
	t.Logf("first consumer read to the end; %d records redelivered after the failover", cur.redelivered)
	cur.commit(t, ctx, c1)
	checkCommitted(t, ctx, adm, group, topic, partitions, cur.committed)

	// A new member resumes exactly at the offsets committed on the new
	// coordinator and reads the records produced after it.
	produceSync(t, ctx, c, topic, partitions, "group-later", later)
	c1.Close()
	c2 := newClusterClient(t, c, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.SessionTimeout(10*time.Second), kgo.HeartbeatInterval(time.Second))
	defer c2.Close()
	cur2 := newGroupCursor(topic, cur.committed, false)
	cur2.poll(t, ctx, c2, func() bool { return cur2.allAt(partitions, perPartition+later/partitions) })
	if cur2.delivered != later {
		t.Fatalf("second member got %d records, want %d", cur2.delivered, later)
	}
	cur2.commit(t, ctx, c2)
	checkCommitted(t, ctx, adm, group, topic, partitions, cur2.committed)
}

// TestClusterTransactionSurvivesFailover: one transactional producer
// commits a transaction, a second opens one and produces into it; the
// first commits another and, the moment EndTxn(commit) is acknowledged,
// the leader (the transaction coordinator) is SIGKILLed. After failover
// a new client with the open transaction's id starts over (its
// InitProducerId aborts the open transaction) and commits: a
// read_committed consumer sees every committed transaction's records
// exactly once and none of the aborted one's; read_uncommitted sees them
// all once. Last, the first producer's own client commits another
// transaction on the new coordinator.
func TestClusterTransactionSurvivesFailover(t *testing.T) {
	const (
		topic      = "cluster-txn"
		partitions = 3
		perTxn     = 300
	)
	skipClusterInShort(t)
	c := brokertest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), clusterTestTimeout)
	defer cancel()
	createClusterTopic(t, ctx, c, topic, partitions, 3)
	c.WaitTopic(t, topic, partitions, 3, time.Minute)
	leader := c.LeaderID(t)
	adm := clusterAdmin(t, c)

	txnClient := func(id string) *kgo.Client {
		return newClusterClient(t, c, kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(time.Minute))
	}
	committed := map[string]bool{}
	var aborted []string

	p := txnClient("cluster-tx-committed")
	defer p.Close()
	for _, v := range txnRound(t, ctx, p, "A", perTxn, partitions, true) {
		committed[v] = true
	}
	waitCoordinator(t, ctx, adm, "cluster-tx-committed", true, leader)

	q := txnClient("cluster-tx-open")
	defer q.Close()
	if err := q.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	aborted = produceValues(t, ctx, q, "B", perTxn, partitions)

	// D's EndTxn(commit) is acknowledged, then the coordinator dies at
	// once: the new one must finish the commit.
	for _, v := range txnRound(t, ctx, p, "D", perTxn, partitions, true) {
		committed[v] = true
	}
	c.Kill(leader)
	newLeader := c.WaitLeader(t, time.Minute)
	if newLeader == leader {
		t.Fatalf("node %d still leads after its kill", leader)
	}
	q.Close() // left with its transaction open
	waitCoordinator(t, ctx, adm, "cluster-tx-committed", true, newLeader)
	c.WaitTopic(t, topic, partitions, 2, time.Minute)

	// A new client for the open transaction's id: kgo's InitProducerId
	// fences the old producer and aborts its transaction.
	q2 := txnClient("cluster-tx-open")
	defer q2.Close()
	for _, v := range txnRound(t, ctx, q2, "E", perTxn, partitions, true) {
		committed[v] = true
	}
	checkTxnLog(t, ctx, c, topic, partitions, committed, aborted)

	// The client that committed D carries on with the new coordinator.
	// kgo drops a cached coordinator on NOT_COORDINATOR, or when the
	// coordinator's node leaves Metadata's broker list; a dead node still
	// listed there keeps AddPartitionsToTxn dialing it.
	pctx, pcancel := context.WithTimeout(ctx, time.Minute)
	defer pcancel()
	for _, v := range txnRound(t, pctx, p, "F", perTxn, partitions, true) {
		committed[v] = true
	}
	checkTxnLog(t, ctx, c, topic, partitions, committed, aborted)
}

// checkTxnLog checks read_committed shows exactly the committed values,
// once each, and read_uncommitted every committed and aborted one once.
func checkTxnLog(t *testing.T, ctx context.Context, c *brokertest.Cluster, topic string, partitions int, committed map[string]bool, aborted []string) {
	t.Helper()
	got := readValues(t, ctx, c, topic, partitions, true, len(committed))
	for v, n := range got {
		if !committed[v] || n != 1 {
			t.Fatalf("read_committed saw %q %d times (committed: %v)", v, n, committed[v])
		}
	}
	if len(got) != len(committed) {
		t.Fatalf("read_committed saw %d distinct records, want %d", len(got), len(committed))
	}
	all := readValues(t, ctx, c, topic, partitions, false, len(committed)+len(aborted))
	for _, v := range aborted {
		if all[v] != 1 {
			t.Fatalf("read_uncommitted saw the aborted transaction's %q %d times, want once", v, all[v])
		}
	}
	for v, n := range all {
		if n != 1 {
			t.Fatalf("read_uncommitted saw %q %d times", v, n)
		}
	}
	if len(all) != len(committed)+len(aborted) {
		t.Fatalf("read_uncommitted saw %d records, want %d", len(all), len(committed)+len(aborted))
	}
	t.Logf("read_committed: the %d committed records once each; read_uncommitted: %d", len(committed), len(all))
}

// TestClusterFiveNodesSurviveTwoFailures: on five nodes a producer writes
// continuously while a follower and then the leader are SIGKILLed; the
// three left are a majority, so production goes on, every acknowledged
// record is in the log at its offset, and new writes and reads work.
func TestClusterFiveNodesSurviveTwoFailures(t *testing.T) {
	const (
		topic      = "cluster-five"
		partitions = 5
	)
	skipClusterInShort(t)
	c := brokertest.StartCluster(t, 5)
	ctx, cancel := context.WithTimeout(context.Background(), clusterTestTimeout)
	defer cancel()
	createClusterTopic(t, ctx, c, topic, partitions, 5)
	c.WaitTopic(t, topic, partitions, 5, time.Minute)

	pr := startProducer(t, ctx, c, topic, partitions, "five")
	defer pr.abort()
	pr.waitAcks(t, ctx, 3000)
	leader := c.LeaderID(t)
	var follower int32
	for _, id := range c.LiveIDs() {
		if id != leader {
			follower = id
			break
		}
	}
	c.Kill(follower)
	t.Logf("follower %d killed after %d acks", follower, pr.acked())
	pr.waitAcks(t, ctx, pr.acked()+3000)
	leader = c.LeaderID(t)
	c.Kill(leader)
	newLeader := c.WaitLeader(t, time.Minute)
	if newLeader == leader || newLeader == follower {
		t.Fatalf("leader %d after killing %d and %d", newLeader, follower, leader)
	}
	t.Logf("leader %d killed after %d acks; node %d leads", leader, pr.acked(), newLeader)
	pr.waitAcks(t, ctx, pr.acked()+4000)
	acks := pr.finish(t)

	c.WaitTopic(t, topic, partitions, 3, time.Minute)
	verifyAcked(t, "after two failures", readLog(t, ctx, c, topic, partitions), acks)
	more := produceSync(t, ctx, c, topic, partitions, "five-after", 2000)
	verifyAcked(t, "after writing to three of five", readLog(t, ctx, c, topic, partitions), append(acks, more...))
}

// TestClusterNodeJoinsAndLeaves: a fourth node joins a three-node cluster
// (--join, then `regent cluster add-voter`): Metadata lists four brokers,
// the node catches up and RF 4 becomes possible. It is then removed
// (`regent cluster remove-voter`): three brokers again, RF 4 refused, and
// both topics still serve every acknowledged record.
func TestClusterNodeJoinsAndLeaves(t *testing.T) {
	const (
		topic      = "cluster-membership"
		rf4        = "cluster-membership-rf4"
		partitions = 3
	)
	skipClusterInShort(t)
	c := brokertest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), clusterTestTimeout)
	defer cancel()
	createClusterTopic(t, ctx, c, topic, partitions, 3)
	c.WaitTopic(t, topic, partitions, 3, time.Minute)
	acks := produceSync(t, ctx, c, topic, partitions, "before-join", 1500)

	n4 := c.AddNode(t)
	four := c.IDs()
	if len(four) != 4 || four[3] != n4.ID {
		t.Fatalf("members after the join: %v", four)
	}
	c.WaitMetadata(t, time.Minute, nil, brokersAre(c, four...))
	createClusterTopic(t, ctx, c, rf4, 2, 4)
	td := c.WaitTopic(t, rf4, 2, 4, time.Minute)
	for _, p := range td.Partitions.Sorted() {
		if !sameIDs(p.Replicas, four) {
			t.Fatalf("%s/%d: replicas %v, want %v", rf4, p.Partition, p.Replicas, four)
		}
	}
	acks4 := produceSync(t, ctx, c, rf4, 2, "rf4", 500)
	verifyAcked(t, "RF 4 topic on four voters", readLog(t, ctx, c, rf4, 2), acks4)

	c.RemoveNode(t, n4.ID)
	three := c.IDs()
	if len(three) != 3 || slices.Contains(three, n4.ID) {
		t.Fatalf("members after the removal: %v", three)
	}
	c.WaitMetadata(t, time.Minute, nil, brokersAre(c, three...))
	if err := createTopicErr(ctx, clusterAdmin(t, c), "cluster-membership-rf4-again", 1, 4); !errors.Is(err, kerr.InvalidReplicationFactor) {
		t.Fatalf("create with RF 4 after the removal: %v, want INVALID_REPLICATION_FACTOR", err)
	}
	// Replicas are the voters: the removed node is no partition's replica.
	c.WaitMetadata(t, time.Minute, []string{topic, rf4}, func(md kadm.Metadata) error {
		for _, name := range []string{topic, rf4} {
			for _, p := range md.Topics[name].Partitions.Sorted() {
				if !sameIDs(p.Replicas, three) {
					return fmt.Errorf("%s/%d: replicas %v, want %v", name, p.Partition, p.Replicas, three)
				}
			}
		}
		return nil
	})
	verifyAcked(t, "after the leave", readLog(t, ctx, c, topic, partitions), acks)
	verifyAcked(t, "RF 4 topic after the leave", readLog(t, ctx, c, rf4, 2), acks4)
}

// clusterOpts are the client options of every cluster test: seeded with
// every running node, acks=all, idempotent (kgo's default) and retrying
// without a count limit (records: kgo's default; requests: a huge count
// under a one-minute RetryTimeout), all inside the test's context.
//
// REGENT_TEST_KGO_LOG=debug|info|warn|error sends the clients' logs to
// stderr, for debugging a failure.
func clusterOpts(c *brokertest.Cluster, extra ...kgo.Opt) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.LiveSeeds()...),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.UnknownTopicRetries(-1),
		kgo.RequestRetries(1 << 30),
		kgo.RetryTimeout(time.Minute),
		kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.FetchMaxWait(200 * time.Millisecond),
		// These tests kill nodes: a connection whose first request is
		// in flight when its node dies reads EOF, which kgo otherwise
		// takes for a TLS or SASL misconfiguration and does not retry,
		// failing the records (1 CI run of 17 of the secret rotation
		// test). Every cluster client here is configured right.
		kgo.AlwaysRetryEOF(),
	}
	if lv, ok := map[string]kgo.LogLevel{"debug": kgo.LogLevelDebug, "info": kgo.LogLevelInfo, "warn": kgo.LogLevelWarn, "error": kgo.LogLevelError}[os.Getenv("REGENT_TEST_KGO_LOG")]; ok {
		stamp := func() string { return time.Now().UTC().Format("15:04:05.000000 ") }
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(os.Stderr, lv, stamp)))
	}
	return append(opts, extra...)
}

func newClusterClient(t *testing.T, c *brokertest.Cluster, extra ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(clusterOpts(c, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func clusterAdmin(t *testing.T, c *brokertest.Cluster) *kadm.Client {
	t.Helper()
	cl := newClusterClient(t, c)
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// retriable: anything but a Kafka error code marked not retriable
// (connection errors, timeouts, NOT_CONTROLLER, ...).
func retriable(err error) bool {
	var ke *kerr.Error
	return !errors.As(err, &ke) || ke.Retriable
}

// createTopicErr creates a topic, retrying retriable errors; a retry that
// finds the topic there (the first answer was lost) is success.
func createTopicErr(ctx context.Context, adm *kadm.Client, topic string, partitions, rf int) error {
	for attempt := 0; ; attempt++ {
		_, err := adm.CreateTopic(ctx, int32(partitions), int16(rf), nil, topic)
		switch {
		case err == nil:
			return nil
		case attempt > 0 && errors.Is(err, kerr.TopicAlreadyExists):
			return nil
		case ctx.Err() != nil || !retriable(err):
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func createClusterTopic(t *testing.T, ctx context.Context, c *brokertest.Cluster, topic string, partitions, rf int) {
	t.Helper()
	if err := createTopicErr(ctx, clusterAdmin(t, c), topic, partitions, rf); err != nil {
		t.Fatalf("create %s (%d partitions, RF %d): %v", topic, partitions, rf, err)
	}
}

// brokersAre checks Metadata lists exactly the nodes ids, each at its
// Kafka address.
func brokersAre(c *brokertest.Cluster, ids ...int32) func(kadm.Metadata) error {
	return func(md kadm.Metadata) error {
		var got []int32
		for _, b := range md.Brokers {
			got = append(got, b.NodeID)
			n := c.Node(b.NodeID)
			if n == nil {
				return fmt.Errorf("broker %d (%s:%d) is no member", b.NodeID, b.Host, b.Port)
			}
			if addr := fmt.Sprintf("%s:%d", b.Host, b.Port); addr != n.Addr {
				return fmt.Errorf("broker %d at %s, want %s", b.NodeID, addr, n.Addr)
			}
		}
		if !sameIDs(got, ids) {
			return fmt.Errorf("brokers %v, want %v", got, ids)
		}
		return nil
	}
}

func sameIDs(got, want []int32) bool {
	g, w := slices.Clone(got), slices.Clone(want)
	slices.Sort(g)
	slices.Sort(w)
	return slices.Equal(g, w)
}

// waitCoordinator waits until FindCoordinator names want for the group
// (or, with txn, the transactional id).
func waitCoordinator(t *testing.T, ctx context.Context, adm *kadm.Client, key string, txn bool, want int32) {
	t.Helper()
	var last kadm.FindCoordinatorResponse
	for {
		var rs kadm.FindCoordinatorResponses
		if txn {
			rs = adm.FindTxnCoordinators(ctx, key)
		} else {
			rs = adm.FindGroupCoordinators(ctx, key)
		}
		last = rs[key]
		if last.Err == nil && last.NodeID == want {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("coordinator of %s: %+v, want node %d", key, last, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// acked is one acknowledged record.
type acked struct {
	partition int32
	offset    int64
	value     string
}

// producer writes records with unique values round-robin over the
// partitions from its own goroutine, keeping every acknowledgement, until
// finish or abort.
type producer struct {
	cancel context.CancelFunc
	stop   atomic.Bool
	done   chan struct{}
	n      atomic.Int64

	mu       sync.Mutex
	acks     []acked
	failed   int
	firstErr error
}

func startProducer(t *testing.T, ctx context.Context, c *brokertest.Cluster, topic string, partitions int, prefix string) *producer {
	t.Helper()
	return startPacedProducer(t, ctx, c, topic, partitions, prefix, 0)
}

// startPacedProducer is startProducer writing at most perSecond records a
// second (0: as fast as acknowledgements come), its client built with the
// extra options too. Record i's value is prefix-i: a unique id that also
// gives the producer's order.
func startPacedProducer(t *testing.T, ctx context.Context, c *brokertest.Cluster, topic string, partitions int, prefix string, perSecond int, extra ...kgo.Opt) *producer {
	t.Helper()
	cl := newClusterClient(t, c, append([]kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner())}, extra...)...)
	pctx, cancel := context.WithCancel(ctx)
	pr := &producer{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(pr.done)
		defer cl.Close()
		sem := make(chan struct{}, 2000) // records in flight
		start := time.Now()
	loop:
		for i := 0; !pr.stop.Load(); i++ {
			if perSecond > 0 {
				// Pacing the load, not synchronizing: record i is due
				// i/perSecond after the start.
				due := start.Add(time.Duration(i) * time.Second / time.Duration(perSecond))
				if wait := time.Until(due); wait > 0 {
					select {
					case <-time.After(wait):
					case <-pctx.Done():
						break loop
					}
				}
			}
			select {
			case sem <- struct{}{}:
			case <-pctx.Done():
				break loop
			}
			r := &kgo.Record{Partition: int32(i % partitions), Value: fmt.Appendf(nil, "%s-%08d", prefix, i)}
			cl.Produce(pctx, r, func(r *kgo.Record, err error) {
				<-sem
				pr.mu.Lock()
				defer pr.mu.Unlock()
				if err != nil {
					if pr.failed++; pr.failed == 1 {
						pr.firstErr = err
					}
					return
				}
				pr.acks = append(pr.acks, acked{r.Partition, r.Offset, string(r.Value)})
				pr.n.Add(1)
			})
		}
		_ = cl.Flush(pctx)
	}()
	return pr
}

func (pr *producer) acked() int64 { return pr.n.Load() }

func (pr *producer) check(t *testing.T) {
	t.Helper()
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.failed > 0 {
		t.Fatalf("%d produces failed, first: %v", pr.failed, pr.firstErr)
	}
}

// waitAcks waits until at least n records have been acknowledged.
func (pr *producer) waitAcks(t *testing.T, ctx context.Context, n int64) {
	t.Helper()
	for pr.acked() < n {
		pr.check(t)
		select {
		case <-ctx.Done():
			t.Fatalf("%d of %d records acknowledged before the deadline", pr.acked(), n)
		case <-pr.done:
			t.Fatalf("producer stopped at %d acks", pr.acked())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// finish stops producing, waits for every record in flight and returns
// the acknowledgements; any failed record fails the test.
func (pr *producer) finish(t *testing.T) []acked {
	t.Helper()
	pr.stop.Store(true)
	<-pr.done
	pr.check(t)
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return slices.Clone(pr.acks)
}

// abort stops the producer at once; a no-op after finish.
func (pr *producer) abort() {
	pr.stop.Store(true)
	pr.cancel()
	<-pr.done
}

// produceSync writes n records round-robin and returns their acks.
func produceSync(t *testing.T, ctx context.Context, c *brokertest.Cluster, topic string, partitions int, prefix string, n int) []acked {
	t.Helper()
	cl := newClusterClient(t, c, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer cl.Close()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Partition: int32(i % partitions), Value: fmt.Appendf(nil, "%s-%08d", prefix, i)}
	}
	res := cl.ProduceSync(ctx, recs...)
	if err := res.FirstErr(); err != nil {
		t.Fatalf("produce %s: %v", prefix, err)
	}
	out := make([]acked, 0, n)
	for _, r := range res {
		out = append(out, acked{r.Record.Partition, r.Record.Offset, string(r.Record.Value)})
	}
	return out
}

// produceValues produces n records (in the client's open transaction)
// and returns their values.
func produceValues(t *testing.T, ctx context.Context, cl *kgo.Client, prefix string, n, partitions int) []string {
	t.Helper()
	var recs []*kgo.Record
	var vals []string
	for i := range n {
		v := fmt.Sprintf("%s-%06d", prefix, i)
		vals = append(vals, v)
		recs = append(recs, &kgo.Record{Partition: int32(i % partitions), Value: []byte(v)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce %s: %v", prefix, err)
	}
	return vals
}

// txnRound runs one transaction of n records and commits or aborts it.
func txnRound(t *testing.T, ctx context.Context, cl *kgo.Client, prefix string, n, partitions int, commit bool) []string {
	t.Helper()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatalf("begin %s: %v", prefix, err)
	}
	vals := produceValues(t, ctx, cl, prefix, n, partitions)
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatalf("end %s (commit=%v): %v", prefix, commit, err)
	}
	return vals
}

// fetchErr fails the test on a Kafka error that is not retriable and logs
// (a few of) the others, which a failover brings.
func fetchErr(t *testing.T, logged *int, topic string, p int32, err error) {
	t.Helper()
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return
	}
	if !retriable(err) {
		t.Fatalf("fetch %s/%d: %v", topic, p, err)
	}
	if *logged < 10 {
		*logged++
		t.Logf("fetch %s/%d (retried): %v", topic, p, err)
	}
}

// readLog reads every partition from its start to the end offset its
// leader reports, checking the offsets are contiguous, and returns each
// partition's values by offset. For topics without transactions. extra
// options go to the consuming client (an isolation level, say).
func readLog(t *testing.T, ctx context.Context, c *brokertest.Cluster, topic string, partitions int, extra ...kgo.Opt) []map[int64]string {
	t.Helper()
	return readLogWith(t, ctx, func(opts ...kgo.Opt) *kgo.Client { return newClusterClient(t, c, opts...) }, topic, partitions, extra...)
}

// readLogWith is readLog with the clients newClient makes.
func readLogWith(t *testing.T, ctx context.Context, newClient func(...kgo.Opt) *kgo.Client, topic string, partitions int, extra ...kgo.Opt) []map[int64]string {
	t.Helper()
	admCl := newClient()
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	var ends kadm.ListedOffsets
	for {
		lo, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = lo.Error()
		}
		if err == nil {
			ends = lo
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("list end offsets of %s: %v", topic, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// From the log start: DeleteRecords or retention may have moved it.
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		t.Fatalf("list start offsets of %s: %v", topic, err)
	}
	start := map[int32]kgo.Offset{}
	out := make([]map[int64]string, partitions)
	next := make([]int64, partitions)
	end := make([]int64, partitions)
	for p := range partitions {
		start[int32(p)] = kgo.NewOffset().AtStart()
		out[p] = map[int64]string{}
		o, ok := ends.Lookup(topic, int32(p))
		if !ok {
			t.Fatalf("no end offset for %s/%d", topic, p)
		}
		end[p] = o.Offset
		if s, ok := starts.Lookup(topic, int32(p)); ok {
			next[p] = s.Offset
		}
	}
	cl := newClient(append([]kgo.Opt{kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: start})}, extra...)...)
	defer cl.Close()
	done := func() bool {
		for p := range partitions {
			if next[p] < end[p] {
				return false
			}
		}
		return true
	}
	logged := 0
	for !done() {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			t.Fatalf("read %s to %v: at %v before the deadline", topic, end, next)
		}
		fs.EachError(func(tp string, p int32, err error) { fetchErr(t, &logged, tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != next[r.Partition] {
				t.Fatalf("%s/%d: offset %d, want %d", topic, r.Partition, r.Offset, next[r.Partition])
			}
			out[r.Partition][r.Offset] = string(r.Value)
			next[r.Partition]++
		})
	}
	return out
}

// verifyAcked checks every acknowledged record is in the log at its
// offset, no value is there twice, and nothing else is.
func verifyAcked(t *testing.T, phase string, log []map[int64]string, acks []acked) {
	t.Helper()
	seen := map[string]int{}
	total := 0
	for _, m := range log {
		for _, v := range m {
			if seen[v]++; seen[v] == 2 {
				t.Errorf("%s: %q in the log twice", phase, v)
			}
			total++
		}
	}
	bad := 0
	for _, a := range acks {
		if int(a.partition) >= len(log) {
			t.Fatalf("%s: acknowledged partition %d of %d", phase, a.partition, len(log))
		}
		if got, ok := log[a.partition][a.offset]; !ok || got != a.value {
			if bad++; bad <= 5 {
				t.Errorf("%s: %q acknowledged at %d/%d, the log has %q there (present: %v)", phase, a.value, a.partition, a.offset, got, ok)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%s: %d of %d acknowledged records not at their offsets", phase, bad, len(acks))
	}
	if t.Failed() {
		t.FailNow()
	}
	if total != len(acks) {
		t.Fatalf("%s: %d records in the log, %d acknowledged", phase, total, len(acks))
	}
	t.Logf("%s: all %d acknowledged records at their offsets, once each", phase, len(acks))
}

// readValues reads the topic from the start with the isolation level
// until want records came and no more arrive for a second, and counts
// each value.
func readValues(t *testing.T, ctx context.Context, c *brokertest.Cluster, topic string, partitions int, committed bool, want int) map[string]int {
	t.Helper()
	start := map[int32]kgo.Offset{}
	for p := range partitions {
		start[int32(p)] = kgo.NewOffset().AtStart()
	}
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl := newClusterClient(t, c, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: start}), kgo.FetchIsolationLevel(iso))
	defer cl.Close()
	got := map[string]int{}
	n, logged := 0, 0
	var settle time.Time
	for {
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records (committed=%v) before the deadline", n, want, committed)
		}
		fs.EachError(func(tp string, p int32, err error) { fetchErr(t, &logged, tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			got[string(r.Value)]++
			n++
		})
		if n >= want {
			if settle.IsZero() {
				settle = time.Now().Add(time.Second)
			} else if time.Now().After(settle) {
				return got
			}
		}
	}
}

// groupCursor follows what a group member is given, per partition. With
// rewinds allowed, a partition may go back to exactly its committed
// offset (a rebalance after a failover); otherwise every record must be
// the next one.
type groupCursor struct {
	topic       string
	next        map[int32]int64
	committed   map[int32]int64
	rewinds     bool
	delivered   int
	redelivered int
	logged      int
}

func newGroupCursor(topic string, from map[int32]int64, rewinds bool) *groupCursor {
	g := &groupCursor{topic: topic, next: map[int32]int64{}, committed: map[int32]int64{}, rewinds: rewinds}
	for p, o := range from {
		g.next[p], g.committed[p] = o, o
	}
	return g
}

func (g *groupCursor) poll(t *testing.T, ctx context.Context, cl *kgo.Client, until func() bool) {
	t.Helper()
	for !until() {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollRecords(pctx, 200)
		cancel()
		if ctx.Err() != nil {
			t.Fatalf("group member at %v (committed %v) before the deadline", g.next, g.committed)
		}
		fs.EachError(func(tp string, p int32, err error) { fetchErr(t, &g.logged, tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			p := r.Partition
			switch {
			case r.Offset == g.next[p]:
			case g.rewinds && r.Offset == g.committed[p] && r.Offset < g.next[p]:
				t.Logf("%s/%d: back at committed offset %d from %d", g.topic, p, r.Offset, g.next[p])
				g.redelivered += int(g.next[p] - r.Offset)
			case r.Offset < g.committed[p]:
				t.Fatalf("%s/%d: offset %d redelivered, before the committed %d", g.topic, p, r.Offset, g.committed[p])
			default:
				t.Fatalf("%s/%d: offset %d, want %d (committed %d)", g.topic, p, r.Offset, g.next[p], g.committed[p])
			}
			g.next[p] = r.Offset + 1
			g.delivered++
		})
	}
}

// allAt reports whether every partition has been read up to end.
func (g *groupCursor) allAt(partitions int, end int64) bool {
	for p := range int32(partitions) {
		if g.next[p] < end {
			return false
		}
	}
	return true
}

// clientConsumedTo: the client's own position on every partition (what it
// has consumed, else what it has committed) is end.
func clientConsumedTo(cl *kgo.Client, topic string, partitions int, end int64) bool {
	consumed, committed := cl.UncommittedOffsets()[topic], cl.CommittedOffsets()[topic]
	for p := range int32(partitions) {
		if max(consumed[p].Offset, committed[p].Offset) != end {
			return false
		}
	}
	return true
}

// commit commits what the member has consumed and checks the client
// committed exactly the cursor's positions.
func (g *groupCursor) commit(t *testing.T, ctx context.Context, cl *kgo.Client) {
	t.Helper()
	// Right after a failover the client may still dial the dead
	// coordinator until its metadata refreshes (as with any Kafka
	// cluster); an application retries a retriable commit error.
	for attempt := 1; ; attempt++ {
		err := cl.CommitUncommittedOffsets(ctx)
		if err == nil {
			break
		}
		if !retriable(err) || attempt == 20 || ctx.Err() != nil {
			t.Fatalf("commit (attempt %d): %v", attempt, err)
		}
		t.Logf("commit attempt %d: %v; retrying", attempt, err)
		cl.ForceMetadataRefresh()
		time.Sleep(250 * time.Millisecond)
	}
	for p, o := range cl.CommittedOffsets()[g.topic] {
		if o.Offset != g.next[p] {
			t.Fatalf("%s/%d: committed %d, consumed up to %d", g.topic, p, o.Offset, g.next[p])
		}
		g.committed[p] = o.Offset
	}
}

// checkCommitted fetches the group's offsets (retrying errors, as a new
// coordinator may still be loading) and checks they are want.
func checkCommitted(t *testing.T, ctx context.Context, adm *kadm.Client, group, topic string, partitions int, want map[int32]int64) {
	t.Helper()
	var got kadm.OffsetResponses
	for {
		r, err := adm.FetchOffsets(ctx, group)
		if err == nil {
			err = r.Error()
		}
		if err == nil {
			got = r
			break
		}
		if ctx.Err() != nil || !retriable(err) {
			t.Fatalf("fetch offsets of %s: %v", group, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for p := range int32(partitions) {
		o, found := got.Lookup(topic, p)
		w, ok := want[p]
		switch {
		case !ok && found && o.At >= 0:
			t.Fatalf("%s/%d: offset %d committed, none expected", topic, p, o.At)
		case ok && (!found || o.At != w):
			t.Fatalf("%s/%d: committed %+v, want %d", topic, p, o, w)
		}
	}
}

// followerRefuses sends partition and group requests straight to follower
// id: a produce and a ListOffsets must be NOT_LEADER_OR_FOLLOWER and an
// OffsetFetch NOT_COORDINATOR, which send clients to the leader.
func followerRefuses(t *testing.T, ctx context.Context, c *brokertest.Cluster, id int32, topic, group string) {
	t.Helper()
	cl := newClusterClient(t, c)
	defer cl.Close()
	md, err := kadm.NewClient(cl).Metadata(ctx, topic)
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	b := cl.Broker(int(id))
	// The follower answers for the topic only once it applied its
	// creation (before, a produce by topic id is UNKNOWN_TOPIC_ID there,
	// as on a Kafka broker whose metadata lags); the admin client's
	// metadata may have come from another node.
	testwait.For(t, fmt.Sprintf("node %d to know topic %s", id, topic), time.Minute, func() bool {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, b)
		return err == nil && len(resp.Topics) == 1 && resp.Topics[0].ErrorCode == 0
	})

	prod := kmsg.NewPtrProduceRequest()
	prod.Acks, prod.TimeoutMillis = -1, 10000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic, pt.TopicID = topic, md.Topics[topic].ID // produce v13+ names topics by id
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Partition, pp.Records = 0, plainBatch([]string{"to-a-follower"})
	pt.Partitions = append(pt.Partitions, pp)
	prod.Topics = append(prod.Topics, pt)
	presp, err := prod.RequestWith(ctx, b)
	if err != nil {
		t.Fatalf("produce to follower %d: %v", id, err)
	}
	if err := kerr.ErrorForCode(presp.Topics[0].Partitions[0].ErrorCode); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("produce to follower %d: %v, want NOT_LEADER_OR_FOLLOWER", id, err)
	}

	lo := kmsg.NewPtrListOffsetsRequest()
	lo.ReplicaID = -1
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = topic
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Partition, lp.Timestamp = 0, -1
	lt.Partitions = append(lt.Partitions, lp)
	lo.Topics = append(lo.Topics, lt)
	lresp, err := lo.RequestWith(ctx, b)
	if err != nil {
		t.Fatalf("ListOffsets to follower %d: %v", id, err)
	}
	if err := kerr.ErrorForCode(lresp.Topics[0].Partitions[0].ErrorCode); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("ListOffsets to follower %d: %v, want NOT_LEADER_OR_FOLLOWER", id, err)
	}

	of := kmsg.NewPtrOffsetFetchRequest()
	of.Group = group // up to v7
	og := kmsg.NewOffsetFetchRequestGroup()
	og.Group = group // v8+
	of.Groups = append(of.Groups, og)
	oresp, err := of.RequestWith(ctx, b)
	if err != nil {
		t.Fatalf("OffsetFetch to follower %d: %v", id, err)
	}
	code := oresp.ErrorCode
	if len(oresp.Groups) > 0 {
		code = oresp.Groups[0].ErrorCode
	}
	if err := kerr.ErrorForCode(code); !errors.Is(err, kerr.NotCoordinator) {
		t.Fatalf("OffsetFetch to follower %d: %v, want NOT_COORDINATOR", id, err)
	}
}

// plainBatch encodes an uncompressed, non-idempotent record batch
// (magic 2).
func plainBatch(vals []string) []byte {
	now := time.Now().UnixMilli()
	var recs []byte
	for i, v := range vals {
		r := kmsg.Record{OffsetDelta: int32(i), Value: []byte(v)}
		body := r.AppendTo(nil)[1:] // Length 0 is one varint byte
		recs = kbin.AppendVarint(recs, int32(len(body)))
		recs = append(recs, body...)
	}
	b := kmsg.RecordBatch{
		Magic: 2, LastOffsetDelta: int32(len(vals) - 1), FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(len(vals)), Records: recs,
	}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}
