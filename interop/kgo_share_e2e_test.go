package interop_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
)

// TestKgoShareTwoConsumers: 1000 records on a 2-partition topic, two
// franz-go share consumers of one group. Every tenth record is released
// on its first delivery: it must come again (delivery count 2 or more)
// and be accepted then; every record is accepted exactly once, no record
// accepted is delivered again, no acknowledgement fails; afterwards the
// group's start offsets are at the log end.
func TestKgoShareTwoConsumers(t *testing.T) {
	b := brokertest.Start(t, "--broker-config", "group.initial.rebalance.delay.ms=0")
	requireShareGroups(t, b.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topic, group, n = "share-e2e", "share-e2e-group", 1000

	admin, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := kadm.NewClient(admin).CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	setShareGroupConfigs(t, ctx, admin, group, map[string]string{"share.auto.offset.reset": "earliest"})
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i)), Partition: int32(i % 2)})
	}
	if err := admin.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	accepted := map[string]int{}      // key: times accepted
	released := map[string]bool{}     // keys released once
	redelivered := map[string]int32{} // released keys: delivery count when accepted
	var problems []string
	byMember := map[string]int{}
	consume := func(name string) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.ShareGroup(group), kgo.ConsumeTopics(topic),
			kgo.FetchMaxWait(500*time.Millisecond),
			kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
				if err := rs.Error(); err != nil {
					mu.Lock()
					problems = append(problems, fmt.Sprintf("%s: ack failed: %v", name, err))
					mu.Unlock()
				}
			}))
		if err != nil {
			t.Error(err)
			return
		}
		defer cl.Close()
		for ctx.Err() == nil {
			mu.Lock()
			done := len(accepted) == n
			mu.Unlock()
			if done {
				_ = cl.FlushAcks(ctx)
				return
			}
			pctx, pcancel := context.WithTimeout(ctx, time.Second)
			fs := cl.PollFetches(pctx)
			pcancel()
			mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				k := string(r.Key)
				i, _ := strconv.Atoi(k)
				switch {
				case accepted[k] > 0:
					problems = append(problems, fmt.Sprintf("%s: key %s delivered again (count %d) after it was accepted", name, k, r.DeliveryCount()))
					r.Ack(kgo.AckAccept)
				case i%10 == 0 && !released[k]:
					released[k] = true
					r.Ack(kgo.AckRelease)
				default:
					if released[k] {
						redelivered[k] = r.DeliveryCount()
					}
					accepted[k]++
					byMember[name]++
					r.Ack(kgo.AckAccept)
				}
			})
			mu.Unlock()
		}
	}
	start := time.Now()
	var wg sync.WaitGroup
	for _, name := range []string{"a", "b"} {
		wg.Add(1)
		go func() { defer wg.Done(); consume(name) }()
	}
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		t.Error(p)
	}
	if len(accepted) != n {
		t.Fatalf("accepted %d distinct records of %d", len(accepted), n)
	}
	for k, c := range accepted {
		if c != 1 {
			t.Errorf("key %s accepted %d times", k, c)
		}
	}
	if len(released) != n/10 {
		t.Errorf("released %d records, want %d", len(released), n/10)
	}
	for k := range released {
		if redelivered[k] < 2 {
			t.Errorf("released key %s accepted at delivery count %d, want >= 2", k, redelivered[k])
		}
	}
	t.Logf("accepted by member: %v; %d released and redelivered; took %v", byMember, len(released), time.Since(start).Round(time.Millisecond))

	var last string
	if !testwait.Until(30*time.Second, func() bool {
		so, err := shareStartOffsets(ctx, admin, group, topic, []int32{0, 1})
		last = fmt.Sprintf("%+v %v", so, err)
		return err == nil && so[0].Start == n/2 && so[1].Start == n/2
	}) {
		t.Fatalf("start offsets not at the log end (%d): %s", n/2, last)
	}
}
