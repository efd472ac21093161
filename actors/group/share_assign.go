package group

// The share-group assignor, with the behaviour of Kafka's share
// SimpleAssignor: every partition of a subscribed topic goes to at least
// one member subscribed to it; with fewer members than partitions each
// partition has one member and members hold balanced counts; with more
// members than partitions every member gets a partition and partitions
// are shared by balanced numbers of members. It is sticky: a partition
// stays with its previous member(s) while that keeps the balance.

import (
	"slices"
)

type sharePart struct {
	topic [16]byte
	p     int32
}

// assignShare computes the target assignment. members is sorted; subs
// gives each member's subscribed topic names; topics the existing ones;
// prev the previous target (for stickiness). Deterministic in its inputs.
func assignShare(members []string, subs map[string][]string, topics map[string]topicMeta, prev map[string]assignment) map[string]assignment {
	out := make(map[string]assignment, len(members))
	// Partitions in topic-name order, each with the members that may
	// take it.
	var parts []sharePart
	eligible := map[sharePart][]string{}
	for _, name := range sortedTopicNames(topics) {
		t := topics[name]
		var who []string
		for _, id := range members {
			if slices.Contains(subs[id], name) {
				who = append(who, id)
			}
		}
		if len(who) == 0 {
			continue
		}
		for p := int32(0); p < t.partitions; p++ {
			sp := sharePart{t.id, p}
			parts = append(parts, sp)
			eligible[sp] = who
		}
	}
	active := 0
	canTake := map[string]bool{}
	for _, who := range eligible {
		for _, id := range who {
			if !canTake[id] {
				canTake[id] = true
				active++
			}
		}
	}
	if len(parts) == 0 {
		return out
	}
	load := map[string]int{}
	holders := map[sharePart]int{}
	give := func(id string, sp sharePart) {
		out[id] = out[id].add(sp.topic, sp.p)
		load[id]++
		holders[sp]++
	}
	// least picks the member of cands with the lowest load (ties: the
	// first in cands' sorted order); ok false if cands is empty.
	least := func(cands []string, under int) (string, bool) {
		best, found := "", false
		for _, id := range cands {
			if under > 0 && load[id] >= under {
				continue
			}
			if !found || load[id] < load[best] {
				best, found = id, true
			}
		}
		return best, found
	}
	quota := (len(parts) + active - 1) / active

	// 1. One member per partition: a previous holder first, while under
	// the quota; then whoever has the least.
	var rest []sharePart
	for _, sp := range parts {
		var had []string
		for _, id := range eligible[sp] {
			if prev[id].has(sp.topic, sp.p) {
				had = append(had, id)
			}
		}
		if id, ok := least(had, quota); ok {
			give(id, sp)
			continue
		}
		rest = append(rest, sp)
	}
	for _, sp := range rest {
		if id, ok := least(eligible[sp], quota); ok {
			give(id, sp)
		} else if id, ok := least(eligible[sp], 0); ok {
			give(id, sp)
		}
	}
	// 2. Members left without a partition share one: the least shared of
	// those they may take, preferring one they had.
	for _, id := range members {
		if load[id] > 0 || !canTake[id] {
			continue
		}
		var best sharePart
		found, bestPrev := false, false
		for _, sp := range parts {
			if !slices.Contains(eligible[sp], id) {
				continue
			}
			had := prev[id].has(sp.topic, sp.p)
			switch {
			case !found, holders[sp] < holders[best], holders[sp] == holders[best] && had && !bestPrev:
				best, found, bestPrev = sp, true, had
			}
		}
		if found {
			give(id, best)
		}
	}
	return out
}
