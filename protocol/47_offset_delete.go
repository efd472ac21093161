package protocol

// OffsetDelete: version 0. Deletes committed offsets of an empty group, or
// of a consumer-protocol group for topics it does not subscribe to
// (GROUP_SUBSCRIBED_TO_TOPIC otherwise); other active groups are
// NON_EMPTY_GROUP. Partitions of unknown topics get
// UNKNOWN_TOPIC_OR_PARTITION here.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(47, 0, 0, (*Server).offsetDelete) }

func (s *Server) offsetDelete(r *Request) {
	req := r.Msg.(*kmsg.OffsetDeleteRequest)
	fwd := *req
	fwd.Topics = nil
	// unknown[i][j]: partition j of topic i does not exist.
	unknown := make([][]bool, len(req.Topics))
	for i, rt := range req.Topics {
		t := s.topics.Get(rt.Topic)
		unknown[i] = make([]bool, len(rt.Partitions))
		ft := kmsg.OffsetDeleteRequestTopic{Topic: rt.Topic}
		for j, rp := range rt.Partitions {
			if t == nil || rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions) {
				unknown[i][j] = true
				continue
			}
			ft.Partitions = append(ft.Partitions, rp)
		}
		fwd.Topics = append(fwd.Topics, ft)
	}
	s.groups.DeleteOffsets(&fwd, func(gr *kmsg.OffsetDeleteResponse) {
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = gr.ErrorCode
		if gr.ErrorCode != 0 {
			r.Respond(resp)
			return
		}
		for i, rt := range req.Topics {
			ot := kmsg.NewOffsetDeleteResponseTopic()
			ot.Topic = rt.Topic
			var got []kmsg.OffsetDeleteResponseTopicPartition
			if i < len(gr.Topics) {
				got = gr.Topics[i].Partitions
			}
			next := 0
			for j, rp := range rt.Partitions {
				op := kmsg.NewOffsetDeleteResponseTopicPartition()
				op.Partition = rp.Partition
				switch {
				case unknown[i][j]:
					op.ErrorCode = kerr.UnknownTopicOrPartition.Code
				case next < len(got):
					op.ErrorCode = got[next].ErrorCode
					next++
				}
				ot.Partitions = append(ot.Partitions, op)
			}
			resp.Topics = append(resp.Topics, ot)
		}
		r.Respond(resp)
	})
}
