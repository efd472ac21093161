package protocol

// WriteTxnMarkers: versions 1-2 (Kafka 4.x dropped v0; v2 adds each
// marker's TransactionVersion, KIP-1228). Writes a COMMIT or ABORT control
// batch for the producer id and epoch, with the coordinator epoch, to each
// listed partition through the partition's marker path (the one the
// transaction coordinator uses at EndTxn), and answers per partition:
// UNKNOWN_TOPIC_OR_PARTITION for a partition Regent does not have,
// NOT_LEADER_OR_FOLLOWER on a node that does not lead the partition's raft
// group (markers of one request can span groups), INVALID_PRODUCER_EPOCH
// for an epoch older than the partition's, TRANSACTION_COORDINATOR_FENCED for
// a coordinator epoch older than the last marker's. A marker for a producer
// with no open transaction on the partition succeeds and writes nothing
// (Kafka writes an empty marker): a repeated marker is harmless. Needs
// CLUSTER_ACTION on the cluster; without it every partition answers
// CLUSTER_AUTHORIZATION_FAILED.
//
// In Regent the transaction coordinator writes its own markers in-process,
// so this API serves administrators: `kafka-transactions.sh abort` (Admin
// abortTransaction) ends a hanging transaction with it.
//
// A marker on a transaction the coordinator still tracks (Ongoing) does what
// it does in Kafka: the partition's open transaction ends there, the
// coordinator is not told, and it ends the transaction later as it would
// have (the producer's EndTxn, its timeout, or a new producer's
// InitProducerId); its marker then finds nothing open on that partition and
// succeeds without writing. The records the admin aborted stay aborted even
// if the producer commits: that is the operator's call, as in Kafka.
//
// Deviations: a TransactionVersion 2 marker is checked as a legacy one (an
// epoch older than the partition's is refused; Kafka also refuses an equal
// one for TV2), since only coordinators send TV2 markers and Regent's
// coordinator does not come through here. Markers for the internal topics
// (__consumer_offsets, __transaction_state) are refused with
// INVALID_TOPIC_EXCEPTION, as a client's produce there is: Regent keeps
// pending transactional offsets in its group coordinator, which the
// transaction coordinator completes itself, not in a partition a marker
// could reach (Kafka completes the offsets of the groups on that
// __consumer_offsets partition).

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/actors/partition"
)

func init() { register(27, 1, 2, (*Server).writeTxnMarkers) }

func (s *Server) writeTxnMarkers(r *Request) {
	req := r.Msg.(*kmsg.WriteTxnMarkersRequest)
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	resp.Markers = make([]kmsg.WriteTxnMarkersResponseMarker, len(req.Markers))
	allowed := s.authorizedCluster(r, acls.ClusterAction)
	tr := r.partitionTracer()
	// Every partition's marker answers once; the last answers the request.
	// The response slices are sized before any marker is sent, so the
	// callbacks (partition actors' goroutines) only write their own codes.
	var wg sync.WaitGroup
	for i, m := range req.Markers {
		om := &resp.Markers[i]
		*om = kmsg.NewWriteTxnMarkersResponseMarker()
		om.ProducerID = m.ProducerID
		om.Topics = make([]kmsg.WriteTxnMarkersResponseMarkerTopic, len(m.Topics))
		for j, mt := range m.Topics {
			ot := &om.Topics[j]
			*ot = kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			ot.Topic = mt.Topic
			ot.Partitions = make([]kmsg.WriteTxnMarkersResponseMarkerTopicPartition, len(mt.Partitions))
			for k, idx := range mt.Partitions {
				op := &ot.Partitions[k]
				*op = kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				op.Partition = idx
				p, refused := s.markerTarget(allowed, mt.Topic, idx)
				if refused != nil {
					op.ErrorCode = refused.Code
					continue
				}
				wg.Add(1)
				p.WriteTxnMarkerTraced(tr, m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch, func(err error) {
					op.ErrorCode = errorCode(err)
					if err != nil {
						s.log.InfoContext(r.Context(), "transaction marker refused", "topic", mt.Topic, "partition", idx,
							"producer_id", m.ProducerID, "producer_epoch", m.ProducerEpoch, "commit", m.Committed,
							"coordinator_epoch", m.CoordinatorEpoch, "err", err)
					}
					wg.Done()
				})
			}
		}
	}
	go func() {
		wg.Wait()
		r.Respond(resp)
	}()
}

// markerTarget is the partition to write the marker to, or the error the
// partition answers without one.
func (s *Server) markerTarget(allowed bool, topic string, idx int32) (*partition.Partition, *kerr.Error) {
	if !allowed {
		return nil, kerr.ClusterAuthorizationFailed
	}
	if isInternalTopic(topic) {
		return nil, kerr.InvalidTopicException
	}
	p := s.topics.Partition(topic, idx)
	switch {
	case p == nil:
		return nil, kerr.UnknownTopicOrPartition
	case !s.topicGroup(topic, idx).Serving():
		return nil, kerr.NotLeaderForPartition
	}
	return p, nil
}
