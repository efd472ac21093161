package group

// Topic configuration of KIP-1071 streams groups: given a topology and the
// broker's topics, decide how many partitions every internal topic needs,
// check the topics that exist, and list the ones to create. This is the
// broker-side step Kafka calls InternalTopicManager.configureTopics; it is a
// pure function of its inputs.
//
// The steps, in order (the first failing one decides the outcome):
//
//  1. every user source topic must exist (else MissingSourceTopics);
//  2. the topology must be well formed: each subtopology reads something,
//     copartition groups index existing sources, a repartition topic declared
//     twice has one fixed count (else MissingSourceTopics, see below);
//  3. repartition topics without a fixed count get the largest partition
//     count among the inputs of the subtopologies writing them, repeated
//     until nothing changes; one that still has no count is an error;
//  4. copartition groups are enforced, which may change (flexible) or reject
//     (fixed, or user topics) repartition topic counts;
//  5. a subtopology's task count is the largest count among its inputs, and
//     its changelog topics without a fixed count get one partition per task;
//  6. existing internal topics must have the decided count (else
//     IncorrectlyPartitioned); missing ones are returned to be created
//     (MissingInternalTopics); otherwise the topology is ready.
//
// Kafka answers a structurally broken topology (a subtopology without
// inputs, a repartition topic whose count cannot be decided) with the
// STREAMS_INVALID_TOPOLOGY error instead of a status; here such a topology
// is reported as MissingSourceTopics with a detail starting "Invalid
// topology:".

import (
	"fmt"
	"slices"
	"strings"
)

// Status codes of StreamsGroupHeartbeatResponse.Status (Kafka's values).
const (
	streamsStatusStaleTopology          int8 = 0
	streamsStatusMissingSourceTopics    int8 = 1
	streamsStatusIncorrectlyPartitioned int8 = 2
	streamsStatusMissingInternalTopics  int8 = 3
	streamsStatusShutdownApplication    int8 = 4
	streamsStatusAssignmentDelayed      int8 = 5
)

// streamsTopicCount returns a topic's partition count if it exists on the broker.
type streamsTopicCount func(topic string) (partitions int32, ok bool)

// streamsTopicToCreate is an internal topic the group needs that does not
// exist yet.
type streamsTopicToCreate struct {
	name              string
	partitions        int32
	replicationFactor int16 // 0 or -1: broker default (pass -1)
	configs           []streamsKV
}

// streamsConfigured is the outcome of configuring a topology against the
// broker's topics.
type streamsConfigured struct {
	// tasks is each subtopology's task count; set (non-nil) only when ready.
	tasks map[string]int32
	// ready: every source and internal topic exists with the expected
	// partitions; tasks can be assigned.
	ready bool
	// status/detail: set when !ready (status is one of the codes above,
	// detail a human message naming up to 3 topics then "and N additional
	// topics").
	status int8
	detail string
	// create lists the internal topics that must be created (with their
	// decided partition counts), sorted by name; only when the partition
	// counts could be decided and the only problem is that internal topics
	// are missing (status MissingInternalTopics).
	create []streamsTopicToCreate
	// sources maps each subtopology to the topics whose partition p feeds
	// its task p: its source topics then its repartition source topics (for
	// interactive-query endpoint mapping). Set when ready.
	sources map[string][]string
	// invalid: the topology itself cannot be configured whatever topics
	// exist (Kafka's STREAMS_INVALID_TOPOLOGY); status and detail say why.
	invalid bool
}

// streamsConfFailure is why a configuration stopped.
type streamsConfFailure struct {
	status  int8
	detail  string
	invalid bool
}

func streamsConfInvalid(format string, args ...any) *streamsConfFailure {
	return &streamsConfFailure{streamsStatusMissingSourceTopics, "Invalid topology: " + fmt.Sprintf(format, args...), true}
}

func streamsConfIncorrect(format string, args ...any) *streamsConfFailure {
	return &streamsConfFailure{streamsStatusIncorrectlyPartitioned, fmt.Sprintf(format, args...), false}
}

