package protocol

import (
	"sync"
	"time"
)

// streamsCreateRetry is how long a failed internal topic creation waits
// before a heartbeat tries it again.
const streamsCreateRetry = 10 * time.Second

// streamsCreations tracks streams groups' internal topics being created,
// and those whose creation failed lately, so members' heartbeats do not
// ask again meanwhile (88_streams_group_heartbeat.go). Topic names come
// from clients, so failures do not stay: an entry older than
// streamsCreateRetry is as good as none, and they are swept whenever
// failures outnumber sweepAt.
type streamsCreations struct {
	mu sync.Mutex
	// running: creations under way; failed: when each last failed.
	running map[string]bool
	failed  map[string]time.Time
	sweepAt int
}

// start reports whether the caller should create topic now.
func (c *streamsCreations) start(topic string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running[topic] {
		return false
	}
	if at, ok := c.failed[topic]; ok && now.Sub(at) < streamsCreateRetry {
		return false
	}
	delete(c.failed, topic)
	if c.running == nil {
		c.running = map[string]bool{}
	}
	c.running[topic] = true
	return true
}

// done ends a creation; failed: it is not tried again for a while.
func (c *streamsCreations) done(topic string, failed bool, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.running, topic)
	if !failed {
		return
	}
	if c.failed == nil {
		c.failed = map[string]time.Time{}
	}
	c.failed[topic] = now
	if c.sweepAt == 0 {
		c.sweepAt = 1024
	}
	if len(c.failed) > c.sweepAt {
		for t, at := range c.failed {
			if now.Sub(at) >= streamsCreateRetry {
				delete(c.failed, t)
			}
		}
		// Amortized: the next sweep waits until the map doubles.
		c.sweepAt = max(1024, 2*len(c.failed))
	}
}
