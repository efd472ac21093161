package topics

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/regent-broker/regent/storage/logconfig"
)

func open(t *testing.T, dir string) *Registry {
	t.Helper()
	r, err := Open(Options{DataDir: dir, Root: actor.NewActorSystem().Root})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRegistryPersistsTopics(t *testing.T) {
	dir := t.TempDir()
	r := open(t, dir)
	ten := "10000"
	if _, err := r.Create(CreateSpec{Name: "a", Partitions: 3, ReplicationFactor: 1, Configs: map[string]*string{"retention.ms": &ten}}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Create(CreateSpec{Name: "a", Partitions: 1, ReplicationFactor: 1}); !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatalf("duplicate: %v", err)
	}
	if _, err := r.Create(CreateSpec{Name: "a_b", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Create(CreateSpec{Name: "a.b", Partitions: 1, ReplicationFactor: 1}); !errors.Is(err, kerr.InvalidTopicException) {
		t.Fatalf("'.'/'_' collision: %v", err)
	}
	if _, err := r.Create(CreateSpec{Name: "bad/name", Partitions: 1, ReplicationFactor: 1}); !errors.Is(err, kerr.InvalidTopicException) {
		t.Fatalf("bad name: %v", err)
	}
	if _, err := r.Create(CreateSpec{Name: "v", Partitions: 2, ReplicationFactor: 1, ValidateOnly: true}); err != nil || r.Get("v") != nil {
		t.Fatalf("validate only: %v", err)
	}
	if err := r.AddPartitions("a", 5, nil, false); err != nil {
		t.Fatal(err)
	}
	if err := r.AddPartitions("a", 2, nil, false); !errors.Is(err, kerr.InvalidPartitions) {
		t.Fatalf("shrink: %v", err)
	}
	if err := r.Delete("a_b"); err != nil {
		t.Fatal(err)
	}
	if err := r.SetBroker(logconfig.Broker{Overrides: map[string]string{"log.retention.ms": "5000"}}); err != nil {
		t.Fatal(err)
	}
	id := r.Get("a").ID
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}

	r2 := open(t, dir)
	defer r2.Close()
	a := r2.Get("a")
	if a == nil || a.ID != id || len(a.Partitions) != 5 || a.Config.RetentionMs != 10000 {
		t.Fatalf("reopened topic: %+v", a)
	}
	if r2.Get("a_b") != nil {
		t.Fatal("deleted topic came back")
	}
	if r2.Broker().Overrides["log.retention.ms"] != "5000" {
		t.Fatalf("altered broker config lost: %v", r2.Broker().Overrides)
	}
}

// TestFailedCreateLeavesNothing: a create whose partition 3 cannot be
// opened (a file sits where its directory goes) fails with
// KAFKA_STORAGE_ERROR, removes the partitions it had opened, leaves the
// foreign file alone, and leaves the registry and topics.json without the
// topic; the same create succeeds once the obstacle is gone. Growing a
// topic fails and cleans up the same way.
func TestFailedCreateLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	r := open(t, dir)
	defer r.Close()
	obstacle := filepath.Join(dir, "f-3")
	if err := os.WriteFile(obstacle, []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Create(CreateSpec{Name: "f", Partitions: 6, ReplicationFactor: 1}); !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("create over an obstacle: %v", err)
	}
	if r.Get("f") != nil {
		t.Fatal("failed create registered the topic")
	}
	leftovers := func() []string {
		t.Helper()
		m, err := filepath.Glob(filepath.Join(dir, "f-*"))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if got := leftovers(); len(got) != 1 || got[0] != obstacle {
		t.Fatalf("failed create left %v (want only the foreign %s)", got, obstacle)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "meta", metaFile))
	if err == nil && strings.Contains(string(raw), `"f"`) {
		t.Fatalf("failed create persisted the topic: %s", raw)
	}
	if err := os.Remove(obstacle); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Create(CreateSpec{Name: "f", Partitions: 3, ReplicationFactor: 1}); err != nil {
		t.Fatalf("create after the obstacle is gone: %v", err)
	}
	if err := os.WriteFile(obstacle, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.AddPartitions("f", 6, nil, false); !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("grow over an obstacle: %v", err)
	}
	if got := len(r.Get("f").Partitions); got != 3 {
		t.Fatalf("failed growth changed the topic to %d partitions", got)
	}
	if got := leftovers(); len(got) != 4 {
		t.Fatalf("failed growth left %v (want f-0..f-2 and the obstacle)", got)
	}
}

// Broker configs given at start stay the command line's: only values set
// at runtime are saved, so a restart with another command line takes its
// values, and keeps the runtime ones.
func TestBrokerStartValuesNotSaved(t *testing.T) {
	dir := t.TempDir()
	openWith := func(static map[string]string) *Registry {
		r, err := Open(Options{DataDir: dir, Root: actor.NewActorSystem().Root, Broker: logconfig.Broker{Overrides: static}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r := openWith(map[string]string{"log.retention.ms": "7200000"})
	b := r.Broker()
	next := logconfig.Broker{Overrides: map[string]string{"log.retention.ms": "7200000", "log.segment.bytes": "2000000"}, Static: b.Static}
	if err := r.SetBroker(next); err != nil {
		t.Fatal(err)
	}
	if d := r.Broker().Dynamic(); len(d) != 1 || d["log.segment.bytes"] != "2000000" {
		t.Fatalf("runtime values: %v", d)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r = openWith(map[string]string{"log.retention.ms": "100"})
	defer r.Close()
	o := r.Broker().Overrides
	if o["log.retention.ms"] != "100" || o["log.segment.bytes"] != "2000000" {
		t.Fatalf("after a restart with another command line: %v", o)
	}
}

// Replica assignments given at creation and at growth are kept (across a
// restart too) and order the voters reported for each partition; the
// partitions created without one report the voters as they are.
func TestAssignmentsOrderReplicas(t *testing.T) {
	dir := t.TempDir()
	r := open(t, dir)
	if _, err := r.Create(CreateSpec{Name: "a", Partitions: 2, ReplicationFactor: 1, Assignments: [][]int32{{3, 2, 1}, {2}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Create(CreateSpec{Name: "b", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	if err := r.AddPartitions("b", 3, [][]int32{{2, 1, 3}, {3, 1, 2}}, false); err != nil {
		t.Fatal(err)
	}
	voters := []int32{1, 2, 3}
	check := func(r *Registry) {
		t.Helper()
		for _, c := range []struct {
			topic string
			p     int32
			want  []int32
		}{
			{"a", 0, []int32{3, 2, 1}},
			{"a", 1, []int32{2, 1, 3}}, // named first, then the other voters
			{"b", 0, []int32{1, 2, 3}}, // created without one
			{"b", 1, []int32{2, 1, 3}},
			{"b", 2, []int32{3, 1, 2}},
		} {
			if got := r.Get(c.topic).ReplicaOrder(c.p, voters); !slices.Equal(got, c.want) {
				t.Errorf("%s-%d: replicas %v, want %v", c.topic, c.p, got, c.want)
			}
		}
		// A broker no longer a voter is left out.
		if got := r.Get("a").ReplicaOrder(0, []int32{1, 2}); !slices.Equal(got, []int32{2, 1}) {
			t.Errorf("a-0 with voters 1, 2: %v", got)
		}
	}
	check(r)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r = open(t, dir)
	defer r.Close()
	check(r)
}

// TestReassignReordersReplicas: Reassign replaces the named partitions'
// replica lists (others keep theirs, or none), across a reopen; an
// unknown topic or partition is refused and changes nothing.
func TestReassignReordersReplicas(t *testing.T) {
	dir := t.TempDir()
	r := open(t, dir)
	if _, err := r.Create(CreateSpec{Name: "a", Partitions: 3, ReplicationFactor: 1, Assignments: [][]int32{{3, 2, 1}}}); err != nil {
		t.Fatal(err)
	}
	if err := r.Reassign("a", map[int32][]int32{2: {2, 3, 1}, 0: {1, 3, 2}}); err != nil {
		t.Fatal(err)
	}
	if err := r.Reassign("a", map[int32][]int32{3: {1, 2, 3}}); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("partition 3 of 3: %v", err)
	}
	if err := r.Reassign("nope", map[int32][]int32{0: {1, 2, 3}}); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("unknown topic: %v", err)
	}
	voters := []int32{1, 2, 3}
	check := func(r *Registry) {
		t.Helper()
		want := [][]int32{{1, 3, 2}, {1, 2, 3}, {2, 3, 1}}
		for p, w := range want {
			if got := r.Get("a").ReplicaOrder(int32(p), voters); !slices.Equal(got, w) {
				t.Errorf("a-%d: replicas %v, want %v", p, got, w)
			}
		}
	}
	check(r)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r = open(t, dir)
	defer r.Close()
	check(r)
}