// streamsConfState is the working state of one configuration.
type streamsConfState struct {
	t     *streamsTopology
	count streamsTopicCount
	// repartition holds each repartition source topic's first declaration.
	repartition map[string]streamsTopicInfo
	// decided holds the partition counts decided (or fixed) so far for
	// internal topics.
	decided map[string]int32
}

func configureStreamsTopology(t *streamsTopology, count streamsTopicCount) streamsConfigured {
	if t == nil {
		return streamsConfigured{status: streamsStatusMissingSourceTopics, detail: "Invalid topology: the group has no topology."}
	}
	st := &streamsConfState{t: t, count: count, repartition: map[string]streamsTopicInfo{}, decided: map[string]int32{}}
	fail := func(f *streamsConfFailure) streamsConfigured {
		return streamsConfigured{status: f.status, detail: f.detail, invalid: f.invalid}
	}
	if f := st.checkSources(); f != nil {
		return fail(f)
	}
	if f := st.checkShape(); f != nil {
		return fail(f)
	}
	if f := st.decideRepartition(); f != nil {
		return fail(f)
	}
	if f := st.enforceCopartitioning(); f != nil {
		return fail(f)
	}
	tasks := st.decideTasksAndChangelogs()
	create, f := st.internalTopics()
	if f != nil {
		return fail(f)
	}
	if len(create) > 0 {
		names := make([]string, len(create))
		for i, c := range create {
			names[i] = c.name
		}
		return streamsConfigured{
			status: streamsStatusMissingInternalTopics,
			detail: "Internal topics are missing: " + streamsConfSummary(names),
			create: create,
		}
	}
	sources := make(map[string][]string, len(t.subtopologies))
	for i := range t.subtopologies {
		s := &t.subtopologies[i]
		var in []string
		for _, name := range s.sourceTopics {
			if !slices.Contains(in, name) {
				in = append(in, name)
			}
		}
		for _, r := range s.repartitionSourceTopics {
			if !slices.Contains(in, r.name) {
				in = append(in, r.name)
			}
		}
		sources[s.id] = in
	}
	return streamsConfigured{tasks: tasks, ready: true, sources: sources}
}

// existing returns a topic's partition count on the broker; a topic
// reported with no partitions counts as absent.
func (st *streamsConfState) existing(name string) (int32, bool) {
	if st.count == nil {
		return 0, false
	}
	n, ok := st.count(name)
	if !ok || n <= 0 {
		return 0, false
	}
	return n, true
}

// partitions is a topic's count as far as it is known: the broker's if the
// topic exists (even if it disagrees with the decision, which is reported
// later), else the decided one (0 if none).
func (st *streamsConfState) partitions(name string) int32 {
	if n, ok := st.existing(name); ok {
		return n
	}
	return st.decided[name]
}

