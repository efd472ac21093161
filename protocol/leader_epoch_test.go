package protocol

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestLeaderEpochChecks: Fetch, ListOffsets and OffsetForLeaderEpoch
// check the client's current leader epoch against the cluster's (1 here):
// older is fenced, newer unknown, -1 not checked; answers refused as not
// led here (and fenced fetches) name the leader and its epoch where the
// version carries them. OffsetForLeaderEpoch answers an epoch with no
// write yet, up to the current one, with the log end.
func TestLeaderEpochChecks(t *testing.T) {
	leader, _, _, _ := forwardPair(t)
	if resp := call[*kmsg.CreateTopicsResponse](t, leader, createTopicsReq(5000, "x")); resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create x: %+v", resp.Topics)
	}
	lview := leader.cluster.(*fakeView)

	fetch := func(version int16, current int32) *kmsg.FetchResponse {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.MaxBytes = version, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = "x", leader.topics.Get("x").ID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 1<<20, current
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return call[*kmsg.FetchResponse](t, leader, req)
	}
	for _, tc := range []struct {
		current int32
		code    int16
	}{{-1, 0}, {1, 0}, {0, kerr.FencedLeaderEpoch.Code}, {2, kerr.UnknownLeaderEpoch.Code}} {
		resp := fetch(16, tc.current)
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != tc.code {
			t.Fatalf("fetch at epoch %d: error %d, want %d", tc.current, p.ErrorCode, tc.code)
		}
		pointed := p.CurrentLeader.LeaderID == 1 && p.CurrentLeader.LeaderEpoch == 1 && len(resp.Brokers) == 1 && resp.Brokers[0].Port == 9092
		if pointed != (tc.code == kerr.FencedLeaderEpoch.Code) {
			t.Fatalf("fetch at epoch %d: current leader %+v, brokers %+v", tc.current, p.CurrentLeader, resp.Brokers)
		}
	}

	list := func(current int32) kmsg.ListOffsetsResponseTopicPartition {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version = 9
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "x"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp, rp.CurrentLeaderEpoch = -1, current
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return call[*kmsg.ListOffsetsResponse](t, leader, req).Topics[0].Partitions[0]
	}
	if p := list(0); p.ErrorCode != kerr.FencedLeaderEpoch.Code {
		t.Fatalf("list offsets at epoch 0: error %d, want FENCED_LEADER_EPOCH", p.ErrorCode)
	}
	// The log's own epoch (0: nothing written in a term here) is the
	// offset's.
	if p := list(1); p.ErrorCode != 0 || p.Offset != 0 || p.LeaderEpoch != 0 {
		t.Fatalf("list offsets at epoch 1: %+v", p)
	}

	endFor := func(current, epoch int32) kmsg.OffsetForLeaderEpochResponseTopicPartition {
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.Version, req.ReplicaID = 4, -1
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = "x"
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.CurrentLeaderEpoch, rp.LeaderEpoch = current, epoch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return call[*kmsg.OffsetForLeaderEpochResponse](t, leader, req).Topics[0].Partitions[0]
	}
	for _, tc := range []struct {
		current, epoch, wantEpoch int32
		wantEnd                   int64
		code                      int16
	}{
		{-1, 0, 0, 0, 0},
		{1, 1, 1, 0, 0},    // the current epoch, nothing written in it: the log end
		{-1, 2, -1, -1, 0}, // past the current epoch: unknown to the log
		{0, 0, -1, -1, kerr.FencedLeaderEpoch.Code},
		{2, 0, -1, -1, kerr.UnknownLeaderEpoch.Code},
	} {
		p := endFor(tc.current, tc.epoch)
		if p.ErrorCode != tc.code || p.LeaderEpoch != tc.wantEpoch || p.EndOffset != tc.wantEnd {
			t.Fatalf("offset for epoch %d at current %d: %+v, want (%d, %d) error %d", tc.epoch, tc.current, p, tc.wantEpoch, tc.wantEnd, tc.code)
		}
	}

	// A node that does not serve points produces and fetches at the leader.
	lview.serving.Store(false)
	preq := kmsg.NewPtrProduceRequest()
	preq.Version, preq.Acks, preq.TimeoutMillis = 11, -1, 1000
	prt := kmsg.NewProduceRequestTopic()
	prt.Topic = "x"
	prp := kmsg.NewProduceRequestTopicPartition()
	prp.Records = []byte{}
	prt.Partitions = append(prt.Partitions, prp)
	preq.Topics = append(preq.Topics, prt)
	presp := call[*kmsg.ProduceResponse](t, leader, preq)
	pp := presp.Topics[0].Partitions[0]
	if pp.ErrorCode != kerr.NotLeaderForPartition.Code || pp.CurrentLeader.LeaderID != 1 || pp.CurrentLeader.LeaderEpoch != 1 || len(presp.Brokers) != 1 {
		t.Fatalf("produce to a node that does not serve: %+v, brokers %+v", pp, presp.Brokers)
	}
	preq.Version = 9
	presp = call[*kmsg.ProduceResponse](t, leader, preq)
	if pp := presp.Topics[0].Partitions[0]; pp.CurrentLeader.LeaderID != -1 || len(presp.Brokers) != 0 {
		t.Fatalf("produce v9 named a leader it cannot carry: %+v", presp)
	}
	fresp := fetch(12, -1)
	if p := fresp.Topics[0].Partitions[0]; p.ErrorCode != kerr.NotLeaderForPartition.Code || p.CurrentLeader.LeaderID != 1 || len(fresp.Brokers) != 0 {
		t.Fatalf("fetch v12 from a node that does not serve: %+v, brokers %+v", p, fresp.Brokers)
	}
}
