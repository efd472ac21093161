package group

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func streamsConfTopo(subs ...streamsSubtopology) *streamsTopology {
	return &streamsTopology{epoch: 1, subtopologies: subs}
}

func streamsConfTopic(name string, partitions int32) streamsTopicInfo {
	return streamsTopicInfo{name: name, partitions: partitions}
}

func streamsConfCounts(topics map[string]int32) streamsTopicCount {
	return func(name string) (int32, bool) {
		n, ok := topics[name]
		return n, ok
	}
}

func streamsConfCreate(name string, partitions int32) streamsTopicToCreate {
	return streamsTopicToCreate{name: name, partitions: partitions, replicationFactor: -1}
}

// streamsConfWordCount: "input" → 0 → app-words-repartition → 1 (stateful).
func streamsConfWordCount() *streamsTopology {
	return streamsConfTopo(
		streamsSubtopology{
			id:                    "0",
			sourceTopics:          []string{"input"},
			repartitionSinkTopics: []string{"app-words-repartition"},
		},
		streamsSubtopology{
			id:                      "1",
			repartitionSourceTopics: []streamsTopicInfo{streamsConfTopic("app-words-repartition", 0)},
			stateChangelogTopics:    []streamsTopicInfo{streamsConfTopic("app-counts-changelog", 0)},
		},
	)
}

