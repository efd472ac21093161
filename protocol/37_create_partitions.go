package protocol

// CreatePartitions: versions 0-3. Manual assignments must name only voters.
// A request adding more than topics.MaxPartitionsPerRequest partitions is
// refused whole (POLICY_VIOLATION), as Kafka does. The partitions added
// count against the client's controller_mutation_rate (mutation_quota.go;
// strict from v3).
// A cluster follower forwards the request to the leader (forward.go).

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/actors/topics"
)

func init() { register(37, 0, 3, (*Server).createPartitions) }

func (s *Server) createPartitions(r *Request) {
	if s.forwardToLeader(r) {
		return
	}
	s.async(r, func() kmsg.Response {
		req := r.Msg.(*kmsg.CreatePartitionsRequest)
		resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
		// Kafka refuses a request over its batch limit whole (limits.go).
		var adding int64
		for _, rt := range req.Topics {
			if t := s.topics.Get(rt.Topic); t != nil && rt.Count > int32(len(t.Partitions)) {
				adding += int64(rt.Count) - int64(len(t.Partitions))
			}
		}
		quota := s.mutationQuotaFor(r, 3)
		var tooMany error
		if adding > topics.MaxPartitionsPerRequest {
			tooMany = topics.ErrTooManyPartitionsPerRequest(adding)
		}
		for _, rt := range req.Topics {
			ot := kmsg.NewCreatePartitionsResponseTopic()
			ot.Topic = rt.Topic
			err := tooMany
			if err == nil && !s.authorized(r, acls.Alter, acls.Topic, rt.Topic) {
				err = &topics.Error{Code: kerr.TopicAuthorizationFailed, Msg: "not authorized to alter topic '" + rt.Topic + "'"}
			}
			var assignments [][]int32
			for _, a := range rt.Assignment {
				if aerr := s.checkAssignment(a.Replicas); aerr != nil && err == nil {
					err = &topics.Error{Code: kerr.InvalidReplicaAssignment, Msg: aerr.Error()}
				}
				assignments = append(assignments, a.Replicas)
			}
			if t := s.topics.Get(rt.Topic); err == nil && t != nil && len(rt.Assignment) > 0 && int(rt.Count)-len(t.Partitions) != len(rt.Assignment) {
				err = &topics.Error{Code: kerr.InvalidReplicaAssignment, Msg: fmt.Sprintf("increasing the number of partitions by %d but %d assignments provided", int(rt.Count)-len(t.Partitions), len(rt.Assignment))}
			}
			var taken int
			if t := s.topics.Get(rt.Topic); err == nil && !req.ValidateOnly && t != nil {
				taken = int(rt.Count) - len(t.Partitions)
				err = quota.take(taken)
				if err != nil {
					taken = 0
				}
			}
			if err == nil {
				err = s.topics.AddPartitions(rt.Topic, rt.Count, assignments, req.ValidateOnly)
				if err != nil {
					quota.giveBack(taken)
				}
			}
			if err != nil {
				ot.ErrorCode, ot.ErrorMessage = errorCode(err), errorMessage(err)
			}
			resp.Topics = append(resp.Topics, ot)
		}
		resp.ThrottleMillis = max(resp.ThrottleMillis, quota.done())
		return resp
	})
}
