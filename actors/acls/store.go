package acls

import (
	"context"
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

	"github.com/regent-broker/regent/actors/replication"
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
	repl   replication.Replicator
	logger *slog.Logger

	set atomic.Pointer[Set]
	// forward sends a change this node cannot propose (a raft follower)
	// to the leader; nil: NOT_CONTROLLER is answered. Set before serving.
	forward Forwarder

	// mu serializes Apply (on the proposer's goroutine with replication.Local,
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
	Repl   replication.Replicator
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
		s.repl = replication.NewLocal()
	}
	if s.logger == nil {
		s.logger = slog.Default()
	}
	if err := os.MkdirAll(filepath.Dir(s.path), 0o755); err != nil {
		return nil, fmt.Errorf("create meta dir: %w", err)
	}
	loaded, err := s.load()
	if err != nil {
		return nil, err
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
// added (see replication.Replicator.Propose).
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

// Forwarder carries a change a follower cannot propose to the leader: it
// delivers body to the leader's Store.ServeForwarded and returns its reply.
// Kafka's clients send CreateAcls and DeleteAcls to any broker (KRaft
// brokers forward them to the controller), so followers must too.
type Forwarder func(ctx context.Context, body []byte) ([]byte, error)

// SetForwarder installs f (see Forwarder); call before serving.
func (s *Store) SetForwarder(f Forwarder) { s.forward = f }

// forwarded is the body a Forwarder carries, and forwardReply its answer.
type forwarded struct {
	Kind    string          `json:"kind"`
	Command json.RawMessage `json:"command"`
}

type forwardReply struct {
	Deleted [][]ACL `json:"deleted,omitempty"`
	Code    int16   `json:"code,omitempty"`
	Message string  `json:"message,omitempty"`
}

// ServeForwarded proposes a change a follower forwarded (only ACL
// changes are accepted) and returns the reply for it. It never forwards
// again: a node that lost the leadership meanwhile answers NOT_CONTROLLER.
func (s *Store) ServeForwarded(body []byte) []byte {
	var rep forwardReply
	var f forwarded
	var cmd replication.Command
	err := json.Unmarshal(body, &f)
	if err == nil && f.Kind != kindCreate && f.Kind != kindDelete {
		err = fmt.Errorf("command kind %q is not an ACL change", f.Kind)
	}
	if err == nil {
		cmd, err = replication.DecodeCommand(f.Kind, f.Command)
	}
	if err != nil {
		rep.Code, rep.Message = kerr.InvalidRequest.Code, "forwarded ACL change: "+err.Error()
	} else {
		res, perr := s.proposeLocal(cmd.(replication.Encodable))
		if d, ok := res.([][]ACL); ok {
			rep.Deleted = d
		}
		if perr != nil {
			rep.Code, rep.Message = kerr.UnknownServerError.Code, perr.Error()
			var ke *kerr.Error
			if errors.As(perr, &ke) {
				rep.Code = ke.Code
			}
		}
	}
	raw, _ := json.Marshal(rep) // plain structs: always marshal
	return raw
}

// propose commits cmd through this node, or through the leader when this
// node is a follower and a Forwarder is set, and returns Apply's result.
func (s *Store) propose(cmd replication.Encodable) (any, error) {
	res, err := s.proposeLocal(cmd)
	if s.forward == nil || !errors.Is(err, kerr.NotController) {
		return res, err
	}
	body, merr := json.Marshal(forwarded{Kind: cmd.CommandKind(), Command: cmd.AppendCommand(nil)})
	if merr != nil {
		return nil, fmt.Errorf("forward %s: %w", cmd.CommandKind(), merr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), proposeTimeout)
	defer cancel()
	raw, ferr := s.forward(ctx, body)
	if ferr != nil {
		// The leader may or may not have applied it.
		return nil, &Error{Code: kerr.RequestTimedOut, Msg: fmt.Sprintf("%s: forwarding to the leader failed, the change may or may not be applied: %v", cmd.CommandKind(), ferr)}
	}
	var rep forwardReply
	if err := json.Unmarshal(raw, &rep); err != nil {
		return nil, &Error{Code: kerr.UnknownServerError, Msg: fmt.Sprintf("%s: the leader's reply: %v", cmd.CommandKind(), err)}
	}
	if rep.Code != 0 {
		code := kerr.ErrorForCode(rep.Code)
		ke, ok := code.(*kerr.Error)
		if !ok {
			ke = kerr.UnknownServerError
		}
		return nil, &Error{Code: ke, Msg: rep.Message}
	}
	if _, ok := cmd.(*deleteCmd); ok {
		if rep.Deleted == nil {
			rep.Deleted = make([][]ACL, len(cmd.(*deleteCmd).Filters))
		}
		return rep.Deleted, nil
	}
	return nil, nil
}

// proposeLocal commits cmd through this node's replicator and waits for
// Apply's result.
func (s *Store) proposeLocal(cmd replication.Encodable) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), proposeTimeout)
	defer cancel()
	res, err := replication.ProposeWait[any](ctx, s.repl, replKey, cmd)
	switch {
	case errors.Is(err, replication.ErrNotLeader):
		return nil, &Error{Code: kerr.NotController, Msg: fmt.Sprintf("%s: this broker is not the cluster leader (the controller); retry on the leader: %v", cmd.CommandKind(), err)}
	case errors.Is(err, replication.ErrOutcomeUnknown):
		return nil, &Error{Code: kerr.RequestTimedOut, Msg: fmt.Sprintf("%s: the change may or may not be applied: %v", cmd.CommandKind(), err)}
	}
	return res, err
}

// Apply implements replication.Applier. It runs on every node in commit order
// and depends only on the command and the current set, so every node holds
// the same bindings. It returns nil (create), [][]ACL (delete) or an error.
func (s *Store) Apply(cmd replication.Command) any {
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
		return replication.MarkLocal(&Error{Code: kerr.KafkaStorageError, Msg: fmt.Sprintf("persist acls: %v", err)})
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

// load reads the persisted bindings.
func (s *Store) load() ([]ACL, error) {
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
	return loaded, nil
}

// Reopen reloads a closed store's set from its file and registers it with
// the replicator again. A raft node calls it after Close and a snapshot
// restore rewrote the state directory, so that the authorizer and the
// admin server holding this *Store see the restored set. It must run where
// nothing is applied (the raft FSM goroutine, inside the restore); until
// it returns, authorization uses the set from before. On error the store
// stays closed.
func (s *Store) Reopen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.mu.closed {
		return errors.New("acls: reopen of an open store")
	}
	loaded, err := s.load()
	if err != nil {
		return fmt.Errorf("reopen acls: %w", err)
	}
	s.set.Store(NewSet(loaded))
	s.mu.closed = false
	s.repl.Register(replKey, s)
	return nil
}
