package cluster

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/regent-broker/regent/interop/testwait"
)

// TestPipelineStats: the leader counts its proposals, entries and their
// answers; every node counts its applies and its raft log's writes and
// fsyncs; a follower proposes nothing.
func TestPipelineStats(t *testing.T) {
	base := t.TempDir()
	var peers []Peer
	for i := int32(1); i <= 3; i++ {
		peers = append(peers, Peer{ID: i, Raft: freeAddr(t)})
	}
	nodes := make([]*testNode, 3)
	for i, p := range peers {
		nodes[i] = startNode(t, RaftOptions{Self: p, Peers: peers, Dir: filepath.Join(base, fmt.Sprint(p.ID), "raft"),
			StateDir: filepath.Join(base, fmt.Sprint(p.ID), "state")}, true)
	}
	defer func() {
		for _, n := range nodes {
			_ = n.r.Shutdown()
		}
	}()
	testwait.For(t, "a leader", 15*time.Second, func() bool { return leaderOf(nodes) != nil })
	l := leaderOf(nodes)
	const n = 50
	for v := uint64(0); v < n; v++ {
		if err := propose(t, l, v); err != nil {
			t.Fatal(err)
		}
	}
	none := func(int32) (Peer, bool) { return Peer{}, false }
	ps := l.r.Status(none).Pipeline
	if ps.Proposals != n || ps.Entries < 1 || ps.Entries > n || ps.EntryKiB <= 0 || ps.AnsweredMs <= 0 || ps.ProposalsPerEntry < 1 {
		t.Fatalf("leader pipeline after %d proposals: %+v", n, ps)
	}
	for _, nd := range nodes {
		nd := nd
		// A follower applies what it was told is committed: the last
		// entries may reach it with the next heartbeat.
		testwait.For(t, fmt.Sprintf("node %d to apply and log every entry", nd.opts.Self.ID), 10*time.Second, func() bool {
			s := nd.r.Status(none).Pipeline
			return s.ApplyBatches > 0 && s.EntriesPerBatch >= 1 && s.LogSyncs > 0 && s.LogWrites > 0 && s.LogBytesWritten > 0 && len(nd.list.snapshot()) == n
		})
		if nd != l {
			if s := nd.r.Status(none).Pipeline; s.Proposals != 0 || s.Entries != 0 {
				t.Fatalf("follower %d counted proposals: %+v", nd.opts.Self.ID, s)
			}
		}
	}
}
