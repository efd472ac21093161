package features

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/regent-broker/regent/actors/replication"
	"github.com/regent-broker/regent/storage/atomicfile"
)

// replKey is the replicator key the store applies.
const replKey = "features"

// kindUpdate names the one command kind; renaming it breaks replaying logs.
const kindUpdate = "features.update"

// updateCmd is an UpdateFeatures' changes; every node checks and applies
// them against its own (identical) levels.
type updateCmd struct {
	Updates []Update `json:"updates"`
	// NodeID is the proposer's, for the messages of a refusal.
	NodeID int32 `json:"node_id"`
}

func (*updateCmd) CommandKind() string { return kindUpdate }

func (c *updateCmd) AppendCommand(b []byte) []byte {
	raw, err := json.Marshal(c)
	if err != nil {
		// Strings and integers always marshal.
		panic(fmt.Sprintf("features: encode update: %v", err))
	}
	return append(b, raw...)
}

func init() {
	replication.RegisterDecoder(kindUpdate, func(payload []byte) (replication.Command, error) {
		c := new(updateCmd)
		if err := json.Unmarshal(payload, c); err != nil {
			return nil, err
		}
		return c, nil
	})
}

// FileName is the store's file under the state directory's meta/.
const FileName = "features.json"

// Store holds the finalized levels.
type Store struct {
	path   string
	repl   replication.Replicator
	log    *slog.Logger
	nodeID int32

	// current is read lock-free (every ApiVersions); replaced under mu.
	current atomic.Pointer[Finalized]

	// mu serializes Apply (on the proposer's goroutine with a local
	// replicator, on the raft FSM goroutine otherwise), Close and Reopen.
	// Never held across Propose.
	mu struct {
		sync.Mutex
		closed bool
	}
}

// Options configures the store.
type Options struct {
	// DataDir is the state directory; the store lives in its meta/.
	DataDir string
	// NodeID names this broker in refusals.
	NodeID int32
	// Repl orders changes; nil: a local one.
	Repl   replication.Replicator
	Logger *slog.Logger
}

// Open loads the finalized levels and registers the store with the
// replicator. Without the file it decides the first levels (initialLevels)
// and writes them at once, so a directory's start levels are decided once
// and travel in the state directory's snapshots like every later change.
func Open(o Options) (*Store, error) {
	s := &Store{path: filepath.Join(o.DataDir, "meta", FileName), repl: o.Repl, log: o.Logger, nodeID: o.NodeID}
	if s.repl == nil {
		s.repl = replication.NewLocal()
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	f, err := s.loadOrInit()
	if err != nil {
		return nil, err
	}
	s.current.Store(&f)
	s.repl.Register(replKey, s)
	return s, nil
}

// legacyMarkers are state files that only a directory that served before
// holds (the topic registry, written once a topic is created; the producer
// id reservation, once an id was handed out); none is written by opening a
// store. A directory with one and no features.json ran a Regent that
// predates finalized features.
var legacyMarkers = []string{"topics.json", "producer-ids"}

// initialLevels is what a state directory without features.json starts
// at: a new directory at Kafka 4.3's levels for a new cluster (Defaults),
// one that ran before features.json existed at the levels matching what
// it served (Legacy). Every node of a cluster holds the same replicated
// topic registry, so they decide alike; a node that joins gets the
// leader's file in its first snapshot.
func initialLevels(dataDir string) (f Finalized, legacy bool) {
	for _, name := range legacyMarkers {
		if _, err := os.Stat(filepath.Join(dataDir, "meta", name)); err == nil {
			return Legacy(), true
		}
	}
	return Defaults(), false
}

// loadOrInit loads the file, or decides and writes the first levels.
func (s *Store) loadOrInit() (Finalized, error) {
	f, ok, err := load(s.path)
	if err != nil || ok {
		return f, err
	}
	f, legacy := initialLevels(filepath.Dir(filepath.Dir(s.path)))
	if err := save(s.path, f); err != nil {
		return Finalized{}, fmt.Errorf("write first finalized features: %w", err)
	}
	if legacy {
		s.log.Info("state directory predates finalized features: keeping the levels it served; raise transaction.version with kafka-features.sh upgrade",
			"levels", f.Levels)
	} else {
		s.log.Info("new state directory: finalized features at their latest levels", "levels", f.Levels)
	}
	return f, nil
}

// load reads the file; ok is false when it does not exist.
func load(path string) (f Finalized, ok bool, err error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Finalized{}, false, nil
	}
	if err != nil {
		return Finalized{}, false, fmt.Errorf("read finalized features: %w", err)
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return Finalized{}, false, fmt.Errorf("parse %s: %w", path, err)
	}
	if f.Levels == nil {
		f.Levels = map[string]int16{}
	}
	return f, true, nil
}

func save(path string, f Finalized) error {
	raw, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(path, raw)
}

// Finalized is the current levels; never mutate it.
func (s *Store) Finalized() Finalized { return *s.current.Load() }

// Validate checks updates against the current levels without changing
// anything (UpdateFeatures' validate_only).
func (s *Store) Validate(ups []Update) error {
	_, err := Apply(s.Finalized(), ups, s.nodeID)
	return err
}

// Update proposes updates as one command; done gets nil once they are
// applied on this node, a refusal (a *kerr.Error with Kafka's message), or
// a replication error: NOT_CONTROLLER on a follower, REQUEST_TIMED_OUT
// when the outcome is unknown. done is called once, never inline.
func (s *Store) Update(ups []Update, done func(error)) {
	replication.Propose(s.repl, replKey, &updateCmd{Updates: ups, NodeID: s.nodeID}, func(_ error, err error) {
		switch {
		case errors.Is(err, replication.ErrNotLeader):
			err = fmt.Errorf("%w: this broker is not the cluster leader (the controller): %v", kerr.NotController, err)
		case errors.Is(err, replication.ErrOutcomeUnknown):
			err = fmt.Errorf("%w: the feature change may or may not be applied: %v", kerr.RequestTimedOut, err)
		}
		done(err)
	})
}

// Apply implements replication.Applier, on every node in commit order: the
// updates are checked again against this node's levels and applied whole,
// or refused whole. It returns nil or the refusal.
func (s *Store) Apply(cmd replication.Command) any {
	c, ok := cmd.(*updateCmd)
	if !ok {
		return fmt.Errorf("features: unexpected command %T", cmd)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return fmt.Errorf("%w: feature store is closed", kerr.KafkaStorageError)
	}
	cur := *s.current.Load()
	next, err := Apply(cur, c.Updates, c.NodeID)
	if err != nil {
		return err
	}
	if err := save(s.path, next); err != nil {
		s.log.Error("persist finalized features", "err", err)
		return fmt.Errorf("%w: persist finalized features: %v", kerr.KafkaStorageError, err)
	}
	s.current.Store(&next)
	s.log.Info("finalized features changed", "epoch", next.Epoch, "levels", next.Levels)
	return nil
}

// Close stops applying changes.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.mu.closed {
		s.mu.closed = true
		s.repl.Unregister(replKey)
	}
	return nil
}

// Reopen reloads a closed store from its file and registers it again: a
// raft node calls it after a snapshot restore rewrote the state directory.
// It must run where nothing is applied (the raft FSM goroutine, inside the
// restore). On error the store stays closed.
func (s *Store) Reopen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.mu.closed {
		return errors.New("features: reopen of an open store")
	}
	f, err := s.loadOrInit()
	if err != nil {
		return fmt.Errorf("reopen finalized features: %w", err)
	}
	s.current.Store(&f)
	s.mu.closed = false
	s.repl.Register(replKey, s)
	return nil
}
