package clientmetrics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/regent-broker/regent/actors/internal/replstore"
	"github.com/regent-broker/regent/actors/replication"
	"github.com/regent-broker/regent/storage/atomicfile"
)

// replKey is the replicator key the store applies.
const replKey = "clientmetrics"

// kindSet names the one command kind; renaming it breaks replaying logs.
const kindSet = "clientmetrics.set"

// setCmd replaces one resource's configs; empty configs delete it.
type setCmd struct {
	Name    string            `json:"name"`
	Configs map[string]string `json:"configs"`
}

func (*setCmd) CommandKind() string { return kindSet }

func (c *setCmd) AppendCommand(b []byte) []byte {
	raw, err := json.Marshal(c)
	if err != nil {
		// A string and a map of strings always marshal.
		panic(fmt.Sprintf("clientmetrics: encode set: %v", err))
	}
	return append(b, raw...)
}

func init() {
	replication.RegisterDecoder(kindSet, func(payload []byte) (replication.Command, error) {
		c := new(setCmd)
		if err := json.Unmarshal(payload, c); err != nil {
			return nil, err
		}
		return c, nil
	})
}

// FileName is the store's file under the state directory's meta/.
const FileName = "client-metrics.json"

// Set is the subscriptions at one point; never mutated once published.
type Set struct {
	// Version grows with every change this node applied (and every
	// reopen); the Manager recomputes a client instance's subscription
	// when it differs from the one the instance was computed at. Local to
	// the node: not replicated, not persisted.
	Version uint64
	// Subs are sorted by name.
	Subs []Subscription
}

// Get returns the named subscription.
func (s *Set) Get(name string) (Subscription, bool) {
	i := sort.Search(len(s.Subs), func(i int) bool { return s.Subs[i].Name >= name })
	if i < len(s.Subs) && s.Subs[i].Name == name {
		return s.Subs[i], true
	}
	return Subscription{}, false
}

// Store holds the CLIENT_METRICS resources.
type Store struct {
	path string
	repl replication.Replicator // the registration's, set by Open, read-only after
	log  *slog.Logger

	// current is read lock-free by the telemetry handlers; replaced under mu.
	current atomic.Pointer[Set]

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

// Open loads the stored resources and registers the store with the
// replicator.
func Open(o Options) (*Store, error) {
	s := &Store{path: filepath.Join(o.DataDir, "meta", FileName), log: o.Logger}
	if s.log == nil {
		s.log = slog.Default()
	}
	set, err := load(s.path, 1)
	if err != nil {
		return nil, err
	}
	s.current.Store(set)
	s.mu.reg = replstore.Register(o.Repl, replKey, "clientmetrics", s)
	s.repl = s.mu.reg.Repl()
	return s, nil
}

// load reads the file; a resource that no longer parses (written by a
// Regent with other rules) is left out with an error logged by the caller.
func load(path string, version uint64) (*Set, error) {
	set := &Set{Version: version}
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return set, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read client metrics subscriptions: %w", err)
	}
	var m map[string]map[string]string
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	for name, cfg := range m {
		sub, err := Parse(name, cfg)
		if err != nil {
			return nil, fmt.Errorf("%s: subscription %q: %w", path, name, err)
		}
		set.Subs = append(set.Subs, sub)
	}
	sort.Slice(set.Subs, func(i, j int) bool { return set.Subs[i].Name < set.Subs[j].Name })
	return set, nil
}

func save(path string, set *Set) error {
	m := make(map[string]map[string]string, len(set.Subs))
	for _, s := range set.Subs {
		m[s.Name] = s.Configs
	}
	raw, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(path, raw)
}

// Current is the subscriptions now; never mutate it.
func (s *Store) Current() *Set { return s.current.Load() }

// proposeTimeout bounds the wait for a change to commit.
const proposeTimeout = 30 * time.Second

// Set replaces the named resource's configs (checked with Parse first);
// empty configs delete it. It blocks until the change is applied on this
// node: call it off the event loop. Errors: Parse's refusals;
// NOT_CONTROLLER on a follower; REQUEST_TIMED_OUT when the outcome is
// unknown (the change may or may not be applied).
func (s *Store) Set(name string, configs map[string]string) error {
	if len(configs) > 0 {
		if _, err := Parse(name, configs); err != nil {
			return err
		}
	} else if name == "" {
		return fmt.Errorf("%w: client metrics subscription name must not be empty", kerr.InvalidRequest)
	}
	ctx, cancel := context.WithTimeout(context.Background(), proposeTimeout)
	defer cancel()
	_, err := replication.ProposeWait[error](ctx, s.repl, replKey, &setCmd{Name: name, Configs: configs})
	switch {
	case errors.Is(err, replication.ErrNotLeader):
		return fmt.Errorf("%w: this broker is not the cluster leader (the controller): %v", kerr.NotController, err)
	case errors.Is(err, replication.ErrOutcomeUnknown):
		return fmt.Errorf("%w: client metrics change may or may not be applied: %v", kerr.RequestTimedOut, err)
	}
	return err
}

// Apply implements replication.Applier, on every node in commit order. The
// configs are checked again (every node parses the same bytes the same
// way); it returns nil or the refusal.
func (s *Store) Apply(cmd replication.Command) any {
	c, ok := cmd.(*setCmd)
	if !ok {
		return fmt.Errorf("clientmetrics: unexpected command %T", cmd)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.reg.Closed() {
		return fmt.Errorf("%w: client metrics store is closed", kerr.KafkaStorageError)
	}
	var sub Subscription
	if len(c.Configs) > 0 {
		var err error
		if sub, err = Parse(c.Name, c.Configs); err != nil {
			return err
		}
	}
	cur := s.current.Load()
	next := &Set{Version: cur.Version + 1, Subs: make([]Subscription, 0, len(cur.Subs)+1)}
	for _, old := range cur.Subs {
		if old.Name != c.Name {
			next.Subs = append(next.Subs, old)
		}
	}
	if len(c.Configs) > 0 {
		next.Subs = append(next.Subs, sub)
		sort.Slice(next.Subs, func(i, j int) bool { return next.Subs[i].Name < next.Subs[j].Name })
	}
	if err := save(s.path, next); err != nil {
		s.log.Error("persist client metrics subscriptions", "err", err)
		return replication.MarkLocal(fmt.Errorf("%w: persist client metrics subscriptions: %v", kerr.KafkaStorageError, err))
	}
	s.current.Store(next)
	s.log.Info("client metrics subscription changed", "name", c.Name, "configs", c.Configs)
	return nil
}

// Close stops applying changes.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.reg.Close()
	return nil
}

// Reopen reloads a closed store from its file and registers it again: a
// raft node calls it after a snapshot restore rewrote the state directory.
// It must run where nothing is applied (the raft FSM goroutine, inside the
// restore). On error the store stays closed.
func (s *Store) Reopen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.reg.Reopen(s, func() error {
		set, err := load(s.path, s.current.Load().Version+1)
		if err != nil {
			return fmt.Errorf("reopen client metrics subscriptions: %w", err)
		}
		s.current.Store(set)
		return nil
	})
}