func TestStreamsConfigure(t *testing.T) {
	chainForward := streamsConfTopo(
		streamsSubtopology{id: "0", sourceTopics: []string{"in"}, repartitionSinkTopics: []string{"r1"}},
		streamsSubtopology{id: "1", repartitionSourceTopics: []streamsTopicInfo{streamsConfTopic("r1", 0)}, repartitionSinkTopics: []string{"r2"}},
		streamsSubtopology{id: "2", repartitionSourceTopics: []streamsTopicInfo{streamsConfTopic("r2", 0)}, stateChangelogTopics: []streamsTopicInfo{streamsConfTopic("c2", 0)}},
	)
	// The same chain with data flowing against the id order, which needs
	// more than one pass.
	chainBackward := streamsConfTopo(
		streamsSubtopology{id: "0", repartitionSourceTopics: []streamsTopicInfo{streamsConfTopic("r2", 0)}},
		streamsSubtopology{id: "1", repartitionSourceTopics: []streamsTopicInfo{streamsConfTopic("r1", 0)}, repartitionSinkTopics: []string{"r2"}},
		streamsSubtopology{id: "2", sourceTopics: []string{"in"}, repartitionSinkTopics: []string{"r1"}},
	)

	tests := []struct {
		name   string
		topo   *streamsTopology
		topics map[string]int32
		want   streamsConfigured
	}{
		{
			name:   "word count: internal topics to create",
			topo:   streamsConfWordCount(),
			topics: map[string]int32{"input": 3},
			want: streamsConfigured{
				status: streamsStatusMissingInternalTopics,
				detail: "Internal topics are missing: app-counts-changelog, app-words-repartition",
				create: []streamsTopicToCreate{
					streamsConfCreate("app-counts-changelog", 3),
					streamsConfCreate("app-words-repartition", 3),
				},
			},
		},
		{
			name:   "word count: one internal topic still missing",
			topo:   streamsConfWordCount(),
			topics: map[string]int32{"input": 3, "app-words-repartition": 3},
			want: streamsConfigured{
				status: streamsStatusMissingInternalTopics,
				detail: "Internal topics are missing: app-counts-changelog",
				create: []streamsTopicToCreate{streamsConfCreate("app-counts-changelog", 3)},
			},
		},
		{
			name:   "word count: ready",
			topo:   streamsConfWordCount(),
			topics: map[string]int32{"input": 3, "app-words-repartition": 3, "app-counts-changelog": 3},
			want: streamsConfigured{
				ready:   true,
				tasks:   map[string]int32{"0": 3, "1": 3},
				sources: map[string][]string{"0": {"input"}, "1": {"app-words-repartition"}},
			},
		},
		{
			name:   "missing source topic",
			topo:   streamsConfWordCount(),
			topics: map[string]int32{"app-words-repartition": 3},
			want: streamsConfigured{
				status: streamsStatusMissingSourceTopics,
				detail: "Source topics input are missing.",
			},
		},
		{
			name: "missing source topics summarized",
			topo: streamsConfTopo(
				streamsSubtopology{id: "0", sourceTopics: []string{"e", "d", "c"}},
				streamsSubtopology{id: "1", sourceTopics: []string{"b", "a", "c", "ok"}},
			),
			topics: map[string]int32{"ok": 1},
			want: streamsConfigured{
				status: streamsStatusMissingSourceTopics,
				detail: "Source topics a, b, c and 2 additional topics are missing.",
			},
		},
		{
			name: "missing internal topics summarized",
			topo: streamsConfTopo(streamsSubtopology{
				id:                   "0",
				sourceTopics:         []string{"in"},
				stateChangelogTopics: []streamsTopicInfo{streamsConfTopic("s4", 0), streamsConfTopic("s2", 0), streamsConfTopic("s1", 0), streamsConfTopic("s3", 0), streamsConfTopic("s5", 0)},
			}),
			topics: map[string]int32{"in": 2, "s5": 2},
			want: streamsConfigured{
				status: streamsStatusMissingInternalTopics,
				detail: "Internal topics are missing: s1, s2, s3 and 1 additional topics",
				create: []streamsTopicToCreate{
					streamsConfCreate("s1", 2), streamsConfCreate("s2", 2), streamsConfCreate("s3", 2), streamsConfCreate("s4", 2),
				},
			},
		},
		{
			name:   "existing internal topic with the wrong count",
			topo:   streamsConfWordCount(),
			topics: map[string]int32{"input": 3, "app-words-repartition": 3, "app-counts-changelog": 2},
			want: streamsConfigured{
				status: streamsStatusIncorrectlyPartitioned,
				detail: "Existing internal topic app-counts-changelog has 2 partitions, but 3 are expected.",
			},
		},
		{
			name:   "existing internal topics with wrong counts, others missing",
			topo:   streamsConfWordCount(),
			topics: map[string]int32{"input": 6, "app-words-repartition": 3},
			want: streamsConfigured{
				status: streamsStatusIncorrectlyPartitioned,
				detail: "Existing internal topic app-words-repartition has 3 partitions, but 6 are expected.",
			},
		},
		{
			name: "several wrong internal topics",
			topo: streamsConfTopo(streamsSubtopology{
				id:                   "0",
				sourceTopics:         []string{"in"},
				stateChangelogTopics: []streamsTopicInfo{streamsConfTopic("a", 0), streamsConfTopic("b", 0)},
			}),
			topics: map[string]int32{"in": 2, "a": 1, "b": 3},
			want: streamsConfigured{
				status: streamsStatusIncorrectlyPartitioned,
				detail: "Existing internal topics have unexpected partition counts: a (expected 2, found 1), b (expected 2, found 3).",
			},
		},
		{
			name: "copartitioned user topics with different counts",
			topo: streamsConfTopo(streamsSubtopology{
				id:                "0",
				sourceTopics:      []string{"left", "right"},
				copartitionGroups: []streamsCopartitionGroup{{sourceTopics: []int16{0, 1}}},
			}),
			topics: map[string]int32{"left": 2, "right": 3},
			want: streamsConfigured{
				status: streamsStatusIncorrectlyPartitioned,
				detail: "Copartitioned topics must have the same number of partitions, but they have left (2), right (3).",
			},
		},
		{
			name: "user topics with different counts, not copartitioned: max",
			topo: streamsConfTopo(streamsSubtopology{
				id:           "0",
				sourceTopics: []string{"left", "right"},
			}),
			topics: map[string]int32{"left": 2, "right": 3},
			want: streamsConfigured{
				ready:   true,
				tasks:   map[string]int32{"0": 3},
				sources: map[string][]string{"0": {"left", "right"}},
			},
		},
		{
			name: "flexible repartition topic takes its copartitioned user topic's count",
			topo: streamsConfTopo(
				streamsSubtopology{id: "0", sourceTopics: []string{"small"}, repartitionSinkTopics: []string{"rekeyed"}},
				streamsSubtopology{
					id:                      "1",
					sourceTopics:            []string{"big"},
					repartitionSourceTopics: []streamsTopicInfo{streamsConfTopic("rekeyed", 0)},
					stateChangelogTopics:    []streamsTopicInfo{streamsConfTopic("join-store-changelog", 0)},
					copartitionGroups:       []streamsCopartitionGroup{{sourceTopics: []int16{0}, repartitionSourceTopics: []int16{0}}},
				},
			),
			topics: map[string]int32{"small": 2, "big": 4},
			want: streamsConfigured{
				status: streamsStatusMissingInternalTopics,
				detail: "Internal topics are missing: join-store-changelog, rekeyed",
				create: []streamsTopicToCreate{streamsConfCreate("join-store-changelog", 4), streamsConfCreate("rekeyed", 4)},
			},
		},
		{
			name: "flexible repartition topic copartitioned with a smaller user topic is lowered",
			topo: streamsConfTopo(
				streamsSubtopology{id: "0", sourceTopics: []string{"big"}, repartitionSinkTopics: []string{"rekeyed"}},
				streamsSubtopology{
					id:                      "1",
					sourceTopics:            []string{"small"},
					repartitionSourceTopics: []streamsTopicInfo{streamsConfTopic("rekeyed", 0)},
					copartitionGroups:       []streamsCopartitionGroup{{sourceTopics: []int16{0}, repartitionSourceTopics: []int16{0}}},
				},
			),
			topics: map[string]int32{"small": 2, "big": 8, "rekeyed": 2},
			want: streamsConfigured{
				ready:   true,
				tasks:   map[string]int32{"0": 8, "1": 2},
				sources: map[string][]string{"0": {"big"}, "1": {"small", "rekeyed"}},
			},
		},
		{
			name: "fixed repartition topic disagreeing with its copartitioned user topic",
			topo: streamsConfTopo(
				streamsSubtopology{id: "0", sourceTopics: []string{"a"}, repartitionSinkTopics: []string{"r"}},
				streamsSubtopology{
					id:                      "1",
					sourceTopics:            []string{"b"},
					repartitionSourceTopics: []streamsTopicInfo{streamsConfTopic("r", 5)},
					copartitionGroups:       []streamsCopartitionGroup{{sourceTopics: []int16{0}, repartitionSourceTopics: []int16{0}}},
				},
			),
			topics: map[string]int32{"a": 2, "b": 4},
			want: streamsConfigured{
				status: streamsStatusIncorrectlyPartitioned,
				detail: "Repartition topic r has 5 partitions, but it is copartitioned with source topics that have 4.",
			},
		},
		{
			name: "copartitioned flexible repartition topics take the largest count",
			topo: streamsConfTopo(
				streamsSubtopology{id: "0", sourceTopics: []string{"a"}, repartitionSinkTopics: []string{"ra"}},
				streamsSubtopology{id: "1", sourceTopics: []string{"b"}, repartitionSinkTopics: []string{"rb"}},
				streamsSubtopology{
					id:                      "2",
					repartitionSourceTopics: []streamsTopicInfo{streamsConfTopic("ra", 0), streamsConfTopic("rb", 0)},
					copartitionGroups:       []streamsCopartitionGroup{{repartitionSourceTopics: []int16{0, 1}}},
				},
			),
			topics: map[string]int32{"a": 2, "b": 6},
			want: streamsConfigured{
				status: streamsStatusMissingInternalTopics,
				detail: "Internal topics are missing: ra, rb",
				create: []streamsTopicToCreate{streamsConfCreate("ra", 6), streamsConfCreate("rb", 6)},
			},
		},
		{
			name: "copartitioned repartition topics follow the fixed one",
			topo: streamsConfTopo(
				streamsSubtopology{id: "0", sourceTopics: []string{"a"}, repartitionSinkTopics: []string{"ra", "rb"}},
				streamsSubtopology{
					id: "1",
					repartitionSourceTopics: []streamsTopicInfo{
						{name: "ra", partitions: 0, replicationFactor: 3, configs: []streamsKV{{"cleanup.policy", "delete"}}},
						{name: "rb", partitions: 7},
					},
					copartitionGroups: []streamsCopartitionGroup{{repartitionSourceTopics: []int16{0, 1}}},
				},
			),
			topics: map[string]int32{"a": 2},
			want: streamsConfigured{
				status: streamsStatusMissingInternalTopics,
				detail: "Internal topics are missing: ra, rb",
				create: []streamsTopicToCreate{
					{name: "ra", partitions: 7, replicationFactor: 3, configs: []streamsKV{{"cleanup.policy", "delete"}}},
					streamsConfCreate("rb", 7),
				},
			},
		},
		{
			name: "copartitioned fixed repartition topics disagreeing",
			topo: streamsConfTopo(
				streamsSubtopology{id: "0", sourceTopics: []string{"a"}, repartitionSinkTopics: []string{"ra", "rb"}},
				streamsSubtopology{
					id:                      "1",
					repartitionSourceTopics: []streamsTopicInfo{streamsConfTopic("ra", 3), streamsConfTopic("rb", 7)},
					copartitionGroups:       []streamsCopartitionGroup{{repartitionSourceTopics: []int16{0, 1}}},
				},
			),
			topics: map[string]int32{"a": 2},
			want: streamsConfigured{
				status: streamsStatusIncorrectlyPartitioned,
				detail: "Copartitioned repartition topics must have the same number of partitions, but they have ra (3), rb (7).",
			},
		},
		{
			name:   "chained repartition topics",
			topo:   chainForward,
			topics: map[string]int32{"in": 5},
			want: streamsConfigured{
				status: streamsStatusMissingInternalTopics,
				detail: "Internal topics are missing: c2, r1, r2",
				create: []streamsTopicToCreate{streamsConfCreate("c2", 5), streamsConfCreate("r1", 5), streamsConfCreate("r2", 5)},
			},
		},
		{
			name:   "chained repartition topics: ready",
			topo:   chainForward,
			topics: map[string]int32{"in": 5, "r1": 5, "r2": 5, "c2": 5},
			want: streamsConfigured{
				ready:   true,
				tasks:   map[string]int32{"0": 5, "1": 5, "2": 5},
				sources: map[string][]string{"0": {"in"}, "1": {"r1"}, "2": {"r2"}},
			},
		},
		{
			name:   "chained repartition topics against the id order",
			topo:   chainBackward,
			topics: map[string]int32{"in": 5},
			want: streamsConfigured{
				status: streamsStatusMissingInternalTopics,
				detail: "Internal topics are missing: r1, r2",
				create: []streamsTopicToCreate{streamsConfCreate("r1", 5), streamsConfCreate("r2", 5)},
			},
		},
		{
			name: "repartition topic takes the max over writers and their inputs",
			topo: streamsConfTopo(
				streamsSubtopology{id: "0", sourceTopics: []string{"a"}, repartitionSourceTopics: []streamsTopicInfo{streamsConfTopic("up", 0)}, repartitionSinkTopics: []string{"r"}},
				streamsSubtopology{id: "1", sourceTopics: []string{"b"}, repartitionSinkTopics: []string{"r"}},
				streamsSubtopology{id: "2", repartitionSourceTopics: []streamsTopicInfo{streamsConfTopic("r", 0)}},
				streamsSubtopology{id: "3", sourceTopics: []string{"c"}, repartitionSinkTopics: []string{"up"}},
			),
			topics: map[string]int32{"a": 1, "b": 3, "c": 9},
			want: streamsConfigured{
				status: streamsStatusMissingInternalTopics,
				detail: "Internal topics are missing: r, up",
				create: []streamsTopicToCreate{streamsConfCreate("r", 9), streamsConfCreate("up", 9)},
			},
		},
		{
			name: "cycle fed by a source topic is decided",
			topo: streamsConfTopo(
				streamsSubtopology{id: "0", sourceTopics: []string{"in"}, repartitionSourceTopics: []streamsTopicInfo{streamsConfTopic("r2", 0)}, repartitionSinkTopics: []string{"r1"}},
				streamsSubtopology{id: "1", repartitionSourceTopics: []streamsTopicInfo{streamsConfTopic("r1", 0)}, repartitionSinkTopics: []string{"r2"}},
			),
			topics: map[string]int32{"in": 3},
			want: streamsConfigured{
				status: streamsStatusMissingInternalTopics,
				detail: "Internal topics are missing: r1, r2",
				create: []streamsTopicToCreate{streamsConfCreate("r1", 3), streamsConfCreate("r2", 3)},
			},
		},
		{
			name: "cycle without fixed counts or source topics",
			topo: streamsConfTopo(
				streamsSubtopology{id: "0", sourceTopics: []string{"in"}},
				streamsSubtopology{id: "1", repartitionSourceTopics: []streamsTopicInfo{streamsConfTopic("r2", 0)}, repartitionSinkTopics: []string{"r1"}},
				streamsSubtopology{id: "2", repartitionSourceTopics: []streamsTopicInfo{streamsConfTopic("r1", 0)}, repartitionSinkTopics: []string{"r2"}},
			),
			topics: map[string]int32{"in": 3},
			want: streamsConfigured{
				status:  streamsStatusMissingSourceTopics,
				detail:  "Invalid topology: the partition counts of repartition topics r1, r2 cannot be decided: they are only fed by each other (a cycle with no source topic).",
				invalid: true,
			},
		},
		{
			name: "repartition topic nobody writes",
			topo: streamsConfTopo(
				streamsSubtopology{id: "0", repartitionSourceTopics: []streamsTopicInfo{streamsConfTopic("orphan", 0)}, repartitionSinkTopics: []string{"next"}},
				streamsSubtopology{id: "1", repartitionSourceTopics: []streamsTopicInfo{streamsConfTopic("next", 0)}},
			),
			want: streamsConfigured{
				status:  streamsStatusMissingSourceTopics,
				detail:  "Invalid topology: no subtopology writes repartition topics orphan, so their partition counts cannot be decided.",
				invalid: true,
			},
		},
		{
			name: "fixed repartition topic nobody writes is fine",
			topo: streamsConfTopo(
				streamsSubtopology{id: "0", repartitionSourceTopics: []streamsTopicInfo{streamsConfTopic("fixed", 4)}},
			),
			topics: map[string]int32{"fixed": 4},
			want: streamsConfigured{
				ready:   true,
				tasks:   map[string]int32{"0": 4},
				sources: map[string][]string{"0": {"fixed"}},
			},
		},
		{
			name: "repartition topic declared twice with different fixed counts",
			topo: streamsConfTopo(
				streamsSubtopology{id: "0", repartitionSourceTopics: []streamsTopicInfo{streamsConfTopic("r", 3)}},
				streamsSubtopology{id: "1", repartitionSourceTopics: []streamsTopicInfo{streamsConfTopic("r", 5)}},
			),
			topics: map[string]int32{"r": 3},
			want: streamsConfigured{
				status:  streamsStatusMissingSourceTopics,
				detail:  "Invalid topology: repartition topic r is declared with both 3 and 5 partitions.",
				invalid: true,
			},
		},
		{
			name: "repartition topic declared twice, fixed once",
			topo: streamsConfTopo(
				streamsSubtopology{id: "0", repartitionSourceTopics: []streamsTopicInfo{streamsConfTopic("r", 0)}},
				streamsSubtopology{id: "1", repartitionSourceTopics: []streamsTopicInfo{streamsConfTopic("r", 5)}},
			),
			topics: map[string]int32{"r": 5},
			want: streamsConfigured{
				ready:   true,
				tasks:   map[string]int32{"0": 5, "1": 5},
				sources: map[string][]string{"0": {"r"}, "1": {"r"}},
			},
		},
		{
			name: "subtopology without source topics",
			topo: streamsConfTopo(
				streamsSubtopology{id: "0", sourceTopics: []string{"in"}},
				streamsSubtopology{id: "1", stateChangelogTopics: []streamsTopicInfo{streamsConfTopic("c", 0)}},
			),
			topics: map[string]int32{"in": 1},
			want: streamsConfigured{
				status:  streamsStatusMissingSourceTopics,
				detail:  "Invalid topology: subtopology 1 has no source topics.",
				invalid: true,
			},
		},
		{
			name: "copartition group index out of range",
			topo: streamsConfTopo(streamsSubtopology{
				id:                "0",
				sourceTopics:      []string{"in"},
				copartitionGroups: []streamsCopartitionGroup{{sourceTopics: []int16{0, 1}}},
			}),
			topics: map[string]int32{"in": 1},
			want: streamsConfigured{
				status:  streamsStatusMissingSourceTopics,
				detail:  "Invalid topology: a copartition group of subtopology 0 refers to source topic 1, but it has 1.",
				invalid: true,
			},
		},
		{
			name: "fixed changelog count is kept",
			topo: streamsConfTopo(streamsSubtopology{
				id:                   "0",
				sourceTopics:         []string{"in"},
				stateChangelogTopics: []streamsTopicInfo{{name: "c", partitions: 2, replicationFactor: -1}},
			}),
			topics: map[string]int32{"in": 3},
			want: streamsConfigured{
				status: streamsStatusMissingInternalTopics,
				detail: "Internal topics are missing: c",
				create: []streamsTopicToCreate{streamsConfCreate("c", 2)},
			},
		},
		{
			name: "empty topology",
			topo: streamsConfTopo(),
			want: streamsConfigured{ready: true, tasks: map[string]int32{}, sources: map[string][]string{}},
		},
		{
			name: "no topology",
			want: streamsConfigured{status: streamsStatusMissingSourceTopics, detail: "Invalid topology: the group has no topology."},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done := make(chan streamsConfigured, 1)
			go func() { done <- configureStreamsTopology(tt.topo, streamsConfCounts(tt.topics)) }()
			var got streamsConfigured
			select {
			case got = <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("configureStreamsTopology did not return")
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
			if got.ready != (got.tasks != nil) || got.ready != (got.sources != nil) {
				t.Errorf("tasks/sources must be set exactly when ready: %+v", got)
			}
			if got.ready && (got.status != 0 || got.detail != "" || got.create != nil) {
				t.Errorf("a ready result carries no status: %+v", got)
			}
			if len(got.create) > 0 && got.status != streamsStatusMissingInternalTopics {
				t.Errorf("topics to create with status %d", got.status)
			}
		})
	}
}

// TestStreamsConfigureNilCount: no broker view means every source is missing.
func TestStreamsConfigureNilCount(t *testing.T) {
	got := configureStreamsTopology(streamsConfWordCount(), nil)
	if got.ready || got.status != streamsStatusMissingSourceTopics || !strings.Contains(got.detail, "input") {
		t.Fatalf("got %+v", got)
	}
}

// TestStreamsConfigureDoesNotModifyTopology: configuring twice gives the
// same answer and leaves the topology as it was.
func TestStreamsConfigureDoesNotModifyTopology(t *testing.T) {
	topo := streamsConfWordCount()
	before := streamsConfWordCount()
	counts := streamsConfCounts(map[string]int32{"input": 3})
	a := configureStreamsTopology(topo, counts)
	b := configureStreamsTopology(topo, counts)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("differing results: %+v vs %+v", a, b)
	}
	if !reflect.DeepEqual(topo, before) {
		t.Fatalf("topology modified: %+v", topo)
	}
	a.create[0].partitions = 99
	if c := configureStreamsTopology(topo, counts); c.create[0].partitions != 3 {
		t.Fatalf("results share state: %+v", c)
	}
}
