package cluster

import (
	"errors"
	"time"

	"github.com/hashicorp/raft"
)

// awaitFirstContact runs in NewRaft on a node that started with no raft
// state (a new cluster's bootstrap, a join, or a member whose data
// directory was deleted): it waits until the leader has sent entries or
// installed a snapshot, so that a snapshot the leader sends arrives before
// the caller opens the state directory and is restored in place, instead
// of an install on the running node, which must restart it. A new
// cluster's nodes see their leader's first entry (its no-op) once one is
// elected. The wait is bounded by StartWait (and ends if Stop closes);
// past it the node goes on, and a later install restarts it as before.
func (r *Raft) awaitFirstContact() {
	base := r.raft.LastIndex()
	start := time.Now()
	deadline := start.Add(r.o.StartWait)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	r.log.Info("no raft state: waiting for the leader's entries or snapshot before opening the state", "bound", r.o.StartWait)
	for {
		if r.raft.LastIndex() > base || r.restoredBeforeOpen() {
			r.log.Info("heard from the leader", "took", time.Since(start).Round(time.Millisecond),
				"last_index", r.raft.LastIndex(), "snapshot_restored", r.restoredBeforeOpen())
			return
		}
		if time.Now().After(deadline) {
			r.log.Warn("no entries from a leader yet: opening the state anyway", "waited", r.o.StartWait)
			return
		}
		select {
		case <-tick.C:
		case <-r.o.Stop:
			return
		}
	}
}

func (r *Raft) restoredBeforeOpen() bool {
	r.fsm.opening.Lock()
	defer r.fsm.opening.Unlock()
	return r.fsm.opening.restored
}

// snapshotBySize asks raft for a snapshot because the entry bytes applied
// since the last one passed SnapshotBytes (see fsm.ApplyBatch); it runs on
// its own goroutine, since raft's snapshot goroutine needs the FSM
// goroutine that noticed.
func (r *Raft) snapshotBySize() {
	defer r.fsm.snapshotAsked.Store(false)
	err := r.raft.Snapshot().Error()
	switch {
	case err == nil:
		r.log.Info("snapshot taken: applied bytes passed the bound", "bound", r.o.SnapshotBytes)
	case errors.Is(err, raft.ErrNothingNewToSnapshot), errors.Is(err, raft.ErrRaftShutdown):
	default:
		r.log.Warn("snapshot by applied bytes failed", "err", err)
	}
}
