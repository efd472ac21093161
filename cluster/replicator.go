// Package cluster holds the replicators: every state change is a command
// proposed to a replicator and applied, in commit order, by the applier
// registered for its key (a partition, a group, the topic registry).
//
// Single node: Local applies at once on the proposer's goroutine. Cluster
// mode (raft) will apply committed commands on every node by handing them
// to the same appliers, so offsets, sequence checks and generations are
// decided inside Apply and every node reaches the same state.
package cluster

import (
	"fmt"
	"sync"
)

// Command is a state change. Raft mode will need commands to be encodable;
// Local passes them as values.
type Command any

// Applier applies committed commands for one key. Apply is called on the
// goroutine that owns the key's state (for Local: the proposer's).
type Applier interface {
	Apply(cmd Command) any
}

// Replicator orders and commits commands.
type Replicator interface {
	// Register makes a the applier for key; it replaces any previous one.
	Register(key string, a Applier)
	// Unregister forgets key's applier.
	Unregister(key string)
	// Propose commits cmd and applies it; done receives Apply's result.
	// On error the command may or may not have been applied (a raft
	// leadership loss leaves the outcome unknown) and the caller must not
	// assume either.
	Propose(key string, cmd Command, done func(result any, err error))
}

// Local is the single-node replicator: a command is committed when it is
// proposed, and applied immediately on the proposer's goroutine, which must
// be the goroutine that owns the key's state (the key's actor).
type Local struct {
	mu       sync.RWMutex
	appliers map[string]Applier
}

// NewLocal makes a single-node replicator.
func NewLocal() *Local { return &Local{appliers: map[string]Applier{}} }

// Register implements Replicator.
func (l *Local) Register(key string, a Applier) {
	l.mu.Lock()
	l.appliers[key] = a
	l.mu.Unlock()
}

// Unregister implements Replicator.
func (l *Local) Unregister(key string) {
	l.mu.Lock()
	delete(l.appliers, key)
	l.mu.Unlock()
}

// Propose implements Replicator.
func (l *Local) Propose(key string, cmd Command, done func(any, error)) {
	l.mu.RLock()
	a := l.appliers[key]
	l.mu.RUnlock()
	if a == nil {
		done(nil, fmt.Errorf("no applier registered for %q", key))
		return
	}
	cmd, _ = unwrapTrace(cmd)
	done(a.Apply(cmd), nil)
}
