package cluster

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/regent-broker/regent/actors/replication"
	"github.com/regent-broker/regent/interop/testwait"
)

// outcomes collects proposals' answers and checks the replication
// contract as a proposer sees it: done waits until the proposer is back
// from Propose (an inline done would wait for a Propose that cannot
// return, and fails after the deadline), and runs exactly once.
type outcomes struct {
	t  *testing.T
	wg sync.WaitGroup
	mu sync.Mutex
	// got[v] is every answer proposal v got.
	got map[uint64][]error
	res map[uint64]any
}

func newOutcomes(t *testing.T) *outcomes {
	return &outcomes{t: t, got: map[uint64][]error{}, res: map[uint64]any{}}
}

func (o *outcomes) propose(r Replicator, v uint64, cmd Command) {
	returned := make(chan struct{})
	o.wg.Add(1)
	r.Propose("list", cmd, func(res any, err error) {
		defer o.wg.Done()
		select {
		case <-returned:
		case <-time.After(10 * time.Second):
			o.t.Errorf("proposal %d: done ran while Propose had not returned (inline)", v)
		}
		o.mu.Lock()
		o.got[v] = append(o.got[v], err)
		o.res[v] = res
		o.mu.Unlock()
	})
	close(returned)
}

// wait waits for every answer; each proposal must have exactly one.
func (o *outcomes) wait(what string) {
	o.t.Helper()
	ch := make(chan struct{})
	go func() { o.wg.Wait(); close(ch) }()
	select {
	case <-ch:
	case <-time.After(60 * time.Second):
		o.t.Fatalf("%s: answers missing after 60s", what)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for v, errs := range o.got {
		if len(errs) != 1 {
			o.t.Errorf("%s: proposal %d answered %d times: %v", what, v, len(errs), errs)
		}
	}
}

// TestRaftProposeContract: refusals (not leader yet, a command raft
// cannot carry) and commits are all answered off the proposer's
// goroutine, exactly once; refusals are definite failures, not unknown.
func TestRaftProposeContract(t *testing.T) {
	base := t.TempDir()
	self := Peer{ID: 1, Raft: freeAddr(t)}
	o := RaftOptions{Self: self, Peers: []Peer{self}, Dir: filepath.Join(base, "raft"), StateDir: filepath.Join(base, "state")}
	r, err := NewRaft(o)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Shutdown() }()
	list := newListApplier(o.StateDir, true)
	r.Register("list", list)

	before := newOutcomes(t)
	before.propose(r, 0, &counterCmd{n: 0}) // not started: not the leader yet
	before.wait("before start")
	if err := before.got[0][0]; !errors.Is(err, ErrNotLeader) || errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("proposal before start: %v", err)
	}

	r.Start()
	testwait.For(t, "leadership", 15*time.Second, r.Ready)
	after := newOutcomes(t)
	after.propose(r, 1, 42) // an int cannot be encoded
	for v := uint64(2); v < 202; v++ {
		after.propose(r, v, &counterCmd{n: v})
	}
	after.wait("after start")
	if err := after.got[1][0]; !errors.Is(err, ErrNotEncodable) || errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("unencodable proposal: %v", err)
	}
	for v := uint64(2); v < 202; v++ {
		if err := after.got[v][0]; err != nil {
			t.Fatalf("proposal %d: %v", v, err)
		}
		if n, ok := after.res[v].(int); !ok || n != int(v-1) {
			t.Fatalf("proposal %d: result %v, want %d", v, after.res[v], v-1)
		}
	}
}

