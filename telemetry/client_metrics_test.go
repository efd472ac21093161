package telemetry

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/protobuf/proto"

	"github.com/regent-broker/regent/interop/testwait"
	"github.com/regent-broker/regent/protocol"
)

func clientPayload(t *testing.T, forgedID string) []byte {
	t.Helper()
	md := &metricspb.MetricsData{ResourceMetrics: []*metricspb.ResourceMetrics{{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{
			{Key: "client_id", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: forgedID}}},
		}},
		ScopeMetrics: []*metricspb.ScopeMetrics{{Metrics: []*metricspb.Metric{{Name: "org.apache.kafka.producer.record.send.total"}}}},
	}}}
	raw, err := proto.Marshal(md)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestClientMetricsForwarderHTTP(t *testing.T) {
	var mu sync.Mutex
	var got []*colmetricspb.ExportMetricsServiceRequest
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req := new(colmetricspb.ExportMetricsServiceRequest)
		if err := proto.Unmarshal(body, req); err != nil || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		mu.Lock()
		got, paths = append(got, req), append(paths, r.URL.Path)
		mu.Unlock()
	}))
	defer srv.Close()
	var tel *Telemetry // forwarding needs no other telemetry
	// A traces URL (as --otel-endpoint holds for otlp-http) is turned to
	// the metrics path.
	f, err := tel.NewClientMetricsForwarder(ClientMetricsConfig{Exporter: ExporterOTLPHTTP, Endpoint: srv.URL + "/v1/traces", BrokerID: "3"})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	meta := protocol.ClientTelemetryMeta{ClientID: "p1", ClientInstanceID: "abc", Principal: "User:alice", SourceAddress: "127.0.0.1", SourcePort: "5000", SoftwareName: "apache-kafka-java"}
	if err := f.ExportClientMetrics(meta, clientPayload(t, "forged")); err != nil {
		t.Fatal(err)
	}
	if err := f.ExportClientMetrics(meta, []byte{0xff, 0xff, 0xff}); err == nil {
		t.Fatal("garbage decoded")
	}
	testwait.For(t, "the export at the receiver", 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == 1 && f.Stats().Forwarded == 1
	})
	mu.Lock()
	defer mu.Unlock()
	if paths[0] != "/v1/metrics" {
		t.Fatalf("posted to %s", paths[0])
	}
	attrs := map[string]string{}
	for _, kv := range got[0].ResourceMetrics[0].Resource.Attributes {
		if _, dup := attrs[kv.Key]; dup {
			t.Fatalf("attribute %s twice", kv.Key)
		}
		attrs[kv.Key] = kv.Value.GetStringValue()
	}
	want := map[string]string{"client_id": "p1", "client_instance_id": "abc", "principal": "User:alice", "client_source_address": "127.0.0.1",
		"client_source_port": "5000", "client_software_name": "apache-kafka-java", "broker_id": "3"}
	for k, v := range want {
		if attrs[k] != v {
			t.Errorf("%s = %q, want %q (all %v)", k, attrs[k], v, attrs)
		}
	}
	if _, ok := attrs["client_software_version"]; ok {
		t.Error("an empty label was sent")
	}
	if s := f.Stats(); s.Forwarded != 1 || s.Invalid != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func TestClientMetricsForwarderDropsWhenFull(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-block }))
	defer srv.Close()
	defer close(block)
	var tel *Telemetry
	payload := clientPayload(t, "x")
	f, err := tel.NewClientMetricsForwarder(ClientMetricsConfig{Exporter: ExporterOTLPHTTP, Endpoint: srv.URL, MaxQueuedBytes: int64(3 * len(payload)), Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	meta := protocol.ClientTelemetryMeta{ClientID: "p"}
	// One is taken by the blocked sender, three fill the queue's bytes, the
	// rest are dropped; ExportClientMetrics never blocks.
	for i := 0; i < 20; i++ {
		if err := f.ExportClientMetrics(meta, payload); err != nil {
			t.Fatal(err)
		}
	}
	if s := f.Stats(); s.Dropped < 16 || s.Dropped > 17 {
		t.Fatalf("dropped %d of 20 with room for 3 queued (+1 in flight)", s.Dropped)
	}
}
