package interop_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
)

// TestTopicConfigZerosHonoured: retention.ms=0 and retention.bytes=0 set
// through CreateTopics delete what was produced, as Kafka does (they used
// to become the 7-day and unlimited defaults); a topic with the defaults
// keeps its records through the same retention passes.
func TestTopicConfigZerosHonoured(t *testing.T) {
	b := brokertest.Start(t, "--retention-check-interval", "50ms")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	zero := "0"
	topics := map[string]map[string]*string{
		"zero-retention-ms":    {"retention.ms": &zero},
		"zero-retention-bytes": {"retention.bytes": &zero},
		"defaults":             nil,
	}
	for name, cfg := range topics {
		resp, err := adm.CreateTopic(ctx, 1, 1, cfg, name)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	// Stamped in the past, so that retention.ms=0 has them older than now.
	old := time.Now().Add(-time.Minute)
	var recs []*kgo.Record
	for name := range topics {
		for range 5 {
			recs = append(recs, &kgo.Record{Topic: name, Value: []byte("v"), Timestamp: old})
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	startOf := func(topic string) (start, end int64) {
		s, err1 := adm.ListStartOffsets(ctx, topic)
		e, err2 := adm.ListEndOffsets(ctx, topic)
		if err1 != nil || err2 != nil {
			return -1, -1
		}
		so, _ := s.Lookup(topic, 0)
		eo, _ := e.Lookup(topic, 0)
		return so.Offset, eo.Offset
	}
	for _, name := range []string{"zero-retention-ms", "zero-retention-bytes"} {
		testwait.For(t, name+": every record deleted by retention", 20*time.Second, func() bool {
			start, end := startOf(name)
			return end == 5 && start == 5
		})
	}
	// The zero topics emptied, so several retention passes ran since the
	// produce; the default topic is untouched.
	if start, end := startOf("defaults"); start != 0 || end != 5 {
		t.Fatalf("topic with default retention: offsets [%d, %d), want [0, 5)", start, end)
	}
}
