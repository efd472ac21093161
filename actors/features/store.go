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

	"github.com/regent-broker/regent/actors/internal/replstore"
	"github.com/regent-broker/regent/actors/replication"
	"github.com/regent-broker/regent/storage/atomicfile"
)

// replKey is the replicator key the store applies.
const replKey = "features"

// The command kinds; renaming one breaks replaying logs.
const (
	kindUpdate = "features.update"
	kindInit   = "features.init"
)

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

// initCmd fixes the first finalized levels of a state directory that
// never had them (see Store.Init): the first applied wins, later ones do
// nothing, so every node ends with the levels the log's first one carries.
type initCmd struct {
	Levels map[string]int16 `json:"levels"`
	// Legacy: the proposer found the directory older than features.json.
	Legacy bool `json:"legacy"`
}

func (*initCmd) CommandKind() string { return kindInit }

func (c *initCmd) AppendCommand(b []byte) []byte {
	raw, err := json.Marshal(c)
	if err != nil {
		panic(fmt.Sprintf("features: encode init: %v", err))
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
	replication.RegisterDecoder(kindInit, func(payload []byte) (replication.Command, error) {
		c := new(initCmd)
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
		// reg is the registration with repl and the closed flag.
		reg replstore.Registration
		// settled: the levels are the file's (an init or an update was
		// applied, now or by an earlier run); until then current is
		// initialLevels' guess at Open, and Init proposes a new one.
		settled bool
		// guess: Init's proposal as Guess made it, taken by the next Init.
		guess *initCmd
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
// replicator. Without the file the levels are initialLevels' guess until
// Init (or an update) fixes them through the replicator.
func Open(o Options) (*Store, error) {
	s := &Store{path: filepath.Join(o.DataDir, "meta", FileName), repl: o.Repl, log: o.Logger, nodeID: o.NodeID}
	if s.repl == nil {
		s.repl = replication.NewLocal()
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if err := s.loadLocked(); err != nil {
		return nil, err
	}
	s.mu.reg = replstore.Register(s.repl, replKey, "features", s)
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
// it served (Legacy). In a cluster it is the leader's guess that Init
// replicates: a node replaying the log into an empty state directory
// would guess "new".
func initialLevels(dataDir string) (f Finalized, legacy bool) {
	for _, name := range legacyMarkers {
		if _, err := os.Stat(filepath.Join(dataDir, "meta", name)); err == nil {
			return Legacy(), true
		}
	}
	return Defaults(), false
}

// loadLocked loads the file, or guesses the first levels (mu held, or the
// store not yet shared).
func (s *Store) loadLocked() error {
	f, ok, err := load(s.path)
	if err != nil {
		return err
	}
	s.mu.settled = ok
	if !ok {
		f, _ = initialLevels(filepath.Dir(filepath.Dir(s.path)))
	}
	s.current.Store(&f)
	return nil
}

// Init fixes the first finalized levels of a state directory that has
// none: it proposes initialLevels' decision, which every node applies (the
// first init in the log wins, so nodes that guessed differently, one
// replaying the log into an empty directory, agree). A single node calls
// it after Open; a cluster's leader once it leads. It does nothing when
// the levels are already fixed. It waits for the outcome (not from an
// apply callback).
func (s *Store) Init() error {
	s.mu.Lock()
	settled, guess := s.mu.settled, s.mu.guess
	s.mu.guess = nil
	s.mu.Unlock()
	if settled {
		return nil
	}
	// Decided now, not at Open: a raft node that replays its log opens an
	// empty state directory, and leads only once it has applied the log.
	// A cluster's leader decided as it began leading (Guess): by now a
	// request to it may have created the first topic of a new cluster.
	if guess == nil {
		guess = s.guessNow()
	}
	if _, err := replication.Await[error](s.repl, replKey, guess, nil); err != nil {
		return fmt.Errorf("fix the first finalized features: %w", err)
	}
	return nil
}

// Guess makes Init's decision now, for the Init that follows: a cluster's
// leader calls it once it has applied every earlier entry and before it
// takes requests (cluster.Raft.OnLeaderSettled), so the topics it sees were
// made by earlier leaders, never by clients of a new cluster that reached
// this one before its Init (which would have taken the new cluster for one
// that predates finalized features). Any goroutine.
func (s *Store) Guess() {
	g := s.guessNow()
	s.mu.Lock()
	s.mu.guess = g
	s.mu.Unlock()
}

func (s *Store) guessNow() *initCmd {
	f, legacy := initialLevels(filepath.Dir(filepath.Dir(s.path)))
	return &initCmd{Levels: f.Levels, Legacy: legacy}
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
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.reg.Closed() {
		return fmt.Errorf("%w: feature store is closed", kerr.KafkaStorageError)
	}
	switch c := cmd.(type) {
	case *updateCmd:
		return s.applyUpdateLocked(c)
	case *initCmd:
		return s.applyInitLocked(c)
	default:
		return fmt.Errorf("features: unexpected command %T", cmd)
	}
}

// applyInitLocked adopts c's levels unless the levels are already fixed.
func (s *Store) applyInitLocked(c *initCmd) any {
	if s.mu.settled {
		return nil
	}
	f := Finalized{Levels: c.Levels}
	if f.Levels == nil {
		f.Levels = map[string]int16{}
	}
	if err := save(s.path, f); err != nil {
		s.log.Error("persist the first finalized features", "err", err)
		return replication.MarkLocal(fmt.Errorf("%w: persist finalized features: %v", kerr.KafkaStorageError, err))
	}
	s.current.Store(&f)
	s.mu.settled = true
	if c.Legacy {
		s.log.Info("state directory predates finalized features: keeping the levels it served; raise transaction.version, share.version, streams.version and regent.raft.version with kafka-features.sh upgrade",
			"levels", f.Levels)
	} else {
		s.log.Info("new state directory: finalized features at their latest levels", "levels", f.Levels)
	}
	return nil
}

func (s *Store) applyUpdateLocked(c *updateCmd) any {
	cur := *s.current.Load()
	next, err := Apply(cur, c.Updates, c.NodeID)
	if err != nil {
		return err
	}
	if err := save(s.path, next); err != nil {
		s.log.Error("persist finalized features", "err", err)
		return replication.MarkLocal(fmt.Errorf("%w: persist finalized features: %v", kerr.KafkaStorageError, err))
	}
	s.current.Store(&next)
	s.mu.settled = true
	s.log.Info("finalized features changed", "epoch", next.Epoch, "levels", next.Levels)
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
		if err := s.loadLocked(); err != nil {
			return fmt.Errorf("reopen finalized features: %w", err)
		}
		return nil
	})
}
