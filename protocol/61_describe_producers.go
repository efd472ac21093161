package protocol

// DescribeProducers: version 0. Every producer (idempotent or
// transactional) the partition knows, with its last sequence and
// timestamp, the first offset of its open transaction (-1: none) and the
// coordinator epoch of its last transaction marker (-1: none yet, as Kafka).
// Partitions it does not have get UNKNOWN_TOPIC_OR_PARTITION. Served off
// the event loop: the partitions' actors are asked.
//
// The internal topics' partitions (__consumer_offsets,
// __transaction_state) answer with no producers: Regent keeps the
// coordinators' state in their own stores, not in partition logs, so no
// producer has records there (a transaction's pending offsets are held and
// ended by the coordinators). Kafka lists the producers of transactional
// offset commits there; `kafka-transactions.sh find-hanging --broker-id`
// describes every partition of the broker, internal ones included, and
// needs an answer (it retries UNKNOWN_TOPIC_OR_PARTITION until it times
// out).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
)

func init() { register(61, 0, 0, (*Server).describeProducers) }

func (s *Server) describeProducers(r *Request) {
	s.async(r, func() kmsg.Response {
		req := r.Msg.(*kmsg.DescribeProducersRequest)
		resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
		for _, rt := range req.Topics {
			ot := kmsg.NewDescribeProducersResponseTopic()
			ot.Topic = rt.Topic
			readable := s.authorized(r, acls.Read, acls.Topic, rt.Topic)
			for _, idx := range rt.Partitions {
				op := kmsg.NewDescribeProducersResponseTopicPartition()
				op.Partition = idx
				if !readable {
					op.ErrorCode = kerr.TopicAuthorizationFailed.Code
					ot.Partitions = append(ot.Partitions, op)
					continue
				}
				if it, ok := s.internalTopic(rt.Topic); ok {
					// Led by their coordinators: the metadata group.
					switch {
					case idx < 0 || idx >= it.Partitions:
						op.ErrorCode = kerr.UnknownTopicOrPartition.Code
					case !s.cluster.Serving():
						op.ErrorCode = kerr.NotLeaderForPartition.Code
					}
					ot.Partitions = append(ot.Partitions, op)
					continue
				}
				p := s.topics.Partition(rt.Topic, idx)
				if p == nil || !s.topicGroup(rt.Topic, idx).Serving() {
					op.ErrorCode = kerr.UnknownTopicOrPartition.Code
					if p != nil {
						op.ErrorCode = kerr.NotLeaderForPartition.Code
					}
					ot.Partitions = append(ot.Partitions, op)
					continue
				}
				for _, pi := range p.Producers() {
					ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
					ap.ProducerID, ap.ProducerEpoch = pi.ProducerID, int32(pi.ProducerEpoch)
					ap.LastSequence, ap.LastTimestamp = pi.LastSequence, pi.LastTimestamp
					ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = pi.CoordinatorEpoch, pi.CurrentTxnStartOffset
					op.ActiveProducers = append(op.ActiveProducers, ap)
				}
				ot.Partitions = append(ot.Partitions, op)
			}
			resp.Topics = append(resp.Topics, ot)
		}
		return resp
	})
}
