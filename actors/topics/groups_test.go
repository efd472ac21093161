package topics

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/regent-broker/regent/actors/partition"
	"github.com/regent-broker/regent/actors/replication"
	"github.com/regent-broker/regent/storage/logconfig"
	"github.com/regent-broker/regent/storage/recordbatch"
)

// plainBatch is one record, v.
func plainBatch(t *testing.T, v string) []byte {
	t.Helper()
	now := time.Now().UnixMilli()
	b, err := recordbatch.Build(recordbatch.Header{FirstTimestamp: now, MaxTimestamp: now, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
		[]recordbatch.Record{{Value: []byte(v)}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func produceOne(t *testing.T, p *partition.Partition, v string) {
	t.Helper()
	ch := make(chan partition.ProduceResult, 1)
	p.Produce(plainBatch(t, v), -1, func(r partition.ProduceResult) { ch <- r })
	select {
	case r := <-ch:
		if r.Err != nil {
			t.Fatalf("produce %s: %v", v, r.Err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("produce %s: no answer", v)
	}
}

// TestPartitionGroupsPlaceAndReload: with partition groups, a topic's
// partitions go to consecutive groups, live in their group's directory
// under the topic id, are ordered by their group's replicator, and are
// listed with the group's preferred node first; growing the topic keeps
// the existing placement; the placement survives a reopen; ReloadGroup
// reopens one group's partitions on what its restore left (a snapshot
// installed on the running node), leaving the other groups' open.
func TestPartitionGroupsPlaceAndReload(t *testing.T) {
	root := actor.NewActorSystem().Root
	dir, groupsDir := t.TempDir(), t.TempDir()
	const count = 3
	repls := make([]*replication.Local, count)
	for i := range repls {
		repls[i] = replication.NewLocal()
	}
	pg := &PartitionGroups{
		Count: count,
		Repl:  func(g uint8) replication.Replicator { return repls[g-1] },
		Dir:   func(g uint8) string { return filepath.Join(groupsDir, strconv.Itoa(int(g))) },
	}
	opts := Options{DataDir: dir, Root: root, Groups: pg, Broker: logconfig.Broker{Overrides: map[string]string{}}}
	r, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	top, err := r.Create(CreateSpec{Name: "spread", Partitions: 4, ReplicationFactor: 1})
	if err != nil {
		t.Fatal(err)
	}
	top = r.Get("spread")
	var groups []uint8
	for p := range int32(4) {
		groups = append(groups, top.PartitionGroup(p))
	}
	for i := 1; i < len(groups); i++ {
		if want := groups[i-1]%count + 1; groups[i] != want {
			t.Fatalf("groups %v: partition %d in group %d, want the next, %d", groups, i, groups[i], want)
		}
	}
	for p, g := range groups {
		if order := top.ReplicaOrder(int32(p), []int32{3, 1, 2}); order[0] != PreferredLeader(g, []int32{1, 2, 3}) {
			t.Fatalf("partition %d (group %d): replicas %v, want group's preferred node first", p, g, order)
		}
		if _, err := os.Stat(r.partitionDir(top, int32(p))); err != nil {
			t.Fatalf("partition %d's directory: %v", p, err)
		}
	}
	for p := range int32(4) {
		produceOne(t, top.Partitions[p], "v"+strconv.Itoa(int(p)))
	}
	if err := r.AddPartitions("spread", 6, nil, false); err != nil {
		t.Fatal(err)
	}
	grown := r.Get("spread")
	for p := range int32(4) {
		if grown.PartitionGroup(p) != groups[p] {
			t.Fatalf("growing moved partition %d from group %d to %d", p, groups[p], grown.PartitionGroup(p))
		}
	}
	if g4, g3 := grown.PartitionGroup(4), grown.PartitionGroup(3); g4 != g3%count+1 || grown.PartitionGroup(5) == 0 {
		t.Fatalf("new partitions in groups %d, %d after %d", g4, grown.PartitionGroup(5), g3)
	}

	// ReloadGroup: partition 0's group is restored to an empty directory
	// (what a snapshot from before the writes would hold).
	g := groups[0]
	before := slices.Clone(grown.Partitions)
	restored := false
	err = r.ReloadGroup(g, func() error {
		restored = true
		return os.RemoveAll(pg.Dir(g))
	})
	if err != nil || !restored {
		t.Fatalf("reload group %d: %v (restore called: %v)", g, err, restored)
	}
	after := r.Get("spread")
	for p := range int32(6) {
		same := after.Partitions[p] == before[p]
		if in := after.PartitionGroup(p) == g; in == same {
			t.Fatalf("partition %d (group %d): reopened %v, want reopened only in group %d", p, after.PartitionGroup(p), !same, g)
		}
	}
	if hw := after.Partitions[0].HighWatermark(); hw != 0 {
		t.Fatalf("partition 0 after its group's restore: high watermark %d, want 0", hw)
	}
	if hw := after.Partitions[1].HighWatermark(); hw != 1 {
		t.Fatalf("partition 1 (another group): high watermark %d, want 1", hw)
	}
	produceOne(t, after.Partitions[0], "again")

	// Placement and data survive a reopen.
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r2, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r2.Close() }()
	re := r2.Get("spread")
	for p := range int32(6) {
		if re.PartitionGroup(p) != after.PartitionGroup(p) {
			t.Fatalf("partition %d: group %d after reopen, was %d", p, re.PartitionGroup(p), after.PartitionGroup(p))
		}
	}
	if hw := re.Partitions[0].HighWatermark(); hw != 1 {
		t.Fatalf("partition 0 after reopen: high watermark %d, want 1", hw)
	}
}
