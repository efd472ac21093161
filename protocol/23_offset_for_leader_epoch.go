package protocol

// OffsetForLeaderEpoch: versions 0-4. Answers the end offset of the asked
// leader epoch from the log's epoch cache (clients use it to detect log
// truncation after a leader change). In a cluster the epochs are raft
// terms, assigned at the first write of each term on every node alike.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/storage"
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
			// The partition's epochs are its raft group's terms.
			g := s.topicGroup(rt.Topic, rp.Partition)
			switch {
			case !allowed:
				op.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case p == nil:
				op.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case !g.Serving():
				op.ErrorCode = kerr.NotLeaderForPartition.Code
			default:
				if op.ErrorCode = leaderEpochError(g, rp.CurrentLeaderEpoch); op.ErrorCode == 0 {
					op.LeaderEpoch, op.EndOffset = endOffsetForEpoch(p.Log(), rp.LeaderEpoch, g.LeaderEpoch())
				}
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	r.Respond(resp)
}

// endOffsetForEpoch is the log's answer, plus the epochs the log has no
// entry for because nothing was written in them yet: Kafka's leader
// assigns its epoch at its log end when it takes over, so an epoch newer
// than the log's newest, up to the current one (cur: the term of the
// partition's raft group), ends at the log end. A consumer that last
// fetched in such an epoch (none did here) or learned it from an offset
// commit must not be told its position was truncated.
func endOffsetForEpoch(lg *storage.Log, epoch, cur int32) (int32, int64) {
	e, end := lg.EndOffsetForEpoch(epoch)
	if e < 0 && epoch >= 0 && epoch > lg.LatestEpoch() && epoch <= cur {
		return epoch, lg.NextOffset()
	}
	return e, end
}
