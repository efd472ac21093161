package group

// Partition sets for the consumer protocol, keyed by topic id.

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// assignment maps a topic id to its partitions (numbersets.go).
type assignment = numberSets[[16]byte]

// topicsOf returns an assignment's topic ids in a stable order.
func topicsOf(a assignment) [][16]byte {
	return a.keys(func(x, y [16]byte) int { return slices.Compare(x[:], y[:]) })
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
