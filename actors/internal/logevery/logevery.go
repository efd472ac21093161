// Package logevery spaces a repeated log line. A bound reached under a
// flood (transactional ids, groups, partitions) refuses every request
// that would pass it; one line per refusal would flood the log too.
package logevery

import (
	"sync/atomic"
	"time"
)

// Limiter lets one line through per period. The zero Limiter is ready;
// safe for concurrent use.
type Limiter struct {
	last atomic.Int64 // unix nanoseconds of the last line let through
}

// Allow reports whether a line may be logged now, at most once per
// every (the first call always may).
func (l *Limiter) Allow(every time.Duration) bool {
	now := time.Now().UnixNano()
	last := l.last.Load()
	if last != 0 && now-last < int64(every) {
		return false
	}
	return l.last.CompareAndSwap(last, now)
}
