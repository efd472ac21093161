package interop_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/regent-broker/regent/interop/brokertest"
)

// spanSink collects the spans an OTLP receiver decodes.
type spanSink struct {
	mu       sync.Mutex
	spans    []*tracepb.Span
	services map[string]bool
}

func (s *spanSink) add(req *coltracepb.ExportTraceServiceRequest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.services == nil {
		s.services = map[string]bool{}
	}
	for _, rs := range req.GetResourceSpans() {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				s.services[kv.GetValue().GetStringValue()] = true
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			s.spans = append(s.spans, ss.GetSpans()...)
		}
	}
}

func (s *spanSink) snapshot() ([]*tracepb.Span, map[string]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	svc := map[string]bool{}
	for k, v := range s.services {
		svc[k] = v
	}
	return append([]*tracepb.Span(nil), s.spans...), svc
}

// startOTLPHTTP runs an OTLP/HTTP receiver (protobuf) on loopback and
// returns its host:port.
func startOTLPHTTP(t *testing.T, sink *spanSink) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/traces", func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		raw, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if ct := r.Header.Get("Content-Type"); ct != "application/x-protobuf" {
			http.Error(w, "content type "+ct, http.StatusUnsupportedMediaType)
			return
		}
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(raw, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		sink.add(&req)
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// grpcTraceService is an OTLP/gRPC trace receiver.
type grpcTraceService struct {
	coltracepb.UnimplementedTraceServiceServer
	sink *spanSink
}

func (g *grpcTraceService) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	g.sink.add(req)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func startOTLPGRPC(t *testing.T, sink *spanSink) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, &grpcTraceService{sink: sink})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

func spanAttrs(s *tracepb.Span) map[string]*commonpb.AnyValue {
	m := map[string]*commonpb.AnyValue{}
	for _, kv := range s.GetAttributes() {
		m[kv.GetKey()] = kv.GetValue()
	}
	return m
}

// produceTraced creates topic and produces n uncompressed records that
// carry a producer's W3C traceparent; it returns the producer's trace and
// span ids (hex).
func produceTraced(t *testing.T, addr, topic string, n int) (traceID, spanID string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := newAdmin(t, addr).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	traceID, spanID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("traced-%d", i)), Headers: []kgo.RecordHeader{
			{Key: "traceparent", Value: []byte("00-" + traceID + "-" + spanID + "-01")},
		}}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	return traceID, spanID
}

