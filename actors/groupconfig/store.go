package groupconfig

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/regent-broker/regent/actors/internal/replstore"
	"github.com/regent-broker/regent/actors/replication"
	"github.com/regent-broker/regent/storage/atomicfile"
)

// replKey is the replicator key the store applies.
const replKey = "groupconfig"

// kindSet names the one command kind; renaming it breaks replaying logs.
const kindSet = "groupconfig.set"

// setCmd replaces one group's overrides; empty configs delete them.
type setCmd struct {
	Group   string            `json:"group"`
	Configs map[string]string `json:"configs"`
}

func (*setCmd) CommandKind() string { return kindSet }

func (c *setCmd) AppendCommand(b []byte) []byte {
	raw, err := json.Marshal(c)
	if err != nil {
		// A string and a map of strings always marshal.
		panic(fmt.Sprintf("groupconfig: encode set: %v", err))
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
const FileName = "group-configs.json"

// overrides is every group's overrides at one point; never mutated once
// published.
type overrides struct {
	byGroup map[string]map[string]string
	// consumer caches the parsed consumer timeouts of the groups that
	// override either (the KIP-848 coordinator reads them per heartbeat).
	consumer map[string]ConsumerTimeouts
}

// ConsumerTimeouts are a group's consumer-group overrides; zero: not set.
type ConsumerTimeouts struct {
	SessionTimeout    time.Duration
	HeartbeatInterval time.Duration
}

func newOverrides(byGroup map[string]map[string]string) *overrides {
	o := &overrides{byGroup: byGroup, consumer: map[string]ConsumerTimeouts{}}
	for g, cfg := range byGroup {
		var ct ConsumerTimeouts
		if v, ok := cfg[ConsumerSessionTimeoutMs]; ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			ct.SessionTimeout = time.Duration(n) * time.Millisecond
		}
		if v, ok := cfg[ConsumerHeartbeatIntervalMs]; ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			ct.HeartbeatInterval = time.Duration(n) * time.Millisecond
		}
		if ct != (ConsumerTimeouts{}) {
			o.consumer[g] = ct
		}
	}
	return o
}

// Store holds the GROUP config resources: each group's overrides,
// replicated and persisted in meta/group-configs.json. Reads are
// lock-free and safe from any goroutine.
type Store struct {
	path   string
	repl   replication.Replicator // the registration's, set by Open, read-only after
	log    *slog.Logger
	broker func() map[string]string

	// current is replaced under mu.
	current atomic.Pointer[overrides]

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
	Repl replication.Replicator
	// Broker returns the broker config's overrides (the defaults and
	// bounds of group configs); nil: none set.
	Broker func() map[string]string
	Logger *slog.Logger
}

// Open loads the stored overrides and registers the store with the
// replicator.
func Open(o Options) (*Store, error) {
	s := &Store{path: filepath.Join(o.DataDir, "meta", FileName), log: o.Logger, broker: o.Broker}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.broker == nil {
		s.broker = func() map[string]string { return nil }
	}
	cur, err := load(s.path)
	if err != nil {
		return nil, err
	}
	s.current.Store(cur)
	s.mu.reg = replstore.Register(o.Repl, replKey, "groupconfig", s)
	s.repl = s.mu.reg.Repl()
	return s, nil
}

// load reads the file. Every stored value was checked before it was
// stored; a key this version does not know (a file from another Regent)
// is an error rather than a silent drop.
func load(path string) (*overrides, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return newOverrides(map[string]map[string]string{}), nil
	}
	if err != nil {
		return nil, fmt.Errorf("read group configs: %w", err)
	}
	var m map[string]map[string]string
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	if m == nil {
		m = map[string]map[string]string{}
	}
	for g, cfg := range m {
		if _, err := parseAll(cfg); err != nil {
			return nil, fmt.Errorf("%s: group %q: %w", path, g, err)
		}
	}
	return newOverrides(m), nil
}

func save(path string, m map[string]map[string]string) error {
	raw, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(path, raw)
}

// parseAll checks names, types and own bounds only: what every node
// decides alike whatever its broker config.
func parseAll(cfg map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(cfg))
	for k, v := range cfg {
		d, ok := Lookup(k)
		if !ok {
			return nil, invalid("Unknown group config name: %s", k)
		}
		n, err := d.parse(v)
		if err != nil {
			return nil, err
		}
		out[k] = n
	}
	return out, nil
}

// Overrides returns a copy of the group's overrides (nil: none).
func (s *Store) Overrides(group string) map[string]string {
	return maps.Clone(s.current.Load().byGroup[group])
}

// Values returns the group's configs in force: its overrides over this
// broker's defaults. The share-group coordinator reads its keys here.
func (s *Store) Values(group string) Values {
	return Resolve(s.current.Load().byGroup[group], s.broker())
}

