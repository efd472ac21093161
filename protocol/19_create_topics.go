package protocol

// CreateTopics: versions 0-7 (v1+ validateOnly, v5+ configs echoed back,
// v7+ topic ids). Manual replica assignments are accepted when they name
// only voters; the replication factor may not exceed the number of voters.
// The internal topics answer TOPIC_ALREADY_EXISTS. A request adding more
// than topics.MaxPartitionsPerRequest partitions is refused whole
// (POLICY_VIOLATION), as Kafka does. Each new topic's partitions count
// against the client's controller_mutation_rate (mutation_quota.go;
// strict from v6).
// A cluster follower forwards the request to the leader (forward.go).

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/actors/topics"
	"github.com/regent-broker/regent/storage/logconfig"
)

func init() { register(19, 0, 7, (*Server).createTopics) }

func (s *Server) createTopics(r *Request) {
	if s.forwardToLeader(r) {
		return
	}
	s.async(r, func() kmsg.Response {
		req := r.Msg.(*kmsg.CreateTopicsRequest)
		resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
		seen := map[string]int{}
		for _, rt := range req.Topics {
			seen[rt.Topic]++
		}
		// Kafka refuses a request over its batch limit whole (limits.go).
		tooMany := s.requestedPartitions(req, seen)
		quota := s.mutationQuotaFor(r, 6)
		for _, rt := range req.Topics {
			ot := kmsg.NewCreateTopicsResponseTopic()
			ot.Topic = rt.Topic
			ot.NumPartitions, ot.ReplicationFactor = -1, -1
			if seen[rt.Topic] > 1 {
				ot.ErrorCode = kerr.InvalidRequest.Code
				msg := fmt.Sprintf("topic '%s' appears more than once in the request", rt.Topic)
				ot.ErrorMessage = &msg
				resp.Topics = append(resp.Topics, ot)
				continue
			}
			// Kafka's check: CREATE on the cluster, or on the topic.
			if s.authz != nil && !s.authorizedQuiet(r, acls.Create, acls.Cluster, acls.ClusterName) && !s.authorized(r, acls.Create, acls.Topic, rt.Topic) {
				ot.ErrorCode = kerr.TopicAuthorizationFailed.Code
				msg := "not authorized to create topic '" + rt.Topic + "'"
				ot.ErrorMessage = &msg
				resp.Topics = append(resp.Topics, ot)
				continue
			}
			if isInternalTopic(rt.Topic) {
				// The internal topics always exist (internal_topics.go).
				ot.ErrorCode = kerr.TopicAlreadyExists.Code
				ot.ErrorMessage = kmsg.StringPtr("Topic '" + rt.Topic + "' already exists.")
				resp.Topics = append(resp.Topics, ot)
				continue
			}
			if tooMany != nil {
				ot.ErrorCode, ot.ErrorMessage = errorCode(tooMany), errorMessage(tooMany)
				resp.Topics = append(resp.Topics, ot)
				continue
			}
			var taken int
			if !req.ValidateOnly && s.topics.Get(rt.Topic) == nil {
				taken = s.topicPartitions(rt)
				if err := quota.take(taken); err != nil {
					ot.ErrorCode, ot.ErrorMessage = errorCode(err), errorMessage(err)
					resp.Topics = append(resp.Topics, ot)
					continue
				}
			}
			t, err := s.createTopic(rt, req.ValidateOnly)
			if err != nil {
				quota.giveBack(taken)
				ot.ErrorCode, ot.ErrorMessage = errorCode(err), errorMessage(err)
				resp.Topics = append(resp.Topics, ot)
				continue
			}
			ot.TopicID = t.ID
			ot.NumPartitions = int32(len(t.Partitions))
			// Every voter holds every partition.
			ot.ReplicationFactor = int16(len(s.cluster.Voters()))
			for _, e := range logconfig.DescribeTopic(t.Configs, s.topics.Broker()) {
				c := kmsg.NewCreateTopicsResponseTopicConfig()
				c.Name = e.Name
				if !e.Null {
					v := e.Value
					c.Value = &v
				}
				c.ReadOnly, c.Source, c.IsSensitive = e.ReadOnly, int8(e.Source), e.Sensitive
				if e.Sensitive {
					c.Value = nil
				}
				ot.Configs = append(ot.Configs, c)
			}
			resp.Topics = append(resp.Topics, ot)
		}
		resp.ThrottleMillis = max(resp.ThrottleMillis, quota.done())
		return resp
	})
}

