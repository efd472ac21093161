package protocol

// DeleteShareGroupOffsets: version 0, as Kafka 4.3 serves it; what
// kafka-share-groups.sh --delete-offsets sends. The share group forgets its
// share-partitions of the named topics (a later fetch starts them again
// from share.auto.offset.reset). Only for an empty share group
// (NON_EMPTY_GROUP otherwise; also for a topic whose records a member that
// joined since the check holds); GROUP_ID_NOT_FOUND for no share group.
// ACLs: DELETE on the group (else GROUP_AUTHORIZATION_FAILED), READ on each
// topic (else TOPIC_AUTHORIZATION_FAILED for it).

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
)

func init() { register(92, 0, 0, (*Server).deleteShareGroupOffsets) }

func (s *Server) deleteShareGroupOffsets(r *Request) {
	req := r.Msg.(*kmsg.DeleteShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	s.shareOffsetsGate(r, req.GroupID, acls.Delete, false, func(code int16, msg *string) {
		resp.ErrorCode, resp.ErrorMessage = code, msg
		r.Respond(resp)
	}, func() { s.deleteShareOffsets(r, req, resp) })
}

func (s *Server) deleteShareOffsets(r *Request, req *kmsg.DeleteShareGroupOffsetsRequest, resp *kmsg.DeleteShareGroupOffsetsResponse) {
	var names []string
	var slots []int
	for _, rt := range req.Topics {
		ot := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		ot.Topic = rt.Topic
		t, code := s.shareTopicCheck(r, acls.Read, rt.Topic)
		ot.ErrorCode = code
		if t != nil {
			ot.TopicID = t.ID
			names = append(names, rt.Topic)
			slots = append(slots, len(resp.Topics))
		}
		resp.Topics = append(resp.Topics, ot)
	}
	if len(names) == 0 {
		r.Respond(resp)
		return
	}
	s.share.core.DeleteState(req.GroupID, names, func(code int16) {
		for _, i := range slots {
			resp.Topics[i].ErrorCode = code
		}
		r.Respond(resp)
	})
}
