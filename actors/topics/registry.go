// Package topics is the broker's topic registry: which topics exist, their
// ids, configs and partitions. Readers take lock-free snapshots; changes are
// serialized by one mutex and persisted before they are published.
package topics

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/regent-broker/regent/actors/partition"
	"github.com/regent-broker/regent/cluster"
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
}

// Registry owns the set of topics.
type Registry struct {
	dataDir string
	root    *actor.RootContext
	sync    partition.SyncPolicy
	repl    cluster.Replicator
	logger  *slog.Logger

	// snapshot holds the current map[string]*Topic; replaced, never mutated.
	snapshot atomic.Pointer[snapshot]

	// broker is the broker-level config; read lock-free (the event loop
	// reads it), replaced under mu.
	broker atomic.Pointer[logconfig.Broker]

	mu struct {
		sync.Mutex // serializes changes (create, delete, alter)
		broker     logconfig.Broker
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
	Repl    cluster.Replicator // orders partition state changes; nil: a Local one
	Broker  logconfig.Broker
	Logger  *slog.Logger
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
	Name       string            `json:"name"`
	ID         [16]byte          `json:"id"`
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
}

// Open loads persisted topics and opens their partitions.
func Open(o Options) (*Registry, error) {
	r := &Registry{dataDir: o.DataDir, root: o.Root, sync: o.Sync, repl: o.Repl, logger: o.Logger}
	if r.repl == nil {
		r.repl = cluster.NewLocal()
	}
	if r.logger == nil {
		r.logger = slog.Default()
	}
	// Configs altered at runtime (AlterConfigs on the broker) were saved
	// and override the command line's.
	if raw, err := os.ReadFile(filepath.Join(o.DataDir, "meta", brokerFile)); err == nil {
		var saved map[string]string
		if err := json.Unmarshal(raw, &saved); err != nil {
			return nil, fmt.Errorf("parse %s: %w", brokerFile, err)
		}
		merged := logconfig.Broker{Overrides: map[string]string{}}
		for k, v := range o.Broker.Overrides {
			merged.Overrides[k] = v
		}
		for k, v := range saved {
			merged.Overrides[k] = v
		}
		o.Broker = merged
	}
	r.mu.broker = o.Broker
	r.broker.Store(&o.Broker)
	if err := os.MkdirAll(filepath.Join(o.DataDir, "meta"), 0o755); err != nil {
		return nil, fmt.Errorf("create meta dir: %w", err)
	}
	snap := &snapshot{byName: map[string]*Topic{}, byID: map[[16]byte]*Topic{}}
	raw, err := os.ReadFile(filepath.Join(o.DataDir, "meta", metaFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read topics: %w", err)
	}
	if err == nil {
		var pts []persistedTopic
		if err := json.Unmarshal(raw, &pts); err != nil {
			return nil, fmt.Errorf("parse %s: %w", metaFile, err)
		}
		for _, pt := range pts {
			cfg, err := logconfig.Resolve(pt.Configs, o.Broker)
			if err != nil {
				return nil, fmt.Errorf("topic %s config: %w", pt.Name, err)
			}
			t := &Topic{Name: pt.Name, ID: pt.ID, Configs: pt.Configs, Config: cfg}
			for i := int32(0); i < pt.Partitions; i++ {
				p, err := r.openPartition(t, i)
				if err != nil {
					return nil, err
				}
				t.Partitions = append(t.Partitions, p)
			}
			snap.byName[t.Name] = t
			snap.byID[t.ID] = t
		}
	}
	r.snapshot.Store(snap)
	return r, nil
}

func (r *Registry) openPartition(t *Topic, i int32) (*partition.Partition, error) {
	return partition.Open(r.root, partition.Options{
		Dir:    filepath.Join(r.dataDir, fmt.Sprintf("%s-%d", t.Name, i)),
		Topic:  t.Name,
		Index:  i,
		Config: t.Config,
		Sync:   r.sync,
		Repl:   r.repl,
		Logger: r.logger,
	})
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
}

// MaxReplicationFactor is the number of voters; one in single-node mode.
const MaxReplicationFactor = 1

// Create creates a topic; with ValidateOnly it only checks.
func (r *Registry) Create(spec CreateSpec) (*Topic, error) {
	if err := ValidateName(spec.Name); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Get(spec.Name) != nil {
		return nil, errf(kerr.TopicAlreadyExists, "topic '%s' already exists", spec.Name)
	}
	if collide := r.collision(spec.Name); collide != "" {
		return nil, errf(kerr.InvalidTopicException, "topic '%s' collides with existing topic '%s' ('.' and '_' are interchangeable in metric names)", spec.Name, collide)
	}
	parts := spec.Partitions
	if parts == -1 {
		parts = NumPartitions(r.mu.broker)
	}
	if parts <= 0 {
		return nil, errf(kerr.InvalidPartitions, "number of partitions must be larger than 0")
	}
	if parts > 100000 {
		return nil, errf(kerr.InvalidPartitions, "number of partitions %d is more than this broker allows (100000)", parts)
	}
	rf := spec.ReplicationFactor
	if rf == -1 {
		rf = 1
	}
	if rf <= 0 || rf > MaxReplicationFactor {
		return nil, errf(kerr.InvalidReplicationFactor, "replication factor %d: must be between 1 and the number of voters (%d)", rf, MaxReplicationFactor)
	}
	if err := logconfig.Validate(spec.Configs); err != nil {
		return nil, errf(kerr.InvalidConfig, "%s", err.Error())
	}
	configs := map[string]string{}
	for k, v := range spec.Configs {
		if v != nil {
			configs[k] = *v
		}
	}
	cfg, err := logconfig.Resolve(configs, r.mu.broker)
	if err != nil {
		return nil, errf(kerr.InvalidConfig, "%s", err.Error())
	}
	if err := checkMinISR(cfg); err != nil {
		return nil, err
	}
	t := &Topic{Name: spec.Name, Configs: configs, Config: cfg}
	if spec.ValidateOnly {
		t.Partitions = make([]*partition.Partition, parts)
		return t, nil
	}
	if _, err := rand.Read(t.ID[:]); err != nil {
		return nil, fmt.Errorf("topic id: %w", err)
	}
	for i := int32(0); i < parts; i++ {
		p, err := r.openPartition(t, i)
		if err != nil {
			for _, q := range t.Partitions {
				_ = q.Close(true)
			}
			return nil, errf(kerr.KafkaStorageError, "create partition %d: %v", i, err)
		}
		t.Partitions = append(t.Partitions, p)
	}
	if err := r.publish(func(s *snapshot) { s.byName[t.Name] = t; s.byID[t.ID] = t }); err != nil {
		for _, q := range t.Partitions {
			_ = q.Close(true)
		}
		return nil, err
	}
	r.logger.Info("topic created", "topic", t.Name, "partitions", parts, "configs", configs)
	return t, nil
}

func checkMinISR(cfg logconfig.Config) error {
	if cfg.MinInsyncReplicas > MaxReplicationFactor {
		return errf(kerr.InvalidConfig, "min.insync.replicas=%d is more than the number of voters (%d)", cfg.MinInsyncReplicas, MaxReplicationFactor)
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

// Delete removes a topic and its data.
func (r *Registry) Delete(name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.Get(name)
	if t == nil {
		return errf(kerr.UnknownTopicOrPartition, "topic '%s' does not exist", name)
	}
	if err := r.publish(func(s *snapshot) { delete(s.byName, name); delete(s.byID, t.ID) }); err != nil {
		return err
	}
	for _, p := range t.Partitions {
		if err := p.Close(true); err != nil {
			r.logger.Error("remove partition data", "topic", name, "partition", p.Index, "err", err)
		}
	}
	r.logger.Info("topic deleted", "topic", name)
	return nil
}

// AddPartitions grows a topic to total partitions.
func (r *Registry) AddPartitions(name string, total int32, validateOnly bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.Get(name)
	if t == nil {
		return errf(kerr.UnknownTopicOrPartition, "topic '%s' does not exist", name)
	}
	have := int32(len(t.Partitions))
	if total < have {
		return errf(kerr.InvalidPartitions, "topic currently has %d partitions, which is higher than the requested %d", have, total)
	}
	if total == have {
		return errf(kerr.InvalidPartitions, "topic already has %d partitions", have)
	}
	if total > 100000 {
		return errf(kerr.InvalidPartitions, "number of partitions %d is more than this broker allows (100000)", total)
	}
	if validateOnly {
		return nil
	}
	nt := *t
	nt.Partitions = append([]*partition.Partition(nil), t.Partitions...)
	for i := have; i < total; i++ {
		p, err := r.openPartition(&nt, i)
		if err != nil {
			for _, q := range nt.Partitions[have:] {
				_ = q.Close(true)
			}
			return errf(kerr.KafkaStorageError, "create partition %d: %v", i, err)
		}
		nt.Partitions = append(nt.Partitions, p)
	}
	return r.publish(func(s *snapshot) { s.byName[name] = &nt; s.byID[nt.ID] = &nt })
}

// SetConfigs replaces a topic's overrides with configs (already validated
// by the caller with logconfig.Validate or logconfig.Incremental).
func (r *Registry) SetConfigs(name string, configs map[string]string, validateOnly bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.Get(name)
	if t == nil {
		return errf(kerr.UnknownTopicOrPartition, "topic '%s' does not exist", name)
	}
	cfg, err := logconfig.Resolve(configs, r.mu.broker)
	if err != nil {
		return errf(kerr.InvalidConfig, "%s", err.Error())
	}
	if err := checkMinISR(cfg); err != nil {
		return err
	}
	if validateOnly {
		return nil
	}
	nt := *t
	nt.Configs, nt.Config = configs, cfg
	if err := r.publish(func(s *snapshot) { s.byName[name] = &nt; s.byID[nt.ID] = &nt }); err != nil {
		return err
	}
	for _, p := range nt.Partitions {
		p.SetConfig(cfg)
	}
	return nil
}

// SetBroker replaces broker-level overrides and re-resolves every topic.
func (r *Registry) SetBroker(b logconfig.Broker) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var changed []*Topic
	for _, t := range r.snapshot.Load().byName {
		cfg, err := logconfig.Resolve(t.Configs, b)
		if err != nil {
			return errf(kerr.InvalidConfig, "%s", err.Error())
		}
		nt := *t
		nt.Config = cfg
		changed = append(changed, &nt)
	}
	if err := r.publish(func(s *snapshot) {
		for _, t := range changed {
			s.byName[t.Name] = t
			s.byID[t.ID] = t
		}
	}); err != nil {
		return err
	}
	raw, err := json.MarshalIndent(b.Overrides, "", "  ")
	if err == nil {
		err = WriteFileAtomic(filepath.Join(r.dataDir, "meta", brokerFile), raw)
	}
	if err != nil {
		return errf(kerr.KafkaStorageError, "persist broker configs: %v", err)
	}
	r.mu.broker = b
	r.broker.Store(&b)
	for _, t := range changed {
		for _, p := range t.Partitions {
			p.SetConfig(t.Config)
		}
	}
	return nil
}

// publish copies the snapshot, applies change, persists and publishes it.
// Must be called with r.mu held.
func (r *Registry) publish(change func(*snapshot)) error {
	old := r.snapshot.Load()
	next := &snapshot{byName: make(map[string]*Topic, len(old.byName)+1), byID: make(map[[16]byte]*Topic, len(old.byID)+1)}
	for k, v := range old.byName {
		next.byName[k] = v
	}
	for k, v := range old.byID {
		next.byID[k] = v
	}
	change(next)
	if err := r.persist(next); err != nil {
		return errf(kerr.KafkaStorageError, "persist topics: %v", err)
	}
	r.snapshot.Store(next)
	return nil
}

func (r *Registry) persist(s *snapshot) error {
	pts := make([]persistedTopic, 0, len(s.byName))
	for _, t := range s.byName {
		pts = append(pts, persistedTopic{Name: t.Name, ID: t.ID, Partitions: int32(len(t.Partitions)), Configs: t.Configs})
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

// Close closes every partition.
func (r *Registry) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
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