// TestRaftUnknownOutcome: a leader whose followers are gone appends
// proposals it cannot commit, and is then shut down. Every proposal is
// answered exactly once, never as a success; those raft had taken are
// unknown outcomes, and a definite failure (ErrNotLeader) is never one
// that a later leader commits: after all nodes restart and a new entry
// commits, no node holds a value whose proposal failed definitely, and
// every node holds the same values.
func TestRaftUnknownOutcome(t *testing.T) {
	base := t.TempDir()
	var peers []Peer
	for i := int32(1); i <= 3; i++ {
		peers = append(peers, Peer{ID: i, Raft: freeAddr(t)})
	}
	opts := func(p Peer) RaftOptions {
		return RaftOptions{Self: p, Peers: peers, Dir: filepath.Join(base, fmt.Sprint(p.ID), "raft"), StateDir: filepath.Join(base, fmt.Sprint(p.ID), "state")}
	}
	nodes := make([]*testNode, 3)
	for i, p := range peers {
		nodes[i] = startNode(t, opts(p), true)
	}
	defer func() {
		for _, n := range nodes {
			if n != nil {
				_ = n.r.Shutdown()
			}
		}
	}()
	testwait.For(t, "a leader", 15*time.Second, func() bool { return leaderOf(nodes) != nil })
	leader := leaderOf(nodes)
	if err := propose(t, leader, 1); err != nil {
		t.Fatal(err)
	}
	for i, n := range nodes {
		if n != leader {
			_ = n.r.Shutdown()
			nodes[i] = nil
		}
	}
	o := newOutcomes(t)
	const from, mid, to = 100, 200, 400
	last := leader.r.raft.LastIndex()
	for v := uint64(from); v < mid; v++ {
		o.propose(leader.r, v, &counterCmd{n: v})
	}
	// Appended to the leader's log (no quorum to commit them): in flight.
	testwait.For(t, "raft to take the first proposals", 10*time.Second, func() bool { return leader.r.raft.LastIndex() > last })
	for v := uint64(mid); v < to; v++ {
		o.propose(leader.r, v, &counterCmd{n: v})
	}
	_ = leader.r.Shutdown()
	for i, n := range nodes {
		if n == leader {
			nodes[i] = nil
		}
	}
	o.wait("in flight at shutdown")
	definite := map[uint64]bool{}
	unknown := 0
	for v := uint64(from); v < to; v++ {
		switch err := o.got[v][0]; {
		case err == nil:
			t.Fatalf("proposal %d succeeded without a quorum", v)
		case errors.Is(err, ErrOutcomeUnknown):
			if errors.Is(err, ErrNotLeader) {
				t.Fatalf("proposal %d is both unknown and not leader: %v", v, err)
			}
			unknown++
		case errors.Is(err, ErrNotLeader):
			definite[v] = true
		default:
			t.Fatalf("proposal %d: neither unknown nor a definite refusal: %v", v, err)
		}
	}
	if unknown == 0 {
		t.Fatalf("no proposal was in flight at shutdown (%d refused)", len(definite))
	}
	t.Logf("%d unknown, %d refused", unknown, len(definite))

	for i, p := range peers {
		nodes[i] = startNode(t, opts(p), true)
	}
	testwait.For(t, "a leader after restart", 20*time.Second, func() bool { return leaderOf(nodes) != nil })
	testwait.For(t, "a sentinel to commit", 20*time.Second, func() bool {
		l := leaderOf(nodes)
		return l != nil && propose(t, l, 1000) == nil
	})
	var first []uint64
	for _, n := range nodes {
		testwait.For(t, fmt.Sprintf("node %d to apply the sentinel", n.opts.Self.ID), 20*time.Second, func() bool {
			return slices.Contains(n.list.snapshot(), 1000)
		})
		vals := n.list.snapshot()
		for _, v := range vals {
			if definite[v] {
				t.Errorf("node %d applied %d, whose proposal failed definitely", n.opts.Self.ID, v)
			}
		}
		if first == nil {
			first = vals
		} else if !slices.Equal(first, vals) {
			t.Errorf("node %d holds %v, node 1 %v", n.opts.Self.ID, vals, first)
		}
	}
}

// The raft replicator is a replication.Replicator.
var _ replication.Replicator = (*Raft)(nil)
