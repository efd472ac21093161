package protocol

// DescribeConfigs: versions 0-4 (v1+ sources and synonyms, v3+ types and
// documentation). Resources: topics (2; the internal ones too, with the
// overrides Kafka creates them with), brokers (4), client-metrics
// subscriptions (16, configs_client_metrics.go) and groups (32,
// configs_group.go). Broker loggers (8)
// are refused: Regent's log level is set at start, not per logger.

import (
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/storage/logconfig"
)

func init() { register(32, 0, 4, (*Server).describeConfigs) }

func (s *Server) describeConfigs(r *Request) {
	req := r.Msg.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range req.Resources {
		or := kmsg.NewDescribeConfigsResponseResource()
		or.ResourceType, or.ResourceName = rr.ResourceType, rr.ResourceName
		var entries []logconfig.Entry
		if err := s.configAuthError(r, rr.ResourceType, rr.ResourceName, acls.DescribeConfigs); err != nil {
			or.ErrorCode, or.ErrorMessage = errorCode(err), errorMessage(err)
			resp.Resources = append(resp.Resources, or)
			continue
		}
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			if it, ok := s.internalTopic(rr.ResourceName); ok {
				entries = logconfig.DescribeTopic(it.Configs, s.topics.Broker())
				break
			}
			t := s.topics.Get(rr.ResourceName)
			if t == nil {
				or.ErrorCode = kerr.UnknownTopicOrPartition.Code
				msg := fmt.Sprintf("topic '%s' does not exist", rr.ResourceName)
				or.ErrorMessage = &msg
				resp.Resources = append(resp.Resources, or)
				continue
			}
			entries = logconfig.DescribeTopic(t.Configs, s.topics.Broker())
		case kmsg.ConfigResourceTypeBroker:
			if err := s.checkBrokerResource(rr.ResourceName); err != nil {
				or.ErrorCode, or.ErrorMessage = errorCode(err), errorMessage(err)
				resp.Resources = append(resp.Resources, or)
				continue
			}
			entries = logconfig.DescribeBroker(s.topics.Broker(), rr.ResourceName != "")
		case kmsg.ConfigResourceTypeClientMetrics:
			s.describeClientMetrics(r, req, rr, &or)
			resp.Resources = append(resp.Resources, or)
			continue
		case kmsg.ConfigResourceTypeGroupConfig:
			s.describeGroupConfigs(r, req, rr, &or)
			resp.Resources = append(resp.Resources, or)
			continue
		default:
			or.ErrorCode = kerr.InvalidRequest.Code
			msg := fmt.Sprintf("resource type %d is not supported by Regent", rr.ResourceType)
			or.ErrorMessage = &msg
			resp.Resources = append(resp.Resources, or)
			continue
		}
		want := map[string]bool{}
		for _, n := range rr.ConfigNames {
			want[n] = true
		}
		for _, e := range entries {
			if len(want) > 0 && !want[e.Name] {
				continue
			}
			or.Configs = append(or.Configs, describeEntry(req, e))
		}
		resp.Resources = append(resp.Resources, or)
	}
	r.Respond(resp)
}

func describeEntry(req *kmsg.DescribeConfigsRequest, e logconfig.Entry) kmsg.DescribeConfigsResponseResourceConfig {
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name = e.Name
	if !e.Null && !e.Sensitive {
		v := e.Value
		c.Value = &v
	}
	c.ReadOnly, c.IsSensitive = e.ReadOnly, e.Sensitive
	c.Source = kmsg.ConfigSource(e.Source)
	c.IsDefault = e.Source == logconfig.Source(kmsg.ConfigSourceDefaultConfig)
	c.ConfigType = kmsg.ConfigType(e.Type)
	if req.IncludeDocumentation && e.Doc != "" {
		doc := e.Doc
		c.Documentation = &doc
	}
	if req.IncludeSynonyms {
		for _, syn := range e.Synonyms {
			cs := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			cs.Name, cs.Source = syn.Name, kmsg.ConfigSource(syn.Source)
			v := syn.Value
			cs.Value = &v
			c.ConfigSynonyms = append(c.ConfigSynonyms, cs)
		}
	}
	return c
}

// checkBrokerResource accepts "" (cluster default) or this node's id.
func (s *Server) checkBrokerResource(name string) error {
	if name == "" {
		return nil
	}
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil {
		return &kerrMsg{kerr.InvalidRequest, fmt.Sprintf("broker resource name %q is not a node id", name)}
	}
	if int32(id) != s.cfg.NodeID && !s.isVoter(int32(id)) {
		return &kerrMsg{kerr.InvalidRequest, fmt.Sprintf("broker %d is not a node of this cluster (voters %v)", id, s.cluster.Voters())}
	}
	return nil
}

// kerrMsg is a Kafka error with a specific message.
type kerrMsg struct {
	code *kerr.Error
	msg  string
}

func (e *kerrMsg) Error() string { return e.msg }
func (e *kerrMsg) Unwrap() error { return e.code }
