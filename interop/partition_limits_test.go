package interop_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/interop/brokertest"
)

// TestPartitionLimits: a CreateTopics request adding more than 10,000
// partitions is refused whole with POLICY_VIOLATION (as Kafka's controller
// refuses it), and so is a CreatePartitions one; with --max-partitions
// 200, creations, growth and auto-creation that fit are made and those
// that would pass the bound are refused with POLICY_VIOLATION, leaving
// nothing behind.
func TestPartitionLimits(t *testing.T) {
	b := brokertest.Start(t, "--max-partitions", "200")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := newClient(t, kgo.SeedBrokers(b.Addr))

	create := func(parts map[string]int32) map[string]kmsg.CreateTopicsResponseTopic {
		t.Helper()
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 30_000
		for name, n := range parts {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, n, 1
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]kmsg.CreateTopicsResponseTopic{}
		for _, rt := range resp.Topics {
			out[rt.Topic] = rt
		}
		return out
	}
	msg := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}

	// Over the per-request limit: refused whole, before the node's bound.
	got := create(map[string]int32{"big-a": 6000, "big-b": 6000})
	for _, name := range []string{"big-a", "big-b"} {
		if got[name].ErrorCode != kerr.PolicyViolation.Code || !strings.Contains(msg(got[name].ErrorMessage), "12000 partitions") {
			t.Fatalf("%s in a request of 12,000 partitions: %v %q", name, kerr.ErrorForCode(got[name].ErrorCode), msg(got[name].ErrorMessage))
		}
	}

	// The node's bound.
	if got := create(map[string]int32{"a": 150}); got["a"].ErrorCode != 0 {
		t.Fatalf("a (150): %v %q", kerr.ErrorForCode(got["a"].ErrorCode), msg(got["a"].ErrorMessage))
	}
	got = create(map[string]int32{"b": 60})
	if got["b"].ErrorCode != kerr.PolicyViolation.Code || !strings.Contains(msg(got["b"].ErrorMessage), "--max-partitions") {
		t.Fatalf("b (150 + 60 over 200): %v %q", kerr.ErrorForCode(got["b"].ErrorCode), msg(got["b"].ErrorMessage))
	}
	// Auto-creation (num.partitions 1) fits, once.
	meta := func(topic string) int16 {
		t.Helper()
		req := kmsg.NewPtrMetadataRequest()
		req.AllowAutoTopicCreation = true
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].ErrorCode
	}
	if code := meta("auto-1"); code != 0 {
		t.Fatalf("auto-creating auto-1 (151 of 200): %v", kerr.ErrorForCode(code))
	}
	if got := create(map[string]int32{"c": 49}); got["c"].ErrorCode != 0 {
		t.Fatalf("c (151 + 49 = 200): %v %q", kerr.ErrorForCode(got["c"].ErrorCode), msg(got["c"].ErrorMessage))
	}
	if code := meta("auto-2"); code != kerr.PolicyViolation.Code {
		t.Fatalf("auto-creating auto-2 at the bound: %v", kerr.ErrorForCode(code))
	}
	grow := func(topic string, count int32) (int16, string) {
		t.Helper()
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.TimeoutMillis = 30_000
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = topic, count
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].ErrorCode, msg(resp.Topics[0].ErrorMessage)
	}
	if code, m := grow("a", 151); code != kerr.PolicyViolation.Code {
		t.Fatalf("growing a past the bound: %v %q", kerr.ErrorForCode(code), m)
	}
	if code, m := grow("a", 20000); code != kerr.PolicyViolation.Code || !strings.Contains(m, "at most 10000") {
		t.Fatalf("growing a by 19,850 in one request: %v %q", kerr.ErrorForCode(code), m)
	}

	// Nothing refused was left behind.
	req := kmsg.NewPtrMetadataRequest()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	total, names := 0, []string{}
	for _, mt := range resp.Topics {
		if mt.IsInternal {
			continue // __consumer_offsets and __transaction_state are views, not partitions held
		}
		total += len(mt.Partitions)
		names = append(names, *mt.Topic)
	}
	if total != 200 || len(names) != 3 {
		t.Fatalf("the broker holds %d partitions in %v, want 200 in a, auto-1 and c", total, names)
	}
}
