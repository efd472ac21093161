package protocol

import (
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/actors/clientmetrics"
)

// TestClientMetricsConfigsAuthorization: CLIENT_METRICS resources are
// described and altered under the cluster's DESCRIBE_CONFIGS and
// ALTER_CONFIGS, as Kafka authorizes them.
func TestClientMetricsConfigsAuthorization(t *testing.T) {
	var allowAll atomic.Bool
	s, store, _ := aclServer(t, &allowAll)
	cm, err := clientmetrics.Open(clientmetrics.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer cm.Close()
	s.SetClientMetrics(cm, nil, nil)

	alter := func() int16 {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeClientMetrics, "s"
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = "metrics", kmsg.StringPtr("org.apache.kafka.")
		rr.Configs = append(rr.Configs, c)
		req.Resources = append(req.Resources, rr)
		return call[*kmsg.IncrementalAlterConfigsResponse](t, s, req).Resources[0].ErrorCode
	}
	describe := func() kmsg.DescribeConfigsResponseResource {
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.Version = 4
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeClientMetrics, "s"
		req.Resources = append(req.Resources, rr)
		return call[*kmsg.DescribeConfigsResponse](t, s, req).Resources[0]
	}
	if code := alter(); code != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("alter without ALTER_CONFIGS: %v", kerr.ErrorForCode(code))
	}
	if d := describe(); d.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("describe without DESCRIBE_CONFIGS: %v", kerr.ErrorForCode(d.ErrorCode))
	}
	for _, op := range []kmsg.ACLOperation{acls.AlterConfigs, acls.DescribeConfigs} {
		if err := store.Create([]acls.ACL{anon(acls.Cluster, acls.Literal, acls.ClusterName, op, acls.Allow)}); err != nil {
			t.Fatal(err)
		}
	}
	if code := alter(); code != 0 {
		t.Fatalf("alter with ALTER_CONFIGS: %v", kerr.ErrorForCode(code))
	}
	d := describe()
	if d.ErrorCode != 0 || len(d.Configs) != 1 || d.Configs[0].Name != "metrics" || *d.Configs[0].Value != "org.apache.kafka." ||
		d.Configs[0].Source != kmsg.ConfigSourceClientMetricsConfig {
		t.Fatalf("describe: %+v", d)
	}
}
