package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/regent-broker/regent/cluster"
)

// TestKeyShard: keys land on shards 1..n, every shard gets some of many
// keys, and a key's shard does not change.
func TestKeyShard(t *testing.T) {
	const n = 6
	per := map[uint8]int{}
	for i := range 6000 {
		k := fmt.Sprintf("group-%d", i)
		g := keyShard(k, n)
		if g < 1 || g > n {
			t.Fatalf("%s on shard %d, want 1..%d", k, g, n)
		}
		if keyShard(k, n) != g {
			t.Fatalf("%s moved", k)
		}
		per[g]++
	}
	for g := uint8(1); g <= n; g++ {
		if per[g] < 800 || per[g] > 1200 {
			t.Errorf("shard %d has %d of 6000 keys, want about 1000", g, per[g])
		}
	}
}

// TestCheckCoordinatorShards: a node with fewer raft groups than the
// cluster spreads its coordinators over refuses to start, naming the flag.
func TestCheckCoordinatorShards(t *testing.T) {
	nodes, err := cluster.OpenNodes(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := checkCoordinatorShards(nodes, 0); err != nil {
		t.Fatalf("unset count: %v", err)
	}
	if res := nodes.Apply(cluster.SetCoordinatorShards(6)); res != nil {
		t.Fatal(res)
	}
	if err := checkCoordinatorShards(nodes, 6); err != nil {
		t.Fatalf("same count: %v", err)
	}
	if err := checkCoordinatorShards(nodes, 3); err == nil || !strings.Contains(err.Error(), "--raft-groups 6") {
		t.Fatalf("fewer groups: %v", err)
	}
}
