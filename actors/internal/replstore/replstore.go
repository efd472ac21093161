// Package replstore holds what the replicated file stores (users,
// features, client quotas, client metrics subscriptions, group configs)
// share: their registration with the replicator and the
// Close/Reopen cycle that a snapshot install runs on a raft node (close,
// the state directory is restored, reopen in place so that whatever holds
// the store keeps working).
package replstore

import (
	"fmt"

	"github.com/regent-broker/regent/actors/replication"
)

// Registration is a store's registration under one replicator key and its
// closed flag. The owning store's mutex guards it: call every method with
// that lock held, the lock that also serializes the store's Apply, so no
// command is applied to a closed store.
type Registration struct {
	repl replication.Replicator
	key  string
	// name prefixes errors ("users", "features").
	name   string
	closed bool
}

// Register registers a with repl under key (nil repl: a local one) and
// returns the open registration.
func Register(repl replication.Replicator, key, name string, a replication.Applier) Registration {
	if repl == nil {
		repl = replication.NewLocal()
	}
	repl.Register(key, a)
	return Registration{repl: repl, key: key, name: name}
}

// Repl is the replicator the store proposes to.
func (r *Registration) Repl() replication.Replicator { return r.repl }

// Closed reports whether Close ran without a Reopen since.
func (r *Registration) Closed() bool { return r.closed }

// Close unregisters the store, once: replicated commands are no longer
// applied to it.
func (r *Registration) Close() {
	if !r.closed {
		r.closed = true
		r.repl.Unregister(r.key)
	}
}

// Reopen runs load (which reloads the store from its file) and registers
// a again. It refuses an open store; on error the store stays closed.
func (r *Registration) Reopen(a replication.Applier, load func() error) error {
	if !r.closed {
		return fmt.Errorf("%s: reopen of an open store", r.name)
	}
	if err := load(); err != nil {
		return err
	}
	r.closed = false
	r.repl.Register(r.key, a)
	return nil
}
