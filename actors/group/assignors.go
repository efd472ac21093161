package group

// Server-side assignors for the consumer protocol: "uniform" (Kafka's
// default: balanced and sticky) and "range" (per topic, contiguous ranges
// by member id, so co-partitioned topics line up).

import (
	"slices"
	"sort"
)

const defaultAssignor = "uniform"

var assignors = map[string]func(in assignInput) map[string]assignment{
	"uniform": assignUniform,
	"range":   assignRange,
}

// assignInput is what an assignor sees: members (sorted by id) with the
// topics they subscribe to, the topics' partition counts, and the previous
// target assignment (for stickiness).
type assignInput struct {
	members    []string
	subscribed map[string][]string // member -> topic names that exist
	topics     map[string]topicMeta
	prev       map[string]assignment
}

func (in assignInput) subscribes(member, topic string) bool {
	_, ok := slices.BinarySearch(in.subscribed[member], topic)
	return ok
}

// assignRange gives, topic by topic, the subscribed members (in id order)
// contiguous ranges: the first P%M members one partition more.
func assignRange(in assignInput) map[string]assignment {
	out := map[string]assignment{}
	names := sortedTopicNames(in.topics)
	for _, name := range names {
		tm := in.topics[name]
		var subs []string
		for _, m := range in.members {
			if in.subscribes(m, name) {
				subs = append(subs, m)
			}
		}
		if len(subs) == 0 {
			continue
		}
		per, extra := int(tm.partitions)/len(subs), int(tm.partitions)%len(subs)
		p := 0
		for i, m := range subs {
			n := per
			if i < extra {
				n++
			}
			for k := 0; k < n; k++ {
				out[m] = out[m].add(tm.id, int32(p))
				p++
			}
		}
	}
	return out
}

// assignUniform spreads every subscribed partition evenly. Partitions stay
// with their previous owner while that keeps the balance; the rest go to
// the least loaded subscribed member.
func assignUniform(in assignInput) map[string]assignment {
	out := map[string]assignment{}
	counts := map[string]int{}
	type part struct {
		topic string
		p     int32
	}
	var all []part
	for _, name := range sortedTopicNames(in.topics) {
		for p := int32(0); p < in.topics[name].partitions; p++ {
			all = append(all, part{name, p})
		}
	}
	// How many partitions each member may hold if balanced over the
	// members that could take them: a member's fair share is what it would
	// get if every partition it can take were split evenly among the
	// members subscribed to it.
	share := map[string]float64{}
	for _, pt := range all {
		var n int
		for _, m := range in.members {
			if in.subscribes(m, pt.topic) {
				n++
			}
		}
		for _, m := range in.members {
			if in.subscribes(m, pt.topic) {
				share[m] += 1 / float64(n)
			}
		}
	}
	ceil := func(m string) int { return int(share[m] + 0.999999) }

	owner := map[part]string{}
	// Sticky pass: keep previous owners up to their ceiling.
	for _, m := range in.members {
		prev := in.prev[m]
		for _, pt := range all {
			if counts[m] >= ceil(m) {
				break
			}
			id := in.topics[pt.topic].id
			if prev.has(id, pt.p) && in.subscribes(m, pt.topic) {
				if _, taken := owner[pt]; !taken {
					owner[pt] = m
					counts[m]++
				}
			}
		}
	}
	// Fill: each unowned partition to the least loaded subscribed member
	// (relative to its share), ties by member id.
	for _, pt := range all {
		if _, ok := owner[pt]; ok {
			continue
		}
		best := ""
		for _, m := range in.members {
			if !in.subscribes(m, pt.topic) {
				continue
			}
			if best == "" || load(counts[m], share[m]) < load(counts[best], share[best]) {
				best = m
			}
		}
		if best != "" {
			owner[pt] = best
			counts[best]++
		}
	}
	// Balance: move partitions from members above their ceiling to
	// subscribed members below their floor.
	for changed := true; changed; {
		changed = false
		for _, pt := range all {
			m, ok := owner[pt]
			if !ok || counts[m] <= int(share[m]) {
				continue
			}
			for _, o := range in.members {
				if o != m && in.subscribes(o, pt.topic) && counts[o]+1 < counts[m] && counts[o] < ceil(o) {
					owner[pt] = o
					counts[m]--
					counts[o]++
					changed = true
					break
				}
			}
		}
	}
	for pt, m := range owner {
		out[m] = out[m].add(in.topics[pt.topic].id, pt.p)
	}
	return out
}

func load(count int, share float64) float64 {
	if share == 0 {
		return float64(count) + 1e9
	}
	return float64(count) / share
}

func sortedTopicNames(ts map[string]topicMeta) []string {
	names := make([]string, 0, len(ts))
	for n := range ts {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
