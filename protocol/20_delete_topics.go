package protocol

// DeleteTopics: versions 0-6 (v6+ topics by name or id). Data is removed
// before the answer. The internal topics are refused with
// INVALID_TOPIC_EXCEPTION. A deleted topic's partitions count against the
// client's controller_mutation_rate (mutation_quota.go; strict from v5).
// A cluster follower forwards the request to the leader (forward.go).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
)

func init() { register(20, 0, 6, (*Server).deleteTopics) }

func (s *Server) deleteTopics(r *Request) {
	if s.forwardToLeader(r) {
		return
	}
	s.async(r, func() kmsg.Response {
		req := r.Msg.(*kmsg.DeleteTopicsRequest)
		resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
		quota := s.mutationQuotaFor(r, 5)
		targets := req.Topics
		if req.Version < 6 {
			for _, n := range req.TopicNames {
				name := n
				targets = append(targets, kmsg.DeleteTopicsRequestTopic{Topic: &name})
			}
		}
		for _, rt := range targets {
			if it, ok := s.internalTopicByID(rt.TopicID); ok && rt.Topic == nil {
				rt.Topic = &it.Name // refused below, by name
			}
			ot := kmsg.NewDeleteTopicsResponseTopic()
			ot.Topic, ot.TopicID = rt.Topic, rt.TopicID
			name := ""
			if rt.Topic != nil {
				name = *rt.Topic
			} else if t := s.topics.GetByID(rt.TopicID); t != nil && s.authorizedQuiet(r, acls.Describe, acls.Topic, t.Name) {
				name = t.Name
				ot.Topic = &t.Name
			} else {
				// An id the principal may not describe is not told apart
				// from an unknown one, as Kafka answers.
				ot.ErrorCode = kerr.UnknownTopicID.Code
				if t != nil {
					ot.ErrorCode = kerr.TopicAuthorizationFailed.Code
				}
				resp.Topics = append(resp.Topics, ot)
				continue
			}
			if !s.authorized(r, acls.Delete, acls.Topic, name) {
				ot.ErrorCode = kerr.TopicAuthorizationFailed.Code
				resp.Topics = append(resp.Topics, ot)
				continue
			}
			if it, ok := s.internalTopic(name); ok {
				// Not a topic Regent stores (internal_topics.go).
				ot.TopicID, ot.ErrorCode = it.ID, kerr.InvalidTopicException.Code
				ot.ErrorMessage = kmsg.StringPtr("Topic " + name + " is an internal topic and cannot be deleted: Regent keeps the coordinator's state in its own store")
				resp.Topics = append(resp.Topics, ot)
				continue
			}
			var taken int
			if t := s.topics.Get(name); t != nil {
				ot.TopicID = t.ID
				taken = len(t.Partitions)
			}
			if err := quota.take(taken); err != nil {
				ot.ErrorCode, ot.ErrorMessage = errorCode(err), errorMessage(err)
			} else if err := s.topics.Delete(name); err != nil {
				quota.giveBack(taken)
				ot.ErrorCode, ot.ErrorMessage = errorCode(err), errorMessage(err)
			} else if s.groups != nil && s.coords == nil {
				// Kafka drops a deleted topic's committed offsets. With
				// coordinators spread over the nodes, every node drops
				// them as it applies the deletion (topics.OnDelete).
				s.groups.TopicsDeleted(name)
			}
			resp.Topics = append(resp.Topics, ot)
		}
		resp.ThrottleMillis = max(resp.ThrottleMillis, quota.done())
		return resp
	})
}
