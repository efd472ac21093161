package protocol

import (
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/storage/recordbatch"
)

// produceTxn appends a transactional batch of n records for pid/epoch
// (sequences from seq) to t-partition and returns its base offset.
func produceTxn(t *testing.T, s *Server, partition int32, pid int64, epoch int16, seq int32, n int) int64 {
	t.Helper()
	recs := make([]recordbatch.Record, n)
	for i := range recs {
		recs[i] = recordbatch.Record{OffsetDelta: int32(i), Value: []byte("v")}
	}
	b, err := recordbatch.Build(recordbatch.Header{Attributes: recordbatch.AttrTransactional, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq}, recs)
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.TransactionID = kmsg.StringPtr("tx")
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, b
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	p := call[*kmsg.ProduceResponse](t, s, req).Topics[0].Partitions[0]
	code(t, "transactional produce", p.ErrorCode, nil)
	return p.BaseOffset
}

// marker is one WriteTxnMarkers marker for topic partitions.
func marker(pid int64, epoch int16, commit bool, coordEpoch int32, topic string, partitions ...int32) kmsg.WriteTxnMarkersRequestMarker {
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = pid, epoch, commit, coordEpoch
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = topic, partitions
	m.Topics = append(m.Topics, mt)
	return m
}

// writeMarkers sends the markers at version v and returns each partition's
// code, in request order.
func writeMarkers(t *testing.T, s *Server, v int16, markers ...kmsg.WriteTxnMarkersRequestMarker) []int16 {
	t.Helper()
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.SetVersion(v)
	req.Markers = markers
	resp := call[*kmsg.WriteTxnMarkersResponse](t, s, req)
	if len(resp.Markers) != len(markers) {
		t.Fatalf("%d markers answered, %d sent", len(resp.Markers), len(markers))
	}
	var codes []int16
	for i, m := range resp.Markers {
		if m.ProducerID != markers[i].ProducerID || len(m.Topics) != len(markers[i].Topics) {
			t.Fatalf("marker %d answered as %+v", i, m)
		}
		for j, mt := range m.Topics {
			if mt.Topic != markers[i].Topics[j].Topic || len(mt.Partitions) != len(markers[i].Topics[j].Partitions) {
				t.Fatalf("marker %d topic %d answered as %+v", i, j, mt)
			}
			for k, p := range mt.Partitions {
				if p.Partition != markers[i].Topics[j].Partitions[k] {
					t.Fatalf("marker %d partition %d answered as %d", i, k, p.Partition)
				}
				codes = append(codes, p.ErrorCode)
			}
		}
	}
	return codes
}

// TestWriteTxnMarkersAbortsOpenTransaction: an ABORT marker ends the open
// transaction (the last stable offset moves to the log end and the
// records are listed as aborted); sent again it succeeds and writes
// nothing; a COMMIT marker commits another producer's transaction.
func TestWriteTxnMarkersAbortsOpenTransaction(t *testing.T) {
	s := groupServer(t)
	p := s.topics.Partition("t", 0)
	first := produceTxn(t, s, 0, 7, 0, 0, 3)
	produceTxn(t, s, 0, 8, 2, 0, 2)
	if lso := p.LastStableOffset(); lso != first {
		t.Fatalf("last stable offset %d with the transaction open, want %d", lso, first)
	}
	for _, v := range []int16{1, 2} {
		codes := writeMarkers(t, s, v, marker(7, 0, false, 0, "t", 0))
		code(t, "abort", codes[0], nil)
	}
	end := p.HighWatermark()
	if end != 6 {
		t.Fatalf("log end %d after one marker (5 records), want 6: the repeated marker wrote", end)
	}
	if got := p.AbortedTransactions(0, end); len(got) != 1 || got[0].ProducerID != 7 || got[0].FirstOffset != first {
		t.Fatalf("aborted transactions %+v, want producer 7 from %d", got, first)
	}
	// Producer 8's transaction still holds the last stable offset.
	if lso := p.LastStableOffset(); lso != 3 {
		t.Fatalf("last stable offset %d, want 3 (producer 8's transaction)", lso)
	}
	code(t, "commit", writeMarkers(t, s, 2, marker(8, 2, true, 0, "t", 0))[0], nil)
	if lso, hw := p.LastStableOffset(), p.HighWatermark(); lso != hw || hw != 7 {
		t.Fatalf("last stable %d, high watermark %d after both markers, want 7 and 7", lso, hw)
	}
	for _, pi := range p.Producers() {
		if pi.CurrentTxnStartOffset != -1 {
			t.Fatalf("producer %d still has a transaction open at %d", pi.ProducerID, pi.CurrentTxnStartOffset)
		}
	}
}

