package interop_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
)

// TestCompactionCheckInterval: with the retention pass an hour away, a
// compacted topic past its max.compaction.lag.ms is still compacted, by the
// compaction check that runs on its own, shorter cadence (Kafka's cleaner
// backs off log.cleaner.backoff.ms, 15 s, between passes; librdkafka's
// compaction test allows 20 s).
func TestCompactionCheckInterval(t *testing.T) {
	const topic = "compaction-check"
	b := brokertest.Start(t, "--retention-check-interval", "1h", "--compaction-check-interval", "200ms")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := newAdmin(t, b.Addr)
	cfg := map[string]*string{}
	for k, v := range map[string]string{"cleanup.policy": "compact", "segment.bytes": "1048576",
		"min.cleanable.dirty.ratio": "0.01", "max.compaction.lag.ms": "100"} {
		cfg[k] = &v
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, cfg, topic); err != nil {
		t.Fatal(err)
	}
	// 24 records on 4 keys, 100 KiB each: past one 1 MiB segment, so the
	// first segment is sealed and the cleaner may rewrite it.
	pr := newClient(t, kgo.SeedBrokers(b.Addr), kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()))
	pad := strings.Repeat("x", 100<<10)
	const produced = 24
	var recs []*kgo.Record
	for i := range produced {
		recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%4), Value: fmt.Appendf(nil, "v%d-%s", i, pad)})
	}
	if err := pr.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var kept int
	testwait.For(t, "the sealed segment compacted", 30*time.Second, func() bool {
		kept = recordsThrough(t, ctx, b.Addr, topic, produced-1)
		return kept < produced
	})
	t.Logf("compacted with the retention pass an hour away: %d of %d records kept", kept, produced)
}

// recordsThrough reads partition 0 of topic from its start until the record
// at offset last (the newest, which compaction always keeps) and returns
// how many records it read.
func recordsThrough(t *testing.T, ctx context.Context, addr, topic string, last int64) int {
	t.Helper()
	cl := newClient(t, kgo.SeedBrokers(addr), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	defer cl.Close()
	n := 0
	for done := false; !done; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d records, not up to offset %d, before the deadline", n, last)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			n++
			done = done || r.Offset >= last
		})
	}
	return n
}