// Consumer returns the group's consumer.session.timeout.ms and
// consumer.heartbeat.interval.ms overrides (zero: not set, use the
// broker's). Cheap: read on every KIP-848 heartbeat.
func (s *Store) Consumer(group string) ConsumerTimeouts {
	return s.current.Load().consumer[group]
}

// Describe lists every key for the group as DescribeConfigs shows it.
func (s *Store) Describe(group string) []Entry {
	return Describe(s.current.Load().byGroup[group], s.broker())
}

// Groups lists the groups with overrides, sorted.
func (s *Store) Groups() []string {
	cur := s.current.Load()
	out := make([]string, 0, len(cur.byGroup))
	for g := range cur.byGroup {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}

// Check checks what the group's overrides would be (Check, against this
// broker's config) and returns them normalized.
func (s *Store) Check(group string, next map[string]string) (map[string]string, error) {
	if group == "" {
		return nil, &Error{Code: kerr.InvalidRequest, Msg: "Group name must not be empty"}
	}
	return Check(next, s.broker())
}

// proposeTimeout bounds the wait for a change to commit.
const proposeTimeout = 30 * time.Second

// Set replaces the group's overrides (checked with Check first); empty
// configs delete them. It blocks until the change is applied on this
// node: call it off the event loop. Errors: Check's refusals;
// NOT_CONTROLLER on a follower; REQUEST_TIMED_OUT when the outcome is
// unknown (the change may or may not be applied).
func (s *Store) Set(group string, configs map[string]string) error {
	next, err := s.Check(group, configs)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), proposeTimeout)
	defer cancel()
	_, err = replication.ProposeWait[error](ctx, s.repl, replKey, &setCmd{Group: group, Configs: next})
	switch {
	case errors.Is(err, replication.ErrNotLeader):
		return fmt.Errorf("%w: this broker is not the cluster leader (the controller): %v", kerr.NotController, err)
	case errors.Is(err, replication.ErrOutcomeUnknown):
		return fmt.Errorf("%w: group config change may or may not be applied: %v", kerr.RequestTimedOut, err)
	}
	return err
}

// Apply implements replication.Applier, on every node in commit order. The
// configs are parsed again (names, types, own bounds: alike on every
// node); it returns nil or the refusal.
func (s *Store) Apply(cmd replication.Command) any {
	c, ok := cmd.(*setCmd)
	if !ok {
		return fmt.Errorf("groupconfig: unexpected command %T", cmd)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.reg.Closed() {
		return fmt.Errorf("%w: group config store is closed", kerr.KafkaStorageError)
	}
	cfg, err := parseAll(c.Configs)
	if err != nil {
		return err
	}
	cur := s.current.Load()
	next := make(map[string]map[string]string, len(cur.byGroup)+1)
	for g, m := range cur.byGroup {
		if g != c.Group {
			next[g] = m
		}
	}
	if len(cfg) > 0 {
		next[c.Group] = cfg
	}
	if err := save(s.path, next); err != nil {
		s.log.Error("persist group configs", "err", err)
		return replication.MarkLocal(fmt.Errorf("%w: persist group configs: %v", kerr.KafkaStorageError, err))
	}
	s.current.Store(newOverrides(next))
	s.log.Info("group configs changed", "group", c.Group, "configs", cfg)
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
		cur, err := load(s.path)
		if err != nil {
			return fmt.Errorf("reopen group configs: %w", err)
		}
		s.current.Store(cur)
		return nil
	})
}

// Op is one IncrementalAlterConfigs operation on a group.
type Op struct {
	Key   string
	Value *string
	Op    int8 // 0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT
}

// Incremental applies ops to cur and returns the new overrides (cur is
// not modified). No group key is a list, so APPEND and SUBTRACT are
// refused as Kafka refuses them; values are checked later (Check).
func Incremental(cur map[string]string, ops []Op) (map[string]string, error) {
	next := maps.Clone(cur)
	if next == nil {
		next = map[string]string{}
	}
	seen := map[string]bool{}
	for _, op := range ops {
		if seen[op.Key] {
			return nil, &Error{Code: kerr.InvalidRequest, Msg: "Error due to duplicate config keys"}
		}
		seen[op.Key] = true
		if _, ok := Lookup(op.Key); !ok {
			return nil, invalid("Unknown group config name: %s", op.Key)
		}
		switch op.Op {
		case 0:
			if op.Value == nil {
				return nil, invalid("Null value not supported for : %s", op.Key)
			}
			next[op.Key] = *op.Value
		case 1:
			delete(next, op.Key)
		case 2, 3:
			return nil, invalid("Config value append is not allowed for config key: %s", op.Key)
		default:
			return nil, &Error{Code: kerr.InvalidRequest, Msg: fmt.Sprintf("unknown config operation %d for %s", op.Op, op.Key)}
		}
	}
	return next, nil
}
