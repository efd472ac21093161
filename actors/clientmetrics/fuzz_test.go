package clientmetrics

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// FuzzParse: any configs either parse or are refused with INVALID_CONFIG
// or INVALID_REQUEST, never a panic; what parses survives a store's file
// round trip (Parse of the same map) and matches without panicking.
func FuzzParse(f *testing.F) {
	f.Add("s", "org.apache.kafka.producer.,*", "1000", "client_id=producer-.*,client_source_port=1\\d+")
	f.Add("", "", "99", "client_id")
	f.Add("x", " , ,", "3600000", "client_software_name=(a|b")
	f.Fuzz(func(t *testing.T, name, metrics, interval, match string) {
		cfg := map[string]string{KeyMetrics: metrics, KeyInterval: interval, KeyMatch: match}
		sub, err := Parse(name, cfg)
		if err != nil {
			if !errors.Is(err, kerr.InvalidConfig) && !errors.Is(err, kerr.InvalidRequest) {
				t.Fatalf("refusal without a Kafka code: %v", err)
			}
			return
		}
		if sub.IntervalMs < MinIntervalMs || sub.IntervalMs > MaxIntervalMs {
			t.Fatalf("interval %d accepted", sub.IntervalMs)
		}
		if _, err := Parse(name, sub.Configs); err != nil {
			t.Fatalf("reparse: %v", err)
		}
		sub.matchesInstance(Client{ClientID: metrics, SoftwareName: match, SourcePort: interval}, ID{})
	})
}
