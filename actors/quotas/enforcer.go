package quotas

import (
	"sync"
	"time"
)

// EnforcerConfig is Kafka's quota sampling (quota.window.num,
// quota.window.size.seconds). Zero values mean the defaults.
type EnforcerConfig struct {
	// Samples is the number of windows kept (default 11).
	Samples int
	// Window is one window's length (default 1 s).
	Window time.Duration
	// Idle drops a sensor not recorded for this long (default 1 hour, as
	// Kafka expires inactive quota sensors).
	Idle time.Duration
	// MaxSensors bounds the sensors kept (default 10000, a few MB). A
	// default quota makes one sensor per client id (or user), and Kafka
	// keeps each until it is idle for an hour, so a client cycling client
	// ids would grow them without bound. At the bound the sensor recorded
	// least recently is dropped: that client's use is measured afresh if
	// it comes back.
	MaxSensors int
}

func (c *EnforcerConfig) setDefaults() {
	if c.Samples <= 0 {
		c.Samples = 11
	}
	if c.Window <= 0 {
		c.Window = time.Second
	}
	if c.Idle <= 0 {
		c.Idle = time.Hour
	}
	if c.MaxSensors <= 0 {
		c.MaxSensors = 10000
	}
}

// Enforcer measures clients' use against their quotas. Safe for concurrent
// use: one mutex owns the sensors (held for a map lookup and a few
// additions per request, and only when a quota applies).
type Enforcer struct {
	cfg  EnforcerConfig
	snap func() *Snapshot

	mu struct {
		sync.Mutex
		sensors map[Sensor]*sensor
		// recent lists the sensors, the most recently recorded first:
		// idle ones and those past MaxSensors are dropped from its back.
		recent sensorList
	}
}

type sensor struct {
	key  Sensor
	rate *Rate
	// bucket measures controller_mutation_rate (nil for other keys); rate
	// then measures the mutations per second, for metrics.
	bucket *TokenBucket
	last   int64 // unix ms of the last record
	// throttled sums the throttle time given (ms), for metrics.
	throttled int64
	// prev, next link the sensor into Enforcer.mu.recent.
	prev, next *sensor
}

// sensorList is a doubly linked list of sensors, intrusive so that
// touching a sensor on every record allocates nothing.
type sensorList struct {
	front, back *sensor
}

func (l *sensorList) remove(s *sensor) {
	if s.prev != nil {
		s.prev.next = s.next
	} else {
		l.front = s.next
	}
	if s.next != nil {
		s.next.prev = s.prev
	} else {
		l.back = s.prev
	}
	s.prev, s.next = nil, nil
}

func (l *sensorList) pushFront(s *sensor) {
	s.prev, s.next = nil, l.front
	if l.front != nil {
		l.front.prev = s
	} else {
		l.back = s
	}
	l.front = s
}

// NewEnforcer measures against the quotas snap returns (read at every
// record, so a change applies at once).
func NewEnforcer(cfg EnforcerConfig, snap func() *Snapshot) *Enforcer {
	cfg.setDefaults()
	e := &Enforcer{cfg: cfg, snap: snap}
	e.mu.sensors = map[Sensor]*sensor{}
	return e
}

// Limits reports whether any entity has a quota on key now. When it is
// false, Record would return a zero Outcome, so callers may skip
// measuring what they would record (a fetch response's bytes).
func (e *Enforcer) Limits(key string) bool { return e.snap().Sets(key) }

// Outcome is one record's result.
type Outcome struct {
	// Throttle is how long the client must wait (0: within its quota).
	Throttle time.Duration
	// Limited says a quota applies to the client for the key.
	Limited bool
	Sensor  Sensor
	Bound   float64
}

