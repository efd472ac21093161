package cluster

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/regent-broker/regent/actors/replication"
)

// fsm applies committed raft entries to the registered appliers. It runs
// on raft's FSM goroutine: one batch at a time, in log order.
type fsm struct {
	r *Raft
	// readyCh is closed by Raft.Start, once the node has opened its state
	// and registered its appliers; applying waits for it.
	readyCh chan struct{}
	// restarting is set when a snapshot installed on the running node
	// could not be loaded in place: its state is stale until the restart,
	// so nothing is applied to it or snapshotted from it.
	restarting atomic.Bool
	// stopped is set when a command failed on this node's storage
	// (replication.FailedLocally): the other nodes applied it, so this
	// one applies nothing after it and snapshots nothing until it has
	// restarted (stopApplying). Written on the FSM goroutine.
	stopped atomic.Bool
	// lastApplied is the index of the last command (or configuration)
	// entry whose effects are in the state directory: set by ApplyBatch
	// once a batch is applied, and by a restore to the index the snapshot
	// recorded; written on the FSM goroutine (or NewRaft's, restoring at
	// start). raft's own AppliedIndex is set when an entry is handed to the
	// FSM, before it is applied, and moves on while a restarting node
	// discards entries, so it cannot say what the state holds. Entries the
	// FSM never sees (no-ops, barriers) do not move it, so two nodes that
	// applied the same commands report the same value.
	lastApplied atomic.Uint64
	// applied signals every store of lastApplied (awaitMetadata).
	applied appliedSignal
	// meta and gate are set on a partition group (Raft.FollowMetadata):
	// meta is the metadata group, gate is held shared while a batch
	// applies. Nil on the metadata group. Set before Start.
	meta *Raft
	gate *sync.RWMutex

	// opening serializes a snapshot restore with the caller opening the
	// state directory: until markOpened, an installed snapshot is restored
	// into the (not yet opened) directory in place; afterwards the state
	// directory is in use and an install goes through OnInstall (which
	// closes and reopens what uses it), or restarts the node.
	opening struct {
		sync.Mutex
		opened bool
		// restored is set when a snapshot was restored into the unopened
		// directory (at start, or installed while NewRaft waits for the
		// leader).
		restored bool
	}

	// sinceSnapshot counts the entry bytes applied since the last
	// snapshot was captured or restored; past RaftOptions.SnapshotBytes,
	// ApplyBatch asks raft for a snapshot, so the tail replayed at start
	// stays bounded in bytes and not only in entries. Written on the FSM
	// goroutine (and by a restore at start, before it runs).
	sinceSnapshot atomic.Int64
	// snapshotAsked is set while a snapshot asked for by size is pending.
	snapshotAsked atomic.Bool
	// decodeCommand, set by tests before the node starts, replaces
	// DecodeCommand (nil: DecodeCommand).
	decodeCommand func(kind string, payload []byte) (Command, error)
}

// markOpened is called once NewRaft is about to hand the state directory
// to its caller: it waits for a restore in progress, and from then on
// installs go through OnInstall (or restart the node).
func (f *fsm) markOpened() {
	f.opening.Lock()
	f.opening.opened = true
	f.opening.Unlock()
}

