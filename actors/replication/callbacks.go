package replication

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/regent-broker/regent/actors/internal/dispatch"
)

// Callbacks runs proposals' done callbacks off the proposer's goroutine,
// one at a time and in the order they were added. A replicator uses it for
// every answer it knows while Propose still runs (the single-node
// replicator's applied result, a refusal), so none is given inline. The
// zero value is ready; it needs no Close: a goroutine runs while callbacks
// are queued and ends when the queue is empty (one run per burst, not one
// per proposal, on a pooled goroutine).
type Callbacks struct {
	mu struct {
		sync.Mutex
		queue   []call
		running bool // a drain goroutine owns the queue's head
		// spare is the buffer the last drain gave back, so that bursts
		// do not grow a new one each time.
		spare []call
	}
}

type call struct {
	done func(any, error)
	res  any
	err  error
}

// Add queues done(res, err). Any goroutine; it never blocks on a callback.
func (c *Callbacks) Add(done func(any, error), res any, err error) {
	c.mu.Lock()
	c.mu.queue = append(c.mu.queue, call{done: done, res: res, err: err})
	if c.mu.running {
		c.mu.Unlock()
		return
	}
	c.mu.running = true
	c.mu.Unlock()
	drainers.Schedule(c.drain)
}

// drainers runs drains on long-lived goroutines: a fresh goroutine per
// burst grew its stack for the partition actor's send path every time.
var drainers = dispatch.NewPool(0, 32)

// drain runs queued callbacks until the queue is empty. Only one drain
// runs at a time (mu.running), which keeps the order.
func (c *Callbacks) drain() {
	c.mu.Lock()
	batch := c.mu.spare
	c.mu.spare = nil
	c.mu.Unlock()
	for {
		c.mu.Lock()
		if len(c.mu.queue) == 0 {
			c.mu.running = false
			c.mu.spare = batch[:0]
			c.mu.Unlock()
			return
		}
		// Swap buffers: proposers append to the other one meanwhile.
		batch, c.mu.queue = c.mu.queue, batch[:0]
		c.mu.Unlock()
		for i := range batch {
			run(batch[i])
			batch[i] = call{} // drop references for the GC
		}
	}
}

// run calls one callback; a panic in it is a caller's bug, logged so that
// the queue keeps serving the others.
func run(cl call) {
	defer func() {
		if r := recover(); r != nil {
			slog.Error("replication: done callback panicked", "panic", fmt.Sprint(r))
		}
	}()
	cl.done(cl.res, cl.err)
}
