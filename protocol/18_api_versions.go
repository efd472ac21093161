package protocol

// ApiVersions: versions 0-4. Any other version is answered at v0 with
// UNSUPPORTED_VERSION and the table, so that clients can negotiate down.
// v3+ carry the supported and finalized features (KIP-584) and the
// finalized epoch; as Kafka does, v3 leaves out supported features whose
// minimum level is 0 (KAFKA-17011), and features finalized at 0 are not
// listed.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/features"
)

func init() { register(18, 0, 4, (*Server).apiVersions) }

func (s *Server) apiVersions(r *Request) {
	resp := &kmsg.ApiVersionsResponse{}
	if min, max, _ := VersionRange(18); r.Version < min || r.Version > max {
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		r.Version = 0
	}
	if req, ok := r.Msg.(*kmsg.ApiVersionsRequest); ok && r.Version >= 3 && r.Conn != nil {
		r.Conn.SoftwareName, r.Conn.SoftwareVersion = req.ClientSoftwareName, req.ClientSoftwareVersion
	}
	for _, k := range ServedKeys() {
		if (k == 71 || k == 72) && !s.clientTelemetryOn() {
			continue // as Kafka with no client telemetry exporter
		}
		if isShareKey(k) && !s.shareOn() {
			continue // as Kafka with share.version 0 (share_core.go)
		}
		if (k == 88 || k == 89) && !s.streamsOn() {
			continue // as Kafka with streams.version 0
		}
		a := apis[k]
		resp.ApiKeys = append(resp.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: a.min, MaxVersion: a.max})
	}
	if r.Version >= 3 {
		s.appendFeatures(resp, r.Version)
	}
	r.Respond(resp)
}

func (s *Server) appendFeatures(resp *kmsg.ApiVersionsResponse, version int16) {
	resp.FinalizedFeaturesEpoch = -1
	if s.features == nil {
		return
	}
	for _, f := range features.Supported {
		if f.Min == 0 && version < 4 {
			continue
		}
		resp.SupportedFeatures = append(resp.SupportedFeatures, kmsg.ApiVersionsResponseSupportedFeature{Name: f.Name, MinVersion: f.Min, MaxVersion: f.Max})
	}
	fin := s.features.Finalized()
	resp.FinalizedFeaturesEpoch = fin.Epoch
	for _, f := range features.Supported {
		if l := fin.Level(f.Name); l > 0 {
			resp.FinalizedFeatures = append(resp.FinalizedFeatures, kmsg.ApiVersionsResponseFinalizedFeature{Name: f.Name, MaxVersionLevel: l, MinVersionLevel: l})
		}
	}
}
