package share

// The writer: group commit of the share-partitions' state writes. A
// ShareFetch acquires on all its partitions at once, and each acquisition
// must be durable before it is answered; proposing each one alone cost a
// replicated command and a log write (an fsync with Fsync) per partition.
// The writer keeps one proposal in flight: puts that arrive meanwhile wait
// and go out together, as one putCmd (one raft command, one recordlog
// write and sync), when it ends.

import (
	"sync"
	"sync/atomic"

	"github.com/regent-broker/regent/actors/replication"
)

// put is one share-partition's new durable form (empty: forget it) and
// who waits for it. done is called once, from a replicator goroutine,
// with the write's error (nil: applied).
type put struct {
	key   partKey
	value []byte
	done  func(err error)
}

// writer coalesces puts. Safe from any goroutine.
type writer struct {
	repl replication.Replicator
	// proposals and puts count what was written (WriteStats).
	proposals, puts atomic.Uint64

	mu struct {
		sync.Mutex
		queue []put
		// inFlight: a proposal is out; its done proposes the queue.
		inFlight bool
	}
}

// WriteStats counts the share-partition state writes since the Manager
// started: Proposals replicated commands (each one log write), carrying
// Puts share-partition states.
type WriteStats struct {
	Proposals, Puts uint64
}

// put queues p and proposes it now when nothing is in flight. An actor
// has at most one put queued or in flight, so a batch holds a key once.
func (w *writer) put(p put) { w.putAll([]put{p}) }

// propose writes batch as one command; when it ends, the puts queued
// meanwhile go out as the next one. The keys were checked (checkKeyLens)
// by the actors.
func (w *writer) propose(batch []put) {
	var frames []byte
	for _, p := range batch {
		frames = appendPutFrame(frames, p.key, p.value)
	}
	w.proposals.Add(1)
	w.puts.Add(uint64(len(batch)))
	w.repl.Propose(replKey, &putCmd{frames: frames}, func(res any, err error) {
		_, err = replication.As[any](res, err)
		for _, p := range batch {
			p.done(err)
		}
		w.next()
	})
}

// putAll is put for several share-partitions at once (a gather's).
func (w *writer) putAll(ps []put) {
	w.mu.Lock()
	w.mu.queue = append(w.mu.queue, ps...)
	if w.mu.inFlight {
		w.mu.Unlock()
		return
	}
	w.mu.inFlight = true
	batch := w.mu.queue
	w.mu.queue = nil
	w.mu.Unlock()
	w.propose(batch)
}

// gather collects the puts of requests sent to several share-partitions
// together (one fetch's acquisitions or acknowledgements) and hands them
// to the writer as one batch once each request has reported: a put, or
// nothing to write. A request reports when its actor steps it, or at once
// when it must wait behind its actor's write in flight (it then writes
// alone, later), so a gather never waits for another write: two fetches
// gathering on the same share-partitions in opposite orders cannot hold
// each other. Safe from any goroutine.
type gather struct {
	w  *writer
	mu struct {
		sync.Mutex
		left int
		puts []put
	}
}

func newGather(w *writer, n int) *gather {
	g := &gather{w: w}
	g.mu.left = n
	return g
}

// report ends one request's part: p is its put, nil when it writes
// nothing (or alone). Called exactly once per request.
func (g *gather) report(p *put) {
	g.mu.Lock()
	if p != nil {
		g.mu.puts = append(g.mu.puts, *p)
	}
	g.mu.left--
	done := g.mu.left == 0
	puts := g.mu.puts
	g.mu.Unlock()
	if done && len(puts) > 0 {
		g.w.putAll(puts)
	}
}

// next proposes what queued during the proposal that just ended.
func (w *writer) next() {
	w.mu.Lock()
	batch := w.mu.queue
	w.mu.queue = nil
	if len(batch) == 0 {
		w.mu.inFlight = false
	}
	w.mu.Unlock()
	if len(batch) > 0 {
		w.propose(batch)
	}
}

func (w *writer) stats() WriteStats {
	return WriteStats{Proposals: w.proposals.Load(), Puts: w.puts.Load()}
}
