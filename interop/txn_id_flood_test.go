package interop_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/hostile"
	"github.com/regent-broker/regent/interop/testwait"
)

// TestTransactionalIDFloodIsBounded: a client sends InitProducerId for
// 24,000 transactional ids it makes up, to a broker with
// --max-transactional-ids 2000, while a real transactional producer (kgo)
// commits transaction after transaction beside it. Every invented id gets
// a producer id (Kafka checks nothing either), yet the coordinator ends up
// holding at most the budget (ListTransactions), not 24,000; the real
// producer, used every few milliseconds, stays recent and is never fenced
// or refused, and a read_committed consumer reads each of its records
// once.
func TestTransactionalIDFloodIsBounded(t *testing.T) {
	const (
		budget  = 2000
		ids     = 24_000
		workers = 4
		perTxn  = 20
	)
	b := brokertest.Start(t, "--max-transactional-ids", fmt.Sprint(budget))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := newAdmin(t, b.Addr)
	topic := "txn-id-flood"
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	before, err := hostile.ReadMemStatus(b.PID())
	if err != nil {
		t.Fatal(err)
	}

	// The real transactional producer, beside the flood, until it ends.
	legit := newClient(t, kgo.SeedBrokers(b.Addr), kgo.DefaultProduceTopic(topic), kgo.TransactionalID("legit-txn"))
	var floodDone atomic.Bool
	var wg sync.WaitGroup
	var committed atomic.Int64
	legitErr := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; !floodDone.Load() || n < 10; n++ {
			if err := legit.BeginTransaction(); err != nil {
				legitErr <- fmt.Errorf("begin %d: %w", n, err)
				return
			}
			for i := range perTxn {
				r := &kgo.Record{Value: fmt.Appendf(nil, "legit-%d-%d", n, i)}
				legit.Produce(ctx, r, nil)
			}
			if err := legit.Flush(ctx); err != nil {
				legitErr <- fmt.Errorf("flush %d: %w", n, err)
				return
			}
			if err := legit.EndTransaction(ctx, kgo.TryCommit); err != nil {
				legitErr <- fmt.Errorf("commit %d: %w", n, err)
				return
			}
			committed.Add(1)
		}
	}()

	// The flood: InitProducerId under ids made up for it.
	flood := newClient(t, kgo.SeedBrokers(b.Addr))
	start := time.Now()
	var next atomic.Int64
	var fwg sync.WaitGroup
	floodErr := make(chan error, workers)
	for range workers {
		fwg.Add(1)
		go func() {
			defer fwg.Done()
			for i := next.Add(1) - 1; i < ids; i = next.Add(1) - 1 {
				req := kmsg.NewPtrInitProducerIDRequest()
				id := fmt.Sprintf("invented-%06d", i)
				req.TransactionalID, req.TransactionTimeoutMillis = &id, 60_000
				resp, err := req.RequestWith(ctx, flood)
				if err == nil && resp.ErrorCode != 0 {
					err = fmt.Errorf("error code %d", resp.ErrorCode)
				}
				if err != nil {
					floodErr <- fmt.Errorf("InitProducerId %s: %w", id, err)
					return
				}
			}
		}()
	}
	fwg.Wait()
	took := time.Since(start)
	floodDone.Store(true)
	wg.Wait()
	close(floodErr)
	for err := range floodErr {
		t.Fatal(err)
	}
	select {
	case err := <-legitErr:
		t.Fatalf("the real transactional producer: %v", err)
	default:
	}

	held := -1
	testwait.For(t, "the coordinator back within its budget", testwait.Default, func() bool {
		l, err := adm.ListTransactions(ctx, nil, nil)
		if err != nil {
			return false
		}
		held = len(l.TransactionalIDs())
		return held <= budget
	})
	after, err := hostile.ReadMemStatus(b.PID())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d invented transactional ids in %v (%.0f/s): the coordinator holds %d (budget %d); the real producer committed %d transactions; broker RSS %d MiB before, %d MiB after",
		ids, took.Round(time.Millisecond), float64(ids)/took.Seconds(), held, budget, committed.Load(), before.RSS>>20, after.RSS>>20)

	// Every committed record of the real producer, once.
	want := int(committed.Load()) * perTxn
	seen := map[string]int{}
	consumer := newClient(t, kgo.SeedBrokers(b.Addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	for n := 0; n < want; {
		fs := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d records: %v", n, want, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			n++
			seen[string(r.Value)]++
		})
	}
	for n := range int(committed.Load()) {
		for i := range perTxn {
			if c := seen[fmt.Sprintf("legit-%d-%d", n, i)]; c != 1 {
				t.Errorf("legit-%d-%d read %d times", n, i, c)
			}
		}
	}
}
