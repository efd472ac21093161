package interop_test

import (
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	"google.golang.org/grpc"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
)

// clientMetricsSink is an OTLP/gRPC metrics receiver that keeps, per
// metric name, the resource attributes it came with.
type clientMetricsSink struct {
	colmetricspb.UnimplementedMetricsServiceServer
	mu      sync.Mutex
	byName  map[string]map[string]string
	exports int
}

func (s *clientMetricsSink) Export(_ context.Context, req *colmetricspb.ExportMetricsServiceRequest) (*colmetricspb.ExportMetricsServiceResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.exports++
	for _, rm := range req.GetResourceMetrics() {
		attrs := map[string]string{}
		for _, kv := range rm.GetResource().GetAttributes() {
			attrs[kv.GetKey()] = kv.GetValue().GetStringValue()
		}
		for _, sm := range rm.GetScopeMetrics() {
			for _, m := range sm.GetMetrics() {
				s.byName[m.GetName()] = attrs
			}
		}
	}
	return &colmetricspb.ExportMetricsServiceResponse{}, nil
}

// find returns a metric name with prefix and its resource attributes.
func (s *clientMetricsSink) find(prefix string) (string, map[string]string, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for n, a := range s.byName {
		if strings.HasPrefix(n, prefix) {
			return n, a, len(s.byName)
		}
	}
	return "", nil, len(s.byName)
}

func startOTLPMetricsGRPC(t *testing.T, sink *clientMetricsSink) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	colmetricspb.RegisterMetricsServiceServer(srv, sink)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

// TestClientTelemetryJavaProducer: KIP-714 end to end. A subscription made
// with kafka-client-metrics.sh (IncrementalAlterConfigs on a
// CLIENT_METRICS resource), then Kafka's own Java producer and consumer
// (the perf tools' KafkaProducer and KafkaConsumer, enable.metrics.push on
// by default) producing and consuming: their org.apache.kafka.producer.*
// and org.apache.kafka.consumer.* metrics reach an OTLP receiver through
// Regent, labelled with the client id, instance id and principal.
func TestClientTelemetryJavaProducer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Java tools")
	}
	lib := kafkaLib(t)
	sink := &clientMetricsSink{byName: map[string]map[string]string{}}
	recv := startOTLPMetricsGRPC(t, sink)
	b := brokertest.Start(t, "--client-telemetry-exporter", "otlp-grpc", "--client-telemetry-endpoint", recv)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const tool = "org.apache.kafka.tools.ClientMetricsCommand"

	run := runTool(t, ctx, lib, tool, "--bootstrap-server", b.Addr, "--alter", "--name", "producers",
		"--metrics", "org.apache.kafka.producer.,org.apache.kafka.consumer.", "--interval", "1000", "--match", "client_id=telemetry-.*")
	if !strings.Contains(run.stdout, "Altered client metrics config") {
		t.Fatalf("kafka-client-metrics --alter:\n%s\n%s", run.stdout, lastLines(run.stderr, 20))
	}
	run = runTool(t, ctx, lib, tool, "--bootstrap-server", b.Addr, "--describe", "--name", "producers")
	for _, want := range []string{"interval.ms=1000", "metrics=org.apache.kafka.producer.,org.apache.kafka.consumer.", "match=client_id=telemetry-.*"} {
		if !strings.Contains(run.stdout, want) {
			t.Fatalf("kafka-client-metrics --describe lacks %q:\n%s", want, run.stdout)
		}
	}
	run = runTool(t, ctx, lib, tool, "--bootstrap-server", b.Addr, "--list")
	if strings.TrimSpace(run.stdout) != "producers" {
		t.Fatalf("kafka-client-metrics --list:\n%s", run.stdout)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "telemetry"); err != nil {
		t.Fatal(err)
	}

	// The producer and a consumer run until their metrics arrive (or the
	// test's bound).
	pctx, stop := context.WithCancel(ctx)
	log4j, _ := filepath.Abs(filepath.Join("..", "bench", "log4j2.properties"))
	var running []chan struct{}
	startJava := func(class string, args ...string) {
		t.Helper()
		cmd := exec.CommandContext(pctx, "java", append([]string{"-Xmx256m", "-cp", filepath.Join(lib, "*"), "-Dlog4j2.configurationFile=" + log4j, class}, args...)...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		running = append(running, done)
	}
	stopJava := func() {
		stop()
		for _, done := range running {
			<-done
		}
	}
	defer stopJava()
	start := time.Now()
	startJava("org.apache.kafka.tools.ProducerPerformance", "--topic", "telemetry", "--num-records", "1000000", "--throughput", "200",
		"--record-size", "100", "--producer-props", "bootstrap.servers="+b.Addr, "client.id=telemetry-producer")
	startJava("org.apache.kafka.tools.ConsumerPerformance", "--bootstrap-server", b.Addr, "--topic", "telemetry", "--num-records", "1000000",
		"--timeout", "600000", "--group", "telemetry-group", "--command-property", "client.id=telemetry-consumer")

	for _, kind := range []string{"producer", "consumer"} {
		prefix := "org.apache.kafka." + kind + "."
		var name string
		var attrs map[string]string
		testwait.For(t, "the "+kind+"'s metrics at the OTLP receiver", 90*time.Second, func() bool {
			name, attrs, _ = sink.find(prefix)
			return name != ""
		})
		t.Logf("%s metrics %v after the Java clients started, e.g. %s %v", kind, time.Since(start).Round(100*time.Millisecond), name, attrs)
		for k, want := range map[string]string{
			"client_id": "telemetry-" + kind, "principal": "User:ANONYMOUS",
			"client_software_name": "apache-kafka-java", "client_source_address": "127.0.0.1", "broker_id": "1",
		} {
			if attrs[k] != want {
				t.Errorf("metric %s: resource attribute %s = %q, want %q (all: %v)", name, k, attrs[k], want, attrs)
			}
		}
		if attrs["client_instance_id"] == "" {
			t.Errorf("metric %s has no client_instance_id (all: %v)", name, attrs)
		}
	}
	// Only the subscribed prefixes are pushed.
	sink.mu.Lock()
	for n := range sink.byName {
		if !strings.HasPrefix(n, "org.apache.kafka.producer.") && !strings.HasPrefix(n, "org.apache.kafka.consumer.") {
			t.Errorf("metric %s pushed outside the subscription", n)
		}
	}
	t.Logf("%d metric names received in %d exports", len(sink.byName), sink.exports)
	sink.mu.Unlock()

	stopJava()
	run = runTool(t, ctx, lib, tool, "--bootstrap-server", b.Addr, "--delete", "--name", "producers")
	run = runTool(t, ctx, lib, tool, "--bootstrap-server", b.Addr, "--list")
	if strings.TrimSpace(run.stdout) != "" {
		t.Fatalf("kafka-client-metrics --list after --delete:\n%s", run.stdout)
	}
}
