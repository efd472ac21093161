package interop_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/hostile"
)

// TestGroupFloodIsBounded: a client commits offsets under 3000 group ids
// it makes up, to a broker with --max-groups 500, while a real consumer
// group (kgo) consumes and commits beside it. The coordinator takes new
// groups until it holds 500 and refuses the rest with POLICY_VIOLATION;
// the real group, which exists, goes on: it reads every record and its
// commit is fetched back.
func TestGroupFloodIsBounded(t *testing.T) {
	const (
		budget  = 500
		flood   = 3000
		records = 200
	)
	b := brokertest.Start(t, "--max-groups", fmt.Sprint(budget))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := newAdmin(t, b.Addr)
	topic := "group-flood"
	created, err := adm.CreateTopic(ctx, 1, 1, nil, topic)
	if err != nil {
		t.Fatal(err)
	}
	prod := newClient(t, kgo.SeedBrokers(b.Addr), kgo.DefaultProduceTopic(topic))
	for i := range records {
		prod.Produce(ctx, &kgo.Record{Value: fmt.Appendf(nil, "r%d", i)}, nil)
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// The real group exists before the flood.
	legit := newClient(t, kgo.SeedBrokers(b.Addr), kgo.ConsumerGroup("legit"), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	read := 0
	for read < records/2 {
		fs := legit.PollRecords(ctx, records/2-read)
		if err := ctx.Err(); err != nil {
			t.Fatalf("legit read %d: %v", read, err)
		}
		read += fs.NumRecords()
	}
	if err := legit.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	before, err := hostile.ReadMemStatus(b.PID())
	if err != nil {
		t.Fatal(err)
	}

	fl := newClient(t, kgo.SeedBrokers(b.Addr))
	accepted, refused := 0, 0
	for i := range flood {
		req := inventedGroupCommit(fmt.Sprintf("invented-%05d", i), topic, created.ID)
		resp, err := req.RequestWith(ctx, fl)
		if err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
		switch code := resp.Topics[0].Partitions[0].ErrorCode; code {
		case 0:
			accepted++
		case kerr.PolicyViolation.Code:
			refused++
		default:
			t.Fatalf("commit %d: %v", i, kerr.ErrorForCode(code))
		}
	}
	if accepted != budget-1 || refused != flood-accepted {
		t.Fatalf("%d invented groups accepted and %d refused, want %d and %d (budget %d with the real group)", accepted, refused, budget-1, flood-budget+1, budget)
	}

	// The real group goes on.
	for read < records {
		fs := legit.PollRecords(ctx, records-read)
		if err := ctx.Err(); err != nil {
			t.Fatalf("legit read %d: %v", read, err)
		}
		read += fs.NumRecords()
	}
	if err := legit.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("the real group's commit beside a full budget: %v", err)
	}
	offs, err := adm.FetchOffsets(ctx, "legit")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup(topic, 0); !ok || o.At != records {
		t.Fatalf("the real group's committed offset: %+v %v, want %d", o, ok, records)
	}
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	after, err := hostile.ReadMemStatus(b.PID())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d invented groups: %d accepted, %d refused with POLICY_VIOLATION; %d groups listed (budget %d); broker RSS %d MiB before, %d MiB after",
		flood, accepted, refused, len(listed), budget, before.RSS>>20, after.RSS>>20)
	if len(listed) != budget {
		t.Fatalf("%d groups listed, want %d", len(listed), budget)
	}
}

// inventedGroupCommit is an OffsetCommit outside any generation (a simple
// consumer's: generation -1) of offset 1 on partition 0 of topic under
// group, which creates the group if it is new.
func inventedGroupCommit(group, topic string, topicID [16]byte) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = group, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic, rt.TopicID = topic, topicID // by name before v10, by id after
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, 1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}
