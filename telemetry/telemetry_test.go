package telemetry

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/regent-broker/regent/actors/partition"
	"github.com/regent-broker/regent/protocol"
	"github.com/regent-broker/regent/storage/logconfig"
	"github.com/regent-broker/regent/storage/recordbatch"
)

const producerTraceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

// batch builds one record batch whose records carry headers.
func batch(t testing.TB, codec int8, n int, headers ...recordbatch.RecordHeader) []byte {
	t.Helper()
	recs := make([]recordbatch.Record, n)
	for i := range recs {
		recs[i] = recordbatch.Record{OffsetDelta: int32(i), Value: []byte("v"), KeyNull: true, Headers: headers}
	}
	b, err := recordbatch.Build(recordbatch.Header{Attributes: int16(codec), FirstTimestamp: time.Now().UnixMilli(), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func openPartition(t *testing.T) *partition.Partition {
	t.Helper()
	cfg, err := logconfig.Resolve(nil, logconfig.Broker{})
	if err != nil {
		t.Fatal(err)
	}
	sys := quietSystem()
	t.Cleanup(sys.Shutdown)
	p, err := partition.Open(sys.Root, partition.Options{Dir: t.TempDir(), Topic: "orders", Index: 2, Config: cfg, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(false) })
	return p
}

// quietSystem is an actor system that logs nothing.
func quietSystem() *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
}

type harness struct {
	spans  *tracetest.InMemoryExporter
	reader *sdkmetric.ManualReader
	obs    *observer
}

func newHarness(t *testing.T, tracing, metering bool) *harness {
	t.Helper()
	h := &harness{}
	var tr trace.Tracer
	if tracing {
		h.spans = tracetest.NewInMemoryExporter()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(h.spans))
		t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		tr = tp.Tracer("test")
	}
	var m *metrics
	if metering {
		h.reader = sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(h.reader))
		var err error
		if m, err = newMetrics(mp.Meter("test")); err != nil {
			t.Fatal(err)
		}
	}
	h.obs = newObserver(tr, m, 1)
	return h
}

// produce runs one produce request through the hooks as netio and the
// produce handler do, against a real partition actor.
func (h *harness) produce(t *testing.T, p *partition.Partition, records []byte) {
	t.Helper()
	req := protocol.NewRequest(protocol.Header{Key: 0, Version: 11, CorrelationID: 7, ClientID: "app-1"}, &kmsg.ProduceRequest{
		Version: 11, Acks: -1,
		Topics: []kmsg.ProduceRequestTopic{{Topic: p.Topic, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: p.Index, Records: records}}}},
	})
	req.Conn = &protocol.ConnInfo{ID: 1, RemoteAddr: "127.0.0.1:5555", LocalAddr: "127.0.0.1:9092"}
	read := time.Now()
	rt := h.obs.RequestStart(req, read, read.Add(time.Microsecond), read.Add(2*time.Microsecond), len(records)+40)
	req.SetTrace(rt)
	done := make(chan partition.ProduceResult, 1)
	var tr partition.Tracer
	if t := req.Tracer(); t != nil {
		tr = t
	}
	p.ProduceTraced(tr, records, -1, func(r partition.ProduceResult) { done <- r })
	select {
	case res := <-done:
		if res.Err != nil {
			t.Fatalf("produce: %v", res.Err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("produce not answered")
	}
	if rt != nil {
		rt.Responded(64)
		rt.Written(nil)
	}
}

func attrsOf(kvs []attribute.KeyValue) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	return m
}

