package interop_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/regent-broker/regent/interop/brokertest"
)

// maxFetchRead records the largest Fetch response a client read.
type maxFetchRead struct{ n atomic.Int64 }

func (m *maxFetchRead) OnBrokerRead(_ kgo.BrokerMetadata, key int16, bytesRead int, _, _ time.Duration, err error) {
	if key == 1 && err == nil {
		for {
			cur := m.n.Load()
			if int64(bytesRead) <= cur || m.n.CompareAndSwap(cur, int64(bytesRead)) {
				return
			}
		}
	}
}

// With a small --max-memory, consumers asking for 64 MiB fetches are
// served smaller ones (a connection's share of the response budget, at
// least one batch) and still read every record, in order.
func TestFetchBudgetServesSmallerFetches(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const (
		maxMemory = 64 << 20 // response budget 24 MiB: 6 MiB a connection
		connBound = 6 << 20
		fill      = 24 << 20
		records   = fill / (64 << 10)
		consumers = 3
	)
	b := brokertest.Start(t, "--max-memory", "64MiB")
	const topic = "fetch-budget"
	if _, err := newAdmin(t, b.Addr).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	fillTopic(t, ctx, b.Addr, topic, fill)

	var wg sync.WaitGroup
	reads := make([]*maxFetchRead, consumers)
	for i := range consumers {
		reads[i] = &maxFetchRead{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.ConsumeTopics(topic),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
				kgo.FetchMaxBytes(64<<20), kgo.FetchMaxPartitionBytes(64<<20), kgo.WithHooks(reads[i]))
			if err != nil {
				t.Error(err)
				return
			}
			defer cl.Close()
			next := int64(0)
			for next < records {
				fs := cl.PollFetches(ctx)
				if ctx.Err() != nil {
					t.Errorf("consumer %d: %d of %d records: %v", i, next, records, ctx.Err())
					return
				}
				for _, e := range fs.Errors() {
					t.Errorf("consumer %d: fetch: %v", i, e.Err)
					return
				}
				fs.EachRecord(func(r *kgo.Record) {
					if r.Offset != next {
						t.Errorf("consumer %d: offset %d, want %d", i, r.Offset, next)
					}
					next = r.Offset + 1
				})
			}
		}()
	}
	wg.Wait()
	for i, r := range reads {
		// The connection's bound, plus the batch that may pass it.
		if got := r.n.Load(); got > connBound+(2<<20) {
			t.Errorf("consumer %d read a %d-byte fetch response, bound %d", i, got, connBound)
		} else {
			t.Logf("consumer %d: largest fetch response %d bytes", i, got)
		}
	}
}
