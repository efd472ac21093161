package interop_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/interop/brokertest"
)

// TestFetchSessions walks KIP-227 by hand: a full fetch opens a session,
// incremental fetches answer only changed partitions, a wrong epoch is
// refused, and a long poll wakes on an append.
func TestFetchSessions(t *testing.T) {
	b := brokertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm := newAdmin(t, b.Addr)
	created, err := adm.CreateTopic(ctx, 2, 1, nil, "sess")
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produce := func(p int32) {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "sess", Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(0)
	produce(1)

	fetch := func(id, epoch int32, parts map[int32]int64, wait int32) *kmsg.FetchResponse {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(12)
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, wait, 1, 1<<20
		req.SessionID, req.SessionEpoch = id, epoch
		if len(parts) > 0 {
			rt := kmsg.NewFetchRequestTopic()
			// kgo sends the newest version both sides serve, which
			// names topics by id (v13+).
			rt.Topic, rt.TopicID = "sess", created.ID
			for p, off := range parts {
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = p, off, 1<<20, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = []kmsg.FetchRequestTopic{rt}
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	count := func(resp *kmsg.FetchResponse) (parts int, withData int) {
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				parts++
				if len(rp.RecordBatches) > 0 {
					withData++
				}
			}
		}
		return
	}

	full := fetch(0, 0, map[int32]int64{0: 0, 1: 0}, 0)
	if full.SessionID == 0 {
		t.Fatal("a full fetch with epoch 0 opened no session")
	}
	if p, d := count(full); p != 2 || d != 2 {
		t.Fatalf("full fetch: %d partitions, %d with data", p, d)
	}
	id := full.SessionID
	// Nothing new: the incremental answer (after its wait) is empty.
	start := time.Now()
	inc := fetch(id, 1, map[int32]int64{0: 1, 1: 1}, 300)
	if p, _ := count(inc); p != 0 || inc.ErrorCode != 0 {
		t.Fatalf("incremental fetch with nothing new: %d partitions, error %d", p, inc.ErrorCode)
	}
	if time.Since(start) < 250*time.Millisecond {
		t.Fatalf("long poll returned after %v, before max.wait.ms", time.Since(start))
	}
	// A long poll wakes on an append, and answers only that partition.
	done := make(chan *kmsg.FetchResponse, 1)
	go func() { done <- fetch(id, 2, nil, 10000) }()
	time.Sleep(100 * time.Millisecond) // let the fetch park; the check below does not depend on it
	produce(1)
	select {
	case resp := <-done:
		if p, d := count(resp); p != 1 || d != 1 || resp.Topics[0].Partitions[0].Partition != 1 {
			t.Fatalf("after append to partition 1: %+v", resp.Topics)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("long poll did not wake on append")
	}
	if resp := fetch(id, 7, nil, 0); resp.ErrorCode != kerr.InvalidFetchSessionEpoch.Code {
		t.Fatalf("wrong epoch: error %d", resp.ErrorCode)
	}
	if resp := fetch(12345, 1, nil, 0); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("unknown session: error %d", resp.ErrorCode)
	}
	// Out of range.
	resp := fetch(0, -1, map[int32]int64{0: 99}, 0)
	if resp.Topics[0].Partitions[0].ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("offset 99: error %d", resp.Topics[0].Partitions[0].ErrorCode)
	}
}
