package cluster

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// fsm applies committed raft entries to the registered appliers. It runs
// on raft's FSM goroutine: one batch at a time, in log order.
type fsm struct {
	r *Raft
	// readyCh is closed by Raft.Start, once the node has opened its state
	// and registered its appliers; applying waits for it.
	readyCh chan struct{}
	// restarting is set when a snapshot was installed on the running node:
	// its state is stale until the restart, so nothing is applied to it or
	// snapshotted from it.
	restarting atomic.Bool
}

// Apply implements raft.FSM.
func (f *fsm) Apply(l *raft.Log) any { return f.ApplyBatch([]*raft.Log{l})[0] }

// ApplyBatch implements raft.BatchingFSM. Each command goes to its key's
// applier: an AsyncApplier (an actor) gets it in its mailbox, in order, so
// partitions apply in parallel; synchronous appliers (stores, the topic
// registry) apply here. The batch returns once every command is applied,
// so a snapshot taken between batches sees all of them.
func (f *fsm) ApplyBatch(logs []*raft.Log) []any {
	<-f.readyCh
	out := make([]any, len(logs))
	if f.restarting.Load() {
		return out
	}
	var wg sync.WaitGroup
	for i, l := range logs {
		if l.Type != raft.LogCommand {
			continue
		}
		cmds, err := decodeEntry(l.Data)
		if err != nil {
			// Every node reads the same bytes and refuses them alike.
			f.r.log.Error("undecodable raft entry", "index", l.Index, "err", err)
			out[i] = []any(nil)
			continue
		}
		res := make([]any, len(cmds))
		out[i] = res
		for j, c := range cmds {
			cmd, err := DecodeCommand(c.kind, c.payload)
			if err != nil {
				f.r.log.Error("undecodable command", "index", l.Index, "key", c.key, "err", err)
				res[j] = err
				continue
			}
			a := f.r.applier(c.key)
			if a == nil {
				res[j] = fmt.Errorf("no applier for %q on this node", c.key)
				continue
			}
			end := func() {}
			if c.trace != "" && f.r.o.Observer != nil {
				end = f.r.o.Observer.StartApply(c.trace, c.key, c.kind, f.r.o.Self.ID)
			}
			if aa, ok := a.(AsyncApplier); ok {
				wg.Add(1)
				j := j
				aa.ApplyAsync(cmd, func(v any) {
					res[j] = v
					end()
					wg.Done()
				})
				continue
			}
			res[j] = a.Apply(cmd)
			end()
		}
	}
	f.wait(&wg)
	return out
}

// wait waits for the batch's asynchronous applies, complaining if an
// applier is stuck (the FSM cannot move on without it).
func (f *fsm) wait(wg *sync.WaitGroup) {
	// A timer, not a watcher goroutine per batch: it fires only when an
	// applier is stuck.
	stuck := time.AfterFunc(10*time.Second, func() {
		f.r.log.Error("raft apply waits on an applier for over 10s")
	})
	wg.Wait()
	stuck.Stop()
}

// Snapshot implements raft.FSM: it captures StateDir as it is now (every
// applied entry is in it) by hard-linking its files and noting their
// sizes; Persist streams them while applying goes on.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	if f.restarting.Load() {
		return nil, fmt.Errorf("node restarting to load an installed snapshot")
	}
	return captureState(f.r.o.StateDir, f.r.o.Dir)
}

// Restore implements raft.FSM. At start (before Start) it fills the empty
// state directory; on a running node the state objects cannot be swapped
// under their actors, so the node restarts and restores at start.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	select {
	case <-f.readyCh:
		if f.r.o.OnRuntimeRestore == nil {
			return fmt.Errorf("snapshot install on a running node needs a restart")
		}
		// Accept the install, so that raft records it and answers the
		// leader (which would otherwise send it again), then restart:
		// the start restores this snapshot into a fresh state directory.
		f.restarting.Store(true)
		before := f.r.raft.Stats()["last_snapshot_index"]
		f.r.log.Warn("installing a snapshot from the leader: restarting the node to load it")
		go func() {
			deadline := time.Now().Add(10 * time.Second)
			for f.r.raft.Stats()["last_snapshot_index"] == before && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			f.r.o.OnRuntimeRestore()
		}()
		_, _ = io.Copy(io.Discard, rc)
		return nil
	default:
	}
	return restoreState(rc, f.r.o.StateDir)
}
