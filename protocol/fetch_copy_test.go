package protocol

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/storage/recordbatch"
)

// A fetch that may send from files copies a range of at most copyRangeMax
// bytes into its response (one write for a tailing consumer) and leaves a
// larger one to go out from the file.
func TestFetchCopiesSmallRanges(t *testing.T) {
	s := brokerServer(t, nil)
	small := buildBatch(t, 0, []recordbatch.Record{{Value: []byte("tail")}})
	var recs []recordbatch.Record
	for i := range 20 {
		recs = append(recs, recordbatch.Record{OffsetDelta: int32(i), Value: bytes.Repeat([]byte{'x'}, 1024)})
	}
	large := buildBatch(t, 0, recs)
	if len(small) > copyRangeMax || len(large) <= copyRangeMax {
		t.Fatalf("batches of %d and %d bytes do not straddle %d", len(small), len(large), copyRangeMax)
	}
	produce := kmsg.NewPtrProduceRequest()
	produce.Version, produce.Acks, produce.TimeoutMillis = 9, -1, 1000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "t"
	pt.Partitions = []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: small}, {Partition: 1, Records: large}}
	produce.Topics = append(produce.Topics, pt)
	for _, p := range call[*kmsg.ProduceResponse](t, s, produce).Topics[0].Partitions {
		code(t, "produce", p.ErrorCode, nil)
	}

	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxWaitMillis, req.SessionEpoch, req.MaxBytes = 12, 0, -1, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "t"
	for _, p := range []int32{0, 1} {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.PartitionMaxBytes = p, 1<<20
		ft.Partitions = append(ft.Partitions, rp)
	}
	req.Topics = append(req.Topics, ft)
	r := decodeRequest(t, s, req)
	resp, held, files := s.doFetch(r, r.Msg.(*kmsg.FetchRequest), nil, nil, true)
	t.Cleanup(func() {
		for _, ranges := range files {
			releaseRanges(ranges)
		}
		s.releaseFetch(nil, held)
	})
	parts := resp.Topics[0].Partitions
	if len(parts) != 2 {
		t.Fatalf("%d partitions answered", len(parts))
	}
	for _, p := range parts {
		code(t, "fetch", p.ErrorCode, nil)
	}
	// From the magic byte on: the broker set the base offset and the
	// leader epoch.
	if got := parts[0].RecordBatches; len(got) != len(small) || !bytes.Equal(got[16:], small[16:]) {
		t.Fatalf("small batch: %d bytes copied, want the %d produced", len(got), len(small))
	}
	if files != nil && files[0][0] != nil {
		t.Fatal("the small batch was left as a file range")
	}
	if files == nil || files[0][1] == nil || files[0][1].Len() != len(large) {
		t.Fatalf("the large batch is not a file range of %d bytes", len(large))
	}
}
