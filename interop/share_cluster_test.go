package interop_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
)

// kgoShareMember consumes topic in a share group with franz-go's share
// consumer until stop closes, accepting every record and recording each
// delivery in l; a poll's deliveries are confirmed when FlushAcks returns
// and every acknowledgement result since the flush began was ok.
func kgoShareMember(ctx context.Context, seeds []string, group, topic, name string, l *shareLedger, stop <-chan struct{}) error {
	var mu sync.Mutex // guards ackErrs: the ack callback's goroutine writes, the loop reads
	var ackErrs []error
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ClientID(name), kgo.ShareGroup(group), kgo.ConsumeTopics(topic),
		kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
			mu.Lock()
			defer mu.Unlock()
			for _, r := range rs {
				if r.Err != nil {
					ackErrs = append(ackErrs, fmt.Errorf("%s[%d]: %w", r.Topic, r.Partition, r.Err))
				}
			}
		}))
	if err != nil {
		return err
	}
	defer cl.Close()
	for {
		select {
		case <-stop:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		var ds []*shareDelivery
		fs.EachRecord(func(r *kgo.Record) {
			r.Ack(kgo.AckAccept)
			ds = append(ds, l.deliver(name, r.Partition, r.Offset, int16(r.DeliveryCount()), "ACCEPT", string(r.Key)))
		})
		if len(ds) == 0 {
			continue
		}
		mu.Lock()
		ackErrs = ackErrs[:0]
		mu.Unlock()
		fctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err := cl.FlushAcks(fctx)
		cancel()
		mu.Lock()
		ok := err == nil && len(ackErrs) == 0
		mu.Unlock()
		if ok {
			l.confirm(ds, 1)
		} else {
			l.confirm(ds, -1)
		}
	}
}

// TestClusterShareGroupLeaderKill: two franz-go share consumers drain a
// 2-partition topic replicated to a 3-node cluster while the raft leader
// is killed with SIGKILL and more records are produced to its successor.
// Every record is delivered (none lost); no record is delivered again
// after the broker confirmed its ACCEPT, before or after the failover (the
// share-partition state is replicated); and the start offsets of both
// partitions end at the end of the log on the new leader.
func TestClusterShareGroupLeaderKill(t *testing.T) {
	if testing.Short() {
		t.Skip("3-node cluster: not in -short")
	}
	c := brokertest.StartCluster(t, 3, "--broker-config", shareBrokerConfig)
	c.WaitLeader(t, time.Minute)
	requireShareGroups(t, c.Seeds()[0])
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const topic, group, n = "share-cluster", "share-cluster-group", 3000
	const limit = 10 // redeliveries from the failover must not archive a record
	cl := newClient(t, kgo.SeedBrokers(c.Seeds()...), kgo.DefaultProduceTopic(topic))
	adm := kadm.NewClient(cl)
	testwait.For(t, "topic created", time.Minute, func() bool {
		r, err := adm.CreateTopic(ctx, 2, 3, nil, topic)
		return err == nil && r.Err == nil
	})
	c.WaitTopic(t, topic, 2, 3, time.Minute)
	setShareGroupConfigs(t, ctx, cl, group, map[string]string{
		"share.auto.offset.reset":       "earliest",
		"share.delivery.count.limit":    fmt.Sprint(limit),
		"share.record.lock.duration.ms": "5000",
		"share.session.timeout.ms":      "6000",
		"share.heartbeat.interval.ms":   "1000",
	})
	produce := func(cl *kgo.Client, from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			cl.Produce(ctx, &kgo.Record{Key: []byte(fmt.Sprintf("plain-%d", i)), Value: []byte("v")}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce: %v", err)
				}
			})
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// A third of the records before the members start, the rest streamed
	// through the kill (the stream waits for it at two thirds).
	produce(cl, 0, n/3)
	killed := make(chan struct{})
	streamed := make(chan struct{})
	var produceErr atomic.Value // the stream's first error; read once it has ended
	go func() {
		defer close(streamed)
		for i := n / 3; i < n; i += 50 {
			if i == 2*n/3 {
				select {
				case <-killed:
				case <-ctx.Done():
					return
				}
			}
			for j := i; j < i+50; j++ {
				cl.Produce(ctx, &kgo.Record{Key: []byte(fmt.Sprintf("plain-%d", j)), Value: []byte("v")}, func(_ *kgo.Record, err error) {
					if err != nil {
						produceErr.CompareAndSwap(nil, err)
					}
				})
			}
			if err := cl.Flush(ctx); err != nil {
				produceErr.CompareAndSwap(nil, err)
				return
			}
			time.Sleep(20 * time.Millisecond) // pacing the load, not synchronization
		}
	}()
	defer func() { cancel(); <-streamed }()

	l := newShareLedger()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	memberErrs := make(chan error, 2)
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func(name string) {
			defer wg.Done()
			if err := kgoShareMember(ctx, c.Seeds(), group, topic, name, l, stop); err != nil {
				memberErrs <- fmt.Errorf("%s: %w", name, err)
			}
		}(fmt.Sprintf("kgo-share-%d", i))
	}
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()

	// The kill comes once a third of the records have confirmed ACCEPTs,
	// which must hold on the next leader.
	testwait.For(t, "a third of the records accepted", 2*time.Minute, func() bool { return l.confirmedRecords() >= n/3 })
	leader := c.LeaderID(t)
	l.markKilled()
	confirmedBefore := l.confirmedRecords()
	c.Kill(leader)
	t.Logf("killed the leader, node %d, after %d records were delivered, %d of them accepted", leader, l.distinct(), confirmedBefore)
	close(killed)
	newLeader := c.WaitLeader(t, time.Minute)
	t.Logf("node %d leads", newLeader)
	select {
	case <-streamed:
	case <-ctx.Done():
		t.Fatal("the stream did not end")
	}
	if err, _ := produceErr.Load().(error); err != nil {
		t.Fatalf("produce: %v", err)
	}

	// Settled: every record delivered and the start offsets at the end of
	// both partitions (everything acknowledged, nothing in flight).
	acl := newClient(t, kgo.SeedBrokers(c.LiveSeeds()...))
	ends, err := kadm.NewClient(acl).ListEndOffsets(ctx, topic)
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
	if !testwait.Until(3*time.Minute, func() bool {
		if l.distinct() < n {
			return false
		}
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		lastSPSO, lastErr = shareStartOffsets(sctx, acl, group, topic, []int32{0, 1})
		return lastErr == nil && shareSettled(lastSPSO, hwm)
	}) {
		t.Fatalf("not settled: %d of %d records delivered; start offsets and lags %v (err %v), end offsets %v", l.distinct(), n, lastSPSO, lastErr, hwm)
	}
	close(stop)
	wg.Wait()
	close(memberErrs)
	for err := range memberErrs {
		t.Errorf("member: %v", err)
	}

	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("plain-%d", i)
	}
	problems, gaps, redelivered := l.shareVerdict(keys, limit, true)
	t.Logf("%d records, %d redelivered at least once, %d deliveries after the kill, %d acquisitions never seen by a member (responses lost with the leader)",
		n, redelivered, l.countAfterKill(), gaps)
	if len(problems) > 0 {
		t.Errorf("%d problems:\n%s", len(problems), strings.Join(problems[:min(len(problems), 40)], "\n"))
	}
}
