// Package topics is the broker's topic registry: which topics exist, their
// ids, configs and partitions. Readers take lock-free snapshots. A change is
// validated by the proposer, proposed to the replicator as a command and
// applied by Apply on every node in commit order; Apply persists the result
// before publishing it.
package topics

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/regent-broker/regent/actors/internal/logevery"
	"github.com/regent-broker/regent/actors/partition"
	"github.com/regent-broker/regent/actors/replication"
	"github.com/regent-broker/regent/storage"
	"github.com/regent-broker/regent/storage/atomicfile"
	"github.com/regent-broker/regent/storage/logconfig"
)

// Topic is an immutable view of one topic; a change publishes a new Topic.
type Topic struct {
	Name       string
	ID         [16]byte
	Configs    map[string]string // topic-level overrides only
	Config     logconfig.Config  // resolved against the broker's config
	Partitions []*partition.Partition
	// Assignments are the replica lists a client gave for partitions it
	// created (CreateTopics or CreatePartitions with an assignment), by
	// partition; nil or short: none given. Every partition is replicated to
	// every voter whatever they say; they order the replicas reported
	// (ReplicaOrder), the first being the preferred leader a client expects.
	Assignments [][]int32
	// Groups are the raft groups holding the partitions, by partition
	// (PartitionGroup); nil or short: the metadata group, 0.
	Groups []uint8
}

// PartitionGroup is the raft group that orders partition p's writes: 0,
// the metadata group, unless the cluster runs partition groups
// (--raft-groups) and placed p on one when it was created.
func (t *Topic) PartitionGroup(p int32) uint8 {
	if p < 0 || int(p) >= len(t.Groups) {
		return 0
	}
	return t.Groups[p]
}

