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
// failingCluster is three in-process nodes whose "list" appliers can be
// made to fail; failures[id] receives what OnApplyFailure was called with.
type failingCluster struct {
	t        *testing.T
	peers    []Peer
	nodes    map[int32]*failingNode
	leader   *failingNode
	failures map[int32]chan error
	opts     func(Peer) RaftOptions
}

type failingNode struct {
	r *Raft
	a *failingApplier
}

func startFailingCluster(t *testing.T) *failingCluster {
	base := t.TempDir()
	c := &failingCluster{t: t, nodes: map[int32]*failingNode{}, failures: map[int32]chan error{}}
	for i := int32(1); i <= 3; i++ {
		c.peers = append(c.peers, Peer{ID: i, Raft: freeAddr(t)})
	}
	for _, p := range c.peers {
		c.failures[p.ID] = make(chan error, 4)
	}
	c.opts = func(p Peer) RaftOptions {
		return RaftOptions{Self: p, Peers: c.peers,
			Dir: filepath.Join(base, fmt.Sprint(p.ID), "raft"), StateDir: filepath.Join(base, fmt.Sprint(p.ID), "state"),
			SnapshotThreshold: 50, TrailingLogs: 20,
			OnApplyFailure: func(err error) { c.failures[p.ID] <- err }}
	}
	for _, p := range c.peers {
		c.nodes[p.ID] = c.start(p)
	}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			_ = n.r.Shutdown()
		}
	})
	testwait.For(t, "a leader", 15*time.Second, func() bool {
		for _, n := range c.nodes {
			if n.r.Ready() {
				c.leader = n
				return true
			}
		}
		return false
	})
	return c
}

func (c *failingCluster) start(p Peer) *failingNode {
	o := c.opts(p)
	r, err := NewRaft(o)
	if err != nil {
		c.t.Fatal(err)
	}
	n := &failingNode{r: r, a: &failingApplier{listApplier: newListApplier(o.StateDir, true)}}
	r.Register("list", n.a)
	r.Start()
	return n
}

// restart shuts node id down and starts it again on the same directories.
func (c *failingCluster) restart(id int32) {
	c.t.Helper()
	if err := c.nodes[id].r.Shutdown(); err != nil {
		c.t.Fatal(err)
	}
	for _, p := range c.peers {
		if p.ID == id {
			c.nodes[id] = c.start(p)
		}
	}
}

func (c *failingCluster) proposeAll(from, to uint64) {
	c.t.Helper()
	for v := from; v < to; v++ {
		if err := propose(c.t, &testNode{r: c.leader.r}, v); err != nil {
			c.t.Fatalf("propose %d: %v", v, err)
		}
	}
}

// waitStopped waits for node id's OnApplyFailure with the applier's error.
func (c *failingCluster) waitStopped(id int32) {
	c.t.Helper()
	select {
	case err := <-c.failures[id]:
		if !strings.Contains(fmt.Sprint(err), "no space left on device") {
			c.t.Errorf("OnApplyFailure got %v, want the applier's error", err)
		}
	case <-time.After(10 * time.Second):
		c.t.Fatalf("node %d, whose storage failed, did not stop", id)
	}
}

func TestApplyFailureStopsTheNode(t *testing.T) {
	c := startFailingCluster(t)
	c.proposeAll(0, 20)
	var sick int32
	for id, n := range c.nodes {
		if n != c.leader {
			sick = id
			break
		}
	}
	s := c.nodes[sick]
	testwait.For(t, "the follower to apply the first entries", 10*time.Second, func() bool { return len(s.a.snapshot()) == 20 })
	before := s.r.StateIndex()

	s.a.fail.Store(true)
	c.proposeAll(20, 21) // committed by the leader and the healthy follower
	c.waitStopped(sick)
	s.a.fail.Store(false) // its storage is fixed, but it stays stopped until restarted
	c.proposeAll(21, 100)
	if got := s.a.snapshot(); len(got) != 20 {
		t.Errorf("the stopped follower applied %d values, want the 20 before the failure", len(got))
	}
	if got := s.r.StateIndex(); got != before {
		t.Errorf("the stopped follower's state index moved from %d to %d", before, got)
	}
	if err := s.r.raft.Snapshot().Error(); err == nil {
		t.Error("a snapshot was taken of the stopped follower")
	}
	for id, ch := range c.failures {
		if id != sick && len(ch) > 0 {
			t.Errorf("node %d stopped too: %v", id, <-ch)
		}
	}

	// Restarted, it applies the entry again and catches up.
	c.restart(sick)
	want := c.leader.a.snapshot()
	testwait.For(t, "the restarted follower to hold what the leader holds", 20*time.Second, func() bool {
		return slices.Equal(c.nodes[sick].a.snapshot(), want)
	})
	if len(want) != 100 || !slices.IsSorted(want) {
		t.Errorf("the leader holds %d values (sorted: %v), want 0..99", len(want), slices.IsSorted(want))
	}
}