// requestedPartitions refuses a request that would add more partitions
// than topics.MaxPartitionsPerRequest (counting each topic once, the
// broker's num.partitions for -1): nil, or the error every topic gets.
func (s *Server) requestedPartitions(req *kmsg.CreateTopicsRequest, seen map[string]int) error {
	var n int64
	for _, rt := range req.Topics {
		if seen[rt.Topic] == 1 && !isInternalTopic(rt.Topic) {
			n += int64(s.topicPartitions(rt))
		}
	}
	if n > topics.MaxPartitionsPerRequest {
		return topics.ErrTooManyPartitionsPerRequest(n)
	}
	return nil
}

// topicPartitions is the number of partitions rt asks for: its manual
// assignment's, else its count, the broker's num.partitions for -1.
func (s *Server) topicPartitions(rt kmsg.CreateTopicsRequestTopic) int {
	switch {
	case len(rt.ReplicaAssignment) > 0:
		return len(rt.ReplicaAssignment)
	case rt.NumPartitions == -1:
		return int(topics.NumPartitions(s.topics.Broker()))
	case rt.NumPartitions > 0:
		return int(rt.NumPartitions)
	}
	return 0
}

func (s *Server) createTopic(rt kmsg.CreateTopicsRequestTopic, validateOnly bool) (*topics.Topic, error) {
	parts, rf := rt.NumPartitions, rt.ReplicationFactor
	if len(rt.ReplicaAssignment) > 0 {
		if parts != -1 || rf != -1 {
			return nil, &topics.Error{Code: kerr.InvalidRequest, Msg: "both numPartitions or replicationFactor and replicasAssignments were set; only one may be"}
		}
		for i, a := range rt.ReplicaAssignment {
			if a.Partition != int32(i) {
				return nil, &topics.Error{Code: kerr.InvalidReplicaAssignment, Msg: "partitions in the manual assignment must be consecutive from 0"}
			}
			if err := s.checkAssignment(a.Replicas); err != nil {
				return nil, &topics.Error{Code: kerr.InvalidReplicaAssignment, Msg: fmt.Sprintf("replica assignment for partition %d: %v", a.Partition, err)}
			}
			if i > 0 && len(a.Replicas) != len(rt.ReplicaAssignment[0].Replicas) {
				return nil, &topics.Error{Code: kerr.InvalidReplicaAssignment, Msg: "every partition in the manual assignment must have the same number of replicas"}
			}
		}
		parts, rf = int32(len(rt.ReplicaAssignment)), int16(len(rt.ReplicaAssignment[0].Replicas))
	}
	configs := make(map[string]*string, len(rt.Configs))
	for _, c := range rt.Configs {
		configs[c.Name] = c.Value
	}
	var assignments [][]int32
	for _, a := range rt.ReplicaAssignment {
		assignments = append(assignments, a.Replicas)
	}
	return s.topics.Create(topics.CreateSpec{Name: rt.Topic, Partitions: parts, ReplicationFactor: rf, Configs: configs, ValidateOnly: validateOnly, Assignments: assignments})
}

// checkAssignment accepts a manual replica assignment that names distinct
// voters: every voter holds every partition, so an assignment only says
// how many replicas the client expects.
func (s *Server) checkAssignment(replicas []int32) error {
	if len(replicas) == 0 {
		return fmt.Errorf("no replicas")
	}
	seen := map[int32]bool{}
	for _, b := range replicas {
		if !s.isVoter(b) || seen[b] {
			return fmt.Errorf("%v names brokers other than the distinct voters %v", replicas, s.cluster.Voters())
		}
		seen[b] = true
	}
	return nil
}
