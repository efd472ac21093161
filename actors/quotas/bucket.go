package quotas

// TokenBucket is the measure of controller_mutation_rate (KIP-599, Kafka's
// org.apache.kafka.common.metrics.stats.TokenBucket): it holds up to a
// burst of quota × samples × window tokens (partition mutations), refills
// at quota tokens per second, and each mutation takes its permits, down
// below zero if need be. A client is over its quota while the bucket is
// negative, and must wait until it has refilled to zero. So a client may
// create or delete a burst's worth of partitions at once and then the
// quota per second, and a request that takes the bucket negative is still
// served: only the next one finds the quota exceeded.
//
// A pure value: time is an argument (unix ms), the quota and burst are
// passed in at each call (so a changed quota applies at once). Not safe
// for concurrent use; the Enforcer's lock owns its buckets.
type TokenBucket struct {
	tokens float64
	last   int64 // unix ms of the last refill
	begun  bool
}

// refill adds the tokens earned since the last refill, up to burst; a new
// bucket starts full, as Kafka's does.
func (b *TokenBucket) refill(quota, burst float64, now int64) {
	if !b.begun {
		b.tokens, b.last, b.begun = burst, now, true
		return
	}
	if now > b.last {
		b.tokens = min(burst, b.tokens+quota*float64(now-b.last)/1000)
		b.last = now
	}
}

// Tokens is what the bucket holds at now.
func (b *TokenBucket) Tokens(quota, burst float64, now int64) float64 {
	b.refill(quota, burst, now)
	return b.tokens
}

// Take takes permits at now and returns what is left (negative: over the
// quota).
func (b *TokenBucket) Take(quota, burst, permits float64, now int64) float64 {
	b.refill(quota, burst, now)
	b.tokens -= permits
	return b.tokens
}

// Give returns permits taken for work that was not done after all, up to
// the burst.
func (b *TokenBucket) Give(quota, burst, permits float64, now int64) {
	b.refill(quota, burst, now)
	b.tokens = min(burst, b.tokens+permits)
}

// WaitMs is how long a bucket holding tokens takes to refill to zero at
// quota per second (Kafka's throttle time for a token bucket), rounded;
// 0 when it is not negative.
func WaitMs(tokens, quota float64) int64 {
	if tokens >= 0 || quota <= 0 {
		return 0
	}
	return int64(-tokens/quota*1000 + 0.5)
}