// decode is DecodeCommand, or a test's stand-in (a node of an older
// version).
func (f *fsm) decode(kind string, payload []byte) (Command, error) {
	if f.decodeCommand != nil {
		return f.decodeCommand(kind, payload)
	}
	return DecodeCommand(kind, payload)
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
	start := time.Now()
	out := make([]any, len(logs))
	if f.restarting.Load() || f.stopped.Load() {
		return out
	}
	if f.meta != nil {
		// The metadata state every entry needs, waited for before the
		// gate: a metadata install holds the gate exclusively and must
		// not wait on this batch.
		var need uint64
		for _, l := range logs {
			if l.Type == raft.LogCommand {
				need = max(need, entryAfter(l.Data))
			}
		}
		if !f.awaitMetadata(need) {
			return out
		}
		f.gate.RLock()
		defer f.gate.RUnlock()
	}
	var wg sync.WaitGroup
	// unreadable is the first entry written by a newer version than this
	// node's: nothing from it on is applied (stopUnreadable).
	var unreadable error
	var unreadableAt uint64
entries:
	for i, l := range logs {
		if l.Type != raft.LogCommand {
			continue
		}
		cmds, err := decodeEntry(l.Data)
		if errors.Is(err, replication.ErrUnreadable) {
			unreadable, unreadableAt = err, l.Index
			break
		}
		if err != nil {
			// Every node reads the same bytes and refuses them alike.
			f.r.log.Error("undecodable raft entry", "index", l.Index, "err", err)
			out[i] = []any(nil)
			continue
		}
		res := make([]any, len(cmds))
		out[i] = res
		for j, c := range cmds {
			cmd, err := f.decode(c.kind, c.payload)
			if errors.Is(err, replication.ErrUnreadable) {
				unreadable, unreadableAt = fmt.Errorf("command for %s: %w", c.key, err), l.Index
				break entries
			}
			if err != nil {
				// A malformed command of a version this node reads:
				// every node refuses it alike.
				f.r.log.Error("undecodable command", "index", l.Index, "key", c.key, "err", err)
				res[j] = err
				continue
			}
			if t, ok := cmd.(replication.Termed); ok {
				t.SetTerm(l.Term)
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
	if unreadable != nil {
		f.stopUnreadable(unreadableAt, unreadable)
		return out
	}
	for i, l := range logs {
		if err := replication.FailedLocally(out[i]); err != nil {
			// lastApplied stays before this batch: what the state
			// holds of it is undone at the restart.
			f.stopApplying(l.Index, err)
			return out
		}
	}
	f.r.stats.applyBatches.Add(1)
	f.r.stats.applyEntries.Add(int64(len(logs)))
	f.r.stats.applyNs.Add(int64(time.Since(start)))
	if n := len(logs); n > 0 {
		// Invariant: lastApplied only grows (entries come in log order).
		f.lastApplied.Store(logs[n-1].Index)
		f.applied.changed()
	}
	var applied int64
	for _, l := range logs {
		applied += int64(len(l.Data))
	}
	if f.sinceSnapshot.Add(applied) >= f.r.o.SnapshotBytes && f.r.o.SnapshotBytes > 0 && f.snapshotAsked.CompareAndSwap(false, true) {
		// Not here: raft's snapshot goroutine asks this goroutine for
		// the capture, so waiting for it here would deadlock.
		go f.r.snapshotBySize()
	}
	return out
}

// stopApplying is ApplyBatch's answer to a command that failed on this
// node's own storage (a full disk, an I/O error): every other node applied
// it, so this node must not apply what follows (a partition would take the
// next records at other offsets than the others), nor capture a snapshot
// (it would record the entry as applied). It stops applying and calls
// OnApplyFailure, which stops the node: restarted once its storage is
// fixed, it goes back to its last snapshot and applies the entry again.
// Kafka stops a broker whose log directory fails in the same way.
func (f *fsm) stopApplying(index uint64, err error) {
	f.stopped.Store(true)
	f.r.log.Error("a committed raft entry could not be applied on this node's storage: this node applies nothing more and stops; restart it once its storage is fixed, and it applies the entry again from its last snapshot (the other nodes carry on)",
		"index", index, "state_index", f.lastApplied.Load(), "err", err)
	if f.r.o.OnApplyFailure != nil {
		// Not on the FSM goroutine: stopping may wait for it.
		go f.r.o.OnApplyFailure(err)
	}
}

// stopUnreadable is ApplyBatch's answer to a committed entry this node's
// version cannot read (a newer node wrote it; replication.ErrUnreadable):
// skipping it would leave this node's state behind the others' for good,
// silently. As for a storage failure, it applies nothing more, takes no
// snapshot, and OnApplyFailure stops it; once upgraded and restarted it
// goes back to its last snapshot and applies the entry.
func (f *fsm) stopUnreadable(index uint64, err error) {
	f.stopped.Store(true)
	f.r.log.Error("a committed raft entry was written by a newer Regent than this node's: this node applies nothing more and stops; upgrade it and restart it, and it applies the entry from its last snapshot (the other nodes carry on)",
		"index", index, "state_index", f.lastApplied.Load(), "err", err)
	if f.r.o.OnApplyFailure != nil {
		go f.r.o.OnApplyFailure(err)
	}
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
// sizes; Persist hands the links to the snapshot store.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	if f.restarting.Load() {
		return nil, fmt.Errorf("node restarting to load an installed snapshot")
	}
	if f.stopped.Load() {
		return nil, fmt.Errorf("applying stopped on a storage failure: nothing to snapshot until the node restarts")
	}
	// On the FSM goroutine, between batches: lastApplied is exactly what
	// the capture holds.
	s, err := captureState(f.r.o.StateDir, f.r.o.Dir)
	if err != nil {
		return nil, err
	}
	s.index = f.lastApplied.Load()
	f.sinceSnapshot.Store(0)
	return s, nil
}

// Restore implements raft.FSM. rc is a snapshot opened from this node's
// store (snapStore.Open): its manifest names the snapshot, whose files are
// linked in the store. While NewRaft runs (the local snapshot at start,
// or an install that arrives before NewRaft returns) the restore re-links
// and truncates the state directory, which nothing has opened yet
// (restoreFromLinks: O(files)). Once the caller may have opened it, the
// install goes through RaftOptions.OnInstall, which closes the state
// objects, restores the directory the same way and reopens them in place
// (unless the snapshot holds exactly the node's state); if that fails,
// the node restarts and restores the snapshot at start.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	if f.stopped.Load() {
		// The node is stopping (stopApplying); it loads the snapshot, if
		// still needed, after its restart.
		return fmt.Errorf("applying stopped on a storage failure: no snapshot install until the node restarts")
	}
	m, err := readManifestHead(rc)
	if err != nil {
		return err
	}
	f.opening.Lock()
	defer f.opening.Unlock()
	if !f.opening.opened {
		st, err := restoreFromLinks(f.r.o.StateDir, f.r.snaps.filesDir(m.ID), m)
		if err != nil {
			return fmt.Errorf("restore snapshot %s: %w", m.ID, err)
		}
		f.r.log.Info("restored the state from a snapshot", "snapshot", m.ID, "state_index", m.StateIndex,
			"kept", st.kept, "truncated", st.truncated, "linked", st.linked, "removed", st.removed)
		f.lastApplied.Store(m.StateIndex)
		f.applied.changed()
		f.sinceSnapshot.Store(0)
		f.opening.restored = true
		return nil
	}
	// A snapshot of exactly what this state holds (the leader resends one
	// whose answer it missed: the node that received it first restarted
	// before answering) changes nothing: applying is deterministic, and
	// between that state index and the snapshot's raft index there are no
	// commands, so whatever raft applies next is new here too. Restarting
	// for it would only make the leader send it again.
	if m.StateIndex == f.lastApplied.Load() && !f.restarting.Load() {
		f.r.log.Info("the installed snapshot holds this node's state: no restart", "state_index", m.StateIndex)
		return nil
	}
	if f.r.o.OnInstall != nil && !f.restarting.Load() {
		err := f.installInPlace(m)
		if err == nil {
			return nil
		}
		f.r.log.Error("installing a snapshot in place failed", "snapshot", m.ID, "err", err)
	}
	if f.r.o.OnRuntimeRestore == nil {
		return fmt.Errorf("snapshot install on a running node needs a restart")
	}
	// Restart now, from inside Restore: raft has already made the
	// snapshot durable in its store (the restart loads it), and has not yet
	// answered the leader or taken entries after the snapshot. A node that
	// stored such entries and restarted before the leader heard its answer
	// held entries after the snapshot but not the entry at the snapshot's
	// index, which hashicorp/raft cannot link to what the leader then sends
	// (it looks up the entry at that index): the leader backed off, sent the
	// snapshot again, and so on forever. Unanswered, the leader sends the
	// snapshot again, and the restarted node, which holds exactly that
	// state, accepts it as it is (above).
	f.restarting.Store(true)
	f.r.log.Warn("installing a snapshot from the leader: restarting the node to load it")
	f.r.o.OnRuntimeRestore()
	f.restarting.Store(false)
	return fmt.Errorf("restart to load an installed snapshot did not happen")
}