func TestProduceSpanTree(t *testing.T) {
	h := newHarness(t, true, false)
	p := openPartition(t)
	h.produce(t, p, append(batch(t, recordbatch.CodecNone, 3, recordbatch.RecordHeader{Key: "traceparent", Value: []byte(producerTraceparent)}),
		batch(t, recordbatch.CodecNone, 2)...))

	spans := h.spans.GetSpans()
	byName := map[string]tracetest.SpanStub{}
	for _, s := range spans {
		byName[s.Name] = s
	}
	root, ok := byName["produce orders"]
	if !ok {
		t.Fatalf("no request span; spans: %v", names(spans))
	}
	if root.SpanKind != trace.SpanKindServer || root.Parent.IsValid() {
		t.Fatalf("request span kind %v parent %v", root.SpanKind, root.Parent)
	}
	a := attrsOf(root.Attributes)
	for k, want := range map[attribute.Key]string{
		"messaging.system": "kafka", "messaging.operation.name": "produce", "messaging.operation.type": "send",
		"messaging.destination.name": "orders", "messaging.destination.partition.id": "2", "messaging.client.id": "app-1",
		"rpc.method": "Produce", "rpc.system.name": "kafka", "network.peer.address": "127.0.0.1",
	} {
		if got := a[k].Emit(); got != want {
			t.Errorf("request span %s = %q, want %q", k, got, want)
		}
	}
	if a["kafka.api.version"].AsInt64() != 11 || a["network.peer.port"].AsInt64() != 5555 {
		t.Errorf("request span attributes %v", a)
	}
	want := map[string]string{ // child -> parent
		"socket.read": "produce orders", "request.decode": "produce orders", "partition.produce": "produce orders",
		"storage.append": "partition.produce", "response.write": "produce orders",
	}
	for child, parent := range want {
		c, ok := byName[child]
		if !ok {
			t.Errorf("no %s span; spans: %v", child, names(spans))
			continue
		}
		if c.Parent.SpanID() != byName[parent].SpanContext.SpanID() || c.SpanContext.TraceID() != root.SpanContext.TraceID() {
			t.Errorf("%s is not a child of %s", child, parent)
		}
		if c.StartTime.Before(root.StartTime) || c.EndTime.After(root.EndTime) {
			t.Errorf("%s [%v, %v] outside the request [%v, %v]", child, c.StartTime, c.EndTime, root.StartTime, root.EndTime)
		}
	}
	ps := byName["partition.produce"]
	pa := attrsOf(ps.Attributes)
	if pa["messaging.kafka.offset"].AsInt64() != 0 || pa["messaging.batch.message_count"].AsInt64() != 5 || pa["messaging.destination.partition.id"].AsString() != "2" {
		t.Errorf("partition span attributes %v", pa)
	}
	if len(ps.Links) != 1 || ps.Links[0].SpanContext.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" || ps.Links[0].SpanContext.SpanID().String() != "b7ad6b7169203331" {
		t.Fatalf("partition span links %+v, want one to the producer's traceparent", ps.Links)
	}

	// A second produce gets the next offset.
	h.spans.Reset()
	h.produce(t, p, batch(t, recordbatch.CodecNone, 1))
	for _, s := range h.spans.GetSpans() {
		if s.Name == "partition.produce" {
			if off := attrsOf(s.Attributes)["messaging.kafka.offset"].AsInt64(); off != 5 {
				t.Errorf("second produce offset %d, want 5", off)
			}
			if len(s.Links) != 0 {
				t.Errorf("links without traceparent: %v", s.Links)
			}
		}
	}
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

func TestLinksSkipCompressedBatches(t *testing.T) {
	tp := recordbatch.RecordHeader{Key: "traceparent", Value: []byte(producerTraceparent)}
	links, count, linked := recordLinks(batch(t, recordbatch.CodecLz4, 4, tp))
	if len(links) != 0 || count != 4 || linked != 0 {
		t.Fatalf("compressed: %d links, %d records, %d linked", len(links), count, linked)
	}
	// Many records of one producer span: one link, all counted.
	links, count, linked = recordLinks(append(batch(t, recordbatch.CodecNone, 4, tp), batch(t, recordbatch.CodecNone, 2, tp)...))
	if len(links) != 1 || count != 6 || linked != 6 {
		t.Fatalf("uncompressed: %d links, %d records, %d linked", len(links), count, linked)
	}
	// A bad traceparent or truncated input is ignored.
	bad := recordbatch.RecordHeader{Key: "traceparent", Value: []byte("00-zz-yy-01")}
	b := batch(t, recordbatch.CodecNone, 1, bad)
	if links, _, linked := recordLinks(b[:len(b)-3]); len(links) != 0 || linked != 0 {
		t.Fatal("truncated batch linked")
	}
	if links, _, _ := recordLinks(b); len(links) != 0 {
		t.Fatal("bad traceparent linked")
	}
}

