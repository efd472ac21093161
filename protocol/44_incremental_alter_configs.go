package protocol

// IncrementalAlterConfigs: versions 0-1. SET, DELETE, APPEND and SUBTRACT
// (the last two on list-typed keys), on topics, brokers, client-metrics
// subscriptions (configs_client_metrics.go) and groups
// (configs_group.go). A cluster
// follower forwards the request to the leader (forward.go).

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/storage/logconfig"
)

func init() { register(44, 0, 1, (*Server).incrementalAlterConfigs) }

func (s *Server) incrementalAlterConfigs(r *Request) {
	if s.forwardToLeader(r) {
		return
	}
	s.async(r, func() kmsg.Response {
		req := r.Msg.(*kmsg.IncrementalAlterConfigsRequest)
		resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
		for _, rr := range req.Resources {
			or := kmsg.NewIncrementalAlterConfigsResponseResource()
			or.ResourceType, or.ResourceName = rr.ResourceType, rr.ResourceName
			ops := make([]logconfig.Op, 0, len(rr.Configs))
			for _, c := range rr.Configs {
				ops = append(ops, logconfig.Op{Key: c.Name, Value: c.Value, Op: int8(c.Op)})
			}
			err := s.configAuthError(r, rr.ResourceType, rr.ResourceName, acls.AlterConfigs)
			switch {
			case err != nil:
			case rr.ResourceType == kmsg.ConfigResourceTypeTopic:
				t := s.topics.Get(rr.ResourceName)
				if t == nil {
					err = &kerrMsg{kerr.UnknownTopicOrPartition, fmt.Sprintf("topic '%s' does not exist", rr.ResourceName)}
					break
				}
				var next map[string]string
				next, err = logconfig.Incremental(t.Configs, ops)
				if err != nil {
					err = &kerrMsg{kerr.InvalidConfig, err.Error()}
					break
				}
				err = s.topics.SetConfigs(rr.ResourceName, next, req.ValidateOnly)
			case rr.ResourceType == kmsg.ConfigResourceTypeBroker:
				configs := map[string]*string{}
				var deletes []string
				for _, op := range ops {
					switch op.Op {
					case 0:
						configs[op.Key] = op.Value
					case 1:
						deletes = append(deletes, op.Key)
					default:
						err = &kerrMsg{kerr.InvalidConfig, fmt.Sprintf("APPEND and SUBTRACT are not supported on broker config %s", op.Key)}
					}
				}
				if err == nil {
					err = s.alterBrokerConfigs(rr.ResourceName, configs, deletes, req.ValidateOnly)
				}
			case rr.ResourceType == kmsg.ConfigResourceTypeClientMetrics:
				err = s.alterClientMetrics(r, rr.ResourceName, rr.Configs, req.ValidateOnly)
			case rr.ResourceType == kmsg.ConfigResourceTypeGroupConfig:
				err = s.alterGroupConfigs(r, rr.ResourceName, rr.Configs, req.ValidateOnly)
			default:
				err = &kerrMsg{kerr.InvalidRequest, fmt.Sprintf("resource type %d is not supported by Regent", rr.ResourceType)}
			}
			if err != nil {
				or.ErrorCode, or.ErrorMessage = errorCode(err), errorMessage(err)
			}
			resp.Resources = append(resp.Resources, or)
		}
		return resp
	})
}
