package protocol

// ListConfigResources: versions 0-1 (v0 was ListClientMetricsResources,
// KIP-714; v1 lists any config resource type, KIP-1142). Kafka 4.3's
// kafka-configs calls it to list group and client-metrics resources and
// kafka-client-metrics --list calls it. As Kafka: DESCRIBE_CONFIGS on the
// cluster, v0 lists client-metrics resources only, v1 the requested types
// (none: all of topic, broker, broker logger, client metrics, group), and a
// type outside those answers UNSUPPORTED_VERSION.
//
// The answer lists the config resources Regent has: every topic (the
// internal ones included, as DescribeConfigs describes them) and every
// broker, the client-metrics subscriptions (configs_client_metrics.go) and
// the groups with config overrides (configs_group.go). It has no
// broker-logger resources (DescribeConfigs refuses them: the log level is
// set at start), so that type lists nothing.

import (
	"slices"
	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
)

func init() { register(74, 0, 1, (*Server).listConfigResources) }

// listableConfigTypes are the types Kafka lists at v1, in its order.
var listableConfigTypes = []kmsg.ConfigResourceType{
	kmsg.ConfigResourceTypeTopic,
	kmsg.ConfigResourceTypeBroker,
	kmsg.ConfigResourceTypeBrokerLogger,
	kmsg.ConfigResourceTypeClientMetrics,
	kmsg.ConfigResourceTypeGroupConfig,
}

func (s *Server) listConfigResources(r *Request) {
	req := r.Msg.(*kmsg.ListConfigResourcesRequest)
	resp := req.ResponseKind().(*kmsg.ListConfigResourcesResponse)
	if !s.authorizedCluster(r, acls.DescribeConfigs) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		r.Respond(resp)
		return
	}
	supported := listableConfigTypes
	if req.Version == 0 {
		supported = []kmsg.ConfigResourceType{kmsg.ConfigResourceTypeClientMetrics}
	}
	want := supported
	if len(req.ResourceTypes) > 0 {
		want = nil
		for _, rt := range req.ResourceTypes {
			t := kmsg.ConfigResourceType(rt)
			if !slices.Contains(supported, t) {
				resp.ErrorCode = kerr.UnsupportedVersion.Code
				r.Respond(resp)
				return
			}
			if !slices.Contains(want, t) {
				want = append(want, t)
			}
		}
	}
	add := func(t kmsg.ConfigResourceType, name string) {
		cr := kmsg.NewListConfigResourcesResponseConfigResource()
		cr.Name, cr.Type = name, int8(t)
		resp.ConfigResources = append(resp.ConfigResources, cr)
	}
	for _, t := range want {
		switch t {
		case kmsg.ConfigResourceTypeTopic:
			var names []string
			for _, tp := range s.topics.List() {
				names = append(names, tp.Name)
			}
			for _, it := range s.internalTopics() {
				names = append(names, it.Name)
			}
			sort.Strings(names)
			for _, n := range names {
				add(t, n)
			}
		case kmsg.ConfigResourceTypeBroker:
			for _, b := range s.cluster.Brokers() {
				add(t, strconv.Itoa(int(b.ID)))
			}
		case kmsg.ConfigResourceTypeClientMetrics:
			for _, n := range s.clientMetricsNames() {
				add(t, n)
			}
		case kmsg.ConfigResourceTypeGroupConfig:
			for _, n := range s.groupConfigNames() {
				add(t, n)
			}
		}
	}
	r.Respond(resp)
}