// ReplicaOrder orders voters for partition p: the replicas its assignment
// named that are voters, in the order given, then the other voters in the
// order of voters (they hold the partition too).
//
// A partition on a partition raft group is led by the group's leader,
// whose preferred node (PreferredLeader) comes first whatever an
// assignment said: it is the node the group's leadership goes back to.
func (t *Topic) ReplicaOrder(p int32, voters []int32) []int32 {
	var first []int32
	if g := t.PartitionGroup(p); g > 0 {
		if l := PreferredLeader(g, voters); l >= 0 {
			first = []int32{l}
		}
	}
	if (int(p) >= len(t.Assignments) || len(t.Assignments[p]) == 0) && first == nil {
		return voters
	}
	out := make([]int32, 0, len(voters))
	var given []int32
	if int(p) < len(t.Assignments) {
		given = t.Assignments[p]
	}
	for _, b := range slices.Concat(first, given) {
		if slices.Contains(voters, b) && !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	for _, b := range voters {
		if !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	return out
}

// Registry owns the set of topics.
type Registry struct {
	dataDir string
	root    *actor.RootContext
	sync    partition.SyncPolicy
	repl    replication.Replicator
	voters  func() int
	logger  *slog.Logger
	// groups is Options.Groups (nil: none).
	groups *PartitionGroups
	// producers bounds the producer state of every partition; nil: none.
	producers *partition.ProducerBudget
	// maxPartitions is Options.MaxPartitions; refusedLog spaces the
	// warnings about creations over it (limits.go).
	maxPartitions int
	refusedLog    logevery.Limiter
	// base is Options.Broker, the command line's broker configs, under
	// which the saved ones are merged when the registry (re)loads.
	base logconfig.Broker

	// snapshot holds the current map[string]*Topic; replaced, never mutated.
	snapshot atomic.Pointer[snapshot]

	// broker is the broker-level config; read lock-free (the event loop
	// reads it), replaced under mu.
	broker atomic.Pointer[logconfig.Broker]
	// onBroker is OnBrokerChange's callback (nil: none); set once at
	// start, called on the applying goroutine.
	onBroker atomic.Pointer[func(logconfig.Broker)]
	// onDelete is OnDelete's callback (nil: none); set once at open.
	onDelete atomic.Pointer[func(name string)]

	// mu serializes changes. Apply holds it for the whole mutation (on the
	// proposer's goroutine with replication.Local, on the raft FSM goroutine
	// otherwise); proposers hold it only while validating and never across
	// Propose, since Local applies inline and Apply would deadlock on it.
	mu struct {
		sync.Mutex
		broker logconfig.Broker
		closed bool // Close ran: Apply refuses, partitions are gone
	}
}

type snapshot struct {
	byName map[string]*Topic
	byID   map[[16]byte]*Topic
}

// Options configures the registry.
type Options struct {
	DataDir string
	Root    *actor.RootContext
	Sync    partition.SyncPolicy
	// Repl orders topic and partition state changes; nil: a Local one.
	Repl   replication.Replicator
	Broker logconfig.Broker
	Logger *slog.Logger
	// Voters is the number of voters in the cluster, which bounds the
	// replication factor and min.insync.replicas; nil means one (a single
	// node).
	Voters func() int
	// Groups places new partitions on partition raft groups (nil or
	// Count 0: every partition is ordered by Repl, the metadata group).
	Groups *PartitionGroups
	// Producers bounds the producer state every partition holds
	// together; nil: no bound.
	Producers *partition.ProducerBudget
	// MaxPartitions bounds the partitions of all topics together
	// (limits.go); 0: no bound.
	MaxPartitions int
}

// Error is a topic operation's Kafka error with a message.
type Error struct {
	Code *kerr.Error
	Msg  string
}

func (e *Error) Error() string { return e.Msg }
func (e *Error) Unwrap() error { return e.Code }

func errf(code *kerr.Error, format string, args ...any) error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// metaFile is where topic definitions are persisted; brokerFile holds the
// broker configs altered at runtime.
const (
	metaFile   = "topics.json"
	brokerFile = "broker-configs.json"
)

type persistedTopic struct {
	Name        string            `json:"name"`
	ID          [16]byte          `json:"id"`
	Partitions  int32             `json:"partitions"`
	Configs     map[string]string `json:"configs,omitempty"`
	Assignments [][]int32         `json:"assignments,omitempty"`
	Groups      []uint8           `json:"groups,omitempty"`
}

// Open loads persisted topics, opens their partitions and registers the
// registry as the replicator's applier for topic changes.
func Open(o Options) (*Registry, error) {
	r := &Registry{dataDir: o.DataDir, root: o.Root, sync: o.Sync, repl: o.Repl, voters: o.Voters, logger: o.Logger, base: o.Broker, producers: o.Producers, maxPartitions: o.MaxPartitions, groups: o.Groups}
	// The command line's values are what DescribeConfigs calls static.
	r.base.Static = r.base.Overrides
	if r.repl == nil {
		r.repl = replication.NewLocal()
	}
	if r.logger == nil {
		r.logger = slog.Default()
	}
	broker, snap, err := r.load()
	if err != nil {
		return nil, err
	}
	r.mu.broker = broker
	r.broker.Store(&broker)
	r.snapshot.Store(snap)
	// Registered last: a committed change must find the loaded state.
	r.repl.Register(replKey, r)
	return r, nil
}

// load reads the broker configs and the topics from the data directory
// and opens every partition; on error the partitions it opened are closed.
func (r *Registry) load() (logconfig.Broker, *snapshot, error) {
	broker := r.base
	// Configs altered at runtime (AlterConfigs on the broker) were saved
	// and override the command line's.
	if raw, err := os.ReadFile(filepath.Join(r.dataDir, "meta", brokerFile)); err == nil {
		var saved map[string]string
		if err := json.Unmarshal(raw, &saved); err != nil {
			return broker, nil, fmt.Errorf("parse %s: %w", brokerFile, err)
		}
		merged := logconfig.Broker{Overrides: map[string]string{}, Static: r.base.Overrides}
		for k, v := range r.base.Overrides {
			merged.Overrides[k] = v
		}
		for k, v := range saved {
			merged.Overrides[k] = v
		}
		broker = merged
	}
	if err := os.MkdirAll(filepath.Join(r.dataDir, "meta"), 0o755); err != nil {
		return broker, nil, fmt.Errorf("create meta dir: %w", err)
	}
	snap := &snapshot{byName: map[string]*Topic{}, byID: map[[16]byte]*Topic{}}
	raw, err := os.ReadFile(filepath.Join(r.dataDir, "meta", metaFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return broker, nil, fmt.Errorf("read topics: %w", err)
	}
	if err == nil {
		var pts []persistedTopic
		if err := json.Unmarshal(raw, &pts); err != nil {
			return broker, nil, fmt.Errorf("parse %s: %w", metaFile, err)
		}
		for _, pt := range pts {
			cfg, err := logconfig.Resolve(pt.Configs, broker)
			if err != nil {
				closePartitions(snap)
				return broker, nil, fmt.Errorf("topic %s config: %w", pt.Name, err)
			}
			t := &Topic{Name: pt.Name, ID: pt.ID, Configs: pt.Configs, Config: cfg, Assignments: pt.Assignments, Groups: pt.Groups}
			// Published before its partitions open, so that a failure
			// below closes those already open.
			snap.byName[t.Name] = t
			snap.byID[t.ID] = t
			for i := int32(0); i < pt.Partitions; i++ {
				p, err := r.openPartition(t, i)
				if err != nil {
					closePartitions(snap)
					return broker, nil, err
				}
				t.Partitions = append(t.Partitions, p)
			}
		}
	}
	return broker, snap, nil
}

// closePartitions closes every partition of s (a load that failed).
func closePartitions(s *snapshot) {
	for _, t := range s.byName {
		for _, p := range t.Partitions {
			_ = p.Close(false)
		}
	}
}

// Reopen reloads a closed registry from its data directory in place: the
// broker configs, the topics and their partitions (new partition actors,
// registered with the replicator), then registers the registry again. A
// raft node calls it after Close and a snapshot restore rewrote the
// directory, so that everything holding this *Registry sees the restored
// topics. It must run where no topic change is applied (the raft FSM
// goroutine, inside the restore). Until it returns, readers see the
// topics as they were at Close, with closed partitions (their reads fail
// with storage.ErrClosed; a follower serves none). On error the registry
// stays closed.
func (r *Registry) Reopen() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.mu.closed {
		return errors.New("topics: reopen of an open registry")
	}
	broker, snap, err := r.load()
	if err != nil {
		return fmt.Errorf("reopen topics: %w", err)
	}
	r.mu.broker = broker
	r.broker.Store(&broker)
	r.snapshot.Store(snap)
	r.mu.closed = false
	r.repl.Register(replKey, r)
	return nil
}

// partitionDir is where partition i of t keeps its log: in the state
// directory, or for a partition group's partition in that group's, under
// the topic id (a deleted topic's directory, which the group's snapshot
// may bring back at a restart, is never opened as a new topic's).
func (r *Registry) partitionDir(t *Topic, i int32) string {
	name := fmt.Sprintf("%s-%d", t.Name, i)
	if g := t.PartitionGroup(i); g > 0 {
		return filepath.Join(r.groups.Dir(g), hex.EncodeToString(t.ID[:]), name)
	}
	return filepath.Join(r.dataDir, name)
}

func (r *Registry) openPartition(t *Topic, i int32) (*partition.Partition, error) {
	o := partition.Options{
		Dir:    r.partitionDir(t, i),
		Topic:  t.Name,
		Index:  i,
		Config: t.Config,
		Sync:   r.sync,
		Repl:   r.repl,
		Logger: r.logger,
		Budget: r.producers,
	}
	if g := t.PartitionGroup(i); g > 0 {
		if r.groups == nil || int(g) > r.groups.Count {
			return nil, fmt.Errorf("partition %s-%d is in raft group %d, and this node runs %d partition groups (--raft-groups must be the same on every node)", t.Name, i, g, r.groups.count())
		}
		o.Repl = r.groups.Repl(g)
		o.ReplKey = fmt.Sprintf("partition/%s/%x/%d", t.Name, t.ID, i)
	}
	return partition.Open(r.root, o)
}

// Get returns the topic by name, or nil.
func (r *Registry) Get(name string) *Topic { return r.snapshot.Load().byName[name] }

// GetByID returns the topic by id, or nil.
func (r *Registry) GetByID(id [16]byte) *Topic { return r.snapshot.Load().byID[id] }

// List returns every topic sorted by name.
func (r *Registry) List() []*Topic {
	s := r.snapshot.Load()
	out := make([]*Topic, 0, len(s.byName))
	for _, t := range s.byName {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Partition returns one partition, or nil.
func (r *Registry) Partition(topic string, idx int32) *partition.Partition {
	t := r.Get(topic)
	if t == nil || idx < 0 || int(idx) >= len(t.Partitions) {
		return nil
	}
	return t.Partitions[idx]
}

// Broker returns the broker-level config.
func (r *Registry) Broker() logconfig.Broker { return *r.broker.Load() }

// OnBrokerChange calls fn with the broker configs now and after every
// change applied (on every node of a cluster); fn must not block. Under
// r.mu, as applies are, so fn never sees an older config after a newer.
func (r *Registry) OnBrokerChange(fn func(logconfig.Broker)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.onBroker.Store(&fn)
	fn(r.Broker())
}

// OnDelete has fn called with a topic's name on every node that applies
// its deletion, inside Apply (fn must not block or call the registry):
// coordinators spread over the nodes drop the topic's committed offsets
// wherever they are active.
func (r *Registry) OnDelete(fn func(name string)) { r.onDelete.Store(&fn) }

// ValidateName applies Kafka's topic-name rules.
func ValidateName(name string) error {
	if name == "" {
		return errf(kerr.InvalidTopicException, "topic name is empty")
	}
	if name == "." || name == ".." {
		return errf(kerr.InvalidTopicException, "topic name cannot be %q", name)
	}
	if len(name) > 249 {
		return errf(kerr.InvalidTopicException, "topic name is longer than 249 characters")
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return errf(kerr.InvalidTopicException, "topic name %q contains a character other than ASCII alphanumerics, '.', '_' and '-'", name)
		}
	}
	return nil
}

// CreateSpec describes a topic to create.
type CreateSpec struct {
	Name              string
	Partitions        int32 // -1: num.partitions
	ReplicationFactor int16 // -1: default.replication.factor
	Configs           map[string]*string
	ValidateOnly      bool
	// Assignments are the replica lists given, by partition (nil: none);
	// the caller has checked them (see Topic.Assignments).
	Assignments [][]int32
}

// maxPartitions bounds a topic's partition count.
const maxPartitions = 100000

// proposeTimeout bounds the wait for a change to be committed and applied
// (a variable so tests can shorten it).
var proposeTimeout = 30 * time.Second

// MaxReplicationFactor is the number of voters (Options.Voters; one when
// unset or when it reports fewer than one).
func (r *Registry) MaxReplicationFactor() int {
	if r.voters == nil {
		return 1
	}
	if n := r.voters(); n > 0 {
		return n
	}
	return 1
}

// Create creates a topic; with ValidateOnly it only checks.
func (r *Registry) Create(spec CreateSpec) (*Topic, error) {
	if err := ValidateName(spec.Name); err != nil {
		return nil, err
	}
	t, parts, err := r.validateCreate(spec)
	if err != nil {
		return nil, err
	}
	if spec.ValidateOnly {
		t.Partitions = make([]*partition.Partition, parts)
		return t, nil
	}
	cmd := &createCmd{Name: spec.Name, Partitions: parts, Configs: t.Configs, Assignments: spec.Assignments}
	// The id is chosen here, not in Apply, so that every node agrees on it.
	if _, err := rand.Read(cmd.ID[:]); err != nil {
		return nil, fmt.Errorf("topic id: %w", err)
	}
	cmd.Groups = r.groups.place(cmd.ID, 0, parts)
	res, err := r.propose(cmd)
	if err != nil {
		return nil, err
	}
	created, ok := res.(*Topic)
	if !ok {
		return nil, fmt.Errorf("create topic %s: unexpected apply result %T", spec.Name, res)
	}
	return created, nil
}

// validateCreate checks spec against the current state and returns the
// topic it would create (without partitions or id) and its partition count.
func (r *Registry) validateCreate(spec CreateSpec) (*Topic, int32, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Get(spec.Name) != nil {
		return nil, 0, errf(kerr.TopicAlreadyExists, "topic '%s' already exists", spec.Name)
	}
	if collide := r.collision(spec.Name); collide != "" {
		return nil, 0, collisionErr(spec.Name, collide)
	}
	parts := spec.Partitions
	if parts == -1 {
		parts = NumPartitions(r.mu.broker)
	}
	if err := checkPartitionCount(parts); err != nil {
		return nil, 0, err
	}
	if err := r.checkRoom(parts); err != nil {
		return nil, 0, err
	}
	rf := spec.ReplicationFactor
	if rf == -1 {
		rf = 1
	}
	if voters := r.MaxReplicationFactor(); rf <= 0 || int(rf) > voters {
		return nil, 0, errf(kerr.InvalidReplicationFactor, "replication factor %d: must be between 1 and the number of voters (%d)", rf, voters)
	}
	if err := logconfig.Validate(spec.Configs); err != nil {
		return nil, 0, errf(kerr.InvalidConfig, "%s", err.Error())
	}
	configs := map[string]string{}
	for k, v := range spec.Configs {
		if v != nil {
			configs[k] = *v
		}
	}
	cfg, err := logconfig.Resolve(configs, r.mu.broker)
	if err != nil {
		return nil, 0, errf(kerr.InvalidConfig, "%s", err.Error())
	}
	if err := r.checkMinISR(cfg); err != nil {
		return nil, 0, err
	}
	return &Topic{Name: spec.Name, Configs: configs, Config: cfg}, parts, nil
}

func checkPartitionCount(parts int32) error {
	if parts <= 0 {
		return errf(kerr.InvalidPartitions, "number of partitions must be larger than 0")
	}
	if parts > maxPartitions {
		return errf(kerr.InvalidPartitions, "number of partitions %d is more than this broker allows (%d)", parts, maxPartitions)
	}
	return nil
}

func collisionErr(name, collide string) error {
	return errf(kerr.InvalidTopicException, "topic '%s' collides with existing topic '%s' ('.' and '_' are interchangeable in metric names)", name, collide)
}

// checkMinISR bounds min.insync.replicas by the voters. Only proposers call
// it: the voter count is not part of the replicated state, so Apply must
// not depend on it.
func (r *Registry) checkMinISR(cfg logconfig.Config) error {
	if voters := r.MaxReplicationFactor(); int(cfg.MinInsyncReplicas) > voters {
		return errf(kerr.InvalidConfig, "min.insync.replicas=%d is more than the number of voters (%d)", cfg.MinInsyncReplicas, voters)
	}
	return nil
}

// collision finds an existing topic whose name differs only in '.' vs '_'.
func (r *Registry) collision(name string) string {
	norm := strings.ReplaceAll(name, ".", "_")
	for n := range r.snapshot.Load().byName {
		if n != name && strings.ReplaceAll(n, ".", "_") == norm {
			return n
		}
	}
	return ""
}

func notExist(name string) error {
	return errf(kerr.UnknownTopicOrPartition, "topic '%s' does not exist", name)
}

// Delete removes a topic and its data.
func (r *Registry) Delete(name string) error {
	r.mu.Lock()
	t := r.Get(name)
	r.mu.Unlock()
	if t == nil {
		return notExist(name)
	}
	_, err := r.propose(&deleteCmd{Name: name, ID: t.ID})
	return err
}

// AddPartitions grows a topic to total partitions; assignments (nil: none)
// are the replica lists given for the new ones, checked by the caller.
func (r *Registry) AddPartitions(name string, total int32, assignments [][]int32, validateOnly bool) error {
	r.mu.Lock()
	t := r.Get(name)
	var err error
	if t == nil {
		err = notExist(name)
	} else if err = checkGrow(int32(len(t.Partitions)), total); err == nil {
		err = r.checkRoom(total - int32(len(t.Partitions)))
	}
	r.mu.Unlock()
	if err != nil || validateOnly {
		return err
	}
	var groups []uint8
	if placed := r.groups.place(t.ID, int32(len(t.Partitions)), total); placed != nil {
		// The existing partitions keep theirs (0 where the topic has none).
		groups = make([]uint8, len(t.Partitions), total)
		for i := range groups {
			groups[i] = t.PartitionGroup(int32(i))
		}
		groups = append(groups, placed...)
	}
	_, err = r.propose(&addPartitionsCmd{Name: name, ID: t.ID, Total: total, Assignments: assignments, Groups: groups})
	return err
}

// Reassign replaces the replica lists of partitions of a topic, by
// partition (checked by the caller: the voters, reordered): they order
// the replicas reported, as CreateTopics' assignments do.
func (r *Registry) Reassign(name string, orders map[int32][]int32) error {
	t := r.Get(name)
	if t == nil {
		return notExist(name)
	}
	cmd := &reassignCmd{Name: name, ID: t.ID}
	for _, p := range slices.Sorted(maps.Keys(orders)) {
		if p < 0 || int(p) >= len(t.Partitions) {
			return errf(kerr.UnknownTopicOrPartition, "topic '%s' has no partition %d", name, p)
		}
		cmd.Assignments = append(cmd.Assignments, partitionOrder{Partition: p, Replicas: orders[p]})
	}
	if len(cmd.Assignments) == 0 {
		return nil
	}
	_, err := r.propose(cmd)
	return err
}

func checkGrow(have, total int32) error {
	if total < have {
		return errf(kerr.InvalidPartitions, "topic currently has %d partitions, which is higher than the requested %d", have, total)
	}
	if total == have {
		return errf(kerr.InvalidPartitions, "topic already has %d partitions", have)
	}
	if total > maxPartitions {
		return errf(kerr.InvalidPartitions, "number of partitions %d is more than this broker allows (%d)", total, maxPartitions)
	}
	return nil
}

// SetConfigs replaces a topic's overrides with configs (already validated
// by the caller with logconfig.Validate or logconfig.Incremental).
func (r *Registry) SetConfigs(name string, configs map[string]string, validateOnly bool) error {
	configs = nonNil(configs)
	r.mu.Lock()
	t := r.Get(name)
	var err error
	if t == nil {
		err = notExist(name)
	} else {
		var cfg logconfig.Config
		if cfg, err = logconfig.Resolve(configs, r.mu.broker); err != nil {
			err = errf(kerr.InvalidConfig, "%s", err.Error())
		} else {
			err = r.checkMinISR(cfg)
		}
	}
	r.mu.Unlock()
	if err != nil || validateOnly {
		return err
	}
	_, err = r.propose(&setConfigsCmd{Name: name, ID: t.ID, Configs: configs})
	return err
}

// SetBroker replaces broker-level overrides and re-resolves every topic.
func (r *Registry) SetBroker(b logconfig.Broker) error {
	b.Overrides = nonNil(b.Overrides)
	if err := logconfig.CheckConnectionLimits(b.Overrides); err != nil {
		return errf(kerr.InvalidConfig, "%s", err.Error())
	}
	r.mu.Lock()
	_, err := r.resolveAll(b)
	r.mu.Unlock()
	if err != nil {
		return err
	}
	_, err = r.propose(&setBrokerCmd{Overrides: b.Overrides})
	return err
}

// resolveAll re-resolves every topic's config against b. Called with r.mu
// held.
func (r *Registry) resolveAll(b logconfig.Broker) ([]*Topic, error) {
	var changed []*Topic
	for _, t := range r.snapshot.Load().byName {
		cfg, err := logconfig.Resolve(t.Configs, b)
		if err != nil {
			return nil, errf(kerr.InvalidConfig, "%s", err.Error())
		}
		nt := *t
		nt.Config = cfg
		changed = append(changed, &nt)
	}
	return changed, nil
}

// propose commits cmd and waits for its Apply result: the value Apply
// returned, or Apply's error. r.mu must not be held (Local applies inline).
func (r *Registry) propose(cmd replication.Encodable) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), proposeTimeout)
	defer cancel()
	res, err := replication.ProposeWait[any](ctx, r.repl, replKey, cmd)
	switch {
	case errors.Is(err, replication.ErrNotLeader):
		return nil, errf(kerr.NotController, "%s: this broker is not the cluster leader (the controller); retry on the leader: %v", cmd.CommandKind(), err)
	case errors.Is(err, replication.ErrOutcomeUnknown):
		// REQUEST_TIMED_OUT tells the client the change may or may not be
		// applied, and that it may retry.
		return nil, errf(kerr.RequestTimedOut, "%s: the change may or may not be applied: %v", cmd.CommandKind(), err)
	}
	return res, err
}

