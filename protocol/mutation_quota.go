package protocol

// Controller mutation quotas (controller_mutation_rate, KIP-599): the
// partitions a client creates (CreateTopics, CreatePartitions) or deletes
// (DeleteTopics) per second, measured with Kafka's token bucket
// (actors/quotas/bucket.go) on the node that applies the change: the
// cluster leader, for requests a follower forwarded, which carry the
// client's principal and client id. The versions that know
// THROTTLING_QUOTA_EXCEEDED (CreateTopics v6+, CreatePartitions v3+,
// DeleteTopics v5+) are strict: while the client's bucket is negative each
// further topic is refused with that code, and the response carries the
// time until the bucket is back at zero; older versions are permissive,
// served whole with the throttle. Either way the connection reads nothing
// more for the throttle time (KIP-219), on the follower too. A validate
// only request takes nothing, and a topic that fails for another reason
// gives back what it took. Topics created automatically (Metadata,
// auto.create.topics.enable) are not counted; --max-partitions bounds
// them.

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/regent-broker/regent/actors/quotas"
	"github.com/regent-broker/regent/actors/topics"
)

// mutationQuota is one request's use of its client's mutation quota. Used
// by the request's handler goroutine only.
type mutationQuota struct {
	s        *Server
	r        *Request
	strict   bool
	throttle time.Duration // the longest throttle any of its topics got
}

// mutationQuotaFor is r's mutation quota; strict from version strictSince
// on. Nil when no client has a controller_mutation_rate quota (its methods
// then do nothing).
func (s *Server) mutationQuotaFor(r *Request, strictSince int16) *mutationQuota {
	if !s.quotaLimits(quotas.ControllerMutationRate) {
		return nil
	}
	return &mutationQuota{s: s, r: r, strict: r.Version >= strictSince}
}

// take takes n partition mutations, or refuses them with
// THROTTLING_QUOTA_EXCEEDED (a strict quota already exceeded).
func (q *mutationQuota) take(n int) error {
	if q == nil || n <= 0 {
		return nil
	}
	o := q.s.quotas.enf.Mutate(quotaUser(q.r), q.r.ClientID, float64(n), time.Now(), q.strict)
	q.throttle = max(q.throttle, o.Throttle)
	if o.Refused {
		return &topics.Error{Code: kerr.ThrottlingQuotaExceeded, Msg: fmt.Sprintf("controller_mutation_rate quota exceeded: %d partition mutations refused; retry in %d ms", n, o.Throttle.Milliseconds())}
	}
	return nil
}

// giveBack returns n mutations taken for a change that failed.
func (q *mutationQuota) giveBack(n int) {
	if q == nil || n <= 0 {
		return
	}
	q.s.quotas.enf.Unmutate(quotaUser(q.r), q.r.ClientID, float64(n), time.Now())
}

// done mutes the connection for the request's throttle and returns it in
// ms, for the response's throttle_time_ms (0: none).
func (q *mutationQuota) done() int32 {
	if q == nil {
		return 0
	}
	return throttleConn(q.r, time.Now(), q.throttle)
}
