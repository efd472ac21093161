package interop_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
)

// TestClusterClientMetricsSubscriptions: a CLIENT_METRICS subscription
// altered at a follower of a 3-node cluster (forwarded to the leader,
// replicated through raft) is described and served by every node: a client
// of each gets the subscription from GetTelemetrySubscriptions there and
// its push reaches the OTLP receiver labelled with that node's id. A
// follower killed and restarted keeps it.
func TestClusterClientMetricsSubscriptions(t *testing.T) {
	skipClusterInShort(t)
	sink := &clientMetricsSink{byName: map[string]map[string]string{}}
	recv := startOTLPMetricsGRPC(t, sink)
	c := brokertest.StartCluster(t, 3, "--client-telemetry-exporter", "otlp-grpc", "--client-telemetry-endpoint", recv)
	ctx, cancel := context.WithTimeout(context.Background(), clusterTestTimeout)
	defer cancel()
	leader := c.LeaderID(t)
	f := followerOf(c, leader)

	// Each node's own client; requests are pinned to that node (kgo
	// sends these to any broker, and Metadata names all three).
	clients := map[int32]*kgo.Client{}
	for _, id := range c.IDs() {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Node(id).Addr), kgo.ClientID("cluster-telemetry-"+strconv.Itoa(int(id))))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		clients[id] = cl
	}
	tryOnNode := func(id int32, req kmsg.Request) (kmsg.Response, error) {
		return clients[id].Broker(int(id)).Request(ctx, req)
	}
	onNode := func(id int32, req kmsg.Request) kmsg.Response {
		t.Helper()
		resp, err := tryOnNode(id, req)
		if err != nil {
			t.Fatalf("node %d: %v", id, err)
		}
		return resp
	}

	areq := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeClientMetrics, "everything"
	for k, v := range map[string]string{"metrics": "test.cluster.", "interval.ms": "100"} {
		cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Value = k, kmsg.StringPtr(v)
		rr.Configs = append(rr.Configs, cfg)
	}
	areq.Resources = append(areq.Resources, rr)
	aresp := onNode(f, areq).(*kmsg.IncrementalAlterConfigsResponse)
	if code := aresp.Resources[0].ErrorCode; code != 0 {
		t.Fatalf("alter at follower %d: error %d %v", f, code, aresp.Resources[0].ErrorMessage)
	}

	described := func(id int32) bool {
		dreq := kmsg.NewPtrDescribeConfigsRequest()
		dr := kmsg.NewDescribeConfigsRequestResource()
		dr.ResourceType, dr.ResourceName = kmsg.ConfigResourceTypeClientMetrics, "everything"
		dreq.Resources = append(dreq.Resources, dr)
		raw, err := tryOnNode(id, dreq)
		if err != nil {
			return false // a node restarting
		}
		resp := raw.(*kmsg.DescribeConfigsResponse)
		return len(resp.Resources) == 1 && len(resp.Resources[0].Configs) == 2
	}
	for _, id := range c.IDs() {
		testwait.For(t, "the subscription described at node "+strconv.Itoa(int(id)), 20*time.Second, func() bool { return described(id) })
		greq := kmsg.NewPtrGetTelemetrySubscriptionsRequest()
		g := onNode(id, greq).(*kmsg.GetTelemetrySubscriptionsResponse)
		if g.ErrorCode != 0 || !slices.Equal(g.RequestedMetrics, []string{"test.cluster."}) || g.PushIntervalMillis != 100 {
			t.Fatalf("node %d: get %+v", id, g)
		}
		preq := kmsg.NewPtrPushTelemetryRequest()
		preq.ClientInstanceID, preq.SubscriptionID = g.ClientInstanceID, g.SubscriptionID
		preq.Metrics = otlpGauge(t, "test.cluster.node"+strconv.Itoa(int(id)))
		if p := onNode(id, preq).(*kmsg.PushTelemetryResponse); p.ErrorCode != 0 {
			t.Fatalf("node %d: push error %d", id, p.ErrorCode)
		}
	}
	for _, id := range c.IDs() {
		name := "test.cluster.node" + strconv.Itoa(int(id))
		testwait.For(t, name+" at the receiver", 20*time.Second, func() bool {
			n, _, _ := sink.find(name)
			return n != ""
		})
		if _, attrs, _ := sink.find(name); attrs["broker_id"] != strconv.Itoa(int(id)) {
			t.Errorf("%s: broker_id %q", name, attrs["broker_id"])
		}
	}

	// A follower killed and restarted reads the subscription back (its
	// state directory, or the raft log it replays).
	c.Kill(f)
	c.Restart(f)
	testwait.For(t, "the subscription at the restarted follower", 60*time.Second, func() bool { return described(f) })
}
