package cluster

import (
	"sync"
	"time"
)

// Partition raft groups. A node may run, beside the metadata group (group
// 0: topics, configs, coordinators), partition groups that each order the
// writes of some partitions; every group has the same voters, its own
// leader, log, snapshots and state directory, and they share the node's
// raft port (RaftPort). A partition group follows the metadata group: its
// partitions are created and deleted there.

// appliedSignal lets a goroutine wait for an fsm's lastApplied to move.
// changed is called by whoever stores lastApplied; wait returns a channel
// closed at the next change.
type appliedSignal struct {
	mu sync.Mutex
	ch chan struct{} // closed and dropped at the next change; nil: none waits
}

func (s *appliedSignal) changed() {
	s.mu.Lock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
	s.mu.Unlock()
}

func (s *appliedSignal) wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

// FollowMetadata makes r a partition group that follows meta, the
// metadata group: what r's leader proposes carries meta's state index,
// and r applies an entry only once this node's metadata state holds that
// index (so every partition the proposer's state knew is open here, and
// the commands find their appliers). gate is held shared while r applies
// a batch; whoever reopens the partitions of every group at once (a
// metadata snapshot installed on this node) holds it exclusively. Called
// before Start.
func (r *Raft) FollowMetadata(meta *Raft, gate *sync.RWMutex) {
	r.fsm.meta, r.fsm.gate = meta, gate
}

// metadataWaitWarn is how long a partition group waits for the metadata
// state before it complains (it keeps waiting: applying without it could
// drop commands for partitions this node has not opened yet).
const metadataWaitWarn = 10 * time.Second

// awaitMetadata waits until the metadata group's state holds index, or r
// shuts down (false).
func (f *fsm) awaitMetadata(index uint64) bool {
	meta := f.meta
	if meta == nil || index == 0 {
		return true
	}
	warn := time.NewTimer(metadataWaitWarn)
	defer warn.Stop()
	for {
		ch := meta.fsm.applied.wait()
		if meta.fsm.lastApplied.Load() >= index {
			return true
		}
		select {
		case <-ch:
		case <-warn.C:
			f.r.log.Warn("partition group waits for the metadata group's state", "want_index", index, "metadata_state_index", meta.fsm.lastApplied.Load())
		case <-f.r.stop:
			return false
		}
	}
}

// metadataIndex is what r's entries carry: the metadata state index this
// node's state holds (false: r is the metadata group, or a lone group).
func (f *fsm) metadataIndex() (uint64, bool) {
	if f.meta == nil {
		return 0, false
	}
	return f.meta.fsm.lastApplied.Load(), true
}