// checkSources: every user source topic must exist.
func (st *streamsConfState) checkSources() *streamsConfFailure {
	var missing []string
	for i := range st.t.subtopologies {
		for _, name := range st.t.subtopologies[i].sourceTopics {
			if _, ok := st.existing(name); !ok {
				missing = append(missing, name)
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	slices.Sort(missing)
	missing = slices.Compact(missing)
	return &streamsConfFailure{streamsStatusMissingSourceTopics, "Source topics " + streamsConfSummary(missing) + " are missing.", false}
}

// checkShape rejects topologies the later steps cannot work with, and
// records the repartition topics' declarations and fixed counts.
func (st *streamsConfState) checkShape() *streamsConfFailure {
	for i := range st.t.subtopologies {
		s := &st.t.subtopologies[i]
		if len(s.sourceTopics) == 0 && len(s.repartitionSourceTopics) == 0 {
			return streamsConfInvalid("subtopology %s has no source topics.", s.id)
		}
		for _, g := range s.copartitionGroups {
			for _, x := range g.sourceTopics {
				if x < 0 || int(x) >= len(s.sourceTopics) {
					return streamsConfInvalid("a copartition group of subtopology %s refers to source topic %d, but it has %d.", s.id, x, len(s.sourceTopics))
				}
			}
			for _, x := range g.repartitionSourceTopics {
				if x < 0 || int(x) >= len(s.repartitionSourceTopics) {
					return streamsConfInvalid("a copartition group of subtopology %s refers to repartition source topic %d, but it has %d.", s.id, x, len(s.repartitionSourceTopics))
				}
			}
		}
		for _, r := range s.repartitionSourceTopics {
			first, seen := st.repartition[r.name]
			if !seen {
				st.repartition[r.name] = r
				if r.partitions > 0 {
					st.decided[r.name] = r.partitions
				}
				continue
			}
			if r.partitions > 0 && first.partitions > 0 && r.partitions != first.partitions {
				return streamsConfInvalid("repartition topic %s is declared with both %d and %d partitions.", r.name, first.partitions, r.partitions)
			}
			if first.partitions == 0 && r.partitions > 0 {
				first.partitions = r.partitions
				st.repartition[r.name] = first
				st.decided[r.name] = r.partitions
			}
		}
	}
	return nil
}

// fixed reports whether a repartition topic's count is set by the topology.
func (st *streamsConfState) fixed(name string) bool {
	r, ok := st.repartition[name]
	return ok && r.partitions > 0
}

// decideRepartition gives every flexible repartition topic the largest
// count among the inputs (user topics as they exist, repartition topics as
// decided so far) of any subtopology writing it, until a pass changes
// nothing. Counts only grow and are bounded by the largest input, so this
// ends, cycles included.
func (st *streamsConfState) decideRepartition() *streamsConfFailure {
	for changed := true; changed; {
		changed = false
		for i := range st.t.subtopologies {
			s := &st.t.subtopologies[i]
			var in int32
			for _, name := range s.sourceTopics {
				n, _ := st.existing(name)
				in = max(in, n)
			}
			for _, r := range s.repartitionSourceTopics {
				in = max(in, st.decided[r.name])
			}
			if in == 0 {
				continue
			}
			for _, sink := range s.repartitionSinkTopics {
				if _, ok := st.repartition[sink]; !ok || st.fixed(sink) {
					continue
				}
				if st.decided[sink] < in {
					st.decided[sink] = in
					changed = true
				}
			}
		}
	}

	var undecided []string
	for name := range st.repartition {
		if st.decided[name] == 0 {
			undecided = append(undecided, name)
		}
	}
	if len(undecided) == 0 {
		return nil
	}
	slices.Sort(undecided)
	written := map[string]bool{}
	for i := range st.t.subtopologies {
		for _, sink := range st.t.subtopologies[i].repartitionSinkTopics {
			written[sink] = true
		}
	}
	var unwritten []string
	for _, name := range undecided {
		if !written[name] {
			unwritten = append(unwritten, name)
		}
	}
	if len(unwritten) > 0 {
		return streamsConfInvalid("no subtopology writes repartition topics %s, so their partition counts cannot be decided.", streamsConfSummary(unwritten))
	}
	return streamsConfInvalid("the partition counts of repartition topics %s cannot be decided: they are only fed by each other (a cycle with no source topic).", streamsConfSummary(undecided))
}

// enforceCopartitioning makes each copartition group agree on a partition
// count. With user topics in the group, those must all have the same count,
// which the group's repartition topics take (fixed ones must already have
// it). With only repartition topics, fixed ones must agree and set the
// count; without fixed ones, the largest decided count is used. Groups are
// handled once each, subtopologies in id order, as Kafka does.
func (st *streamsConfState) enforceCopartitioning() *streamsConfFailure {
	for i := range st.t.subtopologies {
		s := &st.t.subtopologies[i]
		for _, g := range s.copartitionGroups {
			var users, reps []string
			for _, x := range g.sourceTopics {
				if name := s.sourceTopics[x]; !slices.Contains(users, name) {
					users = append(users, name)
				}
			}
			for _, x := range g.repartitionSourceTopics {
				if name := s.repartitionSourceTopics[x].name; !slices.Contains(reps, name) {
					reps = append(reps, name)
				}
			}
			slices.Sort(users)
			slices.Sort(reps)

			var n int32
			switch {
			case len(users) > 0:
				n = st.partitions(users[0])
				for _, u := range users[1:] {
					if st.partitions(u) != n {
						return streamsConfIncorrect("Copartitioned topics must have the same number of partitions, but they have %s.", st.countsList(users))
					}
				}
				for _, r := range reps {
					if st.fixed(r) && st.partitions(r) != n {
						return streamsConfIncorrect("Repartition topic %s has %d partitions, but it is copartitioned with source topics that have %d.", r, st.partitions(r), n)
					}
				}
			case len(reps) > 0:
				var fixed []string
				for _, r := range reps {
					if st.fixed(r) {
						fixed = append(fixed, r)
					}
				}
				if len(fixed) > 0 {
					n = st.partitions(fixed[0])
					for _, r := range fixed[1:] {
						if st.partitions(r) != n {
							return streamsConfIncorrect("Copartitioned repartition topics must have the same number of partitions, but they have %s.", st.countsList(fixed))
						}
					}
				} else {
					for _, r := range reps {
						n = max(n, st.partitions(r))
					}
				}
			default:
				continue
			}
			for _, r := range reps {
				if !st.fixed(r) {
					st.decided[r] = n
				}
			}
		}
	}
	return nil
}

// countsList describes topics with their partition counts, for details.
func (st *streamsConfState) countsList(names []string) string {
	items := make([]string, len(names))
	for i, name := range names {
		items[i] = fmt.Sprintf("%s (%d)", name, st.partitions(name))
	}
	return streamsConfSummary(items)
}

// decideTasksAndChangelogs returns each subtopology's task count and gives
// its flexible changelog topics that many partitions.
func (st *streamsConfState) decideTasksAndChangelogs() map[string]int32 {
	tasks := make(map[string]int32, len(st.t.subtopologies))
	for i := range st.t.subtopologies {
		s := &st.t.subtopologies[i]
		var n int32
		for _, name := range s.sourceTopics {
			n = max(n, st.partitions(name))
		}
		for _, r := range s.repartitionSourceTopics {
			n = max(n, st.partitions(r.name))
		}
		tasks[s.id] = n
		for _, c := range s.stateChangelogTopics {
			if c.partitions == 0 {
				st.decided[c.name] = n
			}
		}
	}
	return tasks
}

// internalTopics checks the internal topics that exist and returns those
// that do not, sorted by name.
func (st *streamsConfState) internalTopics() ([]streamsTopicToCreate, *streamsConfFailure) {
	want := map[string]streamsTopicToCreate{}
	add := func(ti streamsTopicInfo) {
		if _, ok := want[ti.name]; ok {
			return
		}
		n := ti.partitions
		if n == 0 {
			n = st.decided[ti.name]
		}
		rf := ti.replicationFactor
		if rf == 0 {
			rf = -1
		}
		want[ti.name] = streamsTopicToCreate{name: ti.name, partitions: n, replicationFactor: rf, configs: slices.Clone(ti.configs)}
	}
	for i := range st.t.subtopologies {
		s := &st.t.subtopologies[i]
		for _, r := range s.repartitionSourceTopics {
			add(r)
		}
		for _, c := range s.stateChangelogTopics {
			add(c)
		}
	}
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	slices.Sort(names)

	var create []streamsTopicToCreate
	var wrong []string
	for _, name := range names {
		if n, ok := st.existing(name); !ok {
			create = append(create, want[name])
		} else if n != want[name].partitions {
			wrong = append(wrong, name)
		}
	}
	switch len(wrong) {
	case 0:
	case 1:
		n, _ := st.existing(wrong[0])
		return nil, streamsConfIncorrect("Existing internal topic %s has %d partitions, but %d are expected.", wrong[0], n, want[wrong[0]].partitions)
	default:
		items := make([]string, len(wrong))
		for i, name := range wrong {
			n, _ := st.existing(name)
			items[i] = fmt.Sprintf("%s (expected %d, found %d)", name, want[name].partitions, n)
		}
		return nil, streamsConfIncorrect("Existing internal topics have unexpected partition counts: %s.", streamsConfSummary(items))
	}
	return create, nil
}

// streamsConfSummary joins up to three items and counts the rest.
func streamsConfSummary(items []string) string {
	if len(items) == 0 {
		return "<none>"
	}
	const shown = 3
	if len(items) <= shown {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d additional topics", strings.Join(items[:shown], ", "), len(items)-shown)
}