// installInPlace loads the installed snapshot m into the running node:
// OnInstall closes the state objects, runs the restore below and reopens
// them. It runs on the FSM goroutine (inside Restore, with opening held):
// no batch is applied and no snapshot captured meanwhile, and raft's own
// goroutine waits for the restore, so leadership does not move either.
func (f *fsm) installInPlace(m *manifest) error {
	start := time.Now()
	var (
		st       restoreStats
		restored bool
		took     time.Duration
	)
	err := f.r.o.OnInstall(func() error {
		if restored {
			return fmt.Errorf("snapshot %s: restore called twice", m.ID)
		}
		t := time.Now()
		s, err := restoreFromLinks(f.r.o.StateDir, f.r.snaps.filesDir(m.ID), m)
		if err != nil {
			return fmt.Errorf("restore snapshot %s: %w", m.ID, err)
		}
		st, restored, took = s, true, time.Since(t)
		return nil
	})
	if err == nil && !restored {
		err = fmt.Errorf("snapshot %s: the install hook returned without restoring", m.ID)
	}
	if err != nil {
		return err
	}
	// Invariant: the state directory and the objects reading it hold
	// exactly the snapshot, whose commands end at StateIndex.
	f.lastApplied.Store(m.StateIndex)
	f.applied.changed()
	f.sinceSnapshot.Store(0)
	f.r.log.Info("installed a snapshot from the leader in place, without a restart", "snapshot", m.ID,
		"state_index", m.StateIndex, "took", time.Since(start).Round(time.Millisecond), "restore", took.Round(time.Microsecond),
		"kept", st.kept, "truncated", st.truncated, "linked", st.linked, "removed", st.removed)
	return nil
}