// Apply implements replication.Applier: it applies a committed topic change
// and returns the created *Topic, an error, or nil. It runs on every node
// in commit order (on the proposer's goroutine with replication.Local, on the
// raft FSM goroutine otherwise) and depends only on the command and the
// replicated state, so every node reaches the same topics. It re-checks
// what may have changed since the proposer validated.
func (r *Registry) Apply(cmd replication.Command) any {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.closed {
		return errf(kerr.KafkaStorageError, "topic registry is closed")
	}
	var (
		created *Topic
		err     error
	)
	switch c := cmd.(type) {
	case *createCmd:
		created, err = r.applyCreate(c)
	case *deleteCmd:
		err = r.applyDelete(c)
	case *addPartitionsCmd:
		err = r.applyAddPartitions(c)
	case *setConfigsCmd:
		err = r.applySetConfigs(c)
	case *setBrokerCmd:
		err = r.applySetBroker(c)
	case *reassignCmd:
		err = r.applyReassign(c)
	default:
		err = fmt.Errorf("topics: unexpected command %T", cmd)
	}
	switch {
	case errors.Is(err, kerr.KafkaStorageError):
		// Unlike a refusal, a local failure is not decided alike on every
		// node: say so, for whoever finds this node's topics differ.
		r.logger.Error("apply topic change", "kind", kindOf(cmd), "err", err)
		return replication.MarkLocal(err)
	case err != nil:
		return err
	case created != nil:
		return created
	}
	return nil // not a typed nil inside the any
}

