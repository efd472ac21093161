package quotas

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

	"github.com/regent-broker/regent/actors/internal/replstore"
	"github.com/regent-broker/regent/actors/replication"
	"github.com/regent-broker/regent/storage/atomicfile"
)

// replKey is the replicator key the store applies.
const replKey = "quotas"

// kindAlter names the one command kind; renaming it breaks replaying logs.
const kindAlter = "quotas.alter"

// FileName is the store's file under the state directory's meta/.
const FileName = "client_quotas.json"

// alterCmd is an AlterClientQuotas' valid alterations, applied in order.
type alterCmd struct {
	Alts []Alteration `json:"alts"`
}

func (*alterCmd) CommandKind() string { return kindAlter }

func (c *alterCmd) AppendCommand(b []byte) []byte {
	raw, err := json.Marshal(c)
	if err != nil {
		// Strings, bools and finite floats (validated) always marshal.
		panic(fmt.Sprintf("quotas: encode alter: %v", err))
	}
	return append(b, raw...)
}

func init() {
	replication.RegisterDecoder(kindAlter, func(payload []byte) (replication.Command, error) {
		c := new(alterCmd)
		if err := json.Unmarshal(payload, c); err != nil {
			return nil, err
		}
		return c, nil
	})
}

// Store holds the replicated quota values. Reads (Snapshot) are
// lock-free; changes are proposed to the replicator and applied by Apply
// on every node in commit order, which persists the new snapshot before
// publishing it.
type Store struct {
	path string
	repl replication.Replicator // the registration's, set by Open, read-only after
	log  *slog.Logger

	snap atomic.Pointer[Snapshot]

	// mu serializes Apply (on the proposer's goroutine with a local
	// replicator, on the raft FSM goroutine otherwise), Close and Reopen.
	// Never held across Propose.
	mu struct {
		sync.Mutex
		reg replstore.Registration
	}
}

// Options configures the store.
type Options struct {
	// DataDir is the state directory; the store lives in its meta/.
	DataDir string
	// Repl orders changes; nil: a local one.
	Repl   replication.Replicator
	Logger *slog.Logger
}

// Open loads the persisted quotas and registers the store with the
// replicator.
func Open(o Options) (*Store, error) {
	s := &Store{path: filepath.Join(o.DataDir, "meta", FileName), log: o.Logger}
	if s.log == nil {
		s.log = slog.Default()
	}
	snap, err := load(s.path)
	if err != nil {
		return nil, err
	}
	s.snap.Store(snap)
	// Registered last: a committed change must find the loaded state.
	s.mu.reg = replstore.Register(o.Repl, replKey, "quotas", s)
	s.repl = s.mu.reg.Repl()
	return s, nil
}

// record is one entity's line in the file.
type record struct {
	Entity Entity `json:"entity"`
	Values Values `json:"values"`
}

func load(path string) (*Snapshot, error) {
	m := map[Entity]Values{}
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return newSnapshot(m), nil
	}
	if err != nil {
		return nil, fmt.Errorf("read client quotas: %w", err)
	}
	var recs []record
	if err := json.Unmarshal(raw, &recs); err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	for _, r := range recs {
		if len(r.Values) > 0 {
			m[r.Entity] = r.Values
		}
	}
	return newSnapshot(m), nil
}

func save(path string, snap *Snapshot) error {
	recs := make([]record, 0, len(snap.m))
	for e, v := range snap.m {
		recs = append(recs, record{Entity: e, Values: v})
	}
	raw, err := json.MarshalIndent(recs, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(path, raw)
}

// Snapshot is the current quotas; never nil after Open.
func (s *Store) Snapshot() *Snapshot { return s.snap.Load() }

// proposeTimeout bounds the wait for a change to be committed and applied.
var proposeTimeout = 30 * time.Second

// Errors of Alter that are about replication, not about the request.
var (
	// ErrNotLeader: this node cannot propose (a raft follower); nothing
	// was applied.
	ErrNotLeader = errors.New("this broker is not the cluster leader (the controller)")
	// ErrOutcomeUnknown: the change may or may not be applied.
	ErrOutcomeUnknown = errors.New("the client quota change may or may not be applied")
)

// Alter applies alts (each validated with ValidateOps) as one replicated
// command. It returns, per alteration, nil or its refusal; or an error
// for all of them: wrapping ErrNotLeader, ErrOutcomeUnknown, or a local
// failure to persist.
func (s *Store) Alter(alts []Alteration) ([]error, error) {
	ctx, cancel := context.WithTimeout(context.Background(), proposeTimeout)
	defer cancel()
	res, err := replication.ProposeWait[[]error](ctx, s.repl, replKey, &alterCmd{Alts: alts})
	switch {
	case errors.Is(err, replication.ErrNotLeader):
		return nil, fmt.Errorf("%w: %v", ErrNotLeader, err)
	case errors.Is(err, replication.ErrOutcomeUnknown):
		return nil, fmt.Errorf("%w: %v", ErrOutcomeUnknown, err)
	case err != nil:
		return nil, err
	}
	return res, nil
}

// Apply implements replication.Applier, on every node in commit order. It
// checks each alteration again (deterministically: the same on every
// node) and applies the valid ones together. It returns []error, one per
// alteration, or an error when this node could not persist.
func (s *Store) Apply(cmd replication.Command) any {
	c, ok := cmd.(*alterCmd)
	if !ok {
		return fmt.Errorf("quotas: unexpected command %T", cmd)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.reg.Closed() {
		return errors.New("quotas: the client quota store is closed")
	}
	errs := make([]error, len(c.Alts))
	var valid []Alteration
	for i, a := range c.Alts {
		errs[i] = a.Entity.check()
		if errs[i] == nil {
			errs[i] = ValidateOps(a.Entity, a.Ops)
		}
		if errs[i] == nil {
			valid = append(valid, a)
		}
	}
	if len(valid) == 0 {
		return errs
	}
	next := s.snap.Load().with(valid)
	if err := save(s.path, next); err != nil {
		// A local failure, not decided alike on every node: say so.
		s.log.Error("persist client quotas", "err", err)
		return replication.MarkLocal(fmt.Errorf("persist client quotas: %w", err))
	}
	s.snap.Store(next)
	for _, a := range valid {
		s.log.Info("client quotas altered", "entity", a.Entity.String(), "now", next.m[a.Entity])
	}
	return errs
}

// Close stops applying changes.
func (s *Store) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.reg.Close()
}

// Reopen reloads a closed store from its file and registers it again: a
// raft node calls it after a snapshot restore rewrote the state directory.
// It must run where nothing is applied (the raft FSM goroutine, inside the
// restore). On error the store stays closed.
func (s *Store) Reopen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.reg.Reopen(s, func() error {
		snap, err := load(s.path)
		if err != nil {
			return fmt.Errorf("reopen client quotas: %w", err)
		}
		s.snap.Store(snap)
		return nil
	})
}
