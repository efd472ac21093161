package main

import (
	"fmt"
	"slices"
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

// TestShardBudgets: the shards that take keys share the node's budgets, so
// a node leading all of them holds no more than each flag allows; the
// metrics' bounds count only those shards.
func TestShardBudgets(t *testing.T) {
	whole := shardDeps{}
	if got := whole.shareOf(100_000); got != 100_000 {
		t.Fatalf("unshared: %d", got)
	}
	six := shardDeps{budgetShare: 6}
	for _, limit := range []int{100, 100_000, 100_001} {
		got := six.shareOf(limit)
		if got*6 < limit || (got-1)*6 >= limit {
			t.Fatalf("share of %d over 6 shards: %d", limit, got)
		}
	}
	if got := six.shareOf(0); got != 0 {
		t.Fatalf("no bound stays none: %d", got)
	}

	// Seven shards: 0 (the metadata group's) and six raft groups'.
	keyed := func(n int) (gs []int) {
		for g := range 7 {
			if takesKeys(g, n) {
				gs = append(gs, g)
			}
		}
		return gs
	}
	nodes, err := cluster.OpenNodes(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	n, _ := nodes.CoordinatorShards()
	if got := keyed(n); !slices.Equal(got, []int{0}) {
		t.Fatalf("unset count: shards %v take keys", got)
	}
	if res := nodes.Apply(cluster.SetCoordinatorShards(4)); res != nil {
		t.Fatal(res)
	}
	n, _ = nodes.CoordinatorShards()
	if got := keyed(n); !slices.Equal(got, []int{1, 2, 3, 4}) {
		t.Fatalf("count 4 of 6 groups: shards %v take keys", got)
	}
}
