package protocol

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestListConfigResources lists what Regent has: topics (the internal ones
// included) and brokers; no broker loggers, client-metrics resources or
// group configs; a type Kafka does not list answers UNSUPPORTED_VERSION,
// as does any but client metrics at v0.
func TestListConfigResources(t *testing.T) {
	s := groupServer(t)
	list := func(version int16, types ...kmsg.ConfigResourceType) *kmsg.ListConfigResourcesResponse {
		req := kmsg.NewPtrListConfigResourcesRequest()
		req.Version = version
		for _, rt := range types {
			req.ResourceTypes = append(req.ResourceTypes, int8(rt))
		}
		return call[*kmsg.ListConfigResourcesResponse](t, s, req)
	}
	names := func(resp *kmsg.ListConfigResourcesResponse) string {
		var out []string
		for _, cr := range resp.ConfigResources {
			out = append(out, fmt.Sprintf("%d:%s", cr.Type, cr.Name))
		}
		return fmt.Sprint(out)
	}
	all := list(1)
	code(t, "all types", all.ErrorCode, nil)
	if got, want := names(all), "[2:__consumer_offsets 2:__transaction_state 2:t 4:1]"; got != want {
		t.Fatalf("all types: %s, want %s", got, want)
	}
	brokers := list(1, kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBroker)
	if got := names(brokers); brokers.ErrorCode != 0 || got != "[4:1]" {
		t.Fatalf("brokers: %v %s", kerr.ErrorForCode(brokers.ErrorCode), got)
	}
	none := list(1, kmsg.ConfigResourceTypeClientMetrics, kmsg.ConfigResourceTypeGroupConfig, kmsg.ConfigResourceTypeBrokerLogger)
	if none.ErrorCode != 0 || len(none.ConfigResources) != 0 {
		t.Fatalf("client metrics, groups, broker loggers: %v %s", kerr.ErrorForCode(none.ErrorCode), names(none))
	}
	code(t, "unknown type", list(1, kmsg.ConfigResourceTypeTopic, 64).ErrorCode, kerr.UnsupportedVersion)
	v0 := list(0)
	if v0.ErrorCode != 0 || len(v0.ConfigResources) != 0 {
		t.Fatalf("v0 (client metrics): %v %s", kerr.ErrorForCode(v0.ErrorCode), names(v0))
	}
}
