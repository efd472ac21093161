package group

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/regent-broker/regent/cluster"
)

// fakeRaft stands in for the raft replicator where it matters to a
// coordinator: Propose on the leader encodes the command and returns at
// once; one goroutine (the "FSM") later decodes it on every node and
// applies it to that node's registered applier, in proposal order, and
// then calls done with the proposer's result. Propose on another node
// fails with cluster.ErrNotLeader. While stalled, proposals are held
// (neither applied nor answered) until release; a delay makes every commit
// wait that long first.
type fakeRaft struct {
	t     *testing.T
	nodes []*fakeNode
	wg    sync.WaitGroup

	mu     sync.Mutex
	cond   *sync.Cond
	leader int
	queue  []fakeEntry
	held   []fakeEntry
	stall  bool
	delay  time.Duration
	closed bool
}

type fakeEntry struct {
	key, kind string
	payload   []byte
	from      *fakeNode
	done      func(any, error)
}

// fakeNode is one node's view: a cluster.Replicator with its own appliers.
type fakeNode struct {
	r  *fakeRaft
	id int

	mu       sync.Mutex
	appliers map[string]cluster.Applier
}

func newFakeRaft(t *testing.T, n int) *fakeRaft {
	r := &fakeRaft{t: t}
	r.cond = sync.NewCond(&r.mu)
	for i := range n {
		r.nodes = append(r.nodes, &fakeNode{r: r, id: i, appliers: map[string]cluster.Applier{}})
	}
	r.wg.Add(1)
	go r.run()
	t.Cleanup(r.close)
	return r
}

func (r *fakeRaft) node(i int) *fakeNode { return r.nodes[i] }

// setLeader moves leadership; entries already proposed still commit (as
// raft may commit a deposed leader's entries).
func (r *fakeRaft) setLeader(i int) {
	r.mu.Lock()
	r.leader = i
	r.mu.Unlock()
}

func (r *fakeRaft) setDelay(d time.Duration) {
	r.mu.Lock()
	r.delay = d
	r.mu.Unlock()
}

func (r *fakeRaft) setStall(on bool) {
	r.mu.Lock()
	r.stall = on
	r.mu.Unlock()
}

// heldCount is how many proposals wait for release.
func (r *fakeRaft) heldCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.held)
}

// release commits the held proposals.
func (r *fakeRaft) release() {
	r.mu.Lock()
	r.queue = append(r.queue, r.held...)
	r.held = nil
	r.cond.Signal()
	r.mu.Unlock()
}

// close commits what is queued, fails what is held and stops the FSM.
func (r *fakeRaft) close() {
	r.mu.Lock()
	r.closed = true
	held := r.held
	r.held = nil
	r.cond.Signal()
	r.mu.Unlock()
	r.wg.Wait()
	for _, e := range held {
		e.done(nil, fmt.Errorf("fake raft closed: %w", cluster.ErrNotLeader))
	}
}

func (r *fakeRaft) run() {
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

func (r *fakeRaft) commit(e fakeEntry) {
	var result any
	for _, n := range r.nodes {
		// Every node decodes its own copy, which is then scribbled
		// over: a decoder that kept bytes of the payload would see it.
		buf := bytes.Clone(e.payload)
		cmd, err := cluster.DecodeCommand(e.kind, buf)
		if err != nil {
			r.t.Errorf("node %d: %v", n.id, err)
			e.done(nil, err)
			return
		}
		for i := range buf {
			buf[i] = 0xa5
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

func (n *fakeNode) Register(key string, a cluster.Applier) {
	n.mu.Lock()
	n.appliers[key] = a
	n.mu.Unlock()
}

func (n *fakeNode) Unregister(key string) {
	n.mu.Lock()
	delete(n.appliers, key)
	n.mu.Unlock()
}

func (n *fakeNode) Propose(key string, cmd cluster.Command, done func(any, error)) {
	kind, payload, err := cluster.EncodeCommand(cmd)
	if err != nil {
		done(nil, fmt.Errorf("propose to %s: %w", key, err))
		return
	}
	r := n.r
	r.mu.Lock()
	switch {
	case r.closed:
		r.mu.Unlock()
		done(nil, fmt.Errorf("propose to %s: fake raft closed: %w", key, cluster.ErrNotLeader))
		return
	case r.leader != n.id:
		r.mu.Unlock()
		done(nil, fmt.Errorf("propose to %s on node %d: %w", key, n.id, cluster.ErrNotLeader))
		return
	}
	e := fakeEntry{key: key, kind: kind, payload: slices.Clone(payload), from: n, done: done}
	if r.stall {
		r.held = append(r.held, e)
	} else {
		r.queue = append(r.queue, e)
		r.cond.Signal()
	}
	r.mu.Unlock()
}
