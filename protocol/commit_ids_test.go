package protocol

import (
	"io"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/group"
	"github.com/regent-broker/regent/actors/topics"
	"github.com/regent-broker/regent/actors/txn"
)

// TestOffsetCommitV10ByTopicID commits by topic id: a known id commits
// under the topic's name (a v9 fetch by name sees it), an unknown or zero
// id gets UNKNOWN_TOPIC_ID, a partition past the end
// UNKNOWN_TOPIC_OR_PARTITION, and the answer names topics by their ids in
// request order.
func TestOffsetCommitV10ByTopicID(t *testing.T) {
	s := groupServer(t)
	id := s.topics.Get("t").ID
	unknown := [16]byte{0xde, 0xad}
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Version = 10
	oc.Group = "by-id"
	part := func(p int32, o int64) kmsg.OffsetCommitRequestTopicPartition {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p, o
		return rp
	}
	oc.Topics = []kmsg.OffsetCommitRequestTopic{
		{TopicID: unknown, Partitions: []kmsg.OffsetCommitRequestTopicPartition{part(0, 1)}},
		{TopicID: id, Partitions: []kmsg.OffsetCommitRequestTopicPartition{part(0, 42), part(2, 7), part(3, 9)}},
		{Partitions: []kmsg.OffsetCommitRequestTopicPartition{part(1, 1)}}, // zero id: a names-only client
	}
	resp := call[*kmsg.OffsetCommitResponse](t, s, oc)
	if len(resp.Topics) != 3 || resp.Topics[0].TopicID != unknown || resp.Topics[1].TopicID != id || resp.Topics[2].TopicID != ([16]byte{}) {
		t.Fatalf("answer's topics %+v", resp.Topics)
	}
	code(t, "unknown id", resp.Topics[0].Partitions[0].ErrorCode, kerr.UnknownTopicID)
	code(t, "t/0", resp.Topics[1].Partitions[0].ErrorCode, nil)
	code(t, "t/2", resp.Topics[1].Partitions[1].ErrorCode, nil)
	code(t, "t/3", resp.Topics[1].Partitions[2].ErrorCode, kerr.UnknownTopicOrPartition)
	code(t, "zero id", resp.Topics[2].Partitions[0].ErrorCode, kerr.UnknownTopicID)

	of := kmsg.NewPtrOffsetFetchRequest()
	of.Version = 7
	of.Group = "by-id"
	of.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0, 1, 2}}}
	fr := call[*kmsg.OffsetFetchResponse](t, s, of)
	got := map[int32]int64{}
	for _, p := range fr.Topics[0].Partitions {
		got[p.Partition] = p.Offset
	}
	if got[0] != 42 || got[1] != -1 || got[2] != 7 {
		t.Fatalf("fetched by name after a commit by id: %v", got)
	}

	// A topic deleted and created again has a new id: the old id no
	// longer commits to it.
	if err := s.topics.Delete("t"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.topics.Create(topics.CreateSpec{Name: "t", Partitions: 3, ReplicationFactor: -1}); err != nil {
		t.Fatal(err)
	}
	oc.Topics = oc.Topics[1:2]
	resp = call[*kmsg.OffsetCommitResponse](t, s, oc)
	code(t, "old id after recreation", resp.Topics[0].Partitions[0].ErrorCode, kerr.UnknownTopicID)
	oc.Topics[0].TopicID = s.topics.Get("t").ID
	resp = call[*kmsg.OffsetCommitResponse](t, s, oc)
	code(t, "new id", resp.Topics[0].Partitions[0].ErrorCode, nil)
}

