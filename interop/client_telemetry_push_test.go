package interop_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/protobuf/proto"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
	"github.com/regent-broker/regent/storage/recordbatch"
)

// otlpGauge is a MetricsData with one gauge named name.
func otlpGauge(t *testing.T, name string) []byte {
	t.Helper()
	md := &metricspb.MetricsData{ResourceMetrics: []*metricspb.ResourceMetrics{{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{
			// A client claiming another's id: the broker's label wins.
			{Key: "client_id", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "forged"}}},
		}},
		ScopeMetrics: []*metricspb.ScopeMetrics{{Metrics: []*metricspb.Metric{{
			Name: name,
			Data: &metricspb.Metric_Gauge{Gauge: &metricspb.Gauge{DataPoints: []*metricspb.NumberDataPoint{{
				TimeUnixNano: uint64(time.Now().UnixNano()), Value: &metricspb.NumberDataPoint_AsInt{AsInt: 7},
			}}}},
		}}}},
	}}}
	raw, err := proto.Marshal(md)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestClientTelemetryProtocol drives GetTelemetrySubscriptions and
// PushTelemetry with raw requests: instance id assignment, subscription
// changes through IncrementalAlterConfigs, every accepted codec, and
// Kafka's refusals, with the pushed metrics checked at an OTLP receiver.
func TestClientTelemetryProtocol(t *testing.T) {
	sink := &clientMetricsSink{byName: map[string]map[string]string{}}
	recv := startOTLPMetricsGRPC(t, sink)
	metrics := fmt.Sprintf("127.0.0.1:%d", brokertest.FreePort(t))
	b := brokertest.Start(t, "--client-telemetry-exporter", "otlp-grpc", "--client-telemetry-endpoint", recv, "--telemetry-max-bytes", "4096", "--metrics-listen", metrics)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.ClientID("raw-telemetry"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	get := func(id [16]byte) *kmsg.GetTelemetrySubscriptionsResponse {
		t.Helper()
		req := kmsg.NewPtrGetTelemetrySubscriptionsRequest()
		req.ClientInstanceID = id
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	g := get([16]byte{})
	if g.ErrorCode != 0 || g.ClientInstanceID == [16]byte{} || len(g.RequestedMetrics) != 0 || g.PushIntervalMillis != 300000 || g.TelemetryMaxBytes != 4096 {
		t.Fatalf("first get, no subscription: %+v", g)
	}
	id := g.ClientInstanceID
	if g2 := get(id); g2.ErrorCode != kerr.ThrottlingQuotaExceeded.Code {
		t.Fatalf("second get at once: error %d, want THROTTLING_QUOTA_EXCEEDED", g2.ErrorCode)
	}

	// alter sets a CLIENT_METRICS resource's keys (nil value: delete).
	alter := func(name string, kv map[string]*string) (int16, string) {
		t.Helper()
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeClientMetrics, name
		for k, v := range kv {
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			c.Name, c.Value = k, v
			if v == nil {
				c.Op = kmsg.IncrementalAlterConfigOpDelete
			}
			rr.Configs = append(rr.Configs, c)
		}
		req.Resources = append(req.Resources, rr)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		msg := ""
		if m := resp.Resources[0].ErrorMessage; m != nil {
			msg = *m
		}
		return resp.Resources[0].ErrorCode, msg
	}
	str := func(s string) *string { return &s }
	if code, msg := alter("bad", map[string]*string{"interval.ms": str("50")}); code != kerr.InvalidConfig.Code {
		t.Fatalf("interval.ms=50: error %d %q, want INVALID_CONFIG", code, msg)
	}
	if code, msg := alter("bad", map[string]*string{"nope": str("1")}); code != kerr.InvalidRequest.Code {
		t.Fatalf("unknown key: error %d %q, want INVALID_REQUEST", code, msg)
	}
	if code, msg := alter("all", map[string]*string{"metrics": str("*"), "interval.ms": str("100"), "match": str("client_id=raw-.*")}); code != 0 {
		t.Fatalf("alter: error %d %q", code, msg)
	}
	lreq := kmsg.NewPtrListConfigResourcesRequest()
	lreq.ResourceTypes = []int8{int8(kmsg.ConfigResourceTypeClientMetrics)}
	listed, err := lreq.RequestWith(ctx, cl)
	if err != nil || len(listed.ConfigResources) != 1 || listed.ConfigResources[0].Name != "all" {
		t.Fatalf("listed %+v, %v", listed, err)
	}
	dreq := kmsg.NewPtrDescribeConfigsRequest()
	dr := kmsg.NewDescribeConfigsRequestResource()
	dr.ResourceType, dr.ResourceName = kmsg.ConfigResourceTypeClientMetrics, "all"
	dreq.Resources = append(dreq.Resources, dr)
	dresp, err := dreq.RequestWith(ctx, cl)
	if err != nil || len(dresp.Resources) != 1 || len(dresp.Resources[0].Configs) != 3 {
		t.Fatalf("describe: %+v %v", dresp, err)
	}

	// The subscription changed: the instance asks again, unthrottled.
	g = get(id)
	if g.ErrorCode != 0 || g.ClientInstanceID != id || !slices.Equal(g.RequestedMetrics, []string{"*"}) || g.PushIntervalMillis != 100 {
		t.Fatalf("get after the subscription: %+v", g)
	}
	if !slices.Equal(g.AcceptedCompressionTypes, []int8{4, 3, 1, 2}) || !g.DeltaTemporality {
		t.Fatalf("compression %v, delta %v", g.AcceptedCompressionTypes, g.DeltaTemporality)
	}

	// push sends one push, again while the broker says it came too early
	// (the interval is 100 ms), and returns the first other answer.
	push := func(mod func(*kmsg.PushTelemetryRequest)) int16 {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			req := kmsg.NewPtrPushTelemetryRequest()
			req.ClientInstanceID, req.SubscriptionID = id, g.SubscriptionID
			mod(req)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			if resp.ErrorCode != kerr.ThrottlingQuotaExceeded.Code || time.Now().After(deadline) {
				return resp.ErrorCode
			}
		}
	}
	for _, codec := range []int8{0, 1, 2, 3, 4} {
		name := fmt.Sprintf("test.codec.%d", codec)
		payload, err := recordbatch.Compress(codec, otlpGauge(t, name))
		if codec == 0 {
			payload, err = otlpGauge(t, name), nil
		}
		if err != nil {
			t.Fatal(err)
		}
		if code := push(func(r *kmsg.PushTelemetryRequest) { r.CompressionType, r.Metrics = codec, payload }); code != 0 {
			t.Fatalf("push with codec %d: error %d", codec, code)
		}
	}
	testwait.For(t, "every codec's gauge at the receiver", 20*time.Second, func() bool {
		_, _, n := sink.find("test.codec.")
		return n == 5
	})
	_, attrs, _ := sink.find("test.codec.4")
	// No client_software_name: kgo sends ApiVersions on its first
	// connection only, and these requests may use another.
	if attrs["client_id"] != "raw-telemetry" || attrs["principal"] != "User:ANONYMOUS" || attrs["client_instance_id"] == "" {
		t.Fatalf("labels %v", attrs)
	}

	for _, tc := range []struct {
		what string
		mod  func(*kmsg.PushTelemetryRequest)
		want *kerr.Error
	}{
		{"garbage", func(r *kmsg.PushTelemetryRequest) { r.Metrics = []byte("\xff\xff\xff not protobuf") }, kerr.InvalidRecord},
		{"bad gzip", func(r *kmsg.PushTelemetryRequest) { r.CompressionType, r.Metrics = 1, []byte("not gzip") }, kerr.InvalidRecord},
		{"unknown codec", func(r *kmsg.PushTelemetryRequest) { r.CompressionType, r.Metrics = 7, []byte{1} }, kerr.UnsupportedCompressionType},
		{"too large", func(r *kmsg.PushTelemetryRequest) { r.Metrics = make([]byte, 4097) }, kerr.TelemetryTooLarge},
		{"old subscription", func(r *kmsg.PushTelemetryRequest) { r.SubscriptionID++ }, kerr.UnknownSubscriptionID},
		{"zero instance", func(r *kmsg.PushTelemetryRequest) { r.ClientInstanceID = [16]byte{} }, kerr.InvalidRequest},
		{"terminating", func(r *kmsg.PushTelemetryRequest) { r.Terminating = true }, nil},
		{"after terminating", func(r *kmsg.PushTelemetryRequest) {}, kerr.InvalidRequest},
	} {
		want := int16(0)
		if tc.want != nil {
			want = tc.want.Code
		}
		if code := push(tc.mod); code != want {
			t.Errorf("%s: error %d, want %d", tc.what, code, want)
		}
	}

	// /metrics counts the pushes: 5 forwarded, 1 that did not decode (the
	// bad gzip failed to decompress, before the forwarder saw it).
	scrape := func() string {
		resp, err := http.Get("http://" + metrics + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body)
	}
	counted := map[string]string{}
	for _, line := range strings.Split(scrape(), "\n") {
		if !strings.HasPrefix(line, "regent_client_telemetry_pushes_total{") {
			continue
		}
		for _, o := range []string{"forwarded", "invalid", "dropped", "failed"} {
			if strings.Contains(line, `outcome="`+o+`"`) {
				counted[o] = line[strings.LastIndexByte(line, ' ')+1:]
			}
		}
	}
	if counted["forwarded"] != "5" || counted["invalid"] != "1" || counted["dropped"] != "0" || counted["failed"] != "0" {
		t.Errorf("/metrics pushes by outcome: %v, want 5 forwarded, 1 invalid", counted)
	}

	// Without an exporter the two APIs are not advertised.
	plain := brokertest.Start(t)
	pc, err := kgo.NewClient(kgo.SeedBrokers(plain.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	vs, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, pc)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range vs.ApiKeys {
		if k.ApiKey == 71 || k.ApiKey == 72 {
			t.Errorf("api key %d advertised without a client telemetry exporter", k.ApiKey)
		}
	}
}
