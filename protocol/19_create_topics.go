package protocol

// CreateTopics: versions 0-7 (v1+ validateOnly, v5+ configs echoed back,
// v7+ topic ids). Manual replica assignments are accepted when they name
// only voters; the replication factor may not exceed the number of voters.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/topics"
	"github.com/regent-broker/regent/storage/logconfig"
)

func init() { register(19, 0, 7, (*Server).createTopics) }

func (s *Server) createTopics(r *Request) {
	s.async(r, func() kmsg.Response {
		req := r.Msg.(*kmsg.CreateTopicsRequest)
		resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
		seen := map[string]int{}
		for _, rt := range req.Topics {
			seen[rt.Topic]++
		}
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
			t, err := s.createTopic(rt, req.ValidateOnly)
			if err != nil {
				ot.ErrorCode, ot.ErrorMessage = errorCode(err), errorMessage(err)
				resp.Topics = append(resp.Topics, ot)
				continue
			}
			ot.TopicID = t.ID
			ot.NumPartitions = int32(len(t.Partitions))
			ot.ReplicationFactor = 1
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
		return resp
	})
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
			if len(a.Replicas) != 1 || a.Replicas[0] != s.cfg.NodeID {
				return nil, &topics.Error{Code: kerr.InvalidReplicaAssignment, Msg: fmt.Sprintf("replica assignment %v for partition %d names brokers other than the voters [%d]", a.Replicas, a.Partition, s.cfg.NodeID)}
			}
		}
		parts, rf = int32(len(rt.ReplicaAssignment)), 1
	}
	configs := make(map[string]*string, len(rt.Configs))
	for _, c := range rt.Configs {
		configs[c.Name] = c.Value
	}
	return s.topics.Create(topics.CreateSpec{Name: rt.Topic, Partitions: parts, ReplicationFactor: rf, Configs: configs, ValidateOnly: validateOnly})
}