func kindOf(cmd replication.Command) string {
	if e, ok := cmd.(replication.Encodable); ok {
		return e.CommandKind()
	}
	return fmt.Sprintf("%T", cmd)
}

// current returns the topic the command names: same name and same id.
func (r *Registry) current(name string, id [16]byte) (*Topic, error) {
	t := r.Get(name)
	if t == nil || t.ID != id {
		return nil, notExist(name)
	}
	return t, nil
}

func (r *Registry) applyCreate(c *createCmd) (*Topic, error) {
	if r.Get(c.Name) != nil || r.GetByID(c.ID) != nil {
		return nil, errf(kerr.TopicAlreadyExists, "topic '%s' already exists", c.Name)
	}
	if collide := r.collision(c.Name); collide != "" {
		return nil, collisionErr(c.Name, collide)
	}
	if err := checkPartitionCount(c.Partitions); err != nil {
		return nil, err
	}
	cfg, err := logconfig.Resolve(c.Configs, r.mu.broker)
	if err != nil {
		return nil, errf(kerr.InvalidConfig, "%s", err.Error())
	}
	t := &Topic{Name: c.Name, ID: c.ID, Configs: c.Configs, Config: cfg, Assignments: c.Assignments, Groups: c.Groups}
	nw, err := r.openNew(t, 0, c.Partitions)
	if err != nil {
		return nil, err
	}
	t.Partitions = nw.parts
	if err := r.publish(func(s *snapshot) { s.byName[t.Name] = t; s.byID[t.ID] = t }); err != nil {
		nw.discard()
		return nil, err
	}
	r.logger.Info("topic created", "topic", t.Name, "partitions", c.Partitions, "configs", c.Configs)
	return t, nil
}