// txnServer is groupServer with a transaction coordinator whose offsets go
// to the group coordinator, as the broker wires them.
func txnServer(t *testing.T) *Server {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	dir := t.TempDir()
	reg, err := topics.Open(topics.Options{DataDir: dir, Root: sys.Root, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Create(topics.CreateSpec{Name: "t", Partitions: 3, ReplicationFactor: -1}); err != nil {
		t.Fatal(err)
	}
	cfg := group.DefaultConfig()
	cfg.InitialRebalanceDelay = 0
	groups, err := group.NewManager(group.Options{DataDir: dir, Root: sys.Root, Config: &cfg, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	var next atomic.Int64
	txns, err := txn.NewCoordinator(txn.Options{
		DataDir: dir, Root: sys.Root, Logger: quiet, Offsets: groups,
		NextProducerID: func() (int64, error) { return next.Add(1), nil },
		Partitions: func(topic string, p int32) txn.TxnPartition {
			if pp := reg.Partition(topic, p); pp != nil {
				return pp
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		txns.Close()
		groups.Close()
		reg.Close()
		sys.Shutdown()
	})
	return NewServer(Config{NodeID: 1, Host: "127.0.0.1", Port: 9092, Logger: quiet}, reg, nil, groups, txns)
}

// TestTxnOffsetCommitV6ByTopicID stages transactional offsets by topic id
// (KIP-1319): unknown and zero ids get UNKNOWN_TOPIC_ID, a known id's
// offsets become the group's committed offsets under the topic's name
// when the transaction commits, and a member of a group that does not
// exist gets GROUP_ID_NOT_FOUND at v6 where v5 got ILLEGAL_GENERATION.
func TestTxnOffsetCommitV6ByTopicID(t *testing.T) {
	s := txnServer(t)
	id := s.topics.Get("t").ID

	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.Version = 4
	ip.TransactionalID = kmsg.StringPtr("tx-by-id")
	ip.TransactionTimeoutMillis = 60_000
	ir := call[*kmsg.InitProducerIDResponse](t, s, ip)
	code(t, "init producer id", ir.ErrorCode, nil)

	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.Version = 3
	ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch, ao.Group = "tx-by-id", ir.ProducerID, ir.ProducerEpoch, "txg"
	code(t, "add offsets", call[*kmsg.AddOffsetsToTxnResponse](t, s, ao).ErrorCode, nil)

	commit := func(version int16, generation int32, member string, ids ...[16]byte) *kmsg.TxnOffsetCommitResponse {
		tc := kmsg.NewPtrTxnOffsetCommitRequest()
		tc.Version = version
		tc.TransactionalID, tc.Group, tc.ProducerID, tc.ProducerEpoch = "tx-by-id", "txg", ir.ProducerID, ir.ProducerEpoch
		tc.Generation, tc.MemberID = generation, member
		for _, tid := range ids {
			rt := kmsg.NewTxnOffsetCommitRequestTopic()
			rt.TopicID, rt.Topic = tid, "t"
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = 1, 33
			rt.Partitions = append(rt.Partitions, rp)
			tc.Topics = append(tc.Topics, rt)
		}
		return call[*kmsg.TxnOffsetCommitResponse](t, s, tc)
	}
	unknown := [16]byte{0xbe, 0xef}
	resp := commit(6, -1, "", unknown, id, [16]byte{})
	if len(resp.Topics) != 3 || resp.Topics[0].TopicID != unknown || resp.Topics[1].TopicID != id {
		t.Fatalf("answer's topics %+v", resp.Topics)
	}
	code(t, "unknown id", resp.Topics[0].Partitions[0].ErrorCode, kerr.UnknownTopicID)
	code(t, "known id", resp.Topics[1].Partitions[0].ErrorCode, nil)
	code(t, "zero id", resp.Topics[2].Partitions[0].ErrorCode, kerr.UnknownTopicID)

	// A member's commit to a group the coordinator does not have.
	ao.Group = "no-such-group"
	code(t, "add offsets", call[*kmsg.AddOffsetsToTxnResponse](t, s, ao).ErrorCode, nil)
	for _, c := range []struct {
		version int16
		want    *kerr.Error
	}{{5, kerr.IllegalGeneration}, {6, kerr.GroupIDNotFound}} {
		tc := kmsg.NewPtrTxnOffsetCommitRequest()
		tc.Version = c.version
		tc.TransactionalID, tc.Group, tc.ProducerID, tc.ProducerEpoch = "tx-by-id", "no-such-group", ir.ProducerID, ir.ProducerEpoch
		tc.Generation, tc.MemberID = 3, "m-1"
		tc.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "t", TopicID: id, Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1, LeaderEpoch: -1}}}}
		code(t, "member of a missing group", call[*kmsg.TxnOffsetCommitResponse](t, s, tc).Topics[0].Partitions[0].ErrorCode, c.want)
	}

	et := kmsg.NewPtrEndTxnRequest()
	et.Version = 3
	et.TransactionalID, et.ProducerID, et.ProducerEpoch, et.Commit = "tx-by-id", ir.ProducerID, ir.ProducerEpoch, true
	code(t, "end txn", call[*kmsg.EndTxnResponse](t, s, et).ErrorCode, nil)

	of := kmsg.NewPtrOffsetFetchRequest()
	of.Version = 7
	of.Group = "txg"
	of.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{1}}}
	if got := call[*kmsg.OffsetFetchResponse](t, s, of).Topics[0].Partitions[0].Offset; got != 33 {
		t.Fatalf("committed offset of t/1 after the transaction: %d, want 33", got)
	}
}
