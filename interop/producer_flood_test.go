package interop_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/hostile"
	"github.com/regent-broker/regent/storage/recordbatch"
)

// TestProducerIDFloodIsBounded: a client writes idempotent batches under
// producer ids it makes up, a new one for every batch, 48,000 of them over
// four partitions, to a broker with --max-producer-states 1000, while a
// real idempotent producer (kgo) writes beside it. Every invented batch is
// accepted (Kafka checks no producer id either), yet the partitions end up
// holding about the budget's worth of producers, not 48,000; the real
// producer keeps writing without an error, and each of its records is read
// back exactly once.
func TestProducerIDFloodIsBounded(t *testing.T) {
	const (
		budget     = 1000
		partitions = 4
		requests   = 12_000 // one batch per partition each
		legitRecs  = 3000
	)
	b := brokertest.Start(t, "--max-producer-states", fmt.Sprint(budget))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := newAdmin(t, b.Addr)
	topic := "pid-flood"
	created, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
	if err != nil {
		t.Fatal(err)
	}
	before, err := hostile.ReadMemStatus(b.PID())
	if err != nil {
		t.Fatal(err)
	}

	// The real producer, beside the flood.
	legit := newClient(t, kgo.SeedBrokers(b.Addr), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(time.Millisecond))
	var wg sync.WaitGroup
	legitErrs := make(chan error, legitRecs)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range legitRecs {
			r := &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%16), Value: fmt.Appendf(nil, "legit-%d", i)}
			legit.Produce(ctx, r, func(_ *kgo.Record, err error) {
				if err != nil {
					legitErrs <- err
				}
			})
			if i%100 == 99 {
				if err := legit.Flush(ctx); err != nil {
					legitErrs <- err
					return
				}
			}
		}
	}()

	// The flood: raw produce requests, every batch under a new id.
	flood := newClient(t, kgo.SeedBrokers(b.Addr))
	start := time.Now()
	floodInventedIDs(t, ctx, flood, topic, created.ID, partitions, requests)
	took := time.Since(start)
	wg.Wait()
	if err := legit.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	close(legitErrs)
	for err := range legitErrs {
		t.Errorf("the real producer: %v", err)
	}

	held := 0
	set := kadm.TopicsSet{topic: {}}
	for p := range int32(partitions) {
		set[topic][p] = struct{}{}
	}
	d, err := adm.DescribeProducers(ctx, set)
	if err != nil {
		t.Fatal(err)
	}
	for p, dp := range d[topic].Partitions {
		if dp.Err != nil {
			t.Fatalf("describe producers of partition %d: %v", p, dp.Err)
		}
		held += len(dp.ActiveProducers)
	}
	after, err := hostile.ReadMemStatus(b.PID())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d invented producer ids in %v: partitions hold %d producers (budget %d); broker RSS %d MiB before, %d MiB after",
		requests*partitions, took.Round(time.Millisecond), held, budget, before.RSS>>20, after.RSS>>20)
	// Over the budget only by what arrived while a pass was being decided:
	// a few batches per partition.
	if held > budget+budget/10 {
		t.Errorf("partitions hold %d producers, budget %d", held, budget)
	}

	// Every record of the real producer, once.
	seen := map[string]int{}
	consumer := newClient(t, kgo.SeedBrokers(b.Addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	total := requests*partitions + legitRecs
	for n := 0; n < total; {
		fs := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d records: %v", n, total, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			n++
			if v := string(r.Value); strings.HasPrefix(v, "legit-") {
				seen[v]++
			}
		})
	}
	for i := range legitRecs {
		if c := seen[fmt.Sprintf("legit-%d", i)]; c != 1 {
			t.Errorf("legit-%d read %d times", i, c)
		}
	}
}

// floodInventedIDs sends requests produce requests (acks=all) of one
// idempotent batch per partition, each under a producer id made up for
// it, to cl (the partitions' leader), and fails the test unless every
// batch is taken.
func floodInventedIDs(t *testing.T, ctx context.Context, cl kmsg.Requestor, topic string, id [16]byte, partitions int32, requests int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	now := time.Now().UnixMilli()
	for i := range requests {
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 30_000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic, rt.TopicID = topic, id // by name before v13, by id after
		for p := range partitions {
			pid := rng.Int64N(1<<62) + 1
			batch, err := recordbatch.Build(recordbatch.Header{ProducerID: pid, BaseSequence: rng.Int32N(1000), FirstTimestamp: now, MaxTimestamp: now},
				[]recordbatch.Record{{Value: []byte("invented"), KeyNull: true}})
			if err != nil {
				t.Fatal(err)
			}
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = p, batch
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("flood request %d: %v", i, err)
		}
		for _, p := range resp.Topics[0].Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("flood request %d partition %d: error code %d", i, p.Partition, p.ErrorCode)
			}
		}
	}
}
