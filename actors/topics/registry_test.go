package topics

import (
	"errors"
	"os"
	"path/filepath"
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
	if err := r.AddPartitions("a", 5, false); err != nil {
		t.Fatal(err)
	}
	if err := r.AddPartitions("a", 2, false); !errors.Is(err, kerr.InvalidPartitions) {
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
	if err := r.AddPartitions("f", 6, false); !errors.Is(err, kerr.KafkaStorageError) {
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
