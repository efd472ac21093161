package protocol

// OffsetDelete: version 0. Deletes committed offsets of an empty group, or
// of a consumer-protocol group for topics it does not subscribe to
// (GROUP_SUBSCRIBED_TO_TOPIC otherwise); other active groups are
// NON_EMPTY_GROUP. Partitions of unknown topics get
// UNKNOWN_TOPIC_OR_PARTITION here.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
)

func init() { register(47, 0, 0, (*Server).offsetDelete) }

func (s *Server) offsetDelete(r *Request) {
	req := r.Msg.(*kmsg.OffsetDeleteRequest)
	if !s.authorized(r, acls.Delete, acls.Group, req.Group) {
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		r.Respond(resp)
		return
	}
	fwd := *req
	fwd.Topics = nil
	// refused[i][j] is the code of partition j of topic i answered here
	// (unknown, or a topic the principal may not read); 0: asked of the
	// group.
	refused := make([][]int16, len(req.Topics))
	for i, rt := range req.Topics {
		t, found := s.offsetTopicByName(rt.Topic)
		readable := s.authorized(r, acls.Read, acls.Topic, rt.Topic)
		refused[i] = make([]int16, len(rt.Partitions))
		ft := kmsg.OffsetDeleteRequestTopic{Topic: rt.Topic}
		for j, rp := range rt.Partitions {
			if !readable {
				refused[i][j] = kerr.TopicAuthorizationFailed.Code
				continue
			}
			if !found || !t.hasPartition(rp.Partition) {
				refused[i][j] = kerr.UnknownTopicOrPartition.Code
				continue
			}
			ft.Partitions = append(ft.Partitions, rp)
		}
		fwd.Topics = append(fwd.Topics, ft)
	}
	s.groupsFor(req.Group).DeleteOffsets(&fwd, func(gr *kmsg.OffsetDeleteResponse) {
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
				case refused[i][j] != 0:
					op.ErrorCode = refused[i][j]
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
