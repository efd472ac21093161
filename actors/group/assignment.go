package group

// Partition sets for the consumer protocol, keyed by topic id.

import (
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// assignment maps a topic id to its partitions, sorted and unique. A nil or
// empty assignment holds nothing; topics with no partitions are dropped.
type assignment map[[16]byte][]int32

func (a assignment) clone() assignment {
	if len(a) == 0 {
		return nil
	}
	out := make(assignment, len(a))
	for t, ps := range a {
		out[t] = slices.Clone(ps)
	}
	return out
}

func (a assignment) has(t [16]byte, p int32) bool {
	_, ok := slices.BinarySearch(a[t], p)
	return ok
}

func (a assignment) add(t [16]byte, p int32) assignment {
	if a == nil {
		a = assignment{}
	}
	ps := a[t]
	i, ok := slices.BinarySearch(ps, p)
	if !ok {
		a[t] = slices.Insert(ps, i, p)
	}
	return a
}

func (a assignment) count() int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

func (a assignment) equal(b assignment) bool {
	if a.count() != b.count() {
		return false
	}
	for t, ps := range a {
		if !slices.Equal(ps, b[t]) {
			return false
		}
	}
	return true
}

// topics returns the topic ids in a stable order.
func (a assignment) topics() [][16]byte {
	ids := slices.Collect(maps.Keys(a))
	slices.SortFunc(ids, func(x, y [16]byte) int { return slices.Compare(x[:], y[:]) })
	return ids
}

// intersect returns a ∩ b.
func (a assignment) intersect(b assignment) assignment {
	var out assignment
	for t, ps := range a {
		for _, p := range ps {
			if b.has(t, p) {
				out = out.add(t, p)
			}
		}
	}
	return out
}

// minus returns a − b.
func (a assignment) minus(b assignment) assignment {
	var out assignment
	for t, ps := range a {
		for _, p := range ps {
			if !b.has(t, p) {
				out = out.add(t, p)
			}
		}
	}
	return out
}

// union returns a ∪ b.
func (a assignment) union(b assignment) assignment {
	out := a.clone()
	for t, ps := range b {
		for _, p := range ps {
			out = out.add(t, p)
		}
	}
	return out
}

// overlaps: a and b share a partition.
func (a assignment) overlaps(b assignment) bool {
	for t, ps := range a {
		for _, p := range ps {
			if b.has(t, p) {
				return true
			}
		}
	}
	return false
}

// ownedFromRequest reads a heartbeat's owned partitions (nil: not sent).
func ownedFromRequest(ts []kmsg.ConsumerGroupHeartbeatRequestTopic) assignment {
	if ts == nil {
		return nil
	}
	out := assignment{}
	for _, t := range ts {
		for _, p := range t.Partitions {
			out = out.add(t.TopicID, p)
		}
	}
	return out
}
