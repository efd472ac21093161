package protocol

// Client quota enforcement (KIP-13, KIP-55; throttling as KIP-219): the
// produce and fetch handlers record a request's bytes against the
// connection's quota (resolved per key in Kafka's precedence order from
// the principal's name and the request's client id, actors/quotas). Over
// the quota, the response carries throttle_time_ms and the connection is
// muted for that long: the response still goes out at once, but netio
// reads no further request of the connection until the mute ends
// (netio/throttle.go), and clients of KIP-219 hold their next request as
// long themselves.
//
// What is measured, and where Regent differs from Kafka:
//   - producer_byte_rate: the record batches' bytes of every Produce
//     (Kafka counts the whole request's size; the header and topic names
//     are a few dozen bytes of it), recorded when the request is read,
//     acks=0 included (muted without a response, as Kafka does).
//   - consumer_byte_rate: the fetch response's bytes, recorded when it is
//     answered. Kafka answers a fetch that would go over the quota with no
//     records and the throttle; Regent sends the records it read and
//     throttles the next requests, which holds the same average.
//   - The mute starts when the bytes are recorded (Kafka: once the
//     response is sent), so it overlaps the request's own serving time.
//   - request_percentage: the request's time on the broker's goroutines,
//     throttled at most one window (request_time.go).
//   - controller_mutation_rate: partitions created and deleted, with
//     Kafka's token bucket, on the node that applies them
//     (mutation_quota.go).
//   - Bytes are counted on the node that serves the request, per node, as
//     each Kafka broker counts its own; forwarded requests are counted
//     where the client is connected.

import (
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/quotas"
	"github.com/regent-broker/regent/storage"
)

// quotaState is the node's client quotas: the replicated store and the
// enforcer measuring this node's clients against it. Set before serving.
type quotaState struct {
	store *quotas.Store
	enf   *quotas.Enforcer
}

// SetQuotas installs the client quota store and the enforcer reading it;
// call before serving. Without it DescribeClientQuotas answers no quotas,
// AlterClientQuotas refuses every change and nothing is throttled.
func (s *Server) SetQuotas(store *quotas.Store, enf *quotas.Enforcer) {
	s.quotas = &quotaState{store: store, enf: enf}
}

// Mute is a connection's quota mute: the unix nanos until which netio
// reads no new request of it. Written by the handlers of any goroutine,
// read by the connection's event loop.
type Mute struct {
	until atomic.Int64
}

// Extend mutes until t, unless already muted longer.
func (m *Mute) Extend(t time.Time) {
	n := t.UnixNano()
	for {
		cur := m.until.Load()
		if cur >= n || m.until.CompareAndSwap(cur, n) {
			return
		}
	}
}

// Until is the end of the mute (unix nanos; in the past: not muted).
func (m *Mute) Until() int64 { return m.until.Load() }

// quotaUser is the user part of a connection's quota entity: its
// principal's name (ANONYMOUS when it did not authenticate).
func quotaUser(r *Request) string {
	p := r.Conn.PrincipalName()
	if i := strings.IndexByte(p, ':'); i >= 0 {
		return p[i+1:]
	}
	return p
}

// recordQuota records value against the connection's quota for key and,
// past the quota, mutes the connection and returns the throttle time in
// ms (0: within it, or no quota applies).
func (s *Server) recordQuota(r *Request, key string, value float64) int32 {
	if s.quotas == nil || s.quotas.enf == nil || r.local {
		// A forwarded request was measured where the client is.
		return 0
	}
	now := time.Now()
	o := s.quotas.enf.Record(key, quotaUser(r), r.ClientID, value, now, 0)
	return throttleConn(r, now, o.Throttle)
}

// throttleConn mutes r's connection for d from now (KIP-219: the client
// waits it out; nothing more of it is read meanwhile) and returns d in ms,
// for the response's throttle_time_ms (0 when d is not positive).
func throttleConn(r *Request, now time.Time, d time.Duration) int32 {
	if d <= 0 {
		return 0
	}
	if r.Conn != nil {
		r.Conn.Mute.Extend(now.Add(d))
	}
	return int32(min(d.Milliseconds(), 1<<31-1))
}

// quotaLimits reports whether anyone has a quota on key: without one
// there is nothing to measure, and the request's bytes are not counted
// (one atomic load and one map lookup per request).
func (s *Server) quotaLimits(key string) bool {
	return s.quotas != nil && s.quotas.enf != nil && s.quotas.enf.Limits(key)
}

// throttleProduce records a produce's record bytes and sets the
// response's throttle time. On the event loop, before the request is
// served.
func (s *Server) throttleProduce(r *Request, req *kmsg.ProduceRequest, resp *kmsg.ProduceResponse) {
	if !s.quotaLimits(quotas.ProducerByteRate) {
		return
	}
	n := 0
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			n += len(p.Records)
		}
	}
	resp.ThrottleMillis = max(resp.ThrottleMillis, s.recordQuota(r, quotas.ProducerByteRate, float64(n)))
}

// throttleFetch records a fetch response's bytes (those it holds and the
// file ranges it will send; nil: none) and sets its throttle time. Called
// once the response is complete, before it is answered.
func (s *Server) throttleFetch(r *Request, resp *kmsg.FetchResponse, files [][]*storage.FileRange) {
	if !s.quotaLimits(quotas.ConsumerByteRate) {
		return
	}
	n := fetchResponseSize(resp)
	for _, ps := range files {
		for _, f := range ps {
			if f != nil {
				n += f.Len()
			}
		}
	}
	resp.ThrottleMillis = max(resp.ThrottleMillis, s.recordQuota(r, quotas.ConsumerByteRate, float64(n)))
}
