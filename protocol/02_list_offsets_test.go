package protocol

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/storage/recordbatch"
)

// listOffset asks ListOffsets (version v, isolation level iso) for one
// timestamp of partition 0 of "t".
func listOffset(t *testing.T, s *Server, v int16, iso int8, ts int64) kmsg.ListOffsetsResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version, req.ReplicaID, req.IsolationLevel = v, -1, iso
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch, rp.MaxNumOffsets = 0, ts, -1, 1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := call[*kmsg.ListOffsetsResponse](t, s, req)
	op := resp.Topics[0].Partitions[0]
	code(t, "list offsets", op.ErrorCode, nil)
	return op
}

// TestListOffsetsBoundedByFetchable: lookups by timestamp and by max
// timestamp (-3) answer only records the client may fetch, as Kafka's
// Partition.fetchOffsetForTimestamp: under read_committed none at or past
// the last stable offset (an open transaction), offset and timestamp -1
// instead. kafkajs's admin.fetchTopicOffsetsByTimestamp found this: it got
// an offset inside a transaction still open.
func TestListOffsetsBoundedByFetchable(t *testing.T) {
	s := txnServer(t)
	// Offset 0: a plain record at 1000.
	plain, err := recordbatch.Build(recordbatch.Header{FirstTimestamp: 1000, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, []recordbatch.Record{{Value: []byte("p")}})
	if err != nil {
		t.Fatal(err)
	}
	code(t, "plain produce", txnProduce(t, s, 9, nil, 0, plain).ErrorCode, nil)

	// Offsets 1 and 2: an open transaction's records at 2000 and 3000.
	id := "lo"
	pid, epoch := initTxn(t, s, id)
	for i, ts := range []int64{2000, 3000} {
		b, err := recordbatch.Build(recordbatch.Header{Attributes: recordbatch.AttrTransactional, FirstTimestamp: ts, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: int32(i)},
			[]recordbatch.Record{{Value: []byte("x")}})
		if err != nil {
			t.Fatal(err)
		}
		got := txnProduce(t, s, 12, &id, 0, b)
		code(t, "transactional produce", got.ErrorCode, nil)
	}

	type want struct{ offset, timestamp int64 }
	check := func(when string, iso int8, ts int64, w want) {
		t.Helper()
		for _, v := range []int16{1, 3, 7, 11} {
			if v < 2 && iso == 1 {
				continue // no isolation level before v2
			}
			if v < 7 && ts == -3 {
				continue // max timestamp is v7+
			}
			op := listOffset(t, s, v, iso, ts)
			if op.Offset != w.offset || (ts != -1 && op.Timestamp != w.timestamp) {
				t.Errorf("%s: v%d isolation %d timestamp %d: offset %d timestamp %d, want %d %d",
					when, v, iso, ts, op.Offset, op.Timestamp, w.offset, w.timestamp)
			}
		}
	}
	const readUncommitted, readCommitted = 0, 1
	check("open", readCommitted, -1, want{1, -1})
	check("open", readCommitted, 500, want{0, 1000})
	check("open", readCommitted, 1500, want{-1, -1})
	check("open", readCommitted, -3, want{-1, -1})
	check("open", readUncommitted, -1, want{3, -1})
	check("open", readUncommitted, 1500, want{1, 2000})
	check("open", readUncommitted, 2500, want{2, 3000})
	check("open", readUncommitted, -3, want{2, 3000})
	check("open", readUncommitted, 3500, want{-1, -1})

	end := kmsg.NewPtrEndTxnRequest()
	end.Version = 4
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = id, pid, epoch, true
	code(t, "end txn", call[*kmsg.EndTxnResponse](t, s, end).ErrorCode, nil)
	check("committed", readCommitted, -1, want{4, -1})
	check("committed", readCommitted, 1500, want{1, 2000})
	check("committed", readCommitted, 2500, want{2, 3000})
}