// findProduceTree waits for the span tree of the produce request whose
// partition span links to the producer's span.
func findProduceTree(t *testing.T, sink *spanSink, topic, traceID, spanID string) (root *tracepb.Span, children map[string][]*tracepb.Span, all []*tracepb.Span) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		spans, _ := sink.snapshot()
		byID := map[string]*tracepb.Span{}
		for _, s := range spans {
			byID[hex.EncodeToString(s.GetSpanId())] = s
		}
		for _, s := range spans {
			if s.GetName() != "partition.produce" {
				continue
			}
			linked := false
			for _, l := range s.GetLinks() {
				if hex.EncodeToString(l.GetTraceId()) == traceID && hex.EncodeToString(l.GetSpanId()) == spanID {
					linked = true
				}
			}
			if !linked {
				continue
			}
			root = byID[hex.EncodeToString(s.GetParentSpanId())]
			if root == nil {
				continue
			}
			children = map[string][]*tracepb.Span{}
			rootID := hex.EncodeToString(root.GetSpanId())
			for _, c := range spans {
				if hex.EncodeToString(c.GetParentSpanId()) == rootID {
					children[c.GetName()] = append(children[c.GetName()], c)
				}
			}
			// The response-write span ends with the request span, so a
			// tree with both is complete.
			if len(children["response.write"]) > 0 {
				return root, children, spans
			}
		}
		if time.Now().After(deadline) {
			var names []string
			for _, s := range spans {
				names = append(names, s.GetName())
			}
			t.Fatalf("no complete produce span tree linked to %s/%s within 60s; got %d spans: %v", traceID, spanID, len(spans), names)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func checkProduceTree(t *testing.T, sink *spanSink, topic, traceID, spanID string) {
	t.Helper()
	root, children, all := findProduceTree(t, sink, topic, traceID, spanID)
	if root.GetName() != "produce "+topic || root.GetKind() != tracepb.Span_SPAN_KIND_SERVER || len(root.GetParentSpanId()) != 0 {
		t.Fatalf("request span %q kind %v parent %x", root.GetName(), root.GetKind(), root.GetParentSpanId())
	}
	a := spanAttrs(root)
	for k, want := range map[string]string{
		"messaging.system":           "kafka",
		"messaging.operation.name":   "produce",
		"messaging.operation.type":   "send",
		"messaging.destination.name": topic,
		"rpc.method":                 "Produce",
		"rpc.system.name":            "kafka",
		"network.peer.address":       "127.0.0.1",
	} {
		if got := a[k].GetStringValue(); got != want {
			t.Errorf("request span %s = %q, want %q", k, got, want)
		}
	}
	if a["messaging.client.id"].GetStringValue() == "" || a["kafka.api.version"].GetIntValue() < 3 || a["network.peer.port"].GetIntValue() == 0 {
		t.Errorf("request span lacks client id, api version or peer port: %v", a)
	}
	for _, name := range []string{"socket.read", "request.decode", "partition.produce", "response.write"} {
		if len(children[name]) != 1 {
			t.Errorf("request span has %d %q children, want 1 (children: %v)", len(children[name]), name, children)
		}
	}
	ps := children["partition.produce"][0]
	pa := spanAttrs(ps)
	if pa["messaging.destination.name"].GetStringValue() != topic || pa["messaging.destination.partition.id"].GetStringValue() != "0" {
		t.Errorf("partition span attributes %v", pa)
	}
	if _, ok := pa["messaging.kafka.offset"]; !ok {
		t.Errorf("partition span has no messaging.kafka.offset: %v", pa)
	}
	var storage *tracepb.Span
	for _, s := range all {
		if bytes.Equal(s.GetParentSpanId(), ps.GetSpanId()) && s.GetName() == "storage.append" {
			storage = s
		}
	}
	if storage == nil {
		t.Fatal("no storage.append span under partition.produce")
	}
	// Phases nest in time inside the request and follow one another.
	within := func(s, in *tracepb.Span) bool {
		return s.GetStartTimeUnixNano() >= in.GetStartTimeUnixNano() && s.GetEndTimeUnixNano() <= in.GetEndTimeUnixNano()
	}
	dec, wr := children["request.decode"][0], children["response.write"][0]
	if !within(ps, root) || !within(storage, ps) || !within(dec, root) || !within(wr, root) ||
		dec.GetEndTimeUnixNano() > ps.GetStartTimeUnixNano() || ps.GetEndTimeUnixNano() > wr.GetStartTimeUnixNano() {
		t.Errorf("phases out of order: decode [%d,%d] partition [%d,%d] storage [%d,%d] write [%d,%d] request [%d,%d]",
			dec.GetStartTimeUnixNano(), dec.GetEndTimeUnixNano(), ps.GetStartTimeUnixNano(), ps.GetEndTimeUnixNano(),
			storage.GetStartTimeUnixNano(), storage.GetEndTimeUnixNano(), wr.GetStartTimeUnixNano(), wr.GetEndTimeUnixNano(),
			root.GetStartTimeUnixNano(), root.GetEndTimeUnixNano())
	}
	for _, s := range append([]*tracepb.Span{ps, storage, dec, wr}, children["socket.read"]...) {
		if !bytes.Equal(s.GetTraceId(), root.GetTraceId()) {
			t.Errorf("span %s in another trace", s.GetName())
		}
	}
	if _, svc := sink.snapshot(); !svc["regent"] {
		t.Errorf("resource service.name regent missing: %v", svc)
	}
}

// TestOTLPHTTPProduceSpanTree: an OTLP/HTTP receiver gets a produce
// request's whole span tree, linked to the producer's traceparent.
func TestOTLPHTTPProduceSpanTree(t *testing.T) {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100") // export promptly
	sink := &spanSink{}
	endpoint := startOTLPHTTP(t, sink)
	b := brokertest.Start(t, "--otel-exporter", "otlp-http", "--otel-endpoint", endpoint, "--otel-sample-ratio", "1")
	traceID, spanID := produceTraced(t, b.Addr, "traced-http", 5)
	checkProduceTree(t, sink, "traced-http", traceID, spanID)
}

// TestOTLPGRPCProduceSpanTree is the same through OTLP/gRPC, with the
// endpoint given as the environment variable.
func TestOTLPGRPCProduceSpanTree(t *testing.T) {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	sink := &spanSink{}
	endpoint := startOTLPGRPC(t, sink)
	t.Setenv("REGENT_OTEL_ENDPOINT", endpoint)
	t.Setenv("REGENT_OTEL_EXPORTER", "otlp-grpc")
	b := brokertest.Start(t)
	traceID, spanID := produceTraced(t, b.Addr, "traced-grpc", 3)
	checkProduceTree(t, sink, "traced-grpc", traceID, spanID)
}

// TestMetricsEndpointCountsRequests: with --metrics-listen (tracing off),
// /metrics serves the request counter, latency histogram and partition
// gauges.
func TestMetricsEndpointCountsRequests(t *testing.T) {
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", brokertest.FreePort(t))
	b := brokertest.Start(t, "--metrics-listen", metricsAddr)
	produceTraced(t, b.Addr, "metered", 4)

	// A request is counted when its response is written, which may trail
	// the client's view of it by a moment: poll.
	var text string
	produced, hw := -1.0, -1.0
	for deadline := time.Now().Add(10 * time.Second); produced < 1 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		text = scrape(t, metricsAddr)
		for _, line := range strings.Split(text, "\n") {
			if strings.HasPrefix(line, "regent_requests_total{") && strings.Contains(line, `api="Produce"`) {
				produced, _ = strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			}
			if strings.HasPrefix(line, "regent_partition_high_watermark{") && strings.Contains(line, `topic="metered"`) {
				hw, _ = strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			}
		}
	}
	if produced < 1 {
		t.Fatalf("regent_requests_total{api=\"Produce\"} = %v; /metrics:\n%s", produced, text)
	}
	if hw != 4 {
		t.Errorf("regent_partition_high_watermark{topic=\"metered\"} = %v, want 4", hw)
	}
	for _, want := range []string{`regent_request_duration_seconds_bucket{api="Produce"`, `regent_network_sent_bytes_total{api="Produce"`, `regent_partition_log_size_bytes{`, `regent_connections{`} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// Per-partition traffic (Kafka's per-topic bytes and messages in and
	// bytes out): the 4 records produced, then read twice by consumers.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range 2 {
		cl := newClient(t, kgo.SeedBrokers(b.Addr), kgo.ConsumeTopics("metered"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		for got := 0; got < 4; {
			fs := cl.PollFetches(ctx)
			if err := fs.Err0(); err != nil {
				t.Fatal(err)
			}
			got += fs.NumRecords()
		}
		cl.Close()
	}
	metered := func(text, name string) float64 {
		sum := 0.0
		for _, line := range strings.Split(text, "\n") {
			if strings.HasPrefix(line, name+"{") && strings.Contains(line, `topic="metered"`) {
				v, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
				sum += v
			}
		}
		return sum
	}
	var in, recs, out float64
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		text = scrape(t, metricsAddr)
		in, recs, out = metered(text, "regent_partition_produced_bytes_total"), metered(text, "regent_partition_produced_records_total"), metered(text, "regent_partition_fetched_bytes_total")
		if out >= 2*in && in > 0 {
			break
		}
	}
	if in <= 0 || recs != 4 || out < 2*in {
		t.Errorf("metered: produced %v bytes, %v records, fetched %v bytes: want 4 records, and their bytes fetched twice at least", in, recs, out)
	}
}