// newPartitions are partitions a create or a growth opened, not yet
// published.
type newPartitions struct {
	r     *Registry
	topic string
	parts []*partition.Partition
	// made are the partition directories this change created (a directory
	// already there, e.g. left by a crash, is not this change's to remove
	// unless it opened it as a partition).
	made []string
}

// openNew opens partitions [from, to) of t. On failure nothing it opened
// or created stays on disk (see discard), so a failed create leaves the
// registry and the data directory as they were. Called with r.mu held.
func (r *Registry) openNew(t *Topic, from, to int32) (*newPartitions, error) {
	nw := &newPartitions{r: r, topic: t.Name}
	for i := from; i < to; i++ {
		dir := r.partitionDir(t, i)
		if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
			nw.made = append(nw.made, dir)
		}
		p, err := r.openPartition(t, i)
		if err != nil {
			nw.discard()
			return nil, errf(kerr.KafkaStorageError, "create partition %d: %v", i, err)
		}
		nw.parts = append(nw.parts, p)
	}
	return nw, nil
}

// discard closes and removes the new partitions and every directory the
// change created.
func (nw *newPartitions) discard() {
	for _, p := range nw.parts {
		if err := p.Close(true); err != nil {
			nw.r.logger.Error("remove partition of a failed change", "topic", nw.topic, "partition", p.Index, "err", err)
		}
	}
	for _, dir := range nw.made {
		if err := os.RemoveAll(dir); err != nil {
			nw.r.logger.Error("remove partition directory of a failed change", "dir", dir, "err", err)
		}
	}
}

