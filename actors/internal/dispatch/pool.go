// Package dispatch runs short tasks (protoactor mailbox runs, callback
// drains) on long-lived goroutines.
//
// protoactor's default dispatcher starts a goroutine for every mailbox
// run. Each starts on a fresh 2 KiB stack and the produce path needs
// several KiB, so every run paid for growing and copying its stack
// (runtime.newstack/copystack, about 5% of the broker's CPU while
// producing). A Pool hands each run to a parked worker whose stack has
// already grown, and starts a worker only when none is idle. It is an
// actor.Dispatcher, and usable alone through Schedule.
package dispatch

import (
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// Pool is an actor.Dispatcher. Workers park on an unbuffered channel
// between runs; at most maxIdle stay parked, the rest exit when their
// run ends, so a burst does not leave goroutines behind.
type Pool struct {
	throughput int
	maxIdle    int32
	work       chan func()
	idle       atomic.Int32 // workers parked on work, or about to be
}

var _ actor.Dispatcher = (*Pool)(nil)

// NewPool returns a dispatcher that lets a mailbox process throughput
// messages before yielding (protoactor's default is 300) and keeps up to
// maxIdle workers parked.
func NewPool(throughput, maxIdle int) *Pool {
	return &Pool{throughput: throughput, maxIdle: int32(maxIdle), work: make(chan func())}
}

// Throughput is how many messages a mailbox run processes before it
// yields the processor.
func (p *Pool) Throughput() int { return p.throughput }

// Schedule runs fn on a parked worker, or on a new one if none is parked.
func (p *Pool) Schedule(fn func()) {
	select {
	case p.work <- fn:
	default:
		go p.worker(fn)
	}
}

func (p *Pool) worker(fn func()) {
	for {
		fn()
		if p.idle.Add(1) > p.maxIdle {
			p.idle.Add(-1)
			return
		}
		fn = <-p.work
		p.idle.Add(-1)
	}
}

// Idle is how many workers are parked (for tests and metrics).
func (p *Pool) Idle() int { return int(p.idle.Load()) }
