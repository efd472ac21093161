package topics

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/regent-broker/regent/storage/logconfig"
)

// TestReopenLoadsWhatTheDirectoryHolds: a closed registry whose data
// directory was replaced (as a snapshot restore replaces it) reopens in
// place: the same *Registry lists the directory's topics, broker configs
// and partitions, and its appliers are registered again (a topic change
// and a partition's DeleteRecords both go through the replicator).
func TestReopenLoadsWhatTheDirectoryHolds(t *testing.T) {
	root := actor.NewActorSystem().Root
	dir, other := t.TempDir(), t.TempDir()
	r, err := Open(Options{DataDir: dir, Root: root, Broker: logconfig.Broker{Overrides: map[string]string{"num.partitions": "4"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Create(CreateSpec{Name: "gone", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	if err := r.Reopen(); err == nil {
		t.Fatal("reopen of an open registry succeeded")
	}
	// The state another node reached: other topics, a broker config.
	o := open(t, other)
	if _, err := o.Create(CreateSpec{Name: "kept", Partitions: 2, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	if err := o.SetBroker(logconfig.Broker{Overrides: map[string]string{"log.retention.ms": "5000"}}); err != nil {
		t.Fatal(err)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}

	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(dir, os.DirFS(other)); err != nil {
		t.Fatal(err)
	}
	if err := r.Reopen(); err != nil {
		t.Fatal(err)
	}
	if r.Get("gone") != nil {
		t.Fatal("a topic the directory no longer holds is still listed")
	}
	kept := r.Get("kept")
	if kept == nil || len(kept.Partitions) != 2 || r.Partition("kept", 1) == nil {
		t.Fatalf("reopened topic: %+v", kept)
	}
	b := r.Broker().Overrides
	if b["log.retention.ms"] != "5000" || b["num.partitions"] != "4" {
		t.Fatalf("broker configs after reopen: %v (want the saved one over the command line's)", b)
	}
	if kept.Config.RetentionMs != 5000 {
		t.Fatalf("kept's retention.ms: %d, want the saved broker config's 5000", kept.Config.RetentionMs)
	}
	// Registered again: a change applies, and so does a partition's.
	created, err := r.Create(CreateSpec{Name: "new", Partitions: -1, ReplicationFactor: 1})
	if err != nil {
		t.Fatalf("create after reopen: %v", err)
	}
	if len(created.Partitions) != 4 {
		t.Fatalf("num.partitions after reopen: %d partitions, want 4", len(created.Partitions))
	}
	done := make(chan error, 1)
	r.Partition("kept", 0).DeleteRecords(0, func(_ int64, err error) { done <- err })
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("delete records on a reopened partition: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a reopened partition did not answer")
	}
	if _, err := os.Stat(filepath.Join(dir, "gone-0")); err == nil {
		t.Fatal("the removed topic's directory came back")
	}
}
