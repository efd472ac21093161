package protocol

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/partition"
)

// Request is one decoded request on its way through the broker.
type Request struct {
	Header
	Msg      kmsg.Request
	Received time.Time
	Conn     *ConnInfo

	// reply delivers the encoded response frame (nil: the request takes no
	// response, as acks=0 produce). Set by netio; called exactly once.
	reply   func(frame []byte)
	replied atomic.Bool
	// replyParts, when set, takes responses made of parts (RespondParts);
	// set by netio for connections that send files (frame.go).
	replyParts func(parts []Part)
	// frameFree is set by a handler, before it answers, when neither it
	// nor anything it started reads the request's frame any more: netio
	// may then reuse the frame's buffer once the answer is handed over.
	// Unset (the default), the frame is left to the garbage collector.
	frameFree atomic.Bool

	// trace follows the request for telemetry (nil: not observed);
	// recording says the request is sampled for tracing. Both are set
	// before the request is served and never change afterwards.
	trace     RequestTrace
	recording bool
	// rawSASL marks a raw SASL token (SaslHandshake v0's framing) served
	// as a SaslAuthenticate: answered with a raw token, not a response.
	rawSASL bool
	// local marks a request served on this node whatever it is: one a
	// follower forwarded here, or one whose forward found this node
	// leading. Set before it is served (forward.go).
	local bool
	// clock sums the request's time on the broker's goroutines for the
	// request_percentage quota (request_time.go); off without one.
	clock requestClock
}

// ConnInfo is what handlers may know of the connection a request came on.
type ConnInfo struct {
	ID         uint64
	RemoteAddr string
	LocalAddr  string
	// Output counts the connection's response bytes not yet sent, against
	// its bound (nil: unbounded); fetches size themselves to its room.
	Output *Budget
	// Principal is who the connection authenticated as, in Kafka's form
	// "User:NAME" (SASL sets it after a login, mTLS sets "User:CN"); empty
	// means "User:ANONYMOUS". The authorizer checks it on every request.
	// SASL writes it once, before answering the successful login, so every
	// later request of the connection reads it.
	Principal string
	// Listener is the listener the connection came in on (nil: a default
	// PLAINTEXT one).
	Listener *Listener
	// Auth is the connection's SASL state (nil: not a SASL listener).
	Auth *ConnAuth
	// TokenAuth says the connection authenticated with a delegation
	// token; written with Principal.
	TokenAuth bool
	// forwardedSASL is ViaSASL of the client connection a forwarded
	// request came from (forward.go).
	forwardedSASL bool
	// origin is the node that forwarded the request (ForwardedRequest.
	// Origin; 0: not forwarded, or not known).
	origin int32
	// node says a cluster node sent the request on its own behalf
	// (ForwardedRequest.Node): the authorizer lets it do what brokers do.
	node bool
	// Mute is the connection's client-quota mute (quotas.go): set by
	// handlers, read by netio before it reads the next request.
	Mute Mute
	// SoftwareName and SoftwareVersion are what the client sent in
	// ApiVersions v3+ (KIP-511), written when ApiVersions is served and
	// read by the connection's later requests (client telemetry's match).
	SoftwareName, SoftwareVersion string
	// SendsFiles says the connection writes responses' file ranges
	// from the file (plaintext sockets: sendfile); handlers then answer
	// with RespondParts rather than reading stored batches into memory.
	SendsFiles bool
}

// AnonymousPrincipal is Kafka's principal for unauthenticated connections.
const AnonymousPrincipal = "User:ANONYMOUS"

// PrincipalName is the connection's principal in Kafka's "User:NAME"
// form, "User:ANONYMOUS" when nothing authenticated it.
func (c *ConnInfo) PrincipalName() string {
	if c == nil || c.Principal == "" {
		return AnonymousPrincipal
	}
	return c.Principal
}

// NewRequest builds a request; SetReply must be called before it is served.
func NewRequest(h Header, msg kmsg.Request) *Request {
	return &Request{Header: h, Msg: msg, Received: time.Now()}
}

// SetReply sets where the encoded response frame goes (nil frame: none).
func (r *Request) SetReply(reply func(frame []byte)) { r.reply = reply }

// Respond encodes resp at the request's version and hands it to the
// connection. Safe from any goroutine; only the first call counts.
func (r *Request) Respond(resp kmsg.Response) { r.RespondSized(resp, 256) }