func (r *Registry) applyDelete(c *deleteCmd) error {
	t, err := r.current(c.Name, c.ID)
	if err != nil {
		return err
	}
	// Deleting a topic is how a full disk is given room again, and its
	// registry write comes first: it may use the disk reserve.
	if err := r.publishWith(func(s *snapshot) { delete(s.byName, t.Name); delete(s.byID, t.ID) }, "deleting topic "+t.Name); err != nil {
		return err
	}
	for _, p := range t.Partitions {
		if err := p.Close(true); err != nil {
			r.logger.Error("remove partition data", "topic", t.Name, "partition", p.Index, "err", err)
		}
	}
	r.logger.Info("topic deleted", "topic", t.Name)
	if fn := r.onDelete.Load(); fn != nil {
		(*fn)(t.Name)
	}
	return nil
}

func (r *Registry) applyAddPartitions(c *addPartitionsCmd) error {
	t, err := r.current(c.Name, c.ID)
	if err != nil {
		return err
	}
	have := int32(len(t.Partitions))
	if err := checkGrow(have, c.Total); err != nil {
		return err
	}
	nt := *t
	if c.Groups != nil {
		nt.Groups = c.Groups
	}
	nw, err := r.openNew(&nt, have, c.Total)
	if err != nil {
		return err
	}
	nt.Partitions = append(append([]*partition.Partition(nil), t.Partitions...), nw.parts...)
	if len(c.Assignments) > 0 {
		// Partitions before have, without one, get an empty list.
		as := make([][]int32, have, int(have)+len(c.Assignments))
		copy(as, t.Assignments)
		nt.Assignments = append(as, c.Assignments...)
	}
	if err := r.publish(func(s *snapshot) { s.byName[nt.Name] = &nt; s.byID[nt.ID] = &nt }); err != nil {
		nw.discard()
		return err
	}
	r.logger.Info("partitions added", "topic", nt.Name, "partitions", c.Total)
	return nil
}