func TestUnsampledRequestsAreNotTraced(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	obs := newObserver(tp.Tracer("test"), nil, sampleRatio(-1))
	req := protocol.NewRequest(protocol.Header{Key: 3, Version: 12}, &kmsg.MetadataRequest{Version: 12})
	now := time.Now()
	if rt := obs.RequestStart(req, now, now, now, 20); rt != nil {
		t.Fatalf("unsampled request without metrics got a trace handle %T", rt)
	}
	// At 1%, about 1% of requests are traced.
	obs = newObserver(tp.Tracer("test"), nil, 0.01)
	traced := 0
	for i := 0; i < 20000; i++ {
		if rt := obs.RequestStart(req, now, now, now, 20); rt != nil {
			traced++
			rt.Responded(10)
			rt.Written(nil)
		}
	}
	if traced < 100 || traced > 320 {
		t.Errorf("%d of 20000 requests traced at 1%%", traced)
	}
	if n := len(exp.GetSpans()); n != traced*4 {
		t.Errorf("%d spans for %d traced requests, want 4 each", n, traced)
	}
	exp.Reset()
	if newObserver(nil, nil, 1) != nil {
		t.Fatal("observer with neither tracing nor metrics")
	}
	if len(exp.GetSpans()) != 0 {
		t.Fatal("spans exported")
	}
}

func TestRequestMetrics(t *testing.T) {
	h := newHarness(t, false, true)
	p := openPartition(t)
	for i := 0; i < 3; i++ {
		h.produce(t, p, batch(t, recordbatch.CodecNone, 1))
	}
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					if api, _ := dp.Attributes.Value("api"); api.AsString() != "Produce" {
						t.Errorf("%s api %q", m.Name, api.AsString())
					}
					if m.Name == metricRequests && dp.Value != 3 {
						t.Errorf("requests = %d, want 3", dp.Value)
					}
					if m.Name == metricSent && dp.Value != 3*64 {
						t.Errorf("sent = %d, want %d", dp.Value, 3*64)
					}
				}
			case metricdata.Histogram[float64]:
				if d.DataPoints[0].Count != 3 {
					t.Errorf("duration count %d", d.DataPoints[0].Count)
				}
			}
			found[m.Name] = true
		}
	}
	for _, n := range []string{metricRequests, metricRequestDuration, metricReceived, metricSent} {
		if !found[n] {
			t.Errorf("metric %s missing (have %v)", n, found)
		}
	}
}

