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

// TestShareStateSurvivesRestart: a single broker is killed with SIGKILL
// and restarted on the same data while two franz-go share consumers drain
// a topic. The share-partition state is durable: no record whose ACCEPT
// the broker confirmed before the kill is delivered again, every record is
// delivered, and the share-partitions end with nothing left to deliver.
func TestShareStateSurvivesRestart(t *testing.T) {
	b := brokertest.Start(t, "--broker-config", shareBrokerConfig)
	requireShareGroups(t, b.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const topic, group, n = "share-restart", "share-restart-group", 3000
	const limit = 10
	cl := newClient(t, kgo.SeedBrokers(b.Addr), kgo.DefaultProduceTopic(topic))
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	setShareGroupConfigs(t, ctx, cl, group, map[string]string{
		"share.auto.offset.reset":       "earliest",
		"share.delivery.count.limit":    fmt.Sprint(limit),
		"share.record.lock.duration.ms": "5000",
		"share.session.timeout.ms":      "6000",
		"share.heartbeat.interval.ms":   "1000",
	})
	// A third of the records before the members start, the rest streamed
	// through the restart (the stream waits for it at two thirds).
	var produceErr atomic.Value // the stream's first error; read once it has ended
	produce := func(from, to int) bool {
		for i := from; i < to; i++ {
			cl.Produce(ctx, &kgo.Record{Key: []byte(fmt.Sprintf("plain-%d", i)), Value: []byte("v")}, func(_ *kgo.Record, err error) {
				if err != nil {
					produceErr.CompareAndSwap(nil, err)
				}
			})
		}
		if err := cl.Flush(ctx); err != nil {
			produceErr.CompareAndSwap(nil, err)
			return false
		}
		return true
	}
	produce(0, n/3)
	restarted := make(chan struct{})
	streamed := make(chan struct{})
	go func() {
		defer close(streamed)
		for i := n / 3; i < n; i += 50 {
			if i == 2*n/3 {
				select {
				case <-restarted:
				case <-ctx.Done():
					return
				}
			}
			if !produce(i, i+50) {
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
			if err := kgoShareMember(ctx, []string{b.Addr}, group, topic, name, l, stop); err != nil {
				memberErrs <- fmt.Errorf("%s: %w", name, err)
			}
		}(fmt.Sprintf("kgo-share-%d", i))
	}
	stopped := false
	stopMembers := func() {
		if !stopped {
			stopped = true
			close(stop)
			wg.Wait()
		}
	}
	defer stopMembers()

	testwait.For(t, "a third of the records accepted", 2*time.Minute, func() bool { return l.confirmedRecords() >= n/3 })
	l.markKilled()
	confirmedBefore := l.confirmedRecords()
	b.Kill()
	b.Restart()
	close(restarted)
	t.Logf("broker killed and restarted after %d records were delivered, %d of them accepted", l.distinct(), confirmedBefore)
	select {
	case <-streamed:
	case <-ctx.Done():
		t.Fatal("the stream did not end")
	}
	if err, _ := produceErr.Load().(error); err != nil {
		t.Fatalf("produce: %v", err)
	}
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

	var last map[int32]shareOffset
	var lastErr error
	acl := newClient(t, kgo.SeedBrokers(b.Addr))
	if !testwait.Until(3*time.Minute, func() bool {
		if l.distinct() < n {
			return false
		}
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		last, lastErr = shareStartOffsets(sctx, acl, group, topic, []int32{0, 1})
		return lastErr == nil && shareSettled(last, hwm)
	}) {
		t.Fatalf("not settled: %d of %d records delivered; start offsets and lags %v (err %v), end offsets %v", l.distinct(), n, last, lastErr, hwm)
	}
	stopMembers()
	close(memberErrs)
	for err := range memberErrs {
		t.Errorf("member: %v", err)
	}
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("plain-%d", i)
	}
	problems, gaps, redelivered := l.shareVerdict(keys, limit, false)
	t.Logf("%d records, %d redelivered at least once, %d deliveries after the restart, %d acquisitions never seen by a member",
		n, redelivered, l.countAfterKill(), gaps)
	if len(problems) > 0 {
		t.Errorf("%d problems:\n%s", len(problems), strings.Join(problems[:min(len(problems), 40)], "\n"))
	}
}
