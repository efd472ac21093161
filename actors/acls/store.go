package acls

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/regent-broker/regent/cluster"
	"github.com/regent-broker/regent/storage/atomicfile"
)

// fileName is where the bindings are persisted, under DataDir/meta (inside
// the state directory raft snapshots capture).
const fileName = "acls.json"

// Store holds the replicated ACL set. Reads (Set) are lock-free: the set
// is an immutable snapshot replaced whole by Apply. Changes are proposed to
// the replicator and applied by Apply on every node in commit order, which
// persists the new set before publishing it.
type Store struct {
	path   string
	repl   cluster.Replicator
	logger *slog.Logger

	set atomic.Pointer[Set]

	// mu serializes Apply (on the proposer's goroutine with cluster.Local,
	// on the raft FSM goroutine otherwise) against Close. Proposers never
	// hold it: Local applies inline.
	mu struct {
		sync.Mutex
		closed bool
	}
}

// Options configures the store.
type Options struct {
	// DataDir is the state directory; the set lives in DataDir/meta.
	DataDir string
	// Repl orders changes; nil: a Local one.
	Repl   cluster.Replicator
	Logger *slog.Logger
}

// Error is an ACL operation's Kafka error with a message.
type Error struct {
	Code *kerr.Error
	Msg  string
}

func (e *Error) Error() string { return e.Msg }
func (e *Error) Unwrap() error { return e.Code }

// Open loads the persisted set and registers the store as the
// replicator's applier for ACL changes.
func Open(o Options) (*Store, error) {
	s := &Store{path: filepath.Join(o.DataDir, "meta", fileName), repl: o.Repl, logger: o.Logger}
	if s.repl == nil {
		s.repl = cluster.NewLocal()
	}
	if s.logger == nil {
		s.logger = slog.Default()
	}
	if err := os.MkdirAll(filepath.Dir(s.path), 0o755); err != nil {
		return nil, fmt.Errorf("create meta dir: %w", err)
	}
	var loaded []ACL
	raw, err := os.ReadFile(s.path)
	switch {
	case err == nil:
		if err := json.Unmarshal(raw, &loaded); err != nil {
			return nil, fmt.Errorf("parse %s: %w", s.path, err)
		}
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("read acls: %w", err)
	}
	s.set.Store(NewSet(loaded))
	// Registered last: a committed change must find the loaded state.
	s.repl.Register(replKey, s)
	return s, nil
}

// Set is the current set; lock-free, never nil after Open.
func (s *Store) Set() *Set { return s.set.Load() }

// proposeTimeout bounds the wait for a change to be committed and applied.
var proposeTimeout = 30 * time.Second

// Create adds bindings (validated with ACL.Validate by the caller); those
// already present stay. On error the bindings may or may not have been
// added (see cluster.Replicator.Propose).
func (s *Store) Create(acls []ACL) error {
	_, err := s.propose(&createCmd{ACLs: acls})
	return err
}

// Delete removes what each filter matches and returns, per filter, the
// bindings it removed (a binding matched by several filters is reported
// under each).
func (s *Store) Delete(filters []Filter) ([][]ACL, error) {
	res, err := s.propose(&deleteCmd{Filters: filters})
	if err != nil {
		return nil, err
	}
	deleted, ok := res.([][]ACL)
	if !ok {
		return nil, fmt.Errorf("delete acls: unexpected apply result %T", res)
	}
	return deleted, nil
}

// propose commits cmd and waits for Apply's result.
func (s *Store) propose(cmd cluster.Encodable) (any, error) {
	type outcome struct {
		res any
		err error
	}
	// Buffered, sent to without blocking: a late done must not block the
	// replicator's goroutine.
	ch := make(chan outcome, 1)
	s.repl.Propose(replKey, cmd, func(res any, err error) {
		select {
		case ch <- outcome{res, err}:
		default:
		}
	})
	timer := time.NewTimer(proposeTimeout)
	defer timer.Stop()
	select {
	case o := <-ch:
		switch {
		case errors.Is(o.err, cluster.ErrNotLeader):
			return nil, &Error{Code: kerr.NotController, Msg: fmt.Sprintf("%s: this broker is not the cluster leader (the controller); retry on the leader: %v", cmd.CommandKind(), o.err)}
		case o.err != nil:
			return nil, &Error{Code: kerr.RequestTimedOut, Msg: fmt.Sprintf("%s: not committed, the change may or may not be applied: %v", cmd.CommandKind(), o.err)}
		}
		if err, ok := o.res.(error); ok {
			return nil, err
		}
		return o.res, nil
	case <-timer.C:
		return nil, &Error{Code: kerr.RequestTimedOut, Msg: fmt.Sprintf("%s: not committed within %s, the change may or may not be applied", cmd.CommandKind(), proposeTimeout)}
	}
}

// Apply implements cluster.Applier. It runs on every node in commit order
// and depends only on the command and the current set, so every node holds
// the same bindings. It returns nil (create), [][]ACL (delete) or an error.
func (s *Store) Apply(cmd cluster.Command) any {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return &Error{Code: kerr.KafkaStorageError, Msg: "acl store is closed"}
	}
	cur := s.set.Load()
	switch c := cmd.(type) {
	case *createCmd:
		var added []ACL
		for _, a := range c.ACLs {
			if !cur.Contains(a) {
				added = append(added, a)
			}
		}
		if len(added) == 0 {
			return nil
		}
		if err := s.publish(NewSet(append(append([]ACL(nil), cur.All()...), added...))); err != nil {
			return err
		}
		for _, a := range added {
			s.logger.Info("acl created", "acl", a.String())
		}
		return nil
	case *deleteCmd:
		deleted := make([][]ACL, len(c.Filters))
		gone := map[ACL]bool{}
		for i, f := range c.Filters {
			deleted[i] = cur.Select(f)
			for _, a := range deleted[i] {
				gone[a] = true
			}
		}
		if len(gone) > 0 {
			var keep []ACL
			for _, a := range cur.All() {
				if !gone[a] {
					keep = append(keep, a)
				}
			}
			if err := s.publish(NewSet(keep)); err != nil {
				return err
			}
			for a := range gone {
				s.logger.Info("acl deleted", "acl", a.String())
			}
		}
		return deleted
	default:
		return fmt.Errorf("acls: unexpected command %T", cmd)
	}
}

// publish persists next and makes it the current set. Called with s.mu
// held.
func (s *Store) publish(next *Set) error {
	all := next.All()
	if all == nil {
		all = []ACL{}
	}
	raw, err := json.MarshalIndent(all, "", "  ")
	if err == nil {
		err = atomicfile.Write(s.path, raw)
	}
	if err != nil {
		// A local failure, not decided alike on every node: say so.
		s.logger.Error("persist acls", "err", err)
		return &Error{Code: kerr.KafkaStorageError, Msg: fmt.Sprintf("persist acls: %v", err)}
	}
	s.set.Store(next)
	return nil
}

// Close stops applying changes.
func (s *Store) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.mu.closed {
		s.mu.closed = true
		s.repl.Unregister(replKey)
	}
}
