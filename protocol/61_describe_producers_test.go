package protocol

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDescribeProducers: a partition's open transaction with its start
// offset (coordinator epoch -1: no marker yet), ended by a marker whose
// coordinator epoch is then reported; the internal topics' partitions answer with
// no producers and no error (find-hanging --broker-id describes them and
// would retry an error until it timed out); unknown partitions are
// UNKNOWN_TOPIC_OR_PARTITION.
func TestDescribeProducers(t *testing.T) {
	s := groupServer(t)
	first := produceTxn(t, s, 2, 42, 1, 0, 2)
	describe := func() *kmsg.DescribeProducersResponse {
		req := kmsg.NewPtrDescribeProducersRequest()
		for _, q := range []struct {
			topic string
			parts []int32
		}{{"t", []int32{2, 7}}, {offsetsTopic, []int32{0, 49, 50}}, {txnStateTopic, []int32{3}}, {"nope", []int32{0}}} {
			rt := kmsg.NewDescribeProducersRequestTopic()
			rt.Topic, rt.Partitions = q.topic, q.parts
			req.Topics = append(req.Topics, rt)
		}
		return call[*kmsg.DescribeProducersResponse](t, s, req)
	}
	check := func(txnStart int64, coordEpoch int32) {
		t.Helper()
		resp := describe()
		want := [][]*kerr.Error{{nil, kerr.UnknownTopicOrPartition}, {nil, nil, kerr.UnknownTopicOrPartition}, {nil}, {kerr.UnknownTopicOrPartition}}
		for i, rt := range resp.Topics {
			for j, p := range rt.Partitions {
				code(t, rt.Topic, p.ErrorCode, want[i][j])
				if i == 0 && j == 0 {
					if len(p.ActiveProducers) != 1 || p.ActiveProducers[0].ProducerID != 42 || p.ActiveProducers[0].ProducerEpoch != 1 ||
						p.ActiveProducers[0].LastSequence != 1 || p.ActiveProducers[0].CurrentTxnStartOffset != txnStart ||
						p.ActiveProducers[0].CoordinatorEpoch != coordEpoch {
						t.Fatalf("t-2 producers %+v, want producer 42 epoch 1 last sequence 1 open at %d, coordinator epoch %d", p.ActiveProducers, txnStart, coordEpoch)
					}
				} else if len(p.ActiveProducers) != 0 {
					t.Fatalf("%s-%d producers %+v, want none", rt.Topic, p.Partition, p.ActiveProducers)
				}
			}
		}
	}
	// No marker yet: coordinator epoch -1, as Kafka reports it.
	check(first, -1)
	code(t, "abort", writeMarkers(t, s, 2, marker(42, 1, false, 3, "t", 2))[0], nil)
	check(-1, 3)
}
