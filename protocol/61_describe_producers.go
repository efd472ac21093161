package protocol

// DescribeProducers: version 0. Every producer (idempotent or
// transactional) the partition knows, with its last sequence and
// timestamp and the first offset of its open transaction (-1: none).
// Partitions it does not have get UNKNOWN_TOPIC_OR_PARTITION. Served off
// the event loop: the partitions' actors are asked.

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
				p := s.topics.Partition(rt.Topic, idx)
				if p == nil || !s.cluster.Serving() {
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