// TestLeaderApplyFailureIsAnUnknownOutcome: when the leader's own storage
// refuses a committed command, its proposer is told the outcome is
// unknown, not that the command failed: the followers apply it, so a
// client told "failed" would retry and write it twice. The leader stops
// (OnApplyFailure); restarted with its storage fixed, it holds the command.
func TestLeaderApplyFailureIsAnUnknownOutcome(t *testing.T) {
	c := startFailingCluster(t)
	c.proposeAll(0, 20)
	var sickID int32
	for id, n := range c.nodes {
		if n == c.leader {
			sickID = id
		}
	}
	c.leader.a.fail.Store(true)
	err := propose(t, &testNode{r: c.leader.r}, 20)
	if !errors.Is(err, ErrOutcomeUnknown) {
		t.Errorf("the proposer of a command the leader's storage refused got %v, want an unknown outcome", err)
	}
	if replication.FailedLocally(err) != nil {
		t.Errorf("the proposer got the leader's local failure itself: %v", err)
	}
	c.waitStopped(sickID)
	for id, n := range c.nodes {
		if id == sickID {
			continue
		}
		testwait.For(t, fmt.Sprintf("node %d to apply the command", id), 10*time.Second, func() bool {
			return slices.Contains(n.a.snapshot(), 20)
		})
	}
	c.leader.a.fail.Store(false)
	c.restart(sickID)
	testwait.For(t, "the restarted leader to hold the command", 20*time.Second, func() bool {
		got := c.nodes[sickID].a.snapshot()
		return len(got) == 21 && slices.IsSorted(got)
	})
}

// TestUnreadableEntryStopsTheNode: a node of an older version meets a
// committed command it cannot read (replication.ErrUnreadable: a newer
// node wrote it). It stops (OnApplyFailure) rather than skip it and drift
// from the others: nothing from that entry on is applied, its state index
// stays before it, no snapshot is taken. Upgraded and restarted, it
// applies the entry and catches up. A malformed command of a version it
// reads is refused alike on every node and stops none.
func TestUnreadableEntryStopsTheNode(t *testing.T) {
	c := startFailingCluster(t)
	c.proposeAll(0, 20)
	var old int32
	for id, n := range c.nodes {
		if n != c.leader {
			old = id
			break
		}
	}
	testwait.For(t, "the follower to apply the first entries", 10*time.Second, func() bool { return len(c.nodes[old].a.snapshot()) == 20 })
	// The follower is "downgraded": values from 20 on are a command kind
	// its version does not know.
	if err := c.nodes[old].r.Shutdown(); err != nil {
		t.Fatal(err)
	}
	var p Peer
	for _, q := range c.peers {
		if q.ID == old {
			p = q
		}
	}
	o := c.opts(p)
	r, err := NewRaft(o)
	if err != nil {
		t.Fatal(err)
	}
	r.fsm.decodeCommand = func(kind string, payload []byte) (Command, error) {
		cmd, err := DecodeCommand(kind, payload)
		if c, ok := cmd.(*counterCmd); ok && c.n >= 20 {
			return nil, fmt.Errorf("no decoder for command kind %q: %w", "test.newer", replication.ErrUnreadable)
		}
		return cmd, err
	}
	n := &failingNode{r: r, a: &failingApplier{listApplier: newListApplier(o.StateDir, true)}}
	r.Register("list", n.a)
	r.Start()
	c.nodes[old] = n
	before := n.r.StateIndex()

	c.proposeAll(20, 30)
	select {
	case err := <-c.failures[old]:
		if !errors.Is(err, replication.ErrUnreadable) {
			t.Fatalf("OnApplyFailure got %v, want ErrUnreadable", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the old node did not stop at the entry it cannot read")
	}
	c.proposeAll(30, 40)
	if got := n.a.snapshot(); len(got) != 20 {
		t.Errorf("the stopped node applied %d values, want the 20 before the unreadable entry", len(got))
	}
	if got := n.r.StateIndex(); got != before {
		t.Errorf("the stopped node's state index moved from %d to %d", before, got)
	}
	if err := n.r.raft.Snapshot().Error(); err == nil {
		t.Error("a snapshot was taken of the stopped node")
	}
	for id, ch := range c.failures {
		if id != old && len(ch) > 0 {
			t.Errorf("node %d stopped too: %v", id, <-ch)
		}
	}

	// Upgraded (the usual decoder), it applies everything.
	c.restart(old)
	want := c.leader.a.snapshot()
	testwait.For(t, "the upgraded node to hold what the leader holds", 20*time.Second, func() bool {
		return slices.Equal(c.nodes[old].a.snapshot(), want)
	})
	if len(want) != 40 {
		t.Errorf("the leader holds %d values, want 40", len(want))
	}
}