// TestWriteTxnMarkersErrors: per-partition errors as Kafka answers them,
// each partition on its own (one marker's failure does not fail the
// others).
func TestWriteTxnMarkersErrors(t *testing.T) {
	s := groupServer(t)
	p := s.topics.Partition("t", 1)
	// Producer 9 at epoch 3, its first transaction ended by a coordinator
	// at epoch 5; a second transaction open.
	produceTxn(t, s, 1, 9, 3, 0, 1)
	code(t, "first commit", writeMarkers(t, s, 2, marker(9, 3, true, 5, "t", 1))[0], nil)
	open := produceTxn(t, s, 1, 9, 3, 1, 1)

	codes := writeMarkers(t, s, 2,
		marker(9, 2, false, 5, "t", 1),                  // an older producer epoch
		marker(9, 3, false, 4, "t", 1),                  // an older coordinator epoch
		marker(9, 3, false, 5, "nope", 0),               // no such topic
		marker(9, 3, false, 5, "t", 3),                  // no such partition
		marker(9, 3, false, 5, "__consumer_offsets", 0), // offsets live in the group coordinator
		marker(10, 0, false, 0, "t", 2),                 // nothing open: success
	)
	want := []*kerr.Error{kerr.InvalidProducerEpoch, kerr.TransactionCoordinatorFenced, kerr.UnknownTopicOrPartition,
		kerr.UnknownTopicOrPartition, kerr.InvalidTopicException, nil}
	for i, w := range want {
		code(t, "marker", codes[i], w)
	}
	if lso := p.LastStableOffset(); lso != open {
		t.Fatalf("a refused marker moved the last stable offset to %d (transaction open at %d)", lso, open)
	}
	// The right epochs (a newer coordinator epoch too) end it; then, with
	// nothing open, stale epochs are still fenced, as Kafka does.
	code(t, "abort", writeMarkers(t, s, 2, marker(9, 3, false, 6, "t", 1))[0], nil)
	code(t, "older coordinator after", writeMarkers(t, s, 2, marker(9, 3, false, 5, "t", 1))[0], kerr.TransactionCoordinatorFenced)
	code(t, "older producer after", writeMarkers(t, s, 2, marker(9, 2, false, 6, "t", 1))[0], kerr.InvalidProducerEpoch)
	if lso, hw := p.LastStableOffset(), p.HighWatermark(); lso != hw {
		t.Fatalf("last stable %d, high watermark %d after the abort", lso, hw)
	}
}

// TestWriteTxnMarkersNotLeader: a node that does not lead answers
// NOT_LEADER_OR_FOLLOWER and writes nothing.
func TestWriteTxnMarkersNotLeader(t *testing.T) {
	s := groupServer(t)
	open := produceTxn(t, s, 0, 7, 0, 0, 1)
	s.cluster = followerView{s.cluster}
	code(t, "follower", writeMarkers(t, s, 2, marker(7, 0, false, 0, "t", 0))[0], kerr.NotLeaderForPartition)
	if lso := s.topics.Partition("t", 0).LastStableOffset(); lso != open {
		t.Fatalf("last stable offset %d, want %d", lso, open)
	}
}

// followerView is a cluster view of a node that does not serve.
type followerView struct{ ClusterView }

func (followerView) Serving() bool { return false }

// Group: the node follows every group (the embedded view's would serve).
func (v followerView) Group(uint8) GroupView { return v }

// TestWriteTxnMarkersAuthorization: CLUSTER_ACTION on the cluster, else
// every partition answers CLUSTER_AUTHORIZATION_FAILED and nothing is
// written.
func TestWriteTxnMarkersAuthorization(t *testing.T) {
	var allowAll atomic.Bool
	allowAll.Store(true) // for the produce
	s, store, obs := aclServer(t, &allowAll)
	open := produceTxn(t, s, 0, 7, 0, 0, 1)
	allowAll.Store(false)
	codes := writeMarkers(t, s, 2, marker(7, 0, false, 0, "t", 0, 1), marker(8, 0, true, 0, "nope", 0))
	for _, c := range codes {
		code(t, "denied", c, kerr.ClusterAuthorizationFailed)
	}
	if n := obs.count("CLUSTER_ACTION/CLUSTER"); n != 1 {
		t.Fatalf("%d CLUSTER_ACTION denials reported, want 1", n)
	}
	p := s.topics.Partition("t", 0)
	if lso := p.LastStableOffset(); lso != open {
		t.Fatalf("a denied marker moved the last stable offset to %d", lso)
	}
	// ALTER on the cluster is not enough; CLUSTER_ACTION is.
	if err := store.Create([]acls.ACL{anon(acls.Cluster, kmsg.ACLResourcePatternTypeLiteral, acls.ClusterName, acls.Alter, kmsg.ACLPermissionTypeAllow)}); err != nil {
		t.Fatal(err)
	}
	code(t, "ALTER only", writeMarkers(t, s, 2, marker(7, 0, false, 0, "t", 0))[0], kerr.ClusterAuthorizationFailed)
	if err := store.Create([]acls.ACL{anon(acls.Cluster, kmsg.ACLResourcePatternTypeLiteral, acls.ClusterName, acls.ClusterAction, kmsg.ACLPermissionTypeAllow)}); err != nil {
		t.Fatal(err)
	}
	code(t, "CLUSTER_ACTION", writeMarkers(t, s, 2, marker(7, 0, false, 0, "t", 0))[0], nil)
	if lso, hw := p.LastStableOffset(), p.HighWatermark(); lso != hw {
		t.Fatalf("last stable %d, high watermark %d after the allowed abort", lso, hw)
	}
}

// TestWriteTxnMarkersVersions: v0 (removed in Kafka 4.0) is not served.
func TestWriteTxnMarkersVersions(t *testing.T) {
	if lo, hi, ok := VersionRange(27); !ok || lo != 1 || hi != 2 {
		t.Fatalf("WriteTxnMarkers versions %d-%d (served %v), want 1-2", lo, hi, ok)
	}
}