func (r *Registry) applyReassign(c *reassignCmd) error {
	t, err := r.current(c.Name, c.ID)
	if err != nil {
		return err
	}
	for _, a := range c.Assignments {
		if a.Partition < 0 || int(a.Partition) >= len(t.Partitions) {
			return errf(kerr.UnknownTopicOrPartition, "topic '%s' has no partition %d", c.Name, a.Partition)
		}
	}
	nt := *t
	nt.Assignments = make([][]int32, len(t.Partitions))
	copy(nt.Assignments, t.Assignments)
	for _, a := range c.Assignments {
		nt.Assignments[a.Partition] = a.Replicas
	}
	if err := r.publish(func(s *snapshot) { s.byName[nt.Name] = &nt; s.byID[nt.ID] = &nt }); err != nil {
		return err
	}
	r.logger.Info("replicas reordered", "topic", nt.Name, "partitions", len(c.Assignments))
	return nil
}

func (r *Registry) applySetConfigs(c *setConfigsCmd) error {
	t, err := r.current(c.Name, c.ID)
	if err != nil {
		return err
	}
	cfg, err := logconfig.Resolve(c.Configs, r.mu.broker)
	if err != nil {
		return errf(kerr.InvalidConfig, "%s", err.Error())
	}
	nt := *t
	nt.Configs, nt.Config = c.Configs, cfg
	if err := r.publish(func(s *snapshot) { s.byName[nt.Name] = &nt; s.byID[nt.ID] = &nt }); err != nil {
		return err
	}
	for _, p := range nt.Partitions {
		p.SetConfig(cfg)
	}
	return nil
}

