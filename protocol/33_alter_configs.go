package protocol

// AlterConfigs: versions 0-2. Replaces a resource's whole set of overrides
// (Kafka's legacy semantics). Topics, brokers and groups
// (configs_group.go). A cluster follower
// forwards the request to the leader (forward.go).

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/storage/logconfig"
)

func init() { register(33, 0, 2, (*Server).alterConfigs) }

func (s *Server) alterConfigs(r *Request) {
	if s.forwardToLeader(r) {
		return
	}
	s.async(r, func() kmsg.Response {
		req := r.Msg.(*kmsg.AlterConfigsRequest)
		resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
		for _, rr := range req.Resources {
			or := kmsg.NewAlterConfigsResponseResource()
			or.ResourceType, or.ResourceName = rr.ResourceType, rr.ResourceName
			configs := map[string]*string{}
			for _, c := range rr.Configs {
				configs[c.Name] = c.Value
			}
			err := s.configAuthError(r, rr.ResourceType, rr.ResourceName, acls.AlterConfigs)
			switch {
			case err != nil:
			case rr.ResourceType == kmsg.ConfigResourceTypeTopic:
				err = s.alterTopicConfigs(rr.ResourceName, configs, req.ValidateOnly)
			case rr.ResourceType == kmsg.ConfigResourceTypeBroker:
				err = s.alterBrokerConfigs(rr.ResourceName, configs, nil, req.ValidateOnly)
			case rr.ResourceType == kmsg.ConfigResourceTypeGroupConfig:
				err = s.replaceGroupConfigs(r, rr.ResourceName, configs, req.ValidateOnly)
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

func (s *Server) alterTopicConfigs(name string, configs map[string]*string, validateOnly bool) error {
	if s.topics.Get(name) == nil {
		return &kerrMsg{kerr.UnknownTopicOrPartition, fmt.Sprintf("topic '%s' does not exist", name)}
	}
	if err := logconfig.Validate(configs); err != nil {
		return &kerrMsg{kerr.InvalidConfig, err.Error()}
	}
	next := map[string]string{}
	for k, v := range configs {
		if v != nil {
			next[k] = *v
		}
	}
	return s.topics.SetConfigs(name, next, validateOnly)
}

// alterBrokerConfigs sets configs and removes deletes (IncrementalAlterConfigs'
// DELETE; AlterConfigs has none, and a null value in configs is refused).
func (s *Server) alterBrokerConfigs(name string, configs map[string]*string, deletes []string, validateOnly bool) error {
	if err := s.checkBrokerResource(name); err != nil {
		return err
	}
	if err := logconfig.ValidateBroker(configs); err != nil {
		return &kerrMsg{kerr.InvalidConfig, err.Error()}
	}
	if err := logconfig.ValidateBrokerDeletes(deletes); err != nil {
		return &kerrMsg{kerr.InvalidConfig, err.Error()}
	}
	if validateOnly {
		return nil
	}
	b := s.topics.Broker()
	next := logconfig.Broker{Overrides: map[string]string{}, Static: b.Static}
	for k, v := range b.Overrides {
		next.Overrides[k] = v
	}
	for k, v := range configs {
		next.Overrides[k] = *v
	}
	// A deleted runtime value falls back to the one given at start, as
	// Kafka's dynamic configs fall back to server.properties.
	for _, k := range deletes {
		if v, ok := b.Static[k]; ok {
			next.Overrides[k] = v
		} else {
			delete(next.Overrides, k)
		}
	}
	return s.topics.SetBroker(next)
}
