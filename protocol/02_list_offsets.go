package protocol

// ListOffsets: versions 0-11. Timestamps: -2 earliest, -1 latest (the last
// stable offset under read_committed), -3 max timestamp (v7+), -4 earliest
// local (the same as earliest: Regent has no tiered storage), -5 latest
// tiered and -6 earliest pending upload (nothing is tiered: offset -1), and
// any other value: the first offset whose timestamp is at or after it.
// Lookups by timestamp and -3 answer only offsets below the last fetchable
// one (the high watermark, the last stable offset under read_committed),
// as Kafka's Partition.fetchOffsetForTimestamp: else offset -1.
// v0 answers with old-style offset lists (at most one offset). The
// internal topics answer INVALID_TOPIC_EXCEPTION (internal_topics.go).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
)

func init() { register(2, 0, 11, (*Server).listOffsets) }

func (s *Server) listOffsets(r *Request) {
	s.async(r, func() kmsg.Response {
		req := r.Msg.(*kmsg.ListOffsetsRequest)
		resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
		for _, rt := range req.Topics {
			ot := kmsg.NewListOffsetsResponseTopic()
			ot.Topic = rt.Topic
			allowed := s.authorized(r, acls.Describe, acls.Topic, rt.Topic)
			for _, rp := range rt.Partitions {
				if !allowed {
					op := kmsg.NewListOffsetsResponseTopicPartition()
					op.Partition, op.Timestamp, op.Offset, op.LeaderEpoch = rp.Partition, -1, -1, -1
					op.ErrorCode = kerr.TopicAuthorizationFailed.Code
					ot.Partitions = append(ot.Partitions, op)
					continue
				}
				ot.Partitions = append(ot.Partitions, s.listOffset(req, rt.Topic, rp))
			}
			resp.Topics = append(resp.Topics, ot)
		}
		return resp
	})
}

func (s *Server) listOffset(req *kmsg.ListOffsetsRequest, topic string, rp kmsg.ListOffsetsRequestTopicPartition) kmsg.ListOffsetsResponseTopicPartition {
	op := kmsg.NewListOffsetsResponseTopicPartition()
	op.Partition = rp.Partition
	op.Timestamp, op.Offset, op.LeaderEpoch = -1, -1, -1
	p := s.topics.Partition(topic, rp.Partition)
	if p == nil {
		op.ErrorCode = kerr.UnknownTopicOrPartition.Code
		if isInternalTopic(topic) {
			// Not Kafka records: refused, see internal_topics.go.
			op.ErrorCode = kerr.InvalidTopicException.Code
		}
		return op
	}
	// Each partition is answered by its raft group's leader.
	g := s.topicGroup(topic, rp.Partition)
	if !g.Serving() {
		op.ErrorCode = kerr.NotLeaderForPartition.Code
		return op
	}
	if code := leaderEpochError(g, rp.CurrentLeaderEpoch); code != 0 {
		op.ErrorCode = code
		return op
	}
	// The end of what a client of this isolation level may fetch. Read
	// before any lookup, as Kafka does: a record appended meanwhile is
	// past it.
	fetchable := p.HighWatermark()
	if req.IsolationLevel == 1 {
		fetchable = p.LastStableOffset()
	}
	switch ts := rp.Timestamp; ts {
	case -2, -4:
		op.Offset = p.LogStartOffset()
	case -1:
		op.Offset = fetchable
	case -3:
		op.Offset, op.Timestamp = p.Log().MaxTimestamp()
		if op.Offset >= fetchable {
			op.Offset, op.Timestamp = -1, -1 // as a timestamp lookup, below
		}
	case -5, -6:
		// nothing is tiered
	default:
		if ts < 0 {
			op.ErrorCode = kerr.InvalidRequest.Code
			return op
		}
		off, t, found, err := p.Log().OffsetForTimestamp(ts)
		if err != nil {
			s.log.Error("offset for timestamp failed", "topic", topic, "partition", rp.Partition, "err", err)
			op.ErrorCode = kerr.KafkaStorageError.Code
			return op
		}
		// Kafka answers no offset for a record the client could not
		// fetch yet (uncommitted, or a transaction still open).
		if found && off < fetchable {
			op.Offset, op.Timestamp = off, t
		}
	}
	if op.Offset >= 0 {
		op.LeaderEpoch = p.Log().EpochAt(op.Offset)
	}
	if req.Version == 0 {
		if rp.MaxNumOffsets > 0 && op.Offset >= 0 {
			op.OldStyleOffsets = []int64{op.Offset}
		}
	}
	return op
}
