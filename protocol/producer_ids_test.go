package protocol

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/regent-broker/regent/cluster"
)

// pidRaft is an asynchronous replicator shared by several nodes: Propose
// on the leader encodes the command; one goroutine decodes it for every
// node, applies it there in log order and then calls done with the
// leader's result. Propose elsewhere fails with cluster.ErrNotLeader.
type pidRaft struct {
	queue chan pidEntry
	wg    sync.WaitGroup

	mu     sync.Mutex
	nodes  []*pidNode
	leader *pidNode
}

type pidEntry struct {
	key, kind string
	payload   []byte
	from      *pidNode
	done      func(any, error)
}

type pidNode struct {
	raft     *pidRaft
	mu       sync.Mutex
	appliers map[string]cluster.Applier
}

func newPidRaft(t *testing.T, n int) *pidRaft {
	f := &pidRaft{queue: make(chan pidEntry, 64)}
	for range n {
		f.nodes = append(f.nodes, &pidNode{raft: f, appliers: map[string]cluster.Applier{}})
	}
	f.leader = f.nodes[0]
	f.wg.Add(1)
	go f.run()
	t.Cleanup(func() { close(f.queue); f.wg.Wait() })
	return f
}

func (f *pidRaft) run() {
	defer f.wg.Done()
	for e := range f.queue {
		var leaderRes any
		var leaderErr error
		for _, n := range f.nodes {
			cmd, err := cluster.DecodeCommand(e.kind, e.payload)
			if err != nil {
				leaderErr = err
				continue
			}
			n.mu.Lock()
			a := n.appliers[e.key]
			n.mu.Unlock()
			if a == nil {
				continue
			}
			if res := a.Apply(cmd); n == e.from {
				leaderRes = res
			}
		}
		e.done(leaderRes, leaderErr)
	}
}

func (f *pidRaft) setLeader(n *pidNode) {
	f.mu.Lock()
	f.leader = n
	f.mu.Unlock()
}

func (n *pidNode) Register(key string, a cluster.Applier) {
	n.mu.Lock()
	n.appliers[key] = a
	n.mu.Unlock()
}

func (n *pidNode) Unregister(key string) {
	n.mu.Lock()
	delete(n.appliers, key)
	n.mu.Unlock()
}

func (n *pidNode) Propose(key string, cmd cluster.Command, done func(any, error)) {
	n.raft.mu.Lock()
	leader := n.raft.leader == n
	n.raft.mu.Unlock()
	if !leader {
		done(nil, fmt.Errorf("propose %s: %w", key, cluster.ErrNotLeader))
		return
	}
	kind, payload, err := cluster.EncodeCommand(cmd)
	if err != nil {
		done(nil, err)
		return
	}
	n.raft.queue <- pidEntry{key: key, kind: kind, payload: payload, from: n, done: done}
}

func TestProducerIDsLocal(t *testing.T) {
	dir := t.TempDir()
	p, err := OpenProducerIDs(dir)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	last := int64(-1)
	for range producerIDBlock + 10 {
		id, err := p.Next()
		if err != nil {
			t.Fatal(err)
		}
		if seen[id] || id <= last {
			t.Fatalf("id %d after %d", id, last)
		}
		seen[id], last = true, id
	}
	// A restart continues past the reservation, never below it.
	p2, err := OpenProducerIDs(dir)
	if err != nil {
		t.Fatal(err)
	}
	id, err := p2.Next()
	if err != nil {
		t.Fatal(err)
	}
	if id <= last {
		t.Fatalf("after restart: %d, last handed out %d", id, last)
	}
}

func TestProducerIDsAcrossLeaders(t *testing.T) {
	f := newPidRaft(t, 2)
	dirA, dirB := t.TempDir(), t.TempDir()
	a, err := NewProducerIDs(dirA, f.nodes[0])
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewProducerIDs(dirB, f.nodes[1])
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]string{}
	take := func(p *ProducerIDs, who string, n int) {
		t.Helper()
		for range n {
			id, err := p.Next()
			if err != nil {
				t.Fatalf("%s: %v", who, err)
			}
			if prev, dup := seen[id]; dup {
				t.Fatalf("id %d handed out by %s and again by %s", id, prev, who)
			}
			seen[id] = who
		}
	}

	take(a, "a", 1500) // two blocks
	if _, err := b.Next(); !errors.Is(err, cluster.ErrNotLeader) || !errors.Is(err, kerr.NotCoordinator) {
		t.Fatalf("follower without a block: %v", err)
	}

	// b takes over in the middle of a's second block.
	f.setLeader(f.nodes[1])
	b.Resume()
	take(b, "b", 1200)
	// a still has ids of its own block left: they are its alone, so a
	// stale leader handing them out reuses nothing.
	take(a, "a (stale)", 500)
	if _, err := a.Next(); !errors.Is(err, kerr.NotCoordinator) {
		t.Fatalf("deposed leader past its block: %v", err)
	}

	// And back: a continues past everything b reserved.
	f.setLeader(f.nodes[0])
	a.Resume()
	take(a, "a again", 1100)

	// Both nodes applied the same reservations, and persisted them.
	a.state.Lock()
	endA := a.state.reservedEnd
	a.state.Unlock()
	b.state.Lock()
	endB := b.state.reservedEnd
	b.state.Unlock()
	if endA != endB || endA != 6*producerIDBlock {
		t.Fatalf("reserved ends %d and %d, want %d", endA, endB, 6*producerIDBlock)
	}
	reopened, err := OpenProducerIDs(dirB)
	if err != nil {
		t.Fatal(err)
	}
	take(reopened, "b reopened", 1)
}

func TestProducerIDsGrantIsExclusive(t *testing.T) {
	p, err := OpenProducerIDs(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// Two leaders that read the same reservedEnd propose the same block:
	// only the first committed one is granted.
	if got := p.Apply(&reserveCmd{Start: 0, End: producerIDBlock}); got != true {
		t.Fatalf("first reservation: %v", got)
	}
	if got := p.Apply(&reserveCmd{Start: 0, End: producerIDBlock}); got != false {
		t.Fatalf("overlapping reservation: %v", got)
	}
	if got := p.Apply(&reserveCmd{Start: 500, End: 1500}); got != false {
		t.Fatalf("partly overlapping reservation: %v", got)
	}
	// Applied but not granted, it still moved reservedEnd: the next block
	// starts past it.
	id, err := p.Next()
	if err != nil {
		t.Fatal(err)
	}
	if id != 1500 {
		t.Fatalf("next id %d, want 1500", id)
	}
}

// TestNodeProducerIDs: a node's own allocator hands out ids in its own
// range, never again after a reopen.
func TestNodeProducerIDs(t *testing.T) {
	dir := t.TempDir()
	p, err := OpenNodeProducerIDs(dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	first, err := p.Next()
	if err != nil || first != 3<<40 {
		t.Fatalf("first id %d (%v), want %d", first, err, int64(3)<<40)
	}
	q, err := OpenNodeProducerIDs(dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	next, err := q.Next()
	if err != nil || next <= first || next >= 4<<40 {
		t.Fatalf("id after reopen %d (%v): want in (%d, %d)", next, err, first, int64(4)<<40)
	}
	if _, err := OpenNodeProducerIDs(dir, 0); err == nil {
		t.Fatal("node id 0 accepted")
	}
}
