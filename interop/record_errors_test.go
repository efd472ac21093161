package interop_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/storage/recordbatch"
)

// TestProduceRecordErrors (KIP-467): a batch holding records a topic
// refuses one by one — keyless records on a compacted topic, timestamps
// outside message.timestamp.before/after.max.ms — is refused whole, with
// INVALID_RECORD (INVALID_TIMESTAMP for timestamps), an error_message and
// record_errors naming exactly the bad records; nothing is appended. A kgo
// producer's promises fail with that error for the records of the refused
// batch (a batch fails whole, as in Kafka), while its records on another
// partition are written.
func TestProduceRecordErrors(t *testing.T) {
	b := brokertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := newAdmin(t, b.Addr)
	compact, stamped := "kip467-compact", "kip467-ts"
	hour := "3600000"
	if _, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{"cleanup.policy": ptr("compact")}, compact); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"message.timestamp.before.max.ms": &hour, "message.timestamp.after.max.ms": &hour}, stamped); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, kgo.SeedBrokers(b.Addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	// Raw requests name topics (Produce v13 carries topic ids instead).
	raw := newClient(t, kgo.SeedBrokers(b.Addr), kgo.MaxVersions(kversion.V3_7_0()))

	now := time.Now().UnixMilli()
	keyed := func(k string) recordbatch.Record { return recordbatch.Record{Key: []byte(k), Value: []byte("v")} }
	keyless := recordbatch.Record{KeyNull: true, Value: []byte("v")}
	cases := []struct {
		name    string
		topic   string
		recs    []recordbatch.Record
		deltas  []int64 // timestamp deltas from now
		code    int16
		indexes []int32
	}{
		{"keyless on compacted", compact, []recordbatch.Record{keyed("a"), keyless, keyed("c"), keyless, keyed("e")}, nil,
			kerr.InvalidRecord.Code, []int32{1, 3}},
		{"timestamps out of range", stamped, []recordbatch.Record{keyed("a"), keyed("b"), keyed("c"), keyed("d"), keyed("e")},
			[]int64{0, -2 * 3600_000, 1000, 2 * 3600_000, -1000}, kerr.InvalidTimestamp.Code, []int32{1, 3}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for i := range c.recs {
				c.recs[i].OffsetDelta = int32(i)
				if c.deltas != nil {
					c.recs[i].TimestampDelta = c.deltas[i]
				}
			}
			batch, err := recordbatch.Build(recordbatch.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, FirstTimestamp: now, MaxTimestamp: now + slices.Max(append([]int64{0}, c.deltas...))}, c.recs)
			if err != nil {
				t.Fatal(err)
			}
			req := kmsg.NewPtrProduceRequest()
			req.Acks, req.TimeoutMillis = -1, 10_000
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = c.topic
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Records = batch
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, raw)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Version < 8 {
				t.Fatalf("produce v%d: record_errors need v8+", resp.Version)
			}
			p := resp.Topics[0].Partitions[0]
			var got []int32
			for _, e := range p.ErrorRecords {
				got = append(got, e.RelativeOffset)
				if e.ErrorMessage == nil || *e.ErrorMessage == "" {
					t.Errorf("record %d without a message", e.RelativeOffset)
				}
			}
			if p.ErrorCode != c.code || !slices.Equal(got, c.indexes) || p.ErrorMessage == nil || *p.ErrorMessage == "" {
				t.Fatalf("v%d: error %d message %v record errors %+v; want error %d, records %v", resp.Version, p.ErrorCode, p.ErrorMessage, p.ErrorRecords, c.code, c.indexes)
			}
			t.Logf("v%d: %s; record errors %v", resp.Version, *p.ErrorMessage, got)
			ends, err := adm.ListEndOffsets(ctx, c.topic)
			if err != nil {
				t.Fatal(err)
			}
			if o, _ := ends.Lookup(c.topic, 0); o.Offset != 0 {
				t.Fatalf("end offset %d after a refused batch: something was appended", o.Offset)
			}
		})
	}

	t.Run("kgo", func(t *testing.T) {
		// Partition 0 gets a batch with a keyless record in it; partition
		// 1 only keyed records. Each partition is its own batch.
		var recs []*kgo.Record
		for i := range 6 {
			r := &kgo.Record{Topic: compact, Partition: int32(i % 2), Key: []byte{byte('a' + i)}, Value: []byte("v")}
			if i == 2 {
				r.Key = nil
			}
			recs = append(recs, r)
		}
		results := cl.ProduceSync(ctx, recs...)
		for i, res := range results {
			switch {
			case res.Record.Partition == 0 && !errors.Is(res.Err, kerr.InvalidRecord):
				t.Errorf("record %d on partition 0 (the refused batch): %v, want INVALID_RECORD", i, res.Err)
			case res.Record.Partition == 1 && res.Err != nil:
				t.Errorf("record %d on partition 1: %v", i, res.Err)
			}
		}
		// The producer goes on: a keyed record on partition 0 now.
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: compact, Partition: 0, Key: []byte("k"), Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatalf("keyed record after the refusal: %v", err)
		}
	})
}

func ptr(s string) *string { return &s }
