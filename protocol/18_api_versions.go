package protocol

// ApiVersions: versions 0-4. Any other version is answered at v0 with
// UNSUPPORTED_VERSION and the table, so that clients can negotiate down.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(18, 0, 4, (*Server).apiVersions) }

func (s *Server) apiVersions(r *Request) {
	resp := &kmsg.ApiVersionsResponse{}
	if min, max, _ := VersionRange(18); r.Version < min || r.Version > max {
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		r.Version = 0
	}
	for _, k := range ServedKeys() {
		a := apis[k]
		resp.ApiKeys = append(resp.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: a.min, MaxVersion: a.max})
	}
	r.Respond(resp)
}
