package protocol

// OffsetForLeaderEpoch: versions 0-4. Answers the end offset of the asked
// leader epoch from the log's epoch cache (clients use it to detect log
// truncation after a leader change).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
)

func init() { register(23, 0, 4, (*Server).offsetForLeaderEpoch) }

func (s *Server) offsetForLeaderEpoch(r *Request) {
	req := r.Msg.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, rt := range req.Topics {
		ot := kmsg.NewOffsetForLeaderEpochResponseTopic()
		ot.Topic = rt.Topic
		allowed := s.authorized(r, acls.Describe, acls.Topic, rt.Topic)
		for _, rp := range rt.Partitions {
			op := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			op.Partition = rp.Partition
			op.LeaderEpoch, op.EndOffset = -1, -1
			p := s.topics.Partition(rt.Topic, rp.Partition)
			switch {
			case !allowed:
				op.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case p == nil:
				op.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case !s.cluster.Serving():
				op.ErrorCode = kerr.NotLeaderForPartition.Code
			case rp.CurrentLeaderEpoch > 0:
				op.ErrorCode = kerr.UnknownLeaderEpoch.Code
			default:
				op.LeaderEpoch, op.EndOffset = p.Log().EndOffsetForEpoch(rp.LeaderEpoch)
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	r.Respond(resp)
}
