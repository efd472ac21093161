package topics

import (
	"errors"
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
