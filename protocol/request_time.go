package protocol

// Request-time quotas (request_percentage, KIP-124): a client's share of
// the broker's request handling time, in percent of one thread, measured
// with Kafka's windowed rate and throttled as Kafka throttles it: the
// response carries throttle_time_ms, at most one quota window (1 s), and
// the connection reads nothing more for that long (KIP-219).
//
// What counts as a request's time. Kafka counts the time its network and
// I/O threads spend on a request, not the time it waits in a queue or in
// purgatory. Regent counts the time the broker's own goroutines spend on
// it: decoding and serving it on the event loop, the handler goroutine
// of a request served off the loop (fetch reads and the like), minus a
// long poll's wait, and encoding its response. Work done for it inside
// the partition, group and transaction actors is not counted: their time
// is shared by every client of a partition or group, and produce bytes
// have producer_byte_rate. As in Kafka, the encoding of the response is
// recorded after it was answered, so it counts against the client's next
// requests, and some requests are exempt: the SASL handshake and
// authentication, WriteTxnMarkers (a broker's request), acks=0 produces
// (no response to carry a throttle) and a request another node forwarded
// (measured where its client is connected: ServeForwarded starts no
// clock).

import (
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/quotas"
)

// requestClock sums the time a request spends on the broker's goroutines.
// It runs only when a request_percentage quota was set somewhere as the
// request was decoded (srv non-nil); otherwise every method returns at
// once, so requests cost nothing more without such a quota.
//
// Ownership: srv is written once, before the request is served. The
// fields after it are atomics: the event loop and one handler goroutine
// may each have a span open at once (a fetch's goroutine can start before
// the loop's Serve returns), and the response may be encoded on either.
type requestClock struct {
	srv *Server
	// spent is the nanoseconds of the spans that ended.
	spent atomic.Int64
	// loop and work are the unix nanos at which the event loop's span and
	// the handler goroutine's span began (0: none open).
	loop, work atomic.Int64
	// recorded says the request's time was recorded against its quota:
	// once per request, at its response.
	recorded atomic.Bool
}

// begin opens a span in slot (clock.loop or clock.work).
func (c *requestClock) begin(slot *atomic.Int64) {
	if c.srv != nil {
		slot.Store(time.Now().UnixNano())
	}
}

// end closes the span open in slot, adding its length to spent.
func (c *requestClock) end(slot *atomic.Int64) {
	if c.srv == nil {
		return
	}
	if start := slot.Swap(0); start != 0 {
		c.spent.Add(time.Now().UnixNano() - start)
	}
}

// total is the time spent up to now, open spans included.
func (c *requestClock) total(now int64) time.Duration {
	t := c.spent.Load()
	if start := c.loop.Load(); start != 0 && now > start {
		t += now - start
	}
	if start := c.work.Load(); start != 0 && now > start {
		t += now - start
	}
	return time.Duration(t)
}

// requestTimeExempt lists the keys Kafka does not measure against request
// quotas: a connection's SASL exchange (its network layer answers it
// before any request is handled) and WriteTxnMarkers (a broker's request,
// authorized by CLUSTER_ACTION).
var requestTimeExempt = map[int16]bool{17: true, 36: true, 27: true}

// startRequestClock starts r's clock at decodeStart (zero: no
// request_percentage quota was set when decoding began) unless its key is
// exempt; the decode so far is its first span.
func (s *Server) startRequestClock(r *Request, decodeStart time.Time) {
	if decodeStart.IsZero() || requestTimeExempt[r.Key] {
		return
	}
	r.clock.srv = s
	r.clock.spent.Store(int64(time.Since(decodeStart)))
}

// percentOfThread converts time on a thread to the unit request quotas are
// measured in: percent-seconds, so that their rate per second is the
// percentage of one thread used (Kafka's nanosToPercentage).
func percentOfThread(d time.Duration) float64 {
	return float64(d) * 100 / float64(time.Second)
}

// throttleRequestTime records r's time so far against its request quota,
// once, and on a violation mutes the connection and puts the throttle in
// resp (when it has a throttle field and a larger throttle is not there
// already). Called just before the response is encoded.
func (s *Server) throttleRequestTime(r *Request, resp kmsg.Response) {
	c := &r.clock
	if c.srv == nil || !c.recorded.CompareAndSwap(false, true) {
		return
	}
	now := time.Now()
	enf := s.quotas.enf
	o := enf.Record(quotas.RequestPercentage, quotaUser(r), r.ClientID, percentOfThread(c.total(now.UnixNano())), now, enf.Window())
	ms := throttleConn(r, now, o.Throttle)
	if ms <= 0 {
		return
	}
	if tr, ok := resp.(kmsg.ThrottleResponse); ok {
		if cur, _ := tr.Throttle(); cur >= ms {
			return
		}
	}
	if st, ok := resp.(kmsg.SetThrottleResponse); ok {
		st.SetThrottle(ms)
	}
}

// recordResponseTime records the time spent encoding r's response against
// its request quota without throttling this response (Kafka records its
// network threads' time the same way, once the response is sent): the
// client's next requests see it.
func (s *Server) recordResponseTime(r *Request, d time.Duration) {
	if r.clock.srv == nil {
		return
	}
	s.quotas.enf.RecordNoThrottle(quotas.RequestPercentage, quotaUser(r), r.ClientID, percentOfThread(d), time.Now())
}
