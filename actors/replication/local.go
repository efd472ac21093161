package replication

import (
	"fmt"
	"sync"
)

// Local is the single-node replicator: a command is committed when it is
// proposed, and applied immediately on the proposer's goroutine, which must
// be the goroutine that owns the key's state (the key's actor). done is
// not called there: the answer is queued and delivered on Local's callback
// goroutine, in proposal order (the package's contract). It lives here,
// not with the raft replicator, so that a package defaulting to it does
// not link raft.
type Local struct {
	// appliers is written by Register/Unregister and read by Propose (any
	// goroutine).
	appliers struct {
		sync.RWMutex
		m map[string]Applier
	}
	cb Callbacks
}

var _ Replicator = (*Local)(nil)

var _ FreeAtDone = (*Local)(nil)

// CommandFreeAtDone implements FreeAtDone: Propose applies the command
// before it returns and keeps nothing of it.
func (l *Local) CommandFreeAtDone() {}

// NewLocal makes a single-node replicator. It needs no Close: its callback
// goroutine runs only while answers are queued.
func NewLocal() *Local {
	l := &Local{}
	l.appliers.m = map[string]Applier{}
	return l
}

// Register implements Replicator.
func (l *Local) Register(key string, a Applier) {
	l.appliers.Lock()
	l.appliers.m[key] = a
	l.appliers.Unlock()
}

// Unregister implements Replicator.
func (l *Local) Unregister(key string) {
	l.appliers.Lock()
	delete(l.appliers.m, key)
	l.appliers.Unlock()
}

// Propose implements Replicator: Apply runs now, on this goroutine; done
// runs later on the callback goroutine, with Apply's result. No applier
// for key is a definite failure (ErrNoApplier). A panicking Apply leaves
// the key's state as the panic left it: its outcome is unknown.
func (l *Local) Propose(key string, cmd Command, done func(any, error)) {
	l.appliers.RLock()
	a := l.appliers.m[key]
	l.appliers.RUnlock()
	if a == nil {
		l.cb.Add(done, nil, fmt.Errorf("propose to %q: %w", key, ErrNoApplier))
		return
	}
	cmd, _ = UnwrapTrace(cmd)
	res, err := applyRecovered(a, key, cmd)
	l.cb.Add(done, res, err)
}

func applyRecovered(a Applier, key string, cmd Command) (res any, err error) {
	defer func() {
		if r := recover(); r != nil {
			res, err = nil, fmt.Errorf("apply %T to %q panicked: %v: %w", cmd, key, r, ErrOutcomeUnknown)
		}
	}()
	return a.Apply(cmd), nil
}