// Record adds value (bytes, or the key's unit) to the use of the client
// (user is the principal's name, client its client id) for key at now and
// returns the throttle time Kafka's ClientQuotaManager would: 0 within the
// quota, else (observed - quota) / quota * window. maxThrottle bounds it
// (0: unbounded; Kafka bounds the request-time quota to one window).
func (e *Enforcer) Record(key, user, client string, value float64, now time.Time, maxThrottle time.Duration) Outcome {
	snap := e.snap()
	if !snap.Sets(key) {
		return Outcome{}
	}
	bound, s, ok := Resolve(snap, key, user, client)
	if !ok {
		return Outcome{}
	}
	ms := now.UnixMilli()
	e.mu.Lock()
	defer e.mu.Unlock()
	sn := e.recordLocked(s, value, ms)
	th := time.Duration(sn.rate.ThrottleMs(bound, ms)) * time.Millisecond
	if maxThrottle > 0 {
		th = min(th, maxThrottle)
	}
	sn.throttled += th.Milliseconds()
	return Outcome{Throttle: th, Limited: true, Sensor: s, Bound: bound}
}

// RecordNoThrottle adds value to the client's use as Record does, without
// working out a throttle: for use measured after the client was answered
// (Kafka's recordNoThrottle, for its network threads' time), which the
// client's next requests are measured with.
func (e *Enforcer) RecordNoThrottle(key, user, client string, value float64, now time.Time) {
	snap := e.snap()
	if !snap.Sets(key) {
		return
	}
	_, s, ok := Resolve(snap, key, user, client)
	if !ok {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.recordLocked(s, value, now.UnixMilli())
}

// recordLocked adds value at ms to the sensor s, making it if need be,
// and returns it. Called with mu held.
func (e *Enforcer) recordLocked(s Sensor, value float64, ms int64) *sensor {
	sn := e.sensorLocked(s, ms)
	sn.rate.Record(value, ms)
	return sn
}

// sensorLocked is the sensor s, made if need be and moved to the front of
// the recency list. Called with mu held.
func (e *Enforcer) sensorLocked(s Sensor, ms int64) *sensor {
	e.sweepLocked(ms)
	sn := e.mu.sensors[s]
	if sn == nil {
		for len(e.mu.sensors) >= e.cfg.MaxSensors {
			e.dropLocked(e.mu.recent.back)
		}
		sn = &sensor{key: s, rate: NewRate(e.cfg.Samples, e.cfg.Window.Milliseconds())}
		e.mu.sensors[s] = sn
	} else {
		e.mu.recent.remove(sn)
	}
	e.mu.recent.pushFront(sn)
	sn.last = ms
	return sn
}

// MutationOutcome is the result of one Mutate.
type MutationOutcome struct {
	// Refused says the mutation is not to be done: the client's quota
	// was already exceeded (strict quotas only).
	Refused bool
	// Throttle is how long the client must wait before its bucket is back
	// at zero (0: within its quota).
	Throttle time.Duration
	// Limited says a quota applies to the client.
	Limited bool
}

// Mutate takes permits (partitions created or deleted) from the client's
// controller_mutation_rate bucket at now, as Kafka's controller mutation
// quotas do. A strict quota (the request versions that know
// THROTTLING_QUOTA_EXCEEDED) refuses the mutation when the bucket is
// already negative, taking nothing, and otherwise lets it take the bucket
// below zero; a permissive one (older versions) always takes and only
// reports the throttle.
func (e *Enforcer) Mutate(user, client string, permits float64, now time.Time, strict bool) MutationOutcome {
	bound, burst, s, ok := e.mutationQuota(user, client)
	if !ok {
		return MutationOutcome{}
	}
	ms := now.UnixMilli()
	e.mu.Lock()
	defer e.mu.Unlock()
	sn := e.sensorLocked(s, ms)
	if sn.bucket == nil {
		sn.bucket = &TokenBucket{}
	}
	out := MutationOutcome{Limited: true}
	if tokens := sn.bucket.Tokens(bound, burst, ms); strict && tokens < 0 {
		out.Refused, out.Throttle = true, time.Duration(WaitMs(tokens, bound))*time.Millisecond
	} else {
		sn.rate.Record(permits, ms)
		left := sn.bucket.Take(bound, burst, permits, ms)
		if !strict {
			out.Throttle = time.Duration(WaitMs(left, bound)) * time.Millisecond
		}
	}
	sn.throttled += out.Throttle.Milliseconds()
	return out
}

// Unmutate gives back permits Mutate took for a mutation that failed after
// all (Kafka applies the quota only to mutations it makes).
func (e *Enforcer) Unmutate(user, client string, permits float64, now time.Time) {
	bound, burst, s, ok := e.mutationQuota(user, client)
	if !ok {
		return
	}
	ms := now.UnixMilli()
	e.mu.Lock()
	defer e.mu.Unlock()
	sn := e.mu.sensors[s]
	if sn == nil || sn.bucket == nil {
		return
	}
	sn.bucket.Give(bound, burst, permits, ms)
	sn.rate.Unrecord(permits, ms)
}

// mutationQuota resolves the client's controller_mutation_rate: the
// bound, its bucket's burst (the bound over every window), the sensor.
func (e *Enforcer) mutationQuota(user, client string) (bound, burst float64, s Sensor, ok bool) {
	snap := e.snap()
	if !snap.Sets(ControllerMutationRate) {
		return 0, 0, Sensor{}, false
	}
	bound, s, ok = Resolve(snap, ControllerMutationRate, user, client)
	if !ok || bound <= 0 {
		return 0, 0, Sensor{}, false
	}
	return bound, bound * float64(e.cfg.Samples) * e.cfg.Window.Seconds(), s, true
}

// Connect records a new connection from ip (canonical text form) at now
// against its connection_creation_rate (KIP-612) and returns how long to
// hold it before closing it unserved: 0 within the quota. As Kafka's
// ConnectionQuotas does, a connection over the quota is not counted (the
// client did not get it) and the delay is bounded at one window.
func (e *Enforcer) Connect(ip string, now time.Time) time.Duration {
	bound, s, ok := ResolveIP(e.snap(), ip)
	if !ok {
		return 0
	}
	ms := now.UnixMilli()
	e.mu.Lock()
	defer e.mu.Unlock()
	sn := e.recordLocked(s, 1, ms)
	th := min(time.Duration(sn.rate.ThrottleMs(bound, ms))*time.Millisecond, e.cfg.Window)
	if th > 0 {
		sn.rate.Unrecord(1, ms)
		sn.throttled += th.Milliseconds()
	}
	return th
}

// Window is one quota window's length (quota.window.size.seconds): the
// longest throttle a request-time quota gives, as in Kafka.
func (e *Enforcer) Window() time.Duration { return e.cfg.Window }

// sweepLocked drops the sensors idle longer than cfg.Idle: they are the
// back of the recency list. Called with mu held.
func (e *Enforcer) sweepLocked(now int64) {
	idle := e.cfg.Idle.Milliseconds()
	for b := e.mu.recent.back; b != nil && now-b.last > idle; b = e.mu.recent.back {
		e.dropLocked(b)
	}
}

func (e *Enforcer) dropLocked(s *sensor) {
	e.mu.recent.remove(s)
	delete(e.mu.sensors, s.key)
}

// SensorStat is one sensor's state for metrics.
type SensorStat struct {
	Sensor     Sensor
	Rate       float64 // per second, at the time of the call
	ThrottleMs int64   // total throttle time given
}

// Stats reads every live sensor (for a metrics scrape).
func (e *Enforcer) Stats(now time.Time) []SensorStat {
	ms := now.UnixMilli()
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]SensorStat, 0, len(e.mu.sensors))
	for k, s := range e.mu.sensors {
		out = append(out, SensorStat{Sensor: k, Rate: s.rate.Measure(ms), ThrottleMs: s.throttled})
	}
	return out
}