func (r *Registry) applySetBroker(c *setBrokerCmd) error {
	b := logconfig.Broker{Overrides: c.Overrides, Static: r.base.Overrides}
	changed, err := r.resolveAll(b)
	if err != nil {
		return err
	}
	if err := r.publish(func(s *snapshot) {
		for _, t := range changed {
			s.byName[t.Name] = t
			s.byID[t.ID] = t
		}
	}); err != nil {
		return err
	}
	// Only runtime values: the command line's come from the command line
	// at every start.
	raw, err := json.MarshalIndent(b.Dynamic(), "", "  ")
	if err == nil {
		err = WriteFileAtomic(filepath.Join(r.dataDir, "meta", brokerFile), raw)
	}
	if err != nil {
		return errf(kerr.KafkaStorageError, "persist broker configs: %v", err)
	}
	r.mu.broker = b
	r.broker.Store(&b)
	if fn := r.onBroker.Load(); fn != nil {
		(*fn)(b)
	}
	for _, t := range changed {
		for _, p := range t.Partitions {
			p.SetConfig(t.Config)
		}
	}
	return nil
}

// publish copies the snapshot, applies change, persists and publishes it.
// Must be called with r.mu held.
func (r *Registry) publish(change func(*snapshot)) error { return r.publishWith(change, "") }

// publishWith is publish; a change that frees space (roomFor says which)
// may use the disk reserve to persist (storage.Reserve).
func (r *Registry) publishWith(change func(*snapshot), roomFor string) error {
	old := r.snapshot.Load()
	next := &snapshot{byName: make(map[string]*Topic, len(old.byName)+1), byID: make(map[[16]byte]*Topic, len(old.byID)+1)}
	for k, v := range old.byName {
		next.byName[k] = v
	}
	for k, v := range old.byID {
		next.byID[k] = v
	}
	change(next)
	persist := func() error { return r.persist(next) }
	var err error
	if roomFor != "" {
		err = storage.CurrentReserve().WithRoom(roomFor, persist)
	} else {
		err = persist()
	}
	if err != nil {
		return errf(kerr.KafkaStorageError, "persist topics: %v", err)
	}
	r.snapshot.Store(next)
	return nil
}

func (r *Registry) persist(s *snapshot) error {
	pts := make([]persistedTopic, 0, len(s.byName))
	for _, t := range s.byName {
		pts = append(pts, persistedTopic{Name: t.Name, ID: t.ID, Partitions: int32(len(t.Partitions)), Configs: t.Configs, Assignments: t.Assignments, Groups: t.Groups})
	}
	sort.Slice(pts, func(i, j int) bool { return pts[i].Name < pts[j].Name })
	raw, err := json.MarshalIndent(pts, "", "  ")
	if err != nil {
		return err
	}
	return WriteFileAtomic(filepath.Join(r.dataDir, "meta", metaFile), raw)
}

// WriteFileAtomic writes data to path whole (see atomicfile.Write).
func WriteFileAtomic(path string, data []byte) error { return atomicfile.Write(path, data) }

// Close stops applying topic changes and closes every partition.
func (r *Registry) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.closed {
		return nil
	}
	r.mu.closed = true
	r.repl.Unregister(replKey)
	var errs []error
	for _, t := range r.snapshot.Load().byName {
		for _, p := range t.Partitions {
			if err := p.Close(false); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// ForEachPartition calls fn for every partition of every topic.
func (r *Registry) ForEachPartition(fn func(*partition.Partition)) {
	for _, t := range r.snapshot.Load().byName {
		for _, p := range t.Partitions {
			fn(p)
		}
	}
}

// ForEachPartitionOf calls fn for every partition of every topic, with
// its topic and index.
func (r *Registry) ForEachPartitionOf(fn func(t *Topic, i int32, p *partition.Partition)) {
	for _, t := range r.snapshot.Load().byName {
		for i, p := range t.Partitions {
			fn(t, int32(i), p)
		}
	}
}
