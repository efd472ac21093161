package telemetry

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func TestACLDenials(t *testing.T) {
	if (*Telemetry)(nil).DenialObserver() != nil {
		t.Fatal("telemetry off, but a denial observer")
	}
	tel, err := New(context.Background(), Config{MetricsListen: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	obs := tel.DenialObserver()
	if obs == nil {
		t.Fatal("metrics on but no denial observer")
	}
	// A traced request's span gets the denial's attributes.
	rec := tracetest.NewSpanRecorder()
	ctx, span := trace.NewTracerProvider(trace.WithSpanProcessor(rec)).Tracer("t").Start(context.Background(), "produce")
	obs.ACLDenied(ctx, "WRITE", "TOPIC")
	obs.ACLDenied(context.Background(), "WRITE", "TOPIC")
	obs.ACLDenied(context.Background(), "READ", "GROUP")
	span.End()
	if got := attrsOf(rec.Ended()[0].Attributes()); got["regent.acl.denied_operation"].AsString() != "WRITE" || got["regent.acl.denied_resource_type"].AsString() != "TOPIC" {
		t.Fatalf("span attributes %v", rec.Ended()[0].Attributes())
	}

	joined := scrapeLines(t, tel, "regent_acl_denials_total{")
	lines := strings.Split(joined, "\n")
	for _, want := range []string{`operation="WRITE"`, `resource_type="TOPIC"`, `operation="READ"`, `resource_type="GROUP"`} {
		if !strings.Contains(joined, want) {
			t.Errorf("regent_acl_denials_total lacks %s:\n%s", want, joined)
		}
	}
	for _, l := range lines {
		if strings.Contains(l, `operation="WRITE"`) && !strings.HasSuffix(l, " 2") {
			t.Errorf("WRITE/TOPIC denials %q, want 2", l)
		}
	}
}
