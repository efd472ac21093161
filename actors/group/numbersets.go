package group

// Sets of partition (or task) numbers by key: a consumer group's
// partitions by topic id (assignment), a streams group's tasks by
// subtopology id (streamsTasks).

import (
	"maps"
	"slices"
)

// numberSets maps a key to its numbers, sorted and unique. A nil or empty
// value holds nothing; keys with no numbers are dropped.
type numberSets[K comparable] map[K][]int32

func (a numberSets[K]) clone() numberSets[K] {
	if len(a) == 0 {
		return nil
	}
	out := make(numberSets[K], len(a))
	for k, ps := range a {
		out[k] = slices.Clone(ps)
	}
	return out
}

func (a numberSets[K]) has(k K, p int32) bool {
	_, ok := slices.BinarySearch(a[k], p)
	return ok
}

// add returns a with (k, p) added (a may be nil).
func (a numberSets[K]) add(k K, p int32) numberSets[K] {
	if a == nil {
		a = numberSets[K]{}
	}
	ps := a[k]
	if i, ok := slices.BinarySearch(ps, p); !ok {
		a[k] = slices.Insert(ps, i, p)
	}
	return a
}

func (a numberSets[K]) count() int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

func (a numberSets[K]) equal(b numberSets[K]) bool {
	if a.count() != b.count() {
		return false
	}
	for k, ps := range a {
		if !slices.Equal(ps, b[k]) {
			return false
		}
	}
	return true
}

// intersect returns a ∩ b as a new value.
func (a numberSets[K]) intersect(b numberSets[K]) numberSets[K] {
	return a.filter(func(k K, p int32) bool { return b.has(k, p) })
}

// minus returns a − b as a new value.
func (a numberSets[K]) minus(b numberSets[K]) numberSets[K] {
	return a.filter(func(k K, p int32) bool { return !b.has(k, p) })
}

func (a numberSets[K]) filter(keep func(K, int32) bool) numberSets[K] {
	var out numberSets[K]
	for k, ps := range a {
		for _, p := range ps {
			if keep(k, p) {
				out = out.add(k, p)
			}
		}
	}
	return out
}

// union returns a ∪ b as a new value.
func (a numberSets[K]) union(b numberSets[K]) numberSets[K] {
	out := a.clone()
	for k, ps := range b {
		for _, p := range ps {
			out = out.add(k, p)
		}
	}
	return out
}

// overlaps: a and b share a number under the same key.
func (a numberSets[K]) overlaps(b numberSets[K]) bool {
	for k, ps := range a {
		for _, p := range ps {
			if b.has(k, p) {
				return true
			}
		}
	}
	return false
}

// keys returns the keys in the order cmp gives.
func (a numberSets[K]) keys(cmp func(x, y K) int) []K {
	ks := slices.Collect(maps.Keys(a))
	slices.SortFunc(ks, cmp)
	return ks
}
