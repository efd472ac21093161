package protocol

// GetTelemetrySubscriptions: version 0 (KIP-714). Served when client
// telemetry is exported (otherwise not advertised, as Kafka without a
// telemetry exporter; a client asking anyway gets UNSUPPORTED_VERSION).
// The client instance's subscription comes from the CLIENT_METRICS
// resources that match it (actors/clientmetrics.Manager); a zero instance
// id gets a new one. As Kafka: accepted compression zstd, lz4, gzip,
// snappy; delta temporality; THROTTLING_QUOTA_EXCEEDED within the push
// interval of the instance's last request. No authorization, as Kafka.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/clientmetrics"
)

func init() { register(71, 0, 0, (*Server).getTelemetrySubscriptions) }

func (s *Server) getTelemetrySubscriptions(r *Request) {
	req := r.Msg.(*kmsg.GetTelemetrySubscriptionsRequest)
	resp := req.ResponseKind().(*kmsg.GetTelemetrySubscriptionsResponse)
	if !s.clientTelemetryOn() {
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		r.Respond(resp)
		return
	}
	cm := s.clientMetrics
	c, _ := telemetryClient(r)
	sub, err := cm.mgr.Get(clientmetrics.ID(req.ClientInstanceID), c, cm.now())
	resp.ClientInstanceID = sub.InstanceID
	if err != nil {
		resp.ErrorCode = errorCode(err)
		r.Respond(resp)
		return
	}
	resp.SubscriptionID = sub.SubscriptionID
	resp.AcceptedCompressionTypes = clientmetrics.AcceptedCompression
	resp.PushIntervalMillis = sub.IntervalMs
	resp.TelemetryMaxBytes = cm.mgr.MaxBytes()
	resp.DeltaTemporality = true
	resp.RequestedMetrics = sub.Metrics
	if resp.RequestedMetrics == nil {
		resp.RequestedMetrics = []string{}
	}
	r.Respond(resp)
}
