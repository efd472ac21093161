// Package clustertest has a fake asynchronous replicator for the scripted
// tests of appliers (coordinators, stores): it behaves as the raft
// replicator does where an applier can tell, without a network, and keeps
// the replication contract (done exactly once, never inline, unknown
// outcomes reported as such).
package clustertest

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/regent-broker/regent/actors/replication"
)

// FakeRaft stands in for the raft replicator where it matters to a
// coordinator: Propose on the leader encodes the command and returns at
// once; one goroutine (the "FSM") later decodes it on every node and
// applies it to that node's registered applier, in proposal order, and
// then calls done with the proposer's result. Propose on another node
// fails with replication.ErrNotLeader, answered on a callback goroutine.
// While stalled, proposals are held (appended, neither applied nor
// answered) until release; a delay makes every commit wait that long
// first.
type FakeRaft struct {
	t     *testing.T
	nodes []*FakeNode
	wg    sync.WaitGroup

	mu     sync.Mutex
	cond   *sync.Cond
	leader int
	// term is the leader's term: 1, raised by every SetLeader. Entries
	// carry the term they were proposed in (replication.Termed).
	term   uint64
	queue  []fakeEntry
	held   []fakeEntry
	stall  bool
	delay  time.Duration
	closed bool
	// refused counts proposals answered ErrNotLeader, counted after their
	// done returned (so what done did is visible to whoever sees it).
	refused int
	// cb answers refusals off the proposer's goroutine.
	cb replication.Callbacks
}

type fakeEntry struct {
	key, kind string
	payload   []byte
	term      uint64
	from      *FakeNode
	done      func(any, error)
}

// FakeNode is one node's view: a replication.Replicator with its own
// appliers.
type FakeNode struct {
	r  *FakeRaft
	id int

	mu       sync.Mutex
	appliers map[string]replication.Applier
}

// New starts a fake cluster of n nodes led by node 0, stopped when the
// test ends.
func New(t *testing.T, n int) *FakeRaft {
	r := &FakeRaft{t: t, term: 1}
	r.cond = sync.NewCond(&r.mu)
	for i := range n {
		r.nodes = append(r.nodes, &FakeNode{r: r, id: i, appliers: map[string]replication.Applier{}})
	}
	r.wg.Add(1)
	go r.run()
	t.Cleanup(r.Close)
	return r
}

// Node is node i's replicator.
func (r *FakeRaft) Node(i int) *FakeNode { return r.nodes[i] }

// SetLeader moves leadership, in a new term; entries already proposed
// still commit, in the term they were proposed in (as raft may commit a
// deposed leader's entries).
func (r *FakeRaft) SetLeader(i int) {
	r.mu.Lock()
	r.leader = i
	r.term++
	r.mu.Unlock()
}

// Term is the current leader's term.
func (r *FakeRaft) Term() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.term
}

// SetDelay makes every commit wait d first.
func (r *FakeRaft) SetDelay(d time.Duration) {
	r.mu.Lock()
	r.delay = d
	r.mu.Unlock()
}

// SetStall holds (on) or stops holding proposals until Release.
func (r *FakeRaft) SetStall(on bool) {
	r.mu.Lock()
	r.stall = on
	r.mu.Unlock()
}

// HeldCount is how many proposals wait for release.
func (r *FakeRaft) HeldCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.held)
}

// Refused is how many proposals were answered ErrNotLeader (this node
// did not lead, or the fake was closed); each is counted once its done
// has returned.
func (r *FakeRaft) Refused() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refused
}

func (r *FakeRaft) countRefused() {
	r.mu.Lock()
	r.refused++
	r.mu.Unlock()
}

// Release commits the held proposals.
func (r *FakeRaft) Release() {
	r.mu.Lock()
	r.queue = append(r.queue, r.held...)
	r.held = nil
	r.cond.Signal()
	r.mu.Unlock()
}

// Close commits what is queued, answers what is held with an unknown
// outcome (appended, never committed: as a raft leader that shuts down
// with entries in flight) and stops the FSM.
func (r *FakeRaft) Close() {
	r.mu.Lock()
	r.closed = true
	held := r.held
	r.held = nil
	r.cond.Signal()
	r.mu.Unlock()
	r.wg.Wait()
	for _, e := range held {
		e.done(nil, fmt.Errorf("fake raft closed with the entry in flight: %w", replication.ErrOutcomeUnknown))
	}
}

func (r *FakeRaft) run() {
	defer r.wg.Done()
	for {
		r.mu.Lock()
		for len(r.queue) == 0 && !r.closed {
			r.cond.Wait()
		}
		if len(r.queue) == 0 {
			r.mu.Unlock()
			return
		}
		e := r.queue[0]
		r.queue = r.queue[1:]
		delay := r.delay
		r.mu.Unlock()
		time.Sleep(delay)
		r.commit(e)
	}
}

func (r *FakeRaft) commit(e fakeEntry) {
	var result any
	for _, n := range r.nodes {
		// Every node decodes its own copy, which is then scribbled
		// over: a decoder that kept bytes of the payload would see it.
		buf := bytes.Clone(e.payload)
		cmd, err := replication.DecodeCommand(e.kind, buf)
		if err != nil {
			r.t.Errorf("node %d: %v", n.id, err)
			e.done(nil, err)
			return
		}
		for i := range buf {
			buf[i] = 0xa5
		}
		if t, ok := cmd.(replication.Termed); ok {
			t.SetTerm(e.term)
		}
		n.mu.Lock()
		a := n.appliers[e.key]
		n.mu.Unlock()
		if a == nil {
			continue
		}
		res := a.Apply(cmd)
		if n == e.from {
			result = res
		}
	}
	e.done(result, nil)
}

// Register implements replication.Replicator.
func (n *FakeNode) Register(key string, a replication.Applier) {
	n.mu.Lock()
	n.appliers[key] = a
	n.mu.Unlock()
}

// Unregister implements replication.Replicator.
func (n *FakeNode) Unregister(key string) {
	n.mu.Lock()
	delete(n.appliers, key)
	n.mu.Unlock()
}

// Propose implements replication.Replicator.
func (n *FakeNode) Propose(key string, cmd replication.Command, done func(any, error)) {
	r := n.r
	kind, payload, err := replication.EncodeCommand(cmd)
	if err != nil {
		r.cb.Add(done, nil, fmt.Errorf("propose to %s: %w", key, err))
		return
	}
	refuse := func(err error) {
		r.cb.Add(func(res any, err error) {
			done(res, err)
			r.countRefused()
		}, nil, err)
	}
	r.mu.Lock()
	switch {
	case r.closed:
		r.mu.Unlock()
		refuse(fmt.Errorf("propose to %s: fake raft closed: %w", key, replication.ErrNotLeader))
		return
	case r.leader != n.id:
		r.mu.Unlock()
		refuse(fmt.Errorf("propose to %s on node %d: %w", key, n.id, replication.ErrNotLeader))
		return
	}
	e := fakeEntry{key: key, kind: kind, payload: slices.Clone(payload), term: r.term, from: n, done: done}
	if r.stall {
		r.held = append(r.held, e)
	} else {
		r.queue = append(r.queue, e)
		r.cond.Signal()
	}
	r.mu.Unlock()
}
