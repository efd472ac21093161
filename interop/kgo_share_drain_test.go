package interop_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/regent-broker/regent/interop/brokertest"
)

// countShareFetches counts the ShareFetch responses a client reads.
type countShareFetches struct{ n atomic.Int64 }

func (c *countShareFetches) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == 78 && err == nil {
		c.n.Add(1)
	}
}

// TestKgoShareDrain12: one franz-go share consumer drains 60000 records
// (batches of 10) from 12 partitions of one node, each delivered and accepted once. It
// reports records/s and the share-partition state writes per ShareFetch
// (the broker logs its write counts when it stops).
func TestKgoShareDrain12(t *testing.T) {
	b := brokertest.Start(t, "--broker-config", "group.initial.rebalance.delay.ms=0")
	requireShareGroups(t, b.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topic, group, parts, n = "share-drain", "share-drain-group", 12, 60000

	admin, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := kadm.NewClient(admin).CreateTopic(ctx, parts, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	setShareGroupConfigs(t, ctx, admin, group, map[string]string{"share.auto.offset.reset": "earliest"})
	// Batches of 10 records (one produce of 10 per partition at a time),
	// as a steady producer leaves them: a fetch acquires whole batches.
	const perBatch = 10
	for i := 0; i < n; i += parts * perBatch {
		recs := make([]*kgo.Record, 0, parts*perBatch)
		for j := i; j < i+parts*perBatch && j < n; j++ {
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(j)), Partition: int32(j % parts), Value: make([]byte, 100)})
		}
		if err := admin.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	fetches := &countShareFetches{}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.ShareGroup(group), kgo.ConsumeTopics(topic),
		kgo.FetchMaxWait(500*time.Millisecond), kgo.WithHooks(fetches))
	if err != nil {
		t.Fatal(err)
	}
	seen := make([]bool, n)
	got := 0
	start := time.Now() // the consumer joins and opens its session in this time too
	for got < n && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			i, _ := strconv.Atoi(string(r.Key))
			if seen[i] {
				t.Errorf("key %d delivered again", i)
			} else {
				seen[i] = true
				got++
			}
			r.Ack(kgo.AckAccept)
		})
	}
	took := time.Since(start)
	if err := cl.FlushAcks(ctx); err != nil {
		t.Error(err)
	}
	cl.Close()
	if got != n {
		t.Fatalf("drained %d of %d records", got, n)
	}
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`share-partition state writes.*proposals=(\d+) puts=(\d+)`).FindStringSubmatch(b.LogTail(1 << 20))
	writes := "unknown"
	if m == nil {
		t.Logf("broker log tail:\n%s", b.LogTail(3000))
	} else {
		p, _ := strconv.Atoi(m[1])
		u, _ := strconv.Atoi(m[2])
		f := fetches.n.Load()
		writes = fmt.Sprintf("%.2f writes (%.2f share-partition states) per ShareFetch (%d writes, %d ShareFetches)",
			float64(p)/float64(f), float64(u)/float64(f), p, f)
	}
	t.Logf("%d records from %d partitions in %v: %.0f records/s; %s", n, parts, took.Round(time.Millisecond), float64(n)/took.Seconds(), writes)
}
