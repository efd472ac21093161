package cluster

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/regent-broker/regent/actors/replication"
	"github.com/regent-broker/regent/interop/testwait"
)

// failingApplier is a listApplier whose storage can be made to fail: while
// fail is set it applies nothing and answers a local failure, as a full
// disk makes a partition's append fail on one node only.
type failingApplier struct {
	*listApplier
	fail atomic.Bool
}

func (a *failingApplier) Apply(cmd Command) any {
	if a.fail.Load() {
		return replication.MarkLocal(errors.New("write list: no space left on device"))
	}
	return a.listApplier.Apply(cmd)
}

func (a *failingApplier) ApplyAsync(cmd Command, done func(any)) {
	a.ch <- func() { done(a.Apply(cmd)) }
}

// TestApplyFailureStopsTheNode: a committed command that fails on one
// follower's storage stops that follower (OnApplyFailure) instead of
// letting it apply what follows without it: its state index stays before
// the entry, later entries are not applied there, no snapshot is taken of
// it. Restarted with its storage fixed, it applies the entry again and
// holds what the others hold, in the same order. The leader and the
// other follower carry on meanwhile.
func TestApplyFailureStopsTheNode(t *testing.T) {
	base := t.TempDir()
	var peers []Peer
	for i := int32(1); i <= 3; i++ {
		peers = append(peers, Peer{ID: i, Raft: freeAddr(t)})
	}
	failures := map[int32]chan error{}
	for _, p := range peers {
		failures[p.ID] = make(chan error, 4)
	}
	opts := func(p Peer) RaftOptions {
		return RaftOptions{Self: p, Peers: peers,
			Dir: filepath.Join(base, fmt.Sprint(p.ID), "raft"), StateDir: filepath.Join(base, fmt.Sprint(p.ID), "state"),
			SnapshotThreshold: 50, TrailingLogs: 20,
			OnApplyFailure: func(err error) { failures[p.ID] <- err }}
	}
	type node struct {
		r *Raft
		a *failingApplier
	}
	start := func(p Peer) *node {
		o := opts(p)
		r, err := NewRaft(o)
		if err != nil {
			t.Fatal(err)
		}
		n := &node{r: r, a: &failingApplier{listApplier: newListApplier(o.StateDir, true)}}
		r.Register("list", n.a)
		r.Start()
		return n
	}
	nodes := map[int32]*node{}
	for _, p := range peers {
		nodes[p.ID] = start(p)
	}
	defer func() {
		for _, n := range nodes {
			_ = n.r.Shutdown()
		}
	}()
	var leader *node
	testwait.For(t, "a leader", 15*time.Second, func() bool {
		for _, n := range nodes {
			if n.r.Ready() {
				leader = n
				return true
			}
		}
		return false
	})
	proposeAll := func(from, to uint64) {
		t.Helper()
		for v := from; v < to; v++ {
			if err := propose(t, &testNode{r: leader.r}, v); err != nil {
				t.Fatalf("propose %d: %v", v, err)
			}
		}
	}
	proposeAll(0, 20)
	var sick Peer
	for _, p := range peers {
		if nodes[p.ID] != leader {
			sick = p
			break
		}
	}
	s := nodes[sick.ID]
	testwait.For(t, "the follower to apply the first entries", 10*time.Second, func() bool { return len(s.a.snapshot()) == 20 })
	before := s.r.StateIndex()

	s.a.fail.Store(true)
	proposeAll(20, 21) // committed by the leader and the healthy follower
	select {
	case err := <-failures[sick.ID]:
		if !strings.Contains(fmt.Sprint(err), "no space left on device") {
			t.Errorf("OnApplyFailure got %v, want the applier's error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the follower whose storage failed did not stop")
	}
	s.a.fail.Store(false) // its storage is fixed, but it stays stopped until restarted
	proposeAll(21, 100)
	if got := s.a.snapshot(); len(got) != 20 {
		t.Errorf("the stopped follower applied %d values, want the 20 before the failure", len(got))
	}
	if got := s.r.StateIndex(); got != before {
		t.Errorf("the stopped follower's state index moved from %d to %d", before, got)
	}
	if err := s.r.raft.Snapshot().Error(); err == nil {
		t.Error("a snapshot was taken of the stopped follower")
	}
	for id, ch := range failures {
		if id != sick.ID && len(ch) > 0 {
			t.Errorf("node %d stopped too: %v", id, <-ch)
		}
	}

	// Restarted, it applies the entry again and catches up.
	if err := s.r.Shutdown(); err != nil {
		t.Fatal(err)
	}
	delete(nodes, sick.ID)
	nodes[sick.ID] = start(sick)
	want := leader.a.snapshot()
	testwait.For(t, "the restarted follower to hold what the leader holds", 20*time.Second, func() bool {
		return slices.Equal(nodes[sick.ID].a.snapshot(), want)
	})
	if len(want) != 100 || !slices.IsSorted(want) {
		t.Errorf("the leader holds %d values (sorted: %v), want 0..99", len(want), slices.IsSorted(want))
	}
}
