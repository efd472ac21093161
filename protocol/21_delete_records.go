package protocol

// DeleteRecords: versions 0-2. Offset -1 means the high watermark. A
// cluster follower forwards the request to the leader (forward.go), unless
// it names a partition of a partition raft group: that is answered here,
// NOT_LEADER_OR_FOLLOWER for each partition this node does not lead (Kafka's
// clients send it to each partition's leader, and retry there).

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
)

func init() { register(21, 0, 2, (*Server).deleteRecords) }

func (s *Server) deleteRecords(r *Request) {
	req := r.Msg.(*kmsg.DeleteRecordsRequest)
	if !s.namesPartitionGroup(req) && s.forwardToLeader(r) {
		return
	}
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	resp.Topics = make([]kmsg.DeleteRecordsResponseTopic, len(req.Topics))
	var wg sync.WaitGroup
	for i, rt := range req.Topics {
		ot := &resp.Topics[i]
		ot.Topic = rt.Topic
		ot.Partitions = make([]kmsg.DeleteRecordsResponseTopicPartition, len(rt.Partitions))
		allowed := s.authorized(r, acls.Delete, acls.Topic, rt.Topic)
		for j, rp := range rt.Partitions {
			op := &ot.Partitions[j]
			*op = kmsg.NewDeleteRecordsResponseTopicPartition()
			op.Partition, op.LowWatermark = rp.Partition, -1
			if !allowed {
				op.ErrorCode = kerr.TopicAuthorizationFailed.Code
				continue
			}
			p := s.topics.Partition(rt.Topic, rp.Partition)
			if p == nil {
				op.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			}
			// The partition's raft group orders its log start.
			if !s.topicGroup(rt.Topic, rp.Partition).Serving() {
				op.ErrorCode = kerr.NotLeaderForPartition.Code
				continue
			}
			wg.Add(1)
			p.DeleteRecords(rp.Offset, func(low int64, err error) {
				op.LowWatermark, op.ErrorCode = low, errorCode(err)
				wg.Done()
			})
		}
	}
	go func() {
		wg.Wait()
		r.Respond(resp)
	}()
}

// namesPartitionGroup reports whether req names a partition on a partition
// raft group (not the metadata group's leader's to answer).
func (s *Server) namesPartitionGroup(req *kmsg.DeleteRecordsRequest) bool {
	for _, rt := range req.Topics {
		t := s.topics.Get(rt.Topic)
		if t == nil {
			continue
		}
		for _, rp := range rt.Partitions {
			if t.PartitionGroup(rp.Partition) > 0 {
				return true
			}
		}
	}
	return false
}
