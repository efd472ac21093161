package protocol

// SaslAuthenticate: versions 0-2, and the raw tokens of SaslHandshake
// v0's legacy framing (NewRawSASLRequest). A step runs off the event loop
// (PLAIN salts the password: milliseconds of CPU). A refusal answers
// SASL_AUTHENTICATION_FAILED with a message (raw framing: no answer, as
// Kafka's) and closes the connection after a short delay. v1+ carries the
// session lifetime (KIP-368) when connections.max.reauth.ms is set.

import (
	"runtime"
	"runtime/debug"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(36, 0, 2, (*Server).saslAuthenticate) }

// saslSteps bounds the SASL steps running at once, broker-wide, to half
// the cores, so a flood of logins leaves the other half to the clients
// that are in: the rest wait their turn (bounded by the connections times
// their in-flight limit; one connection's steps run one at a time, under
// its ConnAuth's lock).
var saslSteps = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2))

func (s *Server) saslAuthenticate(r *Request) {
	req := r.Msg.(*kmsg.SASLAuthenticateRequest)
	a := r.Conn.Auth
	if a == nil {
		resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		resp.ErrorCode = kerr.IllegalSaslState.Code
		msg := "SASL is not enabled on this listener"
		resp.ErrorMessage = &msg
		r.Respond(resp)
		return
	}
	go func() {
		// Bounded CPU: a flood of PLAIN logins (each salts a password,
		// up to 16384 hash rounds) waits here instead of taking the cores.
		saslSteps <- struct{}{}
		defer func() { <-saslSteps }()
		defer func() {
			if p := recover(); p != nil {
				// A mechanism that panics refuses the login; the
				// connection is closed, the broker goes on.
				s.log.ErrorContext(r.Context(), "SASL step panicked", "panic", p, "stack", string(debug.Stack()))
				a.close()
				r.NoResponse()
			}
		}()
		out := a.authenticate(r.Context(), r.Conn, req.SASLAuthBytes, time.Now())
		if r.rawSASL {
			if out.code != 0 {
				r.NoResponse() // the connection closes after the delay
				return
			}
			r.respondRaw(out.reply)
			return
		}
		resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		resp.ErrorCode = out.code
		if out.msg != "" {
			resp.ErrorMessage = &out.msg
		}
		resp.SASLAuthBytes = out.reply
		if resp.SASLAuthBytes == nil {
			resp.SASLAuthBytes = []byte{}
		}
		resp.SessionLifetimeMillis = out.lifetime.Milliseconds()
		r.Respond(resp)
	}()
}
