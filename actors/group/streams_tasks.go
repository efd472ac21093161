package group

// Task sets and topologies of KIP-1071 streams groups.

import (
	"slices"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// streamsTasks maps a subtopology id to its task (partition) numbers
// (numbersets.go).
type streamsTasks = numberSets[string]

// subtopologiesOf returns the subtopology ids holding tasks, sorted.
func subtopologiesOf(a streamsTasks) []string { return a.keys(strings.Compare) }

// streamsTasksFrom reads a request's task list (nil stays nil).
func streamsTasksFrom(ids []kmsg.TaskIDs) streamsTasks {
	if ids == nil {
		return nil
	}
	out := streamsTasks{}
	for _, t := range ids {
		for _, p := range t.Partitions {
			out = out.add(t.SubtopologyID, p)
		}
	}
	return out
}

// tasksWire returns the tasks as a response's task list (never nil).
func tasksWire(a streamsTasks) []kmsg.TaskIDs {
	out := []kmsg.TaskIDs{}
	for _, s := range subtopologiesOf(a) {
		out = append(out, kmsg.TaskIDs{SubtopologyID: s, Partitions: slices.Clone(a[s])})
	}
	return out
}

// streamsTopology is a streams group's topology, as the member that
// initialized the group declared it.
type streamsTopology struct {
	epoch         int32
	subtopologies []streamsSubtopology // sorted by id, ids unique
}

type streamsSubtopology struct {
	id string
	// sourceTopics are the user topics the subtopology reads.
	sourceTopics []string
	// repartitionSinkTopics are repartition topics it writes (read by
	// other subtopologies as their repartition sources).
	repartitionSinkTopics []string
	// repartitionSourceTopics are internal topics it reads; a zero
	// partition count is decided by the broker.
	repartitionSourceTopics []streamsTopicInfo
	// stateChangelogTopics back its state stores: a subtopology with any
	// is stateful. A zero partition count means one per task.
	stateChangelogTopics []streamsTopicInfo
	// copartitionGroups are sets of this subtopology's sources that must
	// have the same partition count.
	copartitionGroups []streamsCopartitionGroup
}

// streamsTopicInfo is an internal topic of the topology.
type streamsTopicInfo struct {
	name              string
	partitions        int32 // 0: decided by the broker
	replicationFactor int16 // 0: the broker's default
	configs           []streamsKV
}

type streamsKV struct{ key, value string }

// streamsCopartitionGroup indexes into its subtopology's sourceTopics and
// repartitionSourceTopics.
type streamsCopartitionGroup struct {
	sourceTopics            []int16
	repartitionSourceTopics []int16
}

// stateful reports whether the subtopology has state stores (standby
// tasks are only placed for those).
func (s *streamsSubtopology) stateful() bool { return len(s.stateChangelogTopics) > 0 }

// streamsTopologyFrom converts a heartbeat's topology; subtopologies are
// sorted by id. The caller checked there is no regex.
func streamsTopologyFrom(t *kmsg.StreamsGroupHeartbeatRequestTopology) *streamsTopology {
	out := &streamsTopology{epoch: t.Epoch}
	info := func(ts []kmsg.TopicInfo) []streamsTopicInfo {
		var out []streamsTopicInfo
		for _, ti := range ts {
			i := streamsTopicInfo{name: ti.Topic, partitions: ti.NumPartitions, replicationFactor: ti.ReplicationFactor}
			for _, c := range ti.Configs {
				i.configs = append(i.configs, streamsKV{c.Key, c.Value})
			}
			sort.Slice(i.configs, func(a, b int) bool { return i.configs[a].key < i.configs[b].key })
			out = append(out, i)
		}
		return out
	}
	for _, s := range t.Subtopologies {
		st := streamsSubtopology{
			id:                      s.SubtopologyID,
			sourceTopics:            slices.Clone(s.SourceTopics),
			repartitionSinkTopics:   slices.Clone(s.RepartitionSinkTopics),
			repartitionSourceTopics: info(s.RepartitionSourceTopics),
			stateChangelogTopics:    info(s.StateChangelogTopics),
		}
		for _, g := range s.CopartitionGroups {
			st.copartitionGroups = append(st.copartitionGroups, streamsCopartitionGroup{
				sourceTopics:            slices.Clone(g.SourceTopics),
				repartitionSourceTopics: slices.Clone(g.RepartitionSourceTopics),
			})
		}
		out.subtopologies = append(out.subtopologies, st)
	}
	sort.Slice(out.subtopologies, func(a, b int) bool { return out.subtopologies[a].id < out.subtopologies[b].id })
	return out
}
