package protocol

// SaslHandshake: versions 0-1. v1 starts a KIP-152 exchange (the tokens
// travel in SaslAuthenticate requests); v0 the legacy one, in which the
// client then sends raw length-prefixed tokens (old librdkafka), which the
// network edge hands to the SaslAuthenticate handler while the connection
// is in that phase. On a listener without SASL, and on an authenticated
// connection at v0, the answer is ILLEGAL_SASL_STATE, as Kafka's. A
// mechanism that is not enabled is answered UNSUPPORTED_SASL_MECHANISM
// with the enabled ones, and the connection closed after a short delay.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(17, 0, 1, (*Server).saslHandshake) }

func (s *Server) saslHandshake(r *Request) {
	req := r.Msg.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	a := r.Conn.Auth
	if a == nil {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		r.Respond(resp)
		return
	}
	resp.SupportedMechanisms = a.cfg.Auth.Mechanisms()
	// On the event loop: starting a session is cheap, and the phase must
	// be set before the next frame (a raw token after v0) is read.
	resp.ErrorCode = a.handshake(r.Context(), r.Conn, r.Version, req.Mechanism)
	r.Respond(resp)
}