// RespondSized is Respond with a guess of the encoded size, so that large
// responses (fetches) are encoded into one allocation instead of growing.
func (r *Request) RespondSized(resp kmsg.Response, sizeHint int) {
	if !r.replied.CompareAndSwap(false, true) {
		return
	}
	resp.SetVersion(r.Version)
	switch r.Key {
	case 3, 10, 55, 60:
		r.advertiseListener(resp)
	}
	var encodeStart time.Time
	if s := r.clock.srv; s != nil {
		s.throttleRequestTime(r, resp)
		encodeStart = time.Now()
	}
	frame := AppendResponseFrame(make([]byte, 0, sizeHint), r.CorrelationID, resp)
	if s := r.clock.srv; s != nil {
		s.recordResponseTime(r, time.Since(encodeStart))
	}
	if r.trace != nil {
		r.trace.Responded(len(frame))
	}
	r.reply(frame)
}

// FreeFrame says nothing reads the request's frame any more (see
// frameFree). Call it before answering, only once every goroutine the
// handler started is done with the request's byte fields.
func (r *Request) FreeFrame() { r.frameFree.Store(true) }

// FrameFree reports whether the handler freed the request's frame; netio
// reads it when the answer arrives.
func (r *Request) FrameFree() bool { return r.frameFree.Load() }

// NoResponse completes a request that takes no response (acks=0).
func (r *Request) NoResponse() {
	if r.replied.CompareAndSwap(false, true) {
		if r.trace != nil {
			r.trace.Responded(0)
		}
		r.reply(nil)
	}
}

// Observer is told of every request's life; telemetry/ implements it with
// OpenTelemetry spans and metrics. A nil Observer observes nothing and
// costs nothing. Its methods must not block.
type Observer interface {
	// RequestStart is called on the event loop once r is decoded, before
	// it is served: the request's first byte was read at read, its frame
	// was whole at framed and decoded at decoded; frameBytes is the frame's
	// size with its length prefix. It returns the request's trace handle,
	// or nil to follow it no further.
	RequestStart(r *Request, read, framed, decoded time.Time, frameBytes int) RequestTrace
}

// RequestTrace follows one request from decode to the written response.
// Responded and Written are called once each, in that order; the other
// methods only while the request is served and only when Recording is
// true, possibly from several goroutines at once (one per partition).
type RequestTrace interface {
	// Work follows the partition actors' part (the request span's
	// children: actor work, then storage).
	partition.Tracer
	// Recording reports whether the request is sampled for tracing; when
	// false, handlers skip the phase calls below.
	Recording() bool
	// Context is a context carrying the request's span, for logs
	// (slog's ...Context methods) and for outgoing calls.
	Context() context.Context
	// Read reports one storage read a handler made for the request
	// (fetch): from start until now, n bytes from offset, err if it failed.
	Read(topic string, partition int32, offset int64, n int, start time.Time, err error)
	// Waited reports a long-poll wait (fetch max.wait.ms) from start until now.
	Waited(start time.Time)
	// Responded is called when the response is encoded and handed to the
	// connection: size bytes (0: the request takes no response).
	Responded(size int)
	// Written is called once the connection has written the response
	// (err: it was dropped, the connection being closed).
	Written(err error)
}

// SetTrace attaches the request's trace handle. Called by netio before the
// request is served.
func (r *Request) SetTrace(t RequestTrace) {
	r.trace = t
	r.recording = t != nil && t.Recording()
}

// Trace returns the request's trace handle (nil: not observed).
func (r *Request) Trace() RequestTrace { return r.trace }

// Tracer returns the trace handle only when the request is sampled for
// tracing, else nil: handlers pass it on (to partitions) or test it before
// timing their phases.
func (r *Request) Tracer() RequestTrace {
	if r.recording {
		return r.trace
	}
	return nil
}

// Context returns a context carrying the request's span when it has one,
// for ...Context logging.
func (r *Request) Context() context.Context {
	if r.recording {
		return r.trace.Context()
	}
	return context.Background()
}

// partitionTracer converts the request's tracer to the partition hook,
// keeping nil nil.
func (r *Request) partitionTracer() partition.Tracer {
	if r.recording {
		return r.trace
	}
	return nil
}