func TestMetricsEndpoint(t *testing.T) {
	tel, err := New(context.Background(), Config{MetricsListen: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	if tel.Observer() == nil {
		t.Fatal("metrics on but no observer")
	}
	p := openPartition(t)
	var lagCalled atomic.Bool
	tel.SetCommittedOffsets(func(emit func(string, string, int32, int64)) { emit("g1", p.Topic, p.Index, 0); lagCalled.Store(true) })
	if err := tel.ObserveBroker(Broker{ForEachPartition: func(fn func(*partition.Partition)) { fn(p) }, Connections: func() int64 { return 4 }}); err != nil {
		t.Fatal(err)
	}
	(&harness{obs: tel.obs}).produce(t, p, batch(t, recordbatch.CodecNone, 3))

	resp, err := http.Get("http://" + tel.MetricsAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(body)
	for _, want := range []string{
		`regent_requests_total{api="Produce"`,
		`regent_request_duration_seconds_bucket{api="Produce"`,
		`regent_network_received_bytes_total{api="Produce"`,
		`regent_partition_log_size_bytes{`,
		`regent_partition_high_watermark{`,
		`regent_connections{`,
		`regent_group_lag{`,
		`go_goroutines`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "regent_partition_high_watermark{") && !strings.HasSuffix(line, " 3") {
			t.Errorf("high watermark line %q, want 3", line)
		}
		if strings.HasPrefix(line, "regent_group_lag{") && (!strings.Contains(line, `group="g1"`) || !strings.HasSuffix(line, " 3")) {
			t.Errorf("lag line %q, want g1 lag 3", line)
		}
	}
	if !lagCalled.Load() {
		t.Error("committed-offsets hook not called")
	}
}

func TestOffByDefault(t *testing.T) {
	tel, err := New(context.Background(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	if tel.Observer() != nil || tel.MetricsAddr() != nil {
		t.Fatal("zero config observes")
	}
	if err := tel.ObserveBroker(Broker{}); err != nil {
		t.Fatal(err)
	}
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []Config{{Exporter: "zipkin"}, {SampleRatio: 2}, {MetricsListen: "nope"}} {
		if bad.Validate() == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func TestLogHandlerAddsTraceIDs(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(LogHandler(slog.NewJSONHandler(&buf, nil))).With("component", "x")
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	ctx, span := tp.Tracer("test").Start(context.Background(), "op")
	log.InfoContext(ctx, "traced")
	log.Info("plain")
	span.End()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("lines %q", lines)
	}
	sc := span.SpanContext()
	if !strings.Contains(lines[0], `"trace_id":"`+sc.TraceID().String()+`"`) || !strings.Contains(lines[0], `"span_id":"`+sc.SpanID().String()+`"`) || !strings.Contains(lines[0], `"component":"x"`) {
		t.Errorf("traced line %s", lines[0])
	}
	if strings.Contains(lines[1], "trace_id") {
		t.Errorf("plain line %s", lines[1])
	}
}

// BenchmarkRequestStart measures the observer's per-request cost.
func BenchmarkRequestStart(b *testing.B) {
	req := protocol.NewRequest(protocol.Header{Key: 3, Version: 12}, &kmsg.MetadataRequest{Version: 12})
	req.Conn = &protocol.ConnInfo{RemoteAddr: "127.0.0.1:5555"}
	run := func(b *testing.B, obs *observer) {
		now := time.Now()
		b.ReportAllocs()
		for b.Loop() {
			if rt := obs.RequestStart(req, now, now, now, 100); rt != nil {
				rt.Responded(50)
				rt.Written(nil)
			}
		}
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	m, _ := newMetrics(mp.Meter("b"))
	b.Run("metrics", func(b *testing.B) { run(b, newObserver(nil, m, 1)) })
	for _, ratio := range []float64{0, 0.01, 1} {
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
		b.Run(fmt.Sprintf("trace-ratio-%v", ratio), func(b *testing.B) {
			run(b, newObserver(tp.Tracer("b"), nil, ratio))
		})
		_ = tp.Shutdown(context.Background())
	}
}

// BenchmarkProduceTraced is one produce request's life through the hooks
// and a real partition: untraced ("off"), with metrics only, traced at 1%
// and at 100% (six spans) exporting over OTLP/HTTP to a local receiver that
// discards, or at 100% to no exporter ("noop").
func BenchmarkProduceTraced(b *testing.B) {
	for _, export := range []string{"off", "metrics", "otlp-http-1%", "otlp-http", "noop"} {
		b.Run(export, func(b *testing.B) {
			var exp sdktrace.SpanExporter = tracetest.NewNoopExporter()
			if strings.HasPrefix(export, "otlp-http") {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					_, _ = io.Copy(io.Discard, r.Body)
					w.Header().Set("Content-Type", "application/x-protobuf")
				}))
				defer srv.Close()
				var err error
				exp, err = newExporter(context.Background(), Config{Exporter: ExporterOTLPHTTP, Endpoint: strings.TrimPrefix(srv.URL, "http://")})
				if err != nil {
					b.Fatal(err)
				}
			}
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
			defer tp.Shutdown(context.Background())
			h := &harness{obs: newObserver(tp.Tracer("b"), nil, 1)}
			switch export {
			case "off":
				h.obs = nil
			case "otlp-http-1%":
				h.obs = newObserver(tp.Tracer("b"), nil, 0.01)
			case "metrics":
				mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
				m, err := newMetrics(mp.Meter("b"))
				if err != nil {
					b.Fatal(err)
				}
				h.obs = newObserver(nil, m, 1)
			}
			cfg, _ := logconfig.Resolve(nil, logconfig.Broker{})
			sys := quietSystem()
			defer sys.Shutdown()
			p, err := partition.Open(sys.Root, partition.Options{Dir: b.TempDir(), Topic: "orders", Index: 0, Config: cfg, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close(false)
			recs := batch(b, recordbatch.CodecNone, 1)
			b.ReportAllocs()
			for b.Loop() {
				h.produceB(b, p, append([]byte(nil), recs...))
			}
		})
	}
}

// produceB is produce for benchmarks.
func (h *harness) produceB(b *testing.B, p *partition.Partition, records []byte) {
	req := protocol.NewRequest(protocol.Header{Key: 0, Version: 11, CorrelationID: 7, ClientID: "app-1"}, &kmsg.ProduceRequest{
		Version: 11, Acks: -1,
		Topics: []kmsg.ProduceRequestTopic{{Topic: p.Topic, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: p.Index, Records: records}}}},
	})
	req.Conn = &protocol.ConnInfo{ID: 1, RemoteAddr: "127.0.0.1:5555"}
	var rt protocol.RequestTrace
	if h.obs != nil {
		read := time.Now()
		rt = h.obs.RequestStart(req, read, read, time.Now(), len(records)+40)
		req.SetTrace(rt)
	}
	done := make(chan struct{})
	var tr partition.Tracer
	if t := req.Tracer(); t != nil {
		tr = t
	}
	p.ProduceTraced(tr, records, -1, func(partition.ProduceResult) { close(done) })
	<-done
	if rt != nil {
		rt.Responded(64)
		rt.Written(nil)
	}
}
