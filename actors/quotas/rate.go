package quotas

// Rate is Kafka's windowed rate (org.apache.kafka.common.metrics.stats.Rate
// over a WindowedSum), which ClientQuotaManager measures quotas with:
// Samples windows of Window each; a value is added to the current window,
// a new one starts once it has lasted Window; windows older than
// Samples*Window are reset when measured. The rate divides the windows' sum
// by the time since the oldest window began, taken as at least Samples-1
// whole windows, so a fresh sensor does not read one early burst as a huge
// rate (and, as in Kafka, lets a client that was idle send up to
// (Samples-1)*Window*quota at once before it is throttled).
//
// A Rate is a pure value: time is an argument (unix milliseconds). Not safe
// for concurrent use; the Enforcer's lock owns its Rates.
type Rate struct {
	samples  int   // number of windows (quota.window.num)
	windowMs int64 // one window's length (quota.window.size.seconds)
	w        []window
	cur      int
}

type window struct {
	start int64 // when the window began (unix ms)
	total float64
}

// NewRate makes a rate over samples windows of windowMs each (both at
// least 1).
func NewRate(samples int, windowMs int64) *Rate {
	return &Rate{samples: max(samples, 1), windowMs: max(windowMs, 1)}
}

// Record adds v at now.
func (r *Rate) Record(v float64, now int64) {
	w := r.current(now)
	if now-w.start >= r.windowMs {
		w = r.advance(now)
	}
	w.total += v
}

// Unrecord takes back v recorded in the current window (Kafka's
// unrecordQuotaSensor, for work that was refused after all).
func (r *Rate) Unrecord(v float64, now int64) {
	r.current(now).total -= v
}

func (r *Rate) current(now int64) *window {
	if len(r.w) == 0 {
		r.w = append(r.w, window{start: now})
	}
	return &r.w[r.cur]
}

func (r *Rate) advance(now int64) *window {
	r.cur = (r.cur + 1) % r.samples
	if r.cur >= len(r.w) {
		r.w = append(r.w, window{start: now})
	} else {
		r.w[r.cur] = window{start: now}
	}
	return &r.w[r.cur]
}

// purge resets the windows that ended more than samples windows ago.
func (r *Rate) purge(now int64) {
	expire := int64(r.samples) * r.windowMs
	for i := range r.w {
		if now-r.w[i].start >= expire {
			r.w[i] = window{start: now}
		}
	}
}

// WindowMs is the time the rate is measured over at now: since the oldest
// live window began, at least samples-1 whole windows.
func (r *Rate) WindowMs(now int64) int64 {
	r.purge(now)
	oldest := r.current(now).start
	for _, w := range r.w {
		oldest = min(oldest, w.start)
	}
	elapsed := now - oldest
	if full, least := elapsed/r.windowMs, int64(r.samples-1); full < least {
		elapsed += (least - full) * r.windowMs
	}
	return elapsed
}

// Measure is the rate per second at now.
func (r *Rate) Measure(now int64) float64 {
	ms := r.WindowMs(now)
	var sum float64
	for _, w := range r.w {
		sum += w.total
	}
	if ms <= 0 {
		// One window of one sample: Kafka's windowSize is then 0 too
		// only when samples is 1 and no time passed; count one window.
		ms = r.windowMs
	}
	return sum / (float64(ms) / 1000)
}

// ThrottleMs is how long a client whose rate is over bound at now must
// wait, as Kafka's QuotaUtils.throttleTime computes it: the excess over
// the bound, as a fraction of the bound, of the measured window
// ((observed - bound) / bound * window), rounded; 0 when within the bound.
func (r *Rate) ThrottleMs(bound float64, now int64) int64 {
	if bound <= 0 {
		return 0
	}
	observed := r.Measure(now)
	if observed <= bound {
		return 0
	}
	return int64((observed-bound)/bound*float64(r.WindowMs(now)) + 0.5)
}
