package protocol

import (
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
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
}

// ConnInfo is what handlers may know of the connection a request came on.
type ConnInfo struct {
	ID         uint64
	RemoteAddr string
	LocalAddr  string
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
	r.reply(AppendResponseFrame(make([]byte, 0, sizeHint), r.CorrelationID, resp))
}

// NoResponse completes a request that takes no response (acks=0).
func (r *Request) NoResponse() {
	if r.replied.CompareAndSwap(false, true) {
		r.reply(nil)
	}
}
