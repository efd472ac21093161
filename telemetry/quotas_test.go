package telemetry

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/regent-broker/regent/actors/quotas"
)

func TestQuotaMetrics(t *testing.T) {
	tel, err := New(context.Background(), Config{MetricsListen: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	store, err := quotas.Open(quotas.Options{DataDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if _, err := store.Alter([]quotas.Alteration{{Entity: quotas.Entity{HasClient: true, Client: "app"}, Ops: []quotas.Op{{Key: quotas.ProducerByteRate, Value: 1000}}}}); err != nil {
		t.Fatal(err)
	}
	enf := quotas.NewEnforcer(quotas.EnforcerConfig{}, store.Snapshot)
	// 20000 bytes over 10 s against 1000/s: a 10 s throttle.
	if o := enf.Record(quotas.ProducerByteRate, "ANONYMOUS", "app", 20000, time.Now(), 0); o.Throttle == 0 {
		t.Fatalf("not throttled: %+v", o)
	}
	if err := tel.ObserveQuotas(enf); err != nil {
		t.Fatal(err)
	}
	text := scrapeLines(t, tel, "regent_quota")
	for _, want := range []string{
		`regent_quota_rate{client_id="app",`,
		`regent_quota_throttle_time_milliseconds_total{client_id="app",`,
		`quota="producer_byte_rate",user=""} 10000`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, text)
		}
	}
	// The rate: 20000 bytes over the 10 s (and the time since) measured.
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "regent_quota_rate{") {
			v, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
			if err != nil || v < 1900 || v > 2000 {
				t.Errorf("rate line %q, want about 2000", l)
			}
		}
	}
	var off *Telemetry
	if err := off.ObserveQuotas(enf); err != nil {
		t.Fatal(err)
	}
}
