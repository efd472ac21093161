package protocol

// PushTelemetry: version 0 (KIP-714). The push is checked as Kafka checks
// it (actors/clientmetrics.Manager.Push: INVALID_REQUEST,
// THROTTLING_QUOTA_EXCEEDED, UNKNOWN_SUBSCRIPTION_ID,
// UNSUPPORTED_COMPRESSION_TYPE, TELEMETRY_TOO_LARGE), then decompressed
// with the record-batch codecs (bounded), decoded as OTLP MetricsData and
// queued for export with the client's labels; a payload that does not
// decompress or decode is INVALID_RECORD. The work runs off the event loop.
// An empty payload (a terminating push with nothing left) is accepted.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/clientmetrics"
	"github.com/regent-broker/regent/storage/recordbatch"
)

func init() { register(72, 0, 0, (*Server).pushTelemetry) }

// pushDecompressFactor bounds a push's decompressed size: OTLP protobuf
// compresses well, but not past this many times telemetry.max.bytes.
const pushDecompressFactor = 16

// pushDecodes bounds the pushes decompressed and decoded at once, so that
// many clients pushing together hold at most 4 × 16 × telemetry.max.bytes
// (64 MiB by default) of inflated payloads; the others wait their turn
// holding only their payload as sent.
var pushDecodes = make(chan struct{}, 4)

func (s *Server) pushTelemetry(r *Request) {
	req := r.Msg.(*kmsg.PushTelemetryRequest)
	resp := req.ResponseKind().(*kmsg.PushTelemetryResponse)
	if !s.clientTelemetryOn() {
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		r.Respond(resp)
		return
	}
	cm := s.clientMetrics
	c, meta := telemetryClient(r)
	id := clientmetrics.ID(req.ClientInstanceID)
	err := cm.mgr.Push(clientmetrics.Push{
		InstanceID: id, SubscriptionID: req.SubscriptionID, Terminating: req.Terminating,
		Compression: req.CompressionType, Size: len(req.Metrics),
	}, c, cm.now())
	if err != nil || len(req.Metrics) == 0 {
		resp.ErrorCode = errorCode(err)
		r.Respond(resp)
		return
	}
	meta.ClientInstanceID = id.String()
	// kmsg aliases Metrics into the pooled request buffer: copy it for
	// the goroutine (at most telemetry.max.bytes).
	payload := append([]byte(nil), req.Metrics...)
	s.async(r, func() kmsg.Response {
		pushDecodes <- struct{}{}
		defer func() { <-pushDecodes }()
		limit := int64(cm.mgr.MaxBytes()) * pushDecompressFactor
		raw, err := recordbatch.DecompressBounded(req.CompressionType, payload, limit)
		if err == nil {
			err = cm.sink.ExportClientMetrics(meta, raw)
		} else {
			err = fmt.Errorf("decompress: %w", err)
		}
		if err != nil {
			s.log.Warn("client telemetry push refused", "client_id", meta.ClientID, "client_instance_id", meta.ClientInstanceID, "err", err)
			err = fmt.Errorf("%w: %v", kerr.InvalidRecord, err)
		}
		cm.mgr.Exported(id, err)
		resp.ErrorCode = errorCode(err)
		return resp
	})
}
